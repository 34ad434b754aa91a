// The Compare tab: two inputs (or two models) side by side, B's text following A's until
// typed.
import { el } from "./dom.js";
import { pct, sig } from "./numbers.js";
import { $, chip, drawMaps, input, nextTable, post, state } from "./page.js";

$("model-b").addEventListener("change", compare);
$("text-b").addEventListener("input", () => {
  clearTimeout(state.cmpTimer);
  state.cmpTimer = setTimeout(compare, 250);
});
async function pane(title, body, wantName, wantSite, wantLayer, wantHead) {
  const div = el("div", { class: "pane" }, el("h3", { text: title }));
  let run;
  try {
    run = await post("run", body);
  } catch (e) {
    div.append(el("p", { class: "problem", text: e.message }));
    return div;
  }
  for (const [stack, toks] of Object.entries(run.tokens))
    div.append(el("p", {}, el("b", { text: stack + ": " }), ...toks.map((t) => chip(t))));
  const o = run.output;
  if (o.kind === "next") div.append(nextTable(o.top.slice(0, 5)));
  if (o.kind === "translation") div.append(el("p", { class: "translation", text: "→ " + o.text }));
  if (o.kind === "embedding")
    div.append(el("p", { text: "embedding: " + o.first.slice(0, 4).map(sig).join(", ") + ", …" }));
  if (o.kind === "class")
    div.append(el("p", { text: "class: " + o.label + " " + pct(o.probability) }));
  const a =
    run.attention.find((x) => x.name === wantName) ||
    run.attention.find(
      (x) => x.site === wantSite && x.layer === wantLayer && x.head === wantHead,
    ) ||
    run.attention[0];
  if (a) {
    let r;
    try {
      r = await post("attention", Object.assign({}, body, { name: a.name }));
    } catch (e) {
      div.append(el("p", { class: "problem", text: e.message }));
      return div;
    }
    const box = el("div");
    box.innerHTML = r.html;
    div.append(box);
    requestAnimationFrame(() => drawMaps(box, r.maps, a.name, null));
  }
  return div;
}
export async function compare() {
  if (!state.run) {
    $("compare").replaceChildren();
    return;
  }
  const seq = state.seq,
    mine = (state.cmpSeq = (state.cmpSeq || 0) + 1);
  const bModel = $("model-b").value,
    bText = $("text-b").value || state.text;
  const a = pane(
    "A: " + state.model + " · " + JSON.stringify(state.text),
    input(),
    state.mapName,
    state.site,
    state.layer,
    state.head,
  );
  const b = pane(
    "B: " + bModel + " · " + JSON.stringify(bText),
    { model: bModel, text: bText },
    state.mapName,
    state.site,
    state.layer,
    state.head,
  );
  const panes = await Promise.all([a, b]);
  if (seq !== state.seq || mine !== state.cmpSeq) return; // a newer comparison is coming
  $("compare").replaceChildren(...panes);
}
