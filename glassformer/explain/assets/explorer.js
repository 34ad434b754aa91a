// The live explorer: the static report's front end (report.css, heatmap.js) fetching its data
// from `glassformer serve` instead of reading it inlined. Typing re-runs the model (one run at a time);
// every view asks the server for what it shows, when it is shown. Text from the server goes in
// as text (textContent); the only HTML inserted is the report's own cards and tables, which
// the server escapes (explain/html_pieces.py).
// Reading conventions, the same in every view: numbers to 3 significant digits (the exact value
// on hover and in exports); token ids muted ("#12"), probabilities as percentages; colours
// white = 0, blue = high or positive, red = negative; a decoder's row i "reads" token i and
// "predicts" token i + 1. Controls that do not apply are disabled, their tooltip says why; an
// error clears every result it invalidates.
(function () {
  "use strict";
  const H = window.glassformerHeatmap;
  const $ = id => document.getElementById(id);
  const app = $("app"), tip = app.querySelector(".gf-tip");
  const REGENERATE = 250, BADGE_PAUSE_MS = 600;
  const state = {
    models: [], model: null, info: null, text: "", run: null, seq: 0, stepInput: null,
    site: null, layer: null, head: null, mapName: null, mapData: null, tab: "attention",
    ablated: new Map(), gen: null, genStep: 0, genSeq: 0, typedAt: null,
    position: null, crossRow: null, beamNode: null, axes: null,
  };
  // Latencies from the last keystroke to the attention map drawn (read by the benchmark).
  window.gfLatency = [];

  // -- small helpers ---------------------------------------------------------------------------
  const el = H.el;  // heatmap.js: an element with attributes and children
  const NS = H.svgNamespace();
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // Numbers for reading: 3 significant digits, a true minus sign; `exact` for titles and exports.
  const sig = v => typeof v === "string" ? v : H.fmt(v, 3).replace(/^-/, "−");  // as the report rounds
  const exact = v => typeof v === "string" ? v : String(v);
  const pct = p => typeof p === "string" ? p : sig(100 * p) + "%";
  const plural = (n, one, many) => n + " " + (n === 1 ? one : many || one + "s");
  const numEl = (v, text, cls) => el("span", { class: cls || "num", text: text || sig(v), title: exact(v) });
  function chip(t, cls) {
    const c = el("span", { class: "tok" + (cls ? " " + cls : ""), text: t.shown });
    if (t.id !== null && t.id !== undefined) {
      c.append(el("small", { class: "id", text: t.id }));  // shown as "#12" (explorer.css)
      c.title = "token id " + t.id + ": " + JSON.stringify(t.piece !== undefined ? t.piece : t.shown);
    }
    return c;
  }
  function status(text) { $("status").textContent = text; }
  function problem(text) {
    $("problem").hidden = !text;
    $("problem").textContent = text || "";
  }
  // A control that does not apply: disabled, and its tooltip (and its label's) says why.
  function applies(e, why, help) {
    e.disabled = !!why;
    const label = e.closest("label");
    for (const x of label ? [e, label] : [e]) x.title = why || help || "";
    if (label) label.classList.toggle("off", !!why);
  }
  // A table's cells to 3 significant digits; the exact value stays in the title.
  function roundCells(box) {
    box.querySelectorAll("table.mat td[title]").forEach(td => {
      const x = Number(td.title), shown = Number(td.textContent);
      if (td.title.trim() === "" || !Number.isFinite(x) || !Number.isFinite(shown) || Number.isInteger(x)) return;
      td.textContent = sig(x);
    });
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
  // Draw every heatmap placeholder (.hm) of a server answer {html, maps}; tables rounded.
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
    roundCells(container);
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
    state.typedAt = null;
    state.ablated.clear();
    state.position = null;
    state.neuronAt = null;
    $("neuron").hidden = true;
    $("latency").textContent = "";
    $("step-banner").hidden = true;
    clearGeneration();
    $("intervention").replaceChildren();
    let info;
    status("loading the model…");
    try {
      info = await post("load", { model: id });  // loads it on the server: its sizes, or why not
    } catch (e) {  // a folder that cannot be loaded: say why, show nothing of another model
      state.info = null;
      state.seq++;
      clearRun();
      problem(e.message);
      applies($("text"), "this model cannot be loaded: " + e.message);
      $("model-info").textContent = (state.models.find(m => m.id === id) || {}).description || "";
      app.dispatchEvent(new CustomEvent("gf-model", { detail: null }));  // timelapse.js
      return;
    }
    state.info = info;
    app.dispatchEvent(new CustomEvent("gf-model", { detail: info }));  // timelapse.js: the Training tab
    $("max-new").max = String(info.max_len || 4096);
    if (info.arch === "encoder-decoder") $("max-new").value = String(info.max_len);
    const fixed = info.kind === "walkthrough";
    const t = $("text");
    applies(t, fixed ? "a walkthrough runs the article's own input: choose a model to type" : "");
    if (fixed) t.value = info.text || "";
    else if (text) t.value = text;
    else {
      t.value = guessText(info);
      if (info.probe && t.value === info.probe && info.probe_head) state.want = info.probe_head;  // its induction head
    }
    state.text = t.value;
    $("text-b").value = "";  // B reads A's text until one of its own is typed
    $("model-info").textContent = (info.description || "") + (info.summary ? " · " + info.summary : "");
    generateControls();
    interveneControls();
    await update();
  }
  function guessText(info) {
    if (info.id === "hello-world-model") return "hello world";
    if (info.probe) return info.probe;  // the text its training time-lapse followed
    return DEFAULT_TEXT[info.arch] || "Hello world.";
  }
  $("model").addEventListener("change", e => chooseModel(e.target.value));
  // timelapse.js: the head the next run's Attention tab opens on ({site, layer, head})
  app.addEventListener("gf-pick-head", e => { state.want = e.detail; });

  // -- typing: the run -------------------------------------------------------------------------
  // A key press runs the model at once when no run is under way; keys pressed during a run wait
  // for it to end, and then only the newest text runs (no fixed delay, and never more than one
  // typing run at a time on the server).
  let typing = null, typedAgain = false;
  function runTyped() {
    if (typing) { typedAgain = true; return; }
    typing = update().finally(() => {
      typing = null;
      if (typedAgain) { typedAgain = false; runTyped(); }
    });
  }
  $("text").addEventListener("input", () => {
    state.typedAt = performance.now();
    state.text = $("text").value;
    state.stepInput = null;
    $("step-banner").hidden = true;
    runTyped();
  });
  $("back-to-text").addEventListener("click", () => {
    state.stepInput = null;
    state.typedAt = null;
    $("step-banner").hidden = true;
    update();
  });

  // Everything shown of a run, gone (an error, or a model that cannot be loaded).
  function clearRun(why) {
    state.run = null;
    state.mapData = null;
    state.axes = null;
    ["tokens", "output", "map", "heads-grid", "steps", "compare", "head-buttons", "intervention", "att-effect"].forEach(x => $(x).replaceChildren());
    $("neuron").hidden = true;
    $("heads-grid").hidden = true;
    $("att-effect").hidden = true;
    $("tab-attention").querySelector(".picker").hidden = true;
    if (why) $("map").append(el("p", { class: "sub", text: why }));
    $("badge").textContent = "fidelity: —";
    $("badge").className = "badge";
    $("latency").textContent = "";
    status("");
    clearGeneration();
  }
  async function update() {
    const seq = ++state.seq, typedAt = state.typedAt;  // the key press behind this run, or null
    app.classList.add("busy");
    status("running…");
    let run;
    try {
      run = await post("run", input());
    } catch (e) {
      if (seq !== state.seq) return;
      clearRun("No tokens, maps or output: the model could not run on this input (the message above says why).");  // nothing of the last input stays
      problem(e.message);
      app.classList.remove("busy");
      if (typedAgain) return;  // a newer text runs next: the page is not ready for it yet
      app.dataset.ready = String(seq);
      if (state.tab === "generate" && !state.stepInput) regenerate();
      return;
    }
    if (seq !== state.seq) return;
    problem(null);
    state.run = run;
    renderTokens(run);
    renderOutput(run);
    setupPickers(run);
    positionSelects();
    await drawAttention(seq);
    if (seq !== state.seq) return;
    app.classList.remove("busy");
    const n = Object.values(run.tokens).map(t => t.length).join(" + ");
    status(plural(run.n_steps, "step") + " recorded · " + (n || 0) + " tokens · model ran in " +
      Math.round(run.elapsed_ms) + " ms on the server (" + plural(run.cache.runs, "run") + " cached, " +
      run.cache.mb + " MB)" + (run.view ? " · values: " + run.engine : ""));
    if (state.typedAt === typedAt) state.typedAt = null;  // a newer key press waits for its run
    if (typedAt !== null) {
      const ms = performance.now() - typedAt;
      window.gfLatency.push(ms);
      $("latency").textContent = "keystroke → attention map: " + Math.round(ms) + " ms";
    } else $("latency").textContent = "";  // no key press behind this run: no latency to tell
    // A newer text runs next: nothing more for this one (its badge, steps, interventions would
    // only hold up the next run on the server), and the page is not ready yet.
    if (typedAgain) return;
    app.dataset.ready = String(seq);
    // A float32 view's badge runs the float64 reference: it waits for a pause in typing, so that
    // it never holds up the next key press's map (a newer run cancels it).
    if (run.view) {
      $("badge").textContent = "fidelity: checked when typing pauses…";
      setTimeout(() => { if (seq === state.seq) badge(seq); }, BADGE_PAUSE_MS);
    } else badge(seq);
    if (state.tab === "steps") renderSteps();
    if (state.ablated.size) intervene();
    if (state.tab === "compare") compare();
    if (state.tab === "generate" && !state.stepInput) regenerate();
    else if (!state.stepInput) clearGeneration();  // made for another text: made again when shown
    renderHeadButtons();
  }

  function renderTokens(run) {
    const out = [];
    for (const [stack, toks] of Object.entries(run.tokens)) {
      const name = { encoder: run.arch === "encoder-decoder" ? "source (encoder)" : "tokens (encoder)", decoder: run.arch === "encoder-decoder" ? "decoder input" : "tokens" }[stack];
      out.push(el("p", { class: "stack-" + stack }, el("b", { text: name + ": " }), ...toks.map(t => chip(t))));
    }
    const u = run.unknown.length;
    if (u) out.push(el("p", { class: "note", text: (u === 1 ? "1 unknown piece" : u + " unknown pieces") + " mapped to the unknown token: " + run.unknown.slice(0, 8).join(", ") }));
    $("tokens").replaceChildren(...out);
  }
  function nextTable(top, extra) {
    const t = el("table", { class: "next" }, el("tr", {}, el("th", { text: "token" }), el("th", { text: "p" }), el("th", { text: "logit" }), ...(extra || []).map(x => el("th", { text: x }))));
    for (const r of top) t.append(el("tr", { "data-id": r.id }, el("td", { class: "t" }, chip({ shown: r.token, id: r.id })), el("td", { class: "p", text: pct(r.p), title: exact(r.p) }), el("td", { text: sig(r.logit), title: exact(r.logit) })));
    return t;
  }
  function renderOutput(run) {
    const o = run.output, box = $("output");
    const prob = p => el("span", { class: "p", text: pct(p), title: "p = " + exact(p) });
    if (o.kind === "next") box.replaceChildren(el("p", { class: "next-inline" }, el("b", { text: "Next token: " }), ...o.top.slice(0, 6).flatMap(t => [chip({ shown: t.token, id: t.id }), el("span", { class: "p", text: pct(t.p), title: "p = " + exact(t.p) + ", logit " + exact(t.logit) })])));
    else if (o.kind === "translation") {  // its own greedy translation, or a prefix the Generate tab chose
      const what = o.greedy === false ? "Decoder input, chosen on the Generate tab: " : "Translation (greedy): ";
      box.replaceChildren(el("p", {}, el("b", { text: what }), el("span", { class: "translation", text: o.text })));
    }
    else if (o.kind === "embedding") box.replaceChildren(el("p", { title: o.first.map(exact).join(", ") }, el("b", { text: "Sentence embedding: " }), o.dims + " dimensions, unit length (mean of the encoder outputs): " + o.first.slice(0, 4).map(sig).join(", ") + ", …"));
    else if (o.kind === "class") box.replaceChildren(el("p", { class: "class" }, el("b", { text: "Class: " }), el("span", { class: "label", text: o.label + " " }), prob(o.probability), el("span", { class: "sub", text: " · every class: " }), ...Object.entries(o.probabilities).flatMap(([n, p]) => [el("span", { class: "cls", text: n + " " }), prob(p), " "])));
    else box.replaceChildren(el("p", {}, el("b", { text: "Walkthrough: " }), o.text + " — the article's fixed input; every step is in the tabs below."));
  }

  // -- fidelity badge --------------------------------------------------------------------------
  // The steps compared, out of the run's own count (the status line's "N steps recorded"): a
  // step is compared where both engines record it with one shape.
  const over = f => " over " + f.torch.compared + " of the " + plural(f.steps, "step") + " recorded";
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
      if (f.torch.tolerance !== undefined) {  // a float32 view: what is shown against the float64 reference
        parts.push("float32 view vs NumPy float64: max |Δ| / max |x| " + H.fmt(f.torch.max_rel_diff, 2) + over(f));
        ok = f.torch.max_rel_diff <= f.torch.tolerance;
        b.title = "relative: largest at " + f.torch.where_rel + "; absolute: " + exact(f.torch.max_abs_diff) + " at " + f.torch.where;
      } else {
        parts.push("PyTorch vs NumPy: max |Δ| " + H.fmt(f.torch.max_abs_diff, 2) + over(f));
        ok = f.torch.max_abs_diff < 1e-9;
        b.title = "largest at " + f.torch.where + " (" + exact(f.torch.max_abs_diff) + ")";
      }
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
  const NO_SITE = {  // the attentions a model does not have, and why
    decoder: { "encoder.self_attn": "none: a decoder-only model has no encoder", "decoder.cross_attn": "none: a decoder-only model has no encoder to read from" },
    encoder: { "decoder.self_attn": "none: an encoder has no decoder", "decoder.cross_attn": "none: an encoder has no decoder" },
  };
  function setupPickers(run) {
    const maps = run.attention;
    $("tab-attention").querySelector(".picker").hidden = !maps.length;
    if (!maps.length) { state.mapName = null; $("map").replaceChildren(el("p", { class: "sub", text: "This run has no attention maps." })); return; }
    const sites = H.unique(maps.map(a => a.site));
    const want = state.want;  // a head asked for from elsewhere (the Training tab), once
    state.want = null;
    const keep = want ? want.site : site.value || state.site;
    site.replaceChildren(...sites.map(s => new Option((s || "the article's heads") + " · " + maps.find(a => a.site === s).kind, s)));
    for (const [s, why] of Object.entries(NO_SITE[run.arch] || {})) {
      const o = new Option(s + " · " + why, s);
      o.disabled = true;
      o.title = why;
      site.append(o);
    }
    site.value = sites.includes(keep) ? keep : sites[0];
    pickLayerHead(want && want.site === site.value ? want : null);
  }
  function pickLayerHead(want) {  // want: {layer, head} to choose, else the choice stays
    const maps = state.run.attention, here = maps.filter(a => a.site === site.value);
    H.fill(layer, H.unique(here.map(a => key(a.layer))), "layer", want ? key(want.layer) : undefined);
    const inLayer = here.filter(a => key(a.layer) === layer.value);
    H.fill(head, H.unique(inLayer.map(a => key(a.head))), "head", want ? key(want.head) : undefined);
    const chosen = inLayer.find(a => key(a.head) === head.value) || here[0];
    state.site = site.value; state.layer = chosen.layer; state.head = chosen.head;
    state.mapName = chosen.name;
    $("shown").textContent = (chosen.label ? chosen.label + " · " : "") + chosen.name;
    const fixed = state.run.arch === "walkthrough" || chosen.head === null;
    const one = w => fixed ? "the article's worked example: its attention is fixed, no " + w + " to choose" : "this attention has one " + w;
    if (layer.disabled) layer.title = one("layer"); else layer.title = "";
    if (head.disabled) head.title = one("head"); else head.title = "";
    applies($("all-heads"), fixed ? "a walkthrough's attention has no heads to lay side by side" : inLayer.length < 2 ? "this layer has one head" : "", "every head of this layer side by side");
    applies($("ablate-head"), fixed ? "a walkthrough's steps are fixed: nothing to ablate (choose a model)" : "", "switch this head off (as chosen on the Ablate & patch tab) and see what it changes");
    $("ablate-head").checked = !fixed && state.ablated.has(headKey(state.site, state.layer, state.head));
    state.crossRow = null;
  }
  [site, layer, head].forEach(s => s.addEventListener("change", () => {
    pickLayerHead();
    drawAttention(state.seq);
  }));
  $("all-heads").addEventListener("change", () => drawAttention(state.seq));
  $("ablate-head").addEventListener("change", e => toggleHead(state.site, state.layer, state.head, e.target.checked));

  // Decoder positions: the token each reads, and the one it predicts (the next; at the end of
  // a typed text the model's top guess, "?" where the page does not know it). A translation
  // that ended with the end token never used the prediction of the position reading it: unused.
  function predictions(run) {
    const toks = run && run.tokens && run.tokens.decoder;
    if (!toks || run.arch === "walkthrough") return null;
    const o = run.output, guess = o.kind === "next" && o.top && o.top.length ? o.top[0] : null;
    const ended = o.kind === "translation" && o.stopped_at_eos;
    return toks.map((t, i) => ended && i === toks.length - 1 ? { reads: t.shown, unused: true } : {
      reads: t.shown,
      predicts: i + 1 < toks.length ? toks[i + 1].shown : guess ? guess.token : "?",
      guess: i + 1 >= toks.length && !!guess,
    });
  }
  const rowLabel = r => r.unused ? "reads " + r.reads + " (unused: the translation ended)" : r.predicts === undefined ? r.reads : "reads " + r.reads + " → predicts " + r.predicts + (r.guess ? " (guess)" : "");
  // The axes of one attention map: rows (queries) and columns (keys), or null (a walkthrough).
  function axesOf(entry) {
    const run = state.run;
    if (!entry || !run || run.arch === "walkthrough" || entry.shape.length !== 2) return null;
    const dec = entry.site.startsWith("decoder."), cross = entry.site === "decoder.cross_attn";
    const enc = (run.tokens.encoder || []).map(t => ({ reads: t.shown }));
    const rows = dec ? predictions(run) : enc;
    const cols = (dec && !cross ? run.tokens.decoder : run.tokens.encoder) || [];
    if (!rows || rows.length !== entry.shape[0] || cols.length !== entry.shape[1]) return null;
    return { rows, cols: cols.map(t => t.shown), cross, causal: dec && !cross, what: entry.name.split(".").pop() };
  }
  function cellTip(ax, i, j, value, full) {
    const r = ax.rows[i];
    const q = "query (row) " + i + ": " + (r.unused ? rowLabel(r) : r.predicts === undefined ? "“" + r.reads + "”" :
      "reads “" + r.reads + "” → predicts “" + r.predicts + "”" + (r.guess ? " (the model's top guess)" : ""));
    const k = "key (column) " + j + ": “" + ax.cols[j] + "”" + (ax.cross ? " (source token)" : "") +
      (ax.causal && j > i ? " · later than the query: hidden by the causal mask" : "");
    const v = value === -Infinity ? ax.what + "[" + i + ", " + j + "]: masked (−∞ before the softmax)" :
      ax.what + "[" + i + ", " + j + "] ≈ " + sig(value) + " · exact: " + full;
    return q + "\n" + k + "\n" + v;
  }
  function axesCaption(ax) {
    if (ax.cross) return "Row i, the query: decoder position i, which reads its token and predicts the next. Column j, the key: source token j. The source tokens below show the weights of the row under the mouse (or the row last clicked).";
    if (ax.causal) return "Row i, the query: position i, which reads its token and predicts the next. Column j, the key: the token at position j; only j ≤ i (the causal mask hides later tokens).";
    return "Row i, the query: token i. Column j, the key: token j. In an encoder every token sees every other.";
  }
  // Labels, tooltips and source weights on a drawn map (a canvas heatmap or a table).
  function readable(box, ax) {
    const canvas = box.querySelector(".hm canvas"), table = box.querySelector("table.mat");
    const fig = box.querySelector("figure");
    if (fig) fig.insertBefore(el("p", { class: "axes sub", text: axesCaption(ax) }), fig.firstChild.nextSibling);
    const R = ax.rows.length, C = ax.cols.length, v = H.values(state.mapData);
    const hoverRow = i => { if (ax.cross) sourceWeights(ax, i); };
    const leave = () => { if (ax.cross) sourceWeights(ax, null); };
    if (canvas) {
      const corner = box.querySelector(".hm-corner");
      if (corner) corner.append(el("span", { class: "corner", text: "query ↓ · key →" }));
      const cell = e => [Math.max(0, Math.min(R - 1, Math.floor(e.offsetY * R / canvas.clientHeight))),
        Math.max(0, Math.min(C - 1, Math.floor(e.offsetX * C / canvas.clientWidth)))];
      canvas.addEventListener("mousemove", e => {  // after heatmap.js's own: its words replaced
        const [i, j] = cell(e), x = v[i * C + j];
        tip.textContent = cellTip(ax, i, j, x, H.fmt(x, 7));
        hoverRow(i);
      });
      canvas.addEventListener("mouseleave", leave);
    }
    if (table) {
      const trs = Array.from(table.querySelectorAll("tr"));
      const corner = trs[0] && trs[0].querySelector("th");
      if (corner && !trs[0].querySelector("td")) { corner.textContent = "query ↓ · key →"; corner.className = "corner"; }
      trs.filter(tr => tr.querySelector("td")).forEach((tr, i) => {
        const th = tr.querySelector("th");
        if (th && i < R) { th.textContent = rowLabel(ax.rows[i]); th.title = "row " + i + ", the query"; }
        Array.from(tr.querySelectorAll("td")).forEach((td, j) => {
          if (i < R && j < C) td.title = cellTip(ax, i, j, td.classList.contains("masked") ? -Infinity : v[i * C + j], td.title);
        });
        tr.addEventListener("mouseenter", () => hoverRow(i));
      });
      table.addEventListener("mouseleave", leave);
    }
    if (ax.cross) sourceWeights(ax, null);
  }
  function weightChip(t, w, shade) {
    const c = el("span", { class: "tok weighted", "data-w": String(w), title: "cross-attention weight " + exact(w) + (t.id !== null && t.id !== undefined ? " · token id " + t.id : "") },
      el("span", { class: "t" }, t.shown, t.id !== null && t.id !== undefined ? el("small", { class: "id", text: t.id }) : null),
      el("span", { class: "bar" }, el("i", { style: "width:" + Math.max(0, Math.min(100, 100 * w)).toFixed(1) + "%" })),
      el("span", { class: "wp", text: pct(w) }));
    if (shade !== undefined) {
      c.style.background = "rgba(46, 111, 176, " + shade.toFixed(3) + ")";
      if (shade > 0.5) c.classList.add("dark");
    }
    return c;
  }
  // The cross-attention of one decoder row on the source chips (hovered: that row; else the
  // row last clicked; else the last row that predicts a known token).
  function sourceWeights(ax, hovered) {
    const box = $("map"), R = ax.rows.length, C = ax.cols.length;
    if (!state.mapData || !state.run) return;
    let i = hovered !== null ? hovered : state.crossRow;
    if (i === null || i === undefined) {
      i = R - 1;
      while (i > 0 && (ax.rows[i].predicts === "?" || ax.rows[i].unused)) i--;
    }
    const v = H.values(state.mapData), src = state.run.tokens.encoder;
    let p = box.querySelector(".src-weights");
    if (!p) { p = el("div", { class: "src-weights" }); box.append(p); }
    p.dataset.row = String(i);
    p.replaceChildren(el("p", {}, el("b", { text: "Source tokens, by the weight of row " + i + " (" + rowLabel(ax.rows[i]) + "):" })),
      el("p", { class: "chips" }, ...src.map((t, j) => weightChip(t, v[i * C + j]))));
  }

  function clearMap(text) {
    $("map").replaceChildren(el("p", { class: "sub", text }));
    delete $("map").dataset.name;
    state.mapData = null;
    $("neuron").hidden = true;
    $("heads-grid").hidden = true;
  }
  async function drawAttention(seq) {
    if (!state.mapName) return;
    const name = state.mapName;
    let a;
    try { a = await post("attention", input({ name })); } catch (e) {
      if (seq === state.seq && name === state.mapName) { clearMap("No map: " + e.message); problem(e.message); }
      return;
    }
    if (seq !== state.seq || name !== state.mapName) return;
    const box = $("map"), entry = state.run.attention.find(x => x.name === name), ax = axesOf(entry);
    box.innerHTML = a.html;
    state.mapData = a.values ? matrixOf(a.values, a.rows, a.cols) : Object.values(a.maps)[0];
    state.axes = ax;
    const maps = {};  // drawn with the rows' reading labels; the exports keep the tokens
    for (const [k, m] of Object.entries(a.maps)) maps[k] = ax && m.rows && m.rows.length === ax.rows.length ? Object.assign({}, m, { rows: ax.rows.map(rowLabel) }) : m;
    drawMaps(box, maps, name, a.neuron ? (i, j) => {
      state.crossRow = i;
      if (ax && ax.cross) sourceWeights(ax, null);
      measureAt(ax, i);
      neuron(name, i, j);
    } : null);
    if (ax) readable(box, ax);
    box.dataset.name = name;
    if ($("all-heads").checked && !$("all-heads").disabled) await headsGrid(seq); else $("heads-grid").hidden = true;
    const [i, j] = state.neuronAt || [-1, -1];  // the same cell of the new map, if it has one
    if (!$("neuron").hidden && a.neuron && i < a.shape[0] && j < a.shape[1]) neuron(name, i, j);
    else $("neuron").hidden = true;
  }
  const attExports = $("tab-attention").querySelector(".picker .exports");
  attExports.replaceWith(exportButtons(() => state.mapData, () => (state.mapName || "map").replace(/[^\w.-]+/g, "_")));

  async function headsGrid(seq) {
    const grid = $("heads-grid");
    let r;
    try { r = await post("heads", input({ site: state.site, layer: state.layer })); } catch (e) {
      if (seq === state.seq) { grid.replaceChildren(); grid.hidden = true; problem(e.message); }
      return;
    }
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
        hm, el("div", { text: "head " + key(h.head) }), el("label", { title: "switch this head off and see what it changes (below the map)" }, box, " ablate"));
      t.addEventListener("click", () => { head.value = key(h.head); pickLayerHead(); drawAttention(state.seq); });
      requestAnimationFrame(() => H.draw(hm, h.map, tip, { fit: 120 }));
      return t;
    }));
  }

  // Blue = positive, red = negative, white = 0: the maps' convention, on a server table.
  function recolour(table) {
    const tds = Array.from(table.querySelectorAll("td[title]")), vals = tds.map(td => Number(td.title));
    const scale = Math.max(0, ...vals.filter(Number.isFinite).map(Math.abs)) || 1;
    tds.forEach((td, k) => {
      if (!Number.isFinite(vals[k])) return;
      const t = Math.max(-1, Math.min(1, vals[k] / scale)), end = t < 0 ? [178, 24, 43] : [33, 102, 172];
      td.style.background = "rgb(" + end.map(c => Math.round(255 + (c - 255) * Math.abs(t))).join(",") + ")";
      td.classList.toggle("dark", Math.abs(t) > 0.55);
    });
  }
  async function neuron(name, i, j) {
    state.neuronAt = [i, j];
    let n;
    try { n = await post("neuron", input({ name, i, j })); } catch (e) { $("neuron").hidden = true; problem(e.message); return; }
    if (state.neuronAt[0] !== i || state.neuronAt[1] !== j || state.mapName !== name) return;
    const panel = $("neuron"), ax = state.axes;
    panel.hidden = false;
    const m = matrixOf([n.q, n.k, n.product], ["q", "k", "q×k"], n.q.map((_, d) => String(d)));
    const tbl = el("div");
    tbl.innerHTML = n.html;
    tbl.querySelectorAll("table").forEach(recolour);
    roundCells(tbl);
    const query = ax && ax.rows[n.i] ? rowLabel(ax.rows[n.i]) : n.query;
    const lines = [
      el("h3", { text: "Neuron view: " + n.name + ", query (row) " + n.i + " (" + query + ") · key (column) " + n.j + " (" + n.key + ")" }),
      el("p", { class: "sub", text: (n.says || "q is row " + n.i + " of Q, k is row " + n.j + " of K") + "; their product dimension by dimension, summed, is the score. Colours: blue = positive, red = negative, white = 0 (as in the maps, where blue = high)." }),
      n.about ? el("p", { class: "sub about", text: n.about }) : null,
      tbl,
      el("p", { class: "sum", "data-sum": String(n.sum) }, "Ω[" + n.i + "," + n.j + "] = Σ_d q_d·k_d = ", numEl(n.sum), n.scores !== undefined ? el("span", {}, "   (the trace's scores: ", numEl(n.scores), ")") : null),
    ];
    if (n.scaled !== undefined) lines.push(el("p", { class: "sum" }, "÷ √c = √" + n.D + " → ", numEl(n.scaled)));
    if (n.A !== undefined) lines.push(n.masked ? el("p", { class: "sum", "data-a": String(n.A), text: "masked: this key is hidden from this query (−∞ before the softmax), A = 0" })
      : el("p", { class: "sum", "data-a": String(n.A) }, "A[" + n.i + "," + n.j + "] = softmax of row " + n.i + " at column " + n.j + " = ", numEl(n.A)));
    lines.push(exportButtons(() => m, () => "neuron-" + n.name + "-" + n.i + "-" + n.j));
    panel.replaceChildren(...lines.filter(Boolean));
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
            el("summary", {}, el("b", { class: "group-title", text: x.title || x.group }), " ", el("code", { text: x.group }), el("span", { class: "shape", text: " " + plural(x.count, "step") })),
            ...build(x.items, false));
          d.open = small || top;  // a block's steps load when it opens
          return d;
        }
        const slot = el("article", { class: "step pending", "data-name": x.step },
          el("header", {}, el("h3", { class: "step-title", text: x.title || x.step }), el("span", { class: "eq", text: x.equation })),
          el("p", { class: "shape" }, el("code", { class: "name", text: x.step }), " · shape " + x.shape.join(" × ") + " · loading…"));
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
  $("strategy").addEventListener("change", generateControls);
  $("generate").addEventListener("click", regenerate);
  let genTimer = 0;
  function scheduleGenerate() { clearTimeout(genTimer); genTimer = setTimeout(regenerate, REGENERATE); }
  const GEN_HELP = {
    temperature: "divides the logits before the softmax: below 1 sharper, above 1 flatter",
    "top-k": "keep only the k likeliest tokens (0: off)", "top-p": "keep the fewest likeliest tokens whose probability reaches p (1: off)",
    seed: "the random numbers of the draws: the same seed, the same text", "beam-width": "hypotheses kept at each step",
  };
  function noGeneration() {  // why this model does not generate, or ""
    const info = state.info;
    if (!info) return "no model is loaded";
    if (info.kind === "walkthrough") return "a walkthrough has fixed steps: choose a model to generate";
    if (info.arch === "encoder" || info.generates === false) return "an encoder has no decoder: it does not generate";
    return "";
  }
  function generateControls() {  // each control enabled only for the strategy it belongs to
    const none = noGeneration(), s = $("strategy").value;
    for (const id of ["strategy", "max-new", "generate"]) applies($(id), none);
    for (const id of ["temperature", "top-k", "top-p", "seed"]) applies($(id), none || (s !== "sample" ? "a sampling option: only for strategy “sample” (" + s + " chooses without drawing)" : ""), GEN_HELP[id]);
    applies($("beam-width"), none || (s !== "beam" ? "a beam search option: only for strategy “beam search”" : ""), GEN_HELP["beam-width"]);
    const L = state.info && state.info.max_len;
    $("max-new").closest("label").title = none || ("new tokens to generate, at most " + (L || "max_len") + " a request" + (state.info && state.info.arch === "decoder" ? " (past the context of " + L + " tokens a decoder slides its window)" : ""));
  }
  function genRequest() {
    const b = { model: state.model, text: state.text, strategy: $("strategy").value, max_new_tokens: Number($("max-new").value) || 20 };
    b.temperature = Number($("temperature").value);
    if ($("top-k").value !== "0") b.top_k = Number($("top-k").value);
    if ($("top-p").value !== "1") b.top_p = Number($("top-p").value);
    if ($("seed").value !== "") b.seed = Number($("seed").value);
    b.beam_width = Number($("beam-width").value) || 4;
    return b;
  }
  function clearGeneration(message) {
    state.gen = null;
    state.genSeq++;
    state.beamNode = null;
    $("gen-out").classList.remove("pending");
    $("gen-out").replaceChildren(...(message ? [el("p", { class: "problem", text: message })] : []));
    $("gen-step-view").replaceChildren();
    $("beam").replaceChildren();
    $("beam-node").replaceChildren();
    $("stepper").hidden = true;
  }
  async function regenerate() {
    const none = noGeneration();
    if (none || (state.run && state.run.arch === "encoder")) {
      clearGeneration();
      $("gen-out").append(el("p", { class: "sub", text: "Nothing to generate: " + (none || "an encoder has no decoder") + "." }));
      return;
    }
    const seq = ++state.genSeq, asked = genRequest();
    $("gen-out").classList.add("pending");
    let g;
    try { g = await post("generate", asked); } catch (e) { if (seq === state.genSeq) clearGeneration(e.message); return; }
    if (seq !== state.genSeq) return;
    g.asked = asked.max_new_tokens;
    state.gen = g;
    state.beamNode = null;
    const n = g.strategy === "beam" ? g.beam.steps.length : g.steps.length;
    const s = $("gen-step");
    s.max = String(Math.max(0, n - 1));
    state.genStep = Math.min(state.genStep, Math.max(0, n - 1));
    s.value = String(state.genStep);
    $("stepper").hidden = n === 0;
    renderGeneration();
  }
  function stopLine(g) {  // why generation ended (and the window slid past the context)
    let why = g.stop ? g.stop.text : "";
    if (g.stop && g.stop.kind === "budget" && g.asked > g.max_new_tokens) why += " (the explorer generates at most " + plural(g.max_new_tokens, "new token") + " a request: the model's max_len)";
    why = why.charAt(0).toUpperCase() + why.slice(1);
    const out = [el("p", { class: "stop", "data-kind": g.stop ? g.stop.kind : "", text: why + (g.strategy === "beam" ? " (the winning hypothesis)" : "") + "." })];
    if (g.slid) out.push(el("p", { class: "note slid", text: "Past the context: " + g.slid + "." }));
    return out;
  }
  function renderGeneration() {
    const g = state.gen, k = state.genStep, out = $("gen-out");
    out.classList.remove("pending");
    out.replaceChildren();
    const text = el("div", { class: "text" });
    g.tokens.forEach((t, i) => {
      const cls = i < g.n_prompt ? "prompt" : "new" + (i === g.n_prompt + k ? " cur" : "");
      text.append(el("span", { class: cls, text: t }));
    });
    out.append(text);
    const settings = g.strategy === "sample" ? "sampled · seed " + g.seed + " · temperature " + g.temperature + " · top-k " + (g.top_k || "off") + " · top-p " + (g.top_p || "off")
      : g.strategy === "beam" ? "beam search · width " + g.beam.steps[0].length + " · best: " + JSON.stringify(g.beam.text) : "greedy";
    out.append(el("div", { class: "sub", text: settings + " · output: " + JSON.stringify(g.text) }), ...stopLine(g));
    const n = g.strategy === "beam" ? g.beam.steps.length : g.steps.length;
    $("gen-step-label").textContent = "step " + k + " of " + n;
    const view = $("gen-step-view");
    view.replaceChildren();
    if (g.strategy === "beam") { renderBeam(g, k); return; }
    $("beam").replaceChildren();
    $("beam-node").replaceChildren();
    const st = g.steps[k];
    const reads = plural(st.context, "token") + (st.slid ? " (the last " + st.context + ": a sliding window)" : "");
    view.append(el("p", {}, "Step " + k + ": the model reads " + reads + " and " + (g.strategy === "sample" ? "draws " : "chooses "), chip({ shown: st.chosen_token, id: st.chosen }), g.strategy === "sample" ? " (kept " + plural(st.kept, "token") + " after the filters)" : ""));
    const chart = distChart(st, g.strategy === "sample");
    view.append(el("div", {}, chart, svgExportButtons(chart, "distribution-step-" + k)));
    if (st.draw) {
      const cdf = cdfChart(st.draw);
      view.append(el("p", { class: "draw", "data-u": String(st.draw.u) }, "The draw: u = ", numEl(st.draw.u), " from seed " + g.seed + " fell in the segment of ", chip({ shown: st.chosen_token, id: st.chosen }), " on the cumulative distribution (vocabulary order, as numpy's Generator.choice adds it up):"), el("div", {}, cdf, svgExportButtons(cdf, "cdf-step-" + k)));
    }
    if (state.run && state.run.arch === "encoder-decoder") crossView(g, k, view);
  }
  function distChart(st, sampled) {
    const W = 660, row = 22, top = st.top, Hh = row * top.length + 24;
    const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "dist" });
    s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
    s.append(svgEl("text", { x: 150, y: 14, fill: "#5b6673" }, sampled ? "grey: softmax p · blue: after temperature / top-k / top-p (q)" : "softmax p"));
    top.forEach((t, r) => {
      const y = 20 + r * row, chosen = t.id === st.chosen;
      const g = svgEl("g", { class: "row" + (chosen ? " chosen" : ""), "data-id": t.id, "data-p": t.p, "data-q": sampled ? t.q : "" });
      if (chosen) g.append(svgEl("rect", { x: 0, y: y, width: W, height: row - 2, fill: "#fff3cd" }));
      g.append(svgEl("text", { x: 4, y: y + 15, class: "id", fill: "#8a94a0", "font-size": 10 }, "#" + t.id));
      g.append(svgEl("text", { x: 140, y: y + 15, "text-anchor": "end" }, t.token));
      g.append(svgEl("rect", { x: 150, y: y + 3, width: Math.max(1, 380 * t.p), height: 7, fill: "#b7c0ca" }));
      if (sampled) g.append(svgEl("rect", { x: 150, y: y + 11, width: Math.max(t.q > 0 ? 1 : 0, 380 * t.q), height: 7, fill: "#2e6fb0" }));
      g.append(svgEl("text", { x: 540, y: y + 15, class: "p" }, pct(t.p) + (sampled ? " → " + pct(t.q) : "")));
      g.append(svgEl("title", {}, "token id " + t.id + " · p = " + exact(t.p) + (sampled ? " · q = " + exact(t.q) : "")));
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
      const r = svgEl("rect", { x, y: 10, width: w, height: 30, fill: chosen ? "#f0ad4e" : i % 2 ? "#9ec5e8" : "#c6dbef", stroke: "#fff", "stroke-width": 0.5 });
      r.append(svgEl("title", {}, g.token + " #" + g.id + ": [" + exact(g.start) + ", " + exact(g.end) + ")"));
      s.append(r);
      if (w > 18) s.append(svgEl("text", { x: x + w / 2, y: 54, "text-anchor": "middle" }, g.token));
    });
    const ux = d.u * W;
    s.append(svgEl("line", { x1: ux, x2: ux, y1: 4, y2: 46, stroke: "#c0392b", "stroke-width": 2 }));
    s.append(svgEl("text", { x: ux > W - 120 ? ux - 4 : ux + 4, y: 72, fill: "#c0392b", "text-anchor": ux > W - 120 ? "end" : "start" }, "u = " + sig(d.u)));
    s.append(svgEl("text", { x: 2, y: 72, fill: "#5b6673" }, "0"));
    s.append(svgEl("text", { x: W - 2, y: 72, "text-anchor": "end", fill: "#5b6673" }, "1"));
    return s;
  }
  async function crossView(g, k, view) {
    const context = g.ids.slice(0, g.n_prompt + k);
    let r;
    try { r = await post("cross", { model: state.model, text: state.text, target: context }); } catch (e) {
      if (state.gen === g && state.genStep === k) view.append(el("p", { class: "problem", text: e.message }));
      return;
    }
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
      chips.replaceChildren(...r.source.map((t, j) => weightChip(t, w[j], 0.08 + 0.8 * w[j] / top)));
    }
    ls.addEventListener("change", shade); hs.addEventListener("change", shade);
    shade();
    view.append(el("div", { class: "cross" }, el("p", {}, "Which source tokens the next word is read from: the cross-attention of the last decoder token, ", ls, " ", hs), chips));
  }

  // -- beam search -----------------------------------------------------------------------------
  const endMark = n => n.finished ? n.token + " · end" : n.token;  // the end token, readable
  const quoted = t => "“" + t + "”";
  function beamWhy(g, k) {  // the winner, and why it won (once it is in view)
    const w = g.beam.why, last = k === g.beam.steps.length - 1, alpha = g.beam.length_penalty;
    if (!w) return null;
    const next = w.runner_up ? ", higher than any other hypothesis, open or finished (the next best: " + quoted(w.runner_up.text) + ", " + sig(w.runner_up.score) + ")" : ", and no other hypothesis was left";
    let text;
    if (w.finished && k >= w.step) text = quoted(w.text) + " finished at step " + w.step + " with score " + sig(w.score) + " (log p " + sig(w.logprob) + " / " + w.n_generated + (alpha === 1 ? "" : "^" + alpha) + ")" + next + ": it wins.";
    else if (!w.finished && last) text = quoted(w.text) + " was still open when the search stopped, with the best score of all, " + sig(w.score) + next + ": it wins.";
    else text = "No winner yet: the search goes on while an open hypothesis can still beat every finished one.";
    return el("p", { class: "why", "data-winner": w.text }, text);
  }
  function beamTable(rows, finishedTable) {
    const t = el("table", { class: "beam" + (finishedTable ? " finished" : "") }, el("tr", {}, ...["#", "hypothesis", finishedTable ? "finished at step" : null, "log p", "|y|", "score", ""].filter(x => x !== null).map(x => el("th", { text: x }))));
    rows.forEach(({ h, r, step, wins }) => {
      const lp = finishedTable ? { text: sig(h.logprob), title: exact(h.logprob) } : { text: sig(h.logprob), title: exact(h.logprob), "data-logprob": h.logprob };
      t.append(el("tr", { class: wins ? "wins" : "" }, el("td", { text: r }), el("td", { class: "hyp", text: JSON.stringify(h.text) }),
        finishedTable ? el("td", { text: step }) : null, el("td", lp), el("td", { text: h.n_generated }),
        el("td", { text: sig(h.score), title: exact(h.score) }), el("td", { class: "state", text: wins ? "★ wins" : h.finished ? "finished (end token)" : "open" })));
    });
    return t;
  }
  function renderBeam(g, k) {
    const view = $("gen-step-view"), steps = g.beam.steps.slice(0, k + 1), alpha = g.beam.length_penalty;
    const best = g.beam.best.ids, same = (a, b) => a.length === b.length && a.every((x, i) => b[i] === x);
    const onBest = ids => ids.every((x, i) => best[i] === x);
    const here = g.beam.steps[k].map((h, r) => ({ h, r, wins: same(h.ids, best) }));
    const done = [];
    steps.forEach((nodes, c) => nodes.forEach(h => { if (h.finished) done.push({ h, step: c, wins: same(h.ids, best) }); }));
    done.sort((a, b) => b.h.score - a.h.score);
    done.forEach((d, r) => { d.r = r; });
    view.append(el("p", { class: "formula", "data-alpha": alpha }, "The winner is the hypothesis y with the best ", el("b", {}, "score = log P(y) / |y|", el("sup", { text: "α" })),
      ", with α = " + alpha + " (the length penalty): log P(y) is the sum of its generated tokens' log-probabilities, |y| the number of tokens it generated (the end token included)" +
      (alpha === 1 ? "; α = 1 makes the score the mean log-probability per token, so a longer hypothesis is not punished for its length" : alpha === 0 ? "; α = 0 leaves the plain sum, which favours short hypotheses" : "") +
      ". At each step the beam keeps the candidates with the highest log P(y); one that takes the end token is finished and waits, with its score, until the search ends."));
    view.append(el("p", { text: "Step " + k + ": the beam holds " + plural(here.length, "hypothesis", "hypotheses") + ", the most likely (summed log-probabilities); click a node of the tree to see the distribution its token was chosen from." }), beamTable(here, false));
    view.append(el("h4", { text: "Finished so far (" + done.length + ")" }), done.length ? beamTable(done, true) : el("p", { class: "sub", text: "None yet: no hypothesis has taken the end token." }));
    const why = beamWhy(g, k);
    if (why) view.append(why);
    const colW = 170, nodeW = 150, rowH = 34, Hn = Math.max(...steps.map(s => s.length));
    const W = 110 + colW * steps.length, Hh = 20 + rowH * Hn;
    const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "tree" });
    s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
    s.append(svgEl("rect", { x: 4, y: 10, width: 90, height: 26, rx: 4, fill: "#eef2f7" }));
    s.append(svgEl("text", { x: 49, y: 27, "text-anchor": "middle" }, "prompt"));
    const picked = state.beamNode;
    steps.forEach((nodes, c) => nodes.forEach((n, r) => {
      const x = 110 + c * colW, y = 10 + r * rowH, wins = same(n.ids, best);
      const px = c === 0 ? 94 : 110 + (c - 1) * colW + nodeW, py = c === 0 ? 23 : 10 + n.parent * rowH + 13;
      s.append(svgEl("path", { d: "M" + px + "," + py + " C" + (px + 10) + "," + py + " " + (x - 10) + "," + (y + 13) + " " + x + "," + (y + 13), fill: "none", stroke: onBest(n.ids) ? "#2e6fb0" : "#b7c0ca", "stroke-width": onBest(n.ids) ? 2 : 1 }));
      const sel = picked && picked[0] === c && picked[1] === r;
      const g2 = svgEl("g", { class: "node" + (wins ? " wins" : "") + (sel ? " picked" : ""), "data-step": c, "data-rank": r, style: "cursor:pointer" });
      g2.append(svgEl("rect", { x, y, width: nodeW, height: 26, rx: 4, fill: n.finished ? "#fde2e1" : onBest(n.ids) ? "#dcebf8" : "#f6f8fa", stroke: sel ? "#e08a00" : wins ? "#1d4f82" : "#b7c0ca", "stroke-width": sel || wins ? 2.5 : 1 }));
      g2.append(svgEl("text", { x: x + 6, y: y + 17, "font-weight": wins ? 700 : 400 }, (wins ? "★ " : "") + endMark(n)));
      g2.append(svgEl("text", { x: x + nodeW - 6, y: y + 17, "text-anchor": "end", fill: "#5b6673" }, sig(n.logprob)));
      g2.append(svgEl("title", {}, JSON.stringify(n.text) + " · log p " + exact(n.logprob) + " · score " + exact(n.score) + (n.finished ? " · finished (the end token)" : "") + (wins ? " · the winner" : "")));
      g2.addEventListener("click", () => { state.beamNode = [c, r]; renderGeneration(); });
      s.append(g2);
    }));
    $("beam").replaceChildren(s, svgExportButtons(s, "beam-to-step-" + k));
    $("beam").scrollLeft = $("beam").scrollWidth;  // the newest step in view
    $("beam-node").replaceChildren();
    if (picked && picked[0] <= k) beamNodeView(g, picked[0], picked[1]);
  }
  // A node of the tree: the distribution its token was chosen from (after its parent's prefix).
  function beamNodeView(g, c, r) {
    const n = g.beam.steps[c][r], d = g.beam.distributions && g.beam.distributions[n.dist];
    const parent = c === 0 ? null : g.beam.steps[c - 1][n.parent];
    const prefix = parent ? JSON.stringify(parent.text) : "the start (" + (g.n_prompt > 1 ? "the prompt" : "the start token") + ")";
    const box = el("div", { class: "beam-node", "data-step": c, "data-rank": r });
    box.append(el("h4", { text: "Step " + c + ", hypothesis " + r + ": " + endMark(n) }));
    $("beam-node").replaceChildren(box);
    if (!d) { box.append(el("p", { class: "sub", text: "The distribution of this step was not recorded." })); return; }
    const p = d.top.find(t => t.id === n.id);
    box.append(el("p", {}, "After " + prefix + " (the model reads " + plural(d.context, "token") + "), the next-token distribution; this node took ", chip({ shown: n.token, id: n.id }),
      p && p.p !== null ? " with p = " + pct(p.p) : "", " — its hypothesis: log p ", numEl(n.logprob), ", score ", numEl(n.score), "."));
    const chart = distChart({ top: d.top, chosen: n.id }, false);
    box.append(el("div", {}, chart, svgExportButtons(chart, "beam-step-" + c + "-hypothesis-" + r)));
    box.append(el("button", { type: "button", class: "node-trace", text: "show the trace of this prefix", onclick: () => traceStep(n.ids.slice(0, -1), "beam step " + c + ", hypothesis " + r) }));
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
    const L = state.info && state.info.max_len;
    if (L && context.length > L) context = context.slice(-L);  // the window the model read
    state.stepInput = state.run && state.run.arch === "encoder-decoder" ? { target: context } : { ids: context };
    state.typedAt = null;  // no key press: no latency to tell
    const banner = $("step-banner");
    banner.hidden = false;
    banner.querySelector("span").textContent = "Showing the trace of " + what + ": the forward pass over its " + plural(context.length, "token") + " that predicts the next one. ";
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
    if (headKey(state.site, state.layer, state.head) === k) $("ablate-head").checked = on;
    renderHeadButtons();
    intervene();
  }
  function interveneControls() {
    const fixed = state.info && state.info.kind === "walkthrough" ? "a walkthrough's steps are fixed: choose a model to ablate or patch" : "";
    app.querySelectorAll("input[name=how]").forEach(r => applies(r, fixed));
    applies($("patch-text"), fixed || (how() !== "patch" ? "only for patching: choose “patch from a second prompt”" : ""), "a second prompt with as many tokens: its head outputs replace this one's");
  }
  // The position whose prediction an intervention measures: the decoder's positions.
  function positionOptions(select) {
    const run = state.run, rows = predictions(run);
    select.replaceChildren();
    if (!run || !rows) {
      select.append(new Option("—", ""));
      applies(select, !run ? "no run" : run.arch === "encoder" ? "a classifier or an encoder gives one result for the whole text: no position to choose" : "a walkthrough's steps are fixed");
      return;
    }
    const auto = run.arch === "decoder" ? "the last position (" + (rows.length - 1) + ")" : "the first position whose prediction changes";
    select.append(new Option("default: " + auto, ""));
    rows.forEach((r, i) => {
      const o = new Option(i + ": " + rowLabel(r), String(i));
      o.disabled = !!r.unused;  // its prediction is no part of the translation: nothing to measure
      select.append(o);
    });
    select.value = state.position === null || state.position >= rows.length ? "" : String(state.position);
    applies(select, "", "the position whose next-token prediction is compared, with and without the change");
  }
  function positionSelects() {
    if (state.run && state.position !== null && state.position >= ((state.run.tokens.decoder || []).length)) state.position = null;
    positionOptions($("position"));
  }
  // A click on a decoder row of a map: what an intervention measures is that row's prediction.
  function measureAt(ax, i) {
    const r = ax && ax.rows[i];
    if (!r || r.predicts === undefined || r.unused || state.position === i) return;
    state.position = i;
    $("position").value = String(i);
    if (state.ablated.size) intervene();
  }
  function choosePosition(value) {
    state.position = value === "" ? null : Number(value);
    $("position").value = value;
    intervene();
  }
  $("position").addEventListener("change", e => choosePosition(e.target.value));
  const aboutHead = (maps, l, h) => { const a = maps.find(x => x.layer === l && x.head === h); return a && a.about ? " · " + a.about : ""; };
  function renderHeadButtons() {
    const box = $("head-buttons"), run = state.run;
    if (!run) return;
    const maps = run.attention.filter(a => a.layer !== null && a.head !== null && /^(encoder|decoder)\.(self|cross)_attn$/.test(a.site));
    const out = [];
    for (const s of H.unique(maps.map(a => a.site))) {
      const here = maps.filter(a => a.site === s), layers = H.unique(here.map(a => a.layer)), heads = H.unique(here.map(a => a.head));
      const t = el("table", {}, el("caption", { text: s }), el("tr", {}, el("th"), ...heads.map(h => el("th", { text: "head " + h }))));
      for (const l of layers) t.append(el("tr", {}, el("th", { text: "layer " + l }), ...heads.map(h => {
        const b = el("button", { type: "button", class: "head-toggle" + (state.ablated.has(headKey(s, l, h)) ? " on" : ""), "data-site": s, "data-layer": l, "data-head": h, text: h, title: s + " · layer " + l + " · head " + h + aboutHead(here, l, h) });
        b.addEventListener("click", () => toggleHead(s, l, h, !state.ablated.has(headKey(s, l, h))));
        return el("td", {}, b);
      })));
      out.push(t);
    }
    if (!out.length) out.push(el("p", { class: "sub", text: "No model heads to change here (a walkthrough)." }));
    box.replaceChildren(...out);
  }
  app.querySelectorAll("input[name=how]").forEach(r => r.addEventListener("change", () => { interveneControls(); intervene(); }));
  $("patch-text").addEventListener("input", () => { clearTimeout(state.patchTimer); state.patchTimer = setTimeout(intervene, 300); });
  $("clear-heads").addEventListener("click", () => {
    state.ablated.clear(); renderHeadButtons();
    app.querySelectorAll(".thumb.ablated").forEach(t => t.classList.remove("ablated"));
    app.querySelectorAll(".thumb input.ablate").forEach(b => { b.checked = false; });
    $("ablate-head").checked = false;
    $("intervention").replaceChildren(); $("att-effect").replaceChildren(); $("att-effect").hidden = true;
  });
  function showEffect(full, compact) {  // the Ablate tab's result, and its summary under the map
    $("intervention").replaceChildren(...full);
    const att = $("att-effect");
    att.hidden = !state.ablated.size;
    att.replaceChildren(...compact);
  }
  const sayBoth = make => showEffect([make()], [make()]);
  async function intervene() {
    const change = how();
    if (!state.ablated.size) { sayBoth(() => el("p", { class: "sub", text: "Choose at least one head." })); return; }
    const body = input({ heads: Array.from(state.ablated.values()), how: change });
    if (change === "patch") {
      if (!$("patch-text").value.trim()) { sayBoth(() => el("p", { class: "sub", text: "Type a second prompt to patch from (the Ablate & patch tab)." })); return; }
      body.patch_text = $("patch-text").value;
    }
    if (state.position !== null && state.run && state.run.arch !== "encoder") body.position = state.position;
    const seq = state.seq, mine = state.ivSeq = (state.ivSeq || 0) + 1;
    let r;
    try { r = await post("intervene", body); } catch (e) {
      if (mine === state.ivSeq) sayBoth(() => el("p", { class: "problem", text: e.message }));
      return;
    }
    if (seq !== state.seq || mine !== state.ivSeq) return;  // a newer choice of heads is coming
    showEffect(interventionView(r, change, false), interventionView(r, change, true));
    $("intervention").dataset.done = $("att-effect").dataset.done = String(Date.now());
  }
  // What an intervention changed: the Ablate tab's full view, or the compact one under the map.
  function interventionView(r, change, compact) {
    const names = r.heads.map(h => h.stack + "." + h.layer + "." + h.kind + ".head" + h.head).join(", ");
    const what = { zero: "zero-ablated", mean: "mean-ablated", patch: "patched from the second prompt" }[change];
    const title = el(compact ? "h4" : "h3", { text: (compact ? "Under the change: " : "") + names + " " + what });
    const notes = compact || !r.notes ? [] : r.notes.map(t => el("p", { class: "sub notes", text: t }));
    if (r.kind === "embedding") return [title, ...notes, el("div", { class: "result" }, el("p", {}, "cosine(clean embedding, changed embedding) = ", numEl(r.cosine)), el("p", {}, "largest change of any encoder output: ", numEl(r.max_abs_change)))];
    if (r.kind === "class") return [title, ...notes, classChange(r)];
    const rows = predictions(state.run), at = rows && rows[r.position];
    const where = "the next token after position " + r.position + " (" + (at ? rowLabel(at) : "reads " + r.reads) + ")";
    const moved = r.changed_positions || [];
    const movedText = moved.length ? "The top prediction changed at " + plural(moved.length, "position") + ": " + moved.slice(0, 20).join(", ") + (moved.length > 20 ? ", …" : "") + "." : "The top prediction changed at no position.";
    const n = compact ? 5 : undefined;
    const col = (heading, top, base, cls, greedy) => {
      const t = nextTable(top.slice(0, n), base ? ["Δ logit"] : []);
      if (base) Array.from(t.querySelectorAll("tr")).slice(1).forEach((tr, i) => {
        const d = top[i].logit - base[i].logit;
        tr.append(el("td", { class: d > 0 ? "up" : d < 0 ? "down" : "", text: (d > 0 ? "+" : "") + sig(d), title: exact(d) }));
      });
      const div = el("div", { class: cls }, el(compact ? "h4" : "h3", { text: heading }), el("p", { class: "sub", text: where }), t);
      if (greedy !== undefined) div.append(el("p", {}, el("b", { text: "greedy: " }), el("span", { class: "cont", text: JSON.stringify(greedy) })));
      return div;
    };
    const c = r.continuation || {};
    const clean = col("clean", r.clean, null, "clean", c.clean), changed = col(what, r.changed, r.clean, "changed", c.changed);
    if (compact) {
      const s = el("select", { class: "att-position" });
      positionOptions(s);
      s.addEventListener("change", () => choosePosition(s.value));
      return [title, el("p", { class: "sub" }, el("label", {}, "prediction measured at ", s), " · " + movedText), el("div", { class: "side" }, clean, changed)];
    }
    const out = [el("p", { class: "summary sub", text: names + " " + what + " · largest logit change anywhere: " + sig(r.max_abs_change) + " · " + movedText }), ...notes, clean, changed];
    if (r.source) out.push(col("the second prompt", r.source, null, "source"));
    return out;
  }
  function classChange(r) {  // a classifier: each class's probability before and after
    const rows = r.classes || (r.clean || []).map((c, i) => ({ label: c.label, before: c.probability, after: r.changed[i].probability, change: r.changed[i].probability - c.probability }));
    const t = el("table", { class: "next classes" }, el("tr", {}, ...["class", "clean", "changed", "Δ"].map(x => el("th", { text: x }))));
    for (const c of rows) t.append(el("tr", { "data-label": c.label }, el("td", { class: "t", text: c.label }), el("td", { text: pct(c.before), title: exact(c.before) }), el("td", { text: pct(c.after), title: exact(c.after) }),
      el("td", { class: c.change > 0 ? "up" : c.change < 0 ? "down" : "", text: (c.change > 0 ? "+" : "") + sig(100 * c.change) + " points", title: exact(c.change) })));
    const said = r.clean_label !== undefined ? el("p", { text: "class: " + r.clean_label + " → " + r.changed_label + (r.clean_label === r.changed_label ? " (unchanged)" : " (changed)") }) : null;
    return el("div", { class: "result classes" }, said, t);
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
    if (o.kind === "embedding") div.append(el("p", { text: "embedding: " + o.first.slice(0, 4).map(sig).join(", ") + ", …" }));
    if (o.kind === "class") div.append(el("p", { text: "class: " + o.label + " " + pct(o.probability) }));
    const a = run.attention.find(x => x.name === wantName) || run.attention.find(x => x.site === wantSite && x.layer === wantLayer && x.head === wantHead) || run.attention[0];
    if (a) {
      let r;
      try { r = await post("attention", Object.assign({}, body, { name: a.name })); } catch (e) { div.append(el("p", { class: "problem", text: e.message })); return div; }
      const box = el("div");
      box.innerHTML = r.html;
      div.append(box);
      requestAnimationFrame(() => drawMaps(box, r.maps, a.name, null));
    }
    return div;
  }
  async function compare() {
    if (!state.run) { $("compare").replaceChildren(); return; }
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

  generateControls();
  loadModels().catch(e => problem("Could not list the models: " + e.message));
})();
