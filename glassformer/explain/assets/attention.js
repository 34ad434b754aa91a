// The Attention tab: the site / layer / head pickers, the map with its reading labels
// (a decoder row reads a token and predicts the next), cross-attention on the source chips,
// every head of a layer side by side; clicking a cell opens the neuron view (neuron.js).
import { el, fill, unique } from "./dom.js";
import { draw } from "./heatmap.js";
import { measureAt, toggleHead } from "./intervene.js";
import { neuron } from "./neuron.js";
import {
  $,
  app,
  applies,
  drawMaps,
  exportButtons,
  headKey,
  input,
  key,
  matrixOf,
  post,
  problem,
  state,
  tip,
} from "./page.js";
import { readable, sourceWeights } from "./readable.js";
import { axesOf, rowLabel } from "./rows.js";

export const site = $("site");
export const layer = $("layer");
export const head = $("head");
const NO_SITE = {
  // the attentions a model does not have, and why
  decoder: {
    "encoder.self_attn": "none: a decoder-only model has no encoder",
    "decoder.cross_attn": "none: a decoder-only model has no encoder to read from",
  },
  encoder: {
    "decoder.self_attn": "none: an encoder has no decoder",
    "decoder.cross_attn": "none: an encoder has no decoder",
  },
};
export function setupPickers(run) {
  const maps = run.attention;
  $("tab-attention").querySelector(".picker").hidden = !maps.length;
  if (!maps.length) {
    state.mapName = null;
    $("map").replaceChildren(el("p", { class: "sub", text: "This run has no attention maps." }));
    return;
  }
  const sites = unique(maps.map((a) => a.site));
  const want = state.want; // a head asked for from elsewhere (the Training tab), once
  state.want = null;
  const keep = want ? want.site : site.value || state.site;
  site.replaceChildren(
    ...sites.map(
      (s) =>
        new Option((s || "the article's heads") + " · " + maps.find((a) => a.site === s).kind, s),
    ),
  );
  for (const [s, why] of Object.entries(NO_SITE[run.arch] || {})) {
    const o = new Option(s + " · " + why, s);
    o.disabled = true;
    o.title = why;
    site.append(o);
  }
  site.value = sites.includes(keep) ? keep : sites[0];
  pickLayerHead(want && want.site === site.value ? want : null);
}
function pickLayerHead(want) {
  // want: {layer, head} to choose, else the choice stays
  const maps = state.run.attention,
    here = maps.filter((a) => a.site === site.value);
  fill(layer, unique(here.map((a) => key(a.layer))), "layer", want ? key(want.layer) : undefined);
  const inLayer = here.filter((a) => key(a.layer) === layer.value);
  fill(head, unique(inLayer.map((a) => key(a.head))), "head", want ? key(want.head) : undefined);
  const chosen = inLayer.find((a) => key(a.head) === head.value) || here[0];
  state.site = site.value;
  state.layer = chosen.layer;
  state.head = chosen.head;
  state.mapName = chosen.name;
  $("shown").textContent = (chosen.label ? chosen.label + " · " : "") + chosen.name;
  const fixed = state.run.arch === "walkthrough" || chosen.head === null;
  const one = (w) =>
    fixed
      ? "the article's worked example: its attention is fixed, no " + w + " to choose"
      : "this attention has one " + w;
  if (layer.disabled) layer.title = one("layer");
  else layer.title = "";
  if (head.disabled) head.title = one("head");
  else head.title = "";
  applies(
    $("all-heads"),
    fixed
      ? "a walkthrough's attention has no heads to lay side by side"
      : inLayer.length < 2
        ? "this layer has one head"
        : "",
    "every head of this layer side by side",
  );
  applies(
    $("ablate-head"),
    fixed ? "a walkthrough's steps are fixed: nothing to ablate (choose a model)" : "",
    "switch this head off (as chosen on the Ablate & patch tab) and see what it changes",
  );
  $("ablate-head").checked =
    !fixed && state.ablated.has(headKey(state.site, state.layer, state.head));
  state.crossRow = null;
}
[site, layer, head].forEach((s) =>
  s.addEventListener("change", () => {
    pickLayerHead();
    drawAttention(state.seq);
  }),
);
$("all-heads").addEventListener("change", () => drawAttention(state.seq));
$("ablate-head").addEventListener("change", (e) =>
  toggleHead(state.site, state.layer, state.head, e.target.checked),
);

function clearMap(text) {
  $("map").replaceChildren(el("p", { class: "sub", text }));
  delete $("map").dataset.name;
  app.dispatchEvent(new CustomEvent("gf-map", { detail: null }));
  state.mapData = null;
  $("neuron").hidden = true;
  $("heads-grid").hidden = true;
}
export async function drawAttention(seq) {
  if (!state.mapName) return;
  const name = state.mapName;
  let a;
  try {
    a = await post("attention", input({ name }));
  } catch (e) {
    if (seq === state.seq && name === state.mapName) {
      clearMap("No map: " + e.message);
      problem(e.message);
    }
    return;
  }
  if (seq !== state.seq || name !== state.mapName) return;
  const box = $("map"),
    entry = state.run.attention.find((x) => x.name === name),
    ax = axesOf(state.run, entry);
  box.innerHTML = a.html;
  state.mapData = a.values ? matrixOf(a.values, a.rows, a.cols) : Object.values(a.maps)[0];
  state.axes = ax;
  const maps = {}; // drawn with the rows' reading labels; the exports keep the tokens
  for (const [k, m] of Object.entries(a.maps))
    maps[k] =
      ax && m.rows && m.rows.length === ax.rows.length
        ? Object.assign({}, m, { rows: ax.rows.map(rowLabel) })
        : m;
  drawMaps(
    box,
    maps,
    name,
    a.neuron
      ? (i, j) => {
          state.crossRow = i;
          if (ax && ax.cross) sourceWeights(ax, null);
          measureAt(ax, i);
          neuron(name, i, j);
        }
      : null,
  );
  if (ax) readable(box, ax);
  box.dataset.name = name;
  app.dispatchEvent(new CustomEvent("gf-map", { detail: name })); // overview.js marks its box
  if ($("all-heads").checked && !$("all-heads").disabled) await headsGrid(seq);
  else $("heads-grid").hidden = true;
  const [i, j] = state.neuronAt || [-1, -1]; // the same cell of the new map, if it has one
  if (!$("neuron").hidden && a.neuron && i < a.shape[0] && j < a.shape[1]) neuron(name, i, j);
  else $("neuron").hidden = true;
}
const attExports = $("tab-attention").querySelector(".picker .exports");
attExports.replaceWith(
  exportButtons(
    () => state.mapData,
    () => (state.mapName || "map").replace(/[^\w.-]+/g, "_"),
  ),
);

async function headsGrid(seq) {
  const grid = $("heads-grid");
  let r;
  try {
    r = await post("heads", input({ site: state.site, layer: state.layer }));
  } catch (e) {
    if (seq === state.seq) {
      grid.replaceChildren();
      grid.hidden = true;
      problem(e.message);
    }
    return;
  }
  if (seq !== state.seq) return;
  grid.hidden = false;
  grid.replaceChildren(
    ...r.heads.map((h) => {
      const hm = el("div", { class: "hm" });
      const hk = headKey(state.site, state.layer, h.head);
      const box = el("input", { type: "checkbox", class: "ablate" });
      box.checked = state.ablated.has(hk);
      box.addEventListener("click", (e) => e.stopPropagation());
      box.addEventListener("change", () =>
        toggleHead(state.site, state.layer, h.head, box.checked),
      );
      const t = el(
        "div",
        {
          class: "thumb" + (h.head === state.head ? " on" : "") + (box.checked ? " ablated" : ""),
          "data-head": key(h.head),
          title: h.name,
        },
        hm,
        el("div", { text: "head " + key(h.head) }),
        el(
          "label",
          { title: "switch this head off and see what it changes (below the map)" },
          box,
          " ablate",
        ),
      );
      t.addEventListener("click", () => {
        head.value = key(h.head);
        pickLayerHead();
        drawAttention(state.seq);
      });
      requestAnimationFrame(() => draw(hm, h.map, tip, { fit: 120 }));
      return t;
    }),
  );
}

// Open a head's map from another view (the overview, the Training tab): want {site, layer,
// head}, the layer and head as numbers or their text. False when this run has no such site.
export function openHead(want) {
  if (![...site.options].some((o) => !o.disabled && o.value === want.site)) return false;
  site.value = want.site;
  pickLayerHead(want);
  drawAttention(state.seq);
  return true;
}
