// The explorer's shared state and its conversation with the server: the state object every
// view reads, POST /api/<action>, the run's input, the helpers that put numbers, chips, maps
// and export buttons on the page. Imports nothing of the views (they import it).
import { download, el, svgNS } from "./dom.js";

import { draw, drawTiled, exportPNG, exportSVG, svgToPNG, values } from "./heatmap.js";
import { pct, sig } from "./numbers.js";

export const $ = (id) => document.getElementById(id);
export const app = $("app");
export const tip = app.querySelector(".gf-tip");
export const state = {
  models: [],
  model: null,
  info: null,
  text: "",
  run: null,
  seq: 0,
  stepInput: null,
  site: null,
  layer: null,
  head: null,
  mapName: null,
  mapData: null,
  tab: "attention",
  ablated: new Map(),
  gen: null,
  genStep: 0,
  genSeq: 0,
  typedAt: null,
  position: null,
  crossRow: null,
  beamNode: null,
  axes: null,
};
// -- small helpers ---------------------------------------------------------------------------
// Numbers for reading: 3 significant digits, a true minus sign; `exact` for titles and exports.
export const exact = (v) => (typeof v === "string" ? v : String(v));
export const numEl = (v, text, cls) =>
  el("span", { class: cls || "num", text: text || sig(v), title: exact(v) });
export function chip(t, cls) {
  const c = el("span", { class: "tok" + (cls ? " " + cls : ""), text: t.shown });
  if (t.id !== null && t.id !== undefined) {
    c.append(el("small", { class: "id", text: t.id })); // shown as "#12" (explorer.css)
    c.title = "token id " + t.id + ": " + JSON.stringify(t.piece !== undefined ? t.piece : t.shown);
  }
  return c;
}
export function status(text) {
  $("status").textContent = text;
}
export function problem(text) {
  $("problem").hidden = !text;
  $("problem").textContent = text || "";
}
// A control that does not apply: disabled, and its tooltip (and its label's) says why.
export function applies(e, why, help) {
  e.disabled = !!why;
  const label = e.closest("label");
  for (const x of label ? [e, label] : [e]) x.title = why || help || "";
  if (label) label.classList.toggle("off", !!why);
}
// A table's cells to 3 significant digits; the exact value stays in the title.
export function roundCells(box) {
  box.querySelectorAll("table.mat td[title]").forEach((td) => {
    const x = Number(td.title),
      shown = Number(td.textContent);
    if (
      td.title.trim() === "" ||
      !Number.isFinite(x) ||
      !Number.isFinite(shown) ||
      Number.isInteger(x)
    )
      return;
    td.textContent = sig(x);
  });
}

export async function post(action, body) {
  const r = await fetch("/api/" + action, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error("the server answered " + r.status + ": " + text.slice(0, 200));
  }
  if (!r.ok) throw Object.assign(new Error(data.error || "HTTP " + r.status), { status: r.status });
  return data;
}
export function input(extra) {
  const b = { model: state.model, text: state.text };
  if (state.stepInput) Object.assign(b, state.stepInput);
  return Object.assign(b, extra || {});
}
// The PNG and SVG buttons of a picture: png() and svg() save it.
function exports(png, svg) {
  const button = (kind, onclick) =>
    el("button", { type: "button", class: "export-" + kind, text: kind.toUpperCase(), onclick });
  return el("span", { class: "exports" }, button("png", png), button("svg", svg));
}

export function exportButtons(get, name) {
  // PNG / SVG of a matrix view
  const ready = () => {
    const m = get();
    if (m && m.shape[0] * m.shape[1] > 250000) {
      problem("This matrix is too large to export as a picture; export the trace as JSON.");
      return null;
    }
    return m;
  };
  const save = (write) => () => {
    const m = ready();
    if (m) write(m, name(), name());
  };
  return exports(save(exportPNG), save(exportSVG));
}

export function matrixOf(values, rows, cols) {
  // a map object (as heatmap.js draws) from values
  const R = values.length,
    C = R ? values[0].length : 0,
    v = new Float64Array(R * C);
  let scale = 0,
    seq = true;
  for (let i = 0; i < R; i++)
    for (let j = 0; j < C; j++) {
      const x = Number(values[i][j]);
      v[i * C + j] = x;
      if (Number.isFinite(x)) {
        scale = Math.max(scale, Math.abs(x));
        if (x < 0) seq = false;
      }
    }
  return {
    shape: [R, C],
    v,
    scale: scale || 1,
    seq,
    rows,
    cols,
    masked: Array.from(v).includes(-Infinity),
  };
}
export function svgExportButtons(svg, name) {
  // PNG / SVG of a chart drawn as SVG
  const text = () => {
    const copy = svg.cloneNode(true);
    copy.setAttribute("xmlns", svgNS());
    return new XMLSerializer().serializeToString(copy);
  };
  return exports(
    () => svgToPNG(text(), name),
    () => download(name + ".svg", new Blob([text()], { type: "image/svg+xml" })),
  );
}
// Draw every heatmap placeholder (.hm) of a server answer {html, maps}; tables rounded.
export function drawMaps(container, maps, name, onCell) {
  container.querySelectorAll(".hm[data-key]").forEach((div) => {
    const m = maps[div.dataset.key];
    if (!m) return;
    if (m.tiled) {
      drawTiled(
        div,
        m,
        (r0, r1, c0, c1) =>
          post("tile", input({ name: m.tiled, r0, r1, c0, c1 })).then((t) => values(t)),
        tip,
      );
    } else {
      draw(div, m, tip, { onCell });
    }
  });
  roundCells(container);
  if (onCell)
    container.querySelectorAll("table.mat").forEach((t) => {
      t.addEventListener("click", (e) => {
        const td = e.target.closest("td");
        if (!td) return;
        const tr = td.parentElement;
        const i = Array.from(t.querySelectorAll("tr"))
          .filter((r) => r.querySelector("td"))
          .indexOf(tr);
        const j = Array.from(tr.querySelectorAll("td")).indexOf(td);
        onCell(i, j);
      });
      t.style.cursor = "pointer";
    });
}

export function nextTable(top, extra) {
  const t = el(
    "table",
    { class: "next" },
    el(
      "tr",
      {},
      el("th", { text: "token" }),
      el("th", { text: "p" }),
      el("th", { text: "logit" }),
      ...(extra || []).map((x) => el("th", { text: x })),
    ),
  );
  for (const r of top)
    t.append(
      el(
        "tr",
        { "data-id": r.id },
        el("td", { class: "t" }, chip({ shown: r.token, id: r.id })),
        el("td", { class: "p", text: pct(r.p), title: exact(r.p) }),
        el("td", { text: sig(r.logit), title: exact(r.logit) }),
      ),
    );
  return t;
}
export const key = (v) => (v === null || v === undefined ? "" : String(v));
export const headKey = (s, l, h) => s + "|" + key(l) + "|" + key(h);
