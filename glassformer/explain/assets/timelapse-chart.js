// The time-lapse's charts (timelapse.js): curves of a measure over the training steps, a marker
// at the slider's step, a click on the chart picks the nearest step. Numbers read to 3
// significant digits ("—" where a value was not recorded).
import { el, svgEl } from "./dom.js";
import { fmt, sig as fmtSig } from "./numbers.js";

const W = 520,
  HT = 170,
  L = 46,
  R = 24,
  T = 10,
  B = 26; // a chart's size and margins, px

export const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : null); // "nan" -> none
export const sig = (x) => (x === null ? "—" : fmtSig(x));
export const steps = (n) => n.toLocaleString("en-US");
export const numEl = (x, cls) =>
  el("span", { class: cls || "num", text: sig(x), title: x === null ? "not recorded" : String(x) });

export function ticks(lo, hi, n) {
  const span = hi - lo || 1,
    raw = span / n,
    p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw);
  const out = [];
  for (let x = Math.ceil(lo / step) * step; x <= hi + 1e-9 * span; x += step)
    out.push(Number(x.toPrecision(12)));
  return out;
}
// spec: {title, sub, series: [{label, values: [number|null per frame], colour, width, dash,
// dots, faint}], range: [lo, hi] or null, ref: {value, label} or null}
export function chart(box, frames, spec, onPick, tip) {
  const xs = frames.map((f) => f.step),
    x0 = xs[0],
    x1 = xs[xs.length - 1] || 1;
  const all = spec.series.flatMap((s) => s.values).filter((v) => v !== null);
  if (spec.ref) all.push(spec.ref.value);
  let [lo, hi] = spec.range || [Math.min(...all), Math.max(...all)];
  if (!all.length) {
    lo = 0;
    hi = 1;
  }
  if (hi - lo < 1e-9) {
    lo -= 0.5;
    hi += 0.5;
  }
  if (!spec.range) {
    const pad = 0.06 * (hi - lo);
    lo -= pad;
    hi += pad;
  }
  const X = (s) => L + (x1 === x0 ? 0 : (s - x0) / (x1 - x0)) * (W - L - R);
  const Y = (v) => T + ((hi - v) / (hi - lo)) * (HT - T - B);
  const svg = svgEl("svg", {
    class: "tl-plot",
    viewBox: "0 0 " + W + " " + HT,
    width: W,
    height: HT,
  });
  for (const t of ticks(lo, hi, 4)) {
    svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: Y(t), y2: Y(t) }));
    svg.append(svgEl("text", { x: L - 5, y: Y(t) + 4, "text-anchor": "end" }, fmt(t, 3)));
  }
  for (const t of ticks(x0, x1, 5))
    svg.append(svgEl("text", { x: X(t), y: HT - 8, "text-anchor": "middle" }, steps(t)));
  svg.append(svgEl("text", { x: 2, y: HT - 8, class: "axis" }, "step"));
  if (spec.ref) {
    const ref = svgEl("line", {
      class: "ref",
      x1: L,
      x2: W - R,
      y1: Y(spec.ref.value),
      y2: Y(spec.ref.value),
    });
    ref.append(svgEl("title", {}, spec.ref.label));
    svg.append(ref);
  }
  const order = spec.series.slice().sort((a, b) => (b.faint ? 1 : 0) - (a.faint ? 1 : 0)); // faint first
  for (const s of order) {
    let d = "",
      pen = false;
    s.values.forEach((v, k) => {
      if (v === null) {
        pen = pen && !!s.join;
        return;
      } // join: a sparse series, drawn across its gaps
      d += (pen ? "L" : "M") + X(xs[k]).toFixed(1) + " " + Y(v).toFixed(1);
      pen = true;
    });
    const path = svgEl("path", {
      d,
      fill: "none",
      stroke: s.colour,
      "stroke-width": s.width || 1.6,
      class: s.faint ? "faint" : "",
    });
    if (s.dash) path.setAttribute("stroke-dasharray", s.dash);
    path.append(svgEl("title", {}, s.label));
    svg.append(path);
    if (s.dots)
      s.values.forEach((v, k) => {
        if (v !== null)
          svg.append(svgEl("circle", { cx: X(xs[k]), cy: Y(v), r: 2.2, fill: s.colour }));
      });
  }
  const marker = svgEl("line", { class: "tl-marker", x1: X(x0), x2: X(x0), y1: T, y2: HT - B });
  svg.append(marker);
  const dots = spec.series
    .filter((s) => !s.faint)
    .map((s) => {
      const c = svgEl("circle", { r: 3.6, fill: s.colour, class: "tl-at" });
      svg.append(c);
      return c;
    });
  const nearest = (e) => {
    const b = svg.getBoundingClientRect(),
      x = ((e.clientX - b.left) * W) / b.width;
    let k = 0;
    xs.forEach((s, i) => {
      if (Math.abs(X(s) - x) < Math.abs(X(xs[k]) - x)) k = i;
    });
    return k;
  };
  svg.addEventListener("mousemove", (e) => {
    // the exact values at the nearest recorded step
    if (!tip) return;
    const k = nearest(e),
      lines = ["step " + steps(xs[k])];
    for (const s of spec.series)
      if (!s.faint && s.values[k] !== null) lines.push(s.label + ": " + s.values[k]);
    tip.textContent = lines.join("\n");
    tip.style.left = e.clientX + 14 + "px";
    tip.style.top = e.clientY + 14 + "px";
    tip.hidden = false;
  });
  svg.addEventListener("mouseleave", () => {
    if (tip) tip.hidden = true;
  });
  svg.addEventListener("click", (e) => onPick(nearest(e)));
  const read = el("p", { class: "tl-read" });
  box.replaceChildren(
    el("h4", { text: spec.title }),
    spec.sub ? el("p", { class: "sub", text: spec.sub }) : null,
    svg,
    read,
  );
  return function at(k) {
    // move the marker to frame k; the readout says the values there
    marker.setAttribute("x1", X(xs[k]));
    marker.setAttribute("x2", X(xs[k]));
    const shown = spec.series.filter((s) => !s.faint);
    shown.forEach((s, i) => {
      const v = s.values[k];
      dots[i].setAttribute("cx", X(xs[k]));
      dots[i].setAttribute("cy", v === null ? -99 : Y(v));
      dots[i].style.display = v === null ? "none" : "";
    });
    read.replaceChildren(
      "step " + steps(xs[k]) + ": ",
      ...shown.flatMap((s, i) => [
        i ? " · " : "",
        el("span", { class: "key", style: "border-color:" + s.colour, text: s.label + " " }),
        numEl(s.values[k]),
      ]),
    );
  };
}
