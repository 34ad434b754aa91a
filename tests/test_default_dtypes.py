"""The precision each verb decodes in by default is the one its --help and the docs state
(docs/build/cli.md, "Which engine, which precision"; docs/build/python.md): generate, stream and
serve in float64 on the PyTorch engine, translate and run_with_cache in float32. The README once
said generate ran in float32; the code and `generate --help` say float64, and this pins them."""

from __future__ import annotations

from pathlib import Path

import pytest

import glassformer
from glassformer.cli import build_parser

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
CHAR, ENES = str(ROOT / "models" / "char-lm"), str(ROOT / "models" / "en-es")


def engines(m) -> list[str]:
    """The dtypes of the PyTorch engines the model has built so far."""
    return sorted(dtype for dtype, _device in m.runtime._engines)


def test_generate_and_stream_decode_in_float64_by_default():
    lm = glassformer.load(CHAR)
    lm.generate("To be", max_new_tokens=2)
    assert engines(lm) == ["float64"]
    fresh = glassformer.load(CHAR)
    assert "".join(fresh.stream("To be", max_new_tokens=2))
    assert engines(fresh) == ["float64"]


def test_translate_and_run_with_cache_use_float32_by_default():
    m = glassformer.load(ENES)
    m.translate("Hi.", beam=1)
    assert engines(m) == ["float32"]
    assert glassformer.load(CHAR).run_with_cache(["To be"], names="logits").dtype == "float32"


def test_a_dtype_given_to_load_is_the_one_used():
    lm = glassformer.load(CHAR, dtype="float32")
    lm.generate("To be", max_new_tokens=2)
    assert engines(lm) == ["float32"]


@pytest.mark.parametrize("verb, default", [("generate", "float64"), ("translate", "float32"),
                                           ("serve", "float64")])  # fmt: skip
def test_the_help_states_the_default_the_code_uses(verb, default):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    dtype = next(a for a in sub.choices[verb]._actions if a.dest == "dtype")
    assert f"(default {default})" in dtype.help
