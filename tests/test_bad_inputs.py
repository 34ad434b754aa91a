"""Every promise under bad input and faults, as one table: each case runs the command line and
asserts its exit status, exactly one line on stderr (no traceback), and that every file that
existed before is byte-identical afterwards (a refusal writes nothing); the harness is in
tests/table.py, round two's table in tests/test_edges.py.

Families: cli (numeric and choice values), text (what users type and the files they give),
folder (every file of a model folder), state (training state on --resume), overwrite (nothing is
replaced without a flag), numerics (non-finite values never pass silently). Disk-full, read-only,
signal and fuzzing cases live in test_faults.py.
"""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from table import (  # noqa: E402
    Case,
    build_models,
    case_id,
    check_case,
    config_edit,
    copy_of,
    edit,
    make_file,
    state_edit,
    write,
)

GEN = ["generate", "{hello}", "hello world"]
SAMPLE = [*GEN, "--strategy", "sample"]
TRAIN = ["train", "lm", "--out", "{tmp}/out", "--data", "{models}/corpus.txt", "--quiet"]
TR = ["translate", "{tr}", "Hello."]
RESUME = ["train", "translate", "--out", "{bad}", "--data", "{models}/pairs.tsv", "--valid",
          "{models}/pairs.tsv", "--quiet", "--resume", "--set", "max_steps=3"]  # fmt: skip

CASES: list[Case] = []


def add(family, argv, message, **kw):
    CASES.append(Case(family, argv, message, **kw))


# cli: every number and choice checked at the edge
for value, msg in [("-1", "at least 1"), ("abc", "invalid int value"), ("0", "at least 1")]:
    add("cli", [*GEN, "--max-new-tokens", value], msg)
for value, msg in [("nan", "finite"), ("inf", "finite"), ("0", "> 0"), ("-1", "> 0")]:
    add("cli", [*SAMPLE, "--temperature", value], msg)
add("cli", [*GEN, "--temperature", "-1"], "temperature")
for flag, value, msg in [
    ("--top-k", "0", "top-k must be >= 1"),
    ("--top-k", "-5", "top-k must be >= 1"),
    ("--top-p", "0", "top-p must be in (0, 1]"),
    ("--top-p", "1.5", "top-p must be in (0, 1]"),
    ("--top-p", "nan", "top-p must be in (0, 1]"),
    ("--seed", "-1", "seed must be"),
    ("--seed", str(2**32), "seed must be"),
]:
    add("cli", [*SAMPLE, flag, value], msg)
for flag, value, msg in [
    ("--beam-width", "0", "beam width must be >= 1"),
    ("--beam-width", "100000", "at most the vocabulary"),
    ("--length-penalty", "nan", "length-penalty must be a finite number"),
    ("--length-penalty", "inf", "length-penalty must be a finite number"),
]:
    add("cli", [*GEN, "--strategy", "beam", flag, value], msg)
for flag, value, msg in [
    ("--std", "0", "std must be"),
    ("--std", "-1", "std must be"),
    ("--std", "nan", "std must be"),
    ("--std", "inf", "std must be"),
    ("--seed", "-3", "seed must be"),
    ("--seed", "99999999999", "seed must be"),
]:
    add("cli", ["init", "{tmp}/x", flag, value], msg)
for setting, msg in [
    ("d_model=0", "d_model must be >= 1"),
    ("d_model=-5", "d_model must be >= 1"),
    ("d_model=3.5", "d_model must be an integer"),
    ("ln_eps=nan", "ln_eps must be in (0, 1)"),
    ("ln_eps=inf", "ln_eps must be in (0, 1)"),
    ("n_heads=0", "n_heads must be >= 1"),
    ("head_dim=0", "head_dim must be >= 1"),
    ("vocab_size=1e9", "vocab_size must be an integer"),
    ("=5", "expected key=value"),
    ("d_model", "expected key=value"),
    ("bias=maybe", "bias must be true or false"),
]:
    add("cli", ["config", "--set", setting], msg)
add("cli", ["config", "--preset", "nosuch"], "invalid choice")
add("cli", ["init", "{tmp}/x", "--set", "d_model=200000", "--set", "d_ff=200000"], "GiB")
add("cli", ["init", "{tmp}/x", "--set", "max_len=100000000000"], "GiB")
add("cli", ["init", "{tmp}/x", "--preset", "tiny", "--set", "n_decoder_layers=1000000000"], "GiB")
add("cli", ["config", "--preset", "tiny", "--set", "n_decoder_layers=1000000000"], "parameters",
    code=0)  # sized in closed form: no hang  # fmt: skip
for setting, msg in [
    ("lr=0", "lr must be a finite number > 0"),
    ("lr=nan", "lr must be a finite number > 0"),
    ("lr=inf", "lr must be a finite number > 0"),
    ("lr=-1", "lr must be a finite number > 0"),
    ("min_lr=nan", "min_lr"),
    ("beta1=1", "beta1 must be in [0, 1)"),
    ("beta2=1.5", "beta2 must be in [0, 1)"),
    ("beta2=-0.1", "beta2 must be in [0, 1)"),
    ("weight_decay=-1", "weight_decay must be a finite number >= 0"),
    ("weight_decay=nan", "weight_decay must be a finite number >= 0"),
    ("threads=-1", "threads must be >= 0"),
    ("seed=-1", "seed must be"),
    ("seed=4294967296", "seed must be"),
    ("dropout=1", "dropout"),
    ("label_smoothing=nan", "label_smoothing"),
    ("grad_clip=-1", "grad_clip must be a finite number >= 0"),
    ("grad_clip=nan", "grad_clip must be a finite number >= 0"),
    ("max_minutes=-1", "max_minutes must be a finite number >= 0"),
    ("max_minutes=nan", "max_minutes must be a finite number >= 0"),
    ("warmup_steps=-1", "warmup_steps must be >= 0"),
    ("max_steps=0", "max_steps must be >= 1"),
    ("eval_interval=0", "eval_interval must be >= 1"),
    ("embed_std=-1", "embed_std"),
    ("keep_snapshots=-1", "keep_snapshots must be >= 0"),
    ("nofield=1", "unknown field"),
    ("init=glorot", "init must be one of"),
]:
    add("cli", [*TRAIN, "--set", setting], msg)
for value in ("0", "-5"):
    add("cli", [*TRAIN, "--vocab-size", value], "vocab-size must be >= 1")
add("cli", [*TRAIN, "--device", "tpu"], "device")
add("cli", [*TRAIN, "--device", "cuda:7"], "device")
for value in ("0", "-1"):
    add("cli", ["eval", "{tr}", "--data", "{models}/pairs.tsv", "--limit", value], "at least 1")
    add("cli", [*TR, "--beam", value], "beam")
add("cli", [*TR, "--beam", "100000"], "at most the vocabulary")
add("cli", ["walkthrough", "hello-world", "--seed", "-1"], "seed must be")
add("cli", ["explain", "{hello}", "hello", "--layers", "a,b"], "--layers")
add("cli", ["explain", "{hello}", "hello", "--layers", "99"], "layer")
add("cli", ["explain", "{hello}", "hello", "--heads", "-1"], "--heads")
add("cli", ["nosuchcommand"], "invalid choice")
add("cli", [*GEN, "--dtype", "int8", "--engine", "reference"], "--engine reference is NumPy")
add("cli", [*GEN, "--dtype", "float32", "--engine", "reference"], "drop --dtype")
add("cli", [*GEN, "--dtype", "float16"], "invalid choice")
add("cli", [*TR, "--dtype", "bfloat16"], "invalid choice")
add("cli", ["serve", "--dtype", "int4"], "invalid choice")
add("cli", GEN[:2], "give TEXT or --input FILE")
add("cli", [*GEN, "--input", "{tmp}/in.txt"], "not both", setup=make_file("in.txt", "hello\n"))
add("cli", [*GEN, "--batch-size", "0"], "at least 1")
add("cli", ["train", "lm"], "--out")
add("cli", ["embed", "{dec}", "to be"], "embed needs an encoder")

# cli: no option is ever ignored (issue 12.3); the nearest valid name is suggested
add("cli", [*GEN, "--strategy", "greedy", "--top-k", "3"], "does nothing with --strategy greedy")
add("cli", [*GEN, "--strategy", "sample", "--length-penalty", "2"], "use --strategy beam")
add("cli", [*GEN, "--seed", "1", "--beam-width", "2"], "choose one --strategy")
add("cli", ["genrate", "{hello}", "x"], "did you mean generate?")
add("cli", [*GEN, "--max-new-tokns", "3"], "did you mean --max-new-tokens?")
add("cli", [*GEN, "--strategy", "gready"], "did you mean greedy?")
add("cli", ["config", "--set", "d_modle=3"], "did you mean d_model?")
add("cli", [*TRAIN, "--set", "max_step=3"], "did you mean max_steps?")
add("cli", ["explain", "{hello}", "hello", "--only", "crossattn"], "closest: cross_attn")
add("cli", ["explain", "{enc}", "to be", "--target", "x"], "does nothing for an encoder")
add("cli", ["explain", "{enc}", "to be", "--max-new-tokens", "2"], "does nothing for an encoder")
add("cli", ["explain", "{dec}", "to be", "--target", "x"], "--target is the decoder text")
add("cli", ["explain", "{dec}", "to be", "--strategy", "beam"], "--max-new-tokens N")
add("cli", ["explain", "{hello}", "hello", "--target", "hola", "--top-k", "2"], "--target gives")
add("cli", ["explain", "{hello}", "hello", "--find-nan", "--html", "{tmp}/r.html"], "does nothing")
add("cli", ["walkthrough", "self-attention", "--seed", "1"], "--seed does nothing")
add("cli", ["walkthrough", "hello-world", "--all", "--html", "{tmp}/r.html"], "--all chooses")
add("cli", ["walkthrough", "hello-world", "--json", "-", "--html", "-"], "both write to stdout")
add("cli", ["walkthrough", "hello-world", "--png", "-"], "give a folder")
add("cli", ["eval", "{lm}", "--data", "{models}/corpus.txt", "--beam", "2"], "is for translation")
add("cli", ["init", "{tmp}/x", "--corpus", "{models}/corpus.txt"], "--corpus does nothing")
add("cli", [*TRAIN, "--valid", "{models}/corpus.txt"], "--valid is for translate and classify")
add("cli", [*TRAIN, "--vocab-size", "50"], "--vocab-size does nothing with the char tokenizer")
add("cli", [*TRAIN, "--init", "{lm}", "--tokenizer", "word"], "does nothing with --init")

# text: what people type and the files they give
for text in ("", "   ", "\n\n", "\t"):
    add("text", ["generate", "{dec}", text], "empty")
add("text", [*GEN[:2], "hello " * 40], "max_len")
add("text", [*GEN[:2], "hello banana"], "'banana' is not in the vocabulary")
add("text", ["generate", "{hello}", "hello\x00world"], "not in the vocabulary")
add("text", ["explain", "{hello}", "hello", "--target", ""], "empty")
add("text", ["embed", "{enc}", ""], "empty")
add("text", ["translate", "{tr}", "--input", "{tmp}/none.txt"], "cannot read")
add("text", ["translate", "{tr}", "--input", "{tmp}"], "is a directory")
add("text", ["translate", "{tr}", "--input", "{tmp}/in.txt"], "NUL",
    setup=make_file("in.txt", b"Hello.\n\x00\x01\x02\n"))  # fmt: skip
add("text", ["translate", "{tr}", "--input", "{tmp}/in.txt"], "line 2",
    setup=make_file("in.txt", b"Hello.\nbad \xff\n"))  # fmt: skip
add("text", ["translate", "{tr}", "--input", "{tmp}/in.txt"], "empty",
    setup=make_file("in.txt", b""))  # fmt: skip
add("text", ["translate", "{tr}", "--input", "{tmp}/in.txt"], "empty",
    setup=make_file("in.txt", b"\xef\xbb\xbf\r\n  \r\n"))  # fmt: skip
add("text", ["translate", "{tr}"], "nothing to translate")
add("text", ["translate", "{tr}", "Hi.", "--input", "{tmp}/in.txt"], "in.txt, line 2: the text has",
    setup=make_file("in.txt", "Hello.\n" + "hello " * 80 + "\n"))  # fmt: skip
add("text", ["translate", "{tr}", "Hi.", "hello " * 80], "sentence 2: the text has")
add("text", ["generate", "{hello}", "--input", "{tmp}/none.txt"], "cannot read")
add("text", ["generate", "{hello}", "--input", "{tmp}/in.txt"], "in.txt, line 2: the text has",
    setup=make_file("in.txt", "hello\n" + "hello " * 40 + "\n"))  # fmt: skip
add("text", ["generate", "{hello}", "--input", "{tmp}/in.txt"], "line 2: word 'banana' is not in",
    setup=make_file("in.txt", b"hello\nbanana\n"))  # fmt: skip
add("text", ["classify", "{enc}"], "nothing to classify")
add("text", ["classify", "{enc}", "", "  "], "nothing to classify")
add("text", ["classify", "{enc}", "--input", "{tmp}/none.txt"], "cannot read")
add("text", ["classify", "{enc}", "--input", "{tmp}/in.txt"], "line 2",
    setup=make_file("in.txt", b"to be\nbad \xff\n"))  # fmt: skip
add("text", ["classify", "{enc}", "to be " * 200], "max_len")
add("text", ["init", "{tmp}/x", "--tokenizer", "char", "--corpus", "{tmp}/c.txt"], "line 1",
    setup=make_file("c.txt", b"\xff\xfe"))  # fmt: skip
add("text", ["init", "{tmp}/x", "--tokenizer", "char", "--corpus", "{tmp}"], "is a directory")
add("text", ["init", "{tmp}/x", "--tokenizer", "char"], "needs --corpus")
add("text", [*TRAIN[:4], "--data", "{tmp}/c.txt"], "line 2",
    setup=make_file("c.txt", b"fine\nbad \xff\n"))  # fmt: skip
add("text", [*TRAIN[:4], "--data", "{tmp}/none.txt"], "neither a shipped corpus")
add("text", ["train", "translate", "--out", "{tmp}/o", "--data", "{tmp}/p.tsv"], "columns",
    setup=make_file("p.tsv", "a\tb\tc\n"))  # fmt: skip
add("text", ["train", "translate", "--out", "{tmp}/o", "--data", "{tmp}/p.tsv"], "empty file",
    setup=make_file("p.tsv", ""))  # fmt: skip
add("text", ["train", "translate", "--out", "{tmp}/o", "--data", "{tmp}"], "is a directory")
add("text", ["eval", "{tr}", "--data", "{tmp}/p.tsv"], "column 2 is empty",
    setup=make_file("p.tsv", "Hello.\t\n"))  # fmt: skip

# folder: every file of a model folder is validated before use, naming the file and the field
CONFIG_CASES = [
    ({"d_model": "16"}, "d_model must be an integer"),
    ({"d_model": 16.0}, "d_model must be an integer"),
    ({"arch": ["decoder"]}, "arch must be one of"),
    ({"max_len": 10**12}, "GiB"),
    ({"vocab_size": 10**10}, "GiB"),
    ({"n_heads": None}, "n_heads must be an integer"),
    ({"ln_eps": float("nan")}, "ln_eps"),
    ({"bias": "yes"}, "bias must be true or false"),
    ({"surprise": 1}, "unknown config field"),
    ({"positions": 3}, "positions must be one of"),
]
for changes, msg in CONFIG_CASES:
    add("folder", ["generate", "{bad}", "to be"], msg, setup=edit("dec", "config.json",
        config_edit(**changes)))  # fmt: skip
for name, content, msg in [
    ("config.json", "{not json", "config.json"),
    ("config.json", "[1, 2]", "JSON object"),
    ("config.json", b"\xff\xfe{}", "UTF-8"),
    ("config.json", "[" * 100000 + "]" * 100000, "nested"),
    ("config.json", '{"arch": ' + "[" * 50000 + "]" * 50000 + "}", "nested"),
    ("model.safetensors", b"", "truncated or corrupt"),
    ("model.safetensors", struct.pack("<Q", 2**60) + b"{}", "truncated or corrupt"),
    ("model.safetensors", struct.pack("<Q", 5) + b"{oops", "truncated or corrupt"),
    ("tokenizer.json", "{not json", "tokenizer"),
    ("tokenizer.json", b"\xff\xfe", "tokenizer"),
    ("tokenizer.json", '{"format": "other"}', "format"),
    ("tokenizer.json", "[]", "tokenizer"),
    ("tokenizer.json", "[" * 100000 + "]" * 100000, "nested"),
]:
    add("folder", ["generate", "{bad}", "to be"], msg, setup=edit("dec", name,
        write(None, content)))  # fmt: skip


def _tok_edit(fn):
    def change(path):
        data = json.loads(path.read_text())
        fn(data)
        path.write_text(json.dumps(data))

    return change


for fn, msg in [
    (lambda d: d.update(kind="klingon"), "unknown tokenizer kind"),
    (lambda d: d.update(vocab=[1, 2, 3]), "not a non-empty string"),
    (lambda d: d.update(vocab=d["vocab"] + [f"x{i}" for i in range(50)]), "vocab_size"),
    (lambda d: d.update(specials={"bos": "<nope>"}), "not in vocab"),
    (lambda d: d.update(specials=["<s>"]), "specials"),
    (lambda d: d.update(lowercase="yes"), "lowercase"),
    (lambda d: d.pop("vocab"), "lacks the key 'vocab'"),
]:
    add("folder", ["generate", "{bad}", "to be"], msg,
        setup=edit("dec", "tokenizer.json", _tok_edit(fn)))  # fmt: skip


def _nan_weights(path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(path))
    name = next(iter(t))
    t[name] = np.full_like(t[name], np.nan)
    save_file(t, str(path))


def _wrong_shape(path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(path))
    name = next(iter(t))
    t[name] = np.zeros((3, 3), t[name].dtype)
    save_file(t, str(path))


def _int_tensor(path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(path))
    name = next(iter(t))
    t[name] = t[name].astype(np.int32)
    save_file(t, str(path))


for change, msg in [
    (_nan_weights, "NaN or infinite"),
    (_wrong_shape, "has shape"),
    (_int_tensor, "floating"),
]:
    add("folder", ["generate", "{bad}", "to be"], msg,
        setup=edit("dec", "model.safetensors", change))  # fmt: skip
for name, msg in [("config.json", "no config.json"), ("model.safetensors", "no model")]:
    add("folder", ["generate", "{bad}", "to be"], msg,
        setup=edit("dec", name, lambda p: p.unlink()))  # fmt: skip


def _make_dir(p):
    p.unlink()
    p.mkdir()


add("folder", ["generate", "{bad}", "to be"], "config.json",
    setup=edit("dec", "config.json", _make_dir))  # fmt: skip
add("folder", ["generate", "{bad}", "to be"], "model.safetensors",
    setup=edit("dec", "model.safetensors", _make_dir))  # fmt: skip
add("folder", ["generate", "{models}/corpus.txt", "to be"], "not a directory")
for content, msg in [
    ('["English"]', "one distinct name per class"),
    ('["English", "English"]', "one distinct name per class"),
    ('{"0": "English"}', "a list of class names"),
    ('["English", ""]', "a list of class names"),
    ("{oops", "labels.json"),
    (b"\xff\xfe", "UTF-8"),
]:
    add("folder", ["classify", "{bad}", "to be"], msg,
        setup=edit("enc", "labels.json", write(None, content)))  # fmt: skip
add("folder", ["classify", "{dec}", "to be"], "classify needs an encoder with a classifier")
add("folder", ["classify", "{hello}", "hello"], "classify needs an encoder with a classifier")
add("folder", ["generate", "{tmp}/none", "to be"], "not found")


def _outside_link(path):
    outside = path.parent.parent / "outside.safetensors"
    shutil.copy(path, outside)
    path.unlink()
    path.symlink_to(outside)


add("folder", ["generate", "{bad}", "to be"], "outside",
    setup=edit("dec", "model.safetensors", _outside_link))  # fmt: skip


def _hf_folder(config, files=None):
    """A small GPT-2 folder written by transformers, then its config changed / files added."""

    def setup(tmp, models):
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        cfg = GPT2Config(vocab_size=20, n_positions=16, n_embd=8, n_layer=1, n_head=2)
        GPT2LMHeadModel(cfg).save_pretrained(tmp / "bad")
        data = json.loads((tmp / "bad" / "config.json").read_text())
        data.update(config)
        (tmp / "bad" / "config.json").write_text(json.dumps(data))
        for name, content in (files or {}).items():
            f = tmp / "bad" / name
            f.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


def _index(shard):
    return json.dumps({"weight_map": {"transformer.wte.weight": shard}})


for config, files, msg in [
    ({"model_type": "t5"}, None, "is not supported"),
    ({"model_type": 5}, None, "model_type"),
    ({"n_layer": "1"}, None, "n_layer"),
    ({"n_embd": -8}, None, "n_embd"),
    ({}, {"tokenizer.json": b"\xff\xfe{}"}, "UTF-8"),
    ({}, {"model.safetensors.index.json": _index("../../x.safetensors")}, "inside the folder"),
    ({}, {"model.safetensors.index.json": _index("/etc/passwd")}, "inside the folder"),
    ({}, {"model.safetensors.index.json": "[" * 100000}, "index.json"),
]:
    add("folder", ["import-hf", "{bad}", "{tmp}/x"], msg, setup=_hf_folder(config, files))


# state: every key of training_state.pt checked on --resume
def _set(key, value):
    return lambda s: s.__setitem__(key, value)


for fn, msg in [
    (lambda s: s.pop("optimizer"), "optimizer"),
    (_set("step", -3), "step"),
    (_set("step", "three"), "step"),
    (lambda s: s["optimizer"]["param_groups"].pop(), "optimizer"),
    (lambda s: s["optimizer"]["param_groups"][0].__setitem__("params", [999]), "optimizer"),
    (_set("torch_rng", torch.zeros(3, dtype=torch.uint8)), "torch_rng"),
    (_set("torch_rng", torch.zeros(5056, dtype=torch.float32)), "torch_rng"),
    (_set("python_rng", [1, 2, 3]), "python_rng"),
    (_set("data", "{not json"), "data"),
    (
        _set(
            "data",
            json.dumps(
                {"kind": "pairs", "seed": 1, "epoch": 0, "position": 10**9, "examples": 200}
            ),
        ),
        "position",
    ),  # fmt: skip
    (_set("log", "[{"), "log"),
]:
    add("state", RESUME, msg, setup=state_edit(fn))
add("state", RESUME, "training_state.pt",
    setup=edit("tr", "training_state.pt", lambda p: p.unlink()))  # fmt: skip
add("state", RESUME, "unreadable", setup=edit("tr", "training_state.pt", write(None, b"junk")))


def _pickle_with_code(path):
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("code ran",))

    path.write_bytes(pickle.dumps({"step": Evil()}))


add("state", RESUME, "unreadable", setup=edit("tr", "training_state.pt", _pickle_with_code))
add("state", RESUME, "train_config.json",
    setup=edit("tr", "train_config.json", write(None, "{oops")))  # fmt: skip
add("state", RESUME, "train_config.json",
    setup=edit("tr", "train_config.json", write(None, '{"lr": "fast"}')))  # fmt: skip
add("state", [*RESUME[:3], "{tmp}/empty", *RESUME[4:]], "nothing to resume")
add("state", [*RESUME, "--set", "d_model=32"], "d_model", setup=copy_of("tr"))
add("state", [*RESUME, "--set", "vocab_size=500"], "vocab_size", setup=copy_of("tr"))
add("state", [*RESUME, "--tokenizer", "char"], "--tokenizer", setup=copy_of("tr"))
add(
    "state",
    [*RESUME, "--set", "max_steps=3", "--set", "d_model=16"],
    "max_steps 2 -> 3",
    code=0,
    setup=copy_of("tr"),
)  # a training field changes and is said; an unchanged model field is fine
add("state", ["train", "lm", "--out", "{bad}", "--data", "{models}/pairs.tsv", "--quiet",
              "--resume"], "train translate", setup=copy_of("tr"))  # fmt: skip

# overwrite: nothing that exists is replaced without a flag
add("overwrite", [*TRAIN[:3], "{bad}", *TRAIN[4:]], "--resume", setup=copy_of("lm"))
add("overwrite", [*TRAIN[:3], "{bad}", *TRAIN[4:]], "step 2", setup=copy_of("lm"))
add("overwrite", [*TRAIN[:3], "{tmp}", *TRAIN[4:]], "--overwrite",
    setup=make_file("notes.txt", "my notes"))  # fmt: skip
add("overwrite", [*TRAIN, "--resume", "--overwrite"], "not both")
add("overwrite", ["init", "{bad}"], "--overwrite", setup=copy_of("hello"))
add("overwrite", ["init", "{tmp}/f.txt"], "not a directory", setup=make_file("f.txt", "x"))
add("overwrite", ["export", "{bad}", "{bad}"], "onto itself", setup=copy_of("dec"))
add("overwrite", ["export", "{bad}", "{bad}/../bad"], "onto itself", setup=copy_of("dec"))
add("overwrite", ["export", "{dec}", "{bad}"], "--overwrite", setup=copy_of("hello"))
add("overwrite", ["export-hf", "{dec}", "{bad}"], "--overwrite", setup=copy_of("hello"))
add("overwrite", ["import-hf", "{bad}", "{tmp}"], "--overwrite", setup=_hf_folder({}))
add("overwrite", ["explain", "{hello}", "hello", "--html", "{tmp}/r.html"], "--overwrite",
    setup=make_file("r.html", "old report"))  # fmt: skip
add("overwrite", ["explain", "{hello}", "hello", "--json", "{tmp}/r.json"], "--overwrite",
    setup=make_file("r.json", "{}"))  # fmt: skip
add("overwrite", ["walkthrough", "hello-world", "--json", "{tmp}/r.json"], "--overwrite",
    setup=make_file("r.json", "{}"))  # fmt: skip
add("overwrite", ["explain", "{hello}", "hello", "--png", "{tmp}"], "--overwrite",
    setup=make_file("keep.png", "x"))  # fmt: skip


# numerics: non-finite numbers never pass silently
def _huge_weights(path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(path))
    for name in t:
        if name.endswith(("ffn.w1.weight", "ffn.w2.weight")):  # their product overflows float64
            t[name] = np.full(t[name].shape, 1e307, dtype=np.float64)
    save_file(t, str(path))


add("numerics", ["export", "{bad}", "{tmp}/x", "--dtype", "float16"], "65504",
    setup=edit("dec", "model.safetensors", _huge_weights))  # fmt: skip
add("numerics", ["generate", "{bad}", "to be", "--engine", "torch"], "non-finite",
    setup=edit("dec", "model.safetensors", _huge_weights))  # fmt: skip
add("numerics", ["generate", "{bad}", "to be", "--engine", "reference"], "decoder.0.ffn",
    setup=edit("dec", "model.safetensors", _huge_weights))  # fmt: skip
add("numerics", ["explain", "{bad}", "to be", "--find-nan"], "decoder.0.ffn", code=0,
    setup=edit("dec", "model.safetensors", _huge_weights))  # fmt: skip
add("numerics", ["explain", "{dec}", "to be", "--find-nan"], "no non-finite", code=0)


# -- running a case -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_bad_input(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


def test_the_table_covers_every_family():
    counts = {}
    for c in CASES:
        counts[c.family] = counts.get(c.family, 0) + 1
    assert len(CASES) >= 150, len(CASES)
    assert set(counts) == {"cli", "text", "folder", "state", "overwrite", "numerics"}, counts
