"""The front end held to the Python's standard (issue 39, point 3): ESLint's recommended rules and
Prettier pass on glassformer/explain/assets and tests/js (the tools pinned in package.json and
package-lock.json; `make test` runs `npm ci`), node's own test runner passes the unit tests of
the pure helpers (tests/js/*.test.mjs), no JavaScript file is past ~400 lines, and numbers are
written alike in both languages: numbers.js's `fmt` and `pct` against explain/values.py's
`rounded` and `percent` on the same values.

Without node these are skipped, each with a counted reason; with node but without node_modules
they fail under GLASSFORMER_REQUIRE_ALL=1 (`make test` installs them) and skip otherwise."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require

from glassformer.explain.values import percent, rounded

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "glassformer" / "explain" / "assets"
BIN = ROOT / "node_modules" / ".bin"
NODE = shutil.which("node")
LINTED = ["glassformer/explain/assets", "tests/js", "eslint.config.js"]
FORMATTED = [str(p.relative_to(ROOT)) for p in (*ASSETS.glob("*.js"), *ROOT.glob("tests/js/*.mjs"))]
MAX_LINES = 420  # "each file <= ~400 lines"


def node() -> str:
    if NODE is None:
        pytest.skip("node is not installed: the JavaScript's lint and unit tests need it")
    return NODE


def tool(name: str) -> str:
    node()
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the JavaScript's lint tools come from npm ci")
    require((BIN / name).exists(), f"node_modules/.bin/{name} is missing: run `npm ci`")
    return str(BIN / name)


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=300, check=False
    )


def test_eslint_finds_nothing():
    r = run(tool("eslint"), "--max-warnings", "0", *LINTED)
    assert r.returncode == 0, r.stdout + r.stderr


def test_prettier_finds_nothing_to_reformat():
    r = run(tool("prettier"), "--check", *FORMATTED, "eslint.config.js")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "tool_name, text, ok",
    [
        ("eslint", 'import { el } from "./dom.js";\nexport const a = el;\n', True),
        ("eslint", "export const a = notDefinedAnywhere;\n", False),  # no-undef
        ("eslint", 'import { el } from "./dom.js";\nexport const a = 1;\n', False),  # unused
        ("prettier", 'export const a = { b: "c" };\n', True),
        ("prettier", "export const a = {b:'c'}\n", False),
    ],
)
def test_the_checks_can_fail(tool_name, text, ok):
    """The same two tools on a text given as a module of the front end: a planted fault fails."""
    path = "glassformer/explain/assets/planted.js"
    if tool_name == "eslint":
        args = ["--max-warnings", "0", "--stdin", "--stdin-filename", path]
    else:
        args = ["--check", "--stdin-filepath", path]
    r = run(tool(tool_name), *args, stdin=text)
    assert (r.returncode == 0) is ok, r.stdout + r.stderr


def test_the_unit_tests_of_the_pure_helpers_pass():
    r = run(node(), "--test", *sorted(str(p) for p in (ROOT / "tests" / "js").glob("*.mjs")))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    passed = int(re.search(r"^# pass (\d+)$", r.stdout, re.M).group(1))
    assert passed >= 10 and re.search(r"^# fail 0$", r.stdout, re.M), r.stdout[-2000:]


def test_no_javascript_file_is_past_400_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in ASSETS.glob("*.js")}
    assert sizes and {k: n for k, n in sizes.items() if n > MAX_LINES} == {}


# -- numbers written alike in both languages ---------------------------------------------------


def values() -> list[float]:
    """A spread over every branch of the two formatters: powers of ten from 1e-8 to 1e9 times a
    few mantissas, both signs, the exponent's edges (1e-4, 1e6), rounding edges, 0 and -0."""
    out = [0.0, -0.0, 1e-4, 9.999e-5, 1e6, 999999.4, 999500.0, 0.9995, 999.5, 1.005, 123456.5]
    out += [2.5, 0.125, 0.0001234, 74526.1, 4.677e-10, 0.99999999953, 11.4639]
    for e in range(-8, 10):
        for m in (1.0, 1.2345, 3.14159, 5.55, 9.999):
            out += [m * 10.0**e, -m * 10.0**e]
    return out


def in_node(script: str, xs: list[float]) -> list[str]:
    numbers = (ASSETS / "numbers.js").as_uri()
    code = (
        f"import {{ fmt, pct }} from {json.dumps(numbers)};\n"
        f"const xs = {json.dumps(xs)};\n"
        f"console.log(JSON.stringify(xs.map(x => {script})));\n"
    )
    r = run(node(), "--input-type=module", "-e", code)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_fmt_writes_every_number_as_rounded_does():
    xs = values()
    js = in_node("fmt(x)", xs)
    py = [rounded(x) for x in xs]
    assert len(xs) >= 180
    assert [(x, a, b) for x, a, b in zip(xs, js, py, strict=True) if a != b] == []


def test_the_specials_and_percentages_are_written_alike():
    special = "fmt(x === 'nan' ? NaN : x === 'inf' ? Infinity : -Infinity)"
    want = [rounded(math.nan), rounded(math.inf), rounded(-math.inf)]
    assert in_node(special, ["nan", "inf", "-inf"]) == want
    ps = [0.0, 1.0, 0.935, 0.5, 1e-7, 0.123456, 0.0137, 0.99995, 2.5e-5]
    assert in_node("pct(x)", ps) == [percent(p) for p in ps]
