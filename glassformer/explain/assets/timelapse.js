// The training time-lapse (explain/timelapse.py's page data: the frames `train --snapshot-views`
// recorded, views.to_json): a time slider over the recorded steps (with play), the chosen head's
// attention map at that step, every head's thumbnail coloured by its prefix-matching score, and
// the curves over the steps with a marker at the slider's step. Used by the static page
// (`explain RUN --over-training --html`, inlined after heatmap.js) and by the explorer's Training
// tab (served as a file; the glue at the end fetches GET /api/views when a model has views).
// Maps are drawn by heatmap.js in the one colour convention (white = 0, blue = high), on a fixed
// scale 0 … 1 so that steps compare by colour. Numbers read to 3 significant digits; the exact
// recorded value is in the title or the tooltip. Text goes in as text (textContent), never HTML.
window.glassformerTimelapse = window.glassformerTimelapse || (function () {
  "use strict";
  const H = window.glassformerHeatmap;
  const NS = H.svgNamespace();
  const W = 520, HT = 170, L = 46, R = 24, T = 10, B = 26;  // a chart's size and margins, px

  const el = H.el;  // heatmap.js: an element with attributes and children
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const num = x => typeof x === "number" && Number.isFinite(x) ? x : null;  // "nan" -> none
  const sig = x => x === null ? "—" : H.fmt(x, 3).replace(/^-/, "−");
  const steps = n => n.toLocaleString("en-US");
  const inText = t => t.charAt(0).toLowerCase() + t.slice(1);  // "Layer 1 · head 3" in a sentence
  const numEl = (x, cls) => el("span", { class: cls || "num", text: sig(x), title: x === null ? "not recorded" : String(x) });

  // A map's recorded values: base64 of float16, little-endian, shape (H, Tq, Tk) -> Float64Array.
  function decode(m) {
    if (!m.v) {
      const bin = atob(m.f16), v = new Float64Array(bin.length / 2);
      for (let i = 0; i < v.length; i++) v[i] = H.half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8));
      m.v = v;
    }
    return m.v;
  }
  // One head's map as heatmap.js draws it (its values already decoded: m.v).
  function headMap(frame, site, head) {
    const m = frame.maps[site];
    if (!m) return null;
    const [, Tq, Tk] = m.shape, n = Tq * Tk, stack = site.split(".")[0];
    const cross = site.endsWith(".cross_attn"), toks = frame.tokens;
    const rows = toks[stack] || null, cols = (cross ? toks.encoder : toks[stack]) || null;
    return {
      shape: [Tq, Tk], v: decode(m).subarray(head * n, (head + 1) * n), scale: 1, seq: true,
      rows: rows && rows.length === Tq ? rows : null, cols: cols && cols.length === Tk ? cols : null,
    };
  }
  const score = (frame, what, site, head) => {
    const per = ((frame.metrics || {})[what] || {})[site];
    return per ? num(per[head]) : null;
  };
  function bestAt(frame) {  // the highest prefix-matching head: {site, head, score} or null
    let b = null;
    for (const [site, per] of Object.entries((frame.metrics || {}).prefix || {}))
      per.forEach((s, h) => { if (num(s) !== null && (!b || s > b.score)) b = { site, head: h, score: s }; });
    return b;
  }

  // -- charts: curves over the steps, a marker at the slider's step --------------------------
  function ticks(lo, hi, n) {
    const span = hi - lo || 1, raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(k => k * p).find(s => s >= raw);
    const out = [];
    for (let x = Math.ceil(lo / step) * step; x <= hi + 1e-9 * span; x += step) out.push(Number(x.toPrecision(12)));
    return out;
  }
  // spec: {title, sub, series: [{label, values: [number|null per frame], colour, width, dash,
  // dots, faint}], range: [lo, hi] or null, ref: {value, label} or null}
  function chart(box, frames, spec, onPick, tip) {
    const xs = frames.map(f => f.step), x0 = xs[0], x1 = xs[xs.length - 1] || 1;
    const all = spec.series.flatMap(s => s.values).filter(v => v !== null);
    if (spec.ref) all.push(spec.ref.value);
    let [lo, hi] = spec.range || [Math.min(...all), Math.max(...all)];
    if (!all.length) { lo = 0; hi = 1; }
    if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
    if (!spec.range) { const pad = 0.06 * (hi - lo); lo -= pad; hi += pad; }
    const X = s => L + (x1 === x0 ? 0 : (s - x0) / (x1 - x0)) * (W - L - R);
    const Y = v => T + (hi - v) / (hi - lo) * (HT - T - B);
    const svg = svgEl("svg", { class: "tl-plot", viewBox: "0 0 " + W + " " + HT, width: W, height: HT });
    for (const t of ticks(lo, hi, 4)) {
      svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: Y(t), y2: Y(t) }));
      svg.append(svgEl("text", { x: L - 5, y: Y(t) + 4, "text-anchor": "end" }, H.fmt(t, 3)));
    }
    for (const t of ticks(x0, x1, 5)) svg.append(svgEl("text", { x: X(t), y: HT - 8, "text-anchor": "middle" }, steps(t)));
    svg.append(svgEl("text", { x: 2, y: HT - 8, class: "axis" }, "step"));
    if (spec.ref) {
      const ref = svgEl("line", { class: "ref", x1: L, x2: W - R, y1: Y(spec.ref.value), y2: Y(spec.ref.value) });
      ref.append(svgEl("title", {}, spec.ref.label));
      svg.append(ref);
    }
    const order = spec.series.slice().sort((a, b) => (b.faint ? 1 : 0) - (a.faint ? 1 : 0));  // faint first
    for (const s of order) {
      let d = "", pen = false;
      s.values.forEach((v, k) => {
        if (v === null) { pen = pen && !!s.join; return; }  // join: a sparse series, drawn across its gaps
        d += (pen ? "L" : "M") + X(xs[k]).toFixed(1) + " " + Y(v).toFixed(1);
        pen = true;
      });
      const path = svgEl("path", { d, fill: "none", stroke: s.colour, "stroke-width": s.width || 1.6, class: s.faint ? "faint" : "" });
      if (s.dash) path.setAttribute("stroke-dasharray", s.dash);
      path.append(svgEl("title", {}, s.label));
      svg.append(path);
      if (s.dots) s.values.forEach((v, k) => { if (v !== null) svg.append(svgEl("circle", { cx: X(xs[k]), cy: Y(v), r: 2.2, fill: s.colour })); });
    }
    const marker = svgEl("line", { class: "tl-marker", x1: X(x0), x2: X(x0), y1: T, y2: HT - B });
    svg.append(marker);
    const dots = spec.series.filter(s => !s.faint).map(s => {
      const c = svgEl("circle", { r: 3.6, fill: s.colour, class: "tl-at" });
      svg.append(c);
      return c;
    });
    const nearest = e => {
      const b = svg.getBoundingClientRect(), x = (e.clientX - b.left) * W / b.width;
      let k = 0;
      xs.forEach((s, i) => { if (Math.abs(X(s) - x) < Math.abs(X(xs[k]) - x)) k = i; });
      return k;
    };
    svg.addEventListener("mousemove", e => {  // the exact values at the nearest recorded step
      if (!tip) return;
      const k = nearest(e), lines = ["step " + steps(xs[k])];
      for (const s of spec.series) if (!s.faint && s.values[k] !== null) lines.push(s.label + ": " + s.values[k]);
      tip.textContent = lines.join("\n");
      tip.style.left = e.clientX + 14 + "px";
      tip.style.top = e.clientY + 14 + "px";
      tip.hidden = false;
    });
    svg.addEventListener("mouseleave", () => { if (tip) tip.hidden = true; });
    svg.addEventListener("click", e => onPick(nearest(e)));
    const read = el("p", { class: "tl-read" });
    box.replaceChildren(el("h4", { text: spec.title }), spec.sub ? el("p", { class: "sub", text: spec.sub }) : null, svg, read);
    return function at(k) {  // move the marker to frame k; the readout says the values there
      marker.setAttribute("x1", X(xs[k]));
      marker.setAttribute("x2", X(xs[k]));
      const shown = spec.series.filter(s => !s.faint);
      shown.forEach((s, i) => {
        const v = s.values[k];
        dots[i].setAttribute("cx", X(xs[k]));
        dots[i].setAttribute("cy", v === null ? -99 : Y(v));
        dots[i].style.display = v === null ? "none" : "";
      });
      read.replaceChildren("step " + steps(xs[k]) + ": ", ...shown.flatMap((s, i) => [
        i ? " · " : "", el("span", { class: "key", style: "border-color:" + s.colour, text: s.label + " " }), numEl(s.values[k]),
      ]));
    };
  }

  // -- the component --------------------------------------------------------------------------
  // mount(root, data, opts): the time-lapse in `root`. opts.tip: the tooltip element (default:
  // the page's .gf-tip); opts.onProbe: a button "read the probe in the Attention tab" calls it with the text and the head shown ({site, layer, head}).
  function mount(root, data, opts) {
    opts = opts || {};
    const frames = data.frames, n = frames.length, words = data.words;
    const tip = opts.tip || (root.closest(".gf") || document).querySelector(".gf-tip");
    const sites = data.sites, groups = H.unique(sites.map(s => s.group));
    if (!n || !sites.length) { root.replaceChildren(el("p", { class: "sub", text: "The recorded views hold no attention maps." })); return { setFrame() {}, stop() {}, state: {} }; }
    const last = frames[n - 1], first = bestAt(last);
    const state = { k: n - 1, site: first ? first.site : sites[0].name, head: first ? first.head : 0, timer: 0 };
    const siteOf = name => sites.find(s => s.name === name);

    const play = el("button", { type: "button", class: "tl-play", text: "▶ play" });
    const slider = el("input", { type: "range", class: "tl-slider", min: 0, max: n - 1, step: 1, value: n - 1, "aria-label": "training step" });
    const label = el("span", { class: "tl-step" });
    const group = el("select", { class: "tl-group" });
    groups.forEach(g => group.append(new Option(sites.find(s => s.group === g).group_title, g)));
    group.value = siteOf(state.site).group;
    const groupLabel = el("label", {}, "attention ", group);
    groupLabel.hidden = groups.length < 2;
    const now = el("p", { class: "tl-now" });
    const mapTitle = el("h3", { class: "tl-title" }), mapName = el("code", { class: "tl-name" });
    const mapBox = el("div", { class: "hm tl-hm" });
    const grid = el("div", { class: "tl-grid" });
    const headCharts = el("div", { class: "tl-head-charts" }), charts = el("div", { class: "tl-charts" });
    const probe = opts.onProbe ? el("button", { type: "button", class: "tl-probe", text: "read the probe with the final weights (Attention tab)", onclick: () => opts.onProbe(data.text, pick()) }) : null;
    const pick = () => ({ site: siteOf(state.site).group, layer: siteOf(state.site).layer, head: state.head });  // the head shown
    root.replaceChildren(
      el("p", { class: "what", text: words.prefix + " " + words.previous }),
      el("p", { class: "shows tl-headline", text: words.headline }),
      el("p", { class: "sub tl-probe-text" }, "Probe text (" + (frames[0].tokens.encoder || frames[0].tokens.decoder || []).length + " tokens), recorded every " + steps(data.every) + " steps: ", el("code", { text: data.text }), probe ? " " : null, probe),
      el("div", { class: "tl-controls" }, play, slider, label, groupLabel),
      now,
      el("div", { class: "tl-main" },
        el("figure", { class: "tl-map att" }, el("figcaption", {}, mapTitle,
          el("p", { class: "sub" }, el("span", { class: "eq", text: words.equation }), " · ", mapName),
          el("p", { class: "sub", text: "Row i: how much token i (the query) takes from each token j (the key); each row sums to 1. Colour scale 0 … 1 at every step, so that steps compare by colour. Hover a cell for its exact recorded value." })),
          mapBox),
        el("div", { class: "tl-heads" }, el("h3", { text: "Every head at this step" }),
          el("p", { class: "sub", text: "Each label is the head's prefix-matching score, its colour the same scale (white 0, blue 1); click a head to show its map." }), grid, headCharts)),
      charts);

    // The curves: each series' values over the frames.
    const series = (label, get, colour, extra) => Object.assign({ label, colour, values: frames.map(f => num(get(f))) }, extra || {});
    const met = key => f => (f.metrics || {})[key];
    function specs() {
      const out = [];
      const loss = [series("training loss", f => f.row.loss, "#1d232b")];
      if (frames.some(f => num(f.row.val_loss) !== null)) loss.push(series("val_loss", f => f.row.val_loss, "#7a4b00", { dash: "5 3", dots: true, join: true }));
      if (loss.some(s => s.values.some(v => v !== null))) out.push({ title: "Training loss", sub: "the training log's loss (and the evaluation's) at each recorded step", series: loss });
      if (frames.some(f => num(met("probe_loss")(f)) !== null)) out.push({
        title: "The probe's loss", sub: "next-token cross-entropy over the probe text: on the tokens an earlier copy gives away (what an induction head can copy) and on the others",
        series: [series("probe_loss", met("probe_loss"), "#1d232b"), series("repeat_loss", met("repeat_loss"), "#2166ac"), series("first_loss", met("first_loss"), "#8a929c", { dash: "4 3" })],
      });
      const scored = sites.filter(s => s.scored && s.group === group.value);
      for (const [what, name, words2] of [["prefix", "Prefix-matching score, per head", "attention on the token after an earlier copy of the query's token"], ["previous", "Previous-token score, per head", "attention on the token just before"]]) {
        const lines = [];
        for (const s of scored) for (const h of s.heads) {
          const on = s.name === state.site && h.head === state.head;
          lines.push(series(h.title + (on ? " (shown)" : ""), f => score(f, what, s.name, h.head), on ? "#2166ac" : "#b7c0ca", { width: on ? 2.6 : 1, faint: !on }));
        }
        if (!lines.length) continue;
        const base = num((data.chance || {})[group.value.split(".")[0]]);
        const ref = what === "prefix" && base !== null ? { value: base, label: "uniform attention: " + base } : null;
        const top = Math.max(ref ? ref.value : 0, ...lines.flatMap(l => l.values).filter(v => v !== null));
        const range = [0, [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1].find(t => t >= 1.1 * top) || 1];
        const said = words2 + "; the head shown in blue, the others grey" + (ref ? "; dotted: what uniform attention would score (" + sig(ref.value) + ")" : "");
        out.push({ title: name, sub: said, series: lines, range, ref, heads: true });
      }
      return out;
    }
    let markers = [];
    function drawCharts() {
      charts.replaceChildren();
      headCharts.replaceChildren();
      markers = specs().map(spec => {
        const box = el("div", { class: "tl-chart" });
        (spec.heads ? headCharts : charts).append(box);
        return chart(box, frames, spec, k => setFrame(k), tip);
      });
    }

    function drawMap() {
      const f = frames[state.k], s = siteOf(state.site), h = s.heads[state.head], m = headMap(f, s.name, state.head);
      mapTitle.textContent = h.map_title + " at step " + steps(f.step);
      mapName.textContent = s.name + ".head" + state.head + ".A";
      mapBox.replaceChildren();
      delete mapBox.dataset.drawn;
      if (!m) { mapBox.append(el("p", { class: "sub", text: "Not recorded at this step." })); return; }
      const canvas = H.draw(mapBox, m, tip, {});
      const [R, C] = m.shape;
      canvas.addEventListener("mousemove", e => {  // after heatmap.js's own: the exact value
        const i = Math.max(0, Math.min(R - 1, Math.floor(e.offsetY * R / canvas.clientHeight)));
        const j = Math.max(0, Math.min(C - 1, Math.floor(e.offsetX * C / canvas.clientWidth)));
        const x = m.v[i * C + j], q = m.rows ? " “" + m.rows[i] + "”" : "", key = m.cols ? " “" + m.cols[j] + "”" : "";
        tip.textContent = "query (row) " + i + q + " · key (column) " + j + key + "\nA[" + i + ", " + j + "] ≈ " + sig(x) + " · exact (recorded float16): " + x;
      });
      mapBox.dataset.step = String(f.step);
    }
    function drawGrid() {
      const f = frames[state.k], rows = [];
      for (const s of sites.filter(x => x.group === group.value)) {
        rows.push(el("div", { class: "tl-row" }, el("span", { class: "tl-layer", text: "layer " + s.layer }), ...s.heads.map(h => {
          const p = score(f, "prefix", s.name, h.head), q = score(f, "previous", s.name, h.head);
          const on = s.name === state.site && h.head === state.head, hm = el("div", { class: "hm" });
          const [r, g, b] = H.rgb(p === null ? 0 : p, true);
          const said = el("span", { class: "tl-score" + (p !== null && p > 0.55 ? " dark" : ""), style: "background:rgb(" + r + "," + g + "," + b + ")", text: p === null ? "—" : sig(p) });
          const t = el("button", {
            type: "button", class: "tl-thumb" + (on ? " on" : ""), "data-site": s.name, "data-head": h.head,
            title: h.title + " at step " + steps(f.step) + (p === null ? "" : ": prefix-matching " + p + ", previous-token " + q),
          }, hm, el("span", { class: "tl-h", text: "head " + h.head }), said);
          t.addEventListener("click", () => { state.site = s.name; state.head = h.head; drawCharts(); setFrame(state.k); });
          const m = headMap(f, s.name, h.head);
          if (m) H.draw(hm, m, null, { fit: 72 });
          return t;
        })));
      }
      grid.replaceChildren(...rows);
    }
    function sayNow() {
      const f = frames[state.k], s = siteOf(state.site), h = s.heads[state.head];
      const p = score(f, "prefix", s.name, state.head), q = score(f, "previous", s.name, state.head), b = bestAt(f);
      const parts = ["At step " + steps(f.step) + ", " + inText(h.title)];
      if (p === null) parts.push(s.scored ? " has no prefix-matching score (nothing in the probe repeats)." : " has no prefix-matching score (it measures self-attention).");
      else {
        parts.push(" puts ", numEl(p), " of its attention on the token after the earlier copy and ", numEl(q), " on the previous token");
        if (b && (b.site !== s.name || b.head !== state.head)) parts.push("; the highest prefix-matching score at this step is " + inText(siteOf(b.site).heads[b.head].title) + "'s, ", numEl(b.score), ".");
        else parts.push(", the highest prefix-matching score of any head at this step.");
      }
      const m = f.metrics || {};
      if (f.tokens.encoder && f.tokens.decoder) parts.push(" The decoder reads, greedily translating the probe: “" + f.tokens.decoder.join("") + "”.");
      if (num(m.probe_loss) !== null) {
        parts.push(" The probe's loss: ", numEl(num(m.probe_loss)));
        if (num(m.repeat_loss) !== null && num(m.first_loss) !== null) parts.push(" (", numEl(num(m.repeat_loss)), " on the tokens an earlier copy gives away, ", numEl(num(m.first_loss)), " on the others)");
        parts.push(".");
      }
      now.replaceChildren(...parts);
    }
    function setFrame(k) {
      state.k = Math.max(0, Math.min(n - 1, k));
      slider.value = String(state.k);
      label.textContent = "step " + steps(frames[state.k].step) + " · frame " + (state.k + 1) + " of " + n;
      drawMap();
      drawGrid();
      sayNow();
      markers.forEach(at => at(state.k));
      root.dataset.frame = String(state.k);
      root.dataset.step = String(frames[state.k].step);
    }
    function stop() { clearInterval(state.timer); state.timer = 0; play.textContent = "▶ play"; }
    play.addEventListener("click", () => {
      if (state.timer) { stop(); return; }
      if (state.k >= n - 1) setFrame(0);
      play.textContent = "❚❚ pause";
      state.timer = setInterval(() => { setFrame(state.k + 1); if (state.k >= n - 1) stop(); }, Math.max(60, Math.min(400, 8000 / n)));
    });
    slider.addEventListener("input", () => { stop(); setFrame(Number(slider.value)); });
    group.addEventListener("change", () => {
      const s = sites.find(x => x.group === group.value);
      state.site = s.name; state.head = 0;
      drawCharts(); setFrame(state.k);
    });
    root.dataset.steps = JSON.stringify(frames.map(f => f.step));
    drawCharts();
    setFrame(n - 1);
    return { setFrame, stop, state };
  }

  // -- the explorer's Training tab: shown for a model whose folder holds recorded views --------
  function explorer() {
    const tab = document.getElementById("tab-training"), app = document.getElementById("app");
    const button = app && app.querySelector(".tabs button[data-tab=training]");
    if (!tab || !button) return;
    const box = tab.querySelector(".gf-tl");
    let model = null, shown = null, view = null;
    async function show() {
      if (!model || shown === model) return;
      const want = model;
      box.replaceChildren(el("p", { class: "sub", text: "loading the recorded views…" }));
      let data;
      try {
        const r = await fetch("/api/views?model=" + encodeURIComponent(want));
        data = await r.json();
        if (!r.ok) throw new Error(data.error || "HTTP " + r.status);
      } catch (e) {
        if (want === model) box.replaceChildren(el("p", { class: "problem", text: "No time-lapse: " + e.message }));
        return;
      }
      if (want !== model) return;  // another model was chosen meanwhile
      shown = want;
      view = mount(box, data, { onProbe: (text, head) => {
        app.dispatchEvent(new CustomEvent("gf-pick-head", { detail: head }));  // explorer.js
        const t = document.getElementById("text");
        t.value = text;
        t.dispatchEvent(new Event("input"));
        app.querySelector(".tabs button[data-tab=attention]").click();
      } });
      tab.dataset.ready = want;
    }
    app.addEventListener("gf-model", e => {  // explorer.js: a model was chosen (its listing, or null)
      const info = e.detail;
      if (view) view.stop();
      model = info && info.views ? info.id : null;
      shown = null; view = null;
      delete tab.dataset.ready;
      box.replaceChildren();
      button.hidden = !model;
      button.title = model ? "how this model read one probe text while it trained (train --snapshot-views)" : "";
      if (!tab.hidden) { if (model) show(); else app.querySelector(".tabs button[data-tab=attention]").click(); }
    });
    button.addEventListener("click", show);
  }
  explorer();

  return { mount, decode, headMap, bestAt, ticks };
})();
