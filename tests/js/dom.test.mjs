// dom.js's boxTop: the tour's box is on the screen wherever its element is (issue 39, friction
// 10: the box of step 5 sat 11 px above the screen). The oracle: the box's top and bottom lie
// inside [8, screen - 8] and it does not cover the element when there is room beside it.
import assert from "node:assert/strict";
import { test } from "node:test";

import { boxTop } from "../../glassformer/explain/assets/dom.js";

const SCREEN = 1000;
const H = 120;

test("below the element when the box fits there", () => {
  assert.equal(boxTop({ top: 100, bottom: 300 }, H, SCREEN), 310);
});

test("above the element near the bottom of the screen", () => {
  assert.equal(boxTop({ top: 800, bottom: 950 }, H, SCREEN), 800 - H - 10);
});

test("on the screen whatever the element: tall, off the top, off the bottom", () => {
  const rects = [
    { top: -11, bottom: 990 }, // the map of step 5: taller than the screen, 11 px above it
    { top: -500, bottom: -100 },
    { top: 20, bottom: 1900 },
    { top: 1200, bottom: 1300 },
    { top: 0, bottom: SCREEN },
  ];
  for (const r of rects) {
    const top = boxTop(r, H, SCREEN);
    assert.ok(top >= 8 && top + H <= SCREEN - 8, JSON.stringify({ r, top }));
  }
});
