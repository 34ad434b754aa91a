// The live explorer: the static report's front end (report.css, heatmap.js) fetching its data
// from `glassformer serve` instead of reading it inlined. Typing re-runs the model (debounced);
// every view asks the server for what it shows, when it is shown. Text from the server goes in
// as text (textContent); the only HTML inserted is the report's own cards and tables, which
// the server escapes (explain/html_pieces.py).
(function () {
  "use strict";
  const H = window.glassformerHeatmap;
  const $ = id => document.getElementById(id);
  const app = $("app"), tip = app.querySelector(".gf-tip");
  const DEBOUNCE = 120, REGENERATE = 250;
  const state = {
    models: [], model: null, info: null, text: "", run: null, seq: 0, stepInput: null,
    site: null, layer: null, head: null, mapName: null, mapData: null, tab: "attention",
    ablated: new Map(), gen: null, genStep: 0, genSeq: 0, typedAt: null,
  };
  // Latencies from the last keystroke to the attention map drawn (read by the benchmark).
  window.gfLatency = [];

  // -- small helpers ---------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const NS = H.svgNamespace();
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const num = (v, d) => typeof v === "string" ? v : H.fmt(v, d || 6);
  const pct = p => (100 * p).toFixed(p < 0.001 ? 3 : 1) + "%";
  function chip(t, cls) {
    const c = el("span", { class: "tok" + (cls ? " " + cls : ""), text: t.shown });
    if (t.id !== null && t.id !== undefined) {
      c.append(el("small", { text: t.id }));
      c.title = "id " + t.id + ": " + JSON.stringify(t.piece);
    }
    return c;
  }
  function status(text) { $("status").textContent = text; }
  function problem(text) {
    $("problem").hidden = !text;
    $("problem").textContent = text || "";
  }

  async function post(action, body) {
    const r = await fetch("/api/" + action, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const text = await r.text();
    let data;
    try { data = JSON.parse(text); } catch (e) {
      throw new Error("the server answered " + r.status + ": " + text.slice(0, 200));
    }
    if (!r.ok) throw Object.assign(new Error(data.error || "HTTP " + r.status), { status: r.status });
    return data;
  }
  function input(extra) {
    const b = { model: state.model, text: state.text };
    if (state.stepInput) Object.assign(b, state.stepInput);
    return Object.assign(b, extra || {});
  }
  function exportButtons(get, name) {  // PNG / SVG of a matrix view
    const warn = m => {
      if (m.shape[0] * m.shape[1] > 250000) { problem("This matrix is too large to export as a picture; export the trace as JSON."); return true; }
      return false;
    };
    return el("span", { class: "exports" },
      el("button", { type: "button", class: "export-png", text: "PNG", onclick: () => {
        const m = get(); if (m && !warn(m)) H.exportPNG(m, name(), name());
      } }),
      el("button", { type: "button", class: "export-svg", text: "SVG", onclick: () => {
        const m = get(); if (m && !warn(m)) H.exportSVG(m, name(), name());
      } }));
  }
  function matrixOf(values, rows, cols) {  // a map object (as heatmap.js draws) from values
    const R = values.length, C = R ? values[0].length : 0, v = new Float64Array(R * C);
    let scale = 0, seq = true;
    for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) {
      const x = Number(values[i][j]);
      v[i * C + j] = x;
      if (Number.isFinite(x)) { scale = Math.max(scale, Math.abs(x)); if (x < 0) seq = false; }
    }
    return { shape: [R, C], v, scale: scale || 1, seq, rows, cols, masked: Array.from(v).includes(-Infinity) };
  }
  function svgExportButtons(svg, name) {  // PNG / SVG of a chart drawn as SVG
    const text = () => {
      const copy = svg.cloneNode(true);
      copy.setAttribute("xmlns", NS);
      return new XMLSerializer().serializeToString(copy);
    };
    return el("span", { class: "exports" },
      el("button", { type: "button", class: "export-png", text: "PNG", onclick: () => H.svgToPNG(text(), name) }),
      el("button", { type: "button", class: "export-svg", text: "SVG", onclick: () =>
        H.download(name + ".svg", new Blob([text()], { type: "image/svg+xml" })) }));
  }
  // Draw every heatmap placeholder (.hm) of a server answer {html, maps}.
  function drawMaps(container, maps, name, onCell) {
    container.querySelectorAll(".hm[data-key]").forEach(div => {
      const m = maps[div.dataset.key];
      if (!m) return;
      if (m.tiled) {
        H.drawTiled(div, m, (r0, r1, c0, c1) =>
          post("tile", input({ name: m.tiled, r0, r1, c0, c1 })).then(t => H.values(t)), tip);
      } else {
        H.draw(div, m, tip, { onCell });
      }
    });
    if (onCell) container.querySelectorAll("table.mat").forEach(t => {
      t.addEventListener("click", e => {
        const td = e.target.closest("td");
        if (!td) return;
        const tr = td.parentElement;
        const i = Array.from(t.querySelectorAll("tr")).filter(r => r.querySelector("td")).indexOf(tr);
        const j = Array.from(tr.querySelectorAll("td")).indexOf(td);
        onCell(i, j);
      });
      t.style.cursor = "pointer";
    });
  }

  // -- models ----------------------------------------------------------------------------------
  async function loadModels() {
    const r = await fetch("/api/models");
    state.models = (await r.json()).models;
    for (const select of [$("model"), $("model-b")]) {
      const groups = {};
      for (const m of state.models) {
        const g = groups[m.kind] || (groups[m.kind] = el("optgroup", { label: m.kind === "walkthrough" ? "walkthroughs" : "models" }));
        g.append(new Option(m.name + (m.error ? " (cannot be loaded)" : ""), m.id));
      }
      select.replaceChildren(...Object.values(groups));
    }
    const wanted = new URLSearchParams(location.hash.slice(1));
    const first = state.models.find(m => m.id === wanted.get("model")) ||
      state.models.find(m => m.kind === "model" && !m.id.startsWith("hello-world")) || state.models[0];
    $("model").value = first.id;
    $("model-b").value = first.id;
    await chooseModel(first.id, wanted.get("text"));
  }
  const DEFAULT_TEXT = { decoder: "ROMEO: But soft, what light", "encoder-decoder": "Where is the station?", encoder: "A man is eating food." };
  async function chooseModel(id, text) {
    state.model = id;
    state.stepInput = null;
    state.ablated.clear();
    state.gen = null;
    state.neuronAt = null;
    $("neuron").hidden = true;
    $("latency").textContent = "";
    $("gen-out").replaceChildren(); $("gen-step-view").replaceChildren(); $("beam").replaceChildren();
    $("stepper").hidden = true;
    $("intervention").replaceChildren();
    let info;
    status("loading the model…");
    try {
      info = await post("load", { model: id });  // loads it on the server: its sizes, or why not
    } catch (e) {  // a folder that cannot be loaded: say why, show nothing of another model
      state.info = null;
      state.run = null;
      state.seq++;
      problem(e.message);
      status("");
      $("text").disabled = true;
      $("badge").textContent = "fidelity: —";
      $("badge").className = "badge";
      $("model-info").textContent = (state.models.find(m => m.id === id) || {}).description || "";
      ["tokens", "output", "map", "heads-grid", "neuron", "steps", "compare", "head-buttons"].forEach(x => $(x).replaceChildren());
      $("neuron").hidden = true;
      return;
    }
    state.info = info;
    if (info.arch === "encoder-decoder") $("max-new").value = String(info.max_len);
    const fixed = info.kind === "walkthrough";
    const t = $("text");
    t.disabled = fixed;
    if (fixed) t.value = info.text || "";
    else if (text) t.value = text;
    else t.value = guessText(info);
    state.text = t.value;
    $("text-b").value = state.text;
    $("model-info").textContent = (info.description || "") + (info.summary ? " · " + info.summary : "");
    await update();
  }
  function guessText(info) {
    if (info.id === "hello-world-model") return "hello world";
    return DEFAULT_TEXT[info.arch] || "Hello world.";
  }
  $("model").addEventListener("change", e => chooseModel(e.target.value));

  // -- typing: the run -------------------------------------------------------------------------
  let timer = 0;
  $("text").addEventListener("input", () => {
    state.typedAt = performance.now();
    state.text = $("text").value;
    state.stepInput = null;
    $("step-banner").hidden = true;
    clearTimeout(timer);
    timer = setTimeout(update, DEBOUNCE);
  });
  $("back-to-text").addEventListener("click", () => {
    state.stepInput = null;
    $("step-banner").hidden = true;
    update();
  });

  async function update() {
    const seq = ++state.seq, typedAt = state.typedAt;
    state.typedAt = null;
    const superseded = () => {  // a newer update runs: it measures from this key press
      if (typedAt !== null && (state.typedAt === null || state.typedAt > typedAt)) state.typedAt = typedAt;
    };
    app.classList.add("busy");
    status("running…");
    let run;
    try {
      run = await post("run", input());
    } catch (e) {
      if (seq === state.seq) { problem(e.message); status(""); app.classList.remove("busy"); }
      return;
    }
    if (seq !== state.seq) return superseded();
    problem(null);
    state.run = run;
    renderTokens(run);
    renderOutput(run);
    setupPickers(run);
    await drawAttention(seq);
    if (seq !== state.seq) return superseded();
    app.classList.remove("busy");
    const n = Object.values(run.tokens).map(t => t.length).join(" + ");
    status(run.n_steps + " steps recorded · " + (n || 0) + " tokens · model ran in " +
      Math.round(run.elapsed_ms) + " ms on the server (" + run.cache.runs + " runs cached, " +
      run.cache.mb + " MB)");
    if (typedAt !== null) {
      const ms = performance.now() - typedAt;
      window.gfLatency.push(ms);
      $("latency").textContent = "keystroke → attention map: " + Math.round(ms) + " ms";
    }
    app.dataset.ready = String(seq);
    badge(seq);
    if (state.tab === "steps") renderSteps();
    if (state.ablated.size) intervene();
    if (state.tab === "compare") compare();
    if (state.tab === "generate" && !state.stepInput) regenerate();
    renderHeadButtons();
  }

  function renderTokens(run) {
    const out = [];
    for (const [stack, toks] of Object.entries(run.tokens)) {
      const name = { encoder: run.arch === "encoder-decoder" ? "source (encoder)" : "tokens (encoder)", decoder: run.arch === "encoder-decoder" ? "decoder input" : "tokens" }[stack];
      out.push(el("p", { class: "stack-" + stack }, el("b", { text: name + ": " }), ...toks.map(t => chip(t))));
    }
    if (run.unknown.length) out.push(el("p", { class: "note", text: run.unknown.length + " unknown piece(s) mapped to the unknown token: " + run.unknown.slice(0, 8).join(", ") }));
    $("tokens").replaceChildren(...out);
  }
  function nextTable(top, extra) {
    const t = el("table", { class: "next" }, el("tr", {}, el("th", { text: "token" }), el("th", { text: "p" }), el("th", { text: "logit" }), ...(extra || []).map(x => el("th", { text: x }))));
    for (const r of top) t.append(el("tr", { "data-id": r.id }, el("td", { class: "t" }, chip({ shown: r.token, id: r.id })), el("td", { text: pct(r.p), title: String(r.p) }), el("td", { text: num(r.logit, 5), title: String(r.logit) })));
    return t;
  }
  function renderOutput(run) {
    const o = run.output, box = $("output");
    if (o.kind === "next") box.replaceChildren(el("p", { class: "next-inline" }, el("b", { text: "Next token: " }), ...o.top.slice(0, 6).flatMap(t => [chip({ shown: t.token, id: t.id }), el("span", { class: "p", text: pct(t.p), title: "p = " + t.p + ", logit " + t.logit })])));
    else if (o.kind === "translation") box.replaceChildren(el("p", {}, el("b", { text: "Translation (greedy): " }), el("span", { class: "translation", text: o.text })));
    else if (o.kind === "embedding") box.replaceChildren(el("p", {}, el("b", { text: "Sentence embedding: " }), o.dims + " dimensions, unit length (mean of the encoder outputs): " + o.first.slice(0, 4).map(x => num(x, 4)).join(", ") + ", …"));
    else if (o.kind === "class") box.replaceChildren(el("p", {}, el("b", { text: "Class: " }), o.label + " " + pct(o.probability) + " (" + Object.entries(o.probabilities).map(([n, p]) => n + " " + pct(p)).join(", ") + ")"));
    else box.replaceChildren(el("p", {}, el("b", { text: "Walkthrough: " }), o.text + " — the article's fixed input; every step is in the tabs below."));
  }

  // -- fidelity badge --------------------------------------------------------------------------
  async function badge(seq) {
    const b = $("badge");
    b.className = "badge";
    b.textContent = "fidelity: checking…";
    let f;
    try { f = await post("fidelity", input()); } catch (e) { if (seq === state.seq) b.textContent = "fidelity: " + e.message; return; }
    if (seq !== state.seq) return;
    const parts = [];
    let ok = true;
    if (!f.torch) parts.push(f.note || "");
    else if (!f.torch.available) parts.push(f.torch.note);
    else {
      parts.push("PyTorch vs NumPy: max |Δ| " + H.fmt(f.torch.max_abs_diff, 2) + " over " + f.torch.compared + " steps");
      ok = f.torch.max_abs_diff < 1e-9;
      b.title = "largest at " + f.torch.where;
    }
    if (f.hf) {
      if (f.hf.available) {
        parts.push(f.hf.engine + ": max |Δ| " + H.fmt(f.hf.max_abs_diff, 2) + " (" + f.hf.step + ")");
        ok = ok && f.hf.max_abs_diff < 1e-5;
      } else parts.push("Hugging Face: " + f.hf.note);
    }
    b.textContent = parts.join(" · ");
    b.className = "badge " + (f.torch && f.torch.available ? (ok ? "ok" : "bad") : "");
    b.dataset.torch = f.torch && f.torch.available ? String(f.torch.max_abs_diff) : "";
  }

  // -- attention -------------------------------------------------------------------------------
  const site = $("site"), layer = $("layer"), head = $("head");
  const key = v => v === null || v === undefined ? "" : String(v);
  function setupPickers(run) {
    const maps = run.attention;
    $("tab-attention").querySelector(".picker").hidden = !maps.length;
    if (!maps.length) { $("map").replaceChildren(el("p", { class: "sub", text: "This run has no attention maps." })); return; }
    const sites = H.unique(maps.map(a => a.site));
    const keep = site.value || state.site;
    site.replaceChildren(...sites.map(s => new Option((s || "the article's heads") + " · " + maps.find(a => a.site === s).kind, s)));
    site.value = sites.includes(keep) ? keep : sites[0];
    pickLayerHead();
  }
  function pickLayerHead() {
    const maps = state.run.attention, here = maps.filter(a => a.site === site.value);
    H.fill(layer, H.unique(here.map(a => key(a.layer))), "layer");
    const inLayer = here.filter(a => key(a.layer) === layer.value);
    H.fill(head, H.unique(inLayer.map(a => key(a.head))), "head");
    const chosen = inLayer.find(a => key(a.head) === head.value) || here[0];
    state.site = site.value; state.layer = chosen.layer; state.head = chosen.head;
    state.mapName = chosen.name;
    $("shown").textContent = chosen.name;
  }
  [site, layer, head].forEach(s => s.addEventListener("change", () => {
    pickLayerHead();
    drawAttention(state.seq);
  }));
  $("all-heads").addEventListener("change", () => drawAttention(state.seq));

  async function drawAttention(seq) {
    if (!state.mapName) return;
    const name = state.mapName;
    let a;
    try { a = await post("attention", input({ name })); } catch (e) { problem(e.message); return; }
    if (seq !== state.seq || name !== state.mapName) return;
    const box = $("map");
    box.innerHTML = a.html;
    state.mapData = a.values ? matrixOf(a.values, a.rows, a.cols) : Object.values(a.maps)[0];
    drawMaps(box, a.maps, name, a.neuron ? (i, j) => neuron(name, i, j) : null);
    box.dataset.name = name;
    if ($("all-heads").checked) await headsGrid(seq); else $("heads-grid").hidden = true;
    const [i, j] = state.neuronAt || [-1, -1];  // the same cell of the new map, if it has one
    if (!$("neuron").hidden && a.neuron && i < a.shape[0] && j < a.shape[1]) neuron(name, i, j);
    else $("neuron").hidden = true;
  }
  const attExports = $("tab-attention").querySelector(".picker .exports");
  attExports.replaceWith(exportButtons(() => state.mapData, () => (state.mapName || "map").replace(/[^\w.-]+/g, "_")));

  async function headsGrid(seq) {
    const grid = $("heads-grid");
    let r;
    try { r = await post("heads", input({ site: state.site, layer: state.layer })); } catch (e) { problem(e.message); return; }
    if (seq !== state.seq) return;
    grid.hidden = false;
    grid.replaceChildren(...r.heads.map(h => {
      const hm = el("div", { class: "hm" });
      const hk = headKey(state.site, state.layer, h.head);
      const box = el("input", { type: "checkbox", class: "ablate" });
      box.checked = state.ablated.has(hk);
      box.addEventListener("click", e => e.stopPropagation());
      box.addEventListener("change", () => toggleHead(state.site, state.layer, h.head, box.checked));
      const t = el("div", { class: "thumb" + (h.head === state.head ? " on" : "") + (box.checked ? " ablated" : ""), "data-head": key(h.head), title: h.name },
        hm, el("div", { text: "head " + key(h.head) }), el("label", {}, box, " ablate"));
      t.addEventListener("click", () => { head.value = key(h.head); pickLayerHead(); drawAttention(state.seq); });
      requestAnimationFrame(() => H.draw(hm, h.map, tip, { fit: 120 }));
      return t;
    }));
  }

  async function neuron(name, i, j) {
    state.neuronAt = [i, j];
    let n;
    try { n = await post("neuron", input({ name, i, j })); } catch (e) { problem(e.message); return; }
    if (state.neuronAt[0] !== i || state.neuronAt[1] !== j || state.mapName !== name) return;
    const panel = $("neuron");
    panel.hidden = false;
    const m = matrixOf([n.q, n.k, n.product], ["q", "k", "q×k"], n.q.map((_, d) => String(d)));
    const tbl = el("div");
    tbl.innerHTML = n.html;
    const lines = [
      el("h3", { text: "Neuron view: " + n.name + ", query " + n.i + " (" + n.query + ") · key " + n.j + " (" + n.key + ")" }),
      el("p", { class: "sub", text: "q is row " + n.i + " of Q, k is row " + n.j + " of K; their product dimension by dimension, summed, is the score." }),
      tbl,
      el("p", { class: "sum", "data-sum": String(n.sum) }, "Ω[" + n.i + "," + n.j + "] = Σ_d q_d·k_d = " + num(n.sum, 10) + (n.scores !== undefined ? "   (the trace's scores: " + num(n.scores, 10) + ")" : "")),
    ];
    if (n.scaled !== undefined) lines.push(el("p", { class: "sum", text: "÷ √" + n.D + " → " + num(n.scaled, 10) }));
    if (n.A !== undefined) lines.push(el("p", { class: "sum", "data-a": String(n.A), text: n.masked ? "masked: this key is hidden from this query (−∞ before the softmax), A = 0" : "A[" + n.i + "," + n.j + "] = softmax of row " + n.i + " at column " + n.j + " = " + num(n.A, 10) }));
    lines.push(exportButtons(() => m, () => "neuron-" + n.name + "-" + n.i + "-" + n.j));
    panel.replaceChildren(...lines);
  }

  // -- every step (lazy: a group's steps are fetched when it opens and scrolls into view) -----
  let io = null;
  function renderSteps() {
    const run = state.run, box = $("steps");
    if (!run) return;
    if (io) io.disconnect();
    io = new IntersectionObserver(entries => {
      for (const e of entries) if (e.isIntersecting) { io.unobserve(e.target); loadCard(e.target); }
    }, { rootMargin: "200px" });
    const small = run.n_steps <= 150;
    function build(items, top) {
      return items.map(x => {
        if (x.group !== undefined) {
          const d = el("details", { class: "group" },
            el("summary", {}, el("code", { text: x.group }), x.label ? el("span", { class: "head-no", text: " " + x.label }) : null, el("span", { class: "shape", text: " " + x.count + " step" + (x.count > 1 ? "s" : "") })),
            ...build(x.items, false));
          d.open = small || top;  // a block's steps load when it opens
          return d;
        }
        const slot = el("article", { class: "step pending", "data-name": x.step },
          el("header", {}, el("code", { class: "name", text: x.step }), el("span", { class: "eq", text: x.equation })),
          el("p", { class: "shape", text: "shape " + x.shape.join(" × ") + " · loading…" }));
        io.observe(slot);
        return slot;
      });
    }
    box.replaceChildren(...build(run.steps, true));
  }
  async function loadCard(slot) {
    const seq = state.seq, name = slot.dataset.name;
    let r;
    try { r = await post("step", input({ name })); } catch (e) { slot.querySelector(".shape").textContent = e.message; return; }
    if (seq !== state.seq) return;
    const holder = el("div");
    holder.innerHTML = r.html;
    const card = holder.firstElementChild;
    card.dataset.name = name;
    const data = r.values ? matrixOf(r.values, r.rows, r.cols) : Object.values(r.maps)[0];
    if (data) card.querySelector("header").append(exportButtons(() => data, () => name.replace(/[^\w.-]+/g, "_")));
    slot.replaceWith(card);
    drawMaps(card, r.maps, name, null);
  }
  $("open-layers").addEventListener("click", () => $("steps").querySelectorAll("details").forEach(d => { d.open = true; }));
  $("close-layers").addEventListener("click", () => $("steps").querySelectorAll("details").forEach(d => { d.open = false; }));

  // -- tabs ------------------------------------------------------------------------------------
  app.querySelectorAll(".tabs button").forEach(b => b.addEventListener("click", () => showTab(b.dataset.tab)));
  function showTab(name) {
    state.tab = name;
    app.querySelectorAll(".tabs button").forEach(b => b.classList.toggle("on", b.dataset.tab === name));
    app.querySelectorAll(".tab").forEach(t => { t.hidden = t.id !== "tab-" + name; });
    if (name === "steps") renderSteps();
    if (name === "generate" && !state.gen) regenerate();
    if (name === "compare") compare();
    if (name === "intervene") renderHeadButtons();
  }

  // -- generation ------------------------------------------------------------------------------
  const sliders = { temperature: v => v, "top-k": v => v === "0" ? "off" : v, "top-p": v => v === "1" ? "off" : v };
  for (const [id, show] of Object.entries(sliders)) {
    $(id).addEventListener("input", () => { $(id + "-v").textContent = show($(id).value); scheduleGenerate(); });
  }
  ["strategy", "seed", "beam-width", "max-new"].forEach(id => $(id).addEventListener("change", scheduleGenerate));
  $("generate").addEventListener("click", regenerate);
  let genTimer = 0;
  function scheduleGenerate() { clearTimeout(genTimer); genTimer = setTimeout(regenerate, REGENERATE); }
  function genRequest() {
    const b = { model: state.model, text: state.text, strategy: $("strategy").value, max_new_tokens: Number($("max-new").value) || 20 };
    b.temperature = Number($("temperature").value);
    if ($("top-k").value !== "0") b.top_k = Number($("top-k").value);
    if ($("top-p").value !== "1") b.top_p = Number($("top-p").value);
    if ($("seed").value !== "") b.seed = Number($("seed").value);
    b.beam_width = Number($("beam-width").value) || 4;
    return b;
  }
  async function regenerate() {
    if (!state.info || state.info.kind === "walkthrough" || state.info.generates === false || (state.run && state.run.arch === "encoder")) {
      $("gen-out").textContent = "This model does not generate (a walkthrough or an encoder).";
      return;
    }
    const seq = ++state.genSeq;
    $("gen-out").classList.add("pending");
    let g;
    try { g = await post("generate", genRequest()); } catch (e) { if (seq === state.genSeq) $("gen-out").textContent = e.message; return; }
    if (seq !== state.genSeq) return;
    state.gen = g;
    const n = g.strategy === "beam" ? g.beam.steps.length : g.steps.length;
    const s = $("gen-step");
    s.max = String(Math.max(0, n - 1));
    state.genStep = Math.min(state.genStep, Math.max(0, n - 1));
    if (g.strategy !== "beam" && state.genStep === 0) state.genStep = 0;
    s.value = String(state.genStep);
    $("stepper").hidden = n === 0;
    renderGeneration();
  }
  function renderGeneration() {
    const g = state.gen, k = state.genStep, out = $("gen-out");
    out.classList.remove("pending");
    out.replaceChildren();
    const ids = g.strategy === "beam" ? g.beam.steps[k][0].ids : g.ids;
    g.tokens.forEach((t, i) => {
      if (g.strategy === "beam" && i >= g.tokens.length) return;
      const cls = i < g.n_prompt ? "prompt" : "new" + (i === g.n_prompt + k ? " cur" : "");
      out.append(el("span", { class: cls, text: t }));
    });
    const settings = g.strategy === "sample" ? "sampled · seed " + g.seed + " · temperature " + g.temperature + " · top-k " + (g.top_k || "off") + " · top-p " + (g.top_p || "off")
      : g.strategy === "beam" ? "beam search · best: " + JSON.stringify(g.beam.text) : "greedy";
    out.append(el("div", { class: "sub", text: settings + " · output: " + JSON.stringify(g.text) + (g.stopped_at_eos ? " (stopped at EOS)" : "") }));
    const n = g.strategy === "beam" ? g.beam.steps.length : g.steps.length;
    $("gen-step-label").textContent = "step " + k + " of " + n;
    const view = $("gen-step-view");
    view.replaceChildren();
    if (g.strategy === "beam") { renderBeam(g, k); return; }
    $("beam").replaceChildren();
    const st = g.steps[k];
    view.append(el("p", {}, "Step " + k + ": the model reads " + st.context + " tokens and " + (g.strategy === "sample" ? "draws " : "chooses ") , chip({ shown: st.chosen_token, id: st.chosen }), g.strategy === "sample" ? " (kept " + st.kept + " tokens after the filters)" : ""));
    const chart = distChart(st, g.strategy === "sample");
    view.append(el("div", {}, chart, svgExportButtons(chart, "distribution-step-" + k)));
    if (st.draw) {
      const cdf = cdfChart(st.draw);
      view.append(el("p", { class: "draw", "data-u": String(st.draw.u) }, "The draw: u = " + st.draw.u.toFixed(6) + " from seed " + g.seed + " fell in the segment of ", chip({ shown: st.chosen_token, id: st.chosen }), " on the cumulative distribution (vocabulary order, as numpy's Generator.choice adds it up):"), el("div", {}, cdf, svgExportButtons(cdf, "cdf-step-" + k)));
    }
    if (state.run && state.run.arch === "encoder-decoder") crossView(g, k, view);
  }
  function distChart(st, sampled) {
    const W = 640, row = 22, top = st.top, Hh = row * top.length + 24;
    const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "dist" });
    s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
    s.append(svgEl("text", { x: 130, y: 14, fill: "#5b6673" }, sampled ? "grey: softmax p · blue: after temperature / top-k / top-p (q)" : "softmax p"));
    top.forEach((t, r) => {
      const y = 20 + r * row, chosen = t.id === st.chosen;
      const g = svgEl("g", { class: "row" + (chosen ? " chosen" : ""), "data-id": t.id, "data-p": t.p, "data-q": sampled ? t.q : "" });
      if (chosen) g.append(svgEl("rect", { x: 0, y: y, width: W, height: row - 2, fill: "#fff3cd" }));
      g.append(svgEl("text", { x: 120, y: y + 15, "text-anchor": "end" }, t.token));
      g.append(svgEl("rect", { x: 130, y: y + 3, width: Math.max(1, 380 * t.p), height: 7, fill: "#b7c0ca" }));
      if (sampled) g.append(svgEl("rect", { x: 130, y: y + 11, width: Math.max(t.q > 0 ? 1 : 0, 380 * t.q), height: 7, fill: "#2e6fb0" }));
      g.append(svgEl("text", { x: 520, y: y + 15, class: "p" }, pct(t.p) + (sampled ? " → " + pct(t.q) : "")));
      s.append(g);
    });
    return s;
  }
  function cdfChart(d) {
    const W = 900, Hh = 78, s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "cdf" });
    s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
    s.append(svgEl("rect", { x: 0, y: 10, width: W, height: 30, fill: "#eef2f7" }));
    d.segments.forEach((g, i) => {
      const x = g.start * W, w = Math.max(0.5, (g.end - g.start) * W), chosen = g.id === d.token;
      s.append(svgEl("rect", { x, y: 10, width: w, height: 30, fill: chosen ? "#f0ad4e" : i % 2 ? "#9ec5e8" : "#c6dbef", stroke: "#fff", "stroke-width": 0.5 }));
      if (w > 18) s.append(svgEl("text", { x: x + w / 2, y: 54, "text-anchor": "middle" }, g.token));
    });
    const ux = d.u * W;
    s.append(svgEl("line", { x1: ux, x2: ux, y1: 4, y2: 46, stroke: "#c0392b", "stroke-width": 2 }));
    s.append(svgEl("text", { x: ux > W - 120 ? ux - 4 : ux + 4, y: 72, fill: "#c0392b", "text-anchor": ux > W - 120 ? "end" : "start" }, "u = " + d.u.toFixed(4)));
    s.append(svgEl("text", { x: 2, y: 72, fill: "#5b6673" }, "0"));
    s.append(svgEl("text", { x: W - 2, y: 72, "text-anchor": "end", fill: "#5b6673" }, "1"));
    return s;
  }
  async function crossView(g, k, view) {
    const context = g.ids.slice(0, g.n_prompt + k);
    let r;
    try { r = await post("cross", { model: state.model, text: state.text, target: context }); } catch (e) { return; }
    if (state.gen !== g || state.genStep !== k) return;
    const L = r.layers.length, Hn = r.layers[0].length;
    const ls = el("select", { class: "cross-layer" }), hs = el("select", { class: "cross-head" });
    for (let l = 0; l < L; l++) ls.append(new Option("layer " + l, String(l)));
    hs.append(new Option("mean of heads", "mean"));
    for (let h = 0; h < Hn; h++) hs.append(new Option("head " + h, String(h)));
    ls.value = String(L - 1);
    const chips = el("p", { class: "src-attn" });
    function shade() {
      const rows = r.layers[Number(ls.value)];
      const w = hs.value === "mean" ? rows[0].map((_, j) => rows.reduce((a, row) => a + row[j], 0) / rows.length) : rows[Number(hs.value)];
      const top = Math.max(...w);
      chips.replaceChildren(...r.source.map((t, j) => {
        const c = chip(t);
        const alpha = 0.08 + 0.8 * w[j] / top;
        c.style.background = "rgba(46, 111, 176, " + alpha.toFixed(3) + ")";
        if (alpha > 0.5) c.style.color = "#fff";
        c.title = "cross-attention weight " + w[j];
        c.dataset.w = String(w[j]);
        return c;
      }));
    }
    ls.addEventListener("change", shade); hs.addEventListener("change", shade);
    shade();
    view.append(el("div", { class: "cross" }, el("p", {}, "Which source tokens the next word is read from: the cross-attention of the last decoder token, ", ls, " ", hs), chips));
  }
  function renderBeam(g, k) {
    const view = $("gen-step-view"), steps = g.beam.steps.slice(0, k + 1);
    const t = el("table", { class: "beam" }, el("tr", {}, el("th", { text: "#" }), el("th", { text: "hypothesis" }), el("th", { text: "log p" }), el("th", { text: "score" }), el("th")));
    g.beam.steps[k].forEach((h, r) => t.append(el("tr", {}, el("td", { text: r }), el("td", { class: "hyp", text: JSON.stringify(h.text) }), el("td", { text: h.logprob.toFixed(4), "data-logprob": h.logprob }), el("td", { text: h.score.toFixed(4) }), el("td", { text: h.finished ? "EOS" : "" }))));
    view.append(el("p", { text: "Step " + k + ": the beam keeps the " + g.beam.steps[k].length + " most likely hypotheses (summed log-probabilities); click a node to see the trace of its context." }), t);
    const colW = 150, rowH = 34, Hn = Math.max(...steps.map(s => s.length));
    const W = 110 + colW * steps.length, Hh = 20 + rowH * Hn;
    const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "tree" });
    s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
    s.append(svgEl("rect", { x: 4, y: 10, width: 90, height: 26, rx: 4, fill: "#eef2f7" }));
    s.append(svgEl("text", { x: 49, y: 27, "text-anchor": "middle" }, "prompt"));
    const best = g.beam.best.ids;
    const onBest = ids => ids.every((x, i) => best[i] === x);
    steps.forEach((nodes, c) => nodes.forEach((n, r) => {
      const x = 110 + c * colW, y = 10 + r * rowH;
      const px = c === 0 ? 94 : 110 + (c - 1) * colW + 130, py = c === 0 ? 23 : 10 + n.parent * rowH + 13;
      s.append(svgEl("path", { d: "M" + px + "," + py + " C" + (px + 10) + "," + py + " " + (x - 10) + "," + (y + 13) + " " + x + "," + (y + 13), fill: "none", stroke: onBest(n.ids) ? "#2e6fb0" : "#b7c0ca", "stroke-width": onBest(n.ids) ? 2 : 1 }));
      const g2 = svgEl("g", { class: "node", "data-step": c, "data-rank": r, style: "cursor:pointer" });
      g2.append(svgEl("rect", { x, y, width: 130, height: 26, rx: 4, fill: n.finished ? "#fde2e1" : onBest(n.ids) ? "#dcebf8" : "#f6f8fa", stroke: "#b7c0ca" }));
      g2.append(svgEl("text", { x: x + 6, y: y + 17 }, n.token + (n.finished ? " ⏹" : "")));
      g2.append(svgEl("text", { x: x + 124, y: y + 17, "text-anchor": "end", fill: "#5b6673" }, n.logprob.toFixed(2)));
      g2.append(svgEl("title", {}, "log p " + n.logprob + " · score " + n.score));
      g2.addEventListener("click", () => traceStep(n.ids.slice(0, -1), "beam step " + c + ", hypothesis " + r));
      s.append(g2);
    }));
    $("beam").replaceChildren(s, svgExportButtons(s, "beam-to-step-" + k));
    $("beam").scrollLeft = $("beam").scrollWidth;  // the newest step in view
  }
  function stepTo(k) {
    if (!state.gen) return;
    const n = state.gen.strategy === "beam" ? state.gen.beam.steps.length : state.gen.steps.length;
    state.genStep = Math.max(0, Math.min(n - 1, k));
    $("gen-step").value = String(state.genStep);
    renderGeneration();
  }
  $("gen-step").addEventListener("input", e => stepTo(Number(e.target.value)));
  $("gen-back").addEventListener("click", () => stepTo(state.genStep - 1));
  $("gen-forward").addEventListener("click", () => stepTo(state.genStep + 1));
  $("gen-first").addEventListener("click", () => stepTo(0));
  $("gen-last").addEventListener("click", () => stepTo(1e9));
  $("gen-trace").addEventListener("click", () => {
    const g = state.gen, k = state.genStep;
    if (!g) return;
    const context = g.strategy === "beam" ? g.beam.steps[k][0].ids.slice(0, -1) : g.ids.slice(0, g.n_prompt + k);
    traceStep(context, "generation step " + k);
  });
  function traceStep(context, what) {
    state.stepInput = state.run && state.run.arch === "encoder-decoder" ? { target: context } : { ids: context };
    const banner = $("step-banner");
    banner.hidden = false;
    banner.querySelector("span").textContent = "Showing the trace of " + what + ": the forward pass over its " + context.length + " tokens that predicts the next one. ";
    showTab("attention");
    update();
  }

  // -- interventions ---------------------------------------------------------------------------
  const headKey = (s, l, h) => s + "|" + key(l) + "|" + key(h);
  const how = () => app.querySelector("input[name=how]:checked").value;
  function toggleHead(s, l, h, on) {
    const k = headKey(s, l, h), [stack, kind] = s.split(".");
    if (on) state.ablated.set(k, { stack, kind, layer: l, head: h }); else state.ablated.delete(k);
    app.querySelectorAll(".thumb").forEach(t => { if (headKey(state.site, state.layer, Number(t.dataset.head)) === k) t.classList.toggle("ablated", on); });
    renderHeadButtons();
    intervene();
  }
  function renderHeadButtons() {
    const box = $("head-buttons"), run = state.run;
    if (!run) return;
    const maps = run.attention.filter(a => a.layer !== null && a.head !== null && /^(encoder|decoder)\.(self|cross)_attn$/.test(a.site));
    const out = [];
    for (const s of H.unique(maps.map(a => a.site))) {
      const here = maps.filter(a => a.site === s), layers = H.unique(here.map(a => a.layer)), heads = H.unique(here.map(a => a.head));
      const t = el("table", {}, el("caption", { text: s }), el("tr", {}, el("th"), ...heads.map(h => el("th", { text: "head " + h }))));
      for (const l of layers) t.append(el("tr", {}, el("th", { text: "layer " + l }), ...heads.map(h => {
        const b = el("button", { type: "button", class: "head-toggle" + (state.ablated.has(headKey(s, l, h)) ? " on" : ""), "data-site": s, "data-layer": l, "data-head": h, text: h });
        b.addEventListener("click", () => toggleHead(s, l, h, !state.ablated.has(headKey(s, l, h))));
        return el("td", {}, b);
      })));
      out.push(t);
    }
    if (!out.length) out.push(el("p", { class: "sub", text: "No model heads to change here (a walkthrough)." }));
    box.replaceChildren(...out);
  }
  app.querySelectorAll("input[name=how]").forEach(r => r.addEventListener("change", intervene));
  $("patch-text").addEventListener("input", () => { clearTimeout(state.patchTimer); state.patchTimer = setTimeout(intervene, 300); });
  $("clear-heads").addEventListener("click", () => { state.ablated.clear(); renderHeadButtons(); app.querySelectorAll(".thumb.ablated").forEach(t => t.classList.remove("ablated")); app.querySelectorAll(".thumb input.ablate").forEach(b => { b.checked = false; }); $("intervention").replaceChildren(); });
  async function intervene() {
    const box = $("intervention"), change = how();
    if (!state.ablated.size) { box.replaceChildren(el("p", { class: "sub", text: "Choose at least one head." })); return; }
    const body = input({ heads: Array.from(state.ablated.values()), how: change });
    if (change === "patch") {
      if (!$("patch-text").value.trim()) { box.replaceChildren(el("p", { class: "sub", text: "Type a second prompt to patch from." })); return; }
      body.patch_text = $("patch-text").value;
    }
    const seq = state.seq, mine = state.ivSeq = (state.ivSeq || 0) + 1;
    let r;
    try { r = await post("intervene", body); } catch (e) {
      if (mine === state.ivSeq) box.replaceChildren(el("p", { class: "problem", text: e.message }));
      return;
    }
    if (seq !== state.seq || mine !== state.ivSeq) return;  // a newer choice of heads is coming
    const names = r.heads.map(h => h.stack + "." + h.layer + "." + h.kind + ".head" + h.head).join(", ");
    const what = { zero: "zero-ablated", mean: "mean-ablated", patch: "patched from the second prompt" }[change];
    if (r.kind === "embedding") {
      box.replaceChildren(el("div", { class: "result" }, el("h3", { text: names + " " + what }), el("p", { text: "cosine(clean embedding, changed embedding) = " + r.cosine.toFixed(8) }), el("p", { text: "largest change of any encoder output: " + H.fmt(r.max_abs_change, 6) })));
      return;
    }
    const col = (title, rows, base, cls) => {
      const t = nextTable(rows, base ? ["Δ logit"] : []);
      if (base) Array.from(t.querySelectorAll("tr")).slice(1).forEach((tr, i) => {
        const d = rows[i].logit - base[i].logit;
        tr.append(el("td", { class: d > 0 ? "up" : d < 0 ? "down" : "", text: (d > 0 ? "+" : "") + H.fmt(d, 4) }));
      });
      return el("div", { class: cls }, el("h3", { text: title }), el("p", { class: "sub", text: "next token after position " + r.position }), t);
    };
    const cols = [col("clean", r.clean, null, "clean"), col(what, r.changed, r.clean, "changed")];
    if (r.source) cols.push(col("the second prompt", r.source, null, "source"));
    if (r.continuation) {
      cols[0].append(el("p", {}, el("b", { text: "greedy: " }), el("span", { class: "cont", text: JSON.stringify(r.continuation.clean) })));
      cols[1].append(el("p", {}, el("b", { text: "greedy: " }), el("span", { class: "cont", text: JSON.stringify(r.continuation.changed) })));
    }
    const summary = el("p", { class: "summary sub", text: names + " " + what + " · largest logit change anywhere: " + H.fmt(r.max_abs_change, 6) });
    box.replaceChildren(summary, ...cols);
    box.dataset.done = String(Date.now());
  }

  // -- compare ---------------------------------------------------------------------------------
  $("model-b").addEventListener("change", compare);
  $("text-b").addEventListener("input", () => { clearTimeout(state.cmpTimer); state.cmpTimer = setTimeout(compare, 250); });
  async function pane(title, body, wantName, wantSite, wantLayer, wantHead) {
    const div = el("div", { class: "pane" }, el("h3", { text: title }));
    let run;
    try { run = await post("run", body); } catch (e) { div.append(el("p", { class: "problem", text: e.message })); return div; }
    for (const [stack, toks] of Object.entries(run.tokens)) div.append(el("p", {}, el("b", { text: stack + ": " }), ...toks.map(t => chip(t))));
    const o = run.output;
    if (o.kind === "next") div.append(nextTable(o.top.slice(0, 5)));
    if (o.kind === "translation") div.append(el("p", { class: "translation", text: "→ " + o.text }));
    if (o.kind === "embedding") div.append(el("p", { text: "embedding: " + o.first.slice(0, 4).map(x => num(x, 4)).join(", ") + ", …" }));
    const a = run.attention.find(x => x.name === wantName) || run.attention.find(x => x.site === wantSite && x.layer === wantLayer && x.head === wantHead) || run.attention[0];
    if (a) {
      const r = await post("attention", Object.assign({}, body, { name: a.name }));
      const box = el("div");
      box.innerHTML = r.html;
      div.append(box);
      requestAnimationFrame(() => drawMaps(box, r.maps, a.name, null));
    }
    return div;
  }
  async function compare() {
    if (!state.run) return;
    const seq = state.seq, mine = state.cmpSeq = (state.cmpSeq || 0) + 1;
    const bModel = $("model-b").value, bText = $("text-b").value || state.text;
    const a = pane("A: " + state.model + " · " + JSON.stringify(state.text), input(), state.mapName, state.site, state.layer, state.head);
    const b = pane("B: " + bModel + " · " + JSON.stringify(bText), { model: bModel, text: bText }, state.mapName, state.site, state.layer, state.head);
    const panes = await Promise.all([a, b]);
    if (seq !== state.seq || mine !== state.cmpSeq) return;  // a newer comparison is coming
    $("compare").replaceChildren(...panes);
  }

  // -- exports of the run ----------------------------------------------------------------------
  async function download(action, name) {
    const r = await fetch("/api/" + action, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(input()) });
    if (!r.ok) { problem((await r.json()).error); return; }
    H.download(name, await r.blob());
  }
  $("export-report").addEventListener("click", () => download("report", "glassformer-" + state.model + ".html"));
  $("export-trace").addEventListener("click", () => download("trace", "glassformer-" + state.model + "-trace.json"));

  loadModels().catch(e => problem("Could not list the models: " + e.message));
})();
