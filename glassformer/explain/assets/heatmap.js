// The matrix code shared by the static report (bundled into it with report.js: explain/bundle.py)
// and the live explorer: heatmap data decoding, the colour scale, labelled heatmaps drawn on a
// canvas (whole, or a virtual window fetched tile by tile), and export of a matrix as PNG or SVG.
import { svgNS, download, esc } from "./dom.js";
import { fmt } from "./numbers.js";

export function half(h) {
  // IEEE float16 -> number
  const s = h & 0x8000 ? -1 : 1,
    e = (h >> 10) & 31,
    f = h & 1023;
  if (e === 0) return s * f * Math.pow(2, -24);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * Math.pow(2, e - 15);
}
function bytes(b64) {
  const bin = atob(b64),
    out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
// A map's values: "f16" holds value / scale as float16 (the report), "f32" the values
// themselves as float32 (the explorer, for exact hover values).
export function values(m) {
  if (!m.v) {
    if (m.f32) {
      m.v = Float64Array.from(new Float32Array(bytes(m.f32).buffer));
    } else {
      const bin = atob(m.f16),
        v = new Float64Array(bin.length / 2);
      for (let i = 0; i < v.length; i++)
        v[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) * m.scale;
      m.v = v;
    }
  }
  return m.v;
}
export function rgb(t, seq) {
  // as rgb in html_pieces.py
  if (Number.isNaN(t)) return [190, 190, 190];
  t = Math.max(-1, Math.min(1, t));
  const end = seq || t > 0 ? [33, 102, 172] : [178, 24, 43],
    a = Math.abs(t);
  return end.map((c) => Math.round(255 + (c - 255) * a));
}
// Cells are at least MIN_CELL px, LABELLED px along an axis with token labels, so that any
// matrix is readable (a 9 x 384 input, a 128 x 1536 FFN); the box scrolls, labels stay put.
export const MIN_CELL = 8;
const LABELLED = 14,
  MAX_CELL = 32,
  FIT_HEIGHT = 560;
function strip(cls, labels, size, font) {
  const el = document.createElement("div");
  el.className = cls;
  el.style[cls === "hm-rows" ? "gridTemplateRows" : "gridTemplateColumns"] =
    "repeat(" + labels.length + ", " + size + "px)";
  el.style.fontSize = font + "px";
  el.style.lineHeight = size + "px"; // centred in its cell
  for (const text of labels) {
    const s = document.createElement("span");
    s.textContent = text;
    s.title = text;
    el.append(s);
  }
  return el;
}
export function cells(m, el, opts) {
  // a cell's width and height in px
  const [R, C] = m.shape;
  if (opts && opts.fit) {
    // a thumbnail: the whole map in a fit x fit box, no labels
    const s = Math.max(1, Math.floor(opts.fit / Math.max(R, C)));
    return [s, s];
  }
  const side = el.closest("figure") ? 800 : 640; // attention maps: room for token labels
  const fit = Math.min(MAX_CELL, Math.floor(side / C), Math.floor(FIT_HEIGHT / R));
  return [
    Math.max(fit, m.cols ? LABELLED : MIN_CELL),
    Math.max(fit, m.rows ? LABELLED : MIN_CELL, R === 1 ? 2 * MIN_CELL : 0),
  ];
}
export function reserve(el, m) {
  // the height a map will take, so that drawing it moves nothing
  const ch = cells(m, el)[1],
    box = Math.min(0.8 * window.innerHeight, 720);
  el.style.minHeight = Math.min(box, m.shape[0] * ch + (m.cols ? 90 : 2)) + 22 + "px";
}
function paint(canvas, v, R, C, m) {
  // v: R x C values, row-major; returns masked count
  canvas.width = C;
  canvas.height = R;
  const ctx = canvas.getContext("2d"),
    img = ctx.createImageData(C, R);
  let masked = 0;
  for (let i = 0; i < R * C; i++) {
    if (m.masked && v[i] === -Infinity) {
      masked++;
      continue;
    } // transparent: hatched below
    const [r, g, b] = rgb(v[i] / m.scale, m.seq);
    img.data[4 * i] = r;
    img.data[4 * i + 1] = g;
    img.data[4 * i + 2] = b;
    img.data[4 * i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return masked;
}
function tipText(m, i, j, x) {
  const row = m.rows ? m.rows[i] : "row " + i,
    col = m.cols ? m.cols[j] : "col " + j;
  return (
    row +
    " × " +
    col +
    ": " +
    (m.masked && x === -Infinity ? "masked (−∞ before the softmax)" : fmt(x, m.f32 ? 7 : 4))
  );
}
function showTip(tip, e, text) {
  if (!tip) return;
  tip.textContent = text;
  tip.style.left = e.clientX + 14 + "px";
  tip.style.top = e.clientY + 14 + "px";
  tip.hidden = false;
}
function frame(el, m, cw, ch, body, opts) {
  // the scroll box: labels on two sticky sides
  const box = document.createElement("div"),
    grid = document.createElement("div");
  box.className = "hm-box";
  grid.className = "hm-grid";
  const corner = document.createElement("div");
  corner.className = "hm-corner";
  const labelled = !(opts && opts.fit);
  const cols =
    m.cols && labelled && !opts.tiled
      ? strip("hm-cols", m.cols, cw, Math.min(12, cw - 2))
      : document.createElement("div");
  const rows =
    m.rows && labelled && !opts.tiled
      ? strip("hm-rows", m.rows, ch, Math.min(12, ch - 2))
      : document.createElement("div");
  if (!cols.className) cols.className = "hm-cols" + (m.cols && labelled ? "" : " hm-none");
  if (!rows.className) rows.className = "hm-rows" + (m.rows && labelled ? "" : " hm-none");
  grid.append(corner, cols, rows, body);
  box.append(grid);
  const legend = document.createElement("div");
  legend.className = "legend";
  el.append(box, legend);
  return { box, legend, cols, rows };
}
function legendText(m, masked, more) {
  const [R, C] = m.shape;
  return (
    R +
    " × " +
    C +
    " · colour scale " +
    (m.seq ? "0" : fmt(-m.scale)) +
    " … " +
    fmt(m.scale) +
    (masked ? " · hatched: masked (−∞)" : "") +
    " · hover for values" +
    (more ? " · scroll for the rest (labels stay in view)" : "")
  );
}

// draw(el, m, tip, opts): the whole map on one canvas. opts.fit: a thumbnail of that many px;
// opts.onCell(i, j): called on a click on cell (i, j).
export function draw(el, m, tip, opts) {
  opts = opts || {};
  if (el.dataset.drawn) return null;
  el.dataset.drawn = "1";
  el.style.minHeight = "";
  const [R, C] = m.shape,
    v = values(m),
    [cw, ch] = cells(m, el, opts);
  const canvas = document.createElement("canvas");
  canvas.style.width = C * cw + "px";
  canvas.style.height = R * ch + "px";
  const masked = paint(canvas, v, R, C, m);
  if (masked) canvas.className = "masked";
  const cell = (e) => [
    Math.max(0, Math.min(R - 1, Math.floor(e.offsetY / ch))),
    Math.max(0, Math.min(C - 1, Math.floor(e.offsetX / cw))),
  ];
  canvas.addEventListener("mousemove", (e) => {
    const [i, j] = cell(e);
    showTip(tip, e, tipText(m, i, j, v[i * C + j]));
  });
  canvas.addEventListener("mouseleave", () => {
    if (tip) tip.hidden = true;
  });
  if (opts.onCell) {
    canvas.style.cursor = "pointer";
    canvas.addEventListener("click", (e) => {
      const [i, j] = cell(e);
      opts.onCell(i, j);
    });
  }
  const f = frame(el, m, cw, ch, canvas, opts);
  if (opts.fit) {
    f.legend.remove();
    return canvas;
  }
  const more = f.box.scrollWidth > f.box.clientWidth || f.box.scrollHeight > f.box.clientHeight;
  f.legend.textContent = legendText(m, masked, more);
  return canvas;
}

// drawTiled(el, m, fetchTile, tip): a map too large to send whole (m has shape, scale, seq,
// rows, cols but no values). Only the window in view is drawn: fetchTile(r0, r1, c0, c1)
// resolves to its values (a row-major Float64Array), fetched again as the box scrolls.
export function drawTiled(el, m, fetchTile, tip, opts) {
  opts = Object.assign({}, opts || {}, { tiled: true });
  if (el.dataset.drawn) return null;
  el.dataset.drawn = "1";
  el.style.minHeight = "";
  const [R, C] = m.shape,
    [cw, ch] = cells(m, el, {});
  const sizer = document.createElement("div");
  sizer.className = "hm-sizer";
  sizer.style.width = C * cw + "px";
  sizer.style.height = R * ch + "px";
  const canvas = document.createElement("canvas");
  if (m.masked) canvas.className = "masked";
  sizer.append(canvas);
  const f = frame(el, m, cw, ch, sizer, opts);
  if (m.cols) {
    f.cols.classList.add("hm-virtual");
    f.cols.style.width = C * cw + "px";
  }
  if (m.rows) {
    f.rows.classList.add("hm-virtual");
    f.rows.style.height = R * ch + "px";
    const longest = m.rows.reduce((n, r) => Math.max(n, String(r).length), 1);
    f.rows.style.width = Math.min(10, 0.7 * longest + 0.6) + "em"; // as wide as the labels
  }
  f.legend.textContent = legendText(m, m.masked, true) + " · drawn as you scroll";
  let tile = null,
    pending = 0,
    wanted = "";
  function labels(strip, list, a, b, size, vertical) {
    strip.replaceChildren();
    for (let k = a; k < b; k++) {
      const s = document.createElement("span");
      s.textContent = list[k];
      s.title = list[k];
      s.style[vertical ? "top" : "left"] = k * size + "px";
      s.style[vertical ? "height" : "width"] = size + "px";
      s.style.lineHeight = size + "px";
      s.style.fontSize = Math.min(12, size - 2) + "px";
      strip.append(s);
    }
  }
  function update() {
    pending = 0;
    const box = f.box,
      left = Math.max(0, box.scrollLeft - (m.rows ? f.rows.offsetWidth : 0));
    const top = Math.max(0, box.scrollTop - (m.cols ? f.cols.offsetHeight : 0));
    const r0 = Math.max(0, Math.floor(top / ch) - 4);
    const r1 = Math.min(R, Math.ceil((top + box.clientHeight) / ch) + 4);
    const c0 = Math.max(0, Math.floor(left / cw) - 4);
    const c1 = Math.min(C, Math.ceil((left + box.clientWidth) / cw) + 4);
    const key = [r0, r1, c0, c1].join(",");
    if (key === wanted) return;
    wanted = key;
    Promise.resolve(fetchTile(r0, r1, c0, c1))
      .then((v) => {
        if (wanted !== key) return; // scrolled on meanwhile
        tile = { r0, r1, c0, c1, v };
        paint(canvas, v, r1 - r0, c1 - c0, m);
        canvas.style.left = c0 * cw + "px";
        canvas.style.top = r0 * ch + "px";
        canvas.style.width = (c1 - c0) * cw + "px";
        canvas.style.height = (r1 - r0) * ch + "px";
        if (m.rows) labels(f.rows, m.rows, r0, r1, ch, true);
        if (m.cols) labels(f.cols, m.cols, c0, c1, cw, false);
        el.dataset.tile = key;
      })
      .catch(() => {
        wanted = "";
      });
  }
  f.box.addEventListener("scroll", () => {
    if (!pending) pending = requestAnimationFrame(update);
  });
  sizer.addEventListener("mousemove", (e) => {
    const b = sizer.getBoundingClientRect();
    const i = Math.min(R - 1, Math.floor((e.clientY - b.top) / ch));
    const j = Math.min(C - 1, Math.floor((e.clientX - b.left) / cw));
    if (!tile || i < tile.r0 || i >= tile.r1 || j < tile.c0 || j >= tile.c1) return;
    const x = tile.v[(i - tile.r0) * (tile.c1 - tile.c0) + (j - tile.c0)];
    showTip(tip, e, tipText(Object.assign({ f32: true }, m), i, j, x));
  });
  sizer.addEventListener("mouseleave", () => {
    if (tip) tip.hidden = true;
  });
  update();
  return canvas;
}

// -- export: a matrix with its labels as PNG or SVG ---------------------------------------

// The SVG of a matrix (m with values): one rect per cell, token labels, a title.
export function svg(m, title) {
  const [R, C] = m.shape,
    v = values(m);
  const cell = Math.max(4, Math.min(24, Math.floor(900 / Math.max(R, C))));
  const left = m.rows ? 110 : 10,
    top = (m.cols ? 110 : 10) + 24;
  const W = left + C * cell + 10,
    H = top + R * cell + 10,
    out = [];
  out.push(
    '<svg xmlns="' +
      svgNS() +
      '" width="' +
      W +
      '" height="' +
      H +
      '" viewBox="0 0 ' +
      W +
      " " +
      H +
      '" font-family="sans-serif" font-size="11">',
  );
  out.push('<rect width="100%" height="100%" fill="#fff"/>');
  out.push('<text x="10" y="16" font-size="13">' + esc(title || "") + "</text>");
  for (let i = 0; i < R; i++) {
    for (let j = 0; j < C; j++) {
      const x = v[i * C + j];
      const [r, g, b] = m.masked && x === -Infinity ? [220, 224, 228] : rgb(x / m.scale, m.seq);
      out.push(
        '<rect x="' +
          (left + j * cell) +
          '" y="' +
          (top + i * cell) +
          '" width="' +
          cell +
          '" height="' +
          cell +
          '" fill="rgb(' +
          r +
          "," +
          g +
          "," +
          b +
          ')"><title>' +
          esc(fmt(x, 7)) +
          "</title></rect>",
      );
    }
    if (m.rows)
      out.push(
        '<text x="' +
          (left - 4) +
          '" y="' +
          (top + i * cell + cell * 0.75) +
          '" text-anchor="end">' +
          esc(m.rows[i]) +
          "</text>",
      );
  }
  if (m.cols)
    for (let j = 0; j < C; j++) {
      const x = left + j * cell + cell * 0.75,
        y = top - 4;
      out.push(
        '<text transform="translate(' +
          x +
          "," +
          y +
          ') rotate(-90)">' +
          esc(m.cols[j]) +
          "</text>",
      );
    }
  out.push("</svg>");
  return out.join("");
}
export function exportSVG(m, name, title) {
  download(name + ".svg", new Blob([svg(m, title)], { type: "image/svg+xml" }));
}
// PNG: the SVG rasterised (so both files show the same picture).
export function svgToPNG(text, name) {
  const img = new Image();
  img.onload = () => {
    const c = document.createElement("canvas");
    c.width = img.naturalWidth || 800;
    c.height = img.naturalHeight || 600;
    const ctx = c.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, c.width, c.height);
    ctx.drawImage(img, 0, 0);
    c.toBlob((b) => download(name + ".png", b), "image/png");
  };
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
}
export function exportPNG(m, name, title) {
  svgToPNG(svg(m, title), name);
}
