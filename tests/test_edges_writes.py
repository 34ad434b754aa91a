"""Round three (issue 35 point 2): what the program writes follows no link, and never lands on
what the command reads.

Families: write (a link planted where a command writes: the output folder's lock file a link to a
user's file, a dangling link, a hard link or a FIFO; the output file or folder itself a link to
elsewhere; for every command that writes), onto-input (an output that is, lies inside or holds one
of the command's inputs: the --input file, --data, --valid, --corpus, --meta, --vocab-from, the
model folder read, through `..`, a link or a hard link; and two outputs that are one place), each
refused in one line even with --overwrite. Table rows run the command line through tests/table.py
(exit 2, one error line, every file that existed byte-identical and no file made, the user's file
and the end of a dangling link included); the dead writer's temporary of a single file is a real
process killed before its rename.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from table import ENV, Case, build_models, case_id, check_case, copy_of, run_cli  # noqa: E402

from glassformer import files  # noqa: E402
from glassformer.cli import main  # noqa: E402

CASES: list = []
LINK = "is a symbolic link"
NOT_A_LOCK = "it is never written through"
USER = "the user's own work\n"


def add(family, argv, message, **kw):
    CASES.append(Case(family, argv, message, **kw))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


# -- setups ----------------------------------------------------------------------------------------


def user_files(tmp):
    """{tmp}/user.txt, a user's file, and {tmp}/elsewhere/, where a dangling link points: a file
    made there, or a changed user.txt, fails the row."""
    (tmp / "user.txt").write_text(USER)
    (tmp / "elsewhere").mkdir(exist_ok=True)
    (tmp / "real").mkdir(exist_ok=True)
    (tmp / "real" / "kept.txt").write_text(USER)


def then(*setups):
    def setup(tmp, models):
        for s in setups:
            s(tmp, models)

    return setup


def link(name, to, lock=False):
    """{tmp}/NAME (or its lock file) a symbolic link to {tmp}/TO: user.txt, real (a folder of
    the user's), or elsewhere/made (dangling)."""

    def setup(tmp, models):
        user_files(tmp)
        where = files.lock_file(tmp / name) if lock else tmp / name
        where.parent.mkdir(parents=True, exist_ok=True)
        where.symlink_to(tmp / to)

    return setup


def hard_lock(name):
    def setup(tmp, models):
        user_files(tmp)
        os.link(tmp / "user.txt", files.lock_file(tmp / name))

    return setup


def fifo_lock(name):
    def setup(tmp, models):
        user_files(tmp)
        os.mkfifo(files.lock_file(tmp / name))

    return setup


def hf_folder(tmp, models):
    assert main(["export-hf", str(models / "lm"), str(tmp / "hf")]) == 0


def nanogpt_folder(tmp, models):
    """A nanoGPT out_dir: nothing in it is read before the refusals below."""
    (tmp / "ng").mkdir()
    (tmp / "ng" / "ckpt.pt").write_bytes(b"not read")


def text_file(name, content="to be\n"):
    def setup(tmp, models):
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)

    return setup


def copy_to(model, where):
    def setup(tmp, models):
        shutil.copytree(models / model, tmp / where)

    return setup


def hard_link(name, to):
    def setup(tmp, models):
        os.link(tmp / to, tmp / name)

    return setup


LM = ["--data", "{models}/corpus.txt", "--quiet", "--set", "d_model=16", "--set", "n_heads=2",
      "--set", "d_ff=32", "--set", "max_len=16", "--set", "block_size=16",
      "--set", "max_steps=1"]  # fmt: skip
RESUME = [*LM, "--set", "max_steps=3", "--resume"]  # the copies of lm are at step 2
TR = ["--data", "{models}/pairs.tsv", "--quiet", "--set", "max_steps=1"]

# -- write: the lock file of an output folder ------------------------------------------------------

for argv, extra in [
    (["init", "{tmp}/out"], None),
    (["export", "{dec}", "{tmp}/out"], None),
    (["export-hf", "{lm}", "{tmp}/out"], None),
    (["import-hf", "{tmp}/hf", "{tmp}/out"], hf_folder),
    (["import-nanogpt", "{tmp}/ng", "{tmp}/out", "--vocab-from", "{models}/corpus.txt"],
     nanogpt_folder),
    (["train", "lm", "--out", "{tmp}/out", *LM], None),
]:  # fmt: skip
    for to in ("user.txt", "elsewhere/made"):  # a user's file; a dangling link
        setup = link("out", to, lock=True)
        add("write", argv, NOT_A_LOCK, setup=then(extra, setup) if extra else setup)
add("write", ["train", "lm", "--out", "{bad}", *RESUME], NOT_A_LOCK,
    setup=then(copy_of("lm"), link("bad", "user.txt", lock=True)))  # fmt: skip
add("write", ["init", "{tmp}/out"], "a hard link to another file", setup=hard_lock("out"))
add("write", ["export", "{dec}", "{tmp}/out"], "not a regular file", setup=fifo_lock("out"))

# -- write: the output folder itself a link -------------------------------------------------------

add("write", ["init", "{tmp}/out", "--overwrite"], LINK, setup=link("out", "real"))
add("write", ["init", "{tmp}/out"], LINK, setup=link("out", "elsewhere/made"))
add("write", ["export", "{dec}", "{tmp}/out", "--overwrite"], LINK, setup=link("out", "real"))
add("write", ["export-hf", "{lm}", "{tmp}/out"], LINK, setup=link("out", "elsewhere/made"))
add("write", ["import-hf", "{tmp}/hf", "{tmp}/out", "--overwrite"], LINK,
    setup=then(hf_folder, link("out", "real")))  # fmt: skip
add("write", ["train", "lm", "--out", "{tmp}/out", *LM, "--overwrite"], LINK,
    setup=link("out", "real"))  # fmt: skip
add("write", ["train", "lm", "--out", "{tmp}/run", *RESUME], LINK,
    setup=then(copy_to("lm", "lm-copy"), link("run", "lm-copy")))  # fmt: skip
add("write", ["explain", "{dec}", "to be", "--png", "{tmp}/pngs", "--overwrite"], LINK,
    setup=link("pngs", "real"))  # fmt: skip

# -- write: the output file itself a link ---------------------------------------------------------

for argv in [
    ["explain", "{dec}", "to be", "--html"],
    ["explain", "{dec}", "to be", "--json"],
    ["walkthrough", "hello-world", "--html"],
    ["walkthrough", "hello-world", "--json"],
    ["diff", "{dec}", "to be", "--json"],
    ["diff", "{dec}", "to be", "--html"],
    ["lens", "{dec}", "to be", "--json"],
    ["attribute", "{dec}", "to be", "--html"],
    ["generate", "{dec}", "to be", "--record"],
    ["translate", "{tr}", "hello", "--alignments"],
]:
    add("write", [*argv, "{tmp}/report", "--overwrite"], LINK, setup=link("report", "user.txt"))
    add("write", [*argv, "{tmp}/report"], LINK, setup=link("report", "elsewhere/made"))


def _exercise_file(to):
    def setup(tmp, models):
        from glassformer import exercises

        link(f"work/{exercises.exercise(1).filename}", to)(tmp, models)

    return setup


add("write", ["exercises", "start", "1", "{tmp}/work", "--overwrite"], LINK,
    setup=_exercise_file("user.txt"))  # fmt: skip
add("write", ["exercises", "start", "1", "{tmp}/work"], LINK,
    setup=_exercise_file("elsewhere/made"))  # fmt: skip

# -- onto-input: an output onto what the command reads --------------------------------------------

IS_INPUT = "is --input"
INPUT = text_file("in.txt", "to be\nor not\n")
add("onto-input", ["generate", "{dec}", "--input", "{tmp}/in.txt", "--record", "{tmp}/in.txt",
                   "--overwrite"], IS_INPUT, setup=INPUT)  # fmt: skip
add("onto-input", ["generate", "{dec}", "--input", "{tmp}/in.txt", "--record",
                   "{tmp}/sub/../in.txt", "--overwrite"], IS_INPUT,
    setup=then(INPUT, text_file("sub/x")))  # fmt: skip
add("onto-input", ["generate", "{dec}", "--input", "{tmp}/in.txt", "--record", "{tmp}/hard.txt",
                   "--overwrite"], IS_INPUT,
    setup=then(INPUT, hard_link("hard.txt", "in.txt")))  # fmt: skip
add("onto-input", ["generate", "{dec}", "--input", "{tmp}/in.txt", "--record", "{tmp}/alias.txt",
                   "--overwrite"], IS_INPUT,
    setup=then(INPUT, lambda t, m: (t / "alias.txt").symlink_to(t / "in.txt")))  # fmt: skip
add("onto-input", ["generate", "{bad}", "to be", "--record", "{bad}/records.jsonl"],
    "lies inside CHECKPOINT", setup=copy_of("dec"))  # fmt: skip
add("onto-input", ["translate", "{tr}", "--input", "{tmp}/in.txt", "--alignments",
                   "{tmp}/in.txt", "--overwrite"], IS_INPUT,
    setup=text_file("in.txt", "hello\n"))  # fmt: skip
add("onto-input", ["translate", "{bad}", "hello", "--alignments", "{bad}/config.json",
                   "--overwrite"], "lies inside CHECKPOINT", setup=copy_of("tr"))  # fmt: skip
add("onto-input", ["init", "{tmp}/d", "--tokenizer", "char", "--corpus", "{tmp}/d/corpus.txt",
                   "--overwrite"], "holds --corpus", setup=text_file("d/corpus.txt"))  # fmt: skip
add("onto-input", ["train", "lm", "--out", "{tmp}/d", *LM[2:], "--data", "{tmp}/d/corpus.txt",
                   "--overwrite"], "holds --data",
    setup=text_file("d/corpus.txt", "to be or not to be\n" * 40))  # fmt: skip
add("onto-input", ["train", "translate", "--out", "{tmp}/d", *TR, "--valid", "{tmp}/d/v.tsv",
                   "--overwrite"], "holds --valid",
    setup=text_file("d/v.tsv", "a\tb\n"))  # fmt: skip
add("onto-input", ["train", "lm", "--out", "{bad}", *LM, "--init", "{bad}", "--overwrite"],
    "is --init", setup=copy_of("lm"))  # fmt: skip
add("onto-input", ["train", "lm", "--out", "{bad}", *RESUME[2:], "--data", "{bad}/corpus.txt"],
    "holds --data",
    setup=then(copy_of("lm"), text_file("bad/corpus.txt", "to be\n" * 40)))  # fmt: skip
add("onto-input", ["export", "{tmp}/a/ck", "{tmp}/a", "--overwrite"], "holds CHECKPOINT",
    setup=copy_to("dec", "a/ck"))  # fmt: skip
add("onto-input", ["export", "{bad}", "{bad}/sub"], "lies inside CHECKPOINT", setup=copy_of("dec"))
add("onto-input", ["export-hf", "{bad}", "{bad}", "--overwrite"], "is CHECKPOINT",
    setup=copy_of("lm"))  # fmt: skip
add("onto-input", ["import-hf", "{tmp}/hf", "{tmp}/hf", "--overwrite"], "is HF_DIR",
    setup=hf_folder)  # fmt: skip
add("onto-input", ["import-nanogpt", "{tmp}/ng", "{tmp}/out", "--vocab-from",
                   "{tmp}/out/input.txt", "--overwrite"], "holds --vocab-from",
    setup=then(nanogpt_folder, text_file("out/input.txt")))  # fmt: skip
add("onto-input", ["import-nanogpt", "{tmp}/ng", "{tmp}/out", "--meta", "{tmp}/out/meta.pkl",
                   "--overwrite"], "holds --meta",
    setup=then(nanogpt_folder, text_file("out/meta.pkl")))  # fmt: skip
add("onto-input", ["import-nanogpt", "{tmp}/ng/ckpt.pt", "{tmp}/ng", "--vocab-from",
                   "{models}/corpus.txt", "--overwrite"], "is CKPT",
    setup=nanogpt_folder)  # fmt: skip
for argv, message in [
    (["explain", "{bad}", "to be", "--html", "{bad}/report.html"], "lies inside CHECKPOINT"),
    (["explain", "{bad}", "to be", "--json", "{bad}/config.json", "--overwrite"], "lies inside"),
    (["explain", "{bad}", "to be", "--png", "{bad}", "--overwrite"], "is CHECKPOINT"),
    (["diff", "{bad}", "to be", "--json", "{bad}/model.safetensors", "--overwrite"], "lies inside"),
    (["lens", "{bad}", "to be", "--json", "{bad}/tokenizer.json", "--overwrite"], "lies inside"),
    (["attribute", "{bad}", "to be", "--html", "{bad}/../bad/a.html"], "lies inside"),
]:
    add("onto-input", argv, message, setup=copy_of("dec"))
# two outputs of one command that are one place
add("onto-input", ["walkthrough", "hello-world", "--json", "{tmp}/a", "--html", "{tmp}/a"],
    "one output would replace the other")  # fmt: skip
add("onto-input", ["explain", "{dec}", "to be", "--png", "{tmp}/p", "--html", "{tmp}/p/a.html"],
    "lies inside --png")  # fmt: skip


@pytest.mark.parametrize("case", [c for c in CASES if isinstance(c, Case)], ids=case_id)
def test_case(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


# -- a single file's dead writer: a real process killed before its rename -------------------------

CASES.append(("write", "explain --html removes the temporary of a writer killed before its rename"))

KILLED = """
import os, sys
from glassformer.cli import main
os.replace = lambda *a: os._exit(9)  # killed between writing its temporary and the rename
main(sys.argv[1:])
"""


def test_a_killed_writers_temporary_is_removed_by_the_next_explain_html(models, tmp_path):
    page = tmp_path / "page.html"
    argv = ["explain", str(models / "dec"), "to be", "--html", str(page)]
    killed = subprocess.run([sys.executable, "-c", KILLED, *argv], env=ENV, capture_output=True)
    assert killed.returncode == 9, killed.stderr
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 1 and left[0].startswith(".page.html.") and not page.exists()  # control
    done = run_cli(*argv)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
    assert Path(page).read_text(encoding="utf-8").startswith("<!")
