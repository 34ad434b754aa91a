"""Start-up time is a feature: `glassformer --help` and the NumPy-only commands never import
torch (each checked in a fresh interpreter), and where torch is missing, a command that needs it
says which extra installs it, in one line, instead of a ModuleNotFoundError.

(benchmarks/startup_time.py measures the wall times.)
"""

import json
import subprocess
import sys

import pytest

from glassformer.cli import main
from glassformer.errors import install_hint

RUN = """
import json, sys
if sys.argv[2] == "hide":
    sys.modules["torch"] = None  # any `import torch` now fails, as on a machine without it
from glassformer.cli import main
code = main(json.loads(sys.argv[1]))
heavy = ("torch", "matplotlib", "tqdm", "transformers")
loaded = sorted(m for m in heavy if sys.modules.get(m) is not None)
print("RESULT", json.dumps({"code": code, "loaded": loaded}))
"""


def run_fresh(argv: list, hide_torch: bool = False):
    """main(argv) in a new interpreter: (exit code, heavy modules loaded, stdout, stderr)."""
    r = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps([str(a) for a in argv]), "hide" * hide_torch],
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    result = json.loads(r.stdout.rsplit("RESULT ", 1)[1])
    return result["code"], result["loaded"], r.stdout, r.stderr


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    corpus = d / "c.txt"
    corpus.write_text("to be or not to be\n")
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer", "word",
                 "--corpus", str(corpus)]) == 0  # fmt: skip
    return d


NUMPY_COMMANDS = [
    ["--help"],
    ["--version"],
    [],
    ["walkthrough", "hello-world"],
    ["walkthrough", "self-attention"],
    ["walkthrough", "hello-world", "--html", "{tmp}/r.html"],
    ["config", "--preset", "tiny"],
    ["init", "{tmp}/new"],
    ["explain", "{hello}", "hello world"],
    ["explain", "{hello}", "hello world", "--html", "{tmp}/e.html", "--json", "{tmp}/e.json"],
    ["generate", "{hello}", "hello world", "--engine", "reference"],
    ["generate", "{hello}", "hello world", "--engine", "reference", "--strategy", "beam"],
    ["embed", "{enc}", "to be", "--engine", "reference"],
    ["classify", "{enc}", "to be", "--engine", "reference"],
]


@pytest.mark.parametrize("argv", NUMPY_COMMANDS, ids=lambda a: " ".join(a[:2]) or "bare")
def test_numpy_commands_never_import_torch(models, tmp_path, argv):
    argv = [a.format(tmp=tmp_path, hello=models / "hello", enc=models / "enc") for a in argv]
    code, loaded, out, err = run_fresh(argv)
    assert code == 0, err
    assert "torch" not in loaded and "transformers" not in loaded, loaded


NEEDS_TORCH = [
    (["train", "lm", "--out", "{tmp}/o", "--quiet"], "train needs PyTorch"),
    (["translate", "{hello}", "hello world"], "translate needs PyTorch"),
    (["eval", "{hello}", "--data", "eng-spa-valid"], "eval needs PyTorch"),
    (["embed", "{enc}", "to be"], "--engine torch (the default) needs PyTorch"),
    (["classify", "{enc}", "to be", "--engine", "torch"], "--engine torch needs PyTorch"),
    (["generate", "{hello}", "hello world", "--engine", "torch"], "--engine torch needs PyTorch"),
]


@pytest.mark.parametrize(("argv", "message"), NEEDS_TORCH, ids=lambda a: str(a)[:30])
def test_without_torch_a_command_that_needs_it_names_the_extra(models, tmp_path, argv, message):
    argv = [a.format(tmp=tmp_path, hello=models / "hello", enc=models / "enc") for a in argv]
    code, _, out, err = run_fresh(argv, hide_torch=True)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
    assert message in lines[0] and lines[0].endswith(install_hint("torch"))
    assert not (tmp_path / "o").exists()


def test_without_torch_auto_engines_fall_back_to_the_reference(models):
    for argv in (
        ["classify", models / "enc", "to be"],
        ["generate", models / "hello", "hello world"],
    ):
        code, loaded, _, err = run_fresh(argv, hide_torch=True)
        assert code == 0 and loaded == [], err
