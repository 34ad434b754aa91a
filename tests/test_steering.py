"""Steering (issue 40 point 4): `Model.steer` adds scale·v to the decoder's stream entering a
block, in both engines, under every verb; `--steer` / `--steer-vector` on generate and translate.

The oracles: the reference engine (float64, every row recomputed at each step) against the
PyTorch engine in float64 (its KV cache computes only the new rows), greedy, seeded sampling and
beam search, with and without from_step, to 1e-10; exact invariants (scale 0 changes nothing;
before from_step the steered logits are the unsteered ones, bit for bit; the direction is the
difference of two traced means); and the shipped translator moved towards its contrast pair.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import glassformer  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.decoding import Decoding  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

TOL = 1e-10
DECODINGS = {
    "greedy": Decoding(max_new_tokens=6),
    "sample": Decoding("sample", 6, seed=7, temperature=1.5),
    "beam": Decoding("beam", 5, beam_width=3),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Random char models: a Llama-style decoder (pre-LN RMSNorm, rotary positions, SwiGLU,
    one K/V head shared by both query heads), an encoder-decoder."""
    d = tmp_path_factory.mktemp("steer")
    corpus = d / "c.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 5)
    common = ["--tokenizer", "char", "--corpus", str(corpus), "--std", "0.5", "--seed", "3"]
    llama = ["positions=rotary", "norm=pre", "norm_kind=rmsnorm", "ffn_kind=gated"]
    llama += ["activation=silu", "n_kv_heads=1", "bias=false"]
    sets = [x for v in llama for x in ("--set", v)]
    assert main(["init", str(d / "dec"), "--preset", "tiny", *sets, *common]) == 0
    seq = ["--set", "arch=encoder-decoder"]
    assert main(["init", str(d / "seq"), "--preset", "tiny", *seq, *common]) == 0
    return d


def both(folder):
    ref = glassformer.load(folder, engine="reference")
    fast = glassformer.load(folder, engine="torch", dtype="float64")
    return ref, fast


def path_logits(m, text: str, steering, decoding) -> tuple[list[int], list[np.ndarray]]:
    """The steered decoding's ids and, along them, each step's logits, from one step function
    (the engine's own: the PyTorch one through its KV cache)."""
    rt = m.runtime
    enc_dec = m.cfg.arch == "encoder-decoder"
    ids = rt.encode(text, window=True)
    src, prompt = (ids, rt.bos()) if enc_dec else (None, ids)
    with steering:
        out = rt.decoded(prompt, src, decoding, window=not enc_dec, quiet=True).ids
        step = rt.step(src, prompt_len=len(prompt), window=not enc_dec)
        logits = [step(out[:k]) for k in range(len(prompt), len(out))]
    return out, logits


@pytest.mark.parametrize("strategy", sorted(DECODINGS))
@pytest.mark.parametrize("kind", ["dec", "seq"])
@pytest.mark.parametrize("from_step", [None, 2])
def test_the_engines_agree_on_the_steered_logits(folders, kind, strategy, from_step):
    ref, fast = both(folders / kind)
    steer = ref.steer("the cat|the dog", layer=1, scale=3.0, from_step=from_step)
    how = DECODINGS[strategy]
    ids_r, z_r = path_logits(ref, "the mat", steer, how)
    ids_t, z_t = path_logits(fast, "the mat", steer, how)
    assert ids_r == ids_t
    assert max(np.abs(a - b).max() for a, b in zip(z_r, z_t, strict=True)) < TOL
    with steer:
        assert ref.generate("the mat", decoding=how) == fast.generate("the mat", decoding=how)
    plain = ref.steered("the mat", steer, decoding=how).steps[-1]  # the steering moved it
    assert plain["steered"] and plain["before"] != plain["after"]


@pytest.mark.parametrize("kind", ["dec", "seq"])
def test_before_from_step_the_logits_are_the_unsteered_ones_exactly(folders, kind):
    """With from_step T the first T new tokens are chosen from unsteered logits and every later
    one from steered logits, in both engines (the PyTorch one only sees the new rows: it must
    be told where they sit, or its steps 1.. would be steered from the wrong position)."""
    for m, tol in zip(both(folders / kind), (0.0, 1e-13), strict=True):
        steer = m.steer("the cat|the dog", layer=0, scale=3.0, from_step=2)
        rep = m.steered("the mat", steer, decoding=Decoding(max_new_tokens=5))
        for s in rep.steps:  # the PyTorch engine's fast attention rounds differently: tol
            moved = max(abs(a["p"] - b["p"]) for a, b in zip(s["before"], s["after"], strict=True))
            ids = [t["id"] for t in s["before"]] == [t["id"] for t in s["after"]]
            assert (ids and moved <= tol) == (s["step"] < 2), (m.runtime.engine, s)
            assert s["steered"] == (s["step"] >= 2)


def test_every_path_that_decodes_under_from_step_knows_the_prompt(folders):
    """generate of many texts and record decode one text at a time inside a steering (their
    batched greedy paths do not say where each prompt ends); a batched path that does not say is
    refused in one line, not steered from a guessed position."""
    from glassformer import inference

    ref, fast = both(folders / "dec")
    steer = ref.steer("the cat|the dog", layer=1, scale=3.0, from_step=2)
    with steer:
        want = [ref.generate(t, max_new_tokens=5) for t in ("the mat", "a dog sat on")]
        assert fast.generate(["the mat", "a dog sat on"], max_new_tokens=5) == want
        assert fast.record("the mat", max_new_tokens=5)[0] == want[0]
        model = fast.runtime.torch("float64")
        with pytest.raises(GlassformerError, match="from_step needs to know") as e:
            inference.greedy_prompts(model, [ref.encode("the mat")], 3)
    assert "\n" not in str(e.value)


def test_scale_zero_is_the_unsteered_run_exactly(folders):
    ref, fast = both(folders / "dec")
    run = ref.runtime.reference_run()
    ids = ref.encode("the cat")
    plain = run(ids)
    with ref.steer("the cat|the dog", layer=1, scale=0.0):
        assert np.array_equal(run(ids), plain)
    for m in (ref, fast):
        with m.steer("the cat|the dog", layer=2, scale=0.0):
            assert m.generate("the mat", max_new_tokens=8) == ref.generate(
                "the mat", max_new_tokens=8
            )


def test_a_trace_inside_the_steering_records_the_steered_stream(folders):
    """Every verb inside is steered: the traced stream entering the block is the plain one plus
    scale·v at every position, exactly, and what follows computes on it."""
    m = glassformer.load(folders / "seq", engine="reference")
    steer = m.steer("the cat|the dog", layer=2, scale=-1.5)
    plain = m.trace("the mat", target="the")
    with steer:
        tr = m.trace("the mat", target="the")
    assert np.array_equal(tr["decoder.1.out"], plain["decoder.1.out"] + -1.5 * steer.vector)
    assert np.array_equal(tr["decoder.0.out"], plain["decoder.0.out"])
    assert not np.allclose(tr["logits"], plain["logits"])


def test_the_direction_is_the_difference_of_the_traced_means(folders):
    m = glassformer.load(folders / "seq", engine="reference")
    v = m.steer("the cat|the dog", layer=1).vector
    means = []
    for text in ("the cat", "the dog"):
        ids = m.encode(text)
        with tracing() as tr:  # every step: the oracle is the whole trace's step
            m.runtime.reference_run()((ids, [m.tokenizer.bos_id, *ids]))
        means.append(tr["decoder.0.out"].mean(axis=0))
    assert np.array_equal(v, means[0] - means[1])
    given = m.steer(vector=v.tolist(), layer=1, scale=2.0)
    assert np.array_equal(given.vector, v) and given.name == "decoder.0.out"


# -- the shipped translator, moved towards its pair ----------------------------------------------


@pytest.fixture(scope="module")
def en_es():
    return glassformer.load("models/en-es", engine="reference")


def test_steering_moves_the_translator_towards_its_pair(en_es):
    """'gato|perro' at the stream entering decoder block 1: logit(gato) - logit(perro) where
    the unsteered translation says 'perro' rises with the scale, and at scale 2 the translation
    of 'The dog eats.' names the cat (greedy; beam search keeps the dog); the PyTorch engine's
    batched translation agrees."""
    m, rt = en_es, en_es.runtime
    src = rt.encode("I have a dog.")
    tgt = rt.bos() + rt.encode("Tengo un perro.")
    gato, perro = rt.encode("gato")[0], rt.encode("perro")[0]
    at = tgt.index(perro) - 1  # the position that predicts 'perro'
    gaps = []
    for scale in (0.0, 0.5, 1.0, 2.0):
        with m.steer("gato|perro", layer=1, scale=scale):
            z = rt.reference_run()((src, tgt))[at]
        gaps.append(z[gato] - z[perro])
    assert np.all(np.diff(gaps) > 0.3), gaps
    assert m.generate("The dog eats.") == "El perro come."
    fast = glassformer.load("models/en-es", dtype="float64")
    with m.steer("gato|perro", layer=1, scale=2.0):
        assert m.generate("The dog eats.") == "El gato come."
        beam = m.generate("The dog eats.", strategy="beam", beam_width=4)
    with fast.steer("gato|perro", layer=1, scale=2.0):  # batched, through the KV cache
        assert fast.translate("The dog eats.", beam=1) == "El gato come."
        assert fast.translate("The dog eats.", beam=4) == beam


# -- the Python API's refusals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pair", "layer", "vector", "says"),
    [
        ("cat dog", 0, None, "one '|'"),
        ("a|b|c", 0, None, "one '|'"),
        ("cat| ", 0, None, "second text is empty"),
        ("cat|dog", 3, None, "steer the stream entering block 0 .. 1, or 2"),
        (None, 0, None, "a contrast pair or a vector"),
        ("cat|dog", 0, [1.0, 2.0], "a contrast pair or a vector"),
        (None, 0, [1.0, 2.0], "give a (16,) vector"),
        (None, 0, [np.nan] * 16, "NaN or infinite"),
    ],
)
def test_bad_steering_is_one_line(folders, pair, layer, vector, says):
    m = glassformer.load(folders / "dec", engine="reference")
    with pytest.raises(GlassformerError, match=None) as e:
        m.steer(pair, layer=layer, vector=vector)
    assert says in str(e.value) and "\n" not in str(e.value)


# -- the command line ---------------------------------------------------------------------------


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_steer_prints_the_steered_output_and_reports_each_step(folders, capsys, tmp_path):
    folder = folders / "dec"
    how = ["--max-new-tokens", "6", "--engine", "torch"]
    steer = ["--steer", "the cat|the dog", "--layer", "1", "--scale", "3", "--from-step", "1"]
    files = ["--steer-json", tmp_path / "s.json", "--steer-report", tmp_path / "s.html"]
    code, out, err = run(capsys, "generate", folder, "the mat", *how, *steer, *files)
    assert code == 0, err
    data = json.loads((tmp_path / "s.json").read_text())
    m = glassformer.load(folder, engine="reference")
    want = m.steered(
        "the mat",
        m.steer("the cat|the dog", layer=1, scale=3.0, from_step=1),
        decoding=Decoding(max_new_tokens=6),
    ).to_dict()
    assert out == want["steered"] + "\n"
    assert [s["id"] for s in data["reports"][0]["steps"]] == [s["id"] for s in want["steps"]]
    for got, ref in zip(data["reports"][0]["steps"], want["steps"], strict=True):
        assert abs(got["p_after"] - ref["p_after"]) < 1e-10
    page = (tmp_path / "s.html").read_text()
    assert want["text"] in page and "Without steering" in page and "<script" not in page


def test_translate_steer_vector(folders, capsys, tmp_path):
    m = glassformer.load(folders / "seq", engine="reference")
    v = m.steer("the cat|the dog", layer=1).vector
    np.save(tmp_path / "v.npy", v)
    code, out, err = run(
        capsys,
        "translate",
        folders / "seq",
        "the mat",
        "--beam",
        "1",
        "--dtype",
        "float64",
        "--steer-vector",
        tmp_path / "v.npy",
        "--layer",
        "1",
        "--scale",
        "3",
    )
    assert code == 0, err
    with m.steer(vector=v, layer=1, scale=3.0):
        assert out == m.generate("the mat", max_new_tokens=m.cfg.max_len) + "\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--steer", "cat", "--layer", "0"], "one '|'"),
        (["--steer", "|dog", "--layer", "0"], "first text is empty"),
        (["--steer", "a|b", "--layer", "9"], "--layer 9: the decoder has 2 blocks"),
        (["--steer", "a|b"], "needs --layer"),
        (["--layer", "1"], "add --steer"),
        (["--steer", "a|b", "--steer-vector", "v.npy", "--layer", "0"], "not both"),
        (["--steer-vector", "short.npy", "--layer", "0"], "give a (16,) vector"),
        (["--steer-vector", "nan.npy", "--layer", "0"], "NaN or infinite"),
        (["--steer-vector", "pickled.npy", "--layer", "0"], "pickled"),
        (["--steer-vector", "text.npy", "--layer", "0"], "not a NumPy .npy file"),
        (["--steer-vector", "missing.npy", "--layer", "0"], "cannot read"),
        (["--steer", "a|b", "--layer", "0", "--steer-json", "-"], "not '-'"),
    ],
)
@pytest.mark.parametrize("command", ["generate", "translate"])
def test_bad_steering_flags_are_one_line_exit_2(
    folders, capsys, tmp_path, monkeypatch, command, args, says
):
    monkeypatch.chdir(tmp_path)
    np.save("short.npy", np.zeros(5))
    np.save("nan.npy", np.full(16, np.nan))
    np.save("pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "text.npy").write_text("not an array")
    folder = folders / ("dec" if command == "generate" else "seq")
    code, out, err = run(capsys, command, folder, "the mat", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err, err


# -- the explorer's generate request ------------------------------------------------------------


def test_the_explorer_steers_a_generation_and_refuses_bad_fields(folders):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from test_serve import Client

    from glassformer.serve import Explorer, Registry, serving

    folder = folders / "dec"
    body = {"model": "dec", "text": "the mat", "strategy": "greedy", "max_new_tokens": 5}
    steer = {"steer": "the cat|the dog", "steer_layer": 1, "steer_scale": 3.0}
    m = glassformer.load(folder)
    want = m.steered(
        "the mat",
        m.steer("the cat|the dog", layer=1, scale=3.0),
        decoding=Decoding(max_new_tokens=5),
    ).to_dict()
    with serving(Explorer(Registry([str(folder)]))) as url:
        client = Client(url)
        got = client.post("generate", body | steer)
        assert got["steering"]["steered"] == want["steered"] and "steering" not in client.post(
            "generate", body
        )
        assert got["text"] == want["steered"].removeprefix("the mat")
        for bad, says in (
            ({"steer_layer": 7}, "steer the stream entering block 0 .. 1"),
            ({"steer": "the cat"}, "one '|'"),
            ({"steer": 3}, "'steer' must be a str"),
        ):
            error = client.post("generate", body | steer | bad, expect=400)
            assert says in json.dumps(error, ensure_ascii=False), error


def test_steered_refuses_to_run_inside_a_steering(folders):
    """Inside the `with` block its "before" would be steered too: the report would compare the
    steered run with itself. It says so instead."""
    m = glassformer.load(folders / "dec", engine="reference")
    steer = m.steer("the cat|the dog", layer=0, scale=3.0)
    with steer, pytest.raises(GlassformerError, match="outside any steering or intervention"):
        m.steered("the mat", steer, decoding=Decoding(max_new_tokens=2))
    assert m.steered("the mat", steer, decoding=Decoding(max_new_tokens=2)).steps
