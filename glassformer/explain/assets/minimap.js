// The map that stays in view: a compact outline of the model in the sticky tab bar, each block of
// each stack a small box of its sublayers (self-attention, cross-attention, feed-forward), built
// from the run's own step names. The sublayer the open view sits in is marked, and said in
// words: the Attention tab's map (with its head), or on the Every step tab the card at the top
// of the screen. A click goes there, as a click on the big picture does (overview.js's go).
import { el } from "./dom.js";
import { go } from "./overview.js";
import { $, app, state } from "./page.js";

const KINDS = { self_attn: "self-attention", cross_attn: "cross-attention", ffn: "feed-forward" };
const SUBLAYER = /^(encoder|decoder)\.(\d+)\.(self_attn|cross_attn|ffn)(\.|$)/;

// {stack: [[sublayer, ...] per block]} of the run's step names, in the order the data flows.
function outline(run) {
  const blocks = {};
  const walk = (items) =>
    items.forEach((x) => {
      if (x.group !== undefined) return walk(x.items);
      const m = SUBLAYER.exec(x.step);
      if (!m) return;
      const stack = (blocks[m[1]] = blocks[m[1]] || []);
      const subs = (stack[Number(m[2])] = stack[Number(m[2])] || []);
      if (!subs.includes(m[3])) subs.push(m[3]);
    });
  walk(run.steps || []);
  return blocks;
}

function render() {
  const box = $("minimap");
  const run = state.run;
  const blocks = run && run.arch !== "walkthrough" ? outline(run) : {};
  const stacks = ["encoder", "decoder"].filter((s) => blocks[s]);
  box.hidden = !stacks.length;
  box.replaceChildren(
    ...stacks.map((stack) =>
      el(
        "span",
        { class: "mm-stack" },
        el("span", { class: "mm-name", text: stack }),
        ...blocks[stack].map((subs, layer) =>
          el(
            "span",
            {
              class: "mm-block",
              "data-block": stack + "." + layer,
              title: stack + " block " + layer,
            },
            ...(subs || []).map((sub) => {
              const step = stack + "." + layer + "." + sub;
              const b = el("button", {
                type: "button",
                class: "mm-sub mm-" + sub,
                "data-step": step,
                title: stack + " block " + layer + " · " + KINDS[sub] + ": open it",
              });
              b.addEventListener("click", () => go(step));
              return b;
            }),
          ),
        ),
      ),
    ),
    el("span", { class: "mm-where" }),
  );
  mark();
}

// The sublayer of the open view: "decoder.1.cross_attn" and its words, or null.
function where() {
  if (
    state.tab === "attention" &&
    state.site &&
    state.layer !== null &&
    state.layer !== undefined
  ) {
    const [stack, sub] = state.site.split(".");
    const head = state.head === null || state.head === undefined ? "" : " · head " + state.head;
    return [
      stack + "." + state.layer + "." + sub,
      stack + " block " + state.layer + " · " + KINDS[sub] + head,
    ];
  }
  if (state.tab !== "steps") return null;
  const top = $("minimap").getBoundingClientRect().bottom;
  const card = [...$("steps").querySelectorAll("article.step[data-name]")].find(
    (a) => a.getBoundingClientRect().bottom > top + 4,
  );
  if (!card) return null;
  const name = card.dataset.name;
  const m = SUBLAYER.exec(name);
  if (m)
    return [
      m[1] + "." + m[2] + "." + m[3],
      m[1] + " block " + m[2] + " · " + KINDS[m[3]] + " · " + name,
    ];
  const b = /^(encoder|decoder)\.(\d+)\./.exec(name); // a norm or a residual sum of a block
  return [b ? b[1] + "." + b[2] : null, (b ? b[1] + " block " + b[2] + " · " : "") + name];
}

function mark() {
  const box = $("minimap");
  if (box.hidden) return;
  const here = where();
  const at = here && here[0];
  box
    .querySelectorAll(".mm-sub")
    .forEach((b) => b.classList.toggle("cur", !!at && b.dataset.step === at));
  box
    .querySelectorAll(".mm-block")
    .forEach((b) => b.classList.toggle("cur", !!at && b.dataset.block === at));
  box.querySelector(".mm-where").textContent = here ? here[1] : "";
  box.dataset.current = at || "";
}

let pending = 0;
addEventListener("scroll", () => {
  if (state.tab === "steps" && !pending)
    pending = requestAnimationFrame(() => {
      pending = 0;
      mark();
    });
});
app.addEventListener("gf-run", render);
app.addEventListener("gf-model", () => {
  $("minimap").hidden = true;
});
app.addEventListener("gf-map", mark);
app.addEventListener("gf-tab", mark);
