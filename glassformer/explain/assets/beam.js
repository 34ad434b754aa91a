// Beam search step by step: the beam and the finished hypotheses as tables, the tree, why the
// winner won, a node's distribution; and tracing a generation step's prefix.
import { choicePanel } from "./choice.js";
import { el, svgEl } from "./dom.js";
import { distChart, renderGeneration } from "./generate.js";
import { pct, plural, sig } from "./numbers.js";
import { $, chip, exact, numEl, state, svgExportButtons } from "./page.js";
import { update } from "./run.js";
import { showTab } from "./steps.js";

const endMark = (n) => (n.finished ? n.token + " · end" : n.token); // the end token, readable
const quoted = (t) => "“" + t + "”";
function beamWhy(g, k) {
  // the winner, and why it won (once it is in view)
  const w = g.beam.why,
    last = k === g.beam.steps.length - 1,
    alpha = g.beam.length_penalty;
  if (!w) return null;
  const next = w.runner_up
    ? ", higher than any other hypothesis, open or finished (the next best: " +
      quoted(w.runner_up.text) +
      ", " +
      sig(w.runner_up.score) +
      ")"
    : ", and no other hypothesis was left";
  let text;
  if (w.finished && k >= w.step)
    text =
      quoted(w.text) +
      " finished at step " +
      w.step +
      " with score " +
      sig(w.score) +
      " (log p " +
      sig(w.logprob) +
      " / " +
      w.n_generated +
      (alpha === 1 ? "" : "^" + alpha) +
      ")" +
      next +
      ": it wins.";
  else if (!w.finished && last)
    text =
      quoted(w.text) +
      " was still open when the search stopped, with the best score of all, " +
      sig(w.score) +
      next +
      ": it wins.";
  else
    text =
      "No winner yet: the search goes on while an open hypothesis can still beat every finished one.";
  return el("p", { class: "why", "data-winner": w.text }, text);
}
function beamTable(rows, finishedTable) {
  const t = el(
    "table",
    { class: "beam" + (finishedTable ? " finished" : "") },
    el(
      "tr",
      {},
      ...["#", "hypothesis", finishedTable ? "finished at step" : null, "log p", "|y|", "score", ""]
        .filter((x) => x !== null)
        .map((x) => el("th", { text: x })),
    ),
  );
  rows.forEach(({ h, r, step, wins }) => {
    const lp = finishedTable
      ? { text: sig(h.logprob), title: exact(h.logprob) }
      : { text: sig(h.logprob), title: exact(h.logprob), "data-logprob": h.logprob };
    t.append(
      el(
        "tr",
        { class: wins ? "wins" : "" },
        el("td", { text: r }),
        el("td", { class: "hyp", text: JSON.stringify(h.text) }),
        finishedTable ? el("td", { text: step }) : null,
        el("td", lp),
        el("td", { text: h.n_generated }),
        el("td", { text: sig(h.score), title: exact(h.score) }),
        el("td", {
          class: "state",
          text: wins ? "★ wins" : h.finished ? "finished (end token)" : "open",
        }),
      ),
    );
  });
  return t;
}
export function renderBeam(g, k) {
  const view = $("gen-step-view"),
    steps = g.beam.steps.slice(0, k + 1),
    alpha = g.beam.length_penalty;
  const best = g.beam.best.ids,
    same = (a, b) => a.length === b.length && a.every((x, i) => b[i] === x);
  const onBest = (ids) => ids.every((x, i) => best[i] === x);
  const here = g.beam.steps[k].map((h, r) => ({ h, r, wins: same(h.ids, best) }));
  const done = [];
  steps.forEach((nodes, c) =>
    nodes.forEach((h) => {
      if (h.finished) done.push({ h, step: c, wins: same(h.ids, best) });
    }),
  );
  done.sort((a, b) => b.h.score - a.h.score);
  done.forEach((d, r) => {
    d.r = r;
  });
  view.append(
    el(
      "p",
      { class: "formula", "data-alpha": alpha },
      "The winner is the hypothesis y with the best ",
      el("b", {}, "score = log P(y) / |y|", el("sup", { text: "α" })),
      ", with α = " +
        alpha +
        " (the length penalty): log P(y) is the sum of its generated tokens' log-probabilities, |y| the number of tokens it generated (the end token included)" +
        (alpha === 1
          ? "; α = 1 makes the score the mean log-probability per token, so a longer hypothesis is not punished for its length"
          : alpha === 0
            ? "; α = 0 leaves the plain sum, which favours short hypotheses"
            : "") +
        ". At each step the beam keeps the candidates with the highest log P(y); one that takes the end token is finished and waits, with its score, until the search ends.",
    ),
  );
  view.append(
    el("p", {
      text:
        "Step " +
        k +
        ": the beam holds " +
        plural(here.length, "hypothesis", "hypotheses") +
        ", the most likely (summed log-probabilities); click a node of the tree to see the distribution its token was chosen from.",
    }),
    beamTable(here, false),
  );
  view.append(
    el("h4", { text: "Finished so far (" + done.length + ")" }),
    done.length
      ? beamTable(done, true)
      : el("p", { class: "sub", text: "None yet: no hypothesis has taken the end token." }),
  );
  const why = beamWhy(g, k);
  if (why) view.append(why);
  const colW = 170,
    nodeW = 150,
    rowH = 34,
    Hn = Math.max(...steps.map((s) => s.length));
  const W = 110 + colW * steps.length,
    Hh = 20 + rowH * Hn;
  const s = svgEl("svg", { width: W, height: Hh, viewBox: "0 0 " + W + " " + Hh, class: "tree" });
  s.append(svgEl("rect", { width: W, height: Hh, fill: "#fff" }));
  s.append(svgEl("rect", { x: 4, y: 10, width: 90, height: 26, rx: 4, fill: "#eef2f7" }));
  s.append(svgEl("text", { x: 49, y: 27, "text-anchor": "middle" }, "prompt"));
  const picked = state.beamNode;
  steps.forEach((nodes, c) =>
    nodes.forEach((n, r) => {
      const x = 110 + c * colW,
        y = 10 + r * rowH,
        wins = same(n.ids, best);
      const px = c === 0 ? 94 : 110 + (c - 1) * colW + nodeW,
        py = c === 0 ? 23 : 10 + n.parent * rowH + 13;
      s.append(
        svgEl("path", {
          d:
            "M" +
            px +
            "," +
            py +
            " C" +
            (px + 10) +
            "," +
            py +
            " " +
            (x - 10) +
            "," +
            (y + 13) +
            " " +
            x +
            "," +
            (y + 13),
          fill: "none",
          stroke: onBest(n.ids) ? "#2e6fb0" : "#b7c0ca",
          "stroke-width": onBest(n.ids) ? 2 : 1,
        }),
      );
      const sel = picked && picked[0] === c && picked[1] === r;
      const g2 = svgEl("g", {
        class: "node" + (wins ? " wins" : "") + (sel ? " picked" : ""),
        "data-step": c,
        "data-rank": r,
        style: "cursor:pointer",
      });
      g2.append(
        svgEl("rect", {
          x,
          y,
          width: nodeW,
          height: 26,
          rx: 4,
          fill: n.finished ? "#fde2e1" : onBest(n.ids) ? "#dcebf8" : "#f6f8fa",
          stroke: sel ? "#e08a00" : wins ? "#1d4f82" : "#b7c0ca",
          "stroke-width": sel || wins ? 2.5 : 1,
        }),
      );
      g2.append(
        svgEl(
          "text",
          { x: x + 6, y: y + 17, "font-weight": wins ? 700 : 400 },
          (wins ? "★ " : "") + endMark(n),
        ),
      );
      g2.append(
        svgEl(
          "text",
          { x: x + nodeW - 6, y: y + 17, "text-anchor": "end", fill: "#5b6673" },
          sig(n.logprob),
        ),
      );
      g2.append(
        svgEl(
          "title",
          {},
          JSON.stringify(n.text) +
            " · log p " +
            exact(n.logprob) +
            " · score " +
            exact(n.score) +
            (n.finished ? " · finished (the end token)" : "") +
            (wins ? " · the winner" : ""),
        ),
      );
      g2.addEventListener("click", () => {
        state.beamNode = [c, r];
        renderGeneration();
      });
      s.append(g2);
    }),
  );
  $("beam").replaceChildren(s, svgExportButtons(s, "beam-to-step-" + k));
  $("beam").scrollLeft = $("beam").scrollWidth; // the newest step in view
  $("beam-node").replaceChildren();
  if (picked && picked[0] <= k) beamNodeView(g, picked[0], picked[1]);
}
// A node of the tree: the distribution its token was chosen from (after its parent's prefix).
function beamNodeView(g, c, r) {
  const n = g.beam.steps[c][r],
    d = g.beam.distributions && g.beam.distributions[n.dist];
  const parent = c === 0 ? null : g.beam.steps[c - 1][n.parent];
  const prefix = parent
    ? JSON.stringify(parent.text)
    : "the start (" + (g.n_prompt > 1 ? "the prompt" : "the start token") + ")";
  const box = el("div", { class: "beam-node", "data-step": c, "data-rank": r });
  box.append(el("h4", { text: "Step " + c + ", hypothesis " + r + ": " + endMark(n) }));
  $("beam-node").replaceChildren(box);
  if (!d) {
    box.append(el("p", { class: "sub", text: "The distribution of this step was not recorded." }));
    box.append(choicePanel(g, n));
    return;
  }
  const p = d.top.find((t) => t.id === n.id);
  box.append(
    el(
      "p",
      {},
      "After " +
        prefix +
        " (the model reads " +
        plural(d.context, "token") +
        "), the next-token distribution; this node took ",
      chip({ shown: n.token, id: n.id }),
      p && p.p !== null ? " with p = " + pct(p.p) : "",
      " — its hypothesis: log p ",
      numEl(n.logprob),
      ", score ",
      numEl(n.score),
      ".",
    ),
  );
  const chart = distChart({ top: d.top, chosen: n.id }, false);
  box.append(el("div", {}, chart, svgExportButtons(chart, "beam-step-" + c + "-hypothesis-" + r)));
  box.append(
    el("button", {
      type: "button",
      class: "node-trace",
      text: "show the trace of this prefix",
      onclick: () => traceStep(n.ids.slice(0, -1), "beam step " + c + ", hypothesis " + r),
    }),
  );
  box.append(choicePanel(g, n));
}
function stepTo(k) {
  if (!state.gen) return;
  const n = state.gen.strategy === "beam" ? state.gen.beam.steps.length : state.gen.steps.length;
  state.genStep = Math.max(0, Math.min(n - 1, k));
  $("gen-step").value = String(state.genStep);
  renderGeneration();
}
$("gen-step").addEventListener("input", (e) => stepTo(Number(e.target.value)));
$("gen-back").addEventListener("click", () => stepTo(state.genStep - 1));
$("gen-forward").addEventListener("click", () => stepTo(state.genStep + 1));
$("gen-first").addEventListener("click", () => stepTo(0));
$("gen-last").addEventListener("click", () => stepTo(1e9));
$("gen-trace").addEventListener("click", () => {
  const g = state.gen,
    k = state.genStep;
  if (!g) return;
  const context =
    g.strategy === "beam" ? g.beam.steps[k][0].ids.slice(0, -1) : g.ids.slice(0, g.n_prompt + k);
  traceStep(context, "generation step " + k);
});
function traceStep(context, what) {
  const L = state.info && state.info.max_len;
  if (L && context.length > L) context = context.slice(-L); // the window the model read
  state.stepInput =
    state.run && state.run.arch === "encoder-decoder" ? { target: context } : { ids: context };
  state.typedAt = null; // no key press: no latency to tell
  const banner = $("step-banner");
  banner.hidden = false;
  banner.querySelector("span").textContent =
    "Showing the trace of " +
    what +
    ": the forward pass over its " +
    plural(context.length, "token") +
    " that predicts the next one. ";
  showTab("attention");
  update();
}
