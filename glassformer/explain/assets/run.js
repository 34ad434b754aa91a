// Choosing a model and running it: the model list, typing (one run at a time), what a run
// shows first (tokens, output, status, latency) and the fidelity badge; then the views that
// follow a run are told (attention, steps, generation, interventions, comparison).
import { drawAttention, setupPickers } from "./attention.js";
import { compare } from "./compare.js";
import { el } from "./dom.js";
import { clearGeneration, generateControls, regenerate } from "./generate.js";
import { intervene, interveneControls, positionSelects, renderHeadButtons } from "./intervene.js";
import { renderModelView } from "./modelview.js";
import { fmt, pct, plural, sig } from "./numbers.js";
import { $, app, applies, chip, exact, input, post, problem, state, status } from "./page.js";
import { renderSteps } from "./steps.js";

const BADGE_PAUSE_MS = 600;
// -- models ----------------------------------------------------------------------------------
export async function loadModels() {
  const r = await fetch("/api/models");
  state.models = (await r.json()).models;
  for (const select of [$("model"), $("model-b")]) {
    const groups = {};
    for (const m of state.models) {
      const g =
        groups[m.kind] ||
        (groups[m.kind] = el("optgroup", {
          label: m.kind === "walkthrough" ? "walkthroughs" : "models",
        }));
      g.append(new Option(m.name + (m.error ? " (cannot be loaded)" : ""), m.id));
    }
    select.replaceChildren(...Object.values(groups));
  }
  const wanted = new URLSearchParams(location.hash.slice(1));
  const first =
    state.models.find((m) => m.id === wanted.get("model")) ||
    state.models.find((m) => m.kind === "model" && !m.id.startsWith("hello-world")) ||
    state.models[0];
  $("model").value = first.id;
  $("model-b").value = first.id;
  await chooseModel(first.id, wanted.get("text"));
}
const DEFAULT_TEXT = {
  decoder: "ROMEO: But soft, what light",
  "encoder-decoder": "Where is the station?",
  encoder: "A man is eating food.",
};
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
    info = await post("load", { model: id }); // loads it on the server: its sizes, or why not
  } catch (e) {
    // a folder that cannot be loaded: say why, show nothing of another model
    state.info = null;
    state.seq++;
    clearRun();
    problem(e.message);
    applies($("text"), "this model cannot be loaded: " + e.message);
    $("model-info").textContent = (state.models.find((m) => m.id === id) || {}).description || "";
    app.dispatchEvent(new CustomEvent("gf-model", { detail: null })); // timelapse.js
    return;
  }
  state.info = info;
  app.dispatchEvent(new CustomEvent("gf-model", { detail: info })); // timelapse.js: the Training tab
  $("max-new").max = String(info.max_len || 4096);
  if (info.arch === "encoder-decoder") $("max-new").value = String(info.max_len);
  const fixed = info.kind === "walkthrough";
  const t = $("text");
  applies(t, fixed ? "a walkthrough runs the article's own input: choose a model to type" : "");
  if (fixed) t.value = info.text || "";
  else if (text) t.value = text;
  else {
    t.value = guessText(info);
    if (info.probe && t.value === info.probe && info.probe_head) state.want = info.probe_head; // its induction head
  }
  state.text = t.value;
  $("text-b").value = ""; // B reads A's text until one of its own is typed
  $("model-info").textContent =
    (info.description || "") + (info.summary ? " · " + info.summary : "");
  generateControls();
  interveneControls();
  await update();
}
function guessText(info) {
  if (info.id === "hello-world-model") return "hello world";
  if (info.probe) return info.probe; // the text its training time-lapse followed
  return DEFAULT_TEXT[info.arch] || "Hello world.";
}
$("model").addEventListener("change", (e) => chooseModel(e.target.value));

// -- typing: the run -------------------------------------------------------------------------
// A key press runs the model at once when no run is under way; keys pressed during a run wait
// for it to end, and then only the newest text runs (no fixed delay, and never more than one
// typing run at a time on the server).
let typing = null,
  typedAgain = false;
function runTyped() {
  if (typing) {
    typedAgain = true;
    return;
  }
  typing = update().finally(() => {
    typing = null;
    if (typedAgain) {
      typedAgain = false;
      runTyped();
    }
  });
}
function typed() {
  state.typedAt = performance.now();
  state.text = $("text").value;
  state.stepInput = null;
  $("step-banner").hidden = true;
  runTyped();
}
$("text").addEventListener("input", typed);
// Run another text as if typed (the Training tab's probe): `head` ({site, layer, head}), if
// given, is the one the Attention tab opens on.
export function setText(text, head) {
  if (head) state.want = head;
  $("text").value = text;
  typed();
}
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
  [
    "tokens",
    "output",
    "map",
    "heads-grid",
    "steps",
    "compare",
    "head-buttons",
    "intervention",
    "att-effect",
  ].forEach((x) => $(x).replaceChildren());
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
export async function update() {
  const seq = ++state.seq,
    typedAt = state.typedAt; // the key press behind this run, or null
  app.classList.add("busy");
  status("running…");
  let run;
  try {
    run = await post("run", input());
  } catch (e) {
    if (seq !== state.seq) return;
    clearRun(
      "No tokens, maps or output: the model could not run on this input (the message above says why).",
    ); // nothing of the last input stays
    problem(e.message);
    app.classList.remove("busy");
    if (typedAgain) return; // a newer text runs next: the page is not ready for it yet
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
  const n = Object.values(run.tokens)
    .map((t) => t.length)
    .join(" + ");
  status(
    plural(run.n_steps, "step") +
      " recorded · " +
      (n || 0) +
      " tokens · model ran in " +
      Math.round(run.elapsed_ms) +
      " ms on the server (" +
      plural(run.cache.runs, "run") +
      " cached, " +
      run.cache.mb +
      " MB)" +
      (run.view ? " · values: " + run.engine : ""),
  );
  if (state.typedAt === typedAt) state.typedAt = null; // a newer key press waits for its run
  if (typedAt !== null) {
    const ms = performance.now() - typedAt;
    performance.measure("gf-keystroke-to-map", { start: typedAt, end: typedAt + ms });
    $("latency").textContent = "keystroke → attention map: " + Math.round(ms) + " ms";
  } else $("latency").textContent = ""; // no key press behind this run: no latency to tell
  // A newer text runs next: nothing more for this one (its badge, steps, interventions would
  // only hold up the next run on the server), and the page is not ready yet.
  if (typedAgain) return;
  app.dataset.ready = String(seq);
  app.dispatchEvent(new CustomEvent("gf-run", { detail: run })); // overview.js follows runs
  // A float32 view's badge runs the float64 reference: it waits for a pause in typing, so that
  // it never holds up the next key press's map (a newer run cancels it).
  if (run.view) {
    $("badge").textContent = "fidelity: checked when typing pauses…";
    setTimeout(() => {
      if (seq === state.seq) badge(seq);
    }, BADGE_PAUSE_MS);
  } else badge(seq);
  if (state.tab === "steps") renderSteps();
  if (state.tab === "heads") renderModelView();
  if (state.ablated.size) intervene();
  if (state.tab === "compare") compare();
  if (state.tab === "generate" && !state.stepInput) regenerate();
  else if (!state.stepInput) clearGeneration(); // made for another text: made again when shown
  renderHeadButtons();
}

function renderTokens(run) {
  const out = [];
  for (const [stack, toks] of Object.entries(run.tokens)) {
    const name = {
      encoder: run.arch === "encoder-decoder" ? "source (encoder)" : "tokens (encoder)",
      decoder: run.arch === "encoder-decoder" ? "decoder input" : "tokens",
    }[stack];
    out.push(
      el(
        "p",
        { class: "stack-" + stack },
        el("b", { text: name + ": " }),
        ...toks.map((t) => chip(t)),
      ),
    );
  }
  const u = run.unknown.length;
  if (u)
    out.push(
      el("p", {
        class: "note",
        text:
          (u === 1 ? "1 unknown piece" : u + " unknown pieces") +
          " mapped to the unknown token: " +
          run.unknown.slice(0, 8).join(", "),
      }),
    );
  $("tokens").replaceChildren(...out);
}
function renderOutput(run) {
  const o = run.output,
    box = $("output");
  const prob = (p) => el("span", { class: "p", text: pct(p), title: "p = " + exact(p) });
  if (o.kind === "next")
    box.replaceChildren(
      el(
        "p",
        { class: "next-inline" },
        el("b", { text: "Next token: " }),
        ...o.top.slice(0, 6).flatMap((t) => [
          chip({ shown: t.token, id: t.id }),
          el("span", {
            class: "p",
            text: pct(t.p),
            title: "p = " + exact(t.p) + ", logit " + exact(t.logit),
          }),
        ]),
      ),
    );
  else if (o.kind === "translation") {
    // its own greedy translation, or a prefix the Generate tab chose
    const what =
      o.greedy === false ? "Decoder input, chosen on the Generate tab: " : "Translation (greedy): ";
    box.replaceChildren(
      el("p", {}, el("b", { text: what }), el("span", { class: "translation", text: o.text })),
    );
  } else if (o.kind === "embedding")
    box.replaceChildren(
      el(
        "p",
        { title: o.first.map(exact).join(", ") },
        el("b", { text: "Sentence embedding: " }),
        o.dims +
          " dimensions, unit length (mean of the encoder outputs): " +
          o.first.slice(0, 4).map(sig).join(", ") +
          ", …",
      ),
    );
  else if (o.kind === "class")
    box.replaceChildren(
      el(
        "p",
        { class: "class" },
        el("b", { text: "Class: " }),
        el("span", { class: "label", text: o.label + " " }),
        prob(o.probability),
        el("span", { class: "sub", text: " · every class: " }),
        ...Object.entries(o.probabilities).flatMap(([n, p]) => [
          el("span", { class: "cls", text: n + " " }),
          prob(p),
          " ",
        ]),
      ),
    );
  else
    box.replaceChildren(
      el(
        "p",
        {},
        el("b", { text: "Walkthrough: " }),
        o.text + " — the article's fixed input; every step is in the tabs below.",
      ),
    );
}

// -- fidelity badge --------------------------------------------------------------------------
// The steps compared, out of the run's own count (the status line's "N steps recorded"): a
// step is compared where both engines record it with one shape.
const over = (f) =>
  " over " + f.torch.compared + " of the " + plural(f.steps, "step") + " recorded";
async function badge(seq) {
  const b = $("badge");
  b.className = "badge";
  b.textContent = "fidelity: checking…";
  let f;
  try {
    f = await post("fidelity", input());
  } catch (e) {
    if (seq === state.seq) b.textContent = "fidelity: " + e.message;
    return;
  }
  if (seq !== state.seq) return;
  const parts = [];
  let ok = true;
  if (!f.torch) parts.push(f.note || "");
  else if (!f.torch.available) parts.push(f.torch.note);
  else {
    if (f.torch.tolerance !== undefined) {
      // a float32 view: what is shown against the float64 reference
      parts.push(
        "float32 view vs NumPy float64: max |Δ| / max |x| " +
          fmt(f.torch.max_rel_diff, 2) +
          over(f),
      );
      ok = f.torch.max_rel_diff <= f.torch.tolerance;
      b.title =
        "relative: largest at " +
        f.torch.where_rel +
        "; absolute: " +
        exact(f.torch.max_abs_diff) +
        " at " +
        f.torch.where;
    } else {
      parts.push("PyTorch vs NumPy: max |Δ| " + fmt(f.torch.max_abs_diff, 2) + over(f));
      ok = f.torch.max_abs_diff < 1e-9;
      b.title = "largest at " + f.torch.where + " (" + exact(f.torch.max_abs_diff) + ")";
    }
  }
  if (f.hf) {
    if (f.hf.available) {
      parts.push(f.hf.engine + ": max |Δ| " + fmt(f.hf.max_abs_diff, 2) + " (" + f.hf.step + ")");
      ok = ok && f.hf.max_abs_diff < 1e-5;
    } else parts.push("Hugging Face: " + f.hf.note);
  }
  b.textContent = parts.join(" · ");
  b.className = "badge " + (f.torch && f.torch.available ? (ok ? "ok" : "bad") : "");
  b.dataset.torch = f.torch && f.torch.available ? String(f.torch.max_abs_diff) : "";
}
