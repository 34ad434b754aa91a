"""Recording on the fast path: what the PyTorch engine computed for each output token of a
batched decoding (KV cache, SDPA), read by forward hooks, without a trace.

A trace (`trace.tracing`) makes the engine leave its fast path for the explicit one and record
every step of every head; a translator asked for alignments needs a few rows of it. `Recorder`
hooks the decoder's modules instead (`register_forward_hook`: the engine's code is unchanged, and
nothing it computes is replaced). At each step it reads, for the new token's position only:

  - a head's attention weights, decoder.{l}.self_attn.head{h}.A and decoder.{l}.cross_attn.
    head{h}.A: A = softmax(q·Kᵀ / √D) of the new query row, recomputed from the block's input
    and the keys the engine returns (its cached K, turned by rotary positions where it has them);
    the fast path's SDPA never forms A. One extra projection q = x·Wq per hooked layer.
  - or the mean of such rows over chosen (layer, head) pairs (`mean_of`: the alignment);
  - a block's output (decoder.{l}.out), the stack's (decoder.output), the logits, or their top k
    by log-probability.

The names are the reference engine's trace names (`Model.trace(...).names()`), so a record can
be held against the trace of the same tokens. `step(alive)` files the values of the forward just
run; a batched beam search passes each row's hypothesis, so that `path` follows the chosen one
back through the beam's reorderings (by its ids: row j at step t holds the hypothesis whose ids
are the chosen one's first t + 1). Decoding loops call `step`; this module runs none of them.

Word alignment (`word_alignment`): each target piece to the source piece it attends to most
(argmax of its row), then source word i - target word j when some piece of j points into i;
words as whitespace separates them in the text (a piece that starts with a space starts a word).

Deliberately not here: decoding, files, printing, the reference engine.
"""

from __future__ import annotations

import fnmatch
import math
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from glassformer.errors import InputError, param

WHITESPACE = ("␣", "⏎", "⇥", "␍")  # how `display_token` shows a space, newline, tab, CR
# The recorder of this thread's decoding: another thread's forwards through the same (shared,
# cached) engine pass the hooks by.
_ACTIVE: ContextVar[Recorder | None] = ContextVar("glassformer_recorder", default=None)


# -- what can be recorded, by name --------------------------------------------------------------


def recordable(cfg) -> list[str]:
    """The names a decoding can record per output token, in the trace's order."""
    names = []
    for layer in range(cfg.n_decoder_layers):
        for kind in (
            ("self_attn", "cross_attn") if cfg.arch == "encoder-decoder" else ("self_attn",)
        ):
            names += [f"decoder.{layer}.{kind}.head{h}.A" for h in range(cfg.n_heads)]
        names.append(f"decoder.{layer}.out")
    return [*names, "decoder.output", "logits"]


def select_steps(cfg, given: str | list[str] | None) -> list[str]:
    """'name,glob,...' (or a list of them; None or []: none) -> the recordable names they match,
    in the trace's order; a part that matches none is refused in one line, with the nearest
    names."""
    import difflib

    if given is None or isinstance(given, (list, tuple)) and not given:
        return []
    if isinstance(given, (list, tuple)) and all(isinstance(p, str) for p in given):
        given = ",".join(given)
    if not isinstance(given, str):
        raise InputError(
            f"{param('record.steps')}: give step names as a list of str or one comma-separated "
            f"str, not {type(given).__name__}"
        )
    names = recordable(cfg)
    parts = [p.strip() for p in given.split(",") if p.strip()]
    if not parts:
        raise InputError(
            f"{param('record.steps')} is empty; give step names, e.g. decoder.0.out,logits"
        )
    chosen: set[str] = set()
    for part in parts:
        hit = {n for n in names if fnmatch.fnmatchcase(n, part)}
        if not hit:
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise InputError(
                f"{param('record.steps')}: {part!r} names no step of this model; {hint}recordable: "
                f"decoder.L.self_attn.headH.A, decoder.L.cross_attn.headH.A (an encoder-"
                f"decoder), decoder.L.out, decoder.output, logits (L < {cfg.n_decoder_layers}, "
                f"H < {cfg.n_heads}; * matches any part)"
            )
        chosen |= hit
    return [n for n in names if n in chosen]


def _numbers(given, name: str, n: int, what: str) -> list[int]:
    """'0,2' (or [0, 2], or 2) -> the numbers, each refused unless 0 <= it < n; None: all.
    name: the parameter's, in a refusal."""
    flag, example = param(name), param(name, f"0,{n - 1}")
    if given is None:
        return list(range(n))
    if isinstance(given, (int, np.integer)):
        given = [given]
    if isinstance(given, str):
        given = [part.strip() for part in given.split(",")]
    if not isinstance(given, (list, tuple, range, np.ndarray)) or len(given) == 0:
        got = "an empty list" if isinstance(given, (list, tuple, range)) else type(given).__name__
        raise InputError(
            f"{flag}: give numbers from 0 to {n - 1} as a list or one comma-separated str, e.g. "
            f"{example}, not {got}"
        )
    out = []
    for part in given:
        if isinstance(part, str):
            number = part.isdecimal()
        else:
            number = (
                isinstance(part, (int, np.integer)) and not isinstance(part, bool) and part >= 0
            )
        if not number or int(part) >= n:
            shown = repr(part) if isinstance(part, str) else str(part)
            raise InputError(
                f"{flag}: {shown} is not one of this model's {what} (0 to {n - 1}); give a "
                f"comma-separated list, e.g. {example}"
            )
        if int(part) not in out:
            out.append(int(part))
    return out


def alignment_heads(cfg, layers=None, heads=None) -> list[tuple[int, int]]:
    """The (layer, head) pairs whose cross-attention an alignment averages: every head of every
    decoder layer by default; --align-layers / --align-heads keep some (their product), each
    '0,2', [0, 2] or 2 (`Model.alignments`)."""
    if cfg.arch != "encoder-decoder":
        raise InputError("alignments read cross-attention: they need an encoder-decoder model")
    ls = _numbers(layers, "alignments.layers", cfg.n_decoder_layers, "decoder layers")
    hs = _numbers(heads, "alignments.heads", cfg.n_heads, "heads")
    return [(layer, h) for layer in ls for h in hs]


def heads_named(pairs: list[tuple[int, int]]) -> list[str]:
    return [f"decoder.{layer}.cross_attn.head{h}.A" for layer, h in pairs]


# -- the hooks ----------------------------------------------------------------------------------


@dataclass
class _Step:
    values: dict  # name -> (rows, ...) tensor
    alive: list | None  # per sentence of the batch (in row order): (index, its hypotheses)


@dataclass
class Recorder:
    """Forward hooks on `model`'s decoder that keep, per decoding step, the chosen values of
    the newest position of every row (see the module docstring). Use as a context manager;
    the engine runs as before inside it. The hooks record only the forwards of the thread
    that entered it (a `Model` shares one engine between threads)."""

    model: object
    steps: list[str] = field(default_factory=list)  # names from `recordable`
    mean_of: list[tuple[int, int]] | None = None  # cross-attention pairs averaged as "mean"
    top_k: int = 0  # the logits' k most likely tokens, as "top_k" (ids) and "top_logp"
    recorded: list[_Step] = field(default_factory=list)
    done: dict = field(default_factory=dict)  # a translation's index -> (its ids, its values)
    _now: dict = field(default_factory=dict)
    _hooks: list = field(default_factory=list)
    _token: object = None

    def __enter__(self) -> Recorder:
        self._token = _ACTIVE.set(self)
        dec, wanted = self.model.decoder, set(self.steps)
        for layer, block in enumerate(dec.layers):
            for kind in ("self_attn", "cross_attn"):
                heads = [
                    h
                    for h in range(self.model.cfg.n_heads)
                    if f"decoder.{layer}.{kind}.head{h}.A" in wanted
                ]
                mean = [h for lay, h in self.mean_of or [] if lay == layer and kind == "cross_attn"]
                if heads or mean:
                    hook = self._attention(f"decoder.{layer}.{kind}", heads, mean)
                    self._hook(getattr(block, kind), hook)
            if f"decoder.{layer}.out" in wanted:
                self._hook(block, self._last(f"decoder.{layer}.out"))
        if "decoder.output" in wanted:
            self._hook(dec, self._last("decoder.output"))
        if "logits" in wanted or self.top_k:
            self._hook(self.model, self._logits("logits" in wanted))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        _ACTIVE.reset(self._token)

    def _hook(self, module, fn) -> None:
        def mine(*args):
            if _ACTIVE.get() is self:
                fn(*args)

        self._hooks.append(module.register_forward_hook(mine, with_kwargs=True))

    def _last(self, name: str):
        def hook(module, args, kwargs, out):
            self._now[name] = out[:, -1].detach()  # (B, C)

        return hook

    def _logits(self, full: bool):
        def hook(module, args, kwargs, out):
            z = out[:, -1].detach()  # (B, V)
            if full:
                self._now["logits"] = z
            if self.top_k:
                logp = z.double().log_softmax(-1)
                top = logp.topk(min(self.top_k, z.shape[-1]), dim=-1)
                self._now["top_k"], self._now["top_logp"] = top.indices, top.values

        return hook

    def _attention(self, prefix: str, heads: list[int], mean: list[int]):
        """A hook on one attention module: the new query row's weights A (B, n, S) of `heads`
        (each filed by name) and of `mean` (added into "mean", with their count)."""
        import torch

        from glassformer.torch_layers import rotary

        both = sorted(set(heads) | set(mean))

        def hook(module, args, kwargs, out):
            x = args[0][:, -1:]  # (B, 1, C): the newest position
            mask = args[2] if len(args) > 2 else kwargs.get("mask")
            k = out[1]  # (B, KV, S, D): the keys attended to (cached, turned)
            B, D, G = x.shape[0], module.D, module.H // module.KV
            q = module.q(x).view(B, 1, module.H, D).transpose(1, 2)[:, both]  # (B, n, 1, D)
            rope = kwargs.get("rope")
            if rope is not None:
                q = rotary(q, rope[0][..., -1:, :], rope[1][..., -1:, :])
            kh = k[:, [h // G for h in both]]  # (B, n, S, D)
            scores = (q @ kh.transpose(-2, -1)).squeeze(2) / math.sqrt(D)  # (B, n, S)
            if mask is not None:  # (B|1, 1|H, T|1, S): the newest row's keys
                m = mask[..., -1, :]
                m = m[:, both] if m.shape[1] > 1 else m
                scores = scores.masked_fill(~m, float("-inf"))
            A = torch.softmax(scores, dim=-1)  # (B, n, S)
            for j, h in enumerate(both):
                if h in heads:
                    self._now[f"{prefix}.head{h}.A"] = A[:, j]
            if mean:
                part = A[:, [both.index(h) for h in mean]].sum(1)  # (B, S)
                self._now["mean"] = part if "mean" not in self._now else self._now["mean"] + part

        return hook

    # -- filing and reading back ----------------------------------------------------------------

    def step(self, alive: list | None = None) -> None:
        """File the values of the forward just run. alive: for a batched beam search, per
        sentence with rows (in row order) its index and live hypotheses (`Beam.alive`)."""
        now, self._now = self._now, {}
        if "mean" in now:
            now["mean"] = now["mean"] / len(self.mean_of)
        now = {
            k: v.cpu().numpy() if k == "top_k" else v.double().cpu().numpy() for k, v in now.items()
        }
        self.recorded.append(_Step(now, alive))

    def clear(self) -> None:
        self.recorded.clear()

    def rows(self, row: int, n: int) -> list[dict]:
        """Greedy (rows never reorder): row `row`'s values at steps 0 .. n-1."""
        return [{k: v[row] for k, v in s.values.items()} for s in self.recorded[:n]]

    def path(self, sentence: int, ids: list[int], n: int) -> list[dict]:
        """Beam search: the values of the hypothesis `ids` (prompt included) at steps 0 .. n-1,
        each step's row being the live hypothesis whose ids are the first t + 1 of `ids`."""
        out = []
        for t, s in enumerate(self.recorded[:n]):
            offset = 0
            for i, alive in s.alive:
                if i == sentence:
                    prefix = ids[: len(alive[0].ids)]
                    j = next(j for j, h in enumerate(alive) if h.ids == prefix)
                    out.append({k: v[offset + j] for k, v in s.values.items()})
                    break
                offset += len(alive)
            else:
                raise RuntimeError(f"sentence {sentence} has no row at step {t}")
        return out

    def finish(self, chunk: list[int], srcs: list[list[int]], results: list) -> None:
        """After a batch of translations (`chunk`: their indices; `results`: greedy's ids or
        beam search's `BeamResult`s): each one's output ids (no EOS) and per-token values
        (`as_lists`, EOS's step left out) into `done`; the batch's steps are then dropped."""
        for b, (i, src, r) in enumerate(zip(chunk, srcs, results, strict=True)):
            if isinstance(r, list):  # greedy: the ids without EOS, rows never reordered
                ids, per = r, self.rows(b, len(r))
            else:
                h = r.best
                ids = h.ids[1 : len(h.ids) - h.finished]
                per = self.path(b, h.ids, len(ids))
            self.done[i] = (ids, as_lists(per, keys=len(src)))
        self.clear()


class _NotRecording:
    """The decoding loops' default recorder: files nothing."""

    def step(self, alive=None) -> None:
        pass

    def finish(self, chunk, srcs, results) -> None:
        pass


NOT_RECORDING = _NotRecording()


def as_lists(per_token: list[dict], keys: int | None = None, queries: list[int] | None = None):
    """Per-token values (NumPy rows) -> {name: [one per token]}: a cross-attention
    row cut to the source's `keys`, a self-attention row to its `queries[t]` tokens so far (the
    real ones: left padding is before them)."""
    out: dict[str, list] = {}
    for t, values in enumerate(per_token):
        for name, v in values.items():
            a = v
            if name == "mean" or ".cross_attn." in name:
                a = a[:keys]
            elif ".self_attn." in name and queries is not None:
                a = a[a.shape[0] - queries[t] :]
            out.setdefault(name, []).append(a)
    return out


# -- words --------------------------------------------------------------------------------------


def words_of(readable: list[str], kind: str) -> list[int]:
    """Each piece's word number (-1: whitespace alone), from the pieces as a person reads them
    (`Runtime.readable`): a piece that starts with whitespace starts a word (SentencePiece's ▁,
    GPT-2's Ġ), a WordPiece "##" piece continues one, a word tokenizer's piece is a word."""
    out, w, gap = [], -1, True
    for p in readable:
        if kind != "word" and p and all(c in WHITESPACE for c in p):
            out.append(-1)
            gap = True
            continue
        starts = kind == "word" or gap or p.startswith(WHITESPACE)
        if kind == "wordpiece":
            starts = not p.startswith("##") or w < 0
        w += starts
        out.append(w)
        gap = False
    return out


def word_alignment(attention: np.ndarray, src_words: list[int], tgt_words: list[int]):
    """Target piece t -> source piece argmax_s A[t, s]; then "i-j" for source word i and target
    word j when some piece of j points into i (Pharaoh format, sorted, once each)."""
    if attention.size == 0:
        return [], []
    argmax = attention.argmax(-1).tolist()  # (T,)
    pairs = {
        (src_words[s], tgt_words[t])
        for t, s in enumerate(argmax)
        if src_words[s] >= 0 and tgt_words[t] >= 0
    }
    return argmax, [f"{i}-{j}" for i, j in sorted(pairs)]
