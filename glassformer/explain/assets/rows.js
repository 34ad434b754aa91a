// How a map's rows and columns read (pure: no page, tested under node): a decoder row reads a
// token and predicts the next, a translation's row after its end token is unused; the words of a
// cell's tooltip and of a map's axes.
import { sig } from "./numbers.js";

// Decoder positions: the token each reads, and the one it predicts (the next; at the end of
// a typed text the model's top guess, "?" where the page does not know it). A translation
// that ended with the end token never used the prediction of the position reading it: unused.
export function predictions(run) {
  const toks = run && run.tokens && run.tokens.decoder;
  if (!toks || run.arch === "walkthrough") return null;
  const o = run.output,
    guess = o.kind === "next" && o.top && o.top.length ? o.top[0] : null;
  const ended = o.kind === "translation" && o.stopped_at_eos;
  return toks.map((t, i) =>
    ended && i === toks.length - 1
      ? { reads: t.shown, unused: true }
      : {
          reads: t.shown,
          predicts: i + 1 < toks.length ? toks[i + 1].shown : guess ? guess.token : "?",
          guess: i + 1 >= toks.length && !!guess,
        },
  );
}
export const rowLabel = (r) =>
  r.unused
    ? "reads " + r.reads + " (unused: the translation ended)"
    : r.predicts === undefined
      ? r.reads
      : "reads " + r.reads + " → predicts " + r.predicts + (r.guess ? " (guess)" : "");
// The axes of one attention map: rows (queries) and columns (keys), or null (a walkthrough).
export function axesOf(run, entry) {
  if (!entry || !run || run.arch === "walkthrough" || entry.shape.length !== 2) return null;
  const dec = entry.site.startsWith("decoder."),
    cross = entry.site === "decoder.cross_attn";
  const enc = (run.tokens.encoder || []).map((t) => ({ reads: t.shown }));
  const rows = dec ? predictions(run) : enc;
  const cols = (dec && !cross ? run.tokens.decoder : run.tokens.encoder) || [];
  if (!rows || rows.length !== entry.shape[0] || cols.length !== entry.shape[1]) return null;
  return {
    rows,
    cols: cols.map((t) => t.shown),
    cross,
    causal: dec && !cross,
    what: entry.name.split(".").pop(),
  };
}
export function cellTip(ax, i, j, value, full) {
  const r = ax.rows[i];
  const q =
    "query (row) " +
    i +
    ": " +
    (r.unused
      ? rowLabel(r)
      : r.predicts === undefined
        ? "“" + r.reads + "”"
        : "reads “" +
          r.reads +
          "” → predicts “" +
          r.predicts +
          "”" +
          (r.guess ? " (the model's top guess)" : ""));
  const k =
    "key (column) " +
    j +
    ": “" +
    ax.cols[j] +
    "”" +
    (ax.cross ? " (source token)" : "") +
    (ax.causal && j > i ? " · later than the query: hidden by the causal mask" : "");
  const v =
    value === -Infinity
      ? ax.what + "[" + i + ", " + j + "]: masked (−∞ before the softmax)"
      : ax.what + "[" + i + ", " + j + "] ≈ " + sig(value) + " · exact: " + full;
  return q + "\n" + k + "\n" + v;
}
export function axesCaption(ax) {
  if (ax.cross)
    return "Row i, the query: decoder position i, which reads its token and predicts the next. Column j, the key: source token j. The source tokens below show the weights of the row under the mouse (or the row last clicked).";
  if (ax.causal)
    return "Row i, the query: position i, which reads its token and predicts the next. Column j, the key: the token at position j; only j ≤ i (the causal mask hides later tokens).";
  return "Row i, the query: token i. Column j, the key: token j. In an encoder every token sees every other.";
}
