"""The harness of the bad-input tables: the tiny models every case may use, the `Case` row, the
setups that damage a copy of a model, and `check_case`, which runs one row through the command
line and asserts its promise: the exit status, exactly one `glassformer: error:` line on stderr
for a refusal (no traceback), and every file that existed before byte-identical afterwards (a
refusal writes nothing).

Used by tests/test_bad_inputs.py (round one) and tests/test_edges.py (round two); each table file
lists its own rows and parametrizes over them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from glassformer.cli import main

ROOT = Path(__file__).resolve().parents[1]


# -- the models every case may use -------------------------------------------------------------


def build_models(tmp_path_factory):
    """hello (the article's encoder-decoder), dec (char decoder), enc (word classifier), lm and tr
    (trained 2 steps, with training state), all tiny."""
    d = tmp_path_factory.mktemp("models")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 40)
    pairs = d / "pairs.tsv"
    from glassformer import data as D

    rows = D.read_pairs("eng-spa")[3000:3200]
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in rows))
    tiny = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32"]
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(corpus)]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(corpus)]) == 0  # fmt: skip
    short = ["--set", "max_steps=2", "--set", "eval_interval=2", "--set", "eval_iters=1"]
    assert main(["train", "lm", "--out", str(d / "lm"), "--data", str(corpus), "--quiet",
                 *tiny, "--set", "max_len=16", "--set", "block_size=16", *short]) == 0  # fmt: skip
    assert main(["train", "translate", "--out", str(d / "tr"), "--data", str(pairs), "--valid",
                 str(pairs), "--vocab-size", "400", "--quiet", *tiny, "--set", "max_len=24",
                 "--set", "n_encoder_layers=1", "--set", "n_decoder_layers=1",
                 "--set", "eval_sentences=2", *short]) == 0  # fmt: skip
    return d


# -- the table ------------------------------------------------------------------------------------


@dataclass
class Case:
    family: str
    argv: list[str]
    message: str  # a substring of the one error line (or of stdout, for code 0)
    code: int = 2
    setup: object = None  # setup(tmp, models) -> None: files the case needs
    id: str = field(default="")


def copy_of(name):
    """A setup that copies a model to {tmp}/bad, for cases that change one of its files."""

    def setup(tmp, models):
        shutil.copytree(models / name, tmp / "bad")

    return setup


def edit(name, file, change):
    """Copy model `name` to {tmp}/bad, then change(path_of_file)."""

    def setup(tmp, models):
        shutil.copytree(models / name, tmp / "bad")
        change(tmp / "bad" / file)

    return setup


def write(file, content):
    def change(path):
        data = content if isinstance(content, bytes) else content.encode()
        (path.parent / file if file else path).write_bytes(data)

    return change


def config_edit(**changes):
    def change(path):
        cfg = json.loads(path.read_text())
        cfg.update(changes)
        path.write_text(json.dumps(cfg))

    return change


def overflow(scale: float):
    """A change: every FFN weight of a model.safetensors set to +-scale (random signs, seeded):
    products of two of them overflow float32 (scale 1e30) or float64 too (1e200)."""

    def change(path):
        import numpy as np
        from safetensors.numpy import load_file, save_file

        t = load_file(str(path))
        rng = np.random.default_rng(0)
        for name in t:
            if name.endswith(("ffn.w1.weight", "ffn.w2.weight")):
                t[name] = scale * rng.choice([-1.0, 1.0], size=t[name].shape)
        save_file(t, str(path))

    return change


def damaged(name: str, scale: float):
    """A setup: model `name` copied to {tmp}/bad with its FFN weights at +-scale (`overflow`)."""
    return edit(name, "model.safetensors", overflow(scale))


def make_file(name, content):
    def setup(tmp, models):
        data = content if isinstance(content, bytes) else content.encode()
        (tmp / name).write_bytes(data)

    return setup


def state_edit(fn):
    """Copy the trained translator to {tmp}/bad and change its training state with fn(state)."""

    def setup(tmp, models):
        shutil.copytree(models / "tr", tmp / "bad")
        path = tmp / "bad" / "training_state.pt"
        import torch

        state = torch.load(path, weights_only=True)
        fn(state)
        torch.save(state, path)

    return setup


# -- running a case -------------------------------------------------------------------------------


def snapshot(*roots: Path) -> dict[Path, str]:
    out = {}
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                out[f] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def fill(argv, tmp, models):
    names = {n: models / n for n in ("hello", "dec", "enc", "lm", "tr")}
    return [a.format(tmp=tmp, models=models, bad=tmp / "bad", **names) for a in argv]


def case_id(c: Case) -> str:
    return f"{c.family}-{' '.join(c.argv)[:50]}-{c.message[:30]}"


def check_case(case: Case, models: Path, tmp_path: Path, capsys) -> None:
    """Run one row and assert its promise (see the module docstring)."""
    if case.setup:
        case.setup(tmp_path, models)
        capsys.readouterr()  # what the setup printed (transformers' progress bars) is not ours
    before = snapshot(tmp_path, models)
    try:
        code = main(fill(case.argv, tmp_path, models))
    except SystemExit as e:  # argparse
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == case.code, (code, err)
    after = snapshot(tmp_path, models)
    for f, digest in before.items():  # a success may change its own output, nothing else
        if case.code == 2 or f.is_relative_to(models):
            assert after.get(f) == digest, f"{f} changed"
    if case.code == 2:
        assert set(after) == set(before), "a refusal wrote files"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
        assert case.message in lines[0], lines[0]
    else:
        assert case.message in out + err


# -- the command line in its own process ----------------------------------------------------------

ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def run_cli(*argv, **kw) -> subprocess.CompletedProcess:
    """`python -m glassformer.cli ARGV` in a new process (text output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "glassformer.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=ENV,
        **kw,
    )


def one_error_line(err: str) -> str:
    """The one `glassformer: error:` line that a refusal prints (no traceback, nothing else)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
    assert "Traceback" not in err
    return lines[0]
