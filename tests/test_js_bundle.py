"""explain/bundle.py: ES modules as one classic script for the offline pages. The oracle is node
running the bundle as a classic script: it prints what the modules compute, in the order they
import each other; what the bundler does not read (default exports, re-exports, namespace
imports, cycles, imports from elsewhere, names not exported, a reassigned exported `let`) is
refused with the file and line, never bundled wrongly."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from glassformer.explain.bundle import bundle
from glassformer.explain.html_pieces import asset

NODE = shutil.which("node")


def node() -> str:
    if NODE is None:
        pytest.skip("node is not installed: the JavaScript's tests run it")
    return NODE


def run(script: str) -> str:
    """What node prints running `script` as a classic script (as an inline `<script>` runs; a
    newer node would otherwise take a leftover `export` as a sign of a module)."""
    r = subprocess.run(
        [node(), "--input-type=commonjs", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_bundle_runs_each_module_after_what_it_imports():
    files = {
        "main.js": 'import { twice as two, NAME } from "./lib.js";\n'
        'import { log } from "./log.js";\nlog(NAME + " " + two(21));\n',
        "lib.js": 'import { log } from "./log.js";\nlog("lib loaded");\n'
        "const hidden = 2;\nexport function twice(x) {\n  return hidden * x;\n}\n"
        'export const NAME = "answer";\n',
        "log.js": "export const log = (x) => console.log(x);\n",
    }
    out = bundle("main.js", files.__getitem__)
    assert out.index("// -- log.js") < out.index("// -- lib.js") < out.index("// -- main.js")
    assert "const { twice: two, NAME } = __gf_lib;\n" in out
    assert run(out) == "lib loaded\nanswer 42\n"
    private = run(out + "\nconsole.log(typeof hidden, typeof twice, typeof two);\n")
    assert private.splitlines()[-1] == "undefined undefined undefined"  # each module's own scope


def test_a_wrapped_import_reads_as_one():
    files = {
        "main.js": 'import {\n  a,\n  b as c,\n} from "./lib.js";\nconsole.log(a + c);\n',
        "lib.js": "export const a = 1;\nexport const b = 2;\n",
    }
    assert run(bundle("main.js", files.__getitem__)) == "3\n"


def test_every_kind_of_export_it_reads_runs():
    files = {
        "main.js": 'import { add, later, Box, count, step, ids, WORDS, strict } from "./lib.js";\n'
        "let importance = 1;\n"  # lines that start with `import` and import nothing
        "importance = add(importance);\n"
        "const it = ids();\n"
        "later().then((v) => console.log(importance, v, new Box(5).v, count, step(3), "
        "it.next().value, WORDS, strict));\n",
        "lib.js": "export const add = (a, b = 2) => a + b;\n"  # a comma, and one name
        'export async function later() {\n  return "done, then";\n}\n'
        "export class Box {\n  constructor(v) {\n    this.v = v;\n  }\n}\n"
        "export let count = 7; // read, never assigned again: a copy is the same\n"
        "export const step = (n) => {\n  let k = n;\n  if (count === 7) k += count;\n"
        "  return k;\n};\n"
        "export function* ids() {\n  yield 11;\n}\n"
        'export const WORDS = "one, two";\n'
        # `this` is undefined in a sloppy function only where the code is strict, as a module is
        "export const strict = (function () {\n  return this === undefined;\n})();\n",
    }
    assert run(bundle("main.js", files.__getitem__)) == "3 done, then 5 7 10 11 one, two true\n"


@pytest.mark.parametrize(
    "main, says",
    [
        ('import x from "./lib.js";\n', "main.js, line 1: only `import { a, b as c }"),
        ('import * as lib from "./lib.js";\n', "main.js, line 1: only `import { a, b as c }"),
        ('import { a } from "lib";\n', "main.js, line 1: only `import { a, b as c }"),
        ('import { a } from "../up/lib.js";\n', "main.js, line 1: only `import { a, b as c }"),
        ("export default 3;\n", "main.js, line 1: only `export` before"),
        ('export { a } from "./lib.js";\n', "main.js, line 1: only `export` before"),
        ("const a = 1;\nexport { a };\n", "main.js, line 2: only `export` before"),
        ("const a = 1;\nexport const b = 1, c = 2;\n", "main.js, line 2: only `export` before"),
        ("export let b = [1, 2], c = 2;\n", "main.js, line 1: only `export` before"),
        ('import { a } from "./lib.js";\nimport { b } from "./back.js";\n', "an import cycle"),
        ('import { a, nope } from "./lib.js";\n', "main.js, line 1: lib.js does not export nope"),
        ('\nimport { a } from "./gone.js";\n', "main.js, line 2: cannot read gone.js"),
        ('import { a } from "./l_ib.js";\nimport { b } from "./l-ib.js";\n', "would share"),
        ("export let n = 0;\nexport function bump() {\n  n += 1;\n}\n", "main.js, line 3: n is"),
        ("export let n = 0;\nexport const up = () => n++;\n", "main.js, line 2: n is an exported"),
    ],
)
def test_what_it_cannot_read_is_refused(main, says):
    files = {
        "main.js": main,
        "lib.js": "export const a = 1;\n",
        "l_ib.js": "export const a = 1;\n",
        "l-ib.js": "export const b = 1;\n",
        "back.js": 'import { c } from "./main.js";\nexport const b = c;\n',
    }
    with pytest.raises(ValueError) as e:
        bundle("main.js", files.__getitem__)
    assert says in str(e.value)


def test_a_cycle_is_named_in_order():
    files = {
        "main.js": 'import { a } from "./lib.js";\n',
        "lib.js": 'import { b } from "./back.js";\nexport const a = 1;\n',
        "back.js": 'import { a } from "./lib.js";\nexport const b = a;\n',
    }
    with pytest.raises(ValueError, match=r"back.js, line 1: an import cycle \(lib.js -> back.js"):
        bundle("main.js", files.__getitem__)


@pytest.mark.parametrize("entry", ["report.js", "timelapse-page.js"])
def test_the_offline_pages_bundles_parse(entry):
    r = subprocess.run(
        [node(), "--input-type=commonjs", "--check", "-"],
        input=bundle(entry, asset),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
