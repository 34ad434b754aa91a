"""`serve`: the live explorer in a browser (`glassformer.serve`). Here are the options, the check
that the folders are there, and the printing of the URL; the server itself prints nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from glassformer import interrupts
from glassformer.cli.common import dtype_arg, engine_dtype, integer, threads_arg
from glassformer.errors import GlassformerError, install_hint


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="explore models live in a browser (a local web app)",
        description="Start a local web app: type text and watch every step of the model, its "
        "attention, generation and interventions update. It lists the walkthroughs and the "
        "MODEL_DIRs (glassformer checkpoints or Hugging Face folders); only those can be "
        "opened. Works offline: every file it serves comes from the package.",
    )
    s.add_argument("models", nargs="*", metavar="MODEL_DIR", help="model folders to explore")
    s.add_argument(
        "--port",
        type=integer("--port", 0, 65536, says="in [0, 65535] (0: any free port)"),
        default=8000,
        help="port to listen on (default 8000; 0 picks a free one)",
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any loopback "
        "address or localhost is, 0.0.0.0 is every network)",
    )
    s.add_argument(
        "--cache-mb",
        type=integer("--cache-mb", 16, says="at least 16"),
        default=512,
        help="memory for recent runs' traces, in MB (default 512)",
    )
    # With more runnable threads than cores, multithreaded BLAS spins: a MiniLM trace of 128
    # tokens took 5.0 s with OpenBLAS's 2 threads and 0.57 s with 1 on the 2-core development VM
    # under load. `run` sets them before the server starts (`devices.use_threads`).
    threads_arg(
        s,
        default=1,
        says="BLAS and PyTorch threads of each computation (default 1: requests run side by "
        "side in their own threads instead, and a busy machine does not stall)",
    )
    dtype_arg(s, "float64")
    s.add_argument(
        "--view",
        choices=["auto", "reference", "float32"],
        default="auto",
        help="whose numbers a model's page shows: reference (NumPy float64, every step), "
        "float32 (the PyTorch engine in float32 traces what is drawn first, the other steps "
        "when read, the float64 reference on demand for the badge and the exports), or auto "
        "(default: float32 for models of 50M parameters or more, when PyTorch is installed)",
    )
    s.add_argument("--no-walkthroughs", action="store_true", help="list only the MODEL_DIRs given")
    s.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="DIR",
        help="a store of activations (record-corpus --out); the cards of the steps it holds, for "
        "the model it was recorded from, show a unit's top examples (repeatable)",
    )
    s.add_argument(
        "--sae",
        action="append",
        default=[],
        metavar="SAE",
        help="an SAE folder (glassformer sae train, or SAELens's): the card of the step it reads "
        "shows a feature's top examples in the --store and its logit effect (repeatable)",
    )
    s.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    try:
        from glassformer.serve import Explorer, Registry, is_loopback, make_server
    except ImportError as e:
        raise GlassformerError(
            f"serve needs the web server packages ({e.name} is missing): {install_hint('serve')}"
        ) from None
    for raw in args.models:
        if not Path(raw).is_dir():
            raise GlassformerError(f"{raw} is not a folder; give model folders (checkpoints)")
    if not args.models and args.no_walkthroughs:
        raise GlassformerError("nothing to serve: give MODEL_DIRs or leave out --no-walkthroughs")
    dtype = engine_dtype(args, "float64")
    registry = Registry(args.models, walkthroughs=not args.no_walkthroughs, dtype=dtype)
    from glassformer.corpus import saelens
    from glassformer.corpus.store import open_store

    stores = [open_store(d) for d in args.store]  # each refused in one line before serving
    saes = [(d, *saelens.read(d)) for d in args.sae]
    if saes and not stores:
        raise GlassformerError("--sae shows features' top examples in a store: add --store DIR")
    cache = args.cache_mb * 2**20
    explorer = Explorer(registry, cache_bytes=cache, view=args.view, stores=stores, saes=saes)
    server, sock, url = make_server(explorer, args.host, args.port)
    if not is_loopback(sock.getsockname()[0]):  # what was bound, however it was spelt
        print(
            f"glassformer: note: listening on {args.host}: other machines can reach it",
            file=sys.stderr,
        )
    print(f"glassformer explorer: {url}  ({len(registry.entries)} models; Ctrl-C stops it)")
    sys.stdout.flush()
    try:
        with interrupts.handed_over():  # uvicorn takes the signals while it serves
            server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
