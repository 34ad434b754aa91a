// The static report's page (explain/html.py bundles it with heatmap.js into one inline script,
// ROOT_ID replaced by the report's root): heatmaps drawn as they scroll into view, the attention
// pickers, open/close all, the model picture's boxes going to their step cards.
import { fill, unique } from "./dom.js";
import { draw as drawMap, reserve as reserveMap } from "./heatmap.js";

const root = document.getElementById("ROOT_ID");
const data = JSON.parse(root.querySelector("script.gf-data").textContent);
const tip = root.querySelector(".gf-tip");

function reserve(el) {
  // the height a map will take, so that drawing it moves nothing below
  const m = data.maps[el.dataset.key];
  if (m) reserveMap(el, m);
}
function draw(el) {
  const m = data.maps[el.dataset.key];
  if (m) drawMap(el, m, tip);
}

const maps = root.querySelectorAll(".hm");
maps.forEach(reserve);
if ("IntersectionObserver" in window) {
  const io = new IntersectionObserver(
    (entries) => {
      for (const e of entries)
        if (e.isIntersecting) {
          io.unobserve(e.target);
          draw(e.target);
        }
    },
    { rootMargin: "300px" },
  );
  maps.forEach((el) => io.observe(el));
} else {
  maps.forEach(draw);
}

const figs = Array.from(root.querySelectorAll("figure.att"));
const site = root.querySelector(".pick-site"),
  layer = root.querySelector(".pick-layer");
const head = root.querySelector(".pick-head"),
  shown = root.querySelector(".picker .shown");
function pick() {
  const here = figs.filter((f) => f.dataset.site === site.value);
  fill(layer, unique(here.map((f) => f.dataset.layer)), "layer");
  const inLayer = here.filter((f) => f.dataset.layer === layer.value);
  fill(head, unique(inLayer.map((f) => f.dataset.head)), "head");
  const chosen = inLayer.find((f) => f.dataset.head === head.value) || here[0];
  figs.forEach((f) => {
    f.hidden = f !== chosen;
  });
  chosen.querySelectorAll(".hm").forEach(draw);
  shown.textContent = chosen.dataset.name;
}
if (site && figs.length) {
  [site, layer, head].forEach((s) => s.addEventListener("change", pick));
  pick();
}

root.querySelectorAll(".open-all, .close-all").forEach((b) =>
  b.addEventListener("click", () => {
    root.querySelectorAll("details.group").forEach((d) => {
      d.open = b.className === "open-all";
    });
  }),
);
root.addEventListener("click", (e) => {
  // the model's picture: a box goes to its first step card
  const g = e.target.closest(".gf-ov [data-step]"),
    want = g && !g.dataset.off && "step-" + g.dataset.step;
  const card =
    want &&
    Array.from(root.querySelectorAll("article.step[id^='step-']")).find(
      (a) => a.id === want || a.id.startsWith(want + "."),
    );
  if (!card) return;
  root.querySelectorAll(".gf-ov .cur").forEach((x) => x.classList.remove("cur"));
  g.classList.add("cur");
  for (let d = card.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
  card.scrollIntoView({ block: "start" });
});
root.dataset.ready = "1";
