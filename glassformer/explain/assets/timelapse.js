// The training time-lapse (explain/timelapse.py's page data: the frames `train --snapshot-views`
// recorded, views.to_json): a time slider over the recorded steps (with play), the chosen head's
// attention map at that step, every head's thumbnail coloured by its prefix-matching score, and
// the curves over the steps with a marker at the slider's step. Used by the static page
// (`explain RUN --over-training --html`, bundled with timelapse-page.js) and by the explorer's
// Training tab (training.js: GET /api/views when a model has views).
// Maps are drawn by heatmap.js in the one colour convention (white = 0, blue = high), on a fixed
// scale 0 … 1 so that steps compare by colour. Numbers read to 3 significant digits; the exact
// recorded value is in the title or the tooltip. Text goes in as text (textContent), never HTML.
import { el, unique } from "./dom.js";
import { draw, rgb } from "./heatmap.js";
import { chart, num, numEl, sig, steps } from "./timelapse-chart.js";
import { bestAt, headMap, score } from "./timelapse-data.js";

const inText = (t) => t.charAt(0).toLowerCase() + t.slice(1); // "Layer 1 · head 3" in a sentence

// -- the component --------------------------------------------------------------------------
// mount(root, data, opts): the time-lapse in `root`. opts.tip: the tooltip element (default:
// the page's .gf-tip); opts.onProbe: a button "read the probe in the Attention tab" calls it with the text and the head shown ({site, layer, head}).
export function mount(root, data, opts) {
  opts = opts || {};
  const frames = data.frames,
    n = frames.length,
    words = data.words;
  const tip = opts.tip || (root.closest(".gf") || document).querySelector(".gf-tip");
  const sites = data.sites,
    groups = unique(sites.map((s) => s.group));
  if (!n || !sites.length) {
    root.replaceChildren(
      el("p", { class: "sub", text: "The recorded views hold no attention maps." }),
    );
    return { setFrame() {}, stop() {}, state: {} };
  }
  const last = frames[n - 1],
    first = bestAt(last);
  const state = {
    k: n - 1,
    site: first ? first.site : sites[0].name,
    head: first ? first.head : 0,
    timer: 0,
  };
  const siteOf = (name) => sites.find((s) => s.name === name);

  const play = el("button", { type: "button", class: "tl-play", text: "▶ play" });
  const slider = el("input", {
    type: "range",
    class: "tl-slider",
    min: 0,
    max: n - 1,
    step: 1,
    value: n - 1,
    "aria-label": "training step",
  });
  const label = el("span", { class: "tl-step" });
  const group = el("select", { class: "tl-group" });
  groups.forEach((g) => group.append(new Option(sites.find((s) => s.group === g).group_title, g)));
  group.value = siteOf(state.site).group;
  const groupLabel = el("label", {}, "attention ", group);
  groupLabel.hidden = groups.length < 2;
  const now = el("p", { class: "tl-now" });
  const mapTitle = el("h3", { class: "tl-title" }),
    mapName = el("code", { class: "tl-name" });
  const mapBox = el("div", { class: "hm tl-hm" });
  const grid = el("div", { class: "tl-grid" });
  const headCharts = el("div", { class: "tl-head-charts" }),
    charts = el("div", { class: "tl-charts" });
  const probe = opts.onProbe
    ? el("button", {
        type: "button",
        class: "tl-probe",
        text: "read the probe with the final weights (Attention tab)",
        onclick: () => opts.onProbe(data.text, pick()),
      })
    : null;
  const pick = () => ({
    site: siteOf(state.site).group,
    layer: siteOf(state.site).layer,
    head: state.head,
  }); // the head shown
  root.replaceChildren(
    el("p", { class: "what", text: words.prefix + " " + words.previous }),
    el("p", { class: "shows tl-headline", text: words.headline }),
    el(
      "p",
      { class: "sub tl-probe-text" },
      "Probe text (" +
        (frames[0].tokens.encoder || frames[0].tokens.decoder || []).length +
        " tokens), recorded every " +
        steps(data.every) +
        " steps: ",
      el("code", { text: data.text }),
      probe ? " " : null,
      probe,
    ),
    el("div", { class: "tl-controls" }, play, slider, label, groupLabel),
    now,
    el(
      "div",
      { class: "tl-main" },
      el(
        "figure",
        { class: "tl-map att" },
        el(
          "figcaption",
          {},
          mapTitle,
          el(
            "p",
            { class: "sub" },
            el("span", { class: "eq", text: words.equation }),
            " · ",
            mapName,
          ),
          el("p", {
            class: "sub",
            text: "Row i: how much token i (the query) takes from each token j (the key); each row sums to 1. Colour scale 0 … 1 at every step, so that steps compare by colour. Hover a cell for its exact recorded value.",
          }),
        ),
        mapBox,
      ),
      el(
        "div",
        { class: "tl-heads" },
        el("h3", { text: "Every head at this step" }),
        el("p", {
          class: "sub",
          text: "Each label is the head's prefix-matching score, its colour the same scale (white 0, blue 1); click a head to show its map.",
        }),
        grid,
        headCharts,
      ),
    ),
    charts,
  );

  // The curves: each series' values over the frames.
  const series = (label, get, colour, extra) =>
    Object.assign({ label, colour, values: frames.map((f) => num(get(f))) }, extra || {});
  const met = (key) => (f) => (f.metrics || {})[key];
  function specs() {
    const out = [];
    const loss = [series("training loss", (f) => f.row.loss, "#1d232b")];
    if (frames.some((f) => num(f.row.val_loss) !== null))
      loss.push(
        series("val_loss", (f) => f.row.val_loss, "#7a4b00", {
          dash: "5 3",
          dots: true,
          join: true,
        }),
      );
    if (loss.some((s) => s.values.some((v) => v !== null)))
      out.push({
        title: "Training loss",
        sub: "the training log's loss (and the evaluation's) at each recorded step",
        series: loss,
      });
    if (frames.some((f) => num(met("probe_loss")(f)) !== null))
      out.push({
        title: "The probe's loss",
        sub: "next-token cross-entropy over the probe text: on the tokens an earlier copy gives away (what an induction head can copy) and on the others",
        series: [
          series("probe_loss", met("probe_loss"), "#1d232b"),
          series("repeat_loss", met("repeat_loss"), "#2166ac"),
          series("first_loss", met("first_loss"), "#8a929c", { dash: "4 3" }),
        ],
      });
    const scored = sites.filter((s) => s.scored && s.group === group.value);
    for (const [what, name, words2] of [
      [
        "prefix",
        "Prefix-matching score, per head",
        "attention on the token after an earlier copy of the query's token",
      ],
      ["previous", "Previous-token score, per head", "attention on the token just before"],
    ]) {
      const lines = [];
      for (const s of scored)
        for (const h of s.heads) {
          const on = s.name === state.site && h.head === state.head;
          lines.push(
            series(
              h.title + (on ? " (shown)" : ""),
              (f) => score(f, what, s.name, h.head),
              on ? "#2166ac" : "#b7c0ca",
              { width: on ? 2.6 : 1, faint: !on },
            ),
          );
        }
      if (!lines.length) continue;
      const base = num((data.chance || {})[group.value.split(".")[0]]);
      const ref =
        what === "prefix" && base !== null
          ? { value: base, label: "uniform attention: " + base }
          : null;
      const top = Math.max(
        ref ? ref.value : 0,
        ...lines.flatMap((l) => l.values).filter((v) => v !== null),
      );
      const range = [0, [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1].find((t) => t >= 1.1 * top) || 1];
      const said =
        words2 +
        "; the head shown in blue, the others grey" +
        (ref ? "; dotted: what uniform attention would score (" + sig(ref.value) + ")" : "");
      out.push({ title: name, sub: said, series: lines, range, ref, heads: true });
    }
    return out;
  }
  let markers = [];
  function drawCharts() {
    charts.replaceChildren();
    headCharts.replaceChildren();
    markers = specs().map((spec) => {
      const box = el("div", { class: "tl-chart" });
      (spec.heads ? headCharts : charts).append(box);
      return chart(box, frames, spec, (k) => setFrame(k), tip);
    });
  }

  function drawMap() {
    const f = frames[state.k],
      s = siteOf(state.site),
      h = s.heads[state.head],
      m = headMap(f, s.name, state.head);
    mapTitle.textContent = h.map_title + " at step " + steps(f.step);
    mapName.textContent = s.name + ".head" + state.head + ".A";
    mapBox.replaceChildren();
    delete mapBox.dataset.drawn;
    if (!m) {
      mapBox.append(el("p", { class: "sub", text: "Not recorded at this step." }));
      return;
    }
    const canvas = draw(mapBox, m, tip, {});
    const [R, C] = m.shape;
    canvas.addEventListener("mousemove", (e) => {
      // after heatmap.js's own: the exact value
      const i = Math.max(0, Math.min(R - 1, Math.floor((e.offsetY * R) / canvas.clientHeight)));
      const j = Math.max(0, Math.min(C - 1, Math.floor((e.offsetX * C) / canvas.clientWidth)));
      const x = m.v[i * C + j],
        q = m.rows ? " “" + m.rows[i] + "”" : "",
        key = m.cols ? " “" + m.cols[j] + "”" : "";
      tip.textContent =
        "query (row) " +
        i +
        q +
        " · key (column) " +
        j +
        key +
        "\nA[" +
        i +
        ", " +
        j +
        "] ≈ " +
        sig(x) +
        " · exact (recorded float16): " +
        x;
    });
    mapBox.dataset.step = String(f.step);
  }
  function drawGrid() {
    const f = frames[state.k],
      rows = [];
    for (const s of sites.filter((x) => x.group === group.value)) {
      rows.push(
        el(
          "div",
          { class: "tl-row" },
          el("span", { class: "tl-layer", text: "layer " + s.layer }),
          ...s.heads.map((h) => {
            const p = score(f, "prefix", s.name, h.head),
              q = score(f, "previous", s.name, h.head);
            const on = s.name === state.site && h.head === state.head,
              hm = el("div", { class: "hm" });
            const [r, g, b] = rgb(p === null ? 0 : p, true);
            const said = el("span", {
              class: "tl-score" + (p !== null && p > 0.55 ? " dark" : ""),
              style: "background:rgb(" + r + "," + g + "," + b + ")",
              text: p === null ? "—" : sig(p),
            });
            const t = el(
              "button",
              {
                type: "button",
                class: "tl-thumb" + (on ? " on" : ""),
                "data-site": s.name,
                "data-head": h.head,
                title:
                  h.title +
                  " at step " +
                  steps(f.step) +
                  (p === null ? "" : ": prefix-matching " + p + ", previous-token " + q),
              },
              hm,
              el("span", { class: "tl-h", text: "head " + h.head }),
              said,
            );
            t.addEventListener("click", () => {
              state.site = s.name;
              state.head = h.head;
              drawCharts();
              setFrame(state.k);
            });
            const m = headMap(f, s.name, h.head);
            if (m) draw(hm, m, null, { fit: 72 });
            return t;
          }),
        ),
      );
    }
    grid.replaceChildren(...rows);
  }
  function sayNow() {
    const f = frames[state.k],
      s = siteOf(state.site),
      h = s.heads[state.head];
    const p = score(f, "prefix", s.name, state.head),
      q = score(f, "previous", s.name, state.head),
      b = bestAt(f);
    const parts = ["At step " + steps(f.step) + ", " + inText(h.title)];
    if (p === null)
      parts.push(
        s.scored
          ? " has no prefix-matching score (nothing in the probe repeats)."
          : " has no prefix-matching score (it measures self-attention).",
      );
    else {
      parts.push(
        " puts ",
        numEl(p),
        " of its attention on the token after the earlier copy and ",
        numEl(q),
        " on the previous token",
      );
      if (b && (b.site !== s.name || b.head !== state.head))
        parts.push(
          "; the highest prefix-matching score at this step is " +
            inText(siteOf(b.site).heads[b.head].title) +
            "'s, ",
          numEl(b.score),
          ".",
        );
      else parts.push(", the highest prefix-matching score of any head at this step.");
    }
    const m = f.metrics || {};
    if (f.tokens.encoder && f.tokens.decoder)
      parts.push(
        " The decoder reads, greedily translating the probe: “" + f.tokens.decoder.join("") + "”.",
      );
    if (num(m.probe_loss) !== null) {
      parts.push(" The probe's loss: ", numEl(num(m.probe_loss)));
      if (num(m.repeat_loss) !== null && num(m.first_loss) !== null)
        parts.push(
          " (",
          numEl(num(m.repeat_loss)),
          " on the tokens an earlier copy gives away, ",
          numEl(num(m.first_loss)),
          " on the others)",
        );
      parts.push(".");
    }
    now.replaceChildren(...parts);
  }
  function setFrame(k) {
    state.k = Math.max(0, Math.min(n - 1, k));
    slider.value = String(state.k);
    label.textContent =
      "step " + steps(frames[state.k].step) + " · frame " + (state.k + 1) + " of " + n;
    drawMap();
    drawGrid();
    sayNow();
    markers.forEach((at) => at(state.k));
    root.dataset.frame = String(state.k);
    root.dataset.step = String(frames[state.k].step);
  }
  function stop() {
    clearInterval(state.timer);
    state.timer = 0;
    play.textContent = "▶ play";
  }
  play.addEventListener("click", () => {
    if (state.timer) {
      stop();
      return;
    }
    if (state.k >= n - 1) setFrame(0);
    play.textContent = "❚❚ pause";
    state.timer = setInterval(
      () => {
        setFrame(state.k + 1);
        if (state.k >= n - 1) stop();
      },
      Math.max(60, Math.min(400, 8000 / n)),
    );
  });
  slider.addEventListener("input", () => {
    stop();
    setFrame(Number(slider.value));
  });
  group.addEventListener("change", () => {
    const s = sites.find((x) => x.group === group.value);
    state.site = s.name;
    state.head = 0;
    drawCharts();
    setFrame(state.k);
  });
  root.dataset.steps = JSON.stringify(frames.map((f) => f.step));
  drawCharts();
  setFrame(n - 1);
  return { setFrame, stop, state };
}
