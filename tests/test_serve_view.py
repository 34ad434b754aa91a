"""The explorer's float32 view of a real-size decoder (issue 29 point 2; encoders and
encoder-decoders: tests/test_serve_view_encoders.py), and what it rests on: a trace that keeps
only some steps (`tracing(keep=...)`) and makes the others when read.

Oracles: the same engine traced in full (a deferred step's values are exactly those), the float64
reference engine's trace (every number of a view within float32 rounding of it; the exports and
patching are the reference's own numbers, equal to those of a server without the view),
transformers' own Llama (the badge of a Llama folder), and invariants (a cache's bytes count what
its runs hold once they grew).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")

from glassformer import load as load_model  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import TraceError  # noqa: E402
from glassformer.model import Model  # noqa: E402
from glassformer.serve import Explorer, Registry  # noqa: E402
from glassformer.serve import runs as serve_runs  # noqa: E402
from glassformer.serve.fidelity import FLOAT32_REL  # noqa: E402
from glassformer.tokenizer import CharTokenizer  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.trace import Deferred, tracing  # noqa: E402

TEXT = "the cat sat on the mat"
MODERN = dict(positions="rotary", norm_kind="rmsnorm", ffn_kind="gated", activation="silu",
              bias=False, n_kv_heads=1)  # fmt: skip


def checkpoint(folder, **more):
    tok = CharTokenizer.train(["abcdefghijklmnopqrstuvwxyz ."])
    cfg = Config(arch="decoder", vocab_size=tok.vocab_size, d_model=32, n_heads=4,
                 n_decoder_layers=2, d_ff=64, max_len=48, **more)  # fmt: skip
    weights.save(folder, cfg, weights.init(cfg, seed=1, std=0.3), tokenizer=tok)
    return folder


@pytest.fixture(scope="module", params=["classic", "modern"])
def folder(request, tmp_path_factory):
    more = MODERN if request.param == "modern" else {}
    return checkpoint(tmp_path_factory.mktemp(request.param) / "m", **more)


def explorers(folder, **kw):
    """The same folder served with the float32 view and with the reference (as before it)."""
    out = {}
    for view in ("float32", "reference"):
        ex = Explorer(Registry([folder], walkthroughs=False), view=view, **kw)
        out[view] = (ex, next(iter(ex.registry.entries)))
    return out


# -- the trace that keeps some steps ------------------------------------------------------------


@pytest.mark.parametrize("engine", ["reference", "torch"])
def test_a_deferred_step_reads_as_the_full_trace(engine, folder):
    """keep: only the attention maps stored; every other step by name and shape, and read, the
    values of the same engine traced in full (exactly: the same arithmetic)."""
    m = load_model(folder)
    ids = m.encode(TEXT)
    if engine == "torch":
        model = from_params(m.cfg, m.params, dtype=torch.float64)

        def forward():
            with torch.no_grad():
                model(torch.tensor([ids]))
    else:
        from glassformer import reference as R

        def forward():
            R.forward(m.params, m.cfg, ids)

    def full():
        with tracing() as tr:
            forward()
        return tr

    with tracing(keep=lambda n: n.endswith(".A"), fill=full) as view:
        forward()
    whole = full()
    assert view.names() == whole.names()
    deferred = [s for s in view.steps if isinstance(s.derived, Deferred)]
    kept = [s for s in view.steps if s not in deferred]  # stored, or a recipe (derive=)
    assert any(s.name.endswith(".A") for s in kept)
    assert all(s.name.endswith(".A") for s in kept if s.data is not None)
    assert len(deferred) > len(kept)
    before = view.nbytes
    assert view.full is None
    for s in view.steps:
        assert s.shape == whole.step(s.name).shape
        np.testing.assert_array_equal(s.values, whole[s.name], err_msg=s.name)
    assert view.full is not None and view.nbytes > before  # the full trace is counted once made


def test_a_deferred_step_of_a_float32_view_is_float32(folder):
    """A view keeps float32 (half the memory): a deferred step, read from a float64 full trace,
    comes in the view's dtype, as its kept steps do, and equals the full trace's values cast."""
    from glassformer import reference as R

    m = load_model(folder)
    ids = m.encode(TEXT)

    def full():
        with tracing() as tr:
            R.forward(m.params, m.cfg, ids)
        return tr

    with tracing(dtype=np.float32, keep=lambda n: n.endswith(".scores"), fill=full) as view:
        R.forward(m.params, m.cfg, ids)
    whole = full()
    kept = next(s for s in view.steps if s.data is not None and s.name.endswith(".scores"))
    deferred = [s for s in view.steps if isinstance(s.derived, Deferred)]
    assert kept.values.dtype == np.float32 and len(deferred) > 20
    for s in deferred:
        v = s.values
        assert v.dtype == (bool if whole[s.name].dtype == bool else np.float32), s.name
        np.testing.assert_array_equal(v, whole[s.name].astype(v.dtype), err_msg=s.name)


def test_the_largest_difference_and_where_it_is():
    """fidelity._largest on differences made by hand: 0.5 at a, 2 at b, 1 at c; d of another
    shape is not compared; equal infinities agree, an infinity against a number differs by inf."""
    from glassformer.serve.fidelity import _largest

    z = np.zeros((2, 2))
    one = lambda i, j, x: np.where(np.arange(4).reshape(2, 2) == 2 * i + j, x, 0.0)  # noqa: E731
    pairs = [("a", one(0, 1, 0.5), z), ("b", z, one(1, 1, -2.0)), ("c", one(1, 0, 1.0), z)]
    pairs.append(("d", np.ones(3), z))
    assert _largest(pairs) == {"max_abs_diff": 2.0, "where": "b", "compared": 3}
    assert _largest(pairs[::-1]) == {"max_abs_diff": 2.0, "where": "b", "compared": 3}
    inf = one(0, 0, np.inf)
    assert _largest([("a", inf, inf), ("b", z, one(0, 0, 1e-3))])["where"] == "b"
    assert _largest([("a", inf, z), ("b", z, one(0, 0, 1e-3))]) == {
        "max_abs_diff": np.inf, "where": "a", "compared": 2,
    }  # fmt: skip
    assert _largest([]) == {"max_abs_diff": 0.0, "where": None, "compared": 0}


def test_a_deferred_step_without_fill_or_with_a_wrong_one_is_refused(folder):
    from glassformer import reference as R

    m = load_model(folder)
    ids = m.encode(TEXT)
    with tracing(keep=lambda n: n == "logits") as tr:
        R.forward(m.params, m.cfg, ids)
    name = next(s.name for s in tr.steps if s.data is None and s.derived is not None)
    with pytest.raises(TraceError, match="recorded by name only"):
        tr[name]

    def other():  # another input: the shapes differ
        with tracing() as t:
            R.forward(m.params, m.cfg, ids[:-1])
        return t

    tr.fill = other
    with pytest.raises(TraceError, match="does not match"):
        tr[name]


# -- the explorer's view --------------------------------------------------------------------------


def test_the_view_shows_the_references_numbers_within_float32(folder):
    """Every attention map and the next tokens of a float32 view are the reference's within
    float32 rounding; a step card's deferred values too; the page is told which engine."""
    views = explorers(folder)
    (ex, mid), (ref_ex, _) = views["float32"], views["reference"]
    body = {"model": mid, "text": TEXT}
    s, r = ex.summary(body), ref_ex.summary(body)
    assert s["engine"] == serve_runs.FLOAT32_VIEW and r["engine"] == serve_runs.REFERENCE
    assert [a["name"] for a in s["attention"]] == [a["name"] for a in r["attention"]]
    assert [t["id"] for t in s["output"]["top"]] == [t["id"] for t in r["output"]["top"]]
    _, run = ex.run(body)
    trace = load_model(folder).trace(TEXT)
    assert run.trace.nbytes < trace.nbytes / 4  # what it stores until a step is read
    for a in s["attention"]:
        np.testing.assert_allclose(run.trace[a["name"]], trace[a["name"]], atol=1e-5)
    card = next(n for n in run.trace.names() if n.endswith("ffn.out"))
    assert run.trace.step(card).data is None
    got = ex.step(body | {"name": card})
    assert got["name"] == card and card in got["html"]
    np.testing.assert_allclose(run.trace[card], trace[card], rtol=1e-4, atol=1e-5)


def test_the_badge_compares_what_is_shown_with_the_float64_reference(folder):
    """The badge's numbers are those computed here: over every step the view shows and a float64
    reference trace made here records with the same shape, the largest max|shown - reference|
    and the largest of that over the step's max|reference|, each with its step (exactly: the
    same float64 arithmetic on the same arrays; the two largest are at different steps here, so
    that a badge giving one for the other is seen)."""
    (ex, mid) = explorers(folder)["float32"]
    body = {"model": mid, "text": TEXT}
    f = ex.fidelity(body)["torch"]
    _, run = ex.run(body)
    assert run.reference is not None and run.trace.full is not None
    ref = load_model(folder).trace(TEXT)
    diffs = {}  # step: (max abs, max rel)
    for s in run.trace.steps:
        if s.name in ref and s.shape == ref.step(s.name).shape:
            shown, want = np.asarray(s.values, np.float64), np.asarray(ref[s.name], np.float64)
            d = float(np.abs(shown - want).max())
            diffs[s.name] = (d, d / float(np.abs(want).max()))
    where = max(diffs, key=lambda n: diffs[n][0])
    where_rel = max(diffs, key=lambda n: diffs[n][1])
    assert where != where_rel and len(diffs) > 80
    assert f == {
        "available": True, "engine": "PyTorch float32 (shown) vs NumPy float64",
        "max_abs_diff": diffs[where][0], "where": where,
        "max_rel_diff": diffs[where_rel][1], "where_rel": where_rel,
        "compared": len(diffs), "tolerance": FLOAT32_REL,
    }  # fmt: skip
    assert 1e-7 < f["max_rel_diff"] <= FLOAT32_REL  # float32: not exact, and close


def test_exports_and_patching_are_the_references_own_numbers(folder):
    """The trace export and the report of a view hold the float64 reference (the same bytes
    as a server without the view); a patch takes the second prompt's float64 values."""
    views = explorers(folder)
    (ex, mid), (ref_ex, _) = views["float32"], views["reference"]
    body = {"model": mid, "text": TEXT}
    assert "".join(ex.trace_json(body)) == "".join(ref_ex.trace_json(body))
    assert ex.report(body) == ref_ex.report(body)
    patch = body | {"heads": [{"stack": "decoder", "kind": "self_attn", "layer": 1, "head": 0}],
                    "how": "patch", "patch_text": "the dog sat on the log"}  # fmt: skip
    assert ex.intervene(patch) == ref_ex.intervene(patch)


def test_which_runs_are_views(folder, tmp_path):
    """auto: a small decoder stays with the reference; --view float32 makes its runs views, as
    an encoder-decoder's (tests/test_serve_view_encoders.py); a walkthrough is its own trace."""
    m = load_model(folder)
    assert serve_runs.view_of(m, "auto") == "reference"
    assert serve_runs.view_of(m, "float32") == "float32"
    assert serve_runs.view_of(m, "reference") == "reference"
    big = Model(m.cfg, m.params, m.tokenizer)
    big.runtime._made["n_params"] = serve_runs.VIEW_PARAMS  # (counted once per model, then cached)
    assert serve_runs.view_of(big, "auto") == "float32"
    cfg = Config(arch="encoder-decoder", vocab_size=m.cfg.vocab_size, d_model=16, n_heads=2,
                 n_encoder_layers=1, n_decoder_layers=1, max_len=16)  # fmt: skip
    encdec = Model(cfg, weights.init(cfg, seed=0), m.tokenizer)
    assert serve_runs.view_of(encdec, "float32") == "float32"
    walkthrough = Explorer(Registry([])).registry.load("hello-world")
    assert serve_runs.view_of(walkthrough, "float32") == "reference"
    with pytest.raises(ValueError, match="view is one of"):
        Explorer(Registry([folder], walkthroughs=False), view="float16")


def test_the_cache_counts_what_a_view_grew_to(folder):
    """A view's run grows when read (its full trace, its reference): the cache counts it on the
    next request and evicts older runs to stay within its bound."""
    (ex, mid) = explorers(folder)["float32"]
    body = {"model": mid, "text": TEXT}
    ex.summary(body)
    small = ex.cache.bytes()
    ex.fidelity(body)  # makes the full trace and the reference
    ex.summary(body)  # a hit: measured again
    _, run = ex.run(body)
    grown = run.trace.nbytes + run.reference.nbytes
    assert ex.cache.bytes() == grown > 2 * small
    ex.cache.max_bytes = grown + small // 2  # room for the grown run and a small one
    ex.summary({"model": mid, "text": "a dog"})
    ex.fidelity({"model": mid, "text": "a dog"})
    ex.summary({"model": mid, "text": "a dog"})  # grown too: the older run goes
    assert len(ex.cache) == 1 and ex.cache.bytes() <= ex.cache.max_bytes


def test_a_llama_folders_badge_is_transformers_own(tmp_path):
    """A Llama folder (made by transformers) is compared with LlamaForCausalLM itself, on the
    float64 reference's logits, also when the page shows the float32 view."""
    pytest.importorskip("transformers")
    from test_hf_llama import build

    _, path, _ = build("llama-gqa2", tmp_path / "llama")
    badges = {}
    for view in ("reference", "float32"):
        ex = Explorer(Registry([path], walkthroughs=False), view=view)
        mid = next(iter(ex.registry.entries))
        badges[view] = hf = ex.fidelity({"model": mid, "text": "Hello world"})["hf"]
        assert hf["available"] and hf["engine"] == "transformers LlamaForCausalLM", hf
    assert badges["reference"]["max_abs_diff"] < 1e-5  # (its rotary angles are float32)
    assert badges["float32"] == badges["reference"]  # the reference's logits, not the view's


def test_an_output_layer_wider_than_the_vocabulary_has_pieces_for_every_id(folder):
    """Qwen2 pads its output layer past the tokenizer: an id there reads `#id` (a random model of
    real size predicts one), an id past the output layer is still refused."""
    from glassformer.errors import TokenizerError

    m = load_model(folder)
    n = len(m.tokenizer.vocab)
    wide = Model(m.cfg.override(f"vocab_size={n + 5}"), weights.init(m.cfg.override(
        f"vocab_size={n + 5}"), seed=0), m.tokenizer)  # fmt: skip
    assert wide.runtime.pieces([0, n, n + 4]) == [m.tokenizer.vocab[0], f"#{n}", f"#{n + 4}"]
    with pytest.raises(TokenizerError, match="out of range"):
        wide.runtime.pieces([n + 5])
    with pytest.raises(TokenizerError, match="out of range"):
        m.runtime.pieces([n])


def test_the_step_list_is_made_once_per_layout(folder, monkeypatch):
    """Two texts of one length share their step list (made once: names, shapes, equations);
    another length gets its own, with its own shapes; each summary keeps its own tokens."""
    from glassformer.serve import api

    made, tree = [], api._tree
    monkeypatch.setattr(api, "_tree", lambda *a: made.append(1) or tree(*a))
    (ex, mid) = explorers(folder)["reference"]
    a = ex.summary({"model": mid, "text": "the cat"})
    n = len(made)
    b = ex.summary({"model": mid, "text": "the dog"})
    assert len(made) == n and a["steps"] == b["steps"] and a["tokens"] != b["tokens"]
    c = ex.summary({"model": mid, "text": "the cats"})
    assert len(made) > n and c["steps"] != a["steps"]
    assert c["attention"][0]["shape"] == [8, 8] and a["attention"][0]["shape"] == [7, 7]
