"""A store of activations on disk: the format, written and read (`open_store`).

A store is a folder that `glassformer record-corpus` (`Model.record_corpus`, `corpus/record.py`)
fills with the chosen steps of a model run over a corpus, one row per token position of one
document, in shards of bounded size, every array a `.npy` file that NumPy maps into memory
(`np.load(mmap_mode="r")`) so that a reader never needs the whole store in memory. The layout,
format "glassformer-activations" version 1:

    DIR/index.json            written last, atomically (rank 0 under torchrun): the store is
                              complete when it is there, and only then does `open_store` read it
    DIR/record.json           the run's settings, written first: what a resumed run must match
    DIR/pieces.json           each token id's piece as a person reads it (["T", "o", "␣", ...])
    DIR/shard-00000/          one folder per shard (`shard-r{rank}-00000` under torchrun), built
                              beside its name and swapped in whole (`files.building`): a shard is
                              complete or absent, never partial
        shard.json            {"rows", "first_document", "documents", "files": {name:
                              {"sha256", "shape", "dtype"}}}: what `Store.verify` checks
        tokens.npy            int32 (n,): the token id at each row
        document.npy          int32 (n,): the document (0-based line of the corpus) of each row
        position.npy          int32 (n,): the row's position in its document (from 0)
        <step>.npy            (n, width) per step: float32 or float64, or int8 with
        <step>.scale.npy      float32 (n,): the row's absmax / 127 (value = int8 * scale)

index.json holds:

    format      "glassformer-activations"
    version     1
    model       {"name": the model's name, "fingerprint": sha256 of its Config and weights
                (`fingerprint`): a store is refused for, or resumed with, another model}
    config      the model's Config as a dict
    corpus      {"file": the corpus as given, "sha256": of its bytes, "side": "text" (one document
                per line), "source" or "target" (a translator's TSV: the source side read by the
                encoder, or the target side teacher-forced into the decoder after BOS)}
    engine      "torch" or "reference"; compute: the engine's precision ("float32", "float64")
    dtype       how values are stored: "float32", "float64" or "int8"
    steps       {step name: {"width": the values per row}}, in the engine's order
    shards      [{"name", "rows", "first_document", "documents", "rank"}], in row order: shard k
                holds documents first_document .. first_document + documents - 1 (a blank line is
                a document with no rows)
    rows        the rows of all shards; documents: the corpus's documents (lines) read
    truncated   how many documents were longer than the model's max_len and cut to it
    max_tokens  the cap on rows asked for (null: none); world: the processes that wrote it

Row order is document order, then position: a run split over ranks takes contiguous blocks of
documents, so its shards, in the index's order, hold the rows of a one-process run.

Deliberately not here: running a model (`corpus/record.py`), ranking units (`corpus/top.py`),
printing. Every file is written through `files` (atomic, no link followed) and every file read
from a store through `files.member`.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.errors import GlassformerError

FORMAT = "glassformer-activations"
VERSION = 1
DTYPES = ("float32", "float64", "int8")
INDEX = "index.json"
PIECES = "pieces.json"
SHARD_META = "shard.json"
ROW_FILES = ("tokens", "document", "position")  # int32 (n,) each
SHARD = re.compile(r"shard-(?:r(\d+)-)?(\d{5})")
CHUNK_BYTES = 16 * 2**20  # float32 values per chunk that `Store.chunks` reads into memory


class StoreError(GlassformerError):
    """A store that cannot be read or written as what it should be."""


def fingerprint(cfg, params) -> str:
    """sha256 of the Config (as JSON, keys sorted) and every weight (name, dtype, shape, bytes,
    in name order): two models with the same fingerprint compute the same values."""
    h = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode())
    for name in sorted(params):
        a = np.ascontiguousarray(np.asarray(params[name], dtype=np.float64))
        h.update(f"{name}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def shard_name(k: int, rank: int | None = None) -> str:
    """`shard-00003`, or `shard-r1-00003` for rank 1 of a run under torchrun."""
    return f"shard-{k:05d}" if rank is None else f"shard-r{rank}-{k:05d}"


# -- writing ------------------------------------------------------------------------------------


def quantize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 (n, w), float32 scale (n,)): each row scaled by its absmax / 127, rounded."""
    v = np.asarray(values, dtype=np.float32)
    scale = (np.abs(v).max(axis=1) / 127.0).astype(np.float32) if v.size else np.zeros(len(v))
    safe = np.where(scale > 0, scale, 1.0)[:, None]
    q = np.clip(np.rint(v / safe), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def shard_arrays(rows: dict[str, np.ndarray], steps: dict[str, np.ndarray], dtype: str) -> dict:
    """{file stem: array} of one shard: the row files as int32, each step stored in `dtype`."""
    out = {k: np.ascontiguousarray(rows[k], dtype=np.int32) for k in ROW_FILES}
    for name, v in steps.items():
        if dtype == "int8":
            out[name], out[f"{name}.scale"] = quantize(v)
        else:
            out[name] = np.ascontiguousarray(v, dtype=dtype)
    return out


def write_shard(folder: Path, name: str, arrays: dict[str, np.ndarray], meta: dict) -> dict:
    """Write the shard `folder/name` whole: its arrays (`shard_arrays`) and shard.json (`meta`
    plus each file's sha256, shape and dtype), built beside it and swapped in (`files.building`).
    Returns shard.json's content."""
    described = {}
    with files.building(Path(folder) / name) as tmp:
        for stem, a in arrays.items():
            described[f"{stem}.npy"] = _save_npy(tmp / f"{stem}.npy", a)
        meta = {**meta, "files": described}
        _create(tmp / SHARD_META, json.dumps(meta, indent=1).encode())
    return meta


def _save_npy(path: Path, a: np.ndarray) -> dict:
    """One .npy file created in a shard's fresh temporary folder (O_EXCL | O_NOFOLLOW)."""
    h = hashlib.sha256()

    class _Hashing:  # the bytes as written, hashed on the way
        def __init__(self, fh):
            self.fh = fh

        def write(self, data) -> int:
            h.update(data)
            return self.fh.write(data)

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, 0o600), "wb") as fh:
        np.lib.format.write_array(_Hashing(fh), a, allow_pickle=False)
    return {"sha256": h.hexdigest(), "shape": list(a.shape), "dtype": str(a.dtype)}


def _create(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags, 0o600), "wb") as fh:
        fh.write(data)


def write_json(folder: Path, name: str, data) -> Path:
    """index.json, record.json or pieces.json, replaced atomically (`files.write_file`)."""
    return files.write_file(Path(folder) / name, (json.dumps(data, indent=1) + "\n").encode())


def complete_shards(folder: Path, rank: int | None = None, verify: bool = True) -> list[dict]:
    """The shards a (killed) run of `rank` left in `folder`, in order, each read (and with
    `verify`, its files' sha256 checked): shard k is there for every k below their count, or the
    store is refused."""
    folder = Path(folder)
    found = {}
    for p in folder.iterdir() if folder.is_dir() else []:
        m = SHARD.fullmatch(p.name)
        if m and (None if m[1] is None else int(m[1])) == rank:
            found[int(m[2])] = p.name
    if sorted(found) != list(range(len(found))):
        missing = min(set(range(len(found))) - set(found))
        raise StoreError(
            f"{folder} has {len(found)} shards but not {shard_name(missing, rank)}; the store was "
            "changed by hand: remove the folder and record again"
        )
    out = []
    for k in range(len(found)):
        shard = Shard.read(folder, found[k])
        if verify:
            shard.verify()
        out.append({"name": shard.name, **shard.meta})
    return out


# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Rows `start` .. `start + len(tokens)` of a store, with one step's values as float32."""

    start: int
    tokens: np.ndarray  # int32 (n,)
    document: np.ndarray  # int32 (n,)
    position: np.ndarray  # int32 (n,)
    values: np.ndarray  # float32 (n, width)


@dataclass
class Shard:
    """One complete shard, its arrays memory-mapped (read-only) as they are asked for."""

    folder: Path
    name: str
    meta: dict
    _maps: dict = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, folder: Path, name: str) -> Shard:
        path = files.member(folder, f"{name}/{SHARD_META}")
        meta = files.read_json(path, f"{name}'s shard.json")
        ok = isinstance(meta, dict) and isinstance(meta.get("files"), dict)
        ok = ok and all(type(meta.get(k)) is int for k in ("rows", "first_document", "documents"))
        if not ok:
            raise StoreError(f"{path} is not a shard's description; {_AGAIN}")
        return cls(Path(folder), name, meta)

    @property
    def rows(self) -> int:
        return self.meta["rows"]

    def array(self, stem: str) -> np.ndarray:
        """The file `stem`.npy of this shard, memory-mapped, checked against shard.json."""
        if stem not in self._maps:
            file = f"{stem}.npy"
            want = self.meta["files"].get(file)
            if want is None:
                raise StoreError(f"{self.folder}/{self.name} holds no {file}; {_AGAIN}")
            path = files.member(self.folder, f"{self.name}/{file}")
            try:
                a = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise StoreError(f"{path} is corrupt or truncated ({e}); {_AGAIN}") from None
            if list(a.shape) != want["shape"] or str(a.dtype) != want["dtype"]:
                raise StoreError(
                    f"{path} holds {a.dtype} {list(a.shape)} where its shard.json says "
                    f"{want['dtype']} {want['shape']}; {_AGAIN}"
                )
            self._maps[stem] = a
        return self._maps[stem]

    def close(self) -> None:
        """Unmap the arrays mapped so far (they are mapped again when next asked for)."""
        self._maps.clear()

    def floats(self, step: str, rows: slice = slice(None)) -> np.ndarray:
        """Rows of `step` as float32 in memory (int8 multiplied back by its scale)."""
        v = self.array(step)[rows]
        if v.dtype == np.int8:
            return v.astype(np.float32) * self.array(f"{step}.scale")[rows][:, None]
        return np.array(v, dtype=np.float32)  # a copy: nothing keeps the map alive

    def verify(self) -> None:
        """Every file's sha256 against shard.json (reads the shard through once)."""
        for file, want in self.meta["files"].items():
            path = files.member(self.folder, f"{self.name}/{file}")
            h = hashlib.sha256()
            with files.open_regular(path) as fh:
                while block := fh.read(1 << 22):
                    h.update(block)
            if h.hexdigest() != want["sha256"]:
                raise StoreError(
                    f"{path} is corrupt (its sha256 differs from shard.json); {_AGAIN}"
                )


_AGAIN = "record the store again (a resumed record-corpus rewrites no complete shard: remove it)"


class Store:
    """A complete store, read through its index (`open_store`). See the module docstring."""

    def __init__(self, path: Path, index: dict, pieces: list[str] | None):
        self.path, self.index, self.pieces = path, index, pieces
        self._shards = [Shard.read(path, s["name"]) for s in index["shards"]]
        for s, entry in zip(self._shards, index["shards"], strict=True):
            if s.rows != entry["rows"]:
                raise StoreError(f"{path}/{s.name} holds {s.rows} rows, the index {entry['rows']}")
        self._starts = list(np.cumsum([0] + [s.rows for s in self._shards])[:-1])

    @property
    def steps(self) -> dict[str, int]:
        """{step name: width}, in the engine's order."""
        return {k: v["width"] for k, v in self.index["steps"].items()}

    @property
    def rows(self) -> int:
        return self.index["rows"]

    @property
    def documents(self) -> int:
        return self.index["documents"]

    @property
    def dtype(self) -> str:
        return self.index["dtype"]

    def shards(self) -> list[Shard]:
        return list(self._shards)

    def check_step(self, step: str) -> str:
        if step not in self.index["steps"]:
            close = ", ".join(list(self.steps)[:6])
            raise StoreError(f"{self.path} holds no step {step!r}; it holds {close}")
        return step

    def chunks(self, step: str, rows: int | None = None) -> Iterator[Chunk]:
        """The store's rows in order, `rows` at a time (default: CHUNK_BYTES of float32 values),
        with `step`'s values as float32: memory holds one chunk, and the address space one
        shard's maps (each shard is unmapped once read), whatever the store's size."""
        rows = rows or max(1, CHUNK_BYTES // (4 * self.steps[self.check_step(step)]))
        for start, s in zip(self._starts, self._shards, strict=True):
            for a in range(0, s.rows, rows):
                cut = slice(a, min(a + rows, s.rows))
                yield Chunk(
                    int(start) + a,
                    *(np.array(s.array(k)[cut]) for k in ROW_FILES),
                    s.floats(step, cut),
                )
            s.close()

    def column(self, step: str) -> np.ndarray:
        """All rows of `step` as one float32 array in memory (rows, width): for a store that fits
        in memory; `chunks` for one that does not."""
        width = self.steps[self.check_step(step)]
        out = np.empty((self.rows, width), dtype=np.float32)
        for c in self.chunks(step):
            out[c.start : c.start + len(c.values)] = c.values
        return out

    def row_files(self, stem: str) -> np.ndarray:
        """tokens, document or position of every row, in memory (int32, 4 bytes a row)."""
        out = np.concatenate([np.array(s.array(stem)) for s in self._shards] or [[]])
        for s in self._shards:
            s.close()
        return out.astype(np.int32)

    def locate(self, row: int) -> tuple[Shard, int]:
        if not 0 <= row < self.rows:
            raise StoreError(f"row {row} is not in {self.path} (rows 0..{self.rows - 1})")
        k = bisect.bisect_right(self._starts, row) - 1
        return self._shards[k], row - int(self._starts[k])

    def context(self, row: int, before: int = 20, after: int = 0) -> dict:
        """The tokens around `row` within its document: {"document", "position", "ids",
        "pieces", "at" (the row's index in ids)}, at most `before` tokens before and `after`
        after it (read from the stored tokens: no corpus or model needed)."""
        shard, i = self.locate(row)
        doc = int(shard.array("document")[i])
        pos = int(shard.array("position")[i])
        lo, hi = max(0, i - min(before, pos)), i + 1
        docs = shard.array("document")
        while hi < shard.rows and hi <= i + after and int(docs[hi]) == doc:
            hi += 1
        ids = [int(t) for t in shard.array("tokens")[lo:hi]]
        pieces = [self.piece(t) for t in ids]
        return {"document": doc, "position": pos, "ids": ids, "pieces": pieces, "at": i - lo}

    def piece(self, token: int) -> str:
        p = self.pieces
        return p[token] if p is not None and 0 <= token < len(p) else f"#{token}"

    def check_model(self, fingerprint_: str, name: str = "the model") -> None:
        """Refuse a model other than the one that recorded the store."""
        if fingerprint_ != self.index["model"]["fingerprint"]:
            raise StoreError(
                f"{self.path} was recorded from {self.index['model']['name']}, not {name} (their "
                "config or weights differ); use that model, or record the store again"
            )

    def verify(self) -> None:
        """Every shard's files against their sha256 (reads the whole store once)."""
        for s in self._shards:
            s.verify()

    def __repr__(self) -> str:
        steps = ", ".join(f"{k} ({w})" for k, w in list(self.steps.items())[:4])
        more = f" and {len(self.steps) - 4} more" if len(self.steps) > 4 else ""
        return (
            f"<Store {self.path}: {self.rows} rows of {self.documents} documents in "
            f"{len(self._shards)} shards, {self.dtype}, from {self.index['model']['name']}: "
            f"{steps}{more}>"
        )


def open_store(path: str | Path) -> Store:
    """The complete store in folder `path`, its index checked; or one StoreError line (no
    index: the recording did not finish; another format or version; a shard missing, corrupt or
    truncated: found when its arrays are first mapped, `Store.verify` to check every byte)."""
    path = Path(path)
    if not path.is_dir():
        raise StoreError(f"{path} is not a folder of activations; record one with record-corpus")
    if files.member(path, INDEX, required=False) is None:
        raise StoreError(
            f"{path} has no {INDEX}: its recording did not finish; run the same record-corpus "
            "command again to finish it"
        )
    index = files.read_json(files.member(path, INDEX), f"{path}'s {INDEX}")
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise StoreError(f"{path}/{INDEX} is not a glassformer activation store's index")
    if index.get("version") != VERSION:
        raise StoreError(
            f"{path} is a store of version {index.get('version')}; this glassformer reads "
            f"version {VERSION}: record it again"
        )
    keys = ("model", "config", "corpus", "dtype", "steps", "shards", "rows", "documents")
    if any(k not in index for k in keys) or index["dtype"] not in DTYPES:
        raise StoreError(f"{path}/{INDEX} lacks some of {', '.join(keys)}; {_AGAIN}")
    pieces_file = files.member(path, PIECES, required=False)
    pieces = None if pieces_file is None else files.read_json(pieces_file, f"{path}'s {PIECES}")
    return Store(path, index, pieces)
