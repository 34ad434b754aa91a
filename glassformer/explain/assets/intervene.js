// The Ablate & patch tab: heads to switch off or patch, the position whose prediction is
// measured (a map row click sets it), and what the change did, in full there and in short
// under the Attention tab's map.
import { predictions, rowLabel } from "./rows.js";
import { el, unique } from "./dom.js";
import { pct, plural, sig } from "./numbers.js";
import { $, app, applies, exact, headKey, input, nextTable, numEl, post, state } from "./page.js";

const how = () => app.querySelector("input[name=how]:checked").value;
export function toggleHead(s, l, h, on) {
  const k = headKey(s, l, h),
    [stack, kind] = s.split(".");
  if (on) state.ablated.set(k, { stack, kind, layer: l, head: h });
  else state.ablated.delete(k);
  app.querySelectorAll(".thumb").forEach((t) => {
    if (headKey(state.site, state.layer, Number(t.dataset.head)) === k)
      t.classList.toggle("ablated", on);
  });
  if (headKey(state.site, state.layer, state.head) === k) $("ablate-head").checked = on;
  renderHeadButtons();
  intervene();
}
export function interveneControls() {
  const fixed =
    state.info && state.info.kind === "walkthrough"
      ? "a walkthrough's steps are fixed: choose a model to ablate or patch"
      : "";
  app.querySelectorAll("input[name=how]").forEach((r) => applies(r, fixed));
  applies(
    $("patch-text"),
    fixed || (how() !== "patch" ? "only for patching: choose “patch from a second prompt”" : ""),
    "a second prompt with as many tokens: its head outputs replace this one's",
  );
}
// The position whose prediction an intervention measures: the decoder's positions.
function positionOptions(select) {
  const run = state.run,
    rows = predictions(run);
  select.replaceChildren();
  if (!run || !rows) {
    select.append(new Option("—", ""));
    applies(
      select,
      !run
        ? "no run"
        : run.arch === "encoder"
          ? "a classifier or an encoder gives one result for the whole text: no position to choose"
          : "a walkthrough's steps are fixed",
    );
    return;
  }
  const auto =
    run.arch === "decoder"
      ? "the last position (" + (rows.length - 1) + ")"
      : "the first position whose prediction changes";
  select.append(new Option("default: " + auto, ""));
  rows.forEach((r, i) => {
    const o = new Option(i + ": " + rowLabel(r), String(i));
    o.disabled = !!r.unused; // its prediction is no part of the translation: nothing to measure
    select.append(o);
  });
  select.value =
    state.position === null || state.position >= rows.length ? "" : String(state.position);
  applies(
    select,
    "",
    "the position whose next-token prediction is compared, with and without the change",
  );
}
export function positionSelects() {
  if (
    state.run &&
    state.position !== null &&
    state.position >= (state.run.tokens.decoder || []).length
  )
    state.position = null;
  positionOptions($("position"));
}
// A click on a decoder row of a map: what an intervention measures is that row's prediction.
export function measureAt(ax, i) {
  const r = ax && ax.rows[i];
  if (!r || r.predicts === undefined || r.unused || state.position === i) return;
  state.position = i;
  $("position").value = String(i);
  if (state.ablated.size) intervene();
}
function choosePosition(value) {
  state.position = value === "" ? null : Number(value);
  $("position").value = value;
  intervene();
}
$("position").addEventListener("change", (e) => choosePosition(e.target.value));
const aboutHead = (maps, l, h) => {
  const a = maps.find((x) => x.layer === l && x.head === h);
  return a && a.about ? " · " + a.about : "";
};
export function renderHeadButtons() {
  const box = $("head-buttons"),
    run = state.run;
  if (!run) return;
  const maps = run.attention.filter(
    (a) =>
      a.layer !== null && a.head !== null && /^(encoder|decoder)\.(self|cross)_attn$/.test(a.site),
  );
  const out = [];
  for (const s of unique(maps.map((a) => a.site))) {
    const here = maps.filter((a) => a.site === s),
      layers = unique(here.map((a) => a.layer)),
      heads = unique(here.map((a) => a.head));
    const t = el(
      "table",
      {},
      el("caption", { text: s }),
      el("tr", {}, el("th"), ...heads.map((h) => el("th", { text: "head " + h }))),
    );
    for (const l of layers)
      t.append(
        el(
          "tr",
          {},
          el("th", { text: "layer " + l }),
          ...heads.map((h) => {
            const b = el("button", {
              type: "button",
              class: "head-toggle" + (state.ablated.has(headKey(s, l, h)) ? " on" : ""),
              "data-site": s,
              "data-layer": l,
              "data-head": h,
              text: h,
              title: s + " · layer " + l + " · head " + h + aboutHead(here, l, h),
            });
            b.addEventListener("click", () =>
              toggleHead(s, l, h, !state.ablated.has(headKey(s, l, h))),
            );
            return el("td", {}, b);
          }),
        ),
      );
    out.push(t);
  }
  if (!out.length)
    out.push(el("p", { class: "sub", text: "No model heads to change here (a walkthrough)." }));
  box.replaceChildren(...out);
}
app.querySelectorAll("input[name=how]").forEach((r) =>
  r.addEventListener("change", () => {
    interveneControls();
    intervene();
  }),
);
$("patch-text").addEventListener("input", () => {
  clearTimeout(state.patchTimer);
  state.patchTimer = setTimeout(intervene, 300);
});
$("clear-heads").addEventListener("click", () => {
  state.ablated.clear();
  renderHeadButtons();
  app.querySelectorAll(".thumb.ablated").forEach((t) => t.classList.remove("ablated"));
  app.querySelectorAll(".thumb input.ablate").forEach((b) => {
    b.checked = false;
  });
  $("ablate-head").checked = false;
  $("intervention").replaceChildren();
  $("att-effect").replaceChildren();
  $("att-effect").hidden = true;
});
function showEffect(full, compact) {
  // the Ablate tab's result, and its summary under the map
  $("intervention").replaceChildren(...full);
  const att = $("att-effect");
  att.hidden = !state.ablated.size;
  att.replaceChildren(...compact);
}
const sayBoth = (make) => showEffect([make()], [make()]);
export async function intervene() {
  const change = how();
  if (!state.ablated.size) {
    sayBoth(() => el("p", { class: "sub", text: "Choose at least one head." }));
    return;
  }
  const body = input({ heads: Array.from(state.ablated.values()), how: change });
  if (change === "patch") {
    if (!$("patch-text").value.trim()) {
      sayBoth(() =>
        el("p", {
          class: "sub",
          text: "Type a second prompt to patch from (the Ablate & patch tab).",
        }),
      );
      return;
    }
    body.patch_text = $("patch-text").value;
  }
  if (state.position !== null && state.run && state.run.arch !== "encoder")
    body.position = state.position;
  const seq = state.seq,
    mine = (state.ivSeq = (state.ivSeq || 0) + 1);
  let r;
  try {
    r = await post("intervene", body);
  } catch (e) {
    if (mine === state.ivSeq) sayBoth(() => el("p", { class: "problem", text: e.message }));
    return;
  }
  if (seq !== state.seq || mine !== state.ivSeq) return; // a newer choice of heads is coming
  showEffect(interventionView(r, change, false), interventionView(r, change, true));
  $("intervention").dataset.done = $("att-effect").dataset.done = String(Date.now());
}
// What an intervention changed: the Ablate tab's full view, or the compact one under the map.
function interventionView(r, change, compact) {
  const names = r.heads
    .map((h) => h.stack + "." + h.layer + "." + h.kind + ".head" + h.head)
    .join(", ");
  const what = {
    zero: "zero-ablated",
    mean: "mean-ablated",
    patch: "patched from the second prompt",
  }[change];
  const title = el(compact ? "h4" : "h3", {
    text: (compact ? "Under the change: " : "") + names + " " + what,
  });
  const notes =
    compact || !r.notes ? [] : r.notes.map((t) => el("p", { class: "sub notes", text: t }));
  if (r.kind === "embedding")
    return [
      title,
      ...notes,
      el(
        "div",
        { class: "result" },
        el("p", {}, "cosine(clean embedding, changed embedding) = ", numEl(r.cosine)),
        el("p", {}, "largest change of any encoder output: ", numEl(r.max_abs_change)),
      ),
    ];
  if (r.kind === "class") return [title, ...notes, classChange(r)];
  const rows = predictions(state.run),
    at = rows && rows[r.position];
  const where =
    "the next token after position " +
    r.position +
    " (" +
    (at ? rowLabel(at) : "reads " + r.reads) +
    ")";
  const moved = r.changed_positions || [];
  const movedText = moved.length
    ? "The top prediction changed at " +
      plural(moved.length, "position") +
      ": " +
      moved.slice(0, 20).join(", ") +
      (moved.length > 20 ? ", …" : "") +
      "."
    : "The top prediction changed at no position.";
  const n = compact ? 5 : undefined;
  const col = (heading, top, base, cls, greedy) => {
    const t = nextTable(top.slice(0, n), base ? ["Δ logit"] : []);
    if (base)
      Array.from(t.querySelectorAll("tr"))
        .slice(1)
        .forEach((tr, i) => {
          const d = top[i].logit - base[i].logit;
          tr.append(
            el("td", {
              class: d > 0 ? "up" : d < 0 ? "down" : "",
              text: (d > 0 ? "+" : "") + sig(d),
              title: exact(d),
            }),
          );
        });
    const div = el(
      "div",
      { class: cls },
      el(compact ? "h4" : "h3", { text: heading }),
      el("p", { class: "sub", text: where }),
      t,
    );
    if (greedy !== undefined)
      div.append(
        el(
          "p",
          {},
          el("b", { text: "greedy: " }),
          el("span", { class: "cont", text: JSON.stringify(greedy) }),
        ),
      );
    return div;
  };
  const c = r.continuation || {};
  const clean = col("clean", r.clean, null, "clean", c.clean),
    changed = col(what, r.changed, r.clean, "changed", c.changed);
  if (compact) {
    const s = el("select", { class: "att-position" });
    positionOptions(s);
    s.addEventListener("change", () => choosePosition(s.value));
    return [
      title,
      el("p", { class: "sub" }, el("label", {}, "prediction measured at ", s), " · " + movedText),
      el("div", { class: "side" }, clean, changed),
    ];
  }
  const out = [
    el("p", {
      class: "summary sub",
      text:
        names +
        " " +
        what +
        " · largest logit change anywhere: " +
        sig(r.max_abs_change) +
        " · " +
        movedText,
    }),
    ...notes,
    clean,
    changed,
  ];
  if (r.source) out.push(col("the second prompt", r.source, null, "source"));
  return out;
}
function classChange(r) {
  // a classifier: each class's probability before and after
  const rows =
    r.classes ||
    (r.clean || []).map((c, i) => ({
      label: c.label,
      before: c.probability,
      after: r.changed[i].probability,
      change: r.changed[i].probability - c.probability,
    }));
  const t = el(
    "table",
    { class: "next classes" },
    el("tr", {}, ...["class", "clean", "changed", "Δ"].map((x) => el("th", { text: x }))),
  );
  for (const c of rows)
    t.append(
      el(
        "tr",
        { "data-label": c.label },
        el("td", { class: "t", text: c.label }),
        el("td", { text: pct(c.before), title: exact(c.before) }),
        el("td", { text: pct(c.after), title: exact(c.after) }),
        el("td", {
          class: c.change > 0 ? "up" : c.change < 0 ? "down" : "",
          text: (c.change > 0 ? "+" : "") + sig(100 * c.change) + " points",
          title: exact(c.change),
        }),
      ),
    );
  const said =
    r.clean_label !== undefined
      ? el("p", {
          text:
            "class: " +
            r.clean_label +
            " → " +
            r.changed_label +
            (r.clean_label === r.changed_label ? " (unchanged)" : " (changed)"),
        })
      : null;
  return el("div", { class: "result classes" }, said, t);
}
