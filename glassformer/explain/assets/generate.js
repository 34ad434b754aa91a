// The Generate tab: the controls (each enabled only for the strategy it belongs to), a
// generation step by step with its distribution chart, the draw of a sample, and where a
// translator's next word reads the source.
import { weightChip } from "./readable.js";
import { renderBeam } from "./beam.js";
import { el, svgEl } from "./dom.js";
import { pct, plural, sig } from "./numbers.js";
import { $, applies, chip, exact, numEl, post, state, svgExportButtons } from "./page.js";
import { renderSteering, steerRequest } from "./steer.js";

const REGENERATE = 250;
// -- generation ------------------------------------------------------------------------------
const sliders = {
  temperature: (v) => v,
  "top-k": (v) => (v === "0" ? "off" : v),
  "top-p": (v) => (v === "1" ? "off" : v),
};
for (const [id, show] of Object.entries(sliders)) {
  $(id).addEventListener("input", () => {
    $(id + "-v").textContent = show($(id).value);
    scheduleGenerate();
  });
}
["strategy", "seed", "beam-width", "max-new", "steer-pair", "steer-layer", "steer-scale"].forEach(
  (id) => $(id).addEventListener("change", scheduleGenerate),
);
$("strategy").addEventListener("change", generateControls);
$("generate").addEventListener("click", regenerate);
let genTimer = 0;
function scheduleGenerate() {
  clearTimeout(genTimer);
  genTimer = setTimeout(regenerate, REGENERATE);
}
const GEN_HELP = {
  temperature: "divides the logits before the softmax: below 1 sharper, above 1 flatter",
  "top-k": "keep only the k likeliest tokens (0: off)",
  "top-p": "keep the fewest likeliest tokens whose probability reaches p (1: off)",
  seed: "the random numbers of the draws: the same seed, the same text",
  "beam-width": "hypotheses kept at each step",
};
function noGeneration() {
  // why this model does not generate, or ""
  const info = state.info;
  if (!info) return "no model is loaded";
  if (info.kind === "walkthrough")
    return "a walkthrough has fixed steps: choose a model to generate";
  if (info.arch === "encoder" || info.generates === false)
    return "an encoder has no decoder: it does not generate";
  return "";
}
export function generateControls() {
  // each control enabled only for the strategy it belongs to
  const none = noGeneration(),
    s = $("strategy").value;
  for (const id of ["strategy", "max-new", "generate"]) applies($(id), none);
  for (const id of ["temperature", "top-k", "top-p", "seed"])
    applies(
      $(id),
      none ||
        (s !== "sample"
          ? "a sampling option: only for strategy “sample” (" + s + " chooses without drawing)"
          : ""),
      GEN_HELP[id],
    );
  applies(
    $("beam-width"),
    none || (s !== "beam" ? "a beam search option: only for strategy “beam search”" : ""),
    GEN_HELP["beam-width"],
  );
  const L = state.info && state.info.max_len;
  $("max-new").closest("label").title =
    none ||
    "new tokens to generate, at most " +
      (L || "max_len") +
      " a request" +
      (state.info && state.info.arch === "decoder"
        ? " (past the context of " + L + " tokens a decoder slides its window)"
        : "");
}
function genRequest() {
  const b = {
    model: state.model,
    text: state.text,
    strategy: $("strategy").value,
    max_new_tokens: Number($("max-new").value) || 20,
  };
  b.temperature = Number($("temperature").value);
  if ($("top-k").value !== "0") b.top_k = Number($("top-k").value);
  if ($("top-p").value !== "1") b.top_p = Number($("top-p").value);
  if ($("seed").value !== "") b.seed = Number($("seed").value);
  b.beam_width = Number($("beam-width").value) || 4;
  return Object.assign(b, steerRequest());
}
export function clearGeneration(message) {
  state.gen = null;
  state.genSeq++;
  state.beamNode = null;
  $("gen-out").classList.remove("pending");
  $("gen-out").replaceChildren(...(message ? [el("p", { class: "problem", text: message })] : []));
  $("gen-step-view").replaceChildren();
  $("steer-view").replaceChildren();
  $("beam").replaceChildren();
  $("beam-node").replaceChildren();
  $("stepper").hidden = true;
}
export async function regenerate() {
  const none = noGeneration();
  if (none || (state.run && state.run.arch === "encoder")) {
    clearGeneration();
    $("gen-out").append(
      el("p", {
        class: "sub",
        text: "Nothing to generate: " + (none || "an encoder has no decoder") + ".",
      }),
    );
    return;
  }
  const seq = ++state.genSeq,
    asked = genRequest();
  $("gen-out").classList.add("pending");
  let g;
  try {
    g = await post("generate", asked);
  } catch (e) {
    if (seq === state.genSeq) clearGeneration(e.message);
    return;
  }
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
function stopLine(g) {
  // why generation ended (and the window slid past the context)
  let why = g.stop ? g.stop.text : "";
  if (g.stop && g.stop.kind === "budget" && g.asked > g.max_new_tokens)
    why +=
      " (the explorer generates at most " +
      plural(g.max_new_tokens, "new token") +
      " a request: the model's max_len)";
  why = why.charAt(0).toUpperCase() + why.slice(1);
  const out = [
    el("p", {
      class: "stop",
      "data-kind": g.stop ? g.stop.kind : "",
      text: why + (g.strategy === "beam" ? " (the winning hypothesis)" : "") + ".",
    }),
  ];
  if (g.slid) out.push(el("p", { class: "note slid", text: "Past the context: " + g.slid + "." }));
  return out;
}
export function renderGeneration() {
  const g = state.gen,
    k = state.genStep,
    out = $("gen-out");
  out.classList.remove("pending");
  out.replaceChildren();
  const text = el("div", { class: "text" });
  g.tokens.forEach((t, i) => {
    const cls = i < g.n_prompt ? "prompt" : "new" + (i === g.n_prompt + k ? " cur" : "");
    text.append(el("span", { class: cls, text: t }));
  });
  out.append(text);
  renderSteering(g);
  const settings =
    g.strategy === "sample"
      ? "sampled · seed " +
        g.seed +
        " · temperature " +
        g.temperature +
        " · top-k " +
        (g.top_k || "off") +
        " · top-p " +
        (g.top_p || "off")
      : g.strategy === "beam"
        ? "beam search · width " +
          g.beam.steps[0].length +
          " · best: " +
          JSON.stringify(g.beam.text)
        : "greedy";
  out.append(
    el("div", { class: "sub", text: settings + " · output: " + JSON.stringify(g.text) }),
    ...stopLine(g),
  );
  const n = g.strategy === "beam" ? g.beam.steps.length : g.steps.length;
  $("gen-step-label").textContent = "step " + k + " of " + n;
  const view = $("gen-step-view");
  view.replaceChildren();
  if (g.strategy === "beam") {
    renderBeam(g, k);
    return;
  }
  $("beam").replaceChildren();
  $("beam-node").replaceChildren();
  const st = g.steps[k];
  const reads =
    plural(st.context, "token") +
    (st.slid ? " (the last " + st.context + ": a sliding window)" : "");
  view.append(
    el(
      "p",
      {},
      "Step " +
        k +
        ": the model reads " +
        reads +
        " and " +
        (g.strategy === "sample" ? "draws " : "chooses "),
      chip({ shown: st.chosen_token, id: st.chosen }),
      g.strategy === "sample" ? " (kept " + plural(st.kept, "token") + " after the filters)" : "",
    ),
  );
  const chart = distChart(st, g.strategy === "sample");
  view.append(el("div", {}, chart, svgExportButtons(chart, "distribution-step-" + k)));
  if (st.draw) {
    const cdf = cdfChart(st.draw);
    view.append(
      el(
        "p",
        { class: "draw", "data-u": String(st.draw.u) },
        "The draw: u = ",
        numEl(st.draw.u),
        " from seed " + g.seed + " fell in the segment of ",
        chip({ shown: st.chosen_token, id: st.chosen }),
        " on the cumulative distribution (vocabulary order, as numpy's Generator.choice adds it up):",
      ),
      el("div", {}, cdf, svgExportButtons(cdf, "cdf-step-" + k)),
    );
  }
  if (state.run && state.run.arch === "encoder-decoder") crossView(g, k, view);
}
export function distChart(st, sampled) {
  const W = 660,
    row = 22,
    top = st.top,
    Hh = row * top.length + 24;
  const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "dist" });
  s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
  s.append(
    svgEl(
      "text",
      { x: 150, y: 14, fill: "#5b6673" },
      sampled ? "grey: softmax p · blue: after temperature / top-k / top-p (q)" : "softmax p",
    ),
  );
  top.forEach((t, r) => {
    const y = 20 + r * row,
      chosen = t.id === st.chosen;
    const g = svgEl("g", {
      class: "row" + (chosen ? " chosen" : ""),
      "data-id": t.id,
      "data-p": t.p,
      "data-q": sampled ? t.q : "",
    });
    if (chosen) g.append(svgEl("rect", { x: 0, y: y, width: W, height: row - 2, fill: "#fff3cd" }));
    g.append(
      svgEl("text", { x: 4, y: y + 15, class: "id", fill: "#8a94a0", "font-size": 10 }, "#" + t.id),
    );
    g.append(svgEl("text", { x: 140, y: y + 15, "text-anchor": "end" }, t.token));
    g.append(
      svgEl("rect", {
        x: 150,
        y: y + 3,
        width: Math.max(1, 380 * t.p),
        height: 7,
        fill: "#b7c0ca",
      }),
    );
    if (sampled)
      g.append(
        svgEl("rect", {
          x: 150,
          y: y + 11,
          width: Math.max(t.q > 0 ? 1 : 0, 380 * t.q),
          height: 7,
          fill: "#2e6fb0",
        }),
      );
    g.append(
      svgEl(
        "text",
        { x: 540, y: y + 15, class: "p" },
        pct(t.p) + (sampled ? " → " + pct(t.q) : ""),
      ),
    );
    g.append(
      svgEl(
        "title",
        {},
        "token id " + t.id + " · p = " + exact(t.p) + (sampled ? " · q = " + exact(t.q) : ""),
      ),
    );
    s.append(g);
  });
  return s;
}
function cdfChart(d) {
  const W = 900,
    Hh = 78,
    s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "cdf" });
  s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
  s.append(svgEl("rect", { x: 0, y: 10, width: W, height: 30, fill: "#eef2f7" }));
  d.segments.forEach((g, i) => {
    const x = g.start * W,
      w = Math.max(0.5, (g.end - g.start) * W),
      chosen = g.id === d.token;
    const r = svgEl("rect", {
      x,
      y: 10,
      width: w,
      height: 30,
      fill: chosen ? "#f0ad4e" : i % 2 ? "#9ec5e8" : "#c6dbef",
      stroke: "#fff",
      "stroke-width": 0.5,
    });
    r.append(
      svgEl(
        "title",
        {},
        g.token + " #" + g.id + ": [" + exact(g.start) + ", " + exact(g.end) + ")",
      ),
    );
    s.append(r);
    if (w > 18) s.append(svgEl("text", { x: x + w / 2, y: 54, "text-anchor": "middle" }, g.token));
  });
  const ux = d.u * W;
  s.append(svgEl("line", { x1: ux, x2: ux, y1: 4, y2: 46, stroke: "#c0392b", "stroke-width": 2 }));
  s.append(
    svgEl(
      "text",
      {
        x: ux > W - 120 ? ux - 4 : ux + 4,
        y: 72,
        fill: "#c0392b",
        "text-anchor": ux > W - 120 ? "end" : "start",
      },
      "u = " + sig(d.u),
    ),
  );
  s.append(svgEl("text", { x: 2, y: 72, fill: "#5b6673" }, "0"));
  s.append(svgEl("text", { x: W - 2, y: 72, "text-anchor": "end", fill: "#5b6673" }, "1"));
  return s;
}
async function crossView(g, k, view) {
  const context = g.ids.slice(0, g.n_prompt + k);
  let r;
  try {
    r = await post("cross", { model: state.model, text: state.text, target: context });
  } catch (e) {
    if (state.gen === g && state.genStep === k)
      view.append(el("p", { class: "problem", text: e.message }));
    return;
  }
  if (state.gen !== g || state.genStep !== k) return;
  const L = r.layers.length,
    Hn = r.layers[0].length;
  const ls = el("select", { class: "cross-layer" }),
    hs = el("select", { class: "cross-head" });
  for (let l = 0; l < L; l++) ls.append(new Option("layer " + l, String(l)));
  hs.append(new Option("mean of heads", "mean"));
  for (let h = 0; h < Hn; h++) hs.append(new Option("head " + h, String(h)));
  ls.value = String(L - 1);
  const chips = el("p", { class: "src-attn" });
  function shade() {
    const rows = r.layers[Number(ls.value)];
    const w =
      hs.value === "mean"
        ? rows[0].map((_, j) => rows.reduce((a, row) => a + row[j], 0) / rows.length)
        : rows[Number(hs.value)];
    const top = Math.max(...w);
    chips.replaceChildren(
      ...r.source.map((t, j) => weightChip(t, w[j], 0.08 + (0.8 * w[j]) / top)),
    );
  }
  ls.addEventListener("change", shade);
  hs.addEventListener("change", shade);
  shade();
  view.append(
    el(
      "div",
      { class: "cross" },
      el(
        "p",
        {},
        "Which source tokens the next word is read from: the cross-attention of the last decoder token, ",
        ls,
        " ",
        hs,
      ),
      chips,
    ),
  );
}
