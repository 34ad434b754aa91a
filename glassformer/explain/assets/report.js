(function () {
  "use strict";
  const root = document.getElementById("ROOT_ID");
  const data = JSON.parse(root.querySelector("script.gf-data").textContent);
  const tip = root.querySelector(".gf-tip");

  function half(h) {  // IEEE float16 -> number
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  function values(m) {
    if (!m.v) {
      const bin = atob(m.f16), v = new Float64Array(bin.length / 2);
      for (let i = 0; i < v.length; i++)
        v[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) * m.scale;
      m.v = v;
    }
    return m.v;
  }
  function rgb(t, seq) {  // as rgb in html_pieces.py
    if (Number.isNaN(t)) return [190, 190, 190];
    t = Math.max(-1, Math.min(1, t));
    const end = seq || t < 0 ? [33, 102, 172] : [178, 24, 43], a = Math.abs(t);
    return end.map(c => Math.round(255 + (c - 255) * a));
  }
  function fmt(v) {
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-4)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }
  // Cells are at least MIN_CELL px, LABELLED px along an axis with token labels, so that any
  // matrix is readable (a 9 x 384 input, a 128 x 1536 FFN); the box scrolls, labels stay put.
  const MIN_CELL = 8, LABELLED = 14, MAX_CELL = 32, FIT_HEIGHT = 560;
  function strip(cls, labels, size, font) {
    const el = document.createElement("div");
    el.className = cls;
    el.style[cls === "hm-rows" ? "gridTemplateRows" : "gridTemplateColumns"] =
      "repeat(" + labels.length + ", " + size + "px)";
    el.style.fontSize = font + "px";
    el.style.lineHeight = size + "px";  // centred in its cell
    for (const text of labels) {
      const s = document.createElement("span");
      s.textContent = text;
      s.title = text;
      el.append(s);
    }
    return el;
  }
  function cells(m, el) {  // a cell's width and height in px
    const [R, C] = m.shape;
    const side = el.closest("figure") ? 800 : 640;  // attention maps: room for token labels
    const fit = Math.min(MAX_CELL, Math.floor(side / C), Math.floor(FIT_HEIGHT / R));
    return [Math.max(fit, m.cols ? LABELLED : MIN_CELL),
      Math.max(fit, m.rows ? LABELLED : MIN_CELL, R === 1 ? 2 * MIN_CELL : 0)];
  }
  function reserve(el) {  // the height a map will take, so that drawing it moves nothing below
    const m = data.maps[el.dataset.key];
    if (!m) return;
    const ch = cells(m, el)[1], box = Math.min(0.8 * window.innerHeight, 720);
    el.style.minHeight = Math.min(box, m.shape[0] * ch + (m.cols ? 90 : 2)) + 22 + "px";
  }
  function draw(el) {
    const m = data.maps[el.dataset.key];
    if (!m || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    el.style.minHeight = "";
    const [R, C] = m.shape, v = values(m), [cw, ch] = cells(m, el);
    const canvas = document.createElement("canvas");
    canvas.width = C;
    canvas.height = R;
    canvas.style.width = C * cw + "px";
    canvas.style.height = R * ch + "px";
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(C, R);
    let masked = 0;
    for (let i = 0; i < R * C; i++) {
      if (m.masked && v[i] === -Infinity) { masked++; continue; }  // transparent: hatched below
      const [r, g, b] = rgb(v[i] / m.scale, m.seq);
      img.data[4 * i] = r; img.data[4 * i + 1] = g; img.data[4 * i + 2] = b;
      img.data[4 * i + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    if (masked) canvas.className = "masked";
    canvas.addEventListener("mousemove", e => {
      const i = Math.min(R - 1, Math.floor(e.offsetY / ch));
      const j = Math.min(C - 1, Math.floor(e.offsetX / cw));
      const row = m.rows ? m.rows[i] : "row " + i, col = m.cols ? m.cols[j] : "col " + j;
      const x = v[i * C + j];
      tip.textContent = row + " × " + col + ": " +
        (m.masked && x === -Infinity ? "masked (−∞ before the softmax)" : fmt(x));
      tip.style.left = e.clientX + 14 + "px";
      tip.style.top = e.clientY + 14 + "px";
      tip.hidden = false;
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    const box = document.createElement("div"), grid = document.createElement("div");
    box.className = "hm-box";
    grid.className = "hm-grid";
    const corner = document.createElement("div");
    corner.className = "hm-corner";
    const cols = m.cols ? strip("hm-cols", m.cols, cw, Math.min(12, cw - 2)) :
      document.createElement("div");
    const rows = m.rows ? strip("hm-rows", m.rows, ch, Math.min(12, ch - 2)) :
      document.createElement("div");
    if (!m.cols) cols.className = "hm-cols hm-none";
    if (!m.rows) rows.className = "hm-rows hm-none";
    grid.append(corner, cols, rows, canvas);
    box.append(grid);
    const legend = document.createElement("div");
    legend.className = "legend";
    el.append(box, legend);
    const more = box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight;
    legend.textContent = R + " × " + C + " · colour scale " + (m.seq ? "0" : fmt(-m.scale)) +
      " … " + fmt(m.scale) + (masked ? " · hatched: masked (−∞)" : "") + " · hover for values" +
      (more ? " · scroll for the rest (labels stay in view)" : "");
  }

  const maps = root.querySelectorAll(".hm");
  maps.forEach(reserve);
  if ("IntersectionObserver" in window) {
    const io = new IntersectionObserver(entries => {
      for (const e of entries) if (e.isIntersecting) { io.unobserve(e.target); draw(e.target); }
    }, { rootMargin: "300px" });
    maps.forEach(el => io.observe(el));
  } else {
    maps.forEach(draw);
  }

  const figs = Array.from(root.querySelectorAll("figure.att"));
  const site = root.querySelector(".pick-site"), layer = root.querySelector(".pick-layer");
  const head = root.querySelector(".pick-head"), shown = root.querySelector(".picker .shown");
  function fill(select, options, label) {
    const keep = select.value;
    select.replaceChildren(...options.map(o => new Option(o === "" ? "—" : label + " " + o, o)));
    select.value = options.includes(keep) ? keep : options[0];
    select.disabled = options.length < 2;
  }
  const unique = xs => Array.from(new Set(xs));
  function pick() {
    const here = figs.filter(f => f.dataset.site === site.value);
    fill(layer, unique(here.map(f => f.dataset.layer)), "layer");
    const inLayer = here.filter(f => f.dataset.layer === layer.value);
    fill(head, unique(inLayer.map(f => f.dataset.head)), "head");
    const chosen = inLayer.find(f => f.dataset.head === head.value) || here[0];
    figs.forEach(f => { f.hidden = f !== chosen; });
    chosen.querySelectorAll(".hm").forEach(draw);
    shown.textContent = chosen.dataset.name;
  }
  if (site && figs.length) {
    [site, layer, head].forEach(s => s.addEventListener("change", pick));
    pick();
  }

  root.querySelectorAll(".open-all, .close-all").forEach(b => b.addEventListener("click", () => {
    root.querySelectorAll("details.group").forEach(d => { d.open = b.className === "open-all"; });
  }));
  root.dataset.ready = "1";
})();
