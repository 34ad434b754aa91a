"""A batch of texts through the model, the steps asked for kept and stacked: `Model.run_with_cache`,
as TransformerLens's `run_with_cache(batch)` and nnsight's `trace` + `.save()` over a batch.

    cache = m.run_with_cache(["To be", "or not to be"], names=["decoder.0.*.A", "logits"])
    cache["decoder.0.self_attn.head1.A"]      # (2, T, T), T the longest text's tokens
    cache.mask                                # (2, T): True at a real token, False at padding
    cache.unpadded("logits", 0)               # the first text's own (T_0, V)

The names are the trace's (`Model.trace(text).names()`): a step of the cache holds, for each text,
the rows that text's own trace holds, padded on the right to the longest text of the batch with 0
(False for a mask), so a text's rows are the same whatever it is batched with. Engines:

  - "torch": the PyTorch engine (float32 by default, float64, int8), `batch_size` texts per
    forward pass, each padded and masked (`valid`) as `inference` batches them. Its taps give an
    intervention the whole batch (B, T, ...) where a trace records the first sequence only, so the
    values are read by an intervention that returns each one unchanged (`trace.intervene`, the
    sanctioned way; the engine computes as it does while traced); a trace that stores nothing
    (`tracing(keep=...)`) names each tap in order. Only the steps matching `names` are kept:
    the cache's memory is bounded by `names`, never the whole trace of every text.
    int8 runs one text per forward: its linear layers quantize each call's input with one range
    (`quantize.py`), which a batch would share, so a text's values would depend on the others.
  - "reference": the NumPy float64 engine, one text at a time, read the same way.

Which steps: every step the engine taps, less the masks that padding alone makes (an encoder's
self-attention and cross-attention: one text of its own has none there). The reference engine
also records its norms' inner steps (mean, std, normalized) and a sentence embedding's pooling.

An encoder-decoder reads each text as its source; its decoder reads the `targets` (texts, to which
BOS is prepended, or token ids from BOS), teacher-forced, or by default BOS alone, as
TransformerLens's encoder-decoder reads only the start token when given no decoder input.

Deliberately not here: the engines' math, the trace, decoding, the Model's argument checks (the
table of `arguments.py`), printing.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from glassformer import reference as R
from glassformer.errors import GlassformerError, InputError, TraceError
from glassformer.trace import intervene, tracing

GLOB = "*?["  # a key holding one of these is a glob (`fnmatch`), else a name


# -- the cache ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class ActivationCache(Mapping):
    """Stacked steps of a batch of texts, by name (a read-only Mapping): `cache[name]` is an array
    (batch, ...), `cache[glob]` a dict of the matching ones. `mask` (batch, T) marks the texts' real
    tokens (an encoder-decoder's source), `target_mask` the decoder's (an encoder-decoder only);
    `ids` and `tokens` (readable) are per text, unpadded. See the module docstring."""

    arrays: dict[str, np.ndarray]
    mask: np.ndarray
    ids: list[list[int]]
    tokens: list[list[str]]
    engine: str  # "torch" or "reference"
    dtype: str  # the engine's precision: "float64", "float32" or "int8"
    arch: str
    model: str = "model"
    target_mask: np.ndarray | None = None
    target_ids: list[list[int]] | None = None
    target_tokens: list[list[str]] | None = None

    def __getitem__(self, key: str) -> np.ndarray | dict[str, np.ndarray]:
        if isinstance(key, str) and key in self.arrays:
            return self.arrays[key]
        if isinstance(key, str) and any(c in key for c in GLOB):
            found = {n: a for n, a in self.arrays.items() if fnmatch.fnmatchcase(n, key)}
            if found:
                return found
        raise TraceError(f"{key!r} names no step of this cache; {hint(key, self.names)}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    def __contains__(self, name: object) -> bool:
        return name in self.arrays

    @property
    def names(self) -> list[str]:
        """The steps held, in the order the engine computes them."""
        return list(self.arrays)

    @property
    def masks(self) -> dict[str, np.ndarray]:
        """{stack: (batch, its T) real tokens}: "decoder" and/or "encoder"."""
        if self.arch == "encoder-decoder":
            return {"encoder": self.mask, "decoder": self.target_mask}
        return {"encoder" if self.arch == "encoder" else "decoder": self.mask}

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def unpadded(self, name: str, index: int) -> np.ndarray:
        """Text `index`'s own values of the step `name` (its trace's shape): the padding cut off."""
        values = self[name]
        if not isinstance(values, np.ndarray):
            raise InputError(f"unpadded takes one step's name, not the glob {name!r}")
        lengths = {k: int(m[index].sum()) for k, m in self.masks.items()}
        return values[index][tuple(slice(0, lengths[s]) for s in token_axes(name, self.arch))]

    def __repr__(self) -> str:
        n, T = self.mask.shape
        lengths = ", ".join(str(int(k)) for k in self.mask.sum(1)[:8]) + (", ..." if n > 8 else "")
        names = self.names
        shown = names if len(names) <= 6 else [*names[:3], "...", *names[-3:]]
        steps = ", ".join(s if s == "..." else f"{s} {self.arrays[s].shape}" for s in shown)
        first = " ".join(self.tokens[0][:12]) + (" ..." if len(self.tokens[0]) > 12 else "")
        targets = "" if self.target_mask is None else f", targets to {self.target_mask.shape[1]}"
        text = (
            f"<ActivationCache of {self.model}: {n} text{'s' * (n != 1)} padded to {T} tokens "
            f"({lengths} real){targets}, {self.engine} {self.dtype}, {len(names)} steps, "
            f"{self.nbytes / 2**20:.1f} MiB: {steps}; tokens[0]: {first}>"
        )
        return text if len(text) < 1900 else text[:1890] + " ...>"


def token_axes(name: str, arch: str) -> tuple[str, ...]:
    """The stacks whose tokens the axes after the batch axis of step `name` run over, in order:
    ("decoder",) for a decoder's (T, C), ("decoder", "encoder") for cross-attention weights,
    () for a classifier's pooled vector or logits."""
    stack = name.split(".", 1)[0]
    if stack not in ("encoder", "decoder"):  # logits, probs, pooled, embedding
        return ("decoder",) if arch != "encoder" else ()
    keys = "encoder" if ".cross_attn." in name else stack
    last = name.rsplit(".", 1)[-1]
    if last in ("scores", "scaled", "A", "mask"):
        return stack, keys
    if keys != stack and last in ("K", "V"):
        return (keys,)
    return (stack,)


def _padding_only(name: str) -> bool:
    """A mask that padding alone makes: an encoder's self-attention, cross-attention."""
    return name.endswith(".mask") and (name.startswith("encoder.") or ".cross_attn." in name)


def hint(key, names: list[str]) -> str:
    """Close names, else a few of them: what a refusal of an unknown name or glob suggests."""
    close = difflib.get_close_matches(str(key), names, n=3, cutoff=0.6)
    deeper = [n for n in names if n.startswith(f"{key}.")][:1]
    if deeper:
        return f"did you mean {key + '.*'!r}?"
    if close:
        return f"did you mean {', '.join(map(repr, close))}?"
    some = list(dict.fromkeys([*names[:2], *(n for n in names if n.endswith(".A"))][:3]))
    return f"steps are named like {', '.join(map(repr, [*some, names[-1]]))}"


# -- making one ---------------------------------------------------------------------------------


def run_with_cache(m, texts, names, targets, engine, dtype, batch_size) -> ActivationCache:
    """See `Model.run_with_cache` (its arguments checked there)."""
    engine, dtype, model = _engine(m, engine, dtype)
    cfg = m.cfg
    ids = _inputs(m, texts, "texts")
    stacks = {"encoder" if cfg.arch != "decoder" else "decoder": ids}
    if cfg.arch == "encoder-decoder":
        stacks["decoder"] = _targets(m, targets, len(ids))
    elif targets is not None:
        raise InputError(
            f"targets: only an encoder-decoder's decoder reads targets; {m.name} is "
            f"arch={cfg.arch!r}: drop targets"
        )
    run = torch_forward(model, cfg, m.params) if model is not None else _reference(cfg, m.params)
    globs = step_globs(names)
    one = {k: [v[0][:1]] for k, v in stacks.items()}  # one token of each stack
    order = _order(run, one, engine)
    wanted = _select(
        order, globs, engine, m.name, lambda: _order(_reference(cfg, m.params), one, "reference")
    )
    longest = {k: max(map(len, v)) for k, v in stacks.items()}
    layout, out = _Layout(len(ids), longest, cfg.arch), {}
    step = batch_size if model is not None and dtype != "int8" else 1  # (int8: the docstring)
    for at in range(0, len(ids), step):
        chunk = {k: v[at : at + step] for k, v in stacks.items()}
        got = _kept(lambda chunk=chunk: run(chunk), globs, wanted)
        for name in wanted:  # as NumPy (B, ...): a batch's tensor, or one text's array
            v = got.pop(name)
            v = v.detach().cpu().numpy() if model is not None else np.asarray(v)[None]
            layout.put(out, name, v, at, chunk)
    masks = {k: _mask(v, longest[k]) for k, v in stacks.items()}
    text_stack = "encoder" if cfg.arch != "decoder" else "decoder"
    two = cfg.arch == "encoder-decoder"
    return ActivationCache(
        {n: out[n] for n in wanted},
        masks[text_stack],
        [list(x) for x in ids],
        [m.readable(x) for x in ids],
        engine,
        dtype,
        cfg.arch,
        m.name,
        masks["decoder"] if two else None,
        [list(x) for x in stacks["decoder"]] if two else None,
        [m.readable(x) for x in stacks["decoder"]] if two else None,
    )


def _engine(m, engine: str | None, dtype: str | None):
    """(engine, dtype, the PyTorch model or None): the model's engine unless one is given; the
    PyTorch engine in float32 unless the model or the call says otherwise."""
    engine = engine or m.engine
    if engine == "reference":
        if dtype not in (None, "float64"):
            raise InputError(
                f"dtype={dtype!r}: the reference engine computes in float64; drop dtype, or use "
                "engine='torch'"
            )
        return "reference", "float64", None
    chosen = dtype or m.dtype or "float32"
    model = m.torch(chosen)  # the Model's engine of that precision, made once
    if model is not None:
        return "torch", chosen, model
    if engine == "torch" or dtype is not None:
        from glassformer.errors import INSTALL_TORCH

        why = (
            f"{m.name} was loaded with engine='reference'; load it with engine='auto', or use "
            "engine='reference'"
            if m.engine == "reference"
            else f"PyTorch is not installed: use engine='reference', or {INSTALL_TORCH}"
        )
        asked = f"engine={engine!r}" if engine == "torch" else f"dtype={dtype!r}"
        raise GlassformerError(f"{asked} needs the PyTorch engine; {why}")
    return "reference", "float64", None


def _inputs(m, texts, what: str) -> list[list[int]]:
    """Token ids of each text (a str: one text), or the id lists given, each checked."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    if texts and isinstance(texts[0], str):
        return [m.encode(t, what=f"{what}[{i}]") for i, t in enumerate(texts)]
    out = [[int(i) for i in x] for x in texts]
    for i, x in enumerate(out):
        if len(x) > m.cfg.max_len:
            raise InputError(
                f"{what}[{i}] has {len(x)} tokens but the model takes at most {m.cfg.max_len} "
                "(max_len); shorten it"
            )
    return out


def _targets(m, targets, n: int) -> list[list[int]]:
    """The decoder's tokens of each text: BOS + a target text, target ids as given, else BOS."""
    if targets is None:
        return [m.bos() for _ in range(n)]
    given = [targets] if isinstance(targets, str) else list(targets)
    if len(given) != n:
        raise InputError(f"targets: {len(given)} targets for {n} texts; give one per text")
    if isinstance(given[0], str):
        return [m.bos() + m.encode(t, room=1, what=f"targets[{i}]") for i, t in enumerate(given)]
    return _inputs(m, given, "targets")


def step_globs(names) -> list[str]:
    """The step globs `names` asks for: None is every step; "a,b" and lists are split."""
    if names is None:
        return ["*"]
    parts = [names] if isinstance(names, str) else list(names)
    globs = [p.strip() for part in parts for p in part.split(",") if p.strip()]
    if not globs:
        raise InputError(
            f"names={names!r}: give step names or globs, e.g. ['decoder.0.*.A'], or None for all"
        )
    return list(dict.fromkeys(globs))


def _order(run, stacks: dict, engine: str) -> list[str]:
    """The names of the steps the engine taps (one token of each stack is enough: the names do
    not depend on the length), less the masks padding alone makes."""
    with tracing(keep=_nothing) as names:
        run(stacks)
    return [n for n in dict.fromkeys(names.names()) if not (engine == "torch" and _padding_only(n))]


def _select(order: list[str], globs: list[str], engine: str, model: str, reference) -> list[str]:
    """The names matching some glob, in the engine's order; a glob matching none is refused
    (saying so when the reference engine's steps, `reference()`, have it)."""
    for g in globs:
        if not any(fnmatch.fnmatchcase(n, g) for n in order):
            there = engine == "torch" and any(fnmatch.fnmatchcase(n, g) for n in reference())
            also = " (the reference engine records it: engine='reference')" if there else ""
            raise InputError(
                f"names: {g!r} matches no step of {model} on the {engine} engine{also}; "
                f"{hint(g, order)}"
            )
    return [n for n in order if any(fnmatch.fnmatchcase(n, g) for g in globs)]


def _nothing(name: str) -> bool:
    return False


def _keep(seen: list, x):
    seen.append(x)
    return x  # unchanged: the engine computes on with its own value


def _kept(forward, globs: list[str], wanted: list[str]) -> dict:
    """{name: value} of the `wanted` steps that `forward()` taps: an intervention keeps what each
    glob's taps see (unchanged), a trace that stores nothing says which step each one was."""
    seen = {g: [] for g in globs}
    with (
        tracing(keep=_nothing) as order,
        intervene({g: functools.partial(_keep, seen[g]) for g in globs}),
    ):
        forward()
    names, wanted_set, out = order.names(), set(wanted), {}
    for g in globs:
        hits = [n for n in names if fnmatch.fnmatchcase(n, g)]
        if len(hits) != len(seen[g]):  # every matching tap passes the intervention once
            raise RuntimeError(f"{g}: {len(seen[g])} values kept for {len(hits)} steps")
        for n, v in zip(hits, seen[g], strict=True):
            if n in wanted_set:
                out.setdefault(n, v)
    return out


def _reference(cfg, params):
    """The reference engine's forward of one text: {stack: [its ids]} -> None (taps only)."""

    def run(stacks: dict) -> None:
        with np.errstate(all="ignore"):
            if cfg.arch == "encoder-decoder":
                R.forward(params, cfg, stacks["decoder"][0], src_ids=stacks["encoder"][0])
            elif cfg.arch == "decoder":
                R.forward(params, cfg, stacks["decoder"][0])
            elif cfg.n_classes:
                R.classify(params, cfg, stacks["encoder"][0])
            else:
                R.sentence_embedding(params, cfg, stacks["encoder"][0])

    return run


def torch_forward(model, cfg, params):
    """The PyTorch engine's forward of a batch: {stack: [ids per text]}, padded on the right."""
    import torch

    def padded(seqs):
        T = max(map(len, seqs))
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        for b, s in enumerate(seqs):
            ids[b, : len(s)] = torch.as_tensor(s)
        return ids, torch.as_tensor(_mask(seqs, T))

    def run(stacks: dict) -> None:
        with torch.no_grad():
            if cfg.arch == "encoder-decoder":
                (tgt, valid), (src, src_valid) = (
                    padded(stacks["decoder"]),
                    padded(stacks["encoder"]),
                )
                model(tgt, valid=valid, src_ids=src, src_valid=src_valid)
            else:
                model(*padded(stacks["encoder" if cfg.arch == "encoder" else "decoder"]))

    return run


def _mask(seqs: list[list[int]], T: int) -> np.ndarray:
    """(N, T) True at each sequence's real tokens (right padding)."""
    lengths = np.array([len(s) for s in seqs])
    return np.arange(T)[None, :] < lengths[:, None]


@dataclass(frozen=True)
class _Layout:
    """The cache's arrays: `n` texts, each stack padded to its `longest` text."""

    n: int
    longest: dict[str, int]
    arch: str

    def put(self, out: dict, name: str, value: np.ndarray, at: int, chunk: dict) -> None:
        """Copy the real rows of `value` (B or 1, ...) (1: a table every row shares) into the
        array of `name` (made at its first value, zeros) at rows at, at+1, ..."""
        axes = token_axes(name, self.arch)
        if name not in out:
            shape = [self.longest[s] for s in axes] + list(value.shape[1 + len(axes) :])
            out[name] = np.zeros([self.n, *shape], dtype=value.dtype)
        dest = out[name]
        for b in range(len(next(iter(chunk.values())))):
            rows = tuple(slice(0, len(chunk[s][b])) for s in axes)
            dest[at + b][rows] = value[b if len(value) > 1 else 0][rows]
