// Why the winner beat a hypothesis picked in the beam tree: at the step where the two parted, the
// log-probability gap (the logit difference there) split exactly into heads and FFNs (each head
// with the token it read most) and into source and target tokens (the server's /api/choice,
// glassformer.inspect.choice).
import { el } from "./dom.js";
import { sig } from "./numbers.js";
import { exact, post, state } from "./page.js";

const TOP = 4; // parts named in the sentence; the tables show more
const ROWS = 8;
const quoted = (t) => "“" + t + "”";
const signed = (v) => (v >= 0 ? "+" : "") + sig(v);

// "decoder.1.cross_attn.head2 reading ␣world", or a part's name.
export function partName(p) {
  return p.reads && p.reads.length ? p.name + " reading " + p.reads[0].token : p.name;
}

// The sentence: kept “X” over “Y”: +g at step k, of which the largest parts (and the rest).
export function choiceSentence(d) {
  const p = d.parting,
    named = p.parts.slice(0, TOP).map((q) => partName(q) + " " + signed(q.value));
  const rest = p.parts.slice(TOP);
  if (rest.length)
    named.push(rest.length + " more " + signed(rest.reduce((s, q) => s + q.value, 0)));
  return (
    "kept " +
    quoted(d.kept.text) +
    " over " +
    quoted(d.dropped.text) +
    ": " +
    signed(p.gap) +
    " at step " +
    p.step +
    " (" +
    p.token +
    " over " +
    p.versus +
    (p.context ? " after " + quoted(p.context) : "") +
    "), of which " +
    named.join(", ")
  );
}

function splitTable(title, rows) {
  const t = el(
    "table",
    { class: "choice-split" },
    el("tr", {}, el("th", { text: title }), el("th", { text: "share of the gap" })),
  );
  rows.forEach(([label, v]) =>
    t.append(
      el(
        "tr",
        {},
        el("td", { text: label }),
        el("td", { class: v >= 0 ? "up" : "down", text: signed(v), title: exact(v) }),
      ),
    ),
  );
  return t;
}

function rendered(d) {
  const p = d.parting,
    side = { encoder: "source", decoder: "target" };
  const tokens = p.tokens
    .slice(0, ROWS)
    .map((t) => [side[t.stack] + " " + t.token, t.value])
    .concat([["constants (biases, β)", p.constants]]);
  return [
    el("p", { class: "choice-why", "data-gap": p.gap, text: choiceSentence(d) + "." }),
    el("p", {
      class: "sub",
      text:
        "Both read the same context there, so the gap in log-probability is the logit difference; " +
        "its parts add up to " +
        sig(p.sum) +
        " (error " +
        p.error.toExponential(0) +
        "), heads and FFNs by their direct effect, tokens by their total effect.",
    }),
    el(
      "div",
      { class: "choice-tables" },
      splitTable(
        "component",
        p.parts.slice(0, ROWS).map((q) => [partName(q), q.value]),
      ),
      splitTable("token", tokens),
    ),
  ];
}

// The panel of a picked node: asked of the server unless the node is on the winner's path.
export function choicePanel(g, n) {
  const best = g.beam.best.ids,
    box = el("div", {
      class: "choice",
      "data-kept": JSON.stringify(best),
      "data-dropped": JSON.stringify(n.ids),
    });
  box.append(el("h4", { text: "Why the winner beat it" }));
  if (n.ids.every((x, i) => best[i] === x)) {
    box.append(
      el("p", {
        class: "sub choice-on-path",
        text: "This hypothesis is on the winner's path: the winner continues it.",
      }),
    );
    return box;
  }
  const wait = el("p", { class: "sub", text: "Splitting the gap…" });
  box.append(wait);
  const asked = {
    model: state.model,
    src: g.src,
    n_prompt: g.n_prompt,
    kept: best,
    dropped: n.ids,
    length_penalty: g.beam.length_penalty,
  };
  post("choice", asked).then(
    (d) => wait.replaceWith(...rendered(d)),
    (e) => wait.replaceWith(el("p", { class: "problem", text: e.message })),
  );
  return box;
}
