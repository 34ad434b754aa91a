// The explorer's guided tour: offered on a first visit (and started whenever the "tour" button
// is pressed), a few steps that follow one prediction from the typed text to the output, on
// whichever model is open. Each step outlines one part of the page and says, in plain words, what it shows; the
// words that depend on the model (its tokens, its output) are read from the page when the step
// is shown. Dismissed or finished, it is remembered (localStorage) and does not come back unasked.
// It only reads the page: the explorer works the same with it closed.
import { boxTop } from "./dom.js";
import { $ } from "./page.js";

const KEY = "glassformer-tour-done";

const count = (n, word) => n + " " + word + (n === 1 ? "" : "s");
const tokens = () => document.querySelectorAll("#tokens .tok").length;
// The first paragraph of an element as the page shows it: a token chip as "piece #id" (the
// stylesheet prints the "#", which innerText leaves out, and runs the parts together).
const asShown = (node) =>
  node.nodeType === Node.TEXT_NODE
    ? node.textContent
    : node.classList && node.classList.contains("tok")
      ? " " +
        node.firstChild.textContent +
        (node.querySelector("small.id") ? " #" + node.querySelector("small.id").textContent : "") +
        " "
      : Array.from(node.childNodes, asShown).join("");
const firstLine = (id) => {
  const e = $(id),
    p = e && (e.querySelector("p") || e);
  return p ? asShown(p).replace(/\s+/g, " ").trim().slice(0, 120) : "";
};

// [element id (or a selector), title, words]; a step whose element is missing is left out.
const STEPS = [
  [
    "text",
    "The input",
    () =>
      "Type any text here. On every keystroke the model runs " +
      "again, in the exact float64 reference engine, and every view below follows.",
  ],
  [
    "tokens",
    "Tokens",
    () =>
      "The text is cut into tokens: here " +
      count(tokens(), "token") +
      ". Each chip is one token, its id in small print. The model only ever sees these ids.",
  ],
  [
    "overview",
    "The whole model",
    () =>
      "The model drawn as boxes: embeddings, then each " +
      "block's attention and feed-forward, then the output head. Click a box to look inside it.",
  ],
  [
    "site",
    "Which attention",
    () =>
      "Choose the attention to look at: the stack (encoder or " +
      "decoder), the kind (self- or cross-attention), the layer and the head, counted from 0.",
  ],
  [
    "map",
    "Attention weights",
    () =>
      "Row i is one token asking; column j is a token it " +
      "reads. Each row sums to 1: A = softmax(Ω/√c), Ω = Q·Kᵀ. Hover a cell for its exact value; click it " +
      "to take its score apart.",
  ],
  [
    "[data-tab=steps]",
    "Every step",
    () =>
      "Every intermediate matrix of the run, in the " +
      "order the data flows, each with its equation and what it shows for this input.",
  ],
  [
    "output",
    "The output",
    () => {
      const said = firstLine("output");
      return (
        "What the model makes of the input" +
        (said ? ": “" + said + "”" : "") +
        ". For a " +
        "decoder, the next token and its probability; for a translator, the translation; for a " +
        "classifier, the class."
      );
    },
  ],
  [
    "[data-tab=intervene]",
    "Touch it",
    () =>
      "Switch a head off, or patch it in from a " +
      "second input, and see which predictions change: the way to find what a head does.",
  ],
];

let shown = null,
  at = 0,
  box = null;

function target(where) {
  const e = where.startsWith("[") ? document.querySelector(where) : $(where);
  return e && e.offsetParent !== null ? e : null;
}

function close(remember) {
  if (shown) shown.classList.remove("gf-tour-target");
  shown = null;
  if (box) box.remove();
  box = null;
  if (remember)
    try {
      localStorage.setItem(KEY, "1");
    } catch {
      /* private mode */
    }
}

function show(k) {
  const steps = STEPS.filter((s) => target(s[0]));
  if (!steps.length) return;
  at = Math.max(0, Math.min(k, steps.length - 1));
  const [where, title, words] = steps[at];
  if (shown) shown.classList.remove("gf-tour-target");
  shown = target(where);
  shown.classList.add("gf-tour-target");
  shown.scrollIntoView({ block: "center" });
  if (!box) {
    box = document.createElement("div");
    box.className = "gf-tour";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-label", "guided tour");
    document.body.append(box);
  }
  const button = (text, cls, onclick) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = cls;
    b.textContent = text;
    b.onclick = onclick;
    return b;
  };
  const h = document.createElement("b"),
    p = document.createElement("p");
  h.textContent = at + 1 + " of " + steps.length + " · " + title;
  p.textContent = words();
  const nav = document.createElement("div");
  nav.className = "gf-tour-nav";
  if (at > 0) nav.append(button("back", "gf-tour-back", () => show(at - 1)));
  nav.append(
    at < steps.length - 1
      ? button("next", "gf-tour-next", () => show(at + 1))
      : button("done", "gf-tour-done", () => close(true)),
  );
  nav.append(button("close the tour", "gf-tour-close", () => close(true)));
  box.replaceChildren(h, p, nav);
  box.dataset.step = String(at);
  const r = shown.getBoundingClientRect();
  box.style.top = window.scrollY + boxTop(r, box.offsetHeight, window.innerHeight) + "px";
  box.style.left =
    Math.max(
      8,
      Math.min(window.scrollX + r.left, window.scrollX + window.innerWidth - box.offsetWidth - 16),
    ) + "px";
}

function start() {
  const offer = $("tour-offer");
  if (offer) offer.remove();
  show(0);
}
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && box) close(true);
});
const bar = document.querySelector(".gf .bar");
if (bar) {
  const b = document.createElement("button");
  b.type = "button";
  b.id = "tour";
  b.textContent = "tour";
  b.title = "a guided tour of one prediction, from the tokens to the output";
  b.onclick = start;
  bar.append(b);
}
let done = false;
try {
  done = localStorage.getItem(KEY) === "1";
} catch {
  done = false;
}
if (!done && bar) offerTour(bar);
// A first visit: the offer, in the bar (it covers nothing); taken or declined, it is remembered.
function offerTour(bar) {
  const offer = document.createElement("span");
  offer.id = "tour-offer";
  offer.className = "gf-tour-offer";
  offer.append("First time here? ");
  const take = document.createElement("button"),
    no = document.createElement("button");
  take.type = no.type = "button";
  take.textContent = "take the tour";
  no.textContent = "no thanks";
  take.onclick = () => {
    offer.remove();
    start();
  };
  no.onclick = () => {
    offer.remove();
    close(true);
  };
  offer.append(take, " ", no);
  bar.append(offer);
}
