// The reading labels on a drawn attention map (rows.js's words): row labels, cell tooltips,
// the axes' caption, and a cross-attention row's weights on the source chips.
import { el } from "./dom.js";
import { values } from "./heatmap.js";
import { fmt, pct } from "./numbers.js";
import { $, exact, state, tip } from "./page.js";
import { axesCaption, cellTip, rowLabel } from "./rows.js";

// Labels, tooltips and source weights on a drawn map (a canvas heatmap or a table).
export function readable(box, ax) {
  const canvas = box.querySelector(".hm canvas"),
    table = box.querySelector("table.mat");
  const fig = box.querySelector("figure");
  if (fig)
    fig.insertBefore(
      el("p", { class: "axes sub", text: axesCaption(ax) }),
      fig.firstChild.nextSibling,
    );
  const R = ax.rows.length,
    C = ax.cols.length,
    v = values(state.mapData);
  const hoverRow = (i) => {
    if (ax.cross) sourceWeights(ax, i);
  };
  const leave = () => {
    if (ax.cross) sourceWeights(ax, null);
  };
  if (canvas) {
    const corner = box.querySelector(".hm-corner");
    if (corner) corner.append(el("span", { class: "corner", text: "query ↓ · key →" }));
    const cell = (e) => [
      Math.max(0, Math.min(R - 1, Math.floor((e.offsetY * R) / canvas.clientHeight))),
      Math.max(0, Math.min(C - 1, Math.floor((e.offsetX * C) / canvas.clientWidth))),
    ];
    canvas.addEventListener("mousemove", (e) => {
      // after heatmap.js's own: its words replaced
      const [i, j] = cell(e),
        x = v[i * C + j];
      tip.textContent = cellTip(ax, i, j, x, fmt(x, 7));
      hoverRow(i);
    });
    canvas.addEventListener("mouseleave", leave);
  }
  if (table) {
    const trs = Array.from(table.querySelectorAll("tr"));
    const corner = trs[0] && trs[0].querySelector("th");
    if (corner && !trs[0].querySelector("td")) {
      corner.textContent = "query ↓ · key →";
      corner.className = "corner";
    }
    trs
      .filter((tr) => tr.querySelector("td"))
      .forEach((tr, i) => {
        const th = tr.querySelector("th");
        if (th && i < R) {
          th.textContent = rowLabel(ax.rows[i]);
          th.title = "row " + i + ", the query";
        }
        Array.from(tr.querySelectorAll("td")).forEach((td, j) => {
          if (i < R && j < C)
            td.title = cellTip(
              ax,
              i,
              j,
              td.classList.contains("masked") ? -Infinity : v[i * C + j],
              td.title,
            );
        });
        tr.addEventListener("mouseenter", () => hoverRow(i));
      });
    table.addEventListener("mouseleave", leave);
  }
  if (ax.cross) sourceWeights(ax, null);
}
export function weightChip(t, w, shade) {
  const c = el(
    "span",
    {
      class: "tok weighted",
      "data-w": String(w),
      title:
        "cross-attention weight " +
        exact(w) +
        (t.id !== null && t.id !== undefined ? " · token id " + t.id : ""),
    },
    el(
      "span",
      { class: "t" },
      t.shown,
      t.id !== null && t.id !== undefined ? el("small", { class: "id", text: t.id }) : null,
    ),
    el(
      "span",
      { class: "bar" },
      el("i", { style: "width:" + Math.max(0, Math.min(100, 100 * w)).toFixed(1) + "%" }),
    ),
    el("span", { class: "wp", text: pct(w) }),
  );
  if (shade !== undefined) {
    c.style.background = "rgba(46, 111, 176, " + shade.toFixed(3) + ")";
    if (shade > 0.5) c.classList.add("dark");
  }
  return c;
}
// The cross-attention of one decoder row on the source chips (hovered: that row; else the
// row last clicked; else the last row that predicts a known token).
export function sourceWeights(ax, hovered) {
  const box = $("map"),
    R = ax.rows.length,
    C = ax.cols.length;
  if (!state.mapData || !state.run) return;
  let i = hovered !== null ? hovered : state.crossRow;
  if (i === null || i === undefined) {
    i = R - 1;
    while (i > 0 && (ax.rows[i].predicts === "?" || ax.rows[i].unused)) i--;
  }
  const v = values(state.mapData),
    src = state.run.tokens.encoder;
  let p = box.querySelector(".src-weights");
  if (!p) {
    p = el("div", { class: "src-weights" });
    box.append(p);
  }
  p.dataset.row = String(i);
  p.replaceChildren(
    el(
      "p",
      {},
      el("b", {
        text: "Source tokens, by the weight of row " + i + " (" + rowLabel(ax.rows[i]) + "):",
      }),
    ),
    el("p", { class: "chips" }, ...src.map((t, j) => weightChip(t, v[i * C + j]))),
  );
}
