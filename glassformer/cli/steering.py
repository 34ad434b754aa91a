"""The steering options of `generate` and `translate` (--steer "A|B" or --steer-vector FILE.npy,
--layer, --scale, --from-step) and their report (--steer-report F.html, --steer-json F): argparse
-> `Model.steer` / `Model.steered` -> the report files. The command runs its usual work inside
the steering (`with steering:`), so what it prints is the steered output.

Deliberately not here: what steering is (`inspect/steering.py`), the report's HTML
(`explain/html_steering.py`).
"""

from __future__ import annotations

import io

import numpy as np

from glassformer import files
from glassformer.cli.common import (
    apart,
    integer,
    note,
    option_type,
    output_file,
    write_json,
    write_text,
)
from glassformer.errors import GlassformerError

VECTOR_LIMIT = 64 * 2**20  # a (d_model,) vector is a few kB; a file this large is not one


def steering_args(p) -> None:
    g = p.add_argument_group(
        "steering",
        "Add scale·v to the decoder's residual stream entering block --layer, v the mean "
        "difference of a contrast pair's streams there (the reference engine's, float64) or a "
        "given vector; the output printed is the steered one.",
    )
    g.add_argument(
        "--steer",
        metavar="'TEXT_A|TEXT_B'",
        help="the contrast pair: v = mean stream of TEXT_A - mean stream of TEXT_B (an "
        "encoder-decoder reads each as decoder text after BOS, itself the source)",
    )
    g.add_argument(
        "--steer-vector",
        metavar="FILE.npy",
        help="a (d_model,) float vector saved with numpy.save, instead of --steer",
    )
    g.add_argument(
        "--steer-feature",
        metavar="N",
        type=integer("--steer-feature", 0),
        help="v = feature N's decoder row of the SAE --sae (an SAE of a block's input or "
        "output stream; --layer is then its block), instead of --steer",
    )
    g.add_argument("--sae", metavar="SAE", help="the SAE folder --steer-feature reads")
    g.add_argument(
        "--layer",
        type=option_type("layer"),
        help="the block whose entering stream is steered, from 0 (n_layers: after the last)",
    )
    g.add_argument(
        "--scale", type=option_type("scale"), help="the multiple of v added (default 1.0)"
    )
    g.add_argument(
        "--from-step",
        type=option_type("from_step"),
        metavar="T",
        help="steer only from new token T on (positions >= prompt length - 1 + T); default: "
        "every position, the prompt's included",
    )
    g.add_argument(
        "--steer-report",
        metavar="F.html",
        help="write a page: the output without and with the steering, and per new token the "
        "top tokens before and after, the token chosen",
    )
    g.add_argument("--steer-json", metavar="FILE", help="the same report as JSON ('-': stdout)")


def check_steering(args, inputs: dict[str, str | None]) -> None:
    """Before the model is read: the steering options fit together, the report files may be
    written (not onto an input)."""
    ways = {"--steer": args.steer, "--steer-vector": args.steer_vector}
    ways["--steer-feature"] = args.steer_feature
    named = [flag for flag, v in ways.items() if v is not None]
    given = bool(named)
    if len(named) > 1:
        raise GlassformerError(
            "give one of --steer 'TEXT_A|TEXT_B', --steer-vector FILE.npy and --steer-feature N, "
            f"not both {named[0]} and {named[1]}"
        )
    if (args.steer_feature is None) != (args.sae is None):
        raise GlassformerError("--steer-feature N and --sae SAE go together: give both")
    if not given:
        extra = [
            f
            for f, v in (
                ("--layer", args.layer),
                ("--scale", args.scale),
                ("--from-step", args.from_step),
                ("--steer-report", args.steer_report),
                ("--steer-json", args.steer_json),
            )
            if v is not None
        ]
        if extra:
            raise GlassformerError(
                f"{extra[0]} says how to steer; add --steer 'TEXT_A|TEXT_B' or --steer-vector "
                "FILE.npy"
            )
        return
    if args.layer is None and args.steer_feature is None:
        raise GlassformerError("--steer needs --layer L: the block whose entering stream moves")
    if args.layer is not None and args.steer_feature is not None:
        raise GlassformerError("--steer-feature steers at its SAE's step; leave --layer out")
    for flag, path in (("--steer-report", args.steer_report), ("--steer-json", args.steer_json)):
        if path == "-":  # stdout holds the output
            raise GlassformerError(f"{flag} writes a file; give a file name, not '-'")
    apart({"--steer-report": args.steer_report, "--steer-json": args.steer_json}, inputs)
    for path in (args.steer_report, args.steer_json):
        output_file(path, args.overwrite)


def read_vector(path: str) -> np.ndarray:
    """--steer-vector's array: a .npy file read without pickle, or one line saying what is
    wrong (its shape and numbers are checked against the model by `Model.steer`)."""
    data = files.read_limited(path, VECTOR_LIMIT, "a steering vector")
    if not data.startswith(b"\x93NUMPY"):  # the .npy magic
        raise GlassformerError(
            f"--steer-vector {path} is not a NumPy .npy file; save a float vector with numpy.save"
        )
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        why = "it holds Python objects (pickled)" if "pickle" in str(e) else str(e)
        raise GlassformerError(
            f"--steer-vector {path}: cannot read it as a NumPy .npy array ({why}); save a "
            "float vector with numpy.save"
        ) from None
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file, in one line
        raise GlassformerError(
            f"--steer-vector {path} is not a NumPy .npy file ({type(e).__name__}); save a "
            "float vector with numpy.save"
        ) from None


def steering(args, m):
    """The `Steering` the options ask for, or None."""
    if args.steer is None and args.steer_vector is None and args.steer_feature is None:
        return None
    scale = 1.0 if args.scale is None else args.scale
    how = dict(layer=args.layer, scale=scale, from_step=args.from_step)
    if args.steer_feature is not None:
        from glassformer.corpus.saelens import feature_direction

        vector, how["layer"] = feature_direction(args.sae, args.steer_feature, m.cfg)
        return m.steer(vector=vector, **how)
    if args.steer_vector is not None:
        return m.steer(vector=read_vector(args.steer_vector), **how)
    return m.steer(args.steer, **how)


def write_report(args, m, texts: list[str], steer, decoding) -> None:
    """--steer-report / --steer-json: each text decoded without and with the steering."""
    if args.steer_report is None and args.steer_json is None:
        return
    from glassformer.explain import html_steering as H
    from glassformer.explain.html_touch import probe_page

    reports = [m.steered(t, steer, decoding=decoding).to_dict() for t in texts if t.strip()]
    data = {"steering": steer.to_dict(), "reports": reports}
    page = None
    if args.steer_report is not None:
        sections = [
            (f"t{n}", f"Text {n + 1}", H.steering_section(r)) for n, r in enumerate(reports)
        ]
        meta = H.steering_meta(data["steering"])
        page = probe_page("glassformer: steering", meta, sections)
    what = f"the steering report of {len(reports)} text(s)"
    if args.steer_json is not None:
        write_json(args.steer_json, data)
        note(f"wrote {what} to {args.steer_json}")
    if page is not None:
        write_text(args.steer_report, page)
        note(f"wrote {what} to {args.steer_report}")
