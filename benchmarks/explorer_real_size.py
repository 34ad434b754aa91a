"""Keystroke to attention map in the live explorer at real size: the float32 view against today's
float64 reference trace, side by side, in a real browser.

Two decoders with seeded random weights (`glassformer init`'s initialisation, written to a
temporary folder first): GPT-2-small's config (the `gpt2-small` preset: 12 layers, d 768,
12 heads, vocabulary 50,257; 124M parameters) and SmolLM2-135M's (hidden 576, intermediate
1,536, 30 layers, 9 query heads over 3 K/V heads, vocabulary 49,152, RoPE theta 100,000,
RMSNorm eps 1e-5, SwiGLU, tied embeddings; 135M; from HuggingFaceTB/SmolLM2-135M's
config.json). Both read text with the word vocabulary of Tiny Shakespeare (11,470 words): only
those rows of the embedding are ever looked up, and every matrix product, the output
projection over the whole vocabulary included, has the released models' sizes.

For each model two servers run (`glassformer serve --view reference`, every step in float64 as
before, and `--view float32`, the PyTorch engine's float32 view), each with `--threads N`;
headless Chromium types into each in turn, one key press at a time (a new text each: no cache
hit), `--repeats` presses a row, the rows alternated (reference, float32, reference, ...) so
that the machine's load falls on both alike; after each row the page's fidelity badge is waited
for (the reference checks it after every run, overlapping the next key press as in use; the view
once typing pauses), so that a row's leftover work does not fall on the next row. Each press is
timed by the page itself: from the key press to the attention map drawn (a key press runs at
once when no run is under way: no typing delay since c1fd6ae, 120 ms before). Also printed: the
model's run on the server and the bytes a run holds (the runs cached over the run count).

    .venv/bin/python benchmarks/explorer_real_size.py [--repeats 5] [--rounds 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import serve_latency  # noqa: E402
from serve_latency import FLAGS, measure, text_of, wait  # noqa: E402

from glassformer import tokenizer, weights  # noqa: E402
from glassformer.config import preset  # noqa: E402
from glassformer.model import Model  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
TOKENS = 32


def configs() -> dict:
    gpt2 = preset("gpt2-small")
    smol = dataclasses.replace(
        gpt2, vocab_size=49152, d_model=576, n_heads=9, head_dim=64, n_kv_heads=3, d_ff=1536,
        n_decoder_layers=30, max_len=2048, positions="rotary", rope_theta=1e5, bias=False,
        norm_kind="rmsnorm", ffn_kind="gated", activation="silu", ln_eps=1e-5,
    )  # fmt: skip
    return {"gpt2-small": gpt2, "smollm2-135m": smol}


def make_models(folder: Path, corpus: Path) -> dict[str, Path]:
    tok = tokenizer.WordTokenizer.train([corpus.read_text(encoding="utf-8")])
    out = {}
    for name, cfg in configs().items():
        path = folder / name
        Model(cfg, weights.init(cfg, seed=0), tok).save(path)
        out[name] = path
    return out


def serve(path: Path, view: str, threads: int):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", str(path), "--port", "0",
         "--no-walkthroughs", "--view", view, "--threads", str(threads)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    return server, server.stdout.readline().split()[2]


def settle(driver) -> None:
    """Wait for the fidelity badge of the last run (today's runs check it at once, the float32
    view's when typing pauses): its work would otherwise fall on the other server's row."""
    wait(driver, "const b = document.getElementById('badge');"
         "return /\\b(ok|bad)\\b/.test(b.className)", timeout=300)  # fmt: skip


def open_model(driver, url: str) -> None:
    driver.get(url)
    wait(driver, "return document.getElementById('app').dataset.ready", timeout=300)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="key presses a row")
    ap.add_argument("--rounds", type=int, default=2, help="rows per model and view")
    ap.add_argument("--threads", type=int, default=2, help="each server's --threads")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--poll", type=float, default=serve_latency.POLL,
                    help="seconds between two looks at the page: each is a WebDriver round "
                    "trip, work on the same cores as the server's")  # fmt: skip
    args = ap.parse_args()
    serve_latency.POLL = args.poll
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        options.add_argument(flag)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = make_models(Path(tmp), args.corpus)
        for name, path in models.items():
            tok = tokenizer.load(path / "tokenizer.json")
            servers = {v: serve(path, v, args.threads) for v in ("reference", "float32")}
            drivers = {}
            try:
                for view, (_, url) in servers.items():
                    drivers[view] = webdriver.Chrome(
                        options=options, service=Service(shutil.which("chromedriver"))
                    )
                    open_model(drivers[view], url)
                for _ in range(args.rounds):
                    for view, driver in drivers.items():
                        text = text_of(tok, TOKENS, 0)  # (a key press changes its last word)
                        tokens, times, server_ms = measure(driver, By, text, args.repeats)
                        mb = driver.find_element(By.ID, "status").text.split(" cached, ")[1]
                        row = results.setdefault((name, view), [tokens, [], [], mb])
                        row[1] += times
                        row[2] += server_ms
                        row[3] = mb.split(" MB")[0]
                        settle(driver)  # its badge done: the next row has the machine to itself
            finally:
                for driver in drivers.values():
                    driver.quit()
                for server, _ in servers.values():
                    server.terminate()
                    server.wait(30)
    print(f"keystroke -> attention map drawn, headless Chromium, {os.cpu_count()} CPUs, "
          f"--threads {args.threads}, {args.rounds} x {args.repeats} key presses "
          "(ms; from the key press, which runs at once)")  # fmt: skip
    print(f"  {'model':<13} {'view':<10} {'tokens':>6} {'median':>7} {'min':>6} {'max':>6}"
          f"  {'server run':>10}  {'cache MB':>8}")  # fmt: skip
    for (name, view), (tokens, times, server_ms, mb) in results.items():
        print(f"  {name:<13} {view:<10} {tokens:>6} {statistics.median(times):7.0f} "
              f"{min(times):6.0f} {max(times):6.0f}  {statistics.median(server_ms):10.0f}  "
              f"{mb:>8}")  # fmt: skip
    for name in models:
        ref, view = results[(name, "reference")][1], results[(name, "float32")][1]
        print(f"  {name}: reference / float32 view = "
              f"{statistics.median(ref) / statistics.median(view):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
