"""What an exact attribution graph costs (issue 40: "a graph of the shipped translator on a
10-token sentence in seconds"): on models/en-es, a ~10-token source sentence, the graph of the
first word after "Hola"-like prefix (position 2 of the greedy translation) beside one plain traced
forward pass of the reference engine, measured alternately in one process; medians of --repeats.

    .venv/bin/python benchmarks/circuit_cost.py [--repeats 5] [--sentence TEXT]

Contenders: `traced forward` (R.forward under `tracing`, what the graph reads), `graph` (the
builder alone on that trace, `inspect.circuit.graph`), `graph, 8 neurons` (each FFN node split
into its 8 units of largest effect), `Model.circuit` (the whole verb: greedy translation, traced
pass, graph, pruning, tokens named).
"""

import argparse
from pathlib import Path

import numpy as np
from _harness import alternate, report

import glassformer
from glassformer import reference as R
from glassformer.inspect.circuit import graph
from glassformer.trace import tracing

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sentence", default="The old man reads a long book in the quiet room.")
    args = ap.parse_args()
    m = glassformer.load(ROOT / "models" / "en-es")
    src = m.encode(args.sentence)
    out = m.translate(args.sentence)
    ids = m.runtime.bos() + m.encode(out)  # the decoder's input: its own translation
    print(f"source: {len(src)} tokens ({args.sentence!r}); decoder: {len(ids)} tokens ({out!r})")

    def traced():
        with tracing() as trace:
            logits = R.forward(m.params, m.cfg, ids, src_ids=src)
        return trace, logits

    trace, logits = traced()
    token = int(np.argmax(logits[2]))

    times = alternate(
        {
            "traced forward": traced,
            "graph": lambda: graph(trace, m.params, m.cfg, token, position=2),
            "graph, 8 neurons": lambda: graph(trace, m.params, m.cfg, token, 2, neurons=8),
            "Model.circuit": lambda: m.circuit(args.sentence, position=2),
        },
        repeats=args.repeats,
    )
    G = graph(trace, m.params, m.cfg, token, position=2)
    print(f"graph: {len(G.names)} nodes, completeness error {G.error:.1e}")
    report(
        "the graph beside one traced forward pass (en-es)",
        times,
        "graph",
        "traced forward",
        unit_name="s",
    )
    report(
        "the whole verb beside one traced forward pass",
        times,
        "Model.circuit",
        "traced forward",
        unit_name="s",
    )


if __name__ == "__main__":
    main()
