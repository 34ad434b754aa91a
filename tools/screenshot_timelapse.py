"""Screenshots of the training time-lapse: the static page and the explorer's Training tab.

    .venv/bin/python tools/screenshot_timelapse.py RUN_DIR [--out docs] [--step N] [--head L.H]

RUN_DIR is a training checkpoint recorded with `train --snapshot-views TEXT --view-every N`. The
page is written as a user writes it (`glassformer explain RUN_DIR --over-training --html`) and
opened from disk; the explorer is a real server on a free port of 127.0.0.1 serving RUN_DIR, its
Training tab opened. Both in headless Chromium driven by selenium, as the browser tests drive it
(needs chromium, chromium-driver and selenium: `make test` installs them). Writes
OUT/timelapse-page.png and OUT/timelapse-explorer.png. --step shows that recorded step (default:
the last), --head a head (e.g. 1.3: layer 1, head 3; default: the best prefix-matching one).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars")  # fmt: skip


def browser(width: int, height: int, profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def until(driver, script: str, timeout: float = 60):
    end = time.time() + timeout
    while not (value := driver.execute_script(script)):
        if time.time() > end:
            raise SystemExit(f"timed out waiting for: {script}")
        time.sleep(0.05)
    return value


def choose(driver, root: str, step: int | None, head: str | None) -> None:
    """Move the time-lapse under `root` (a CSS selector) to a step and a head, as a user does."""
    if head:
        layer, h = head.split(".")
        driver.execute_script(
            f"const r = document.querySelector('{root}');"
            "const b = Array.from(r.querySelectorAll('.tl-thumb')).find(t => "
            "t.dataset.site.split('.')[1] === arguments[0] && t.dataset.head === arguments[1]);"
            "if (!b) throw new Error('no head ' + arguments[0] + '.' + arguments[1]); b.click();",
            layer,
            h,
        )
    if step is not None:
        driver.execute_script(
            f"const r = document.querySelector('{root}'), s = r.querySelector('.tl-slider');"
            "const k = JSON.parse(r.dataset.steps).indexOf(arguments[0]);"
            "if (k < 0) throw new Error('step ' + arguments[0] + ' was not recorded');"
            "s.value = String(k); s.dispatchEvent(new Event('input'));",
            step,
        )
    driver.execute_script("document.querySelectorAll('.gf-tip').forEach(t => { t.hidden = true; })")
    time.sleep(0.3)


def page_shot(run: Path, out: Path, step, head, work: Path) -> Path:
    from glassformer.cli import main

    page = work / "timelapse.html"
    if main(["explain", str(run), "--over-training", "--html", str(page), "--overwrite"]) != 0:
        raise SystemExit("explain --over-training failed (its message is above)")
    driver = browser(1280, 1900, work / "profile-page")
    try:
        driver.get(page.resolve().as_uri())
        until(driver, "return document.getElementById('gf-timelapse').dataset.ready === '1'")
        choose(driver, ".gf-tl", step, head)
        target = out / "timelapse-page.png"
        driver.save_screenshot(str(target))
    finally:
        driver.quit()
    return target


def explorer_shot(run: Path, out: Path, step, head, work: Path) -> Path:
    from glassformer.serve import Explorer, Registry, serving

    registry = Registry([run], walkthroughs=False)
    with serving(Explorer(registry)) as url:
        driver = browser(1280, 1500, work / "profile-explorer")
        try:
            driver.get(url)
            until(driver, "return document.getElementById('app').dataset.ready")
            until(driver, "return !document.querySelector('[data-tab=training]').hidden")
            driver.execute_script("document.querySelector('[data-tab=training]').click()")
            until(driver, "return document.getElementById('tab-training').dataset.ready")
            choose(driver, "#tab-training .gf-tl", step, head)
            driver.execute_script(
                "const t = document.querySelector('.tabs');"
                "window.scrollTo(0, t.getBoundingClientRect().top + window.scrollY - 8)"
            )
            time.sleep(0.2)
            target = out / "timelapse-explorer.png"
            driver.save_screenshot(str(target))
        finally:
            driver.quit()
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a training checkpoint with views.safetensors")
    p.add_argument("--out", type=Path, default=Path("docs"), help="folder of the PNGs (docs)")
    p.add_argument("--step", type=int, help="the recorded step to show (default: the last)")
    p.add_argument("--head", help="LAYER.HEAD to show, e.g. 1.3 (default: the best)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for shot in (page_shot, explorer_shot):
            print(f"wrote {shot(args.run, args.out, args.step, args.head, Path(tmp))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
