// numbers.js: how the pages write a number. The oracle is the rule its comments state (3
// significant digits, an exponent only outside [1e-4, 1e6), "nan"/"inf" as Python writes them, a
// typographic minus in text); tests/test_js.py holds fmt and pct to values.py's strings.
import assert from "node:assert/strict";
import { test } from "node:test";

import { fmt, pct, plural, sig } from "../../glassformer/explain/assets/numbers.js";

test("3 significant digits, trailing zeros dropped", () => {
  assert.equal(fmt(3.14159), "3.14");
  assert.equal(fmt(-2.71828), "-2.72");
  assert.equal(fmt(2.5), "2.5");
  assert.equal(fmt(1), "1");
  assert.equal(fmt(0.1 + 0.2), "0.3");
  assert.equal(fmt(0.000123456), "0.000123");
  assert.equal(fmt(123456), "123000");
  assert.equal(fmt(999.5), "1000"); // rounds up into the next decade, still no exponent
});

test("an exponent only outside [1e-4, 1e6), with 3 significant digits", () => {
  assert.equal(fmt(1e-4), "0.0001");
  assert.equal(fmt(9.999e-5), "1.00e-4");
  assert.equal(fmt(-0.0000123456), "-1.23e-5");
  assert.equal(fmt(999999), "1000000"); // below 1e6 before rounding: written out
  assert.equal(fmt(1e6), "1.00e+6");
  assert.equal(fmt(-1234567), "-1.23e+6");
  assert.equal(fmt(1e21), "1.00e+21");
  assert.equal(fmt(5e-324), "4.94e-324");
  assert.equal(fmt(Number.MAX_VALUE), "1.80e+308");
});

test("other precisions when asked", () => {
  assert.equal(fmt(Math.PI, 6), "3.14159");
  assert.equal(fmt(1234567, 5), "1.2346e+6");
  assert.equal(fmt(2 / 3, 1), "0.7");
});

test("zero, negative zero and the non-finite values as Python writes them", () => {
  assert.equal(fmt(0), "0");
  assert.equal(fmt(-0), "0");
  assert.equal(fmt(NaN), "nan");
  assert.equal(fmt(Infinity), "inf");
  assert.equal(fmt(-Infinity), "-inf");
});

test("sig: a typographic minus in front, the exponent's sign left alone", () => {
  assert.equal(sig(-1.5), "\u22121.5");
  assert.equal(sig(1.5), "1.5");
  assert.equal(sig(-0.0000001), "\u22121.00e-7");
  assert.equal(sig(0.0000001), "1.00e-7");
  assert.equal(sig(-0), "0");
  assert.equal(sig(-Infinity), "\u2212inf");
  assert.equal(sig(1234.5678), "1230");
  assert.equal(sig("n/a"), "n/a");
});

test("pct: a probability as a percentage of 3 significant digits", () => {
  assert.equal(pct(0.935), "93.5%");
  assert.equal(pct(0), "0%");
  assert.equal(pct(1), "100%");
  assert.equal(pct(0.5), "50%");
  assert.equal(pct(0.123456), "12.3%");
  assert.equal(pct(0.0000001), "1.00e-5%");
  assert.equal(pct(-0.25), "\u221225%");
  assert.equal(pct("\u2014"), "\u2014");
});

test("plural: one, many, and an irregular plural", () => {
  assert.equal(plural(1, "token"), "1 token");
  assert.equal(plural(2, "token"), "2 tokens");
  assert.equal(plural(0, "token"), "0 tokens");
  assert.equal(plural(1, "query", "queries"), "1 query");
  assert.equal(plural(3, "query", "queries"), "3 queries");
});
