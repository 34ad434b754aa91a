"""Running a model for the explorer: text in, one traced forward pass (a `Run`) out; and the
same pass under an intervention, side by side with the clean one.

A run is the reference engine's trace (float64, every step, LayerNorm internals included) of:
a decoder on the typed text (or on given ids: a step of a generation); an encoder-decoder on the
typed source and a decoder input (given, or the greedy translation, decoded with the PyTorch
engine's KV cache when torch is installed, as `explain` decodes); an encoder on the text (its
sentence embedding, or its classifier); a walkthrough's own recorded trace. Interventions use
`glassformer.inspect.interventions` on the same engine, so the numbers beside the trace are its
numbers. A model's run whose output is NaN or infinite, or a decoding step that is, is refused with
a `NonFiniteError` naming the step where it starts (`numerics`), never shown as an answer.

A model of real size (see `VIEW_PARAMS`; or any model with `serve --view float32`) is seen
through a view instead: the same pass (`Runtime.torch_pass`) on the PyTorch engine in float32
records what the page draws first (every attention map: a translator's encoder self-, decoder
self- and cross-attention; the masks; the logits, a classifier's class logits, an encoder's
sentence embedding) and every other step by name and shape only; a step's values are made when
something reads one (a step card, the neuron view, a tile): the same engine again, tracing
everything, once per run. A translator's decoder input is its greedy translation decoded as the
reference's run decodes it (the same engine and precision: the same words). The float64
reference runs on demand (`reference`): for the fidelity badge, which then compares what is
shown with it, for the exports and for patching. `Run.engine` says which engine's numbers a run
shows; what the page reads of a run (tokens, output, maps, steps) is the same either way.

Deliberately not here: HTTP and JSON shapes (`app.py`, `api.py`), decoding strategies
(`generation.py`), the engines' agreement (`fidelity.py`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from glassformer import decoding, numerics
from glassformer.decoding import Decoding
from glassformer.errors import GlassformerError
from glassformer.explain.select import KVGroups
from glassformer.explain.words import sharing
from glassformer.inspect import interventions as I
from glassformer.inspect.touch import check_finite, class_change
from glassformer.model import Model
from glassformer.serve.sessions import Fixed
from glassformer.tokenizer.display import display_token
from glassformer.trace import Trace, tracing

TOP = 10  # next tokens listed beside a run
VIEW_PARAMS = 50_000_000  # `--view auto`: models of this many parameters get the float32 view
VIEWS = ("auto", "reference", "float32")
REFERENCE = "NumPy float64 (the reference)"
FLOAT32_VIEW = "PyTorch float32 (a view; the float64 reference on demand)"


@dataclass
class Run:
    """One traced forward pass and what the page shows beside it."""

    model_id: str
    arch: str
    trace: Trace
    src: list[int] | None  # encoder ids (encoder-decoder, encoder)
    ids: list[int]  # decoder ids (decoder, encoder-decoder), else the encoder ids
    unknown: list[str] = field(default_factory=list)
    logits: np.ndarray | None = None  # (T, V) of a decoder, (n_classes,) of a classifier
    generation: object = None  # the greedy translation decoded for an encoder-decoder
    elapsed_ms: float = 0.0
    nbytes: int = 0
    extra: dict = field(default_factory=dict)  # per-run results made once (fidelity)
    engine: str = REFERENCE  # whose numbers the trace holds
    reference: Trace | None = None  # the float64 reference's trace, once made (`reference()`)
    text: str | None = None  # the text it read (what `reference()` reads again)


def piece(tok, i: int) -> str:
    return tok.vocab[i] if 0 <= i < len(tok.vocab) else f"#{i}"


def n_params(m: Model) -> int:
    return m.runtime.cached("n_params", lambda: sum(int(np.size(v)) for v in m.params.values()))


def view_of(m: Model | Fixed, view: str) -> str:
    """'float32' when this model's runs are seen through the float32 view, else 'reference':
    a model (not a walkthrough), PyTorch installed, and `view` float32, or auto and a model of
    VIEW_PARAMS."""
    if view == "reference" or isinstance(m, Fixed):
        return "reference"
    if view == "auto" and n_params(m) < VIEW_PARAMS:
        return "reference"
    return "float32" if m.runtime.torch("float32") is not None else "reference"


ON_SCREEN = (".A", ".mask")  # the ends of the step names a view keeps
OUTPUTS = ("logits", "embedding")  # and the output the page shows beside the maps


def on_screen(name: str) -> bool:
    return name in OUTPUTS or name.endswith(ON_SCREEN)


def make_run(
    model_id: str, m: Model | Fixed, text: str, ids=None, target=None, view: str = "reference"
) -> Run:
    """The run of one input: see the module docstring. ids: decoder ids instead of the text's;
    target: an encoder-decoder's decoder ids (from BOS) instead of its greedy translation;
    view: "float32" for the float32 view (`view_of`), else the reference."""
    start = time.perf_counter()
    if isinstance(m, Fixed):
        run = Run(model_id, "walkthrough", m.trace, None, [])
    elif view == "float32":
        run = _view_run(model_id, m, text, ids, target)
    else:
        translating = m.cfg.arch == "encoder-decoder"  # a decoder's run generates nothing
        greedy = Decoding(max_new_tokens=m.cfg.max_len - 1) if translating else None
        r = m.run(text, ids=ids, target=target, decoding=greedy, quiet=True)
        check_finite(m.runtime, r)
        run = Run(model_id, m.cfg.arch, r.trace, r.src, r.ids, r.unknown, r.logits, r.generation)
        run.text = text
    run.elapsed_ms = (time.perf_counter() - start) * 1000
    run.nbytes = run.trace.nbytes  # what it holds: derived steps are recomputed, not kept
    return run


def _view_run(model_id: str, m: Model, text: str, ids, target) -> Run:
    """The float32 view of the run `Model.run` makes: see the module docstring."""
    cfg, rt = m.cfg, m.runtime
    unknown: list[str] = []
    src = generation = None
    if cfg.arch == "decoder":
        ids = list(rt.encode(text, unknown=unknown) if ids is None else ids)
        labels, inp = {"decoder": rt.pieces(ids)}, ids
    elif cfg.arch == "encoder-decoder":
        src = rt.encode(text, unknown=unknown)
        if target is None:  # as the reference's run decodes it (`touch.traced_run`)
            greedy = Decoding(max_new_tokens=cfg.max_len - 1)
            generation = rt.decoded(rt.bos(), src, greedy, quiet=True)
            target = generation.ids
        ids = list(target)
        labels, inp = {"encoder": rt.pieces(src), "decoder": rt.pieces(ids)}, (src, ids)
    else:
        src = ids = rt.encode(text, unknown=unknown)
        labels, inp = {"encoder": rt.pieces(ids)}, ids
    forward = rt.torch_pass("float32")

    def everything() -> Trace:
        with np.errstate(all="ignore"), tracing(labels, np.float32) as full:
            forward(inp)
        return full

    with np.errstate(all="ignore"), tracing(labels, np.float32, on_screen, everything) as trace:
        out = forward(inp)  # logits (T, V) or (n_classes,), or the embedding (C,)
    trace.model, trace.text = rt.name, text  # what its repr says made it
    embedding = cfg.arch == "encoder" and not cfg.n_classes
    what = "the values of the embedding" if embedding else "the model's outputs"
    numerics.check(out[None], lambda _: (what, ids, src), m.params, cfg, rt.fix)
    logits = None if embedding else out
    run = Run(model_id, cfg.arch, trace, src, ids, unknown, logits, generation, text=text)
    run.engine = FLOAT32_VIEW
    return run


def reference(m: Model | Fixed, run: Run) -> Trace:
    """The run's trace in the float64 reference: its own, or (a float32 view) made once now from
    the same input (a translator's decoder ids as given, not decoded again)."""
    if run.engine == REFERENCE:
        return run.trace
    if run.reference is None:
        if run.arch == "decoder":
            r = m.run(ids=run.ids, quiet=True)
        else:
            target = run.ids if run.arch == "encoder-decoder" else None
            r = m.run(run.text, target=target, quiet=True)
        r.trace.labels = dict(run.trace.labels)
        run.reference = r.trace
    return run.reference


def tokens(m: Model | Fixed, run: Run) -> dict[str, list[dict]]:
    """Each stack's tokens: id, raw piece and the piece as a person reads it."""
    if isinstance(m, Fixed):
        return {
            k: [{"id": None, "piece": w, "shown": display_token(str(w))} for w in v]
            for k, v in run.trace.labels.items()
            if k in ("encoder", "decoder")
        }

    def chips(ids):
        return [
            {
                "id": i,
                "piece": piece(m.tokenizer, i),
                "shown": display_token(piece(m.tokenizer, i), m.runtime.token_kind),
            }
            for i in ids
        ]

    if m.cfg.arch == "encoder-decoder":
        return {"encoder": chips(run.src), "decoder": chips(run.ids)}
    return {"decoder" if m.cfg.arch == "decoder" else "encoder": chips(run.ids)}


def top_tokens(m: Model, logits_row: np.ndarray, n: int = TOP, also=()) -> list[dict]:
    """The n most likely next tokens of one row of logits (and the ids in `also`)."""
    z = np.asarray(logits_row, dtype=np.float64)
    probs = decoding.softmax(z)
    order = [int(i) for i in np.argsort(-probs, kind="stable")[:n]]
    order += [int(i) for i in also if int(i) not in order]
    return [
        {
            "id": i,
            "token": display_token(piece(m.tokenizer, i), m.runtime.token_kind),
            "p": float(probs[i]),
            "logit": float(z[i]),
        }
        for i in order
    ]


def output(m: Model | Fixed, run: Run) -> dict:
    """What the model says for this input: next tokens, a translation, an embedding, a class."""
    if isinstance(m, Fixed):
        return {"kind": "walkthrough", "text": m.title}
    cfg, tok = m.cfg, m.tokenizer
    if cfg.arch == "decoder":
        return {"kind": "next", "top": top_tokens(m, run.logits[-1])}
    if cfg.arch == "encoder-decoder":
        out = {"kind": "translation", "text": tok.decode(run.ids[1:])}
        out["greedy"] = run.generation is not None  # else a decoder input given (a prefix)
        if run.generation is not None:
            out["stopped_at_eos"] = bool(run.generation.stopped_at_eos)
        out["top"] = top_tokens(m, run.logits[0])  # the first word, after BOS
        return out
    if cfg.n_classes:  # as `classify` tells it: the class name, its probability, all of them
        probs = decoding.softmax(run.logits)
        return {
            "kind": "class",
            **m.runtime.class_result(probs),
            "probs": [float(x) for x in probs],
        }
    e = run.trace["embedding"]
    return {"kind": "embedding", "dims": int(e.size), "first": [float(x) for x in e[:8]]}


# -- interventions --------------------------------------------------------------------------------


def _input(run: Run):
    return (run.src, run.ids) if run.arch == "encoder-decoder" else run.ids


def intervention_fns(m: Model, run: Run, heads: list[dict], how: str, source: Run | None):
    """{name: fn} of the chosen heads: zero- or mean-ablated, or patched from `source`'s run."""
    fns: dict = {}
    for h in heads:
        name = I.head_name(h["layer"], h["head"], h["stack"], h["kind"])
        if name not in run.trace:
            raise GlassformerError(f"this model has no head {name} (layers and heads from 0)")
        if how == "patch":  # (shapes: a view's deferred step is not made to be measured)
            if source.trace.step(name).shape != run.trace.step(name).shape:
                n_src, n_run = source.trace.step(name).shape[0], run.trace.step(name).shape[0]
                raise GlassformerError(
                    f"patching replaces {name} position by position: the second prompt gives "
                    f"{n_src} positions there, this one {n_run}; give two prompts with the "
                    "same number of tokens"
                )
            fns |= I.patch(reference(m, source), name)  # the float64 values
        else:
            fns |= I.ablate_head(h["layer"], h["head"], how, h["stack"], h["kind"])
    return fns


def intervene(
    m: Model, run: Run, heads: list[dict], how: str, source: Run | None = None, position=None
) -> dict:
    """The clean run and the run under the intervention, side by side (and the source run's
    own outputs when patching): for a model that predicts tokens, the next tokens with their
    logits at `position` (None: a decoder's last position, an encoder-decoder's first position
    whose prediction the intervention changes, else its first), the positions whose prediction
    changed, and for an ablation the greedy continuation or translation under it; for a
    classifier, each class's probability before and after; for an encoder, the cosine of the
    pooled outputs."""
    forward = m.runtime.reference_run()
    fns = intervention_fns(m, run, heads, how, source)
    with np.errstate(all="ignore"):
        clean = forward(_input(run))
        changed = I.run_with(forward, _input(run), fns)
    delta = np.abs(np.asarray(changed) - np.asarray(clean))
    out: dict = {"how": how, "heads": heads, "max_abs_change": float(np.nanmax(delta))}
    notes = shared_notes(run, heads)
    if notes:
        out["notes"] = notes
    if m.cfg.arch == "encoder":
        return out | _encoder_change(m, clean, changed)
    moved = [int(t) for t in np.flatnonzero(clean.argmax(-1) != changed.argmax(-1))]
    pos = _position(m, run, position, moved)
    both = top_tokens(m, clean[pos]) + top_tokens(m, changed[pos])
    ids = list(dict.fromkeys(t["id"] for t in both))
    reads = display_token(piece(m.tokenizer, run.ids[pos]), m.runtime.token_kind)
    out |= {
        "kind": "tokens",
        "position": pos,
        "reads": reads,
        "changed_positions": moved,
        "clean": top_tokens(m, clean[pos], 0, ids),
        "changed": top_tokens(m, changed[pos], 0, ids),
    }
    if source is not None:
        out["source"] = top_tokens(m, forward(_input(source))[pos], 0, ids)
    if how != "patch":
        out["continuation"] = _continuations(m, run, fns)
    return out


def shared_notes(run: Run, heads: list[dict]) -> list[str]:
    """What changing a query head leaves alone when it shares its K and V (grouped-query
    attention): one sentence per such head."""
    groups, out = KVGroups(run.trace.names()), []
    for h in heads:
        name = I.head_name(h["layer"], h["head"], h["stack"], h["kind"])
        said = sharing(name, groups)
        if said:
            where = f"{h['stack']}.{h['layer']}.{h['kind']}"
            out.append(
                f"{where}: {said} Only head {h['head']}'s own output C changes; the K/V head it "
                "reads, and the other heads that read it, are as they were."
            )
    return out


def _encoder_change(m: Model, clean, changed) -> dict:
    """A classifier's class probabilities before and after (by class name); another encoder's
    cosine between its pooled outputs."""
    if m.cfg.n_classes:
        rows = class_change(m.class_names, clean, changed)  # as `explain --ablate` tells them
        top = [max(rows, key=lambda r: r[k])["label"] for k in ("before", "after")]
        return {"kind": "class", "classes": rows, "clean_label": top[0], "changed_label": top[1]}
    a, b = clean.mean(axis=0), changed.mean(axis=0)
    cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))
    return {"kind": "embedding", "cosine": cos}


def _position(m: Model, run: Run, position, moved: list[int]) -> int:
    """The position whose prediction is told: the one asked for (checked), else the default."""
    n = len(run.ids)
    if position is None:
        if m.cfg.arch == "decoder":
            return n - 1
        return moved[0] if moved else 0
    if not 0 <= position < n:
        raise GlassformerError(
            f"position {position}: the decoder reads {n} tokens, so a position is in 0..{n - 1}"
        )
    return position


CONTINUE = 20  # tokens a decoder continues for, with and without an ablation


def _continuations(m: Model, run: Run, fns: dict) -> dict:
    """Greedy text with and without the ablation: a decoder continues its prompt, an
    encoder-decoder translates anew. Full forward passes (the PyTorch engine when installed)."""

    model = m.runtime.torch(m.runtime.dtype or "float64")
    forward = I.torch_run(model) if model is not None else I.reference_run(m.params, m.cfg)
    src = run.src if m.cfg.arch == "encoder-decoder" else None

    def step_under(fns_):
        def step(ids):
            inp = (src, ids) if src is not None else ids
            return I.run_with(forward, inp, fns_)[-1] if fns_ else forward(inp)[-1]

        return step

    if src is not None:
        prompt, limit = m.runtime.bos(), m.cfg.max_len - 1
    else:
        prompt, limit = list(run.ids), min(CONTINUE, m.cfg.max_len - len(run.ids))
    texts = {}
    for label, f in (("clean", {}), ("changed", fns)):
        if limit < 1:
            texts[label] = ""
            continue
        step = numerics.checked(step_under(f), m.params, m.cfg, len(prompt), src, m.runtime.fix)
        with np.errstate(all="ignore"):
            g = decoding.greedy(step, prompt, limit, m.tokenizer.eos_id, m.cfg.max_len)
        texts[label] = m.tokenizer.decode(g.ids[len(prompt) :] if src is None else g.ids[1:])
    return texts
