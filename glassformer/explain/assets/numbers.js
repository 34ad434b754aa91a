// Numbers as the pages write them, once for every script (the Python side is
// explain/values.py's `rounded` and `percent`; tests/js/numbers.test.mjs and
// tests/test_js.py hold the two to the same strings on the same values).

// A number for reading: 3 significant digits unless `digits` says otherwise, an exponent only
// outside [1e-4, 1e6), as values.rounded writes it (hover values and exports ask for more).
export function fmt(v, digits) {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  const a = Math.abs(v);
  const p = digits || 3;
  if (a !== 0 && (a >= 1e6 || a < 1e-4)) return v.toExponential(p - 1);
  return String(Number(v.toPrecision(p)));
}

// 3 significant digits with a typographic minus, as text reads it; a string is shown as it is.
export function sig(v) {
  return typeof v === "string" ? v : fmt(v, 3).replace(/^-/, "−");
}

// A probability as a percentage: 0.935 -> "93.5%".
export function pct(p) {
  return typeof p === "string" ? p : sig(100 * p) + "%";
}

// "1 token", "2 tokens"; `many` for an irregular plural.
export function plural(n, one, many) {
  return n + " " + (n === 1 ? one : many || one + "s");
}
