"""Corpora -> batches: the shipped corpora, careful file reading, and three batch sources.

`read_text` and `read_pairs` read a shipped corpus by name (`SHIPPED`) or any UTF-8 file (gzip
transparently) and refuse a bad file with its name and line number; a path that is not a regular
file (a FIFO, a socket, a device such as /dev/zero) is refused before it is opened. Three batch
sources turn token ids into NumPy batches, each with `state()` / `set_state()` so a resumed run
draws exactly the batches an uninterrupted one would:

- `LMBatches`: random windows of one token stream, y = x shifted by one (nanoGPT's get_batch);
- `PairBatches`: translation pairs grouped by length under a padded-token budget;
- `ClassBatches`: sequences with one label each.

Padding is on the right; `valid` masks are True on real tokens (the library's mask meaning).

Deliberately not here: tokenization (`tokenizer/`), torch tensors or devices (the training loop
converts), downloads (everything used is shipped or given as a path), and sharding across
processes.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.errors import GlassformerError

_DIR = Path(__file__).parent / "data"
SHIPPED = {
    "tinyshakespeare": _DIR / "tinyshakespeare.txt.gz",
    "eng-spa": _DIR / "eng-spa.tsv.gz",
    "eng-spa-valid": _DIR / "eng-spa-valid.tsv.gz",
}
_GZIP_MAGIC = b"\x1f\x8b"
# The most text one file gives (after gzip is undone): read in chunks and refused as soon as it is
# passed, so that a small .gz that inflates to gigabytes never fills the memory.
MAX_TEXT_BYTES = 256 * 2**20
_CHUNK = 2**20
_LONE_CR = re.compile("\r(?!\n)")


class DataError(GlassformerError):
    """A corpus file that cannot be used, or batching settings that do not fit the data."""


# -- files ---------------------------------------------------------------------------------------


def resolve(name_or_path: str | Path) -> Path:
    """The file behind a shipped corpus name ("tinyshakespeare", "eng-spa", ...) or a path."""
    if isinstance(name_or_path, str) and name_or_path in SHIPPED:
        path = SHIPPED[name_or_path]
        if not path.is_file():
            raise DataError(f"shipped corpus {name_or_path!r} is missing ({path}); reinstall")
        return path
    path = Path(name_or_path)
    if path.is_dir():
        raise DataError(f"{path} is a directory; give a text file or a shipped corpus name")
    if os.path.exists(path):  # a FIFO, a socket or a device is refused as what it is
        return _regular(path)
    raise DataError(
        f"{str(name_or_path)!r} is neither a shipped corpus "
        f"({', '.join([*SHIPPED, *GENERATED])}) nor an "
        "existing file; give one of those names or the path of a file"
    )


def repeated_segments(n_chars: int = 300_000, seed: int = 0, lengths=(4, 12), gaps=(0, 16)) -> str:
    """The generated corpus "repeats": random segments of letters and digits, each written twice
    with random letters between the copies ("q3XzK7 b9 q3XzK7 ..." without the spaces), segment
    lengths uniform in `lengths`, gaps in `gaps`, `seed` fixed. The second copy of a segment is
    predictable only by finding the first, at a distance that varies from segment to segment:
    the task on which an induction head forms (Olsson et al. 2022 train on repeated random
    tokens). No text is sampled from anywhere: numpy's PCG64 with this seed draws it, the same
    on every machine."""
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    rng = np.random.default_rng(seed)

    def letters(lo: int, hi: int) -> str:
        return "".join(rng.choice(alphabet, int(rng.integers(lo, hi + 1))))

    parts, n = [], 0
    while n < n_chars:
        segment, gap = letters(*lengths), letters(*gaps)
        parts.append(segment + gap + segment)
        n += len(parts[-1])
    return "".join(parts)[:n_chars]


GENERATED = {"repeats": repeated_segments}  # corpora made on the spot, by name


def read_text(name_or_path: str | Path) -> str:
    """The UTF-8 text of a corpus (a generated one by its name: `GENERATED`); gzip is undone, a
    leading BOM dropped and CRLF read as LF. Lines end only at LF or CRLF: a lone CR (a carriage
    return not followed by LF, old Mac line ends or a stray control character) is refused with
    its line, never read as a line end nor kept as text. A binary, non-UTF-8, empty or blank
    file, or more than MAX_TEXT_BYTES of text, raises DataError."""
    if isinstance(name_or_path, str) and name_or_path in GENERATED:
        return GENERATED[name_or_path]()
    return read_file(resolve(name_or_path))


def read_file(path: str | Path) -> str:
    """`read_text` of a file path (no shipped corpus names): what users give with --input."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a directory; give a text file")
    raw = _read_bounded(path, MAX_TEXT_BYTES)
    if (nul := raw.find(b"\0")) >= 0:
        raise DataError(
            f"{path}, line {_line_of(raw, nul)}: binary data (NUL byte); give a UTF-8 text file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(
            f"{path}, line {_line_of(raw, e.start)}: not valid UTF-8 (byte 0x{raw[e.start]:02x}); "
            "give a UTF-8 text file (re-save it as UTF-8)"
        ) from None
    if not text:
        raise DataError(f"{path}: empty file; give a file with text in it")
    if not text.removeprefix("\ufeff").strip():
        raise DataError(
            f"{path}: only whitespace ({len(text.splitlines())} lines), empty of text; give a "
            "file with text"
        )
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if cr := _LONE_CR.search(text):
        raise DataError(
            f"{path}, line {text.count(chr(10), 0, cr.start()) + 1}: a carriage return (\\r) not "
            "followed by a line feed; lines end only at \\n or \\r\\n: convert the file "
            "(old Mac line ends: tr '\\r' '\\n'; a stray one: delete it)"
        )
    return text


def _read_bytes(stream, limit: int, path: Path, inflated: bool) -> bytes:
    data = bytearray()
    while chunk := stream.read(min(_CHUNK, limit + 1 - len(data))):
        data += chunk
        if len(data) > limit:
            raise DataError(
                f"{path}: more than {limit / 2**20:,.0f} MB of text"
                f"{' once decompressed' if inflated else ''}, the most glassformer reads from "
                "one file; split it or give a smaller file"
            )
    return bytes(data)


def _read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of `path`, gzip undone (by its .gz name or its magic number), read in chunks
    and refused once more than `limit` bytes came out."""
    try:
        with files.open_regular(path) as fh:
            compressed = path.suffix == ".gz" or fh.read(2) == _GZIP_MAGIC
            fh.seek(0)
            if not compressed:
                return _read_bytes(fh, limit, path, False)
            with gzip.GzipFile(fileobj=fh) as gz:
                return _read_bytes(gz, limit, path, True)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise DataError(f"{path}: cannot read ({e}); give a readable UTF-8 or gzip file") from None
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror or e}); check the path") from None
    except files.FileError as e:
        raise DataError(str(e)) from None


def _regular(path: Path) -> Path:
    try:
        return files.regular(path)
    except files.FileError as e:
        raise DataError(str(e)) from None


def read_pairs(name_or_path: str | Path, columns: int = 2) -> list[tuple[str, str]]:
    """(source, target) pairs of a TSV file: every non-blank line has exactly `columns`
    tab-separated fields, the first two non-empty. columns=3 reads manythings files that carry an
    attribution column; only the first two fields are kept."""
    if not isinstance(columns, int) or columns < 2:
        raise DataError(f"columns must be an integer >= 2, got {columns!r}")
    path, pairs = resolve(name_or_path), []
    for n, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise DataError(
                f"{path}, line {n}: {len(fields)} tab-separated columns, expected {columns} "
                "(source<TAB>target); fix the line, or keep only the first two columns of "
                f"every line (cut -f1,2 {path} > pairs.tsv) and give that file"
            )
        for k in (0, 1):
            if not fields[k].strip():
                raise DataError(
                    f"{path}, line {n}: column {k + 1} is empty; every pair needs a source and "
                    "a target"
                )
        pairs.append((fields[0], fields[1]))
    return pairs


def split_text(text: str, frac: float = 0.9) -> tuple[str, str]:
    """(train, val): the first `frac` of the characters and the rest (char-rnn / nanoGPT)."""
    if not 0.0 < frac < 1.0:
        raise DataError(f"frac must be between 0 and 1 (exclusive), got {frac}")
    n = int(len(text) * frac)
    return text[:n], text[n:]


LANGUAGES = ("English", "Spanish")  # the classes of `language_id`, in class order


def language_id(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, int]]:
    """A language-identification set from translation pairs: English = 0, Spanish = 1.

    Each sentence appears once, in order of first appearance (English before Spanish within a
    pair). A sentence found on both sides ("No.") has no single answer and is left out."""
    label: dict[str, int] = {}
    for en, es in pairs:
        for text, y in ((en, 0), (es, 1)):
            if label.setdefault(text, y) != y:
                label[text] = -1
    return [(text, y) for text, y in label.items() if y >= 0]


def truncate(seqs: Sequence[Sequence[int]], max_len: int) -> list[list[int]]:
    """Each sequence cut to its first `max_len` ids (e.g. a model's max_len)."""
    if max_len < 1:
        raise DataError(f"max_len must be >= 1, got {max_len}")
    return [list(s[:max_len]) for s in seqs]


# -- batch sources ---------------------------------------------------------------------------------


class LMBatches:
    """Random windows of a token stream, as nanoGPT's get_batch: x = ids[i : i+T], y = ids[i+1 :
    i+T+1] for B uniform starts i. `next()` -> (x, y), int64 (B, T)."""

    def __init__(self, ids: np.ndarray, block_size: int, batch_size: int, seed: int = 0) -> None:
        self.ids = np.asarray(ids)
        if self.ids.ndim != 1 or not np.issubdtype(self.ids.dtype, np.integer):
            raise DataError(
                f"ids must be a 1-D integer array, got {self.ids.dtype} {self.ids.shape}"
            )
        _check_positive(block_size=block_size, batch_size=batch_size)
        if len(self.ids) < block_size + 1:
            raise DataError(
                f"corpus has {len(self.ids)} tokens, fewer than block_size + 1 = {block_size + 1}"
                "; use a smaller block_size or a longer corpus"
            )
        _check_seed(seed)
        self.block_size, self.batch_size = block_size, batch_size
        self._rng = np.random.default_rng(seed)
        self._offsets = np.arange(block_size)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        starts = self._rng.integers(0, len(self.ids) - self.block_size, size=self.batch_size)
        idx = starts[:, None] + self._offsets  # (B, T)
        return self.ids[idx].astype(np.int64), self.ids[idx + 1].astype(np.int64)

    __next__ = next

    def __iter__(self) -> LMBatches:
        return self

    def state(self) -> dict:
        """JSON-serialisable: the generator state (PCG64; big integers)."""
        return {"kind": "lm", "rng": self._rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        _check_state(state, "lm", "LMBatches")
        try:
            self._rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"LMBatches state has a bad 'rng' entry ({e}); save it again") from None


# -- other forms of a pair (training noise) ----------------------------------------------------


def strip_end(text: str) -> str:
    """The sentence as people type it in a hurry: without its closing . ! ? or … (and without a
    Spanish opening ¿ or ¡ at its start). A text that would be left empty is kept whole."""
    out = text.rstrip().rstrip(".!?…").rstrip().lstrip("¿¡")
    return out or text


def pair_forms(
    pairs: Sequence[tuple[str, str]], lowercase: float, no_end: float
) -> tuple[list[list[tuple[str, str]]], list[float]]:
    """Other forms of translation pairs, for `PairBatches(alternates=, weights=)`: a pair is shown
    lower-cased on both sides with probability `lowercase`, without its closing punctuation on
    both sides (`strip_end`) with probability `no_end`, independently. Returns the forms that can
    occur (lower-cased, unpunctuated, both) and the probability of each."""
    for name, p in (("lowercase", lowercase), ("no_end", no_end)):
        if not 0 <= p <= 1:
            raise DataError(f"{name} must be a probability in [0, 1], got {p}")
    forms, weights = [], []
    for lower, bare, w in (
        (True, False, lowercase * (1 - no_end)),
        (False, True, (1 - lowercase) * no_end),
        (True, True, lowercase * no_end),
    ):
        if w > 0:
            form = [(s.lower(), t.lower()) if lower else (s, t) for s, t in pairs]
            forms.append([(strip_end(s), strip_end(t)) for s, t in form] if bare else form)
            weights.append(w)
    return forms, weights


class _Epochs:
    """Shared epoch logic: a plan (list of index arrays) per epoch, seeded by (seed, epoch), so the
    whole state is (seed, epoch, position) and any epoch can be rebuilt without replaying."""

    _kind = ""

    def __init__(self, n: int, seed: int, shuffle: bool) -> None:
        _check_seed(seed)
        self.n, self.seed, self.shuffle = n, int(seed), shuffle
        self.epoch, self.position = 0, 0
        self._plan_cache: list[np.ndarray] | None = None

    def _plan(self, rng: np.random.Generator | None) -> list[np.ndarray]:
        raise NotImplementedError

    def _collate(self, index: np.ndarray) -> dict:
        raise NotImplementedError

    def _current(self) -> list[np.ndarray]:
        if self._plan_cache is None:
            self._plan_cache = self._epoch_plan(self.seed, self.epoch)
        return self._plan_cache

    def _epoch_plan(self, seed: int, epoch: int) -> list[np.ndarray]:
        return self._plan(np.random.default_rng([seed, epoch]) if self.shuffle else None)

    def next(self) -> dict:
        """The next batch. `epoch` and `position` always name the batch that comes next: after
        the last batch of an epoch they move to (epoch + 1, 0), whose order is reshuffled."""
        plan = self._current()
        batch = self._collate(plan[self.position])
        self.position += 1
        if self.position == len(plan):
            self.epoch, self.position, self._plan_cache = self.epoch + 1, 0, None
        return batch

    __next__ = next

    def __iter__(self) -> _Epochs:
        return self

    def epoch_batches(self) -> Iterator[dict]:
        """One full pass in a fixed order, not shuffled, leaving `next()`'s place untouched."""
        for index in self._plan(None):
            yield self._collate(index)

    def __len__(self) -> int:
        """Batches in the current epoch (with PairBatches the count can vary a little)."""
        return len(self._current())

    def state(self) -> dict:
        keys = ("seed", "epoch", "position")
        return {"kind": self._kind, "examples": self.n} | {k: getattr(self, k) for k in keys}

    def set_state(self, state: dict) -> None:
        name = type(self).__name__
        _check_state(state, self._kind, name)
        values = [state.get(k) for k in ("seed", "epoch", "position", "examples")]
        if not all(isinstance(v, int) and v >= 0 for v in values):
            raise DataError(f"{name} state needs integers seed, epoch, position, examples")
        if values[3] != self.n:
            raise DataError(
                f"{name} state is for {values[3]} examples but this data has {self.n}; resume "
                "with the same data"
            )
        seed, epoch, position = values[:3]
        plan = self._epoch_plan(seed, epoch)
        if position >= len(plan):
            raise DataError(
                f"{name} state position {position} is past the {len(plan)} batches of epoch "
                f"{epoch}; resume with the same data and settings"
            )
        self.seed, self.epoch, self.position, self._plan_cache = seed, epoch, position, plan


class PairBatches(_Epochs):
    """Translation batches under a token budget.

    Decoder input = [bos] + tgt, labels = tgt + [eos]. An example's size is max(len(src),
    len(tgt) + 1); examples are sorted by size inside shuffled chunks of about 100 batches, then
    cut into batches whose padded size B * max(size) stays <= max_tokens (a lone example larger
    than the budget is a batch of one). Batch order is shuffled each epoch.

    `alternates` (optional): other forms of every pair, each a (src, tgt) list as long as the
    originals (e.g. lower-cased: `pair_forms`), and `weights`, the probability of each. Each
    shuffled epoch shows every example once, in one form drawn anew from (seed, epoch): the
    original with probability 1 - sum(weights). An unshuffled pass shows the originals.

    `next()` -> {"src", "src_valid" (B, S); "tgt_in", "tgt_out", "tgt_valid" (B, T); "index" (B,)
    the example numbers; "form" (B,) the form shown (0 the original, k the k-th alternate);
    "n_tokens" the real target tokens (int)}.
    """

    _kind = "pairs"

    def __init__(
        self,
        src: Sequence[Sequence[int]],
        tgt: Sequence[Sequence[int]],
        pad_id: int,
        bos_id: int,
        eos_id: int,
        max_tokens: int,
        seed: int = 0,
        shuffle: bool = True,
        alternates: Sequence[tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]]] = (),
        weights: Sequence[float] = (),
    ) -> None:
        if len(src) != len(tgt):
            raise DataError(f"src has {len(src)} sequences but tgt has {len(tgt)}; pair them up")
        _check_positive(max_tokens=max_tokens)
        if len(weights) != len(alternates):
            raise DataError(f"{len(alternates)} alternates, {len(weights)} weights: give one each")
        if not all(0 <= w <= 1 for w in weights) or sum(weights) > 1 + 1e-9:
            raise DataError(f"weights must be probabilities summing to at most 1, got {weights}")
        forms = [(src, tgt), *alternates]
        self.forms = [
            (_sequences(s, f"src{k or ''}"), _sequences(t, f"tgt{k or ''}", empty_ok=True))
            for k, (s, t) in enumerate(forms)
        ]
        for k, (s, t) in enumerate(self.forms[1:], start=1):
            if not len(s) == len(t) == len(src):
                raise DataError(f"alternate {k} has {len(s)}/{len(t)} sequences, not {len(src)}")
        self.src, self.tgt = self.forms[0]
        self.weights = [1 - sum(weights), *weights]
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.max_tokens = max_tokens
        self.sizes = np.array(  # (forms, n)
            [[max(len(s), len(t) + 1) for s, t in zip(*f, strict=True)] for f in self.forms]
        )
        super().__init__(len(self.src), seed, shuffle)

    def _plan(self, rng: np.random.Generator | None) -> list[np.ndarray]:
        """Batches of codes form * n + example (the original form: the example number)."""
        order = np.arange(self.n) if rng is None else rng.permutation(self.n)
        if rng is not None and len(self.forms) > 1:
            order = order + self.n * rng.choice(len(self.forms), size=self.n, p=self.weights)
        sizes = self.sizes.reshape(-1)  # by code
        chunk = max(1, int(100 * self.max_tokens / self.sizes[0].mean()))
        batches: list[np.ndarray] = []
        for start in range(0, self.n, chunk):
            part = order[start : start + chunk]
            part = part[np.argsort(sizes[part], kind="stable")]
            first, longest = 0, 0
            for k, i in enumerate(part):
                longest = max(longest, sizes[i])
                if k > first and (k - first + 1) * longest > self.max_tokens:
                    batches.append(part[first:k])
                    first, longest = k, sizes[i]
            batches.append(part[first:])
        if rng is not None:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        return batches

    def _collate(self, codes: np.ndarray) -> dict:
        form, index = np.divmod(codes, self.n)
        src = [self.forms[f][0][i] for f, i in zip(form, index, strict=True)]
        tgt = [self.forms[f][1][i] for f, i in zip(form, index, strict=True)]
        src, src_valid = _pad(src, self.pad_id)
        tgt_in, tgt_valid = _pad([[self.bos_id, *t] for t in tgt], self.pad_id)
        tgt_out, _ = _pad([[*t, self.eos_id] for t in tgt], self.pad_id)
        return {
            "src": src,
            "src_valid": src_valid,
            "tgt_in": tgt_in,
            "tgt_out": tgt_out,
            "tgt_valid": tgt_valid,
            "index": index.astype(np.int64),
            "form": form.astype(np.int64),
            "n_tokens": int(tgt_valid.sum()),
        }


class ClassBatches(_Epochs):
    """Classification batches of `batch_size` examples (the last of an epoch may be smaller),
    shuffled each epoch. `next()` -> {"x", "valid" (B, S); "y" (B,); "index" (B,)}."""

    _kind = "classes"

    def __init__(
        self,
        ids: Sequence[Sequence[int]],
        labels: Sequence[int],
        pad_id: int,
        batch_size: int,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if len(ids) != len(labels):
            raise DataError(f"ids has {len(ids)} sequences but labels has {len(labels)}")
        _check_positive(batch_size=batch_size)
        self.ids = _sequences(ids, "ids")
        self.labels = np.asarray(labels)
        if not np.issubdtype(self.labels.dtype, np.integer) or (self.labels < 0).any():
            raise DataError("labels must be non-negative integers (class numbers)")
        self.pad_id, self.batch_size = pad_id, batch_size
        super().__init__(len(self.ids), seed, shuffle)

    def _plan(self, rng: np.random.Generator | None) -> list[np.ndarray]:
        order = np.arange(self.n) if rng is None else rng.permutation(self.n)
        return [order[k : k + self.batch_size] for k in range(0, self.n, self.batch_size)]

    def _collate(self, index: np.ndarray) -> dict:
        x, valid = _pad([self.ids[i] for i in index], self.pad_id)
        y = self.labels[index].astype(np.int64)
        return {"x": x, "valid": valid, "y": y, "index": index.astype(np.int64)}


# -- helpers ---------------------------------------------------------------------------------------


def _line_of(raw: bytes, offset: int) -> int:
    return raw.count(b"\n", 0, offset) + 1


def _pad(seqs: list[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, valid), (B, L) with L the longest sequence; padding on the right."""
    lengths = np.array([len(s) for s in seqs])
    valid = np.arange(lengths.max()) < lengths[:, None]  # (B, L)
    ids = np.full(valid.shape, pad_id, dtype=np.int64)
    ids[valid] = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs])
    return ids, valid


def _sequences(seqs: Sequence[Sequence[int]], name: str, empty_ok: bool = False) -> list:
    out = [list(s) for s in seqs]
    if not out:
        raise DataError(f"{name} is empty; give at least one example")
    if not empty_ok and (empty := [k for k, s in enumerate(out) if not s]):
        raise DataError(f"{name}[{empty[0]}] is an empty sequence; drop it or give it a token")
    return out


def _check_positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or v < 1:
            raise DataError(f"{name} must be a positive integer, got {v!r}")


def _check_seed(seed: int) -> None:
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise DataError(f"seed must be a non-negative integer, got {seed!r}")


def _check_state(state: object, kind: str, name: str) -> None:
    if not isinstance(state, dict) or state.get("kind") != kind:
        got = state.get("kind") if isinstance(state, dict) else type(state).__name__
        raise DataError(f"not a {name} state (kind {got!r}); pass what {name}.state() returned")
