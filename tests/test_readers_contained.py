"""Every file any command reads from a folder stays inside that folder (issue 24 point 3).

`files.member` is the one containment rule and `files.READ_FROM_FOLDERS` lists every file kind
read through it. Here each kind, in a real folder (a trained checkpoint, a classifier, Hugging
Face folders written by `transformers` in every weight format), is first read by its real reader
(the control: the reader does read it), then moved beside the folder with a symbolic link left in
its place: the same reader must refuse with a GlassformerError that names the file. Two
invariants keep the list whole: every file name spelled in glassformer/ is either in the list or
declared as never read from a given folder, and every function of glassformer/ that opens or
parses a file is registered below as a reader of listed kinds or as reading no folder's file.

The atomic folder swap (`files._swap_in`) is tested on the path it takes here: renameat2
(RENAME_EXCHANGE) on Linux, with readers polling the target while it is replaced many times.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import files, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.cli.common import last_step  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.tokenizer import HFTokenizer  # noqa: E402
from glassformer.training import checkpoint, tasks, train, views  # noqa: E402

SWAPS = 100
ROOT = Path(__file__).resolve().parents[1] / "glassformer"
OUTSIDE = "points outside"


# -- real folders, built once -------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """lm: a trained checkpoint (2 steps, 2 weight snapshots, training state, log); clf: an
    encoder classifier with labels.json; gpt2 / shards / bin / bert: Hugging Face folders."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    d = tmp_path_factory.mktemp("readers")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 40)
    tiny = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32", "--set", "max_len=16"]
    run = ["--set", "max_steps=2", "--set", "eval_interval=1", "--set", "eval_iters=1",
           "--set", "keep_snapshots=2", "--set", "block_size=16",
           "--snapshot-views", "to be", "--view-every", "1"]  # fmt: skip
    assert main(["train", "lm", "--out", str(d / "lm"), "--data", str(corpus), "--quiet",
                 *tiny, *run]) == 0  # fmt: skip
    assert main(["init", str(d / "clf"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(corpus)]) == 0  # fmt: skip
    n = weights.load(d / "clf")[0].n_classes
    (d / "clf" / "labels.json").write_text(json.dumps([f"class {i}" for i in range(n)]))

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=16, n_embd=8, n_layer=1,
                                      n_head=2))  # fmt: skip
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["hello world"] * 5, vocab_size=260, special_tokens=["<s>"])
    for name, kw in (("gpt2", {}), ("shards", {"max_shard_size": "2KB"}), ("bin", None)):
        folder = d / name
        gpt2.save_pretrained(folder, **(kw or {}))
        if kw is None:  # the weights as a weights-only pickle instead
            torch.save(gpt2.state_dict(), folder / "pytorch_model.bin")
            (folder / "model.safetensors").unlink()
        bpe.save_model(str(folder))  # vocab.json + merges.txt
        bpe.save(str(folder / "tokenizer.json"))
        (folder / "tokenizer_config.json").write_text('{"bos_token": "<s>"}')
        (folder / "special_tokens_map.json").write_text('{"eos_token": "<s>"}')
    shutil.copytree(d / "gpt2", d / "bpe-files")  # vocab.json + merges.txt are what is read
    (d / "bpe-files" / "tokenizer.json").unlink()
    shutil.copytree(d / "gpt2", d / "ours")  # an export of ours: the exact glassformer tokenizer
    shutil.copy(d / "lm" / "tokenizer.json", d / "ours" / "glassformer-tokenizer.json")
    bert = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=16,
                                max_position_embeddings=16), add_pooling_layer=False)  # fmt: skip
    bert.save_pretrained(d / "bert")
    (d / "bert" / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefghijklmnopqrstuvwxyz"])
    )
    (d / "bert" / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    from test_nanogpt import CHARS, prepare, train_and_save

    args = dict(n_layer=1, n_head=2, n_embd=8, block_size=8, bias=True, vocab_size=len(CHARS),
                dropout=0.0)  # fmt: skip
    train_and_save(d / "nanogpt", args, seed=0)
    shutil.copy(prepare(d / "nanogpt-data"), d / "nanogpt" / "meta.pkl")
    _make_store(d / "store")
    _make_sae(d / "sae")
    return d, corpus


def _make_store(folder):
    """An activation store of one shard (corpus/store.py), written by its own writers."""
    from glassformer.corpus import store as S

    folder.mkdir()
    rows = {"tokens": [1, 2], "document": [0, 0], "position": [0, 1]}
    arrays = S.shard_arrays(rows, {"a": np.ones((2, 3))}, "float32")
    S.write_shard(folder, "shard-00000", arrays, {"rows": 2, "first_document": 0, "documents": 1})
    S.write_json(folder, S.PIECES, ["x", "y", "z"])
    shard = {"name": "shard-00000", "rows": 2, "first_document": 0, "documents": 1}
    index = {"format": S.FORMAT, "version": S.VERSION, "model": {"name": "m", "fingerprint": ""},
             "config": {}, "corpus": {}, "dtype": "float32", "steps": {"a": {"width": 3}},
             "rows": 2, "documents": 1, "shards": [shard]}  # fmt: skip
    S.write_json(folder, S.INDEX, index)
    (folder.parent / "recording").mkdir()  # a killed recording: its settings, no index yet
    S.write_json(folder.parent / "recording", "record.json", RECORDING)


RECORDING = {"model": {"name": "m", "fingerprint": "f"}, "corpus": {}, "steps": {},
             "dtype": "", "engine": "", "compute": "", "max_tokens": None, "shard_rows": 1,
             "world": 1}  # fmt: skip


def _make_sae(folder):
    """An SAE's folder with its training state (training/autoencoder.py), two steps trained."""
    from glassformer.corpus.sae import SAEConfig
    from glassformer.training.autoencoder import train

    x = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    train(x, SAEConfig(d_in=4, d_sae=8, step="decoder.0.out"), _sae_train(), folder)


def _sae_train():
    from glassformer.corpus.sae import TrainConfig

    return TrainConfig(steps=2, batch_size=8)


# -- the readers, each called as a command calls it ---------------------------------------------


def _load(folder, corpus):
    return loading.load(folder)


def _read_sae(folder, corpus):
    from glassformer.corpus import saelens

    return saelens.read(folder)


def _resume_sae(folder, corpus):
    from glassformer.corpus.sae import SAEConfig
    from glassformer.training.autoencoder import _resumed

    return _resumed(folder, SAEConfig(d_in=4, d_sae=8, step="decoder.0.out"), _sae_train())


def _labels(folder, corpus):
    return loading.class_names(folder, weights.load(folder)[0])


def _snapshot_steps(folder, corpus):
    return weights.snapshot_steps(folder)


def _load_snapshots(folder, corpus):
    cfg = weights.load(folder)[0]
    return [weights.load_snapshot(folder, cfg, s) for s in (1, 2)]


def _restore(folder, corpus):
    """checkpoint.restore as `train --resume` calls it, with a real model, optimizer and task."""
    from glassformer.torch_model import Transformer

    cfg, _, tok = loading.load(folder)
    tcfg = train.TrainConfig(max_steps=2, eval_interval=1, eval_iters=1, keep_snapshots=2,
                             block_size=16)  # fmt: skip
    cfg, task = tasks.prepare_task("lm", cfg, tcfg, str(corpus), tokenizer=tok)
    model = Transformer(cfg)
    return checkpoint.restore(folder, cfg, model, train.make_optimizer(model, tcfg), task)


def _views(folder, corpus):
    return views.load(folder)


def _train_config(folder, corpus):
    return train.saved_train_config(folder)


def _train_source(folder, corpus):
    return train.saved_source(folder)


def _hf_tokenizer(folder, corpus):
    return HFTokenizer.from_files(folder)


def _resume_recording(folder, corpus):
    """What a resumed record-corpus reads first: the settings of the recording it continues."""
    from glassformer.corpus import record

    return record._prepare(folder, RECORDING, 0, 1)


def _read_store(folder, corpus):
    """What `glassformer top` reads: the index, the pieces, a shard's arrays, the context."""
    from glassformer.corpus.store import open_store

    store = open_store(folder)
    return store.column("a"), store.context(1)


def _shard(i):
    return lambda folder: sorted(folder.glob("model-*-of-*.safetensors"))[i].name


# (kind in files.READ_FROM_FOLDERS, folder, the file's name (or a function of the folder), reader)
ROWS = [
    ("config.json", "lm", "config.json", _load),
    ("model.safetensors", "lm", "model.safetensors", _load),
    ("tokenizer.json", "lm", "tokenizer.json", _load),
    ("labels.json", "clf", "labels.json", _labels),
    ("snapshot-step*.safetensors", "lm", weights.snapshot_file(1), _snapshot_steps),
    ("snapshot-step*.safetensors", "lm", weights.snapshot_file(2), _snapshot_steps),
    ("snapshot-step*.safetensors", "lm", weights.snapshot_file(2), _load_snapshots),
    ("training_state.pt", "lm", "training_state.pt", _restore),
    ("train_config.json", "lm", "train_config.json", _train_config),
    ("train_config.json", "lm", "train_config.json", _train_source),  # the data it trains on
    ("train_config.json", "lm", "train_config.json", _snapshot_steps),  # its max_steps
    ("config.json", "gpt2", "config.json", _load),
    ("model.safetensors", "gpt2", "model.safetensors", _load),
    ("model.safetensors.index.json", "shards", "model.safetensors.index.json", _load),
    ("model-*.safetensors", "shards", _shard(0), _load),
    ("model-*.safetensors", "shards", _shard(-1), _load),
    ("pytorch_model.bin", "bin", "pytorch_model.bin", _load),
    ("glassformer-tokenizer.json", "ours", "glassformer-tokenizer.json", _load),
    ("views.safetensors", "lm", "views.safetensors", _views),
    ("ckpt.pt", "nanogpt", "ckpt.pt", _load),
    ("meta.pkl", "nanogpt", "meta.pkl", _load),
    ("index.json", "store", "index.json", _read_store),
    ("pieces.json", "store", "pieces.json", _read_store),
    ("shard.json", "store", "shard-00000/shard.json", _read_store),
    ("{stem}.npy", "store", "shard-00000/a.npy", _read_store),
    ("{stem}.npy", "store", "shard-00000/tokens.npy", _read_store),
    ("record.json", "recording", "record.json", _resume_recording),
    ("cfg.json", "sae", "cfg.json", _read_sae),
    ("sae_weights.safetensors", "sae", "sae_weights.safetensors", _read_sae),
    ("training_state.pt", "sae", "training_state.pt", _resume_sae),
]
# HF tokenizer files: through the folder's import and through the tokenizer reader itself
for _folder, _names in (
    ("gpt2", ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")),
    ("bpe-files", ("vocab.json", "merges.txt")),
    ("bert", ("vocab.txt", "tokenizer_config.json")),
):
    for _name in _names:
        ROWS += [(_name, _folder, _name, _load), (_name, _folder, _name, _hf_tokenizer)]
# import-hf refuses every tokenizer file that links out, even one the tokenizer it builds skips
ROWS += [(n, "gpt2", n, _load) for n in ("vocab.json", "merges.txt")]


def _row_id(row):
    kind, folder, name, reader = row
    shown = name if isinstance(name, str) else kind
    return f"{folder}-{shown}-{reader.__name__.strip('_')}"


@pytest.mark.parametrize("row", ROWS, ids=[_row_id(r) for r in ROWS])
def test_every_reader_refuses_a_file_linked_out_of_its_folder(row, built, tmp_path):
    kind, folder_name, name, reader = row
    d, corpus = built
    folder = tmp_path / "model"
    shutil.copytree(d / folder_name, folder)
    name = name if isinstance(name, str) else name(folder)
    assert (folder / name).is_file()
    reader(folder, corpus)  # the control: this reader reads the file, and the folder is sound
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / name).parent.mkdir(parents=True)  # (a store's shard file: elsewhere/shard-*/)
    shutil.move(folder / name, elsewhere / name)
    (folder / name).symlink_to(elsewhere / name)
    with pytest.raises(GlassformerError) as e:
        reader(folder, corpus)
    assert f"{folder / name} {OUTSIDE}" in str(e.value)


def test_the_training_log_linked_out_is_not_read(built, tmp_path):
    """log.csv: last_step (the step shown when --overwrite is refused) never reads a linked log."""
    d, _ = built
    folder = tmp_path / "lm"
    shutil.copytree(d / "lm", folder)
    assert last_step(folder / "log.csv") == "2"  # the control
    (tmp_path / "elsewhere.csv").write_bytes((folder / "log.csv").read_bytes())
    (folder / "log.csv").unlink()
    (folder / "log.csv").symlink_to(tmp_path / "elsewhere.csv")
    assert last_step(folder / "log.csv") is None


def test_the_rows_cover_every_listed_kind():
    listed = {k for kinds in files.READ_FROM_FOLDERS.values() for k in kinds}
    assert {r[0] for r in ROWS} | {"log.csv"} == listed


# -- the list is whole: invariants over the source ----------------------------------------------

# File names glassformer/ spells that no command reads from a folder it is given: packaged data
# sets (read from the package), outputs it only writes.
NOT_FROM_A_FOLDER = {
    "eng-spa.tsv.gz", "eng-spa-valid.tsv.gz", "tinyshakespeare.txt.gz",  # packaged corpora
    "explorer.html", "glassformer-report.html", "glassformer-trace.json",  # downloads it serves
    "generation_config.json", "loss.png",  # written by export-hf / train, never read
    "constraints.txt",  # the checkout's, named by the install hint, never read
    "F.html", "FILE.npy",  # cli/steering.py's metavars: a user's file, never a folder's
}  # fmt: skip
FILE_NAME = re.compile(
    r"[\"']([A-Za-z0-9_.{}*-]+\.(?:json|safetensors|txt|bin|pt|pth|csv|png|tsv|gz|html|npz|npy|"
    r"pkl|model|msgpack|h5|onnx))[\"']"
)


def test_every_file_name_in_the_source_is_listed_or_never_read_from_a_folder():
    listed = {k for kinds in files.READ_FROM_FOLDERS.values() for k in kinds}
    spelled = set()
    for f in ROOT.rglob("*.py"):
        spelled |= set(FILE_NAME.findall(f.read_text(encoding="utf-8")))
    spelled -= {".safetensors", "{SNAPSHOT_PREFIX}*.safetensors"}  # weights.py builds the name
    assert spelled - listed - NOT_FROM_A_FOLDER == set(), "a new file read from a folder?"
    assert NOT_FROM_A_FOLDER <= spelled  # no stale entries


# Every function of glassformer/ that opens or parses a file. A folder reader opens only what
# `files.member` (or a wrapper of it) returned; the others read no file of a given folder.
CONTAINED = {"member", "_member", "_has", "_utf8", "_read_json"}
FOLDER_READERS = {
    "training/checkpoint.py:restore": "training_state.pt",
    "cli/common.py:last_step": "log.csv",
    "formats/hf_dir.py:_read_config": "config.json",
    "formats/hf_dir.py:read_state": "model.safetensors, the index, the shards",
    "formats/hf_dir.py:load": "glassformer-tokenizer.json",
    "tokenizer/bpe.py:HFTokenizer.from_files": "tokenizer.json, vocab.*, merges.txt",
    "tokenizer/bpe.py:_utf8": "the tokenizer files",
    "tokenizer/bpe.py:_read_json": "tokenizer_config.json, special_tokens_map.json",
    "training/train.py:_saved": "train_config.json (for saved_train_config and saved_source)",
    "weights.py:_max_steps": "train_config.json",
    "weights.py:load": "config.json, model.safetensors, tokenizer.json",
    "weights.py:load_labels": "labels.json",
    "weights.py:load_snapshot": "snapshot-step*.safetensors",
    "training/views.py:load": "views.safetensors",
    "formats/nanogpt.py:read_checkpoint": "ckpt.pt",
    "corpus/store.py:open_store": "index.json, pieces.json",
    "corpus/store.py:Shard.read": "shard.json",
    "corpus/store.py:Shard.verify": "each array of a shard (its sha256)",
    "corpus/record.py:_prepare": "record.json (a killed recording's settings)",
    "corpus/saelens.py:read": "cfg.json, sae_weights.safetensors",
    "training/autoencoder.py:_resumed": "training_state.pt",
    "catalog.py:_card": "a model folder's README.md (its card's first line)",
    "catalog.py:_config": "config.json",
    "catalog.py:_folder": "config.json (a Hugging Face folder's model_type)",
}
GIVEN_A_CHECKED_PATH = {  # read a path their only callers got from files.member
    "formats/hf_dir.py:_torch_bin": "pytorch_model.bin (read_state)",
    "formats/hf_dir.py:_torch_safetensors": "a bfloat16 shard (read_state)",
    "tokenizer/__init__.py:load": "a tokenizer file (weights.load, hf_dir.load) or a user's path",
    "formats/nanogpt.py:read_meta": "meta.pkl (through member) or a user's --meta",
}
NO_FOLDER_FILE = {
    "training/checkpoint.py:_checked_state": "JSON strings inside the training state already read",
    "config.py:Config.from_json": "text its caller read",
    "tokenizer/__init__.py:from_json": "text its caller read",
    "cli/checkpoints.py:cmd_init": "--corpus, a user's text file",
    "cli/common.py:_drop_stdout": "os.devnull",
    "cli/common.py:input_lines": "--input, a user's text file",
    "corpus/record.py:record_corpus": "the corpus, a user's text file (data.read_text)",
    "cli/steering.py:read_vector": "--steer-vector, a user's .npy file (no pickle)",
    "cli/sae.py:cmd_eval": "FILE, a user's text file",
    "evaluating.py:_perplexity": "--data",
    "data.py:_read_bounded": "a user's (possibly gzipped) text file",
    "data.py:read_pairs": "a user's TSV",
    "exercises/runner.py:boot": "os.devnull (the learner's stdin in the sandbox child)",
    "explain/html_pieces.py:asset": "package assets",
    "files.py:_acquire": "the lock file beside an output folder",
    "files.py:building": "files it has just written (fsync)",
    "files.py:write_directory": "files it creates in its own temporary folder (O_EXCL)",
    "corpus/store.py:_save_npy": "an array it creates in a shard's temporary folder (O_EXCL)",
    "corpus/store.py:_create": "shard.json, created in the same folder (O_EXCL)",
    "files.py:read_json": "the path its caller gives (every caller passes member's result)",
    "files.py:open_regular": "the path its caller gives (a member's result or a user's file)",
    "files.py:read_limited": "the path its caller gives, through open_regular",
    "quantize.py:has_vnni": "/proc/cpuinfo",
    "devices.py:others_runnable": "/proc/loadavg",
    "serve/app.py:_routes.action": "a request body",
    "serve/app.py:_routes.report": "a request body",
    "serve/app.py:_routes.trace": "a request body",
    "training/tasks.py:_lm_task": "--data",
    "walkthrough/raschka_ch03.py:_raschka_data": "package data",
    "weights.py:available_memory": "/proc/meminfo",
    "formats/nanogpt.py:gpt2_tokenizer": "--tokenizer, a user's file",
    "formats/nanogpt.py:vocab_from_text": "--vocab-from, a user's text file",
}
READS = {"load_file", "read_json", "read_text", "read_bytes", "open", "from_file", "from_files",
         "BertWordPieceTokenizer", "ByteLevelBPETokenizer", "parse_json", "open_regular",
         "read_limited"}  # fmt: skip


def _calls(sources=None) -> dict[str, set[str]]:
    """{"module.py:function": names of the read and containment functions it calls}, over
    `sources` ({where: code}; by default every module of glassformer/)."""
    if sources is None:
        sources = {f.relative_to(ROOT).as_posix(): f.read_text(encoding="utf-8")
                   for f in sorted(ROOT.rglob("*.py"))}  # fmt: skip
    found: dict[str, set[str]] = {}

    def walk(node, where, stack):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                walk(child, where, [*stack, child.name])
                continue
            if isinstance(child, ast.Call):
                fn = child.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
                base = getattr(getattr(fn, "value", None), "id", None)
                if name in READS | CONTAINED or (name == "load" and base in ("torch", "tokenizer")):
                    key = f"{where}:{'.'.join(stack) or '<module>'}"
                    found.setdefault(key, set()).add(name)
            walk(child, where, stack)

    for where, code in sources.items():
        walk(ast.parse(code), where, [])
    return found


def test_every_function_that_reads_a_file_is_registered():
    calls = _calls()
    readers = {k for k, names in calls.items() if names - CONTAINED}
    registered = {**FOLDER_READERS, **GIVEN_A_CHECKED_PATH, **NO_FOLDER_FILE}
    assert readers - set(registered) == set(), "a new reader: register it (and test it above)"
    assert set(registered) - readers == set(), "a registered reader is gone: update the lists"
    for where in FOLDER_READERS:  # each opens a file only after the containment rule
        assert calls[where] & CONTAINED, f"{where} reads a folder's file without files.member"


def test_the_source_scan_sees_a_new_reader():
    """The scan above can fail: functions that open a file are found, contained or not."""
    code = (
        "def peek(folder):\n    return (folder / 'vocab.json').read_text()\n"
        "class T:\n    def safe(self, folder):\n        return member(folder, 'a').read_bytes()\n"
    )
    assert _calls({"new.py": code}) == {
        "new.py:peek": {"read_text"},
        "new.py:T.safe": {"member", "read_bytes"},
    }


# -- the atomic folder swap, on the path it takes here ------------------------------------------


def test_the_swap_exchanges_in_one_call_here(tmp_path):
    if sys.platform != "linux":
        pytest.skip(f"SKIPPED LOUDLY: renameat2 is Linux-only; {sys.platform} takes the fallback")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    assert files._exchange(a, b) is True
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


# A reader in its own process (no GIL shared with the writer) that opens the target folder in a
# tight loop and reads x and y through that one handle, so that it reads one version: it counts
# the instants the folder was missing and the reads that mixed two versions.
POLL = """
import json, os, sys
target, stop = sys.argv[1], sys.argv[2]


def read(name, folder):
    h = os.open(name, os.O_RDONLY, dir_fd=folder)
    try:
        return os.read(h, 64)
    finally:
        os.close(h)


n = missing = mixed = 0
while n % 256 or not os.path.exists(stop):
    n += 1
    try:
        fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        missing += 1
        continue
    try:
        x, y = (read(f, fd) for f in ("x", "y"))
    except FileNotFoundError:  # a handle on the old version, deleted after the swap: no reading
        continue
    finally:
        os.close(fd)
    mixed += x != y
print(json.dumps({"reads": n, "missing": missing, "mixed": mixed}))
"""


def _swap_many(tmp: Path, times: int) -> dict:
    """Replace the folder tmp/ckpt `times` times through files.write_directory (building ->
    _swap_in) while POLL reads it; what POLL saw."""
    import subprocess

    target, stop = tmp / "ckpt", tmp / "stop"
    files.write_directory(target, {"x": b"start", "y": b"start"})
    poller = subprocess.Popen([sys.executable, "-c", POLL, str(target), str(stop)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for i in range(times):
            files.write_directory(target, {"x": f"{i}".encode(), "y": f"{i}".encode()})
    finally:
        stop.touch()
        out, _ = poller.communicate(timeout=60)
    seen = json.loads(out)
    assert seen["reads"] > times  # it polled throughout
    return seen


def _after_each_step(tmp: Path, monkeypatch) -> list[str]:
    """Replace tmp/ckpt (x, y = "old") by x, y = "new" through files.write_directory and look at
    the target after every file-system step the swap takes (each rename, the exchange, the
    removal of the old copy): what a reader would find at each instant between them."""
    target = tmp / "ckpt"
    files.write_directory(target, {"x": b"old", "y": b"old"})
    seen: list[str] = []

    def look() -> None:
        try:
            seen.append((target / "x").read_text() + "/" + (target / "y").read_text())
        except FileNotFoundError:
            seen.append("missing")

    def then_look(step):
        def wrapped(*args, **kw):
            result = step(*args, **kw)
            look()
            if step is exchange:
                seen.append(f"exchanged {result}")
            return result

        return wrapped

    exchange = files._exchange
    monkeypatch.setattr(files, "_exchange", then_look(exchange))
    monkeypatch.setattr(files.os, "replace", then_look(os.replace))
    monkeypatch.setattr(files.shutil, "rmtree", then_look(shutil.rmtree))
    files.write_directory(target, {"x": b"new", "y": b"new"})
    monkeypatch.undo()
    return seen


def test_the_swap_takes_the_exchange_and_the_target_is_whole_at_every_step(tmp_path, monkeypatch):
    if sys.platform != "linux":
        pytest.skip(f"SKIPPED LOUDLY: renameat2 is Linux-only; {sys.platform} takes the fallback")
    assert _after_each_step(tmp_path, monkeypatch) == ["new/new", "exchanged True", "new/new"]


def test_the_step_check_catches_the_non_atomic_fallback(tmp_path, monkeypatch):
    """The fallback (move the old folder aside, then the new one in) leaves the target missing
    between its two renames: the step check sees it (a poller racing it rarely does: 4 misses in
    100 swaps on 16 cores, none on one core)."""
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    seen = _after_each_step(tmp_path, monkeypatch)
    assert "missing" in seen, seen


def test_a_reader_polling_the_target_never_finds_it_missing_or_mixed(tmp_path):
    if sys.platform != "linux":
        pytest.skip(f"SKIPPED LOUDLY: renameat2 is Linux-only; {sys.platform} takes the fallback")
    seen = _swap_many(tmp_path, SWAPS)
    assert (seen["missing"], seen["mixed"]) == (0, 0), seen
