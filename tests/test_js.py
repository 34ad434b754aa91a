"""The front end held to the Python's standard (issue 39, point 3): ESLint's recommended rules and
Prettier pass on glassformer/explain/assets and tests/js (the tools pinned in package.json and
package-lock.json; `make test` runs `npm ci`), node's own test runner passes the unit tests of
the pure helpers (tests/js/*.test.mjs), no JavaScript file is past ~400 lines, and numbers are
written alike in both languages: numbers.js's `fmt` and `pct` against explain/values.py's
`rounded` and `percent` on the same floats.

Without node these are skipped, each with a counted reason; with node and npm but without
node_modules they fail under GLASSFORMER_REQUIRE_ALL=1 (`make test` installs them) and skip
otherwise. `lint` and `node_tests` take a folder, so a planted fault in a scratch tree shows that
each check can fail."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import conftest
import pytest
from conftest import require

from glassformer.explain.values import percent, rounded

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "glassformer" / "explain" / "assets"
NUMBERS = ASSETS / "numbers.js"
JS_TESTS = ROOT / "tests" / "js"
BIN = ROOT / "node_modules" / ".bin"
NODE = shutil.which("node")
# What is checked, relative to the root; the Makefile's `lint` and package.json's say the same.
LINTED = ("glassformer/explain/assets", "tests/js", "eslint.config.js")
FORMATTED = ("glassformer/explain/assets/**/*.js", "tests/js/**/*.mjs", "eslint.config.js")
CONFIGS = ("eslint.config.js", ".prettierrc.json", ".prettierignore")
MAX_LINES = 420  # "each file <= ~400 lines"
HERE = sys.modules[__name__]


def node() -> str:
    if NODE is None:
        pytest.skip("node is not installed: the JavaScript's tests run it")
    return NODE


def tool(name: str) -> str:
    node()
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the JavaScript's lint tools come from `npm ci`")
    require((BIN / name).exists(), f"node_modules/.bin/{name} is missing: run `npm ci`")
    return str(BIN / name)


def run(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300, check=False
    )


def lint(root: Path) -> dict[str, str]:
    """What ESLint and `prettier --check` say about the JavaScript under `root` (this repository,
    or a tree shaped like it with its config files), by tool; {} when both pass."""
    said = {}
    checks = {"eslint": ["--max-warnings", "0", *LINTED], "prettier": ["--check", *FORMATTED]}
    for name, args in checks.items():
        r = run(tool(name), *args, cwd=root)
        if r.returncode != 0:
            said[name] = f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    return said


def node_tests(folder: Path) -> subprocess.CompletedProcess:
    """node --test on every *.test.mjs under `folder`, named one by one: node 20 searches a folder
    it is given, node 22 and later take it for a file (package.json's `npm test` lets the shell
    expand the same pattern)."""
    return run(node(), "--test", *sorted(str(p) for p in folder.rglob("*.test.mjs")))


def test_eslint_and_prettier_find_nothing():
    assert lint(ROOT) == {}


def test_the_unit_tests_of_the_pure_helpers_pass():
    r = node_tests(JS_TESTS)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    files = JS_TESTS.rglob("*.test.mjs")
    written = sum(len(re.findall(r"^test\(", p.read_text(), re.M)) for p in files)  # one a test
    passed = int(re.search(r"^# pass (\d+)$", r.stdout, re.M).group(1))
    assert passed == written >= 18 and re.search(r"^# fail 0$", r.stdout, re.M), r.stdout[-2000:]


def test_no_javascript_file_is_past_400_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in ASSETS.rglob("*.js")}
    assert sizes and {k: n for k, n in sizes.items() if n > MAX_LINES} == {}


# -- the checks can fail: planted faults in a scratch tree shaped like the repository -----------

CLEAN = {  # a browser global in a page module, a node one in a test; 90 columns; a trailing comma
    "glassformer/explain/assets/ok.js": (
        "// A module of the front end, formatted as Prettier writes it.\n"
        "export function hello(name) {\n"
        '  document.title = "hello " + name + '
        '", a line of ninety columns, past eighty: one, two!";\n'
        "}\n\n"
        "export function twice() {\n"
        "  return hello(\n"
        '    "a first argument of some fifty characters, or so",\n'
        '    "and a second that takes the call past 100 columns",\n'
        "  );\n"
        "}\n"
    ),
    "tests/js/ok.test.mjs": (
        'import { test } from "node:test";\n\n'
        'import { hello } from "../../glassformer/explain/assets/ok.js";\n\n'
        'test("hello", () => process.env.HOME && hello);\n'
    ),
}
PLANTED = {  # file -> the one tool that must name it
    "glassformer/explain/assets/undefined.js": ("export const a = notDefinedAnywhere;\n", "eslint"),
    "glassformer/explain/assets/unused.js": (
        'import { hello } from "./ok.js";\n\nexport const a = 1;\n',
        "eslint",
    ),
    "glassformer/explain/assets/node-global.js": ("export const a = process.argv;\n", "eslint"),
    "glassformer/explain/assets/tight.js": ("export const a = {b:'c'}\n", "prettier"),
    "glassformer/explain/assets/single.js": ("export const a = 'c';\n", "prettier"),
    "glassformer/explain/assets/narrow.js": (  # fits in 100 columns: Prettier joins it
        "export const long = [\n  1111111111, 2222222222, 3333333333,\n"
        "  4444444444, 5555555555, 6666666666,\n];\n",
        "prettier",
    ),
    "glassformer/explain/assets/deeper/unformatted.js": ("export const a=1\n", "prettier"),
    "tests/js/untidy.test.mjs": ("export const a=1\n", "prettier"),
    "tests/js/undefined.test.mjs": ("export const a = notDefinedAnywhere;\n", "eslint"),
}


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name in CONFIGS:
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_clean_tree_passes(tmp_path):
    assert lint(tree(tmp_path, CLEAN)) == {}


def test_each_planted_fault_is_named_by_its_tool(tmp_path):
    said = lint(tree(tmp_path, CLEAN | {k: text for k, (text, _) in PLANTED.items()}))
    assert set(said) == {"eslint", "prettier"}
    for name, (_, by) in PLANTED.items():
        other = "prettier" if by == "eslint" else "eslint"
        assert name in said[by] and name not in said[other], (name, said)
    assert all("ok.js" not in text and "ok.test.mjs" not in text for text in said.values())


def test_a_tree_without_javascript_fails_rather_than_passing_empty(tmp_path):
    assert set(lint(tree(tmp_path, {"tests/js/README": "nothing here\n"}))) == {
        "eslint",
        "prettier",
    }


def test_node_tests_runs_every_file_and_sees_a_failure(tmp_path):
    (tmp_path / "deeper").mkdir()
    (tmp_path / "a.test.mjs").write_text(
        'import { test } from "node:test";\ntest("a", () => {});\n'
    )
    (tmp_path / "deeper" / "b.test.mjs").write_text(
        'import { test } from "node:test";\ntest("b", () => {\n  throw new Error("planted");\n});\n'
    )
    r = node_tests(tmp_path)
    assert r.returncode != 0 and re.search(r"^# tests 2$", r.stdout, re.M), r.stdout
    assert re.search(r"^# fail 1$", r.stdout, re.M), r.stdout


def test_without_node_or_node_modules_the_tests_say_why(monkeypatch, tmp_path):
    monkeypatch.setattr(HERE, "NODE", None)
    with pytest.raises(pytest.skip.Exception, match="^node is not installed: "):
        tool("eslint")
    monkeypatch.setattr(HERE, "NODE", "/usr/bin/node")
    monkeypatch.setattr(HERE, "BIN", tmp_path)  # node and npm there, node_modules not
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(conftest, "REQUIRE_ALL", False)
    with pytest.raises(pytest.skip.Exception, match="eslint is missing: run `npm ci`$"):
        tool("eslint")
    monkeypatch.setattr(conftest, "REQUIRE_ALL", True)
    with pytest.raises(pytest.fail.Exception, match="run `npm ci` .*GLASSFORMER_REQUIRE_ALL=1"):
        tool("eslint")


# -- numbers written alike in both languages ---------------------------------------------------


def values() -> list[float]:
    """A spread over every branch of the two formatters: powers of ten from 1e-8 to 1e9 times a
    few mantissas, both signs, the exponent's edges (1e-4, 1e6) from both sides, rounding edges,
    0, -0, the extremes of a double, nan and the infinities, and the doubles exactly half-way
    between two 3-digit roundings (100.5, 1.125, 10.25, 1.125e6: Python's own format rounded
    those half to even, "100", where JavaScript's toPrecision writes "101"; `rounded` now
    rounds them as JavaScript does)."""
    out = [0.0, -0.0, 1e-4, -1e-4, 9.999e-5, 9.9995e-5, 0.000099999, 1e6, -1e6, 999999.4]
    out += [999999.5, 999500.0, 0.9995, 999.5, -999.5, 1.005, 123456.5, 2.5, 0.125, 0.0001234]
    out += [74526.1, 4.677e-10, 0.99999999953, 11.4639, 5e-324, sys.float_info.max]
    out += [math.nan, math.inf, -math.inf]
    out += [100.5, -100.5, 1.125, 10.25, 1.125e6, 0.0001125, 2.125, 102.5, 4.5e-4 + 0.0]
    out += [n + 0.5 for n in range(100, 1000, 37)] + [k / 8 for k in range(1, 80, 3)]
    for e in range(-8, 10):
        for m in (1.0, 1.2345, 3.14159, 5.55, 9.999):
            out += [m * 10.0**e, -m * 10.0**e]
    return out


def in_node(call: str, xs: list[float]) -> list[str]:
    """call(x) for each x: numbers.js in node on the same doubles (JSON carries -0.0 and the
    shortest repr exactly, nan and the infinities go as their names; node says what it got)."""
    code = (
        f"import {{ fmt, pct }} from {json.dumps(NUMBERS.as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const named = { nan: NaN, inf: Infinity, '-inf': -Infinity };\n"
        "const xs = JSON.parse(readFileSync(0, 'utf8')).map((x) => named[x] ?? x);\n"
        f"const out = xs.map((x) => {call});\n"
        "const seen = xs.map((x) => (Object.is(x, -0) ? '-0.0' : String(x)));\n"
        "console.log(JSON.stringify([out, seen]));\n"
    )
    sent = [x if math.isfinite(x) else str(x) for x in xs]
    r = run(node(), "--input-type=module", "-e", code, stdin=json.dumps(sent))
    assert r.returncode == 0, r.stderr
    out, seen = json.loads(r.stdout)
    got = [float(s) for s in seen]  # "NaN", "Infinity", "-0.0" and the shortest repr
    assert all(same(a, b) for a, b in zip(got, xs, strict=True)), list(zip(got, xs, strict=True))
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


def test_fmt_writes_every_number_as_rounded_does():
    xs = values()
    js = in_node("fmt(x)", xs)
    assert len(xs) >= 200
    assert [(x, a, rounded(x)) for x, a in zip(xs, js, strict=True) if a != rounded(x)] == []


def test_pct_writes_every_probability_as_percent_does():
    ps = [k / 1000 for k in range(1001)] + [1e-7, 1e-6, 2.5e-5, 0.0137, 0.123456, 0.935]
    ps += [0.99995, 0.999995, 0.9999999, 1 - 1e-12, 5e-324, math.nan, 0.01125, 0.125, 0.0625]
    js = in_node("pct(x)", ps)
    assert js[ps.index(0.935)] == "93.5%"
    assert [(p, a, percent(p)) for p, a in zip(ps, js, strict=True) if a != percent(p)] == []
