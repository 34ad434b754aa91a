// The Every step tab (a group's cards are fetched as it opens and scrolls into view) and the
// tabs themselves.
import { compare } from "./compare.js";
import { addTopExamples } from "./corpus.js";
import { el } from "./dom.js";
import { regenerate } from "./generate.js";
import { renderHeadButtons } from "./intervene.js";
import { renderModelView } from "./modelview.js";
import { plural } from "./numbers.js";
import { $, app, drawMaps, exportButtons, input, matrixOf, post, state } from "./page.js";

let io = null;
export function renderSteps() {
  const run = state.run,
    box = $("steps");
  if (!run) return;
  if (io) io.disconnect();
  io = new IntersectionObserver(
    (entries) => {
      for (const e of entries)
        if (e.isIntersecting) {
          io.unobserve(e.target);
          loadCard(e.target);
        }
    },
    { rootMargin: "200px" },
  );
  const small = run.n_steps <= 150;
  function build(items, top) {
    return items.map((x) => {
      if (x.group !== undefined) {
        const d = el(
          "details",
          { class: "group" },
          el(
            "summary",
            {},
            el("b", { class: "group-title", text: x.title || x.group }),
            " ",
            el("code", { text: x.group }),
            el("span", { class: "shape", text: " " + plural(x.count, "step") }),
          ),
          ...build(x.items, false),
        );
        d.open = small || top; // a block's steps load when it opens
        return d;
      }
      const slot = el(
        "article",
        { class: "step pending", "data-name": x.step },
        el(
          "header",
          {},
          el("h3", { class: "step-title", text: x.title || x.step }),
          el("span", { class: "eq", text: x.equation }),
        ),
        el(
          "p",
          { class: "shape" },
          el("code", { class: "name", text: x.step }),
          " · shape " + x.shape.join(" × ") + " · loading…",
        ),
      );
      io.observe(slot);
      return slot;
    });
  }
  box.replaceChildren(...build(run.steps, true));
}
async function loadCard(slot) {
  const seq = state.seq,
    name = slot.dataset.name;
  let r;
  try {
    r = await post("step", input({ name }));
  } catch (e) {
    slot.querySelector(".shape").textContent = e.message;
    return;
  }
  if (seq !== state.seq) return;
  const holder = el("div");
  holder.innerHTML = r.html;
  const card = holder.firstElementChild;
  card.dataset.name = name;
  const data = r.values ? matrixOf(r.values, r.rows, r.cols) : Object.values(r.maps)[0];
  if (data)
    card.querySelector("header").append(
      exportButtons(
        () => data,
        () => name.replace(/[^\w.-]+/g, "_"),
      ),
    );
  slot.replaceWith(card);
  drawMaps(card, r.maps, name, null);
  addTopExamples(card, name);
}
$("open-layers").addEventListener("click", () =>
  $("steps")
    .querySelectorAll("details")
    .forEach((d) => {
      d.open = true;
    }),
);
$("close-layers").addEventListener("click", () =>
  $("steps")
    .querySelectorAll("details")
    .forEach((d) => {
      d.open = false;
    }),
);

// -- tabs ------------------------------------------------------------------------------------
app
  .querySelectorAll(".tabs button")
  .forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
export function showTab(name) {
  state.tab = name;
  app
    .querySelectorAll(".tabs button")
    .forEach((b) => b.classList.toggle("on", b.dataset.tab === name));
  app.querySelectorAll(".tab").forEach((t) => {
    t.hidden = t.id !== "tab-" + name;
  });
  if (name === "steps") renderSteps();
  if (name === "heads") renderModelView();
  if (name === "generate" && !state.gen) regenerate();
  if (name === "compare") compare();
  if (name === "intervene") renderHeadButtons();
  app.dispatchEvent(new CustomEvent("gf-tab", { detail: name })); // overview.js marks its box
}
