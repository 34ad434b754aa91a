"""The Model's public face (issue 36, points 2 and 3): what a user sees is an explicit list of names
(the plumbing lives in `Model.runtime`, which serve/, the command line and the helper modules
share); every public method spells out its keyword arguments (no **kwargs) and documents each in
numpy style, so that `help(glassformer.Model)` and `help(m.lens)` show every option; the Model is
made by `Model.load`, which `glassformer.load` is.
"""

from __future__ import annotations

import inspect
import pydoc
import re

import numpy as np
import pytest

import glassformer
from glassformer import arguments, weights
from glassformer.model import Model
from glassformer.runtime import Runtime

# What a user calls. A name added to the Model is added here on purpose; plumbing goes to Runtime.
PUBLIC = {
    # made
    "load", "with_params",
    # what it is
    "cfg", "params", "tokenizer", "labels", "class_names", "notes", "name", "path", "family",
    "device", "threads", "summary", "runtime",
    # text <-> ids
    "encode", "decode", "tokens",
    # the verbs
    "generate", "stream", "record", "translate", "alignments", "embed", "classify", "evaluate",
    "run", "trace", "run_with_cache", "result", "ablate", "patch", "intervene", "steer", "steered",
    "lens", "circuit", "qk", "attribute", "faithfulness", "explain_choice", "record_corpus",
    "save", "export_hf",
}  # fmt: skip


@pytest.fixture(scope="module")
def m():
    return glassformer.load("hello-world")


def test_the_public_names_are_the_list(m):
    shown = {n for n in dir(m) if not n.startswith("_")}
    assert shown - PUBLIC == set(), "plumbing on the Model: move it to Runtime"
    assert PUBLIC - shown == set()


def test_the_plumbing_is_the_runtime_s(m):
    for name in ("step", "many_step", "reference_run", "decoded", "torch", "cached", "note"):
        assert callable(getattr(m.runtime, name)) and not hasattr(m, name)
    assert isinstance(m.runtime, Runtime)
    assert m.cfg is m.runtime.cfg and m.params is m.runtime.params
    assert m.tokenizer is m.runtime.tok and m.notes is m.runtime.notes


# -- signatures and docstrings --------------------------------------------------------------------

HEADER = re.compile(r"^(\w[\w ]*)\n-{3,}$", re.M)


def sections(doc: str) -> dict[str, str]:
    """A numpy-style docstring's sections by title ("Parameters", "Returns", ...)."""
    heads = list(HEADER.finditer(doc))
    return {
        h.group(1): doc[h.end() : heads[k + 1].start() if k + 1 < len(heads) else len(doc)]
        for k, h in enumerate(heads)
    }


def documented(doc: str) -> list[str]:
    """The names a Parameters section documents: `name : type` lines, several names comma-joined."""
    names = []
    for line in sections(doc).get("Parameters", "").splitlines():
        if line and not line[0].isspace() and " : " in line:
            names += [n.strip() for n in line.split(" : ")[0].split(",")]
    return names


def test_the_docstring_reader_reads_numpy_style():
    doc = inspect.cleandoc(
        """Summary.

        Parameters
        ----------
        text : str
            The text.
        a, b : int, optional
            Two at once.

        Returns
        -------
        str
        """
    )
    assert documented(doc) == ["text", "a", "b"]
    assert sections(doc)["Returns"].strip() == "str"
    assert documented("Summary.") == []


METHODS = arguments.public_methods(Model)


@pytest.mark.parametrize("name", METHODS)
def test_every_public_method_spells_out_and_documents_its_parameters(name):
    fn = inspect.unwrap(vars(Model)[name].__func__ if name == "load" else getattr(Model, name))
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    assert not [p for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], (
        f"Model.{name} takes *args or **kwargs: spell out what it accepts"
    )
    doc = inspect.getdoc(Model if name == "__init__" else fn)
    assert doc and doc.splitlines()[0].strip(), f"Model.{name} has no summary line"
    said = documented(doc)
    missing = [p.name for p in params if p.name not in said]
    assert not missing, f"Model.{name}'s docstring does not document {missing}"
    assert set(said) <= {p.name for p in params}, f"Model.{name} documents what it does not take"
    if name != "__init__":
        assert "Returns" in sections(doc), f"Model.{name}'s docstring says nothing it returns"


def test_help_shows_every_option(m):
    whole = pydoc.render_doc(glassformer.Model)
    assert "see the module docstring" not in whole
    for fn in (m.lens, m.attribute, m.generate, m.ablate):
        shown = pydoc.render_doc(fn)
        for p in inspect.signature(fn).parameters:
            assert re.search(rf"\b{p}\b.* : ", shown), (fn.__name__, p)
            assert re.search(rf"\b{p}\b.* : ", whole), (fn.__name__, p)


# -- made by Model.load ---------------------------------------------------------------------------


def test_glassformer_load_is_model_load():
    assert glassformer.load == Model.load
    a, b = glassformer.load("tiny", seed=3), Model.load("tiny", seed=3)
    want = weights.init(a.cfg, seed=3)
    for k, v in want.items():
        np.testing.assert_array_equal(a.params[k], v)
        np.testing.assert_array_equal(b.params[k], v)


def test_with_params_keeps_all_but_the_weights():
    """The same model on other weights: its reference engine reads them (the oracle: the engine's
    own forward on those weights), everything else is kept, and nothing made is shared."""
    from glassformer import reference as R

    m = glassformer.load("tiny", seed=1)
    m.runtime.fix = "a fix of its own"
    params = weights.init(m.cfg, seed=2)
    other = m.with_params(params)
    assert other.params is params and other.cfg is m.cfg and other.tokenizer is m.tokenizer
    kept = ("name", "path", "family", "labels")
    assert [getattr(other, k) for k in kept] == [getattr(m, k) for k in kept]
    assert other.runtime is not m.runtime and other.runtime.fix == "a fix of its own"
    assert (other.runtime.engine, other.runtime.dtype) == (m.runtime.engine, m.runtime.dtype)
    ids = [1, 2, 3]
    np.testing.assert_array_equal(other.run(ids=ids).logits, R.forward(params, m.cfg, ids))
    assert not np.allclose(m.run(ids=ids).logits, other.run(ids=ids).logits)


def test_tokens_of_ids_are_the_tokens_of_their_text(m):
    """`tokens(ids=...)` reads a run's ids as `tokens(text)` reads the text they encode."""
    run = m.run("Hello World", quiet=True)
    assert m.tokens(ids=run.src) == m.tokens("Hello World") == ["hello", "world"]
    assert m.tokens(ids=run.ids)[0] == "SOS"
    with pytest.raises(glassformer.GlassformerError, match="give one, not both"):
        m.tokens("Hello", ids=[1])
    with pytest.raises(glassformer.GlassformerError, match="text=None: must be a str"):
        m.tokens()
