// Top examples from a store of activations (`serve MODEL --store DIR`): the card of a step the
// store holds gets a "Top examples" box. An FFN's hidden layer (or any stored step) asks for a
// unit's number; a head's output C ranks the head by the norm of its rows. The server reads the
// store shard by shard (corpus/top.py); each context is drawn with its token marked. With
// `serve --sae SAE`, the card of the step an SAE reads gets a feature card too: a feature's top
// examples in the store and its logit effect (the tokens its decoder row pushes up and down).
import { el } from "./dom.js";
import { post, state } from "./page.js";

const asked = new Map(); // model -> the promise of its store's steps

function storeOf(model) {
  if (!asked.has(model))
    asked.set(
      model,
      post("store", { model }).catch(() => ({ steps: [] })),
    );
  return asked.get(model);
}

// The unit a card's step ranks: a head for STACK.L.KIND.headH.C, else STEP:N (N typed).
function headOf(name) {
  const m = /^(.*\.head\d+)\.C$/.exec(name);
  return m ? m[1] : null;
}

export async function addTopExamples(card, name) {
  const model = state.model,
    store = await storeOf(model);
  if (!store.steps || !store.steps.includes(name) || model !== state.model) return;
  const head = headOf(name);
  const list = el("ol", { class: "top-examples" });
  const unit = el("input", { type: "number", min: "0", value: "0", class: "top-unit" });
  const go = el("button", { type: "button", class: "top-go", text: "Top examples" });
  const says = el("p", { class: "note top-says" });
  go.addEventListener("click", async () => {
    const u = head || name + ":" + unit.value;
    says.textContent = "reading the store…";
    try {
      const r = await post("top", { model, unit: u, k: 10 });
      says.textContent = `${r.says}: the ${r.examples.length} largest of ${r.rows} rows`;
      list.replaceChildren(...r.examples.map(example));
    } catch (e) {
      says.textContent = e.message;
      list.replaceChildren();
    }
  });
  const box = el(
    "div",
    { class: "top-box" },
    el("b", { text: "Top examples in the store " }),
    head ? el("span", { text: "(this head: the norm of its output row C) " }) : unit,
    " ",
    go,
    says,
    list,
  );
  card.append(box);
  const feature = store.features && store.features[name];
  if (feature) card.append(featureBox(model, feature));
}

// A feature of the SAE on this step: its top examples and its logit effect.
function featureBox(model, feature) {
  const list = el("ol", { class: "top-examples" });
  const n = el("input", {
    type: "number",
    min: "0",
    max: String(feature.d_sae - 1),
    value: "0",
    class: "feature-unit",
  });
  const go = el("button", { type: "button", class: "feature-go", text: "Feature card" });
  const says = el("p", { class: "note feature-says" });
  const effect = el("p", { class: "note feature-effect" });
  go.addEventListener("click", async () => {
    says.textContent = "reading the store…";
    try {
      const body = { model, unit: "feature:" + n.value, k: 10, sae: feature.sae };
      const r = await post("top", body);
      says.textContent = `${r.says}: the ${r.examples.length} largest of ${r.rows} rows`;
      list.replaceChildren(...r.examples.map(example));
      const shown = (ts) => ts.map(([t, v]) => `${t} ${v.toPrecision(3)}`).join(", ");
      effect.textContent = r.up.length ? `pushes up: ${shown(r.up)}; down: ${shown(r.down)}` : "";
    } catch (e) {
      says.textContent = e.message;
      list.replaceChildren();
      effect.textContent = "";
    }
  });
  return el(
    "div",
    { class: "top-box feature-box" },
    el("b", { text: `Feature of the SAE (${feature.d_sae} features) ` }),
    n,
    " ",
    go,
    says,
    effect,
    list,
  );
}

function example(e) {
  const tokens = e.pieces.map((p, j) =>
    j === e.at
      ? el("mark", { class: "top-token", title: String(e.value), text: p })
      : el("span", { text: p }),
  );
  return el(
    "li",
    { class: "top-example", "data-row": String(e.row) },
    el("span", { class: "top-value", title: String(e.value), text: e.value.toPrecision(4) }),
    " ",
    el("span", { class: "top-where", text: `doc ${e.document} · pos ${e.position} ` }),
    el("span", { class: "top-context" }, ...tokens),
  );
}
