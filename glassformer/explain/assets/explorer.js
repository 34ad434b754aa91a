// The live explorer: the static report's front end (report.css, heatmap.js) fetching its data
// from `glassformer serve` instead of reading it inlined. Typing re-runs the model (one run at a time);
// every view asks the server for what it shows, when it is shown. Text from the server goes in
// as text (textContent); the only HTML inserted is the report's own cards and tables, which
// the server escapes (explain/html_pieces.py).
// Reading conventions, the same in every view: numbers to 3 significant digits (the exact value
// on hover and in exports); token ids muted ("#12"), probabilities as percentages; colours
// white = 0, blue = high or positive, red = negative; a decoder's row i "reads" token i and
// "predicts" token i + 1. Controls that do not apply are disabled, their tooltip says why; an
// error clears every result it invalidates.
// Its modules: page.js (state, server), run.js, attention.js, steps.js, generate.js, beam.js,
// intervene.js, compare.js; overview.js, tour.js and training.js beside them.
import { download } from "./dom.js";
import { generateControls } from "./generate.js";
import { $, input, problem, state } from "./page.js";
import { loadModels } from "./run.js";
import "./minimap.js";
import "./overview.js";
import "./tour.js";
import "./training.js";

// The run's exports: the report and the trace, as files.
async function downloadRun(action, name) {
  const r = await fetch("/api/" + action, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(input()),
  });
  if (!r.ok) {
    problem((await r.json()).error);
    return;
  }
  download(name, await r.blob());
}
$("export-report").addEventListener("click", () =>
  downloadRun("report", "glassformer-" + state.model + ".html"),
);
$("export-trace").addEventListener("click", () =>
  downloadRun("trace", "glassformer-" + state.model + "-trace.json"),
);

generateControls();
loadModels().catch((e) => problem("Could not list the models: " + e.message));
