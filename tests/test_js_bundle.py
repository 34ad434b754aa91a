"""explain/bundle.py: ES modules as one classic script for the offline pages. The oracle is node
running the bundle: it prints what the modules compute, in the order they import each other;
what the bundler does not read (default exports, re-exports, namespace imports, cycles, imports
from elsewhere) is refused with the file and line, never bundled wrongly."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from glassformer.explain.bundle import bundle
from glassformer.explain.html_pieces import asset

NODE = shutil.which("node")


def run(script: str) -> str:
    if NODE is None:
        pytest.skip("node is not installed: the bundle is checked by running it")
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
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
    assert run(out) == "lib loaded\nanswer 42\n"
    private = run(out + "\nconsole.log(typeof hidden, typeof twice);\n").splitlines()[-1]
    assert private == "undefined undefined"  # a module's names stay in its scope


def test_a_wrapped_import_reads_as_one():
    files = {
        "main.js": 'import {\n  a,\n  b as c,\n} from "./lib.js";\nconsole.log(a + c);\n',
        "lib.js": "export const a = 1;\nexport const b = 2;\n",
    }
    assert run(bundle("main.js", files.__getitem__)) == "3\n"


@pytest.mark.parametrize(
    "main, says",
    [
        ('import x from "./lib.js";\n', "main.js, line 1: only `import { a, b as c }"),
        ('import * as lib from "./lib.js";\n', "main.js, line 1: only `import { a, b as c }"),
        ('import { a } from "lib";\n', "main.js, line 1: only `import { a, b as c }"),
        ("export default 3;\n", "main.js, line 1: only `export` before"),
        ('export { a } from "./lib.js";\n', "main.js, line 1: only `export` before"),
        ("const a = 1;\nexport const b = 1, c = 2;\n", "main.js, line 2: only `export` before"),
        ('import { a } from "./lib.js";\nimport { b } from "./back.js";\n', "an import cycle"),
    ],
)
def test_what_it_cannot_read_is_refused(main, says):
    files = {
        "main.js": main,
        "lib.js": "export const a = 1;\n",
        "back.js": 'import { c } from "./main.js";\nexport const b = c;\n',
    }
    with pytest.raises(ValueError, match=None) as e:
        bundle("main.js", files.__getitem__)
    assert says in str(e.value)


@pytest.mark.parametrize("entry", ["report.js", "timelapse-page.js"])
def test_the_offline_pages_bundles_parse(entry):
    if NODE is None:
        pytest.skip("node is not installed: the bundle is checked by parsing it")
    r = subprocess.run(
        [NODE, "--check", "-"], input=bundle(entry, asset), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
