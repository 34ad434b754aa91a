"""Every file the program writes stays where it belongs and follows no link (issue 35 point 2).

`files.WRITERS` lists the functions that create, replace or remove a file. Here links are planted
at each one's target, its lock file, its temporaries and a dead writer's temporaries: a link to a
user's file or folder elsewhere, a dangling link, a hard link, a FIFO. The oracle is the world
outside the target: every file and link there (a snapshot of names, bytes and link targets) is
exactly as it was, nothing new appears at a dangling link's destination, and the writer either
refuses with one GlassformerError line or writes the target itself. The Python functions that
write through files.py (weights.save, Model.save, hf export, tokenizer.save, exercises.start, the
training loop) are linked out the same way.

An invariant keeps the list whole, as tests/test_readers_contained.py does for readers: every
function of glassformer/ that calls a writing function (found with `ast`) is registered below, as
one of files.py's writers, as writing only through them, or as writing no user's file; a new
writer that bypasses files.py fails the scan.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from glassformer import files, preset, weights
from glassformer.errors import GlassformerError

ROOT = Path(__file__).resolve().parents[1] / "glassformer"
USER = b"the user's own work\n"


# -- the world outside: what must not change ------------------------------------------------------


def world(root: Path) -> dict[str, object]:
    """Every entry under `root`: a link's target, a file's sha256 and mode, 'dir' for a folder."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            key = str(p.relative_to(root))
            if p.is_symlink():
                seen[key] = ("link", os.readlink(p))
            elif p.is_dir():
                seen[key] = "dir"
            elif p.is_file():
                seen[key] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode)
            else:
                seen[key] = "special"
    return seen


@pytest.fixture
def outside(tmp_path):
    """{tmp}/outside: a user's file, a user's folder with a file, an empty folder that a dangling
    link points into (nothing may appear there)."""
    o = tmp_path / "outside"
    (o / "folder").mkdir(parents=True)
    (o / "file.txt").write_bytes(USER)
    (o / "folder" / "kept.txt").write_bytes(USER)
    (o / "empty").mkdir()
    return o


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- write_file ------------------------------------------------------------------------------------

LINK = "is a symbolic link"


@pytest.mark.parametrize("to", ["file.txt", "empty/new.txt", "folder"])
def test_write_file_refuses_a_target_that_is_a_link(tmp_path, outside, to):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(outside / to)
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        files.write_file(out / "report.html", b"<html>")
    assert world(tmp_path) == before


def test_write_file_skips_a_temporary_name_planted_as_a_link(tmp_path, outside, monkeypatch):
    """The temporary's first candidate name is taken by a link to a user's file: mkstemp's O_EXCL
    moves on to the next name, and the link's target is untouched."""
    out = tmp_path / "out"
    out.mkdir()
    planted = out / f".report.html.{os.getpid()}.aaaaaaaa"
    planted.symlink_to(outside / "file.txt")
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    before = world(outside)
    files.write_file(out / "report.html", b"new")
    assert world(outside) == before
    assert (out / "report.html").read_bytes() == b"new" and planted.is_symlink()


def test_write_file_removes_a_dead_writers_temporaries_and_keeps_a_live_ones(tmp_path, outside):
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    stale = [out / f".r.html.{dead}.abcdefgh", out / f".r.html.{dead}.abcdefgh.old"]
    for f in stale:
        f.write_bytes(b"half")
    linked = out / f".r.html.{dead}.linkedxx"  # a link under a temporary's name: removed itself
    linked.symlink_to(outside / "file.txt")
    dir_link = out / f".r.html.{dead}.dirlinkx"
    dir_link.symlink_to(outside / "folder")
    live = out / f".r.html.{os.getpid()}.livelive"  # this process is alive: its file stays
    live.write_bytes(b"live")
    others = [out / f".r.html.2.{dead}.abcdefgh", out / f".r.html.{dead}.ab.cd"]  # not its
    for f in others:
        f.write_bytes(b"other")
    before = world(outside)
    files.write_file(out / "r.html", b"x")
    assert world(outside) == before
    assert not any(os.path.lexists(f) for f in [*stale, linked, dir_link])
    assert live.exists() and all(f.exists() for f in others)


KILLED_WRITER = """
import os, sys
from glassformer import files
os.replace = lambda *a: os._exit(9)  # killed between the write and the rename
files.write_file(sys.argv[1], b"half written")
"""


def test_a_temporary_left_by_a_killed_write_file_is_removed_by_the_next(tmp_path):
    """The temporary a real write_file leaves when killed before its rename (its own name, its own
    pid) is found and removed by the next writer of that file."""
    target = tmp_path / "page.html"
    env = dict(os.environ, PYTHONPATH=str(ROOT.parent))
    run = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], env=env)
    assert run.returncode == 9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".page.html."), left  # the control
    files.write_file(target, b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


# -- building and write_directory ------------------------------------------------------------------


@pytest.mark.parametrize("to", ["folder", "empty/new", "file.txt"])
def test_a_folder_target_that_is_a_link_is_refused(tmp_path, outside, to):
    (tmp_path / "ckpt").symlink_to(outside / to)
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        files.write_directory(tmp_path / "ckpt", {"a.json": b"{}"})
    assert world(tmp_path) == before


def test_building_skips_a_temporary_folder_name_planted_as_a_link(tmp_path, outside, monkeypatch):
    planted = tmp_path / f".ckpt.{os.getpid()}.aaaaaaaa"
    planted.symlink_to(outside / "folder")
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    before = world(outside)
    files.write_directory(tmp_path / "ckpt", {"a.json": b"{}"})
    assert world(outside) == before and (tmp_path / "ckpt" / "a.json").read_bytes() == b"{}"


def test_building_removes_a_dead_writers_folders_without_following_their_links(tmp_path, outside):
    dead = _dead_pid()
    half = tmp_path / f".ckpt.{dead}.abcdefgh"
    half.mkdir()
    (half / "out").symlink_to(outside / "folder")  # inside a dead temporary: removed, not followed
    (half / "w").write_bytes(b"half")
    as_link = tmp_path / f".ckpt.{dead}.linkedxx"
    as_link.symlink_to(outside / "folder")
    before = world(outside)
    files.write_directory(tmp_path / "ckpt", {"a.json": b"{}"})
    assert world(outside) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "outside"]


def test_write_directory_creates_each_file_without_following_a_link(tmp_path, outside, monkeypatch):
    """A link that appears inside the folder being built, at the name of a file still to write
    (planted here by the step before it), is refused (O_EXCL | O_NOFOLLOW), never written
    through; the target is not created."""
    import safetensors.numpy

    def plant(arrays, filename, metadata=None):
        Path(filename).write_bytes(b"tensors")
        (Path(filename).parent / "config.json").symlink_to(outside / "file.txt")

    monkeypatch.setattr(safetensors.numpy, "save_file", plant)
    before = world(outside)
    with pytest.raises(GlassformerError, match="cannot write"):
        files.write_directory(tmp_path / "ckpt", {"config.json": b"{}"}, {"m.safetensors": {}})
    assert world(outside) == before and sorted(p.name for p in tmp_path.iterdir()) == ["outside"]


def test_building_syncs_only_what_it_made_and_never_through_a_link(tmp_path, outside):
    """A link left in the folder being built (by whatever filled it) is refused when the folder
    is synced (O_NOFOLLOW), not followed to chmod a user's file; the target is not created."""
    (outside / "file.txt").chmod(0o600)
    before = world(outside)
    with pytest.raises(GlassformerError, match="cannot write"):
        with files.building(tmp_path / "pngs") as folder:
            (folder / "a.png").write_bytes(b"png")
            (folder / "b.png").symlink_to(outside / "file.txt")
    assert world(outside) == before and sorted(p.name for p in tmp_path.iterdir()) == ["outside"]


@pytest.mark.parametrize("name", ["../escape.json", "sub/a.json", "..", "/abs.json"])
def test_write_directory_writes_only_names_inside_the_folder(tmp_path, name):
    with pytest.raises(GlassformerError, match="not a file name inside"):
        files.write_directory(tmp_path / "ckpt", {name: b"x"})
    assert list(tmp_path.iterdir()) == []


# -- the lock of an output folder ------------------------------------------------------------------


def _lock_link(to):
    def plant(tmp, outside):
        files.lock_file(tmp / "ckpt").symlink_to(outside / to)

    return plant


def _lock_hard_link(tmp, outside):
    os.link(outside / "file.txt", files.lock_file(tmp / "ckpt"))


def _lock_fifo(tmp, outside):
    os.mkfifo(files.lock_file(tmp / "ckpt"))


def _lock_folder(tmp, outside):
    files.lock_file(tmp / "ckpt").mkdir()


LOCKS = {
    "a link to a user's file": (_lock_link("file.txt"), "a symbolic link (to"),
    "a dangling link": (_lock_link("empty/lock"), "a symbolic link (to"),
    "a link to a folder": (_lock_link("folder"), "a symbolic link (to"),
    "a hard link to a user's file": (_lock_hard_link, "a hard link to another file"),
    "a FIFO": (_lock_fifo, "not a regular file"),
    "a folder": (_lock_folder, "is a folder"),
}


@pytest.mark.parametrize("kind", list(LOCKS))
def test_the_lock_file_is_never_written_through(tmp_path, outside, kind):
    plant, says = LOCKS[kind]
    plant(tmp_path, outside)
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match="the lock file of") as e:
        with files.locked(tmp_path / "ckpt", "test"):
            pytest.fail("the lock was taken")
    assert says in str(e.value) and "\n" not in str(e.value)
    assert world(tmp_path) == before  # the user's file unchanged, nothing made at the link's end


def test_the_lock_refuses_an_output_folder_that_is_a_link(tmp_path, outside):
    (tmp_path / "ckpt").symlink_to(outside / "folder")
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        with files.locked(tmp_path / "ckpt", "test"):
            pytest.fail("the lock was taken")
    assert world(tmp_path) == before


def test_a_sound_lock_is_still_taken_and_removed(tmp_path):
    """The control: a stale lock left by a killed holder (a regular file, one name) is taken over,
    and the lock is removed on leaving."""
    files.lock_file(tmp_path / "ckpt").write_text(f'{{"pid": {_dead_pid()}}}')
    with files.locked(tmp_path / "ckpt", "test") as previous:
        assert previous is not None
    assert list(tmp_path.iterdir()) == []


def test_check_writable_skips_a_probe_name_planted_as_a_link(tmp_path, outside, monkeypatch):
    (tmp_path / ".glassformer-probe.aaaaaaaa").symlink_to(outside / "file.txt")
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    before = world(tmp_path)
    files.check_writable(tmp_path / "x")
    assert world(tmp_path) == before


def test_every_writer_of_files_py_is_tested_here():
    tested = {"check_writable", "write_file", "building", "write_directory", "locked",
              "_remove_stale_temporaries"}  # fmt: skip
    assert set(files.WRITERS) == tested


# -- the Python functions that write through files.py -------------------------------------------


def _weights_save(path, where=None):
    from glassformer import tokenizer as tk

    cfg = preset("hello-world")
    params = weights.init(cfg, seed=0)
    weights.save(where or path, cfg, params, tokenizer=tk.article_tokenizer(), overwrite=True)


def _model_save(path):
    from glassformer import load

    _weights_save(path, where=path.parent / "src")
    load(path.parent / "src").save(path, overwrite=True)


def _tokenizer_save(path):
    from glassformer import tokenizer as tk

    tk.save(tk.article_tokenizer(), path, overwrite=True)


def _exercise_start(path):
    from glassformer import exercises

    path.parent.mkdir(exist_ok=True)
    exercises.start(1, path.parent, overwrite=True)


def _exercise_path(tmp):
    from glassformer import exercises

    return tmp / "work" / exercises.exercise(1).filename


API_WRITERS = {  # name: (write(path), the path written under tmp)
    "weights.save": (_weights_save, lambda tmp: tmp / "ckpt"),
    "Model.save": (_model_save, lambda tmp: tmp / "ckpt"),
    "tokenizer.save": (_tokenizer_save, lambda tmp: tmp / "tok.json"),
    "exercises.start": (_exercise_start, _exercise_path),
}


@pytest.mark.parametrize("to", ["file.txt", "folder", "empty/new"])
@pytest.mark.parametrize("name", list(API_WRITERS))
def test_the_python_writers_refuse_a_target_that_is_a_link(tmp_path, outside, name, to):
    write, where = API_WRITERS[name]
    target = where(tmp_path)
    write(target)  # the control: it writes there
    assert target.exists() and not target.is_symlink()
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    target.symlink_to(outside / to)
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        write(target)
    assert world(tmp_path) == before


def test_the_hugging_face_export_refuses_a_target_that_is_a_link(tmp_path, outside):
    from glassformer.formats import hf_dir

    cfg = preset("char-lm").override(
        "vocab_size=12", "max_len=8", "d_model=8", "n_heads=2", "d_ff=16", "n_decoder_layers=1"
    )
    params = weights.init(cfg, seed=0)
    hf_dir.export(tmp_path / "hf", cfg, params, None)  # the control
    (tmp_path / "hf2").symlink_to(outside / "folder")
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        hf_dir.export(tmp_path / "hf2", cfg, params, None, overwrite=True)
    assert world(tmp_path) == before


def test_the_training_loop_refuses_an_output_folder_that_is_a_link(tmp_path, outside):
    pytest.importorskip("torch")
    from glassformer.training.tasks import prepare_task
    from glassformer.training.train import TrainConfig, train

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be\n" * 20)
    cfg = preset("tiny").override("d_model=8", "n_heads=2", "d_ff=16", "max_len=16")
    tcfg = TrainConfig(max_steps=1, block_size=8, eval_iters=1)
    cfg, task = prepare_task("lm", cfg, tcfg, str(corpus))
    (tmp_path / "run").symlink_to(outside / "folder")
    before = world(tmp_path)
    with pytest.raises(GlassformerError, match=LINK):
        train(cfg, tcfg, task, tmp_path / "run")
    assert world(tmp_path) == before


# -- the list is whole: every function that writes a file is registered -------------------------

# Calls that create, replace or remove a file (by the name called; `os.replace`, not str.replace).
WRITES = {
    "write_file", "building", "write_directory", "locked", "check_writable", "write_bytes",
    "write_text", "write_json", "write_outputs", "save_file", "savefig", "save_pretrained",
    "mkstemp", "mkdtemp", "NamedTemporaryFile", "mkdir", "makedirs", "touch", "symlink_to",
    "hardlink_to", "unlink", "rmtree", "ftruncate", "pwrite", "fchmod", "chmod", "copyfile",
    "copy2", "copytree", "tofile", "save", "export_hf", "_swap_in", "_exchange", "_unlink",
    "_remove_stale_temporaries",
}  # fmt: skip
ONLY_ON = {"replace": "os", "rename": "os", "remove": "os", "link": "os", "symlink": "os",
           "truncate": "os", "move": "shutil", "copy": "shutil", "start": "exercises"}  # fmt: skip

# files.py: the writers themselves (files.WRITERS) and their helpers.
FILES_PY = set(files.WRITERS) | {
    "_acquire",  # locked's lock file: O_NOFOLLOW, one name, a regular file
    "_swap_in",  # building's swap of its own temporary with the target
    "_unlink",  # removes a name (a link itself, never its target)
}
# Functions elsewhere that write only through files.py's writers, or through functions that do.
THROUGH_FILES = {
    "training/checkpoint.py:save_checkpoint": "weights.save (torch.save fills a BytesIO)",
    "cli/checkpoints.py:_write_import": "weights.save",
    "cli/checkpoints.py:cmd_export": "Model.save -> weights.save",
    "cli/checkpoints.py:cmd_export_hf": "Model.export_hf -> hf_dir.export",
    "cli/checkpoints.py:cmd_init": "weights.save",
    "cli/checkpoints.py:writes_out.run_locked": "files.locked",
    "cli/common.py:write_json": "common.write_text",
    "cli/common.py:write_outputs": "common.write_json, common.write_text",
    "cli/common.py:write_text": "files.write_file",
    "cli/diff.py:cmd_diff": "common.write_outputs",
    "cli/exercises.py:cmd_exercises": "exercises.start -> files.write_file",
    "cli/generate.py:_generate_recorded": "common.write_text",
    "cli/generate.py:_translate": "common.write_text",
    "cli/steering.py:write_report": "common.write_json, common.write_text",
    "cli/choice.py:_write": "common.write_outputs",
    "cli/probe.py:cmd_circuit": "common.write_outputs",
    "cli/probe.py:cmd_qk": "common.write_outputs",
    "cli/probe.py:cmd_attribute": "common.write_outputs",
    "cli/probe.py:cmd_lens": "common.write_outputs",
    "cli/faithfulness.py:_write": "files.write_file (--png), common.write_outputs",
    "cli/reports.py:_over_training": "common.write_outputs",
    "cli/reports.py:_write_reports": "files.building (--png), common.write_outputs",
    "exercises/stubs.py:start": "files.write_file",
    "formats/hf_dir.py:export": "files.write_directory",
    "model.py:Model.save": "weights.save",
    "tokenizer/__init__.py:save": "files.write_file",
    "training/train.py:_train": "files.check_writable",
    "training/train.py:train": "files.locked",
    "weights.py:save": "files.write_directory",
    "corpus/store.py:write_shard": "files.building (each array by _save_npy inside it)",
    "corpus/store.py:write_json": "files.write_file",
    "corpus/record.py:record_corpus": "files.locked, store.write_json",
    "corpus/record.py:_prepare": "store.write_json",
    "cli/corpus.py:cmd_top": "common.write_outputs",
    "corpus/saelens.py:write": "files.write_directory",
    "training/autoencoder.py:train": "files.locked, files.check_writable, save_run",
    "training/autoencoder.py:save_run": "saelens.write (torch.save fills a BytesIO)",
    "cli/sae.py:cmd_eval": "common.write_outputs",
    "cli/sae.py:cmd_features": "common.write_outputs",
}
CONTAINED = {
    "files.write_file", "write_file", "files.building", "write_directory", "files.locked",
    "weights.save", "m.save", "m.export_hf", "files.check_writable", "write_text",
    "write_json", "write_outputs", "exercises.start", "S.write_json",
    "files.write_directory", "saelens.write", "save_run",
}  # fmt: skip
ALSO_TO_MEMORY = {
    "training/checkpoint.py:save_checkpoint": {"torch.save"},
    "training/autoencoder.py:save_run": {"torch.save"},
}  # into an io.BytesIO
# Functions that write no file of the user's: to memory, to /dev/null, or only inside a
# temporary folder files.building made for them.
NO_USER_FILE = {
    "training/checkpoint.py:_plot": "savefig into a BytesIO (loss.png goes through weights.save)",
    "cli/common.py:_drop_stdout": "os.open(os.devnull)",
    "explain/html_faithfulness.py:curves_png": "savefig into a BytesIO (--png goes through "
    "files.write_file)",
    "explain/plots.py:write_attention_pngs": "into the folder files.building made for --png "
    "(its one caller, cli/reports.py:_write_reports)",
    "training/views.py:encode": "safetensors' save to bytes (views.safetensors goes through "
    "weights.save)",
    "corpus/store.py:_save_npy": "an array created O_EXCL | O_NOFOLLOW in the shard's folder "
    "that files.building made (its one caller, write_shard)",
    "corpus/store.py:_create": "shard.json, created the same way in the same folder",
}


def _mode_writes(call: ast.Call) -> bool:
    modes = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
    return any(
        isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+")
        for m in modes
    )


WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}


def _flags_write(function: ast.AST) -> bool:
    """Whether a function that calls os.open names a flag that writes (the flags are often
    built in a variable first, so the whole function is looked at)."""
    names = {getattr(n, "attr", getattr(n, "id", None)) for n in ast.walk(function)}
    return bool(names & WRITE_FLAGS)


def _writes(sources=None) -> dict[str, set[str]]:
    """{"module.py:function": the writing calls it makes, as spelt ('files.write_file',
    'fig.savefig')}, over `sources` ({where: code}; by default every module of glassformer/)."""
    if sources is None:
        sources = {f.relative_to(ROOT).as_posix(): f.read_text(encoding="utf-8")
                   for f in sorted(ROOT.rglob("*.py"))}  # fmt: skip
    found: dict[str, set[str]] = {}

    def walk(node, where, stack, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                walk(child, where, [*stack, child.name], child)
                continue
            if isinstance(child, ast.Call):
                fn = child.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
                base = getattr(getattr(fn, "value", None), "id", None)
                hit = name in WRITES or (name in ONLY_ON and base == ONLY_ON[name])
                hit |= name == "open" and base != "os" and _mode_writes(child)
                hit |= name == "open" and base == "os" and _flags_write(function)
                if hit:
                    key = f"{where}:{'.'.join(stack) or '<module>'}"
                    found.setdefault(key, set()).add(f"{base}.{name}" if base else name)
            walk(child, where, stack, function)

    for where, code in sources.items():
        tree = ast.parse(code)
        walk(tree, where, [], tree)
    return found


def test_every_function_that_writes_a_file_is_registered():
    found = _writes()
    in_files = {k for k in found if k.startswith("files.py:")}
    assert {k.split(":")[1] for k in in_files} == FILES_PY, "a new writer in files.py: list it"
    registered = set(THROUGH_FILES) | set(NO_USER_FILE)
    elsewhere = set(found) - in_files
    assert elsewhere - registered == set(), "a new writer: route it through files.py, register it"
    assert registered - elsewhere == set(), "a registered writer is gone: update the lists"
    for where in THROUGH_FILES:  # each writes only through files.py's writers
        past = found[where] - CONTAINED - ALSO_TO_MEMORY.get(where, set())
        assert not past, f"{where} writes past files.py: {past}"


def test_the_source_scan_sees_a_new_writer():
    """The scan above can fail: a stray open(..., 'w'), Path.write_bytes, os.replace or an
    os.open with writing flags is found; reads and str.replace are not."""
    code = (
        "def dump(p, s):\n    with open(p, 'w') as f:\n        f.write(s.replace('a', 'b'))\n"
        "def peek(p):\n    return open(p).read() + open(p, mode='rb').read()\n"
        "def peek_fd(p):\n    flags = os.O_RDONLY\n    return os.open(p, flags)\n"
        "def make_fd(p):\n    flags = os.O_RDWR | os.O_CREAT\n    return os.open(p, flags)\n"
        "class T:\n    def put(self, p):\n        p.write_bytes(b'')\n        os.replace(p, p)\n"
    )
    want = {
        "new.py:dump": {"open"},
        "new.py:make_fd": {"os.open"},
        "new.py:T.put": {"p.write_bytes", "os.replace"},
    }
    assert _writes({"new.py": code}) == want
