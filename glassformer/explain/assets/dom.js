// Elements, pickers and downloads: the page helpers every script shares (the live explorer's
// modules, the static report's and time-lapse's bundles). Text goes in as text (textContent).

// An element with attributes ("class", "text", "on<event>" handlers, others set) and children.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// The SVG namespace as the HTML parser assigns it (no URL written in a page that loads nothing);
// asked when first needed, so that this module loads where there is no document (node's tests).
let ns = null;
export function svgNS() {
  if (ns === null) {
    const d = document.createElement("div");
    d.innerHTML = "<svg></svg>";
    ns = d.firstChild.namespaceURI;
  }
  return ns;
}

// An SVG element with attributes and, optionally, its text.
export function svgEl(tag, attrs, text) {
  const e = document.createElementNS(svgNS(), tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

export const esc = (s) =>
  String(s).replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c],
  );

// A picker: fill a <select> with options ("" shows as —), keeping the chosen one if it is there.
export function fill(select, options, label, keep = select.value) {
  select.replaceChildren(...options.map((o) => new Option(o === "" ? "—" : label + " " + o, o)));
  select.value = options.includes(keep) ? keep : options[0];
  select.disabled = options.length < 2;
}
export const unique = (xs) => Array.from(new Set(xs));

// Save a file the page made. A listener of the cancelable "gf-download" event on document
// ({detail: {name, blob}}) may take the file instead (preventDefault): a test does.
export function download(name, blob) {
  const asked = new CustomEvent("gf-download", { detail: { name, blob }, cancelable: true });
  if (!document.dispatchEvent(asked)) return;
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// Where a floating box goes (px from the top of the screen) beside an element whose rectangle is
// r: below it when the box fits there, else above it, and in every case on the screen.
export function boxTop(r, height, screen) {
  const below = r.bottom + 10;
  const above = r.top - height - 10;
  const top = below + height + 8 <= screen ? below : above;
  return Math.max(8, Math.min(top, screen - height - 8));
}
