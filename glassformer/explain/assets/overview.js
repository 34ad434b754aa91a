// The explorer's picture of the whole model (explain/overview.py draws it from the model's
// Config; POST /api/overview sends it). A box opens its steps: an attention box, a head or a
// block switches the Attention tab to that site, layer and head (through the page's own
// pickers, as if chosen there); any other box opens the Every step tab at its first step. The
// box of what the page shows now is highlighted (the attention map on the Attention tab, the
// step opened from here on the Every step tab). Clicking a token chip selects that token: its
// stack's residual stream, the line its row travels along through every block, is highlighted
// and a sentence says which rows attention lets it read. It follows the page through its events
// (gf-model, gf-run, gf-map, gf-tab) and opens views through their functions (showTab,
// openHead). The SVG is the server's, its text escaped.
import { openHead } from "./attention.js";
import { $, app } from "./page.js";
import { showTab } from "./steps.js";

const box = $("overview");
const KEY = "glassformer-overview"; // the panel closed once stays closed
const state = { model: null, svg: "", all: "", expanded: false, token: null, opened: null };

async function load(model) {
  state.model = model;
  let r = { svg: "" };
  try {
    const answer = await fetch("/api/overview", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model }),
    });
    if (answer.ok) r = await answer.json();
  } catch {
    /* no picture: the rest of the page works */
  }
  if (state.model !== model) return; // another model was chosen meanwhile
  state.svg = r.svg || "";
  state.all = r.svg_all || "";
  state.token = null;
  render();
}

function render() {
  box.hidden = !state.svg;
  if (!state.svg) {
    box.replaceChildren();
    return;
  }
  const details = document.createElement("details");
  details.className = "gf-ov-panel";
  details.open = remembered() !== "closed";
  details.addEventListener("toggle", () => remember(details.open ? "open" : "closed"));
  const summary = document.createElement("summary");
  summary.textContent = "The whole model";
  const scroll = document.createElement("div");
  scroll.className = "gf-ov-scroll";
  scroll.innerHTML = state.expanded && state.all ? state.all : state.svg; // escaped by the server
  const note = document.createElement("p");
  note.className = "gf-ov-note sub";
  details.append(summary);
  if (state.all) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "gf-ov-expand";
    b.textContent = state.expanded ? "fold the middle blocks" : "draw every block";
    b.addEventListener("click", () => {
      state.expanded = !state.expanded;
      render();
    });
    summary.append(" ", b);
  }
  details.append(scroll, note);
  box.replaceChildren(details);
  mark();
  lane();
}

function remembered() {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}
function remember(v) {
  try {
    localStorage.setItem(KEY, v);
  } catch {
    /* private mode */
  }
}

// -- a box opens its steps ------------------------------------------------------------------
box.addEventListener("click", (e) => {
  const g = e.target.closest("svg [data-step]");
  if (g) go(g.dataset.step);
});
export function go(step) {
  const [stack, layer, site, head] = step.split(".");
  const shared = /^kv_head\d+$/.test(head || ""); // a K/V head has no map: its steps
  const attention =
    !shared && /^\d+$/.test(layer || "") && (!site || /^(self|cross)_attn$/.test(site));
  const want = {
    site: stack + "." + (site || "self_attn"),
    layer,
    head: head ? head.slice("head".length) : null,
  };
  if (attention && [...$("site").options].some((o) => !o.disabled && o.value === want.site)) {
    state.opened = null;
    showTab("attention");
    if (!head) want.head = $("head").value; // a block or an attention box: the head stays
    openHead(want);
    return;
  }
  state.opened = step;
  showTab("steps"); // the page lays the steps out
  const card = () =>
    [...$("steps").querySelectorAll("article[data-name]")].find(
      (a) => a.dataset.name === step || a.dataset.name.startsWith(step + "."),
    );
  const first = card();
  if (first) {
    for (let d = first.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
    first.scrollIntoView({ block: "start" });
    keep(card, step);
  }
  mark();
}
// The cards above it grow as their values load: keep the card in view for a few seconds,
// until the reader scrolls or chooses something else.
function keep(card, step) {
  const end = performance.now() + 4000,
    stop = () => {
      ro.disconnect();
      off.forEach(([t, f]) => removeEventListener(t, f));
    };
  const ro = new ResizeObserver(() => {
    const c = card();
    if (performance.now() > end || state.opened !== step || !c) stop();
    else c.scrollIntoView({ block: "start" });
  });
  const off = ["wheel", "keydown", "touchstart", "mousedown"].map((t) => [t, stop]);
  off.forEach(([t, f]) => addEventListener(t, f, { once: true, passive: true }));
  ro.observe($("steps"));
}

// -- the box of the current view ------------------------------------------------------------
function current() {
  const on = app.querySelector(".tabs button.on");
  const tab = on ? on.dataset.tab : "";
  if (tab === "attention") return $("map").dataset.name || null;
  return tab === "steps" ? state.opened : null;
}
function mark() {
  const name = current(),
    svg = box.querySelector("svg");
  if (!svg) return;
  svg.querySelectorAll("[data-step]").forEach((g) => {
    const p = g.dataset.step;
    g.classList.toggle("cur", !!name && (name === p || name.startsWith(p + ".")));
  });
}

// -- the path of the selected token ---------------------------------------------------------
$("tokens").addEventListener("click", (e) => {
  const chip = e.target.closest(".tok"),
    row = chip && chip.closest("p[class^=stack-]");
  if (!row) return;
  const stack = row.className.slice("stack-".length),
    index = [...row.querySelectorAll(".tok")].indexOf(chip);
  const same = state.token && state.token.stack === stack && state.token.index === index;
  state.token = same ? null : { stack, index };
  lane();
});
function lane() {
  const t = state.token,
    svg = box.querySelector("svg"),
    note = box.querySelector(".gf-ov-note");
  const row = t && $("tokens").querySelector("p.stack-" + t.stack);
  const chips = row ? [...row.querySelectorAll(".tok")] : [];
  if (t && !chips[t.index]) state.token = null; // a new run with fewer tokens
  $("tokens")
    .querySelectorAll(".tok.gf-ov-sel")
    .forEach((c) => c.classList.remove("gf-ov-sel"));
  const stack = state.token ? state.token.stack : null;
  if (svg)
    svg
      .querySelectorAll(".gf-ov-lane")
      .forEach((p) => p.classList.toggle("on", p.dataset.stack === stack));
  if (svg)
    svg
      .querySelectorAll(".gf-ov-mline")
      .forEach((p) => p.classList.toggle("on", stack === "encoder"));
  if (!note) return;
  if (!state.token) {
    note.textContent = "Click a token above to follow its row through the model.";
    return;
  }
  const chip = chips[t.index],
    shown = chip.childNodes[0] ? chip.childNodes[0].textContent : "";
  chip.classList.add("gf-ov-sel");
  const both = svg && svg.dataset.arch === "encoder-decoder";
  const reads =
    t.stack === "decoder"
      ? "its masked self-attention reads tokens 0–" +
        t.index +
        " only (the causal mask)" +
        (both ? ", its cross-attention every source token" : "")
      : "its self-attention reads every token" +
        (both ? "; through the encoder output M every decoder token reads its row" : "");
  const norms = svg && svg.dataset.normKind === "rmsnorm" ? "RMSNorms" : "LayerNorms";
  const alone =
    svg && svg.dataset.ffn === "0"
      ? "The " + norms + " work"
      : "The FFN and the " + norms + " work";
  const turned =
    svg && svg.dataset.positions === "rotary"
      ? "; its self-attention's Q and K are turned by its position (RoPE)"
      : "";
  note.textContent =
    "Token " +
    t.index +
    " “" +
    shown +
    "” (" +
    t.stack +
    "): its row travels along the highlighted line, through every block. " +
    alone +
    " on its row alone; only attention mixes rows: " +
    reads +
    turned +
    ".";
}

// -- following the page ---------------------------------------------------------------------
app.addEventListener("gf-model", () => load($("model").value)); // a model was chosen
app.addEventListener("gf-run", () => {
  // a run was shown: new tokens
  if ($("model").value !== state.model) load($("model").value);
  else {
    lane();
    mark();
  }
});
app.addEventListener("gf-map", mark);
app.addEventListener("gf-tab", mark);
