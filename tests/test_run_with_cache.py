"""`Model.run_with_cache` (issue 36, point 5): a batch's steps, stacked and padded.

Oracles: each text's own trace (the reference engine's `Model.trace`, float64: 1e-10; the same
PyTorch engine's trace of that text alone, batch 1 and no padding, for float32 and int8: 1e-5),
over a decoder (models/char-lm; GPT-2 small's shape with random weights, read from ids), an encoder
classifier, an encoder and an encoder-decoder (teacher-forced targets, and BOS alone). Invariants:
a text's rows are the same batched with a longer text or alone (padding holds 0); `names` keeps
the matching steps only, and only they are held while the batch runs (a count of the values kept,
and tracemalloc's peak); the mask is the texts' lengths. Refusals are one line.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import glassformer
from glassformer import activations, preset, weights
from glassformer.errors import GlassformerError
from glassformer.model import Model
from glassformer.tokenizer import WordTokenizer, article_tokenizer
from glassformer.trace import tracing

torch = pytest.importorskip("torch")

WORDS = "to be or not to be, that is the question."
TEXTS = {
    "char": ["To be", "or not to be, that is the question:", "Whether 'tis"],
    "gpt2": [[464, 3290, 318], [50256, 40, 1101, 407, 1266, 11, 257, 13], [0]],
    "clf": ["to be or", "that is the question", "be"],
    "enc": ["not to be", "is", "the question, that is"],
    "s2s": ["Hello World", "World", "Hello"],
}
TARGETS = ["Hola Mundo", "Mundo", "Hola Hola Mundo"]


@pytest.fixture(scope="module")
def models() -> dict[str, Model]:
    wt = WordTokenizer.train([WORDS])
    clf = preset("encoder-classifier").override(
        "d_model=8", "n_heads=2", "d_ff=16", "n_encoder_layers=2", f"vocab_size={wt.vocab_size}",
        "max_len=16",
    )  # fmt: skip
    gpt2 = preset("gpt2-small").override("n_decoder_layers=2")  # its shape, 2 of its 12 layers
    enc, hello = clf.override("n_classes=0"), preset("hello-world")
    return {
        "char": glassformer.load("models/char-lm"),
        "gpt2": Model(gpt2, weights.init(gpt2, seed=0), name="gpt2-small"),
        "clf": Model(clf, weights.init(clf, seed=0), wt, name="clf"),
        "enc": Model(enc, weights.init(enc, seed=1), wt, name="enc"),
        "s2s": Model(hello, weights.init(hello, seed=0), article_tokenizer(), name="hello"),
    }


def own_trace(m: Model, kind: str, i: int, dtype: str | None, target=None):
    """Text i's own trace: the reference engine's (dtype None), else the PyTorch engine's of that
    text alone (batch 1, no padding, no mask given) in `dtype`."""
    text = TEXTS[kind][i]
    ids = text if isinstance(text, list) else None
    if dtype is None:
        if m.cfg.arch == "encoder-decoder":
            return m.trace(text, target=target)
        return m.trace(None, ids=ids) if ids else m.trace(text)
    from glassformer.inference import torch_engine

    engine = torch_engine(m.cfg, m.params, dtype)
    ids = ids or m.encode(text)
    with torch.no_grad(), tracing() as tr:
        if m.cfg.arch == "encoder-decoder":
            tgt = (
                target
                if isinstance(target, list)
                else m.runtime.bos() + m.runtime.encode(target, room=1)
            )
            engine(torch.tensor([tgt]), src_ids=torch.tensor([ids]))
        else:
            engine(torch.tensor([ids]))
    return tr


def assert_equal_to_own_traces(m, kind, cache, dtype, tol, targets=None):
    for i in range(len(TEXTS[kind])):
        tr = own_trace(m, kind, i, dtype, None if targets is None else targets[i])
        for name in cache:
            mine, theirs = cache.unpadded(name, i), tr[name]
            assert mine.shape == theirs.shape, (name, i)
            if tol == 0:
                np.testing.assert_array_equal(mine, theirs, err_msg=f"{name} text {i}")
            else:
                np.testing.assert_allclose(mine, theirs, rtol=tol, atol=tol, err_msg=name)


CASES = [  # (model, engine, dtype, the oracle's dtype: None = the reference trace, tolerance)
    ("char", "torch", "float64", None, 1e-10),
    ("char", "torch", "float32", "float32", 1e-5),
    ("char", "torch", "int8", "int8", 1e-5),
    ("char", "reference", None, None, 0),
    ("gpt2", "torch", "float64", None, 1e-10),
    ("gpt2", "torch", "float32", "float32", 1e-5),
    ("clf", "torch", "float64", None, 1e-10),
    ("clf", "torch", "int8", "int8", 1e-5),
    ("clf", "reference", None, None, 0),
    ("enc", "torch", "float64", None, 1e-10),
    ("enc", "torch", "float32", "float32", 1e-5),
    ("s2s", "torch", "float64", None, 1e-10),
    ("s2s", "torch", "float32", "float32", 1e-5),
    ("s2s", "reference", None, None, 0),
]


@pytest.mark.parametrize("kind, engine, dtype, oracle, tol", CASES)
def test_each_text_s_rows_are_its_own_trace(models, kind, engine, dtype, oracle, tol):
    m = models[kind]
    targets = TARGETS if kind == "s2s" else None
    cache = m.run_with_cache(TEXTS[kind], engine=engine, dtype=dtype, targets=targets)
    assert (cache.engine, cache.dtype) == (engine, dtype or "float64")
    target = None if targets is None else targets[0]
    steps = own_trace(m, kind, 0, dtype, target).names()  # the same engine's, of one text
    extra = [n for n in cache if n not in steps]
    assert not extra, f"steps the text's own trace lacks: {extra[:3]}"
    missing = [n for n in steps if n not in cache]
    assert not missing, missing[:3]  # every step the engine taps
    assert_equal_to_own_traces(m, kind, cache, oracle, tol, targets)


def test_an_encoder_decoder_reads_target_ids_or_bos_alone(models):
    m = models["s2s"]
    ids = [m.runtime.bos() + m.runtime.encode(t, room=1) for t in TARGETS]
    by_ids = m.run_with_cache(TEXTS["s2s"], targets=ids, dtype="float64")
    by_text = m.run_with_cache(TEXTS["s2s"], targets=TARGETS, dtype="float64")
    assert by_ids.target_ids == ids and by_ids.target_tokens[2] == ["SOS", "hola", "hola", "mundo"]
    assert "3 texts padded to 2 tokens (2, 1, 1 real), targets to 4" in repr(by_ids)
    for name in by_ids:
        np.testing.assert_array_equal(by_ids[name], by_text[name])
    alone = m.run_with_cache(TEXTS["s2s"], dtype="float64")  # default: BOS alone
    assert alone.target_ids == [m.runtime.bos()] * 3 and alone.target_mask.shape == (3, 1)
    assert_equal_to_own_traces(m, "s2s", alone, None, 1e-10, [m.runtime.bos()] * 3)


@pytest.mark.parametrize("kind", ["char", "gpt2", "clf", "s2s"])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_a_text_s_rows_do_not_depend_on_what_it_is_batched_with(models, kind, dtype, tol):
    m, texts = models[kind], TEXTS[kind]
    short = min(range(len(texts)), key=lambda i: len(str(texts[i])))
    longest = max(range(len(texts)), key=lambda i: len(str(texts[i])))
    pick = (lambda i: [TARGETS[i]]) if kind == "s2s" else (lambda i: None)
    alone = m.run_with_cache([texts[short]], dtype=dtype, targets=pick(short))
    pair = [texts[longest], texts[short]]
    both = m.run_with_cache(
        pair, dtype=dtype, targets=None if kind != "s2s" else pick(longest) + pick(short)
    )
    for name in alone:
        a, b = alone[name][0], both[name][1]
        own = tuple(slice(0, n) for n in a.shape)
        np.testing.assert_allclose(b[own], a, rtol=tol, atol=tol, err_msg=name)
        rest = b.copy()
        rest[own] = 0
        assert not rest.any(), f"{name}: padding holds values"


def test_the_mask_ids_and_tokens_are_the_texts(models):
    m = models["char"]
    cache = m.run_with_cache(TEXTS["char"])
    lengths = [len(m.encode(t)) for t in TEXTS["char"]]
    assert cache.mask.dtype == bool and cache.mask.shape == (3, max(lengths))
    assert cache.mask.sum(1).tolist() == lengths
    assert all(cache.mask[i, : lengths[i]].all() for i in range(3))  # True: a real token
    assert cache.ids == [m.encode(t) for t in TEXTS["char"]]
    assert cache.tokens == [m.tokens(t) for t in TEXTS["char"]]
    assert cache.target_mask is None and list(cache.masks) == ["decoder"]
    assert cache["logits"].shape == (3, max(lengths), m.cfg.vocab_size)


def test_names_keep_the_matching_steps_only(models):
    m = models["char"]
    full = m.run_with_cache(TEXTS["char"], dtype="float64")
    globs = ["decoder.0.*.A", "logits", "decoder.1.ffn.*"]
    some = m.run_with_cache(TEXTS["char"], names=globs, dtype="float64")
    import fnmatch

    assert some.names == [n for n in full if any(fnmatch.fnmatchcase(n, g) for g in globs)]
    assert len(some) == 4 + 1 + 2 and "logits" in some and "decoder.0.out" not in some
    for name in some:
        np.testing.assert_array_equal(some[name], full[name])
    heads = some["decoder.0.*.A"]  # a glob: the matching steps, as a dict
    assert list(heads) == [f"decoder.0.self_attn.head{h}.A" for h in range(4)]
    assert dict(some.items()).keys() == set(some.names)
    assert m.run_with_cache(TEXTS["char"], names="logits").names == ["logits"]


def test_only_the_named_steps_are_held_while_the_batch_runs(models, monkeypatch):
    """The intervention keeps a value only for a matching tap (a count), and the peak of what
    NumPy and Python hold is the cache's size, not the trace of every text (tracemalloc)."""
    m = models["char"]
    texts = [("To be, or not to be, that is the question " * 2)[k : k + 60] for k in range(24)]
    kept = []
    real = activations._keep
    monkeypatch.setattr(activations, "_keep", lambda seen, x: (kept.append(x), real(seen, x))[1])
    m.run_with_cache(texts[:1], names=["decoder.0.out"])  # the engine made, warm
    kept.clear()
    tracemalloc.start()
    try:
        small = m.run_with_cache(texts, names=["decoder.0.out"], batch_size=8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert small.names == ["decoder.0.out"] and len(kept) == 3  # 3 batches: one value each
    assert peak < small.nbytes + 2**20, (peak, small.nbytes)
    kept.clear()
    full = m.run_with_cache(texts, batch_size=8)
    assert len(kept) == 3 * len(full) and full.nbytes > 50 * small.nbytes


def test_the_cache_is_a_mapping_with_a_one_screen_repr(models):
    m = models["gpt2"]
    cache = m.run_with_cache(TEXTS["gpt2"])
    text = repr(cache)
    assert len(text) < 2000 and "\n" not in text
    assert "3 texts padded to 8 tokens (3, 8, 1 real)" in text and "torch float32" in text
    assert f"{len(cache)} steps" in text and "logits (3, 8, 50257)" in text
    assert list(cache) == cache.names and len(cache) == len(cache.names) > 100
    assert cache.tokens[0] == ["#464", "#3290", "#318"]  # a preset without a tokenizer
    np.testing.assert_array_equal(cache.unpadded("decoder.0.self_attn.head3.A", 2), [[1.0]])
    with pytest.raises(KeyError, match="did you mean"):
        cache["decoder.0.self_attn.head3"]


def test_the_method_documents_every_parameter():
    import inspect

    doc = Model.run_with_cache.__doc__
    for name in inspect.signature(Model.run_with_cache).parameters:
        assert name == "self" or f"\n        {name} : " in doc, name


REFUSALS = [  # (model, arguments, the one line's words)
    ("char", dict(texts=[]), "texts=[]: give at least one text"),
    ("char", dict(texts=[["a"]]), "texts"),
    ("char", dict(texts=[[1, 99999]]), "id 99999 is out of range"),
    ("char", dict(texts=["x" * 65]), "texts[0] has 65 tokens but the model takes at most 64"),
    ("char", dict(names=[]), "give step names or globs"),
    ("char", dict(names=["decoder.9.*"]), "'decoder.9.*' matches no step of models/char-lm"),
    ("char", dict(names="decoder.0.ffn"), "did you mean 'decoder.0.ffn.*'?"),
    ("char", dict(names="*.norm1.mean"), "the reference engine records it: engine='reference'"),
    ("char", dict(names="nothing"), "steps are named like 'decoder.X'"),
    ("char", dict(engine="numpy"), "engine='numpy': must be one of 'auto', 'reference', 'torch'"),
    ("char", dict(dtype="float16"), "dtype='float16': must be one of"),
    ("char", dict(engine="reference", dtype="int8"), "the reference engine computes in float64"),
    ("char", dict(targets=["a"] * 3), "only an encoder-decoder's decoder reads targets"),
    ("s2s", dict(targets=["Hola"]), "targets: 1 targets for 3 texts; give one per text"),
    ("clf", dict(names="encoder.0.self_attn.head0.mask"), "matches no step"),
]


@pytest.mark.parametrize("kind, args, says", REFUSALS, ids=[r[2][:30] for r in REFUSALS])
def test_bad_arguments_are_refused_in_one_line(models, kind, args, says):
    m = models[kind]
    args = {"texts": TEXTS[kind], **args}
    with pytest.raises(GlassformerError) as e:
        m.run_with_cache(args.pop("texts"), **args)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_model_loaded_on_the_reference_engine_runs_there(models):
    m = models["char"]
    ref = Model(m.cfg, m.params, m.tokenizer, name="ref", engine="reference")
    cache = ref.run_with_cache(TEXTS["char"][:1], names="logits")
    assert cache.engine == "reference" and cache.dtype == "float64"
    with pytest.raises(GlassformerError, match="loaded with engine='reference'"):
        ref.run_with_cache(TEXTS["char"], engine="torch")
