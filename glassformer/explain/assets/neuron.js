// The neuron view: one score of an attention map taken apart, q·k dimension by dimension, the
// scale ÷√c and the softmax weight.
import { el } from "./dom.js";
import {
  $,
  exportButtons,
  input,
  matrixOf,
  numEl,
  post,
  problem,
  roundCells,
  state,
} from "./page.js";
import { rowLabel } from "./rows.js";

// Blue = positive, red = negative, white = 0: the maps' convention, on a server table.
function recolour(table) {
  const tds = Array.from(table.querySelectorAll("td[title]")),
    vals = tds.map((td) => Number(td.title));
  const scale = Math.max(0, ...vals.filter(Number.isFinite).map(Math.abs)) || 1;
  tds.forEach((td, k) => {
    if (!Number.isFinite(vals[k])) return;
    const t = Math.max(-1, Math.min(1, vals[k] / scale)),
      end = t < 0 ? [178, 24, 43] : [33, 102, 172];
    td.style.background =
      "rgb(" + end.map((c) => Math.round(255 + (c - 255) * Math.abs(t))).join(",") + ")";
    td.classList.toggle("dark", Math.abs(t) > 0.55);
  });
}
export async function neuron(name, i, j) {
  state.neuronAt = [i, j];
  let n;
  try {
    n = await post("neuron", input({ name, i, j }));
  } catch (e) {
    $("neuron").hidden = true;
    problem(e.message);
    return;
  }
  if (state.neuronAt[0] !== i || state.neuronAt[1] !== j || state.mapName !== name) return;
  const panel = $("neuron"),
    ax = state.axes;
  panel.hidden = false;
  const m = matrixOf(
    [n.q, n.k, n.product],
    ["q", "k", "q×k"],
    n.q.map((_, d) => String(d)),
  );
  const tbl = el("div");
  tbl.innerHTML = n.html;
  tbl.querySelectorAll("table").forEach(recolour);
  roundCells(tbl);
  const query = ax && ax.rows[n.i] ? rowLabel(ax.rows[n.i]) : n.query;
  const lines = [
    el("h3", {
      text:
        "Neuron view: " +
        n.name +
        ", query (row) " +
        n.i +
        " (" +
        query +
        ") · key (column) " +
        n.j +
        " (" +
        n.key +
        ")",
    }),
    el("p", {
      class: "sub",
      text:
        (n.says || "q is row " + n.i + " of Q, k is row " + n.j + " of K") +
        "; their product dimension by dimension, summed, is the score. Colours: blue = positive, red = negative, white = 0 (as in the maps, where blue = high).",
    }),
    n.about ? el("p", { class: "sub about", text: n.about }) : null,
    tbl,
    el(
      "p",
      { class: "sum", "data-sum": String(n.sum) },
      "Ω[" + n.i + "," + n.j + "] = Σ_d q_d·k_d = ",
      numEl(n.sum),
      n.scores !== undefined
        ? el("span", {}, "   (the trace's scores: ", numEl(n.scores), ")")
        : null,
    ),
  ];
  if (n.scaled !== undefined)
    lines.push(el("p", { class: "sum" }, "÷ √c = √" + n.D + " → ", numEl(n.scaled)));
  if (n.A !== undefined)
    lines.push(
      n.masked
        ? el("p", {
            class: "sum",
            "data-a": String(n.A),
            text: "masked: this key is hidden from this query (−∞ before the softmax), A = 0",
          })
        : el(
            "p",
            { class: "sum", "data-a": String(n.A) },
            "A[" + n.i + "," + n.j + "] = softmax of row " + n.i + " at column " + n.j + " = ",
            numEl(n.A),
          ),
    );
  lines.push(
    exportButtons(
      () => m,
      () => "neuron-" + n.name + "-" + n.i + "-" + n.j,
    ),
  );
  if (n.parts) lines.push(...why(n.parts));
  panel.replaceChildren(...lines.filter(Boolean));
}

// Why this score: Ω[i, j] split by what wrote the query's and the key's residual streams
// (inspect/qk.py), its largest entries, and the weight A[i, j] would have without each.
function why(parts) {
  const t = el(
    "table",
    { class: "next qk-parts" },
    el(
      "tr",
      {},
      ...["query part", "key part", "share of Ω", "A without it"].map((x) => el("th", { text: x })),
    ),
  );
  for (const r of parts.top)
    t.append(
      el(
        "tr",
        {},
        el("td", { text: r.query }),
        el("td", { text: r.key }),
        el("td", {}, numEl(r.value)),
        el("td", {}, numEl(r.weight_without)),
      ),
    );
  const said =
    "Ω[" +
    parts.i +
    "," +
    parts.j +
    "] = q·k split by what wrote the query's " +
    "and the key's residual streams (embeddings, earlier heads, FFNs; the norms frozen at this " +
    "run's scale). The " +
    parts.rows.length +
    " × " +
    parts.cols.length +
    " parts add up to ";
  return [
    el("h4", { text: "Why this score" }),
    el(
      "p",
      { class: "sub qk-sum", "data-total": String(parts.total) },
      said,
      numEl(parts.total),
      " (the trace's Ω: ",
      numEl(parts.score),
      "); the largest:",
    ),
    t,
  ];
}
