// The Every head tab (bertviz's model view): every attention map of the run at once, a thumbnail
// per head, by site (encoder self-, decoder masked self-, cross-attention), layer (rows) and head
// (columns), all on the weights' fixed 0..1 so that heads compare by colour; the head the
// Attention tab shows is outlined, and a click opens a head there. Drawn when the tab is shown.
import { openHead } from "./attention.js";
import { el } from "./dom.js";
import { draw } from "./heatmap.js";
import { $, app, input, post, problem, state, tip } from "./page.js";
import { showTab } from "./steps.js";

const THUMB = 72; // px a side at most

export async function renderModelView() {
  const box = $("model-view");
  const seq = state.seq;
  if (!state.run) {
    box.replaceChildren();
    return;
  }
  if (box.dataset.seq === String(seq)) return mark(); // this run's, drawn already
  box.replaceChildren(el("p", { class: "sub", text: "drawing every head…" }));
  let r;
  try {
    r = await post("model_view", input());
  } catch (e) {
    if (seq === state.seq) {
      box.replaceChildren();
      problem(e.message);
    }
    return;
  }
  if (seq !== state.seq) return;
  const none =
    "This run has no layers and heads to lay out: a walkthrough's heads are on the Attention tab.";
  box.replaceChildren(
    ...(r.sites.length ? r.sites.map(siteGrid) : [el("p", { class: "sub", text: none })]),
  );
  box.dataset.seq = String(seq);
  mark();
}

function siteGrid(site) {
  const heads = Math.max(...site.layers.map((l) => l.heads.length));
  const grid = el("div", { class: "mv-grid" });
  grid.style.gridTemplateColumns = "auto repeat(" + heads + ", " + (THUMB + 8) + "px)";
  grid.append(
    el("span"),
    ...Array.from({ length: heads }, (_, h) => el("span", { class: "mv-col", text: "head " + h })),
  );
  for (const l of site.layers) {
    grid.append(el("span", { class: "mv-row", text: "layer " + l.layer }));
    for (const h of l.heads) {
      const hm = el("div", { class: "hm" });
      const thumb = el(
        "button",
        {
          type: "button",
          class: "mv-thumb",
          "data-site": site.site,
          "data-layer": String(l.layer),
          "data-head": String(h.head),
          title: site.site + " · layer " + l.layer + " · head " + h.head + ": click to open it",
        },
        hm,
      );
      thumb.addEventListener("click", () => {
        showTab("attention");
        openHead({ site: site.site, layer: l.layer, head: h.head });
      });
      grid.append(thumb);
      requestAnimationFrame(() => draw(hm, h.map, tip, { fit: THUMB }));
    }
  }
  const title =
    site.site + " · " + site.kind + " · " + site.layers.length + " layers × " + heads + " heads";
  return el("section", { class: "mv-site" }, el("h3", { text: title }), grid);
}

// The head the Attention tab shows, outlined.
function mark() {
  $("model-view")
    .querySelectorAll(".mv-thumb")
    .forEach((t) => {
      const on =
        t.dataset.site === state.site &&
        t.dataset.layer === String(state.layer) &&
        t.dataset.head === String(state.head);
      t.classList.toggle("on", on);
    });
}
app.addEventListener("gf-map", mark);
