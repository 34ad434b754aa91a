// The Generate tab's steering: a contrast pair, a block and a scale sent with the generation
// (the output shown is the steered one), and, per new token of the steered output, the
// next-token distribution before steering (the same prefix) and after, the chosen token marked.
import { el } from "./dom.js";
import { pct } from "./numbers.js";
import { $ } from "./page.js";

const TOP = 3; // tokens shown per distribution

// The steering fields of a generate request: none when the pair is empty.
export function steerRequest() {
  const pair = $("steer-pair").value.trim();
  if (!pair) return {};
  return {
    steer: pair,
    steer_layer: Number($("steer-layer").value) || 0,
    steer_scale: Number($("steer-scale").value),
  };
}

function dist(top, chosen) {
  return el(
    "td",
    {},
    ...top.slice(0, TOP).map((t) =>
      el("span", {
        class: "steer-tok" + (t.id === chosen ? " chosen" : ""),
        text: t.token + " " + pct(t.p),
        title: t.token + ": p = " + t.p,
      }),
    ),
  );
}

// The report of a steered generation (`Model.steered`): both texts, then one row per new token.
export function renderSteering(g) {
  const view = $("steer-view");
  view.replaceChildren();
  const r = g && g.steering;
  if (!r) return;
  const s = r.steering;
  const what = s.pair ? "“" + s.pair[0] + "” − “" + s.pair[1] + "”" : "a given vector";
  const head = el(
    "tr",
    {},
    ...["new token", "chosen", "its p before → after", "before", "after"].map((h) =>
      el("th", { text: h }),
    ),
  );
  const rows = r.steps.map((st) =>
    el(
      "tr",
      { class: st.before[0].id === st.after[0].id ? "" : "moved" },
      el("td", { text: String(st.step) }),
      el("td", { text: st.token }),
      el("td", { text: pct(st.p_before) + " → " + pct(st.p_after) }),
      dist(st.before, st.id),
      dist(st.after, st.id),
    ),
  );
  view.append(
    el("h3", { text: "Steering" }),
    el("p", {
      class: "sub",
      text:
        s.scale +
        " × (" +
        what +
        ") added to " +
        s.step +
        " (the stream entering block " +
        s.layer +
        "), x ← x + s·v at every position",
    }),
    el("p", { class: "steer-text", text: "without: " + JSON.stringify(r.text) }),
    el("p", { class: "steer-text", text: "with: " + JSON.stringify(r.steered) }),
    el("table", { class: "steer-steps" }, head, ...rows),
  );
}
