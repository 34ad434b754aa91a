"""Data tests: the shipped corpora against the shared files' hashes and stated counts, bad files
refused with name and line, and invariants of the three batch sources (shapes, masks, coverage of
every example once per epoch, token budget, exact resume)."""

import fnmatch
import gzip
import hashlib
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from glassformer.data import (
    SHIPPED,
    ClassBatches,
    DataError,
    LMBatches,
    PairBatches,
    language_id,
    pair_forms,
    read_pairs,
    read_text,
    resolve,
    split_text,
    strip_end,
    truncate,
)
from glassformer.errors import GlassformerError

ROOT = Path(__file__).parent.parent
SHA256 = {  # of the uncompressed files, from shared/data/README.md
    "tinyshakespeare": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "eng-spa": "03025dbaea85052af45742b50d747820b1605ef623ca08ada3677f69fae85d0e",
    "eng-spa-valid": "31ec00f0487299d98e81644a643ac678fdfff3606c7979b9735aa461590d5c1b",
}
SHAKESPEARE_CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def train_pairs() -> list[tuple[str, str]]:
    return read_pairs("eng-spa")


@pytest.fixture(scope="module")
def valid_pairs() -> list[tuple[str, str]]:
    return read_pairs("eng-spa-valid")


# The shipped corpora


@pytest.mark.parametrize("name", sorted(SHA256))
def test_shipped_file_decompresses_to_the_shared_file(name):
    raw = gzip.decompress(SHIPPED[name].read_bytes())
    assert hashlib.sha256(raw).hexdigest() == SHA256[name]
    # read_text changes nothing in these files (LF only, no BOM).
    assert hashlib.sha256(read_text(name).encode("utf-8")).hexdigest() == SHA256[name]


@pytest.mark.parametrize("name", sorted(SHA256))
def test_shipped_gzip_is_reproducible(name):
    head = SHIPPED[name].read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08"  # gzip, deflate
    assert head[3] & 0x08 == 0 and head[4:8] == b"\0\0\0\0"  # gzip -n: no name, no mtime


def test_shipped_readme_states_hashes_and_licences():
    readme = (SHIPPED["eng-spa"].parent / "README.md").read_text(encoding="utf-8")
    for digest in SHA256.values():
        assert digest in readme
    for phrase in ("public domain", "MIT", "CC-BY 2.0", "manythings.org/anki", "tatoeba.org"):
        assert phrase in readme


def test_package_data_globs_cover_shipped_files():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["glassformer"]
    shipped = [*SHIPPED.values(), SHIPPED["eng-spa"].parent / "README.md"]
    for path in shipped:
        rel = path.relative_to(ROOT / "glassformer").as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), rel
    assert any(d.startswith("tokenizers>=") for d in pyproject["project"]["dependencies"])


def test_tinyshakespeare_facts():
    text = read_text("tinyshakespeare")
    assert len(text) == 1_115_394
    assert "".join(sorted(set(text))) == SHAKESPEARE_CHARS
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


def test_eng_spa_facts(train_pairs, valid_pairs):
    assert len(train_pairs) == 115_964 and len(valid_pairs) == 1_000
    assert train_pairs[:3] == [("Go.", "Ve."), ("Go.", "Vete."), ("Go.", "Vaya.")]
    assert len({en for en, _ in train_pairs}) == 100_290
    assert len({en for en, _ in valid_pairs}) == 862


def test_validation_split_shares_no_sentence_with_training(train_pairs, valid_pairs):
    en, es = {p[0] for p in train_pairs}, {p[1] for p in train_pairs}
    assert not any(a in en or b in es for a, b in valid_pairs)


# resolve


def test_resolve_shipped_name_and_path(tmp_path):
    assert resolve("eng-spa") == SHIPPED["eng-spa"]
    path = tmp_path / "eng-spa"  # a file path is taken as given ...
    path.write_text("a\tb\n", encoding="utf-8")
    assert resolve(path) == path and resolve(str(path)) == path
    assert resolve("eng-spa") == SHIPPED["eng-spa"]  # ... while a bare shipped name wins


def test_resolve_unknown_name_lists_shipped():
    with pytest.raises(DataError) as err:
        resolve("shakespeare")
    message = str(err.value)
    assert "'shakespeare'" in message
    assert all(name in message for name in SHIPPED)


def test_resolve_missing_file_and_directory(tmp_path):
    with pytest.raises(DataError, match="nope.txt.*tinyshakespeare"):
        read_text(tmp_path / "nope.txt")
    with pytest.raises(DataError, match="directory"):
        read_text(tmp_path)


def test_data_error_is_a_glassformer_error():
    assert issubclass(DataError, GlassformerError)


# Bad files: each refused with the file name and, where there is one, the line


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_binary_file_refused(tmp_path):
    path = _write(tmp_path, "model.bin", b"ok\nha\0lf\n")
    with pytest.raises(DataError) as err:
        read_text(path)
    assert str(err.value) == f"{path}, line 2: binary data (NUL byte); give a UTF-8 text file"


def test_invalid_utf8_refused_with_line(tmp_path):
    path = _write(tmp_path, "latin1.txt", "uno\ndos\nni\xf1o\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.txt, line 3: not valid UTF-8 \(byte 0xf1\)"):
        read_text(path)


def test_empty_file_refused(tmp_path):
    path = _write(tmp_path, "empty.txt", b"")
    with pytest.raises(DataError, match=r"empty\.txt: empty file"):
        read_text(path)


def test_whitespace_only_file_refused(tmp_path):
    path = _write(tmp_path, "blank.tsv", b" \n\t\n\n")
    with pytest.raises(DataError, match=r"blank\.tsv: only whitespace \(3 lines\)"):
        read_pairs(path)


def test_wrong_column_count_refused(tmp_path):
    path = _write(tmp_path, "pairs.tsv", b"Go.\tVe.\nHi.\tHola.\textra\n")
    with pytest.raises(DataError, match=r"pairs\.tsv, line 2: 3 tab-separated columns, expected 2"):
        read_pairs(path)
    assert read_pairs(_write(tmp_path, "three.tsv", b"a\tb\tcc-by\n"), columns=3) == [("a", "b")]
    with pytest.raises(DataError, match=r"line 1: 1 tab-separated columns"):
        read_pairs(_write(tmp_path, "one.tsv", b"no tab here\n"))


@pytest.mark.parametrize("line, column", [("\tHola.", 1), ("Hi.\t", 2), ("Hi.\t  ", 2)])
def test_empty_field_refused(tmp_path, line, column):
    path = _write(tmp_path, "pairs.tsv", f"Go.\tVe.\n\n{line}\n".encode())
    with pytest.raises(DataError, match=rf"pairs\.tsv, line 3: column {column} is empty"):
        read_pairs(path)


def test_bad_gzip_refused(tmp_path):
    path = _write(tmp_path, "broken.txt.gz", gzip.compress(b"hello world\n")[:-6])
    with pytest.raises(DataError, match=r"broken\.txt\.gz: cannot read"):
        read_text(path)


def test_gzip_bad_content_names_the_file(tmp_path):
    path = _write(tmp_path, "bin.gz", gzip.compress(b"a\nb\nc\0"))
    with pytest.raises(DataError, match=r"bin\.gz, line 3: binary data"):
        read_text(path)


# Good files


def test_gzip_read_transparently(tmp_path):
    text = "¿Dónde?\tWhere?\nHi.\tHola.\n"
    plain = _write(tmp_path, "p.tsv", text.encode())
    packed = _write(tmp_path, "p.tsv.gz", gzip.compress(text.encode()))
    assert read_text(packed) == read_text(plain) == text
    assert read_pairs(packed) == [("¿Dónde?", "Where?"), ("Hi.", "Hola.")]


def test_crlf_and_bom_read_as_text_mode_would(tmp_path):
    path = _write(tmp_path, "win.tsv", b"\xef\xbb\xbfGo.\tVe.\r\nHi.\tHola.\r\n")
    assert read_text(path) == "Go.\tVe.\nHi.\tHola.\n"
    assert read_pairs(path) == [("Go.", "Ve."), ("Hi.", "Hola.")]


def test_read_pairs_skips_blank_lines_and_keeps_fields(tmp_path):
    path = _write(tmp_path, "p.tsv", b"\nGo.\tVe.\n   \nIt's ok.\t\xc2\xa1Est\xc3\xa1 bien!")
    assert read_pairs(path) == [("Go.", "Ve."), ("It's ok.", "¡Está bien!")]


# split_text, truncate, language_id


def test_split_text_first_ninety_percent():
    text = read_text("tinyshakespeare")
    train, val = split_text(text)
    assert len(train) == int(0.9 * 1_115_394) and train + val == text
    assert split_text("abcdefghij", 0.7) == ("abcdefg", "hij")
    for frac in (0.0, 1.0, 1.5):
        with pytest.raises(DataError, match="frac"):
            split_text(text, frac)


def test_truncate():
    assert truncate([[1, 2, 3], [4], []], 2) == [[1, 2], [4], []]
    with pytest.raises(DataError):
        truncate([[1]], 0)


def test_language_id_labels_dedupes_and_drops_ambiguous():
    pairs = [("Go.", "Ve."), ("Go.", "Vete."), ("No.", "No."), ("Hi.", "Hola."), ("Ve.", "x")]
    # "No." is both English and Spanish, "Ve." appears as Spanish then as English: both dropped.
    assert language_id(pairs) == [("Go.", 0), ("Vete.", 1), ("Hi.", 0), ("Hola.", 1), ("x", 1)]


def test_language_id_on_shipped_validation(valid_pairs):
    data = language_id(valid_pairs)
    labels = [y for _, y in data]
    assert labels.count(0) == 862 and labels.count(1) == len({es for _, es in valid_pairs})
    assert len({t for t, _ in data}) == len(data)
    assert language_id(valid_pairs) == data  # deterministic


# LMBatches


def test_lm_windows_come_from_the_corpus_and_y_is_x_shifted():
    ids = np.arange(500, dtype=np.uint16)  # every window is identified by its first token
    x, y = LMBatches(ids, block_size=8, batch_size=16, seed=0).next()
    assert x.shape == y.shape == (16, 8) and x.dtype == y.dtype == np.int64
    starts = x[:, :1]
    assert (x == starts + np.arange(8)).all() and (y == x + 1).all()


def test_lm_batches_on_text_match_nanogpt_slicing():
    text = read_text("tinyshakespeare")[:5000]
    ids = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    x, y = LMBatches(ids, block_size=32, batch_size=4, seed=1).next()
    for row_x, row_y in zip(x, y, strict=True):
        window = bytes(row_x.astype(np.uint8)).decode() + chr(row_y[-1])
        assert window in text and (row_x[1:] == row_y[:-1]).all()


def test_lm_every_start_reachable_including_the_last():
    ids = np.arange(10)
    batches = LMBatches(ids, block_size=4, batch_size=64, seed=0)
    starts = {int(s) for _ in range(10) for s in batches.next()[0][:, 0]}
    assert starts == set(range(10 - 4))  # the last window's target is the last token


def test_lm_corpus_of_exactly_block_size_plus_one():
    x, y = LMBatches(np.arange(5), block_size=4, batch_size=3, seed=0).next()
    assert (x == np.arange(4)).all() and (y == np.arange(1, 5)).all()


def test_lm_refuses_short_corpus():
    with pytest.raises(DataError, match=r"corpus has 4 tokens, fewer than block_size \+ 1 = 5"):
        LMBatches(np.arange(4), block_size=4, batch_size=2, seed=0)


@pytest.mark.parametrize(
    "kwargs", [{"block_size": 0}, {"batch_size": 0}, {"ids": np.zeros((2, 50), np.int64)}]
)
def test_lm_refuses_bad_settings(kwargs):
    args = {"ids": np.arange(50), "block_size": 4, "batch_size": 2} | kwargs
    with pytest.raises(DataError):
        LMBatches(**args)


def test_lm_resume_equals_uninterrupted():
    ids = np.random.default_rng(0).integers(0, 65, size=2000)
    run = LMBatches(ids, block_size=16, batch_size=4, seed=7)
    for _ in range(5):
        run.next()
    state = json.loads(json.dumps(run.state()))  # survives a JSON file
    expected = [run.next() for _ in range(6)]
    resumed = LMBatches(ids, block_size=16, batch_size=4, seed=123)
    resumed.set_state(state)
    for (x, y), (ex, ey) in zip((resumed.next() for _ in range(6)), expected, strict=True):
        assert (x == ex).all() and (y == ey).all()


def test_lm_seeds():
    ids = np.arange(1000)
    a, b, c = (LMBatches(ids, 8, 4, seed=s).next()[0] for s in (1, 1, 2))
    assert (a == b).all() and not (a == c).all()


def test_lm_set_state_refuses_foreign_state():
    batches = LMBatches(np.arange(100), 4, 2, seed=0)
    with pytest.raises(DataError, match="not a LMBatches state"):
        batches.set_state({"kind": "pairs"})
    with pytest.raises(DataError, match="'rng'"):
        batches.set_state({"kind": "lm", "rng": {"bit_generator": "nope"}})


# PairBatches


def _pairs(n: int, seed: int = 0, longest: int = 30) -> tuple[list[list[int]], list[list[int]]]:
    rng = np.random.default_rng(seed)
    # Target lengths follow source lengths loosely, as translations do.
    lengths = rng.integers(1, longest, size=n)
    src = [rng.integers(4, 50, size=k).tolist() for k in lengths]
    tgt = [rng.integers(4, 50, size=max(0, k + rng.integers(-3, 4))).tolist() for k in lengths]
    return src, tgt


PAD, BOS, EOS = 0, 2, 3


def _make_pairs(src, tgt, max_tokens=200, seed=0, shuffle=True) -> PairBatches:
    return PairBatches(src, tgt, PAD, BOS, EOS, max_tokens, seed=seed, shuffle=shuffle)


def _check_pair_batch(batch: dict, src, tgt, max_tokens: int) -> None:
    index = batch["index"]
    B, S = batch["src"].shape
    T = batch["tgt_in"].shape[1]
    assert batch["src_valid"].shape == (B, S) and batch["src"].dtype == np.int64
    assert batch["tgt_in"].shape == batch["tgt_out"].shape == batch["tgt_valid"].shape == (B, T)
    assert batch["src_valid"].dtype == batch["tgt_valid"].dtype == np.bool_
    assert B == 1 or B * max(S, T) <= max_tokens
    assert S == max(len(src[i]) for i in index) and T == max(len(tgt[i]) + 1 for i in index)
    for b, i in enumerate(index):
        s, t = len(src[i]), len(tgt[i]) + 1
        assert batch["src"][b, :s].tolist() == src[i] and (batch["src"][b, s:] == PAD).all()
        assert batch["src_valid"][b].tolist() == [True] * s + [False] * (S - s)
        assert batch["tgt_in"][b, :t].tolist() == [BOS, *tgt[i]]
        assert batch["tgt_out"][b, :t].tolist() == [*tgt[i], EOS]
        assert (batch["tgt_in"][b, t:] == PAD).all() and (batch["tgt_out"][b, t:] == PAD).all()
        assert batch["tgt_valid"][b].tolist() == [True] * t + [False] * (T - t)
    assert batch["n_tokens"] == sum(len(tgt[i]) + 1 for i in index)


def test_pairs_batches_are_right_and_cover_each_example_once_per_epoch():
    src, tgt = _pairs(500)
    batches = _make_pairs(src, tgt, max_tokens=200)
    for epoch in range(2):
        seen = []
        for _ in range(len(batches)):
            assert batches.epoch == epoch
            batch = batches.next()
            _check_pair_batch(batch, src, tgt, 200)
            seen += batch["index"].tolist()
        assert sorted(seen) == list(range(500))


def test_pairs_epochs_are_reshuffled():
    src, tgt = _pairs(300)
    batches = _make_pairs(src, tgt, max_tokens=100)
    first = [batches.next()["index"].tolist() for _ in range(len(batches))]
    second = [batches.next()["index"].tolist() for _ in range(len(batches))]
    assert (batches.epoch, batches.position) == (2, 0) and first != second


def test_pairs_group_by_length():
    # Random batching would pad about half of each batch; grouping by length pads very little.
    src, tgt = _pairs(3000, longest=40)
    batches = _make_pairs(src, tgt, max_tokens=400)
    for key in ("src_valid", "tgt_valid"):
        real = sum(int(b[key].sum()) for b in batches.epoch_batches())
        padded = sum(b[key].size for b in batches.epoch_batches())
        assert real / padded > 0.85, key


def test_pairs_example_over_budget_is_a_batch_of_one():
    src, tgt = _pairs(50, longest=10)
    src[7] = list(range(4, 64))  # 60 tokens > max_tokens
    batches = list(_make_pairs(src, tgt, max_tokens=40).epoch_batches())
    alone = [b for b in batches if 7 in b["index"]]
    assert len(alone) == 1 and alone[0]["index"].tolist() == [7]
    assert sorted(i for b in batches for i in b["index"].tolist()) == list(range(50))


def test_pairs_epoch_batches_fixed_and_leave_next_alone():
    src, tgt = _pairs(200)
    batches = _make_pairs(src, tgt)
    batches.next()
    state = batches.state()
    one = [b["index"].tolist() for b in batches.epoch_batches()]
    two = [b["index"].tolist() for b in batches.epoch_batches()]
    assert one == two and sorted(sum(one, [])) == list(range(200))
    assert batches.state() == state
    for batch in batches.epoch_batches():
        _check_pair_batch(batch, src, tgt, 200)


def test_pairs_unshuffled_next_follows_epoch_batches():
    src, tgt = _pairs(100)
    batches = _make_pairs(src, tgt, shuffle=False)
    fixed = [b["index"].tolist() for b in batches.epoch_batches()]
    assert [batches.next()["index"].tolist() for _ in range(2 * len(fixed))] == fixed + fixed


def _same_batches(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        assert all(np.array_equal(x[k], y[k]) for k in x)


def test_pairs_resume_equals_uninterrupted():
    src, tgt = _pairs(150)
    run = _make_pairs(src, tgt, max_tokens=150, seed=5)
    n = len(run)
    for _ in range(n - 2):  # stop shortly before an epoch boundary
        run.next()
    state = json.loads(json.dumps(run.state()))
    expected = [run.next() for _ in range(n + 5)]
    resumed = _make_pairs(src, tgt, max_tokens=150, seed=99)
    resumed.set_state(state)
    _same_batches([resumed.next() for _ in range(n + 5)], expected)


def test_pairs_seeds():
    src, tgt = _pairs(200)
    order = [[b.next()["index"].tolist() for _ in range(5)] for b in
             (_make_pairs(src, tgt, seed=s) for s in (1, 1, 2))]  # fmt: skip
    assert order[0] == order[1] != order[2]


def test_pairs_on_shipped_sentences(valid_pairs):
    from glassformer.tokenizer import CharTokenizer

    tok = CharTokenizer.train([t for p in valid_pairs for t in p])
    src = [tok.encode(en) for en, _ in valid_pairs]
    tgt = [tok.encode(es) for _, es in valid_pairs]
    batches = PairBatches(src, tgt, tok.pad_id, tok.bos_id, tok.eos_id, max_tokens=2000, seed=0)
    batch = batches.next()
    b = int(np.argmax(batch["tgt_valid"].sum(1)))
    en, es = valid_pairs[batch["index"][b]]
    assert tok.decode(batch["src"][b]) == en and tok.decode(batch["tgt_out"][b]) == es


@pytest.mark.parametrize(
    "src, tgt, max_tokens, match",
    [
        ([[1]], [[1], [2]], 10, "src has 1 sequences but tgt has 2"),
        ([[1], []], [[1], [2]], 10, r"src\[1\] is an empty sequence"),
        ([[1]], [[1]], 0, "max_tokens"),
        ([], [], 10, "src is empty"),
    ],
)
def test_pairs_refuse_bad_input(src, tgt, max_tokens, match):
    with pytest.raises(DataError, match=match):
        PairBatches(src, tgt, PAD, BOS, EOS, max_tokens, seed=0)


def test_pairs_set_state_checks_the_data():
    src, tgt = _pairs(20)
    batches = _make_pairs(src, tgt)
    with pytest.raises(DataError, match="for 10 examples but this data has 20"):
        batches.set_state(_make_pairs(src[:10], tgt[:10]).state())
    with pytest.raises(DataError, match="not a PairBatches state"):
        batches.set_state(LMBatches(np.arange(10), 2, 2).state())
    before = batches.state()
    with pytest.raises(DataError, match="position 999 is past"):
        batches.set_state(before | {"position": 999})
    assert batches.state() == before  # a refused state changes nothing


def test_strip_end_and_pair_forms_as_people_type():
    assert strip_end("Where is the station?") == "Where is the station"
    assert strip_end("¿Dónde está la estación?") == "Dónde está la estación"
    assert strip_end("¡Hola!") == "Hola" and strip_end("Wait... ") == "Wait"
    assert strip_end("Tom, ¿estás bien?") == "Tom, ¿estás bien"  # only a leading ¿ goes
    assert strip_end('He said "Hi."') == 'He said "Hi."'  # a quote closes it: left as it is
    assert strip_end("?!") == "?!"  # nothing would be left
    pairs = [("Hello world.", "Hola mundo."), ("Why?", "¿Por qué?")]
    forms, weights = pair_forms(pairs, 0.2, 0.5)
    assert forms == [
        [("hello world.", "hola mundo."), ("why?", "¿por qué?")],
        [("Hello world", "Hola mundo"), ("Why", "Por qué")],
        [("hello world", "hola mundo"), ("why", "por qué")],
    ]
    assert weights == pytest.approx([0.2 * 0.5, 0.8 * 0.5, 0.2 * 0.5])
    assert pair_forms(pairs, 0, 0) == ([], [])
    assert pair_forms(pairs, 0.3, 0)[0] == [forms[0]]
    with pytest.raises(DataError, match="no_end must be a probability"):
        pair_forms(pairs, 0.1, 1.5)


def _forms(src, tgt):
    """Two recognisable alternates of each pair: ids + 100, and the target reversed."""
    return [
        ([[t + 100 for t in s] for s in src], [[t + 100 for t in s] for s in tgt]),
        (src, [s[::-1] for s in tgt]),
    ]


def test_pairs_with_alternates_show_each_example_once_an_epoch_in_a_drawn_form():
    src, tgt = _pairs(3000, longest=12)
    forms = [(src, tgt), *_forms(src, tgt)]
    weights = [0.3, 0.1]
    batches = PairBatches(src, tgt, PAD, BOS, EOS, 300, 5, alternates=forms[1:], weights=weights)
    seen = []
    for epoch in range(2):
        shown = []
        while batches.epoch == epoch:
            batch = batches.next()
            for f in set(batch["form"].tolist()):  # each row is its form's pair, padded
                rows = batch["form"] == f
                part = {k: v[rows] if k in ("index", "form") else v for k, v in batch.items()}
                _check_rows(part, rows, *forms[f])
            shown += zip(batch["index"].tolist(), batch["form"].tolist(), strict=True)
        assert sorted(i for i, _ in shown) == list(range(3000))  # every example once
        counts = np.bincount([f for _, f in shown], minlength=3) / 3000
        # binomial: 3 standard deviations at n = 3000 are < 0.026
        assert counts == pytest.approx([0.6, 0.3, 0.1], abs=0.026)
        seen.append(dict(shown))
    assert seen[0] != seen[1]  # drawn anew each epoch
    plain = [b["form"] for b in batches.epoch_batches()]
    assert all((f == 0).all() for f in plain)  # an unshuffled pass shows the originals


def _check_rows(batch: dict, rows, src, tgt) -> None:
    """_check_pair_batch for the rows of one form inside a batch padded for all its rows."""
    for b, i in zip(np.flatnonzero(rows), batch["index"], strict=True):
        s, t = len(src[i]), len(tgt[i]) + 1
        assert batch["src"][b, :s].tolist() == src[i] and (batch["src"][b, s:] == PAD).all()
        assert batch["tgt_in"][b, :t].tolist() == [BOS, *tgt[i]]
        assert batch["tgt_out"][b, :t].tolist() == [*tgt[i], EOS]
        assert batch["tgt_valid"][b].sum() == t


def test_pairs_with_alternates_resume_exactly_and_without_them_are_unchanged():
    src, tgt = _pairs(300)
    kw = dict(alternates=_forms(src, tgt), weights=[0.25, 0.25])
    a = PairBatches(src, tgt, PAD, BOS, EOS, 200, 3, **kw)
    for _ in range(40):
        a.next()
    b = PairBatches(src, tgt, PAD, BOS, EOS, 200, 3, **kw)
    b.set_state(a.state())
    _same_batches([b.next() for _ in range(60)], [a.next() for _ in range(60)])
    never = PairBatches(
        src, tgt, PAD, BOS, EOS, 200, 3, alternates=kw["alternates"][:1], weights=[0]
    )
    assert not any(never.next()["form"].any() for _ in range(len(never) + 5))


@pytest.mark.parametrize(
    "alternates, weights, match",
    [
        ([([[1]], [[1]])], [], "1 alternates, 0 weights"),
        ([([[1]], [[1]])], [1.5], "probabilities summing to at most 1"),
        ([([[1]], [[1]]), ([[1]], [[1]])], [0.6, 0.6], "probabilities summing to at most 1"),
        ([([[1], [2]], [[1], [2]])], [0.5], "alternate 1 has 2/2 sequences, not 1"),
        ([([[]], [[1]])], [0.5], r"src1\[0\] is an empty sequence"),
    ],
)
def test_pairs_refuse_bad_alternates(alternates, weights, match):
    with pytest.raises(DataError, match=match):
        PairBatches([[1]], [[1]], PAD, BOS, EOS, 10, alternates=alternates, weights=weights)


# ClassBatches


def _classes(n: int, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    rng = np.random.default_rng(seed)
    ids = [list(rng.integers(1, 30, size=rng.integers(1, 20))) for _ in range(n)]
    return ids, [int(y) for y in rng.integers(0, 3, size=n)]


def _check_class_batch(batch: dict, ids, labels) -> None:
    index = batch["index"]
    B, S = batch["x"].shape
    assert batch["valid"].shape == (B, S) and batch["y"].shape == (B,)
    assert batch["x"].dtype == batch["y"].dtype == np.int64 and batch["valid"].dtype == np.bool_
    assert S == max(len(ids[i]) for i in index)
    for b, i in enumerate(index):
        n = len(ids[i])
        assert batch["x"][b, :n].tolist() == ids[i] and (batch["x"][b, n:] == PAD).all()
        assert batch["valid"][b].tolist() == [True] * n + [False] * (S - n)
        assert batch["y"][b] == labels[i]


def test_classes_batches_cover_each_example_once_per_epoch():
    ids, labels = _classes(103)
    batches = ClassBatches(ids, labels, PAD, batch_size=10, seed=0)
    assert len(batches) == 11
    for _ in range(2):
        seen, sizes = [], []
        for _ in range(11):
            batch = batches.next()
            _check_class_batch(batch, ids, labels)
            seen += batch["index"].tolist()
            sizes.append(len(batch["index"]))
        assert sorted(seen) == list(range(103)) and sorted(sizes) == [3] + [10] * 10
    assert batches.epoch == 2


def test_classes_epoch_batches_in_order():
    ids, labels = _classes(25)
    batches = ClassBatches(ids, labels, PAD, batch_size=10, seed=0)
    fixed = list(batches.epoch_batches())
    assert [b["index"].tolist() for b in fixed] == [list(range(10)), list(range(10, 20)),
                                                    list(range(20, 25))]  # fmt: skip
    for batch in fixed:
        _check_class_batch(batch, ids, labels)


def test_classes_resume_equals_uninterrupted():
    ids, labels = _classes(57)
    run = ClassBatches(ids, labels, PAD, batch_size=8, seed=3)
    for _ in range(6):
        run.next()
    state = json.loads(json.dumps(run.state()))
    expected = [run.next() for _ in range(12)]
    resumed = ClassBatches(ids, labels, PAD, batch_size=8, seed=0)
    resumed.set_state(state)
    _same_batches([resumed.next() for _ in range(12)], expected)


def test_classes_language_id_end_to_end(valid_pairs):
    from glassformer.tokenizer import CharTokenizer

    data = language_id(valid_pairs)
    tok = CharTokenizer.train([t for t, _ in data])
    batches = ClassBatches([tok.encode(t) for t, _ in data], [y for _, y in data], tok.pad_id, 32)
    batch = batches.next()
    for b, i in enumerate(batch["index"]):
        assert tok.decode(batch["x"][b]) == data[i][0] and batch["y"][b] == data[i][1]


@pytest.mark.parametrize(
    "ids, labels, batch_size, match",
    [
        ([[1], [2]], [0], 2, "labels has 1"),
        ([[1], [2]], [0, -1], 2, "non-negative"),
        ([[1], [2]], [0, 0.5], 2, "non-negative integers"),
        ([[]], [0], 2, "empty sequence"),
        ([[1]], [0], 0, "batch_size"),
    ],
)
def test_classes_refuse_bad_input(ids, labels, batch_size, match):
    with pytest.raises(DataError, match=match):
        ClassBatches(ids, labels, PAD, batch_size, seed=0)
