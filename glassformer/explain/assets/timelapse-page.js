// The static time-lapse page's start (explain/timelapse.py bundles it with timelapse.js): the
// recorded views from the page's JSON block, mounted; `data-ready` says it is drawn.
import { mount } from "./timelapse.js";

const root = document.getElementById("gf-timelapse");
const data = JSON.parse(root.querySelector("script.gf-views").textContent);
mount(root.querySelector(".gf-tl"), data, {});
root.dataset.ready = "1";
