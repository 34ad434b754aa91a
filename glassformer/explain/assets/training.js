// The explorer's Training tab, shown for a model whose folder holds recorded views (`train
// --snapshot-views`): the time-lapse (timelapse.js) of GET /api/views. Its probe button runs the
// probe text and opens the Attention tab on the head it names.
import { el } from "./dom.js";
import { $, app } from "./page.js";
import { setText } from "./run.js";
import { showTab } from "./steps.js";
import { mount } from "./timelapse.js";

const tab = $("tab-training");
const button = app.querySelector(".tabs button[data-tab=training]");
const box = tab.querySelector(".gf-tl");
let model = null;
let shown = null;
let view = null;

async function show() {
  if (!model || shown === model) return;
  const want = model;
  box.replaceChildren(el("p", { class: "sub", text: "loading the recorded views…" }));
  let data;
  try {
    const r = await fetch("/api/views?model=" + encodeURIComponent(want));
    data = await r.json();
    if (!r.ok) throw new Error(data.error || "HTTP " + r.status);
  } catch (e) {
    if (want === model)
      box.replaceChildren(el("p", { class: "problem", text: "No time-lapse: " + e.message }));
    return;
  }
  if (want !== model) return; // another model was chosen meanwhile
  shown = want;
  view = mount(box, data, {
    onProbe: (text, head) => {
      setText(text, head);
      showTab("attention");
    },
  });
  tab.dataset.ready = want;
}

app.addEventListener("gf-model", (e) => {
  // run.js: a model was chosen (its listing, or null)
  const info = e.detail;
  if (view) view.stop();
  model = info && info.views ? info.id : null;
  shown = null;
  view = null;
  delete tab.dataset.ready;
  box.replaceChildren();
  button.hidden = !model;
  button.title = model
    ? "how this model read one probe text while it trained (train --snapshot-views)"
    : "";
  if (!tab.hidden) {
    if (model) show();
    else showTab("attention");
  }
});
button.addEventListener("click", show);
