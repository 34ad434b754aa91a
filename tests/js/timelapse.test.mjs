// The time-lapse's pure helpers: the recorded maps decoded from float16 (the oracle: numbers
// written as IEEE half floats here, read back), a head's map cut from a frame, the head that
// matches prefixes best, and the ticks of a chart's axis.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ticks } from "../../glassformer/explain/assets/timelapse-chart.js";
import { bestAt, headMap } from "../../glassformer/explain/assets/timelapse-data.js";

// IEEE float16 bits of numbers that float16 holds exactly: 0, 0.25, 0.5, 1.
const HALF = { 0: 0x0000, 0.25: 0x3400, 0.5: 0x3800, 1: 0x3c00 };
const f16 = (values) => {
  const bytes = new Uint8Array(values.length * 2);
  values.forEach((v, i) => {
    bytes[2 * i] = HALF[v] & 0xff;
    bytes[2 * i + 1] = HALF[v] >> 8;
  });
  return Buffer.from(bytes).toString("base64");
};

test("a head's map is its slice of the frame's (H, Tq, Tk) block, labelled by the stack's tokens", () => {
  const A = [1, 0, 0.5, 0.5, /* head 1 */ 0.25, 0.25, 0, 1];
  const frame = {
    maps: { "decoder.0.self_attn": { shape: [2, 2, 2], f16: f16(A) } },
    tokens: { decoder: ["a", "b"] },
  };
  const m = headMap(frame, "decoder.0.self_attn", 1);
  assert.deepEqual(Array.from(m.v), [0.25, 0.25, 0, 1]);
  assert.deepEqual(m.shape, [2, 2]);
  assert.deepEqual(m.rows, ["a", "b"]);
  assert.equal(m.scale, 1); // the weights' fixed 0..1
  assert.equal(headMap(frame, "decoder.1.self_attn", 0), null);
});

test("the best prefix-matching head of a frame, not-a-number scores left out", () => {
  const frame = {
    metrics: { prefix: { "decoder.0.self_attn": [0.1, "nan"], "decoder.1.self_attn": [0.2, 0.9] } },
  };
  assert.deepEqual(bestAt(frame), { site: "decoder.1.self_attn", head: 1, score: 0.9 });
  assert.equal(bestAt({}), null);
});

test("an axis's ticks are round numbers covering the range", () => {
  assert.deepEqual(ticks(0, 1, 5), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(ticks(0, 1000, 4), [0, 500, 1000]);
  const t = ticks(3, 47, 5);
  assert.ok(t[0] >= 3 && t.at(-1) <= 47 && t.length >= 3, String(t));
});
