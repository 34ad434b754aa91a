"""Load on the live explorer: N concurrent clients for S seconds against `glassformer serve`.

The server runs as its own process (`glassformer serve MODEL --port 0`, as a user starts it);
the clients are threads here, each with its own keep-alive connection, each "typing": it sends
the run of a growing prefix of a sentence and then the attention map the page asks for next
(so some runs are new and some come from the server's cache, as when several people type).
Every answer must be a 200; the script prints requests, errors, throughput and the latency
percentiles of each kind of request.

    .venv/bin/python benchmarks/serve_load.py [--clients 50] [--seconds 30] [--model models/char-lm]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = [
    "ROMEO: But soft, what light through yonder window breaks?",
    "JULIET: O Romeo, Romeo! wherefore art thou Romeo?",
    "HAMLET: To be, or not to be, that is the question.",
    "KING LEAR: Blow, winds, and crack your cheeks! rage! blow!",
    "MACBETH: Is this a dagger which I see before me?",
]


def start_server(model: str, extra: list[str] = (), env: dict[str, str] | None = None):
    """`glassformer serve model` on a free port with `extra` arguments (and `env` added):
    (the process, host, port) once it listens."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    p = subprocess.Popen(
        [sys.executable, "-m", "glassformer.cli", "serve", model, "--port", "0",
         "--no-walkthroughs", *extra],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    line = p.stdout.readline()
    if not line.startswith("glassformer explorer: "):
        p.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    url = line.split()[2]
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    return p, host, int(port)


def client(host, port, model_id, end, seed, out, errors):
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(host, port, timeout=300)
    sentence = rng.choice(SENTENCES)
    n = rng.randint(4, 12)
    while time.time() < end:
        text = sentence[:n]
        for action, extra in (("run", {}), ("attention", {"name": "decoder.1.self_attn.head2.A"})):
            body = json.dumps({"model": model_id, "text": text, **extra})
            t0 = time.perf_counter()
            try:
                conn.request("POST", f"/api/{action}", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=300)
            out.append((action, time.perf_counter() - t0))
            if status != 200:
                errors.append((action, status))
        n = n + 1 if n < len(sentence) else rng.randint(4, 12)
        if n == 4:
            sentence = rng.choice(SENTENCES)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--model", default=str(ROOT / "models" / "char-lm"))
    args = ap.parse_args()
    server, host, port = start_server(args.model)
    try:
        models = json.loads(_get(host, port, "/api/models"))["models"]
        model_id = models[0]["id"]
        warm = json.dumps({"model": model_id, "text": "warm up"})
        _post(host, port, "/api/run", warm)
        out, errors = [], []
        end = time.time() + args.seconds
        threads = [
            threading.Thread(target=client, args=(host, port, model_id, end, k, out, errors))
            for k in range(args.clients)
        ]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
    finally:
        server.terminate()
        server.wait(30)
    print(f"{args.clients} clients for {args.seconds:g} s against {args.model} "
          f"({os.cpu_count()} CPUs): {len(out)} requests in {wall:.1f} s, "
          f"{len(out) / wall:.1f} requests/s, {len(errors)} errors")  # fmt: skip
    for action in ("run", "attention", "all"):
        t = np.array([s for a, s in out if action in (a, "all")]) * 1000
        p50, p95, p99 = np.percentile(t, [50, 95, 99])
        print(f"  {action:<10} n={len(t):6d}  p50 {p50:7.0f} ms  p95 {p95:7.0f} ms  "
              f"p99 {p99:7.0f} ms  max {t.max():7.0f} ms")  # fmt: skip
    if errors:
        print("  errors:", errors[:10])
        raise SystemExit(1)


def _get(host, port, path):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", path)
    return conn.getresponse().read()


def _post(host, port, path, body):
    conn = http.client.HTTPConnection(host, port, timeout=300)
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    return conn.getresponse().read()


if __name__ == "__main__":
    main()
