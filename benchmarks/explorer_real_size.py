"""Keystroke to attention map in the live explorer at real size: the float32 view against today's
float64 reference trace, side by side, in a real browser.

Four models with seeded random weights (`glassformer init`'s initialisation, written to a
temporary folder first), each read with the word vocabulary of Tiny Shakespeare (11,470 words):
only those rows of an embedding are ever looked up, and every matrix product, the output
projection over the whole vocabulary included, has the released models' sizes.

- gpt2-small: GPT-2 small's config (the `gpt2-small` preset: 12 layers, d 768, 12 heads,
  vocabulary 50,257; 124M parameters);
- smollm2-135m: SmolLM2-135M's (hidden 576, intermediate 1,536, 30 layers, 9 query heads over 3
  K/V heads, vocabulary 49,152, RoPE theta 100,000, RMSNorm eps 1e-5, SwiGLU, tied embeddings;
  135M; from HuggingFaceTB/SmolLM2-135M's config.json);
- marian-en-es: Helsinki-NLP/opus-mt-en-es's config as glassformer reads a Marian folder
  (`formats.hf.marian_config`: 6 + 6 post-LN layers, d 512, 8 heads, FFN 2,048, SiLU, √d-scaled
  embeddings, half-sin | half-cos positions, vocabulary 65,001, logits bias), with one embedding
  for source, target and output as Marian's `shared` (77M), and max_len 40 instead of 512: random
  weights never say </s>, so the greedy translation of the 32-token source runs to max_len, and
  40 tokens is about a real translation's length;
- bert-base: BERT-base-uncased's config (`formats.hf.bert_config`: 12 post-LN layers, d 768, 12
  heads, FFN 3,072, GELU, vocabulary 30,522, 2 token types; 109M), the sentence embedding a BERT
  folder shows.

For each model two servers run (`glassformer serve --view reference`, every step in float64 as
before, and `--view float32`, the PyTorch engine's float32 view), each with `--threads N`;
headless Chromium types into each in turn, one key press at a time (a new text each: no cache
hit; each row's 32-token text ends with a word of its own, the letters typed after it),
`--repeats` presses a row, the rows alternated (reference, float32, reference, ...) so that the
machine's load falls on both alike; after each row the page's fidelity badge is waited for (the
reference checks it after every run, overlapping the next key press as in use; the view once
typing pauses), so that a row's leftover work does not fall on the next row. Each press is timed
by the page itself: from the key press to the attention map drawn (a key press runs at once when
no run is under way). Also printed, medians over the presses: where that time went, from the
browser's resource timing of the page's two requests (the run's and the map's: the server until
its first byte, for the run the model's run in it as the page's status line tells it, then the
transfer) and the page's own work, the rest (reading the answers, tokens, pickers, drawing); the
bytes a run holds (the runs cached over the run count); the load average (1 min) before and
after each model's rows; the CPU's vector extensions (`lscpu`).

    .venv/bin/python benchmarks/explorer_real_size.py [--repeats 5] [--rounds 2] [--threads 2]
        [--models gpt2-small,marian-en-es,bert-base]
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
from glassformer.formats.hf import bert_config, marian_config  # noqa: E402
from glassformer.model import Model  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
TOKENS = 32
# The last word of each round's text: a round types the same letters after it as the others, so
# without it a second round typed the first one's texts again, and the server had them cached.
WORDS = ("king", "queen", "lord", "lady", "night", "love", "death", "heaven")
MARIAN = dict(vocab_size=65001, d_model=512, encoder_layers=6, decoder_layers=6,
              encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
              decoder_ffn_dim=2048, max_position_embeddings=512, activation_function="swish",
              scale_embedding=True)  # fmt: skip
BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=512, hidden_act="gelu",
            type_vocab_size=2, layer_norm_eps=1e-12)  # fmt: skip
# The page's requests of one key press, by their path; the browser keeps each one's timing.
REQUESTS = """return performance.getEntriesByType('resource')
  .filter(e => /\\/api\\/(run|attention)$/.test(e.name))
  .map(e => [e.name.split('/').pop(), e.startTime, e.requestStart, e.responseStart,
              e.responseEnd])"""


def configs() -> dict:
    gpt2 = preset("gpt2-small")
    smol = dataclasses.replace(
        gpt2, vocab_size=49152, d_model=576, n_heads=9, head_dim=64, n_kv_heads=3, d_ff=1536,
        n_decoder_layers=30, max_len=2048, positions="rotary", rope_theta=1e5, bias=False,
        norm_kind="rmsnorm", ffn_kind="gated", activation="silu", ln_eps=1e-5,
    )  # fmt: skip
    marian = dataclasses.replace(marian_config(MARIAN), share_embeddings=True, max_len=40)
    return {"gpt2-small": gpt2, "smollm2-135m": smol, "marian-en-es": marian,
            "bert-base": bert_config(BERT)}  # fmt: skip


def make_models(folder: Path, corpus: Path, names: list[str]) -> dict[str, Path]:
    tok = tokenizer.WordTokenizer.train([corpus.read_text(encoding="utf-8")])
    out = {}
    for name, cfg in configs().items():
        if name in names:
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
    driver.execute_script("performance.setResourceTimingBufferSize(100000)")


def fresh(driver) -> None:
    """Clear the page's last latency, so that `measure` waits for the run of the text it sets
    (the one of the last row would otherwise let it press a key while that run is under way)."""
    driver.execute_script("document.getElementById('latency').textContent = ''")


def parts(driver, times: list[float]) -> list[tuple[float, ...]]:
    """Per key press (the last len(times)): the run request's server time (to its first byte)
    and transfer, the map request's whole time, its server time and transfer, and the page's
    own work (the rest)."""
    entries = driver.execute_script(REQUESTS)
    runs = [e for e in entries if e[0] == "run"][-len(times) :]
    out = []
    for total, (_, start, ask, first, end) in zip(times, runs, strict=True):
        _, m_start, m_ask, m_first, m_end = next(
            e for e in entries if e[0] == "attention" and e[1] >= end
        )
        m = m_end - m_start
        out.append((first - ask, end - first, m, m_first - m_ask, m_end - m_first,
                    total - (end - start) - m))  # fmt: skip
    return out


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def machine() -> str:
    """The CPU and its widest vector extensions, as `lscpu` says."""
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "lscpu unavailable"
    field = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    flags = field.get("Flags", "").split()
    wide = [f for f in ("avx512f", "amx_bf16", "avx2") if f in flags]
    return f"{field.get('Model name', '?').strip()}, {', '.join(wide) or 'no AVX2'}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="key presses a row")
    ap.add_argument("--rounds", type=int, default=2, help="rows per model and view")
    ap.add_argument("--threads", type=int, default=2, help="each server's --threads")
    ap.add_argument("--models", default=",".join(configs()), help="which, comma-separated")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--poll", type=float, default=serve_latency.POLL,
                    help="seconds between two looks at the page: each is a WebDriver round "
                    "trip, work on the same cores as the server's")  # fmt: skip
    args = ap.parse_args()
    serve_latency.POLL = args.poll
    if not 1 <= args.rounds <= len(WORDS):
        raise SystemExit(f"--rounds: 1 to {len(WORDS)}")
    names = args.models.split(",")
    if unknown := set(names) - set(configs()):
        raise SystemExit(f"--models: no {', '.join(sorted(unknown))}; from {', '.join(configs())}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        options.add_argument(flag)
    results: dict = {}
    loads: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = make_models(Path(tmp), args.corpus, names)
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
                loads[name] = [load()]
                for r in range(args.rounds):
                    for view, driver in drivers.items():
                        text = f"{text_of(tok, TOKENS - 1, 0)} {WORDS[r]}"  # (keys change it)
                        fresh(driver)
                        tokens, times, server_ms = measure(driver, By, text, args.repeats)
                        mb = driver.find_element(By.ID, "status").text.split(" cached, ")[1]
                        row = results.setdefault((name, view), [tokens, [], [], mb, []])
                        row[1] += times
                        row[2] += server_ms
                        row[3] = mb.split(" MB")[0]
                        row[4] += parts(driver, times)
                        settle(driver)  # its badge done: the next row has the machine to itself
                loads[name].append(load())
            finally:
                for driver in drivers.values():
                    driver.quit()
                for server, _ in servers.values():
                    server.terminate()
                    server.wait(30)
    print(f"keystroke -> attention map drawn, headless Chromium, {os.cpu_count()} CPUs "
          f"({machine()}), --threads {args.threads}, {args.rounds} x {args.repeats} key presses "
          "(ms, medians; from the key press, which runs at once)")  # fmt: skip
    print(f"  {'model':<13} {'view':<10} {'tokens':>6} {'median':>7} {'min':>6} {'max':>6}"
          f"  {'run: server':>11} {'model':>6} {'transfer':>8}  {'map':>4} {'server':>6}"
          f" {'transfer':>8}  {'page':>4}  {'cache MB':>8}  load")  # fmt: skip
    for (name, view), (tokens, times, server_ms, mb, split) in results.items():
        med = [statistics.median(x) for x in zip(*split, strict=True)]
        print(f"  {name:<13} {view:<10} {tokens:>6} {statistics.median(times):7.0f} "
              f"{min(times):6.0f} {max(times):6.0f}  {med[0]:11.0f} "
              f"{statistics.median(server_ms):6.0f} {med[1]:8.0f}  {med[2]:4.0f} {med[3]:6.0f}"
              f" {med[4]:8.0f}  {med[5]:4.0f}  {mb:>8}  {' -> '.join(loads[name])}")  # fmt: skip
    for name in models:
        ref, view = results[(name, "reference")][1], results[(name, "float32")][1]
        print(f"  {name}: reference / float32 view = "
              f"{statistics.median(ref) / statistics.median(view):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
