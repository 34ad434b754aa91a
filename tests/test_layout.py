"""The architecture as an invariant: who may import whom, and how long a module may grow.

Every module of the package is parsed with `ast` (nothing is imported), so the rules hold for
imports inside functions too:

- the two engines, reference.py and torch_model.py, never import each other;
- the trace records and nothing else: trace.py imports nothing from glassformer.explain;
- the core knows no foreign folders: weights.py does not import hf_dir;
- decoding knows no engine: decoding.py imports neither engine nor torch;
- the command line is the top: no module outside glassformer.cli imports it;
- no module is longer than MAX_LINES physical lines.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "glassformer"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every module `name` imports, absolute, with each package above it (`a.b.c` -> a, a.b)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from glassformer import hf_dir` imports the module glassformer.hf_dir
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for t in targets:
            parts = t.split(".")
            found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return found


def test_the_parser_sees_the_package():
    assert {"glassformer.reference", "glassformer.torch_model", "glassformer.trace"} <= set(MODULES)
    assert "glassformer.config" in imports("glassformer.reference")


def test_the_engines_never_import_each_other():
    assert "glassformer.torch_model" not in imports("glassformer.reference")
    assert "glassformer.reference" not in imports("glassformer.torch_model")
    assert "glassformer.reference" not in imports("glassformer.torch_layers")
    assert "glassformer.torch_layers" not in imports("glassformer.reference")


def test_the_trace_imports_nothing_from_explain():
    assert "glassformer.explain" not in imports("glassformer.trace")


def test_weights_knows_no_foreign_folders():
    assert "glassformer.hf_dir" not in imports("glassformer.weights")


def test_decoding_knows_no_engine():
    found = imports("glassformer.decoding")
    assert not found & {"glassformer.reference", "glassformer.torch_model", "torch"}


def test_nothing_below_the_command_line_imports_it():
    below = [m for m in MODULES if m != "glassformer.cli" and not m.startswith("glassformer.cli.")]
    assert [m for m in below if "glassformer.cli" in imports(m)] == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_line_budget(name):
    n = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{MODULES[name].relative_to(PACKAGE.parent)}: {n} lines > {MAX_LINES}"


# -- the outer ring: the command line and the explorer are thin layers over `Model` ---------------

# The engines and what drives them. The command line and the explorer reach these only through
# glassformer.model (the Model a user also holds), so that every piece of work is written once.
ENGINES = {
    "glassformer.reference",
    "glassformer.torch_model",
    "glassformer.torch_steps",
    "glassformer.quantize",
    "glassformer.inference",
    "glassformer.loading",
    "glassformer.hf_dir",
    "glassformer.nanogpt",
    "glassformer.torch_layers",
}
CLI = [m for m in MODULES if m == "glassformer.cli" or m.startswith("glassformer.cli.")]
SERVE = [m for m in MODULES if m == "glassformer.serve" or m.startswith("glassformer.serve.")]
# `import-hf` reports what an import left out (hf_dir.load), which a loaded Model does not keep.
# (PyTorch itself may be imported: the command line asks whether it is installed before work.)
OUTER_EXCEPTIONS = {
    ("glassformer.cli.checkpoints", "glassformer.hf_dir"),
    ("glassformer.cli.checkpoints", "glassformer.nanogpt"),  # import-nanogpt's own reader
}


def test_only_the_command_line_parses_arguments():
    assert [m for m in MODULES if m not in CLI and "argparse" in imports(m)] == []


def test_only_the_explorer_speaks_http():
    web = {"starlette", "uvicorn", "http", "http.server", "socketserver"}
    assert [m for m in MODULES if m not in SERVE and imports(m) & web] == []


@pytest.mark.parametrize("name", CLI + SERVE)
def test_the_outer_ring_reaches_the_engines_only_through_model(name):
    reached = {e for e in ENGINES & imports(name) if (name, e) not in OUTER_EXCEPTIONS}
    assert not reached, f"{name} imports {sorted(reached)}: go through glassformer.model.Model"
