"""Every "install X" hint glassformer prints is a command that works as printed (issue 37, point
3): this Python's pip, the clone installed again in place (editable: edits keep taking effect)
with the extra and the pins of constraints.txt. Oracles: an ast scan of the package's strings
(no "pip install" written anywhere but `errors.install_hint`), and the hint itself, taken from a
fresh venv's error line and run there by bash, then the venv looked into.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from conftest import require

from glassformer import errors
from glassformer.errors import install_hint

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "glassformer"


def _strings(path: Path):
    """(line, text, the function it lies in or None) of every string constant of a module,
    f-strings' literal parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    spans = [
        (n.lineno, n.end_lineno, n.name) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            inner = [s for s in spans if s[0] <= node.lineno <= s[1]]
            fn = max(inner)[2] if inner else None  # the innermost: the last to start
            yield node.lineno, node.value, fn


def test_no_string_says_pip_install_but_the_hint():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for line, text, fn in _strings(path):
            if re.search(r"pip\s+install", text) and (where, fn) != ("errors.py", "install_hint"):
                found.append(f"{where}:{line}: {text!r}")
    assert not found, "write errors.install_hint(EXTRA), not a pip line:\n" + "\n".join(found)
    assert any("pip install" in t for _, t, _ in _strings(PACKAGE / "errors.py"))  # it looks


def test_the_hint_installs_this_clone_in_place_with_its_constraints():
    assert errors.checkout() == ROOT
    python = shlex.quote(sys.executable)
    assert install_hint("serve") == (
        f"install the serve extra: {python} -m pip install -c "
        f"{shlex.quote(str(ROOT / 'constraints.txt'))} -e {shlex.quote(f'{ROOT}[serve]')}"
    )
    assert install_hint("torch,hf").startswith("install the torch and hf extras: ")
    assert install_hint("torch,hf").endswith(shlex.quote(f"{ROOT}[torch,hf]"))
    assert install_hint(None).endswith(f" -e {shlex.quote(str(ROOT))}")


def test_outside_a_clone_the_hint_installs_what_the_extra_names(monkeypatch):
    """glassformer is not on PyPI: outside a clone the hint installs the packages the installed
    package's metadata gives the extra (oracle: pyproject.toml's own lists), never a name a
    stranger could have published."""
    import tomllib

    monkeypatch.setattr(errors, "checkout", lambda: None)
    python = shlex.quote(sys.executable)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serve = " ".join(shlex.quote(r) for r in project["optional-dependencies"]["serve"])
    assert install_hint("serve") == f"install the serve extra: {python} -m pip install {serve}"
    core = " ".join(shlex.quote(r) for r in project["dependencies"])
    assert install_hint(None).endswith(f"{python} -m pip install {core}")
    assert "glassformer" not in install_hint("torch").rpartition("pip install")[2]


def _pin(name: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in constraints.txt")


def test_the_serve_hint_works_as_printed_in_a_fresh_venv(tmp_path):
    """A venv with glassformer installed from this clone without the serve extra; `serve` says
    what to run; bash runs that line as printed; then the server's packages are there at the
    pinned versions, and glassformer is still this clone (editable). About 25 s: the base install
    reuses pip's cache, the hint's own install runs for real."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own imports
    pin = _pin("uvicorn")
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "-d",
            str(tmp_path / "dl"),
            f"uvicorn=={pin}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    require(got.returncode == 0, "pip cannot reach a package index (the fresh-venv install test)")
    start = time.monotonic()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    base = [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt")]
    done = subprocess.run(
        [*base, "-e", str(ROOT)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]

    served = subprocess.run(
        [str(venv / "bin" / "glassformer"), "serve", "models/char-lm"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = served.stderr.strip().splitlines()
    assert served.returncode == 2 and len(lines) == 1, served.stderr
    assert "serve needs the web server packages" in lines[0], lines[0]
    hint = re.search(r"install the serve extra: (.*)$", lines[0])[1]
    assert Path(shlex.split(hint)[0]) == python  # the venv's own pip, named as printed

    ran = subprocess.run(
        ["bash", "-c", hint], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    probe = (
        "import glassformer, starlette, uvicorn; print(uvicorn.__version__, glassformer.__file__)"
    )
    seen = subprocess.run(
        [str(python), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    version, where = seen.stdout.split()
    assert version == pin  # constraints.txt was honoured
    assert Path(where).resolve() == PACKAGE / "__init__.py"  # still this clone, editable
    print(f"fresh venv, base install and the serve hint: {time.monotonic() - start:.0f} s")
