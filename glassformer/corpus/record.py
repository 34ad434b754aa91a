"""A model run over a corpus, the steps asked for kept in a store (`Model.record_corpus`,
`glassformer record-corpus`): SAELens's and TransformerLens's "activations on disk", from the
fast engine, on a laptop.

    m.record_corpus("tinyshakespeare", steps="decoder.1.ffn.hidden", out="runs/acts")
    store = open_store("runs/acts")      # corpus/store.py: the format and its reader

One document per line (blank lines are documents with no rows); a translator reads a TSV's
`side`: "source" (the encoder's input) or "target" (teacher-forced into the decoder after BOS).
A document longer than max_len is cut to it (counted in the index's "truncated").

How it runs:
  - the engine: PyTorch (float32, or float64 when the store is float64) in batches of
    `batch_size` documents, the steps read by forward hooks on its fast path (`hooks.py`), or,
    for a step no hook reads, through `activations.run_with_cache` (an intervention that reads
    each step unchanged); or the reference engine (float64), a document at a time;
  - only steps with one row per token position of the side read (residual streams, a head's Q, K,
    V or C, an FFN's hidden layer, logits): a step named outright that is not per position (a
    head's attention weights, (T, T)) is refused, a glob keeps its per-position matches;
  - shards of about `shard_rows` rows (whole documents; default: 64 MiB of values): memory holds
    one shard; each shard is built beside its name and swapped in whole (`store.write_shard`);
  - resumable: record.json (the settings) is written first, index.json last; a run killed after
    k shards, run again with the same arguments, checks each kept shard's sha256 and continues
    from shard k; shards are cut at the same documents, so it ends with the same store. A store
    of other settings (another model, corpus, steps or dtype) is refused in one line;
  - one writer per folder: the folder's lock (`files.locked`), held for the whole run;
  - under torchrun (WORLD_SIZE > 1; torch.distributed imported then only, gloo on the CPU):
    rank r takes the r-th contiguous block of documents (balanced by tokens), writes
    `shard-r{r}-XXXXX` under a lock of its own, and rank 0, after a barrier, writes the index
    (shards in rank order: the rows of a one-process run, in its order);
  - checked: `check_rows` rows, drawn with a seed, are recomputed by the float64 reference
    engine and compared with the store as written (read back from disk); the tolerance is
    1e-10 for float64, 1e-4 for float32 and half a quantization step more for int8, each scaled
    by the row's largest |value| (at least 1);
  - timed: the recording, and a plain forward pass of the same engine over the same documents'
    batches (up to `PLAIN_ROWS` rows of them), as rows per second.

Deliberately not here: the format (`store.py`), the engines' math, argument checks (the Model's
table, `arguments.py`), printing and the progress bar (the command line's callback).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassformer import activations, data, files
from glassformer.corpus import hooks
from glassformer.corpus import store as S
from glassformer.errors import GlassformerError, InputError, param
from glassformer.results import Result

RECORD = "record.json"
SHARD_BYTES = 64 * 2**20  # values per shard, by default
PLAIN_ROWS = 4096  # rows the plain forward pass is timed over
SIDES = ("text", "source", "target")


@dataclass(repr=False)
class Recorded(Result):
    """`Model.record_corpus`: the store written (`out`, open it with `store.open_store`), its
    rows, documents, shards, steps and dtype; `resumed` (shards kept from a killed run), the
    `check` of rows against the reference engine (rows, max_error, tolerance, ok), and the cost:
    seconds, rows per second, and a plain forward pass's rows per second over the same text."""

    out: str
    rows: int
    documents: int
    shards: int
    steps: dict
    dtype: str
    engine: str
    resumed: int
    truncated: int
    check: dict
    seconds: float
    rows_per_second: float
    plain_rows_per_second: float | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @property
    def slowdown(self) -> float | None:
        """The recording's time per row over the plain forward pass's (the goal: <= 1.3)."""
        p = self.plain_rows_per_second
        return None if not p or not self.rows_per_second else p / self.rows_per_second

    def _title(self) -> str:
        return f"{self.out}: {self.rows} rows of {self.documents} documents, {self.shards} shards"

    def _lines(self) -> list[tuple[str, str]]:
        c = self.check
        lines = [
            ("steps", ", ".join(f"{k} ({w})" for k, w in self.steps.items())),
            ("stored", f"{self.dtype}, from the {self.engine} engine"),
            (
                "checked",
                f"{c['rows']} rows against the float64 reference: max error "
                f"{c['max_error']:.2e} (tolerance {c['tolerance']:.0e} x row scale)",
            ),
        ]
        cost = f"{self.seconds:.2f} s, {self.rows_per_second:,.0f} rows/s"
        if self.slowdown is not None:
            cost += f"; a plain forward pass {self.plain_rows_per_second:,.0f} rows/s "
            cost += f"({self.slowdown:.2f}x)"
        return [*lines, ("cost", cost)]


def record_corpus(
    m,
    corpus: str | Path,
    steps,
    out: str | Path,
    *,
    engine: str | None = None,
    dtype: str = "float32",
    side: str | None = None,
    batch_size: int = 32,
    max_tokens: int | None = None,
    shard_rows: int | None = None,
    check_rows: int = 8,
    compare: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Recorded:
    """See `Model.record_corpus` (its arguments checked there); `m` is the Model's runtime."""
    rank, world = _world()
    out = Path(out)
    side = _side(m.cfg.arch, side)
    engine, compute = _engine(m, engine, dtype)
    text = data.read_text(corpus)
    docs = _documents(text, side, corpus)
    ids, src, truncated = _tokenize(m, docs, side, max_tokens)
    if not any(len(x) for x in ids):
        raise InputError(f"corpus {str(corpus)!r} has no text to record: give a non-empty file")
    first = next(d for d, x in enumerate(ids) if len(x))
    names, widths = _steps(m, steps, side, engine, compute, ids[first], src and src[first])
    bytes_per_row = sum(widths.values()) * (
        8 if dtype == "float64" else 4 if dtype != "int8" else 1
    )
    shard_rows = shard_rows or max(1, SHARD_BYTES // max(1, bytes_per_row))
    settings = {
        "format": S.FORMAT,
        "version": S.VERSION,
        "model": {"name": m.name, "fingerprint": S.fingerprint(m.cfg, m.params)},
        "config": m.cfg.to_dict(),
        "corpus": {
            "file": str(corpus),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "side": side,
        },
        "engine": engine,
        "compute": compute,
        "dtype": dtype,
        "steps": {n: {"width": w} for n, w in widths.items()},
        "max_tokens": max_tokens,
        "shard_rows": shard_rows,
        "world": world,
    }
    lo, hi = _block(ids, rank, world)
    run = _Run(m, names, side, engine, compute, dtype, batch_size, shard_rows, progress, src)
    lock = out if rank == 0 else out / f"rank-{rank}"
    with files.locked(lock, "record-corpus"):
        kept = _prepare(out, settings, rank, world)
        started = time.perf_counter()
        shards = run.shards(out, ids, lo, hi, kept, rank if world > 1 else None)
        seconds = time.perf_counter() - started
        if world > 1:
            _barrier()
        index = None
        if rank == 0:
            all_shards = shards if world == 1 else _all_ranks(out, world)
            index = _index(settings, all_shards, len(docs), truncated)
            S.write_json(out, S.PIECES, m.readable(list(range(m.cfg.vocab_size))))
            S.write_json(out, S.INDEX, index)
        if world > 1:
            _barrier()
    store = S.open_store(out)
    check = _check(run, store, ids, dtype, check_rows, lo, hi)
    done = sum(s["rows"] for s in shards[len(kept) :])
    plain = run.plain_rate(ids, lo, hi) if engine == "torch" and compare else None
    return Recorded(
        str(out),
        store.rows,
        store.documents,
        len(store.shards()),
        dict(widths),
        dtype,
        engine,
        len(kept),
        truncated,
        check,
        seconds,
        done / seconds if seconds > 0 else 0.0,
        plain,
    )


# -- the corpus -----------------------------------------------------------------------------------


def _world() -> tuple[int, int]:
    """(rank, world size) from torchrun's environment; torch.distributed joined when world > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    rank = int(os.environ.get("RANK", "0") or 0)
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
    return rank, world


def _barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


def _side(arch: str, side: str | None) -> str:
    if arch == "encoder-decoder":
        side = side or "source"
        if side == "text":
            raise InputError(
                f"{param('side', side)}: a translator reads side='source' or side='target'"
            )
        return side
    if side not in (None, "text"):
        raise InputError(
            f"{param('side', side)}: only an encoder-decoder reads a TSV's source or target "
            f"side; this model is arch={arch!r}: drop {param('side')}"
        )
    return "text"


def _engine(m, engine: str | None, dtype: str) -> tuple[str, str]:
    """(engine, the precision it computes in): float64 for a float64 store, else float32."""
    engine = engine or ("torch" if m.torch("float32") is not None else "reference")
    if engine == "reference":
        return "reference", "float64"
    return "torch", "float64" if dtype == "float64" else "float32"


def _documents(text: str, side: str, corpus) -> list[tuple[str, str]]:
    """The documents, one a line: (text, "") or a translator's (source, target) of a TSV line
    (a line without a tab: a source alone, for side="source")."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if side == "text":
        return [(line, "") for line in lines]
    out = []
    for n, line in enumerate(lines, 1):
        fields = line.split("\t")
        if line.strip() and len(fields) < 2 and side == "target":
            raise InputError(
                f"{corpus}, line {n}: no tab; {param('side', 'target')} reads source<TAB>target "
                "lines (the target teacher-forced after its source)"
            )
        out.append((fields[0], fields[1] if len(fields) > 1 else ""))
    return out


def _tokenize(m, docs, side: str, max_tokens: int | None):
    """(the ids whose positions are rows, a target side's source ids or None, how many documents
    were cut to max_len). A blank document has no rows, nor those after `max_tokens` rows (the
    last one reached is cut); a target side reads BOS first, as the decoder does when
    teacher-forced. The text is UTF-8 already (`data.read_text`): the tokenizer is called as
    `Model.encode` calls it, without its checks per line."""
    tok, limit = m.need_tokenizer(), m.cfg.max_len
    rows, src, cut = [], [] if side == "target" else None, 0
    left = max_tokens if max_tokens is not None else float("inf")
    empty = np.zeros(0, np.int32)

    def encoded(text: str, start: list) -> np.ndarray:
        nonlocal cut
        x = start + tok.encode_for_model(text)[0]
        cut += len(x) > limit
        return np.asarray(x[:limit], np.int32)

    bos = m.bos() if side == "target" else []
    for text, target in docs:
        blank = left <= 0 or not text.strip() or (side == "target" and not target.strip())
        x = empty if blank else encoded(target if side == "target" else text, bos)
        x = x[: int(min(len(x), left))]
        left -= len(x)
        rows.append(x)
        if src is not None:
            src.append(empty if not len(x) else encoded(text, []))
    return rows, src, cut


def _block(ids: list[np.ndarray], rank: int, world: int) -> tuple[int, int]:
    """Rank `rank`'s contiguous documents [lo, hi): cut where the tokens before reach r/world."""
    if world == 1:
        return 0, len(ids)
    before = np.concatenate([[0], np.cumsum([len(x) for x in ids])])
    total = before[-1]
    cuts = [int(np.searchsorted(before, total * r / world, side="left")) for r in range(world)]
    cuts = [min(c, len(ids)) for c in cuts] + [len(ids)]
    return cuts[rank], cuts[rank + 1]


# -- the steps ------------------------------------------------------------------------------------


def _steps(m, steps, side: str, engine: str, compute: str, first, first_src):
    """(the step names kept, {name: width}): the globs' per-position matches on one document."""
    globs = activations.step_globs(steps)
    srcs = None if first_src is None else [first_src]
    every = _cache(m, [first], ["*"], side, engine, compute, 1, srcs)  # one document, every step
    stack = "encoder" if m.cfg.arch == "encoder" or side == "source" else "decoder"
    per = {n: every[n].shape[-1] for n in every.names if _per_position(n, every[n], m.cfg, stack)}
    for g in globs:
        matched = [n for n in every.names if fnmatch.fnmatchcase(n, g)]
        if not matched:
            raise InputError(
                f"{param('record_corpus.steps', g)} matches no step of {m.name} on the {engine} "
                f"engine; {activations.hint(g, list(every.names))}"
            )
        if not any(n in per for n in matched):
            shown = ", ".join(matched[:3]) + (" ..." if len(matched) > 3 else "")
            of = f" of the {side} side" if side != "text" else ""
            like = [n for n in every.names if _per_position(n, every[n], m.cfg, stack)]
            like = [n for n in like if n.endswith((".0.out", ".0.ffn.hidden", "head0.C"))][:3]
            raise InputError(
                f"{param('record_corpus.steps', g)}: {shown} {'is' if len(matched) == 1 else 'are'}"
                f" not one row per token position{of}{_why(matched)}; a store "
                f"keeps steps like {', '.join(like)}"
            )
    names = [n for n in every.names if n in per and any(fnmatch.fnmatchcase(n, g) for g in globs)]
    return names, {n: per[n] for n in names}


def _why(names: list[str]) -> str:
    maps = any(n.rsplit(".", 1)[-1] in ("A", "scores", "scaled", "mask") for n in names)
    return " (attention weights are (T, T))" if maps else ""


def _per_position(name: str, value: np.ndarray, cfg, stack: str) -> bool:
    """A step with one row of values per token of `stack`: (1, T, width) in a one-text cache."""
    return activations.token_axes(name, cfg.arch) == (stack,) and value.ndim == 3


def _cache(m, ids, names, side, engine, compute, batch_size, src=None):
    """The steps `names` of documents `ids` ((T,) each; a target side's with their `src`)."""
    texts, targets = [list(map(int, x)) for x in ids], None
    if side == "target":  # the decoder reads the target after BOS, the encoder its source
        texts, targets = [list(map(int, x)) for x in src], texts
    dtype = None if engine == "reference" else compute
    return activations.run_with_cache(m, texts, names, targets, engine, dtype, batch_size)


class _Run:
    """The shards of one rank: documents batched through the engine, rows kept in memory until a
    shard's worth, then written whole."""

    def __init__(
        self, m, names, side, engine, compute, dtype, batch_size, shard_rows, progress, src
    ):
        self.m, self.names, self.side, self.src = m, names, side, src
        self.engine, self.compute, self.dtype = engine, compute, dtype
        self.batch_size, self.shard_rows, self.progress = batch_size, shard_rows, progress

    def groups(self, ids, lo: int, hi: int) -> list[tuple[int, int]]:
        """[first, end) documents of each shard: whole documents until shard_rows are reached."""
        out, start, rows = [], lo, 0
        for d in range(lo, hi):
            rows += len(ids[d])
            if rows >= self.shard_rows:
                out.append((start, d + 1))
                start, rows = d + 1, 0
        if start < hi and (rows or not out):
            out.append((start, hi))
        return out

    def shards(self, out: Path, ids, lo: int, hi: int, kept: list, rank) -> list[dict]:
        groups = self.groups(ids, lo, hi)
        done = list(kept)
        for k, (first, end) in enumerate(groups):
            if k < len(done):
                if (done[k]["first_document"], done[k]["documents"]) != (first, end - first):
                    raise S.StoreError(f"{out}: shard {k} does not hold the documents it should")
                continue
            rows = self.rows(ids, first, end)
            arrays = S.shard_arrays(rows, rows["steps"], self.dtype)
            meta = {"rows": len(rows["tokens"]), "first_document": first, "documents": end - first}
            try:
                done.append(
                    {
                        "name": S.shard_name(k, rank),
                        **S.write_shard(out, S.shard_name(k, rank), arrays, meta),
                    }
                )
            except files.FileError as e:
                raise files.FileError(
                    f"{e}; the {len(done)} complete shards are kept: run the same command again "
                    "to continue"
                ) from None
            if self.progress is not None:
                self.progress(end - lo, hi - lo)
        return done

    def rows(self, ids, first: int, end: int) -> dict:
        """One shard's rows: tokens, document, position, and each step's (n, width) values."""
        docs = [d for d in range(first, end) if len(ids[d])]
        lengths = [len(ids[d]) for d in docs]
        steps: dict[str, np.ndarray] = {}  # each (rows, ...) allocated once, filled batch by batch
        row = 0
        for at in range(0, len(docs), self.batch_size):
            batch = docs[at : at + self.batch_size]
            cache = self.cache([ids[d] for d in batch], batch, self.engine, self.compute)
            for n in self.names:
                v = cache[n]  # (B, T, ...)
                if n not in steps:
                    steps[n] = np.empty((sum(lengths), *v.shape[2:]), v.dtype)
                r = row
                for b, d in enumerate(batch):
                    steps[n][r : r + len(ids[d])] = v[b, : len(ids[d])]
                    r += len(ids[d])
            row += sum(len(ids[d]) for d in batch)
        if not docs:  # a shard of blank lines only (a rank's block of them): nothing to write
            raise S.StoreError(
                f"documents {first}..{end - 1} hold no tokens: a shard needs at least one row "
                "(run with fewer processes, or leave out the blank lines)"
            )
        return {
            "tokens": np.concatenate([ids[d] for d in docs] or [np.zeros(0, np.int32)]),
            "document": np.repeat(np.asarray(docs, np.int32), lengths),
            "position": np.concatenate([np.arange(k, dtype=np.int32) for k in lengths] or [[]]),
            "steps": steps,
        }

    def cache(self, ids, docs, engine, compute):
        """{name: (B, T, width)} of a batch of documents: by hooks on the fast path when every
        step allows (the PyTorch engine in float32 or float64), else `run_with_cache`."""
        src = None if self.src is None else [self.src[d] for d in docs]
        fast = engine == "torch" and all(hooks.hooked(n) for n in self.names)
        if not fast:
            return _cache(self.m, ids, self.names, self.side, engine, compute, self.batch_size, src)
        return hooks.read(self.m, self.m.torch(compute), self.names, self.stacks(ids, src))

    def stacks(self, ids, src) -> dict:
        """The engine's input of a batch: {stack: [ids per text]}."""
        seqs, m = [list(map(int, x)) for x in ids], self.m
        if m.cfg.arch != "encoder-decoder":
            return {"encoder" if m.cfg.arch == "encoder" else "decoder": seqs}
        if self.side == "source":
            return {"encoder": seqs, "decoder": [m.bos() for _ in seqs]}
        return {"encoder": [list(map(int, x)) for x in src], "decoder": seqs}

    def plain_rate(self, ids, lo: int, hi: int) -> float | None:
        """Rows per second of the engine's plain forward pass (the one `run_with_cache` drives,
        no step read) over the same batches of the first documents, up to PLAIN_ROWS rows."""
        model = self.m.torch(self.compute)
        docs, rows = [], 0
        for d in range(lo, hi):
            if len(ids[d]) and rows < PLAIN_ROWS:
                docs.append(d)
                rows += len(ids[d])
        forward = activations.torch_forward(model, self.m.cfg, self.m.params)
        started = time.perf_counter()
        for at in range(0, len(docs), self.batch_size):
            batch = docs[at : at + self.batch_size]
            src = None if self.src is None else [self.src[d] for d in batch]
            forward(self.stacks([ids[d] for d in batch], src))
        seconds = time.perf_counter() - started
        return rows / seconds if seconds > 0 and rows else None


# -- the folder -----------------------------------------------------------------------------------


def _prepare(out: Path, settings: dict, rank: int, world: int) -> list[dict]:
    """Check what `out` holds (a complete store, another run's settings: refused), write
    record.json (rank 0), and return this rank's complete shards from a killed run (each
    checked against its sha256). Under torchrun the other ranks wait until rank 0 has done so,
    then check its record.json against their own settings."""
    if world > 1 and rank > 0:
        _barrier()
        _same(out, files.read_json(files.member(out, RECORD), f"{out}'s {RECORD}"), settings)
        return S.complete_shards(out, rank)
    if out.exists() and not out.is_dir():
        raise GlassformerError(f"{out} is a file; give a folder for the store")
    if out.is_dir() and files.member(out, S.INDEX, required=False):
        raise GlassformerError(
            f"{out} already holds a complete store; choose another folder, or remove it to "
            "record again"
        )
    found = files.member(out, RECORD, required=False) if out.is_dir() else None
    if found is not None:
        _same(out, files.read_json(found, f"{out}'s {RECORD}"), settings)
    elif out.is_dir() and any(S.SHARD.fullmatch(p.name) for p in out.iterdir()):
        raise GlassformerError(f"{out} holds shards but no {RECORD}: remove it to record again")
    elif out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir()):
        raise GlassformerError(f"{out} is a folder of other files; give a new or empty folder")
    else:
        S.write_json(out, RECORD, settings)
    if world > 1:
        _barrier()
    return S.complete_shards(out, 0 if world > 1 else None)


def _same(out: Path, was, now: dict) -> None:
    """Refuse to continue a store recorded with other settings, naming the first that differs."""
    if not isinstance(was, dict):
        raise GlassformerError(f"{out}/{RECORD} is not a recording's settings; remove the folder")
    if was.get("model", {}).get("fingerprint") != now["model"]["fingerprint"]:
        raise GlassformerError(
            f"{out} is a store recorded from another model ({was.get('model', {}).get('name')}, "
            f"other config or weights than {now['model']['name']}): give that model to continue "
            "it, or another folder"
        )
    for key in (
        "corpus",
        "steps",
        "dtype",
        "engine",
        "compute",
        "max_tokens",
        "shard_rows",
        "world",
    ):
        if was.get(key) != now[key]:
            raise GlassformerError(
                f"{out} was being recorded with {key} {_short(was.get(key))}, not "
                f"{_short(now[key])}: run with the same arguments to continue it, or give "
                "another folder"
            )


def _short(v) -> str:
    s = (
        repr(v)
        if not isinstance(v, dict)
        else ", ".join(map(str, v))
        if "sha256" not in v
        else str(v)
    )
    return s if len(s) < 120 else s[:117] + "..."


def _all_ranks(out: Path, world: int) -> list[dict]:
    """Every rank's shards, in rank order (each rank checked its own as it resumed)."""
    return [s for r in range(world) for s in S.complete_shards(out, r, verify=False)]


def _index(settings: dict, shards: list[dict], documents: int, truncated: int) -> dict:
    keep = ("name", "rows", "first_document", "documents")
    listed = []
    for s in shards:
        m = S.SHARD.fullmatch(s["name"])
        listed.append({k: s[k] for k in keep} | {"rank": int(m[1] or 0)})
    index = {k: v for k, v in settings.items() if k not in ("shard_rows",)}
    return index | {
        "shards": listed,
        "rows": sum(s["rows"] for s in shards),
        "documents": documents,
        "truncated": truncated,
    }


# -- the check ------------------------------------------------------------------------------------

TOLERANCE = {"float64": 1e-10, "float32": 1e-4, "int8": 1e-4}


def _check(run, store, ids, dtype, n_rows, lo, hi) -> dict:
    """`n_rows` rows of this rank's documents, drawn with seed 0, against the float64 reference
    engine run on their documents alone; the store read back from disk."""
    rows = np.arange(store.rows)
    doc_of = store.row_files("document")
    mine = rows[(doc_of >= lo) & (doc_of < hi)]
    pick = np.random.default_rng(0).choice(mine, size=min(n_rows, len(mine)), replace=False)
    worst, ok = 0.0, True
    for row in sorted(int(r) for r in pick):
        shard, i = store.locate(row)
        d = int(shard.array("document")[i])
        p = int(shard.array("position")[i])
        ref = run.cache([ids[d]], [d], "reference", "float64")
        for n in run.names:
            want = np.asarray(ref[n][0, p], np.float64)
            got = shard.floats(n, slice(i, i + 1))[0].astype(np.float64)
            if dtype == "float64":
                got = np.asarray(shard.array(n)[i], np.float64)
            scale = max(1.0, float(np.abs(want).max()))
            err = float(np.abs(got - want).max()) / scale
            limit = TOLERANCE[dtype] + (0.5 / 127 if dtype == "int8" else 0.0)
            worst, ok = max(worst, err), ok and err <= limit
    return {"rows": len(pick), "max_error": worst, "tolerance": TOLERANCE[dtype], "ok": ok}
