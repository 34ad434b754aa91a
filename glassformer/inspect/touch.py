"""A Model looked inside and touched: its traced run (`Model.run`), what the run says
(`Model.result`), ablation and activation patching by name (`Model.ablate`, `Model.patch`).

The work is `interventions.py`'s; here is how a Model's text
(read through its `Runtime`, `m` below) becomes their inputs and how their outcomes are told
(the typed results of `results.py`, whose `to_dict()` the command line prints and writes). Every
run is the float64 reference engine's unless a method says so. A `Run` is also a mapping of its
trace's step names to values.

Deliberately not here: the logit lens and input attribution (`probes.py`); argument parsing,
printing, HTML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from glassformer import numerics, results
from glassformer import reference as R
from glassformer.decoding import Decoding
from glassformer.errors import InputError, Said, param, verb
from glassformer.inspect import interventions as I
from glassformer.trace import Trace, byte_size, clip, few_names, intervene, tracing


@dataclass(repr=False)
class Run(Mapping):
    """One traced forward pass of the reference engine (float64, every step) and what it
    read: src (an encoder-decoder's source, an encoder's text), ids (the decoder's tokens, else
    the encoder's), what the pass returned, the generation it decoded (or None) and where that
    started, and per stack what it read ({stack: (what, ids)}).

    A mapping of its trace's step names to values, as the trace is: `run[name]`, a glob
    `run["decoder.0.*.A"]` -> {name: array}, `keys()`, `items()`, `in`, `len`, iteration."""

    trace: Trace
    src: list[int] | None
    ids: list[int]
    output: np.ndarray  # logits (T, V) / class logits (n_classes,) / encoder output (S, C)
    logits: np.ndarray | None  # the logits, None for an encoder without a classifier
    generation: object = None
    n_prompt: int = 0
    unknown: list[str] = field(default_factory=list)
    stacks: dict = field(default_factory=dict)
    decoding: Decoding = field(default_factory=Decoding)

    def __getitem__(self, name: str) -> np.ndarray | dict[str, np.ndarray]:
        return self.trace[name]

    def __contains__(self, name: object) -> bool:
        return name in self.trace

    def __iter__(self) -> Iterator[str]:
        return iter(self.trace)

    def __len__(self) -> int:
        return len(self.trace)

    def __repr__(self) -> str:
        """A few lines: the model and text, the steps and bytes, what each stack read, what
        was generated, a few step names (never the arrays)."""
        t = self.trace
        made = f" of {clip(t.model, 80)}" if t.model else ""
        made += f" on {clip(repr(t.text), 80)}" if t.text is not None else ""
        lines = [f"<glassformer.Run{made}: {len(t)} steps, {byte_size(t.nbytes)}"]
        lines += [f"  {k}: {what}, {len(x)} tokens" for k, (what, x) in self.stacks.items()]
        if self.generation is not None:
            n_new = len(self.generation.ids) - self.n_prompt
            lines.append(f"  generated {n_new} tokens ({self.decoding.strategy})")
        lines.append(f"  output: {np.shape(self.output)} {_what_output(self)}")
        return "\n".join([*lines, f"  {few_names(list(t))}>"])


def _what_output(run: Run) -> str:
    if run.logits is None:
        return "the encoder output"
    return "class logits" if np.ndim(run.output) == 1 else "logits"


_HEAD = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.head(\d+)")
_KV = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn)\.kv_head(\d+)")
_SUBLAYER = re.compile(r"(encoder|decoder)\.(\d+)\.(self_attn|cross_attn|ffn)")


# -- the traced run -------------------------------------------------------------------------------


def traced_run(m, text, ids, target, decoding, quiet):
    """See `Model.run`. The run's `stacks` says what each stack read: {stack: (what, ids)}."""
    run = _traced(m, text, ids, target, decoding, quiet)
    run.trace.model, run.trace.text = m.name, text  # what its repr says made it
    return run


def _traced(m, text, ids, target, decoding, quiet):
    cfg = m.cfg
    decoding = decoding or Decoding()
    unknown: list[str] = []
    gen = None
    if cfg.arch == "encoder-decoder":
        src = m.encode(text, unknown=unknown)
        m.unknown_note(unknown, quiet)
        if target is None:
            gen = m.decoded(m.bos(), src, decoding, quiet=quiet)
            tgt = gen.ids
        elif isinstance(target, str):
            tgt = m.bos() + m.encode(target, room=1, what=param("target"))
        else:
            tgt = list(target)
        stacks = {"encoder": ("the source text", src), "decoder": ("the decoder's tokens", tgt)}
        labels = {k: m.pieces(x) for k, (_, x) in stacks.items()}
        with np.errstate(all="ignore"), tracing(labels) as trace:
            out = R.forward(m.params, cfg, tgt, src_ids=src)
        return Run(trace, src, tgt, out, out, gen, 1, unknown, stacks, decoding)
    if cfg.arch == "decoder":
        if ids is None:
            ids = m.encode(text, unknown=unknown)
            m.unknown_note(unknown, quiet)
        stacks = {"decoder": ("the text", list(ids))}
        if decoding.max_new_tokens:
            step = m.step(prompt_len=len(ids), reference=True)
            gen = m.decoded(list(ids), None, decoding, step=step, quiet=quiet)
            stacks["decoder"] = ("the text and what was generated", gen.ids)
        seq = stacks["decoder"][1]
        with np.errstate(all="ignore"), tracing({"decoder": m.pieces(seq)}) as trace:
            out = R.forward(m.params, cfg, seq)
        return Run(trace, None, seq, out, out, gen, len(ids), unknown, stacks, decoding)
    ids = m.encode(text, unknown=unknown)
    m.unknown_note(unknown, quiet)
    stacks = {"encoder": ("the text", ids)}
    with np.errstate(all="ignore"), tracing({"encoder": m.pieces(ids)}) as trace:
        if cfg.n_classes:
            out = logits = R.classify(m.params, cfg, ids)
        else:  # one pass: the encoder's steps, then the pooling (recorded as "embedding")
            R.sentence_embedding(m.params, cfg, ids)
    if not cfg.n_classes:
        out, logits = trace["encoder.output"], None  # (S, C)
    return Run(trace, ids, ids, out, logits, None, len(ids), unknown, stacks, decoding)


def check_finite(m, run) -> None:
    """A run's output (logits, or an embedding) is finite, or a NonFiniteError naming where."""
    embedding = m.cfg.arch == "encoder" and not m.cfg.n_classes
    what = "the values of the embedding" if embedding else "the model's outputs"
    out = run.trace["embedding"] if embedding else run.output
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    numerics.check(np.asarray(out)[None], lambda _: (what, run.ids, src), m.params, m.cfg, m.fix)


def result(m, run) -> results.Outcome:
    """See `Model.result`."""
    from glassformer.decoding import stop_reason

    cfg = m.cfg
    if cfg.arch == "encoder":
        if cfg.n_classes:
            told = results.Classification.of(m.class_names, R.softmax(run.output))
            summary = f"class {told.label} with probability {told.probability:.4f}"
            return results.PredictedClass(told, summary)
        e = run.trace["embedding"]  # (C,), recorded by the run
        head = ", ".join(f"{v:+.4f}" for v in e[:6])
        return results.PooledEmbedding(
            e.tolist(),
            f"the pooled embedding (mean over the tokens, unit length): {len(e)} dims "
            f"[{head}, ...]",
        )
    ids, n_prompt = run.ids, run.n_prompt
    if run.generation is not None:
        text = m.decode(ids[n_prompt:] if cfg.arch == "encoder-decoder" else ids)
        why = stop_reason(run.generation, n_prompt, run.decoding, cfg)
        summary = Said(f"“{text}” ({run.decoding.strategy}; {why.template})")
        return results.GeneratedText(ids[n_prompt:], text, summary)
    probs = R.softmax(run.output[-1])
    k = int(probs.argmax())
    word = m.readable([k])[0]
    given = f"the target “{m.decode(ids[1:])}” given; " if cfg.arch == "encoder-decoder" else ""
    return results.NextToken(
        k,
        m.pieces([k])[0],
        float(probs[k]),
        f"{given}the most likely next token is “{word}” (id {k}) with probability {probs[k]:.4f}",
    )


# -- ablation and patching -----------------------------------------------------------------------


def interventions(names: list[str], cfg) -> dict:
    """The zero-ablations that --ablate NAME... asks for, checked against the model's sizes."""
    fns = {}
    for name in names:
        head, sub, kv = _HEAD.fullmatch(name), _SUBLAYER.fullmatch(name), _KV.fullmatch(name)
        match = head or sub or kv
        if match:
            _check_layer(name, match, cfg)
        if kv:
            fns |= I.ablate_kv_head(
                int(kv[2]), _kv_head(name, kv, cfg), _group(cfg), "zero", kv[1], kv[3]
            )
        elif head:
            h = int(head[4])
            if h >= cfg.n_heads:
                raise InputError(f"{_named(name)}: there are {cfg.n_heads} heads per layer")
            fns |= I.ablate_head(int(head[2]), h, stack=head[1], kind=head[3])
        elif sub and sub[3] == "ffn":
            fns |= I.ablate_ffn(int(sub[2]), stack=sub[1])
        elif sub:
            fns |= I.ablate_attention(int(sub[2]), stack=sub[1], kind=sub[3])
        else:
            fns[name] = I.zero()
    return fns


def _group(cfg) -> int:
    """The query heads that share each key/value head (1: none shared)."""
    return cfg.n_heads // cfg.kv_heads


def _kv_head(name: str, kv, cfg) -> int:
    """The K/V head of an --ablate STACK.L.KIND.kv_head{g}, checked: the model shares them."""
    g = int(kv[4])
    if _group(cfg) == 1:
        raise InputError(
            f"{_named(name)}: this model's heads have their own K and V (n_kv_heads = n_heads): "
            f"ablate a head, {kv[1]}.{kv[2]}.{kv[3]}.head{g}"
        )
    if g >= cfg.kv_heads:
        raise InputError(
            f"{_named(name)}: there are {cfg.kv_heads} K/V heads per layer (0..{cfg.kv_heads - 1})"
        )
    return g


def notes(names: list[str], cfg) -> list[str]:
    """What an ablation of heads means when K/V heads are shared (grouped-query attention)."""
    G, out = _group(cfg), []
    for name in names:
        head, kv = _HEAD.fullmatch(name), _KV.fullmatch(name)
        if G == 1 or not (head or kv):
            continue
        if kv:
            q = I.kv_group(int(kv[4]), G)
            out.append(
                f"{name} is the key/value head that query heads {q[0]}-{q[-1]} share: ablating "
                f"it zeroes the outputs C of all {G} (the same as zeroing its V)"
            )
        else:
            h = int(head[4])
            q = I.kv_group(h // G, G)
            rest = [str(i) for i in q if i != h]
            others = f"head {rest[0]}" if G == 2 else f"heads {', '.join(rest[:-1])} and {rest[-1]}"
            out.append(
                f"{name} shares K/V head {h // G} with {others}: ablating it zeroes its own output "
                f"C only, and {others} still read{'s' * (G == 2)} the same K and V"
            )
    return out


def _named(name: str) -> str:
    """One of the names an ablation is given, as a message refers to it."""
    return param("names", name)


def _check_layer(name: str, match, cfg) -> None:
    stack, layer = match[1], int(match[2])
    layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
    if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
        raise InputError(
            f"{_named(name)}: this {cfg.arch} model has no {stack}; names start with "
            f"{'decoder' if stack == 'encoder' else 'encoder'}."
        )
    if layer >= layers:
        raise InputError(f"{_named(name)}: the {stack} has {layers} layers (0..{layers - 1})")
    if match[3] == "cross_attn" and cfg.arch != "encoder-decoder":
        raise InputError(f"{_named(name)}: only an encoder-decoder has cross_attn")


def names(cfg) -> list[str]:
    """What --ablate takes by name: every head and sublayer of the model."""
    out = []
    for stack in ("encoder", "decoder"):
        layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        if not (cfg.has_encoder if stack == "encoder" else cfg.has_decoder):
            continue
        kinds = ["self_attn"] + ["cross_attn"] * (stack == "decoder" and cfg.has_encoder)
        shared = cfg.kv_heads if _group(cfg) > 1 else 0
        for i in range(layers):
            for kind in kinds:
                out += [f"{stack}.{i}.{kind}"] + [
                    f"{stack}.{i}.{kind}.head{h}" for h in range(cfg.n_heads)
                ]
                out += [f"{stack}.{i}.{kind}.kv_head{g}" for g in range(shared)]
            out.append(f"{stack}.{i}.ffn")
    return out


def unknown_name(name: str, cfg, trace) -> str:
    """The refusal of an --ablate NAME that is no head, sublayer or step of the model: the
    nearest valid names, and how names are made."""
    import difflib

    close = difflib.get_close_matches(name, names(cfg) + trace.names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    example = next((n for n in reversed(names(cfg)) if _HEAD.fullmatch(n)), "decoder.0.ffn")
    return (
        f"{_named(name)}: no head, sublayer or step of this model has that name{hint} (a head "
        f"is like {example}, a sublayer STACK.LAYER.self_attn, cross_attn or ffn, counted from "
        f"0; any step name of `{verb('trace')}`, or a glob of them, works too)"
    )


def _predicting(m, what: str) -> None:
    if m.cfg.arch == "encoder" and not m.cfg.n_classes:
        raise InputError(
            f"{what} compare predictions: this encoder has no classifier (it makes a sentence "
            "embedding) and predicts none; use a classifier, a decoder or an encoder-decoder "
            "model (explain shows the embedding's every step)"
        )


def _forward(m):
    """The reference engine's forward over one input: logits (T, V), or a classifier's class
    logits (n_classes,)."""
    if m.cfg.arch == "encoder":
        return lambda ids: R.classify(m.params, m.cfg, list(ids))
    return I.reference_run(m.params, m.cfg)


def class_change(names: list[str], before, after) -> list[dict]:
    """Each class's probability before and after an intervention, by class name, from the
    class logits (n_classes,) of both runs: [{"label", "before", "after", "change"}], the rows
    that `Model.ablate`, `Model.patch` and the explorer (`serve.runs.intervene`) report."""
    p, q = R.softmax(np.asarray(before)), R.softmax(np.asarray(after))
    return [
        {"label": n, "before": float(a), "after": float(b), "change": float(b - a)}
        for n, a, b in zip(names, p, q, strict=True)
    ]


def ablation(m, run, ablate: list[str]) -> results.Ablation:
    """See `Model.ablate`: per position, the predicted token with and without the ablation, the
    largest logit change, and (when the run generated its output) the output generated again
    with and without it; a classifier's, each class's probability before and after by name
    ({"classes": `class_change`'s rows}) in place of the positions."""
    _predicting(m, f"{verb('ablate')} and {verb('patch')}")
    fns = interventions(ablate, m.cfg)
    forward = _forward(m)
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    ids = run.ids
    inp = (src, ids) if src is not None else ids
    before, trace = I.record(forward, inp)
    missing = I.unmatched(fns, trace)
    if missing:
        raise InputError(unknown_name(missing[0], m.cfg, trace))
    after = I.run_with(forward, inp, fns)
    if m.cfg.arch == "encoder":
        classes = class_change(m.class_names, before, after)
        return results.Ablation(
            list(ablate), sorted(fns), classes=classes, notes=notes(ablate, m.cfg) or None
        )
    rows = []
    for t in range(len(ids)):
        a, b = int(before[t].argmax()), int(after[t].argmax())
        rows.append(
            {
                "position": t,
                "after_token": m.readable([ids[t]])[0],
                "predicted": m.readable([a])[0],
                "predicted_ablated": m.readable([b])[0],
                "changed": a != b,
                "max_logit_change": float(np.abs(after[t] - before[t]).max()),
            }
        )
    out = results.Ablation(list(ablate), sorted(fns), rows, notes=notes(ablate, m.cfg) or None)
    if run.generation is not None:
        out.text = _regenerate(m, run)
        with intervene(fns):
            out.text_ablated = _regenerate(m, run)
    return out


def _regenerate(m, run) -> str:
    """The run's output generated again as it was (under whatever intervention is active)."""
    src = run.src if m.cfg.arch == "encoder-decoder" else None
    prompt = run.ids[: run.n_prompt]
    step = m.step(src, prompt_len=len(prompt), reference=True)
    gen = m.decoded(prompt, src, run.decoding, step=step, quiet=True)
    return m.decode(gen.ids[len(prompt) :] if src is not None else gen.ids)


def patching(m, run, clean_text: str) -> results.Patching:
    """See `Model.patch`: heads patched one at a time from the run on `clean_text` (clean) into
    this run (corrupted), per attention kind: (patched - corrupted) / (clean - corrupted) of the
    logit difference between the two runs' predictions at the first position where they
    differ. A classifier's metric is the logit difference between the clean run's class and
    this run's, and its "classes" are each class's probability in this run (before) and in the
    clean run (after: what restoring everything would give)."""
    _predicting(m, f"{verb('ablate')} and {verb('patch')}")
    forward, ids = _forward(m), run.ids
    room = 1 if m.cfg.arch == "encoder-decoder" else 0
    other = m.encode(clean_text, room=room, what=param("clean"))
    if m.cfg.arch == "encoder-decoder":
        clean, corrupted = (other, ids), (run.src, ids)
    else:
        if len(other) != len(ids):
            raise InputError(
                f"{param('clean')} has {len(other)} tokens but the text has {len(ids)}: patching "
                f"{'an encoder' if m.cfg.arch == 'encoder' else 'a decoder'}'s heads position "
                "by position needs the same number of tokens"
            )
        clean, corrupted = other, ids
    if m.cfg.arch == "encoder":
        return _class_patching(m, clean_text, forward, clean, corrupted)
    good, bad = forward(clean), forward(corrupted)
    differs = [t for t in range(len(ids)) if good[t].argmax() != bad[t].argmax()]
    if not differs:
        raise InputError(
            "the two inputs predict the same token at every position: nothing to restore; "
            f"choose a {param('clean')} text that changes the prediction"
        )
    t = differs[0]
    g, b = int(good[t].argmax()), int(bad[t].argmax())
    metric = I.logit_diff(g, b, position=t)
    kinds = ["self_attn", "cross_attn"] if m.cfg.arch == "encoder-decoder" else ["self_attn"]
    tables = {k: I.patch_heads(forward, clean, corrupted, metric, kind=k).to_dict() for k in kinds}
    pieces = m.readable([g, b])
    metric = f"logit[{pieces[0]}] - logit[{pieces[1]}]"
    return results.Patching(clean_text, metric, tables, t, m.readable([ids[t]])[0])


def _class_patching(
    m, clean_text: str, forward, clean: list[int], ids: list[int]
) -> results.Patching:
    """`patching` of a classifier: one table (the encoder's heads), its metric the logit of the
    clean run's class minus that of this run's class."""
    names = m.class_names
    good, bad = forward(clean), forward(ids)
    g, b = int(good.argmax()), int(bad.argmax())
    if g == b:
        raise InputError(
            f"both inputs are classified {names[g]}: nothing to restore; choose a "
            f"{param('clean')} text of another class"
        )
    metric = lambda z: float(z[g] - z[b])  # noqa: E731
    table = I.patch_heads(forward, clean, ids, metric, stack="encoder", kind="self_attn")
    metric = f"logit[{names[g]}] - logit[{names[b]}] (the clean run's class minus this run's)"
    tables = {"self_attn": table.to_dict()}
    return results.Patching(clean_text, metric, tables, classes=class_change(names, bad, good))
