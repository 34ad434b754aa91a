// The time-lapse's recorded data (pure: no page, tested under node): a frame's maps decoded
// from float16, one head's map as heatmap.js draws it, a head's score, and the head that
// matches prefixes best at a frame.
import { half } from "./heatmap.js";
import { num } from "./timelapse-chart.js";

// A map's recorded values: base64 of float16, little-endian, shape (H, Tq, Tk) -> Float64Array.
export function decode(m) {
  if (!m.v) {
    const bin = atob(m.f16),
      v = new Float64Array(bin.length / 2);
    for (let i = 0; i < v.length; i++)
      v[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8));
    m.v = v;
  }
  return m.v;
}
// One head's map as heatmap.js draws it (its values already decoded: m.v).
export function headMap(frame, site, head) {
  const m = frame.maps[site];
  if (!m) return null;
  const [, Tq, Tk] = m.shape,
    n = Tq * Tk,
    stack = site.split(".")[0];
  const cross = site.endsWith(".cross_attn"),
    toks = frame.tokens;
  const rows = toks[stack] || null,
    cols = (cross ? toks.encoder : toks[stack]) || null;
  return {
    shape: [Tq, Tk],
    v: decode(m).subarray(head * n, (head + 1) * n),
    scale: 1,
    seq: true,
    rows: rows && rows.length === Tq ? rows : null,
    cols: cols && cols.length === Tk ? cols : null,
  };
}
export const score = (frame, what, site, head) => {
  const per = ((frame.metrics || {})[what] || {})[site];
  return per ? num(per[head]) : null;
};
export function bestAt(frame) {
  // the highest prefix-matching head: {site, head, score} or null
  let b = null;
  for (const [site, per] of Object.entries((frame.metrics || {}).prefix || {}))
    per.forEach((s, h) => {
      if (num(s) !== null && (!b || s > b.score)) b = { site, head: h, score: s };
    });
  return b;
}
