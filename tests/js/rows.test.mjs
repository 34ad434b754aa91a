// rows.js: how a map's rows and columns read. The oracle is the page's own convention (a decoder's
// row i reads token i and predicts token i + 1; a translation's row reading its end token is
// unused; the last row of a typed text predicts the model's top guess).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  axesCaption,
  axesOf,
  cellTip,
  predictions,
  rowLabel,
} from "../../glassformer/explain/assets/rows.js";

const toks = (...words) => words.map((w, i) => ({ id: i, shown: w }));

test("a decoder row reads its token and predicts the next; the last one the top guess", () => {
  const run = {
    arch: "decoder",
    tokens: { decoder: toks("R", "O", "M") },
    output: { kind: "next", top: [{ token: "E" }] },
  };
  assert.deepEqual(predictions(run), [
    { reads: "R", predicts: "O", guess: false },
    { reads: "O", predicts: "M", guess: false },
    { reads: "M", predicts: "E", guess: true },
  ]);
  assert.equal(rowLabel(predictions(run)[2]), "reads M → predicts E (guess)");
});

test("a translation that ended with its end token leaves the row reading it unused", () => {
  const output = { kind: "translation", stopped_at_eos: true };
  const run = { arch: "encoder-decoder", tokens: { decoder: toks("<s>", "Hola", "</s>") }, output };
  const rows = predictions(run);
  assert.deepEqual(rows[2], { reads: "</s>", unused: true });
  assert.equal(rows[1].predicts, "</s>");
  assert.equal(rowLabel(rows[2]), "reads </s> (unused: the translation ended)");
  const open = predictions({ ...run, output: { kind: "translation", stopped_at_eos: false } });
  assert.equal(open[2].predicts, "?"); // cut by the budget: the row is used, its next unknown
});

test("a walkthrough or an encoder-only run has no decoder rows", () => {
  assert.equal(
    predictions({ arch: "walkthrough", tokens: { decoder: toks("a") }, output: {} }),
    null,
  );
  assert.equal(predictions({ arch: "encoder", tokens: { encoder: toks("a") }, output: {} }), null);
});

test("the axes of a cross-attention map: decoder rows, source columns", () => {
  const run = {
    arch: "encoder-decoder",
    tokens: { encoder: toks("Hello", "world"), decoder: toks("<s>", "Hola") },
    output: { kind: "translation", stopped_at_eos: false },
  };
  const entry = { name: "decoder.0.cross_attn.head0.A", site: "decoder.cross_attn", shape: [2, 2] };
  const ax = axesOf(run, entry);
  assert.deepEqual(ax.cols, ["Hello", "world"]);
  assert.equal(ax.cross, true);
  assert.equal(ax.causal, false);
  assert.equal(ax.what, "A");
  assert.match(axesCaption(ax), /source token j/);
  assert.equal(axesOf(run, { ...entry, shape: [3, 2] }), null); // a map of another run's size
  const self = axesOf(run, {
    ...entry,
    site: "decoder.self_attn",
    name: "decoder.0.self_attn.head0.A",
  });
  assert.equal(self.causal, true);
  assert.deepEqual(self.cols, ["<s>", "Hola"]);
});

test("a cell's tooltip names the query, the key and the value, or the mask", () => {
  const ax = {
    rows: [
      { reads: "a", predicts: "b", guess: false },
      { reads: "b", predicts: "c", guess: false },
    ],
    cols: ["a", "b"],
    cross: false,
    causal: true,
    what: "A",
  };
  const tip = cellTip(ax, 0, 1, -Infinity, "-inf");
  assert.match(tip, /^query \(row\) 0: reads “a” → predicts “b”/);
  assert.match(tip, /later than the query: hidden by the causal mask/);
  assert.match(tip, /A\[0, 1\]: masked/);
  assert.match(cellTip(ax, 1, 0, 0.123456, "0.123456"), /A\[1, 0\] ≈ 0\.123 · exact: 0\.123456$/);
});
