"""Round two, reading (issue 23): one rule for every file a command opens from a folder
(`files.member`), user text files read within a limit with one line-end rule, and the new-user
items of export-hf / import-hf and folders of models.

Families: outside (a file of a folder that leads elsewhere: links, subfolder links, `..`,
absolute names, broken links, folders, stray snapshot names), input (--input / --data / --corpus:
compressed data inflated past the limit, lone CRs), newuser (AutoTokenizer of a char export,
export-hf -> import-hf round trips, a folder of models, the `columns` advice).
"""

from __future__ import annotations

import gzip
import json
import shutil
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from table import Case, build_models, case_id, check_case  # noqa: E402

from glassformer import data as D  # noqa: E402
from glassformer import files, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402

CASES: list = []


def add(family, argv, message, **kw):
    CASES.append(Case(family, argv, message, **kw))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


# -- setups -------------------------------------------------------------------------------------


def _link_out(folder: Path, name: str) -> None:
    """Move folder/name beside the folder and leave a symbolic link to it in its place."""
    elsewhere = folder.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    shutil.move(folder / name, elsewhere / name)
    (folder / name).symlink_to(elsewhere / name)


def out_link(model, name, before=None):
    """Copy `model` to {tmp}/bad (running before(bad) first), then link its `name` out."""

    def setup(tmp, models):
        shutil.copytree(models / model, tmp / "bad")
        if before:
            before(tmp / "bad")
        _link_out(tmp / "bad", name)

    return setup


def snapshots(*steps):
    """Weight snapshots of the model itself at `steps` (copies of model.safetensors)."""

    def make(bad):
        for step in steps:
            shutil.copy(bad / "model.safetensors", bad / weights.snapshot_file(step))

    return make


def with_snapshot_files(model, names, change=None):
    def setup(tmp, models):
        shutil.copytree(models / model, tmp / "bad")
        for name in names:
            shutil.copy(tmp / "bad" / "model.safetensors", tmp / "bad" / name)
        if change:
            change(tmp / "bad")

    return setup


def hf_folder(kind="gpt2", safe=True, shards=False, change=None):
    """A tiny Hugging Face folder written by transformers (GPT-2 with a byte-level BPE
    vocab.json + merges.txt and tokenizer.json, or BERT with vocab.txt), then change(folder)."""

    def setup(tmp, models):
        from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        bad = tmp / "bad"
        if kind == "gpt2":
            cfg = GPT2Config(vocab_size=300, n_positions=16, n_embd=8, n_layer=1, n_head=2)
            model = GPT2LMHeadModel(cfg)
        else:
            cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                             num_attention_heads=2, intermediate_size=16,
                             max_position_embeddings=16)  # fmt: skip
            model = BertModel(cfg, add_pooling_layer=False)
        kw = {"max_shard_size": "2KB"} if shards else {}
        model.save_pretrained(bad, **kw)
        if not safe:  # the weights as a weights-only pickle instead
            torch.save(model.state_dict(), bad / "pytorch_model.bin")
            (bad / "model.safetensors").unlink()
        if kind == "gpt2":
            from tokenizers import ByteLevelBPETokenizer

            bpe = ByteLevelBPETokenizer()
            bpe.train_from_iterator(["hello world"] * 5, vocab_size=260, special_tokens=["<s>"])
            bpe.save_model(str(bad))
            bpe.save(str(bad / "tokenizer.json"))
            (bad / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
            (bad / "special_tokens_map.json").write_text('{"eos_token": "<s>"}')
        else:
            (bad / "vocab.txt").write_text(
                "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefghijklmnopqrstuvwxyz"])
            )
        if change:
            change(bad)

    return setup


def link(name):
    return lambda bad: _link_out(bad, name)


def _first_shard(bad):
    return sorted(bad.glob("model-*.safetensors"))[0].name


def _shard_in_linked_subfolder(bad):
    """The index names sub/<shard>, and sub is a link to a folder elsewhere holding it."""
    shard = _first_shard(bad)
    (bad.parent / "outdir").mkdir()
    shutil.move(bad / shard, bad.parent / "outdir" / shard)
    (bad / "sub").symlink_to(bad.parent / "outdir")
    index = json.loads((bad / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: f"sub/{shard}" if v == shard else v
                           for k, v in index["weight_map"].items()}  # fmt: skip
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))


def _rename_shard(to):
    def change(bad):
        index = json.loads((bad / "model.safetensors.index.json").read_text())
        shard = _first_shard(bad)
        index["weight_map"] = {k: to if v == shard else v for k, v in index["weight_map"].items()}
        (bad / "model.safetensors.index.json").write_text(json.dumps(index))

    return change


def _broken_link(name):
    def change(bad):
        (bad / name).unlink()
        (bad / name).symlink_to(bad / "gone.json")

    return change


def _folder_named(name):
    def change(bad):
        (bad / name).unlink()
        (bad / name).mkdir()

    return change


# -- outside: every reader refuses a file that leads out of its folder --------------------------

GEN = ["generate", "{bad}", "to be", "--max-new-tokens", "2"]
RESUME = ["train", "translate", "--out", "{bad}", "--data", "{models}/pairs.tsv", "--valid",
          "{models}/pairs.tsv", "--quiet", "--resume", "--set", "max_steps=3"]  # fmt: skip
OUTSIDE = "points outside"

# glassformer checkpoints, through every command that reads one
for name in ("config.json", "model.safetensors", "tokenizer.json"):
    add("outside", GEN, f"{name} {OUTSIDE}", setup=out_link("dec", name))
    add("outside", ["explain", "{bad}", "to be", "--max-new-tokens", "1"], f"{name} {OUTSIDE}",
        setup=out_link("dec", name))  # fmt: skip
    add("outside", ["export", "{bad}", "{tmp}/x"], f"{name} {OUTSIDE}", setup=out_link("lm", name))


def _labels(bad):
    (bad / "labels.json").write_text('["English", "Spanish"]')


for name in ("config.json", "model.safetensors", "tokenizer.json", "labels.json"):
    add("outside", ["classify", "{bad}", "to be"], f"{name} {OUTSIDE}",
        setup=out_link("enc", name, _labels))  # fmt: skip
add("outside", ["embed", "{bad}", "to be"], f"model.safetensors {OUTSIDE}",
    setup=out_link("enc", "model.safetensors"))  # fmt: skip
add("outside", ["translate", "{bad}", "Hello."], f"tokenizer.json {OUTSIDE}",
    setup=out_link("tr", "tokenizer.json"))  # fmt: skip
add("outside", ["train", "lm", "--out", "{tmp}/o", "--data", "{models}/corpus.txt", "--quiet",
                "--init", "{bad}"], f"model.safetensors {OUTSIDE}",
    setup=out_link("dec", "model.safetensors"))  # fmt: skip
add("outside", ["generate", "{bad}", "to be"], "is a folder; it should be a file",
    setup=with_snapshot_files("dec", [], _folder_named("tokenizer.json")))  # fmt: skip
add("outside", ["generate", "{bad}", "to be"], "broken link",
    setup=with_snapshot_files("dec", [], _broken_link("tokenizer.json")))  # fmt: skip

# weight snapshots: export --average and train --resume
AVG = ["export", "{bad}", "{tmp}/x", "--average", "2"]
add("outside", AVG, f"{weights.snapshot_file(2)} {OUTSIDE}",
    setup=out_link("lm", weights.snapshot_file(2), snapshots(1, 2)))  # fmt: skip
add("outside", AVG, f"{weights.snapshot_file(1)} {OUTSIDE}",
    setup=out_link("lm", weights.snapshot_file(1), snapshots(1, 2)))  # fmt: skip
add("outside", AVG, "is a folder",
    setup=with_snapshot_files("lm", [weights.snapshot_file(1)],
                              lambda b: (b / weights.snapshot_file(2)).mkdir()))  # fmt: skip
add("outside", AVG, "past the run's max_steps 2",
    setup=with_snapshot_files("lm", [weights.snapshot_file(2),
                                     "snapshot-step99999999999999.safetensors"]))  # fmt: skip
for stray in (
    "snapshot-step0000000002.safetensors",
    "snapshot-step2.safetensors",
    "snapshot-step00000003 (copy).safetensors",
    "snapshot-step-0000002.safetensors",
):
    # a name that snapshot_file never writes is not a snapshot: 2 left, so 3 are too few
    add("outside", [*AVG[:-1], "3"], "keeps 2 weight snapshot(s)",
        setup=with_snapshot_files("lm", [weights.snapshot_file(1), weights.snapshot_file(2),
                                         stray]))  # fmt: skip
add("outside", AVG, "averaged the weights of steps 1, 2", code=0,
    setup=with_snapshot_files("lm", [weights.snapshot_file(1), weights.snapshot_file(2),
                                     "snapshot-step000000099.safetensors"]))  # fmt: skip
for name in ("training_state.pt", "train_config.json", "config.json", "model.safetensors"):
    add("outside", RESUME, f"{name} {OUTSIDE}", setup=out_link("tr", name))
add("outside", [*RESUME, "--set", "keep_snapshots=2"], f"{weights.snapshot_file(2)} {OUTSIDE}",
    setup=out_link("tr", weights.snapshot_file(2), snapshots(1, 2)))  # fmt: skip

# Hugging Face folders of every format, through import-hf and a command that loads one
IMPORT = ["import-hf", "{bad}", "{tmp}/x"]
for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.json", "merges.txt",
             "tokenizer_config.json", "special_tokens_map.json"):  # fmt: skip
    add("outside", IMPORT, f"{name} {OUTSIDE}", setup=hf_folder(change=link(name)))
add("outside", ["generate", "{bad}", "hello", "--max-new-tokens", "1"],
    f"model.safetensors {OUTSIDE}", setup=hf_folder(change=link("model.safetensors")))  # fmt: skip
add("outside", IMPORT, f"pytorch_model.bin {OUTSIDE}",
    setup=hf_folder(safe=False, change=link("pytorch_model.bin")))  # fmt: skip
add("outside", IMPORT, f"model.safetensors.index.json {OUTSIDE}",
    setup=hf_folder(shards=True, change=link("model.safetensors.index.json")))  # fmt: skip
add("outside", IMPORT, OUTSIDE,
    setup=hf_folder(shards=True, change=lambda b: _link_out(b, _first_shard(b))))  # fmt: skip
add("outside", IMPORT, OUTSIDE, setup=hf_folder(shards=True, change=_shard_in_linked_subfolder))
for to in ("sub/../../x.safetensors", "/tmp/x.safetensors", ".."):
    add("outside", IMPORT, "inside the folder",
        setup=hf_folder(shards=True, change=_rename_shard(to)))  # fmt: skip
add("outside", IMPORT, f"vocab.txt {OUTSIDE}", setup=hf_folder("bert", change=link("vocab.txt")))
add("outside", IMPORT, "broken link", setup=hf_folder(change=_broken_link("tokenizer.json")))


def _ours_linked_out(bad):
    (bad / "glassformer-tokenizer.json").write_text("{}")
    _link_out(bad, "glassformer-tokenizer.json")


add("outside", IMPORT, f"glassformer-tokenizer.json {OUTSIDE}",
    setup=hf_folder(change=_ours_linked_out))  # fmt: skip


# -- input: user text files ---------------------------------------------------------------------


def _bomb(path: Path, gigabytes: float = 1.0) -> None:
    """About 1 MB of gzip that inflates to `gigabytes` GB of 'a' (100 identical members)."""
    member = gzip.compress(b"a" * (10 << 20), compresslevel=9)
    path.write_bytes(member * int(100 * gigabytes))


def bomb(name):
    return lambda tmp, models: _bomb(tmp / name)


def text_file(name, data: bytes):
    def setup(tmp, models):
        (tmp / name).write_bytes(data)

    return setup


INPUTS = [
    ["generate", "{dec}", "--input", "{tmp}/{f}", "--max-new-tokens", "1"],
    ["translate", "{tr}", "--input", "{tmp}/{f}"],
    ["classify", "{enc}", "--input", "{tmp}/{f}"],
    ["train", "lm", "--out", "{tmp}/o", "--data", "{tmp}/{f}", "--quiet"],
    ["init", "{tmp}/o", "--preset", "tiny", "--tokenizer", "char", "--corpus", "{tmp}/{f}"],
]


def _with(argv, f):
    return [a.replace("{f}", f) for a in argv]


TOO_BIG = "MB of text once decompressed"
add("input", _with(INPUTS[0], "in.txt.gz"), f"more than {D.MAX_TEXT_BYTES >> 20} {TOO_BIG}",
    setup=bomb("in.txt.gz"), id="real-limit")  # fmt: skip
for argv in INPUTS:
    add("input", _with(argv, "in.txt.gz"), TOO_BIG, setup=bomb("in.txt.gz"))
    add("input", _with(argv, "in.txt"), "line 2: a carriage return",
        setup=text_file("in.txt", b"to be\nor\rnot\n"))  # fmt: skip
add("input", _with(INPUTS[0], "in.bin"), TOO_BIG, setup=bomb("in.bin"))  # found by magic number
add("input", _with(INPUTS[0], "in.txt"), "line 1: a carriage return",
    setup=text_file("in.txt", b"to be\r"))  # fmt: skip
add("input", _with(INPUTS[0], "in.txt"), "line 3: a carriage return",
    setup=text_file("in.txt", gzip.compress(b"a\r\nb\r\n\rc\r\n")))  # fmt: skip
add("input", ["train", "translate", "--out", "{tmp}/o", "--data", "{tmp}/p.tsv", "--quiet"],
    "line 2: a carriage return", setup=text_file("p.tsv", b"Go.\tVe.\r\nHi.\rHola.\n"))  # fmt: skip
add("input", _with(INPUTS[0], "in.txt.gz"), "cannot read",
    setup=text_file("in.txt.gz", gzip.compress(b"to be or not\n" * 100)[:-30]))  # fmt: skip
add("input", _with(INPUTS[0], "in.txt"), "to be", code=0,
    setup=text_file("in.txt", b"to be\r\nor not\r\n"))  # CRLF ends lines  # fmt: skip


# -- newuser: the items a new user met ----------------------------------------------------------

add(
    "newuser",
    ["translate", "{models}", "Hello"],
    "is a folder of models, not a model: it holds dec, enc, hello, lm, tr; give one of them",
)
add("newuser", ["generate", "{models}", "to be"], "give one of them:")
add("newuser", ["train", "translate", "--out", "{tmp}/o", "--data", "{tmp}/p.tsv", "--quiet"],
    "keep only the first two columns of every line (cut -f1,2",
    setup=text_file("p.tsv", b"Go.\tVe.\tCC-BY 2.0\n"))  # fmt: skip


@pytest.mark.parametrize("case", [c for c in CASES if isinstance(c, Case)], ids=case_id)
def test_table(case, models, tmp_path, capsys, monkeypatch):
    if case.family == "input" and case.id != "real-limit":  # the same refusal, inflating less
        monkeypatch.setattr(D, "MAX_TEXT_BYTES", 16 << 20)
    check_case(case, models, tmp_path, capsys)


# -- outside: the rule itself -------------------------------------------------------------------

RULE = [
    ("outside", "absolute", lambda d: "/etc/hostname", "inside the folder"),
    ("outside", "dotdot", lambda d: "../x.json", "inside the folder"),
    ("outside", "empty", lambda d: "", "inside the folder"),
    (
        "outside",
        "link-out",
        lambda d: (d / "a.json").symlink_to(d.parent / "o.json") or "a.json",
        OUTSIDE,
    ),  # fmt: skip
    ("outside", "link-to-link-out", lambda d: _chain(d), OUTSIDE),
    ("outside", "subfolder-out", lambda d: (d / "s").symlink_to(d.parent) or "s/o.json", OUTSIDE),
    ("outside", "folder", lambda d: (d / "f").mkdir() or "f", "is a folder"),
    ("outside", "fifo", lambda d: __import__("os").mkfifo(d / "p") or "p", "not a regular file"),
    ("outside", "missing", lambda d: "nothing.json", "has no nothing.json"),
]
CASES += RULE


def _chain(d):
    (d / "b.json").symlink_to(d.parent / "o.json")
    (d / "a.json").symlink_to(d / "b.json")
    return "a.json"


@pytest.mark.parametrize("row", RULE, ids=[r[1] for r in RULE])
def test_member_refuses(row, tmp_path):
    _, _, make, message = row
    (tmp_path / "o.json").write_text("{}")
    folder = tmp_path / "m"
    folder.mkdir()
    name = make(folder)
    with pytest.raises(files.FileError, match=message):
        files.member(folder, name)


def test_member_accepts_links_that_stay_inside(tmp_path):
    folder = tmp_path / "real"
    (folder / "blobs").mkdir(parents=True)
    (folder / "blobs" / "x").write_text("{}")
    (folder / "a.json").symlink_to(folder / "blobs" / "x")
    (tmp_path / "alias").symlink_to(folder)  # the folder itself may be a link
    assert files.member(tmp_path / "alias", "a.json") == tmp_path / "alias" / "a.json"
    assert files.member(folder, "blobs/x") == folder / "blobs" / "x"
    assert files.member(folder, "absent", required=False) is None


def test_snapshot_steps_takes_only_names_snapshot_file_writes(tmp_path):
    for name in [weights.snapshot_file(s) for s in (5, 10**9)] + [
        "snapshot-step5.safetensors", "snapshot-step000000005.safetensors",
        "snapshot-step٠٠٠٠٠٠٠٧.safetensors", "snapshot-step00000006.safetensors.bak",
    ]:  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert weights.snapshot_steps(tmp_path) == [5, 10**9]
    (tmp_path / "train_config.json").write_text('{"max_steps": 100}')
    with pytest.raises(GlassformerError, match="names step 1000000000, past the run's max_steps"):
        weights.snapshot_steps(tmp_path)


# -- input: bounded reading ---------------------------------------------------------------------

CASES += [("input", "bomb-bounded"), ("input", "plain-limit")]


def test_a_gzip_bomb_is_refused_once_the_limit_is_passed(tmp_path, monkeypatch):
    _bomb(tmp_path / "b.gz", gigabytes=1.0)
    monkeypatch.setattr(D, "MAX_TEXT_BYTES", 8 << 20)
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(D.DataError, match="more than 8 MB of text once decompressed"):
        D.read_file(tmp_path / "b.gz")
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 << 20, peak  # about the limit, never the gigabyte
    assert seconds < 2.0, seconds


def test_a_plain_file_over_the_limit_is_refused_and_one_at_it_read(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "MAX_TEXT_BYTES", 1000)
    (tmp_path / "ok.txt").write_bytes(b"a" * 999 + b"\n")
    assert D.read_file(tmp_path / "ok.txt") == "a" * 999 + "\n"
    (tmp_path / "big.txt").write_bytes(b"a" * 1001)
    with pytest.raises(D.DataError, match="more than 0 MB of text, the most"):
        D.read_file(tmp_path / "big.txt")


# -- newuser: export-hf -------------------------------------------------------------------------


def _round_trip(model: Path, tmp: Path) -> tuple[Path, Path]:
    assert main(["export-hf", str(model), str(tmp / "hf")]) == 0
    assert main(["import-hf", str(tmp / "hf"), str(tmp / "back")]) == 0
    return tmp / "hf", tmp / "back"


def _bits(path: Path) -> dict:
    from safetensors.numpy import load_file

    return {k: v.view(np.uint8).tobytes() for k, v in load_file(str(path)).items()}


def _char_lm(d: Path) -> Path:
    """A tiny model of the shipped char-lm preset (bias=False), float32 on disk."""
    corpus = d / "c.txt"
    corpus.write_text("ROMEO: But soft, what light through yonder window breaks?\n" * 3)
    assert main(["init", str(d / "clm"), "--preset", "char-lm", "--tokenizer", "char", "--corpus",
                 str(corpus), "--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32",
                 "--set", "n_decoder_layers=1", "--set", "max_len=16"]) == 0  # fmt: skip
    return d / "clm"


def _bert(d: Path) -> Path:
    corpus = d / "c.txt"
    corpus.write_text("to be or not to be\n")
    assert main(["init", str(d / "bert"), "--preset", "encoder-classifier", "--tokenizer", "word",
                 "--corpus", str(corpus), "--set", "n_classes=0", "--set", "type_vocab_size=2",
                 "--set", "embed_norm=true", "--set", "d_model=16", "--set", "d_ff=32",
                 "--set", "max_len=16"]) == 0  # fmt: skip
    return d / "bert"


ROUND_TRIPS = [("newuser", "gpt2-bias-false"), ("newuser", "gpt2-bias-true"),
               ("newuser", "bert"), ("newuser", "pegasus")]  # fmt: skip
CASES += ROUND_TRIPS


@pytest.mark.parametrize("row", ROUND_TRIPS, ids=[r[1] for r in ROUND_TRIPS])
def test_export_hf_then_import_hf_gives_back_the_same_model(row, models, tmp_path):
    which = row[1]
    model = {
        "gpt2-bias-false": lambda: _char_lm(tmp_path),
        "gpt2-bias-true": lambda: models / "dec",
        "bert": lambda: _bert(tmp_path),
        "pegasus": lambda: models / "tr",
    }[which]()
    if which == "gpt2-bias-true":  # the tiny preset: post-LN, sinusoidal; make it GPT-2-shaped
        assert main(["init", str(tmp_path / "g"), "--preset", "tiny", "--tokenizer", "char",
                     "--corpus", str(models / "corpus.txt"), "--set", "norm=pre",
                     "--set", "positions=learned", "--set", "tie_embeddings=true",
                     "--set", "activation=gelu_tanh"]) == 0  # fmt: skip
        model = tmp_path / "g"
    _, back = _round_trip(model, tmp_path)
    before, _, tok = weights.load(model)
    after, _, tok_after = weights.load(back)
    assert after == before
    assert tok_after.to_json() == tok.to_json()
    assert _bits(back / "model.safetensors") == _bits(model / "model.safetensors")


CASES += [("newuser", "autotokenizer-char"), ("newuser", "autotokenizer-word"),
          ("newuser", "bias-record-checked"), ("newuser", "no-hf-form")]  # fmt: skip


@pytest.mark.parametrize("name", ["dec", "word"])
def test_autotokenizer_of_an_export_encodes_as_glassformer(name, models, tmp_path):
    from transformers import AutoTokenizer

    model = models / "dec"
    if name == "word":
        assert main(["init", str(tmp_path / "w"), "--preset", "tiny", "--tokenizer", "word",
                     "--corpus", str(models / "corpus.txt"), "--set", "norm=pre",
                     "--set", "positions=learned", "--set", "tie_embeddings=true",
                     "--set", "activation=gelu_tanh"]) == 0  # fmt: skip
        model = tmp_path / "w"
    else:  # the table's dec is post-LN: export-hf needs GPT-2's shape
        model = _char_lm(tmp_path)
    assert main(["export-hf", str(model), str(tmp_path / "hf")]) == 0
    auto = AutoTokenizer.from_pretrained(str(tmp_path / "hf"), local_files_only=True)
    _, _, tok = weights.load(model)
    texts = ["ROMEO:", "To be, or not to be: that is the question.", "a\nb\tc  d", "<s> x</s>",
             "Ünïcödé ß İ 🙂", (models / "corpus.txt").read_text()[:500]]  # fmt: skip
    for text in texts:
        assert auto(text)["input_ids"] == tok.encode(text), text
    assert auto("ROMEO:")["input_ids"]  # never nothing


def test_import_hf_checks_the_recorded_bias(tmp_path):
    from safetensors.numpy import load_file, save_file

    hf, _ = _round_trip(_char_lm(tmp_path), tmp_path)
    tensors = load_file(str(hf / "model.safetensors"))
    tensors["transformer.h.0.mlp.c_fc.bias"][0] = 1.0
    save_file(tensors, str(hf / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(GlassformerError, match="is not zero, but config.json's 'glassformer'"):
        from glassformer.formats import hf_dir

        hf_dir.load(hf)


def test_a_tokenizer_without_a_hugging_face_form_is_refused_in_one_line():
    from glassformer import tokenizer as tk
    from glassformer.tokenizer.hf_form import hf_form

    with pytest.raises(GlassformerError, match="has no Hugging Face form.*no UNK token"):
        hf_form(tk.CharTokenizer(["a", "b"], {}))
    lower = tk.CharTokenizer(["<unk>", "a", "B"], {"unk": "<unk>"}, lowercase=True)
    with pytest.raises(GlassformerError, match="lowercases characters"):
        hf_form(lower)
