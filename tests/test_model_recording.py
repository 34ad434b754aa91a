"""`Model.record` and `Model.alignments`, the Python API of `generate --record` and `translate
--alignments`: their records equal the reference engine's trace of the same tokens (the oracle
helpers of tests/test_recording.py), they are the JSON lines the commands write (less "place"),
the outputs are `generate`'s / `translations`'s, and a bad argument is one `GlassformerError`
line, the command line's where it refuses the same mistake."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import require

try:
    import torch  # noqa: F401
except ImportError:
    torch = None
require(torch is not None, "recording reads the PyTorch engine: pip install torch")

from test_recording import (  # noqa: E402
    SENTENCES,
    TOL,
    _check_alignment,
    _check_generation,
    _mean_of,
)

from glassformer import load  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.cli.flags import said  # noqa: E402
from glassformer.decoding import Decoding  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402

STEPS = ["decoder.*.self_attn.head*.A", "decoder.1.out", "decoder.output", "logits"]


@pytest.fixture(scope="module")
def char64():
    return load("models/char-lm", dtype="float64", on_note=lambda _: None)


@pytest.fixture(scope="module")
def en_es():
    return load("models/en-es", on_note=lambda _: None)


def _values(rec: dict) -> dict:
    """A record's per-token values (its dict) as `_check_generation` takes them."""
    values = {k: [np.asarray(x) for x in v] for k, v in rec["steps"].items()}
    values["top_k"] = [np.array(x["ids"]) for x in rec["top_k"]]
    values["top_logp"] = [np.array(x["logprobs"]) for x in rec["top_k"]]
    return values


# -- Model.record --------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_record_equals_the_reference_trace_and_generate(char64, strategy):
    m = char64
    texts = ["The cat ", "", "Once upon a time"]
    given = {"sample": dict(seed=3, top_k=5), "beam": dict(beam_width=3)}.get(strategy, {})
    how = Decoding.settle(strategy, 6, **given)
    got = m.record(texts, steps=STEPS, top_tokens=3, decoding=how, batch_size=2)
    assert [t for t, _ in got] == m.generate(texts, decoding=how, batch_size=2)
    assert got[1] == ("", None)
    names = {f"decoder.{la}.self_attn.head{h}.A" for la in range(4) for h in range(4)}
    for text, (_, rec) in zip(texts, got, strict=True):
        if rec is None:
            continue
        ids = m.runtime.encode(text, window=True)
        assert rec.input == m.runtime.pieces(ids) and len(rec.ids) == 6
        assert rec.tokens == m.runtime.pieces(rec.ids)
        assert set(rec.steps) == names | {"decoder.1.out", "decoder.output", "logits"}
        _check_generation(m, ids, rec.ids, _values(rec.to_dict()), 3, "float64")
    # one comma-separated string names the same steps; one text gives one (output, record)
    # (one at a time, not in a left-padded batch: the same within float64 rounding)
    text, rec = m.record(texts[0], steps=",".join(STEPS), top_tokens=3, decoding=how)
    assert text == got[0][0] and rec.ids == got[0][1].ids
    assert rec.steps.keys() == got[0][1].steps.keys()
    for name, rows in rec.steps.items():
        for a, b in zip(rows, got[0][1].steps[name], strict=True):
            assert np.abs(np.array(a) - np.array(b)).max() < 1e-12, name


def test_record_of_an_encoder_decoder_reads_its_cross_attention(en_es):
    m = load("models/en-es", dtype="float64", on_note=lambda _: None)
    got = m.record(SENTENCES[:2], steps="decoder.0.*.head2.A,decoder.2.cross_attn.head0.A")
    for s, (text, rec) in zip(SENTENCES[:2], got, strict=True):
        assert list(rec.steps) == [
            "decoder.0.self_attn.head2.A",
            "decoder.0.cross_attn.head2.A",
            "decoder.2.cross_attn.head0.A",
        ]
        assert rec.tokens[-1] == "</s>" and text == m.generate(s)
        values = _values(rec.to_dict())
        _check_generation(m, m.tokenizer.encode(s), rec.ids, values, 5, "float64", enc_dec=True)


def test_record_is_what_generate_record_writes(char64, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("The cat \n\nI\n", encoding="utf-8")
    out = tmp_path / "rec.jsonl"
    argv = ["generate", "models/char-lm", "--input", str(src), "--max-new-tokens", "5"]
    steps = "decoder.3.self_attn.head0.A,decoder.2.out"
    argv += ["--record", str(out), "--record-steps", steps, "--record-top-k", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    texts = src.read_text(encoding="utf-8").splitlines()
    places = [f"{src}, line {n}" for n in (1, 2, 3)]
    got = char64.record(texts, steps=steps, top_tokens=2, max_new_tokens=5, places=places)
    assert printed == [t for t, _ in got]
    want = [
        {"place": p, **r.to_dict()} for p, (_, r) in zip(places, got, strict=True) if r is not None
    ]
    assert lines == want
    # and not only the same code twice: each line against the reference engine's trace
    prompts = [t for t in texts if t]
    for text, line in zip(prompts, lines, strict=True):
        ids = char64.runtime.encode(text, window=True)
        assert line["input"] == char64.runtime.pieces(ids)
        _check_generation(char64, ids, line["ids"], _values(line), 2, "float64")
    assert list(lines[0]["steps"]) == ["decoder.2.out", "decoder.3.self_attn.head0.A"]
    # the command's default top-k is the method's
    assert main([*argv[:6], "--record", str(out), "--overwrite"]) == 0
    capsys.readouterr()
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first["steps"] == {} and len(first["top_k"][0]["ids"]) == 5


# -- Model.alignments ----------------------------------------------------------------------------


@pytest.mark.parametrize("beam", [1, 4])
def test_alignments_equal_the_reference_trace_of_the_translation(en_es, beam):
    m = en_es
    layers, heads = ([0, 2], "1,3") if beam == 4 else (None, None)
    pairs = (
        [(0, 1), (0, 3), (2, 1), (2, 3)]
        if beam == 4
        else [(a, h) for a in range(3) for h in range(4)]
    )
    got = list(m.alignments(SENTENCES, layers=layers, heads=heads, beam=beam, dtype="float64"))
    assert [t for t, _ in got] == list(
        m.runtime.translations(SENTENCES, beam=beam, dtype="float64")
    )
    asymmetric = []
    for s, (text, rec) in zip(SENTENCES, got, strict=True):
        ids = m.tokenizer.encode(text)
        assert rec["target"] == m.runtime.pieces(ids) and rec["source"] == m.runtime.pieces(
            m.tokenizer.encode(s)
        )
        named = [f"decoder.{a}.cross_attn.head{h}.A" for a, h in pairs]
        assert rec["heads"] == (named if beam == 4 else "all")
        want = _mean_of(m.trace(s, target=m.runtime.bos() + ids), pairs, len(ids))
        A = np.array(rec["attention"])
        assert A.shape == want.shape and np.abs(A - want).max() < TOL["float64"]
        asymmetric.append(_check_alignment(want, rec))
    assert any(asymmetric)


def test_alignments_with_n_best_record_the_best_translation(en_es):
    m = en_es
    got = list(m.alignments(SENTENCES[:2], layers=1, beam=4, n_best=2, dtype="float64"))
    plain = list(m.runtime.translations(SENTENCES[:2], beam=4, n_best=2, dtype="float64"))
    assert [[c.text for c in cands] for cands, _ in got] == [[c.text for c in p] for p in plain]
    for s, (cands, rec) in zip(SENTENCES[:2], got, strict=True):
        ids = m.tokenizer.encode(cands[0].text)
        want = _mean_of(
            m.trace(s, target=m.runtime.bos() + ids), [(1, h) for h in range(4)], len(ids)
        )
        assert np.abs(np.array(rec["attention"]) - want).max() < TOL["float64"]
        _check_alignment(want, rec)


def test_alignments_are_what_translate_alignments_writes(en_es, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("I like cats.\n\nWhere is the station?\n", encoding="utf-8")
    out = tmp_path / "al.jsonl"
    argv = ["translate", "models/en-es", "Thank you.", "--input", str(src), "--beam", "2"]
    argv += ["--alignments", str(out), "--align-layers", "2", "--align-heads", "0,3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    sentences = ["Thank you.", "I like cats.", "Where is the station?"]
    places = ["sentence 1", f"{src}, line 1", f"{src}, line 3"]
    got = list(en_es.alignments(sentences, layers="2", heads=[0, 3], beam=2, places=places))
    assert printed == [got[0][0], got[1][0], "", got[2][0]]
    assert lines == [{"place": p, **r} for p, (_, r) in zip(places, got, strict=True)]
    assert lines[0]["heads"] == ["decoder.2.cross_attn.head0.A", "decoder.2.cross_attn.head3.A"]
    # and not only the same code twice: each line against the reference engine's trace of its
    # translation (float32 engine, float64 trace)
    asymmetric = []
    for s, text, line in zip(sentences, [x for x in printed if x], lines, strict=True):
        ids = en_es.tokenizer.encode(text)
        want = _mean_of(
            en_es.trace(s, target=en_es.runtime.bos() + ids), [(2, 0), (2, 3)], len(ids)
        )
        assert np.abs(np.array(line["attention"]) - want).max() < TOL["float32"]
        assert line["target"] == en_es.runtime.pieces(ids)
        asymmetric.append(_check_alignment(want, line))
    assert any(asymmetric)


# -- bad arguments: one GlassformerError line naming the parameter as Python spells it ----------

BAD_RECORD = {
    "unknown step": (dict(steps="decoder.9.out"), "steps: 'decoder.9.out' names no step"),
    "unknown step in a list": (dict(steps=["logits", "decoder.0.cross_attn.head0.A"]), "names no"),
    "empty string": (dict(steps=""), "steps is empty"),
    "steps not names": (dict(steps=3), "steps=3: must be a str or a list of str"),
    "negative top": (dict(top_tokens=-1), "top_tokens=-1: must be an integer >= 0"),
    "top not a number": (dict(top_tokens="5"), "top_tokens='5': must be an integer"),
    "batch of 0": (dict(batch_size=0), "batch_size=0: must be at least 1"),
    "a sampling option and beam": (dict(temperature=0.5, beam_width=2), "choose one strategy"),
}


@pytest.mark.parametrize("case", list(BAD_RECORD))
def test_bad_record_arguments_are_one_line(char64, case):
    kwargs, says = BAD_RECORD[case]
    with pytest.raises(GlassformerError) as e:
        char64.record(["The cat "], **kwargs)
    assert says in str(e.value) and "\n" not in str(e.value) and "--" not in str(e.value)


BAD_ALIGN = {
    "unknown layer": (dict(layers="0,7"), "layers: '7' is not one of"),
    "unknown head as a number": (dict(heads=[4]), "heads: 4 is not one of"),
    "a negative head": (dict(heads=[-1]), "heads: -1 is not one of"),
    "a bool": (dict(layers=[True]), "layers=[True]: must be a list of integers"),
    "no heads": (dict(heads=[]), "not an empty list"),
    "heads not numbers": (dict(heads=1.5), "heads=1.5: must be a list of integers"),
    "n-best over the beam": (dict(beam=2, n_best=3), "n_best=3 is more than the beam width 2"),
}


@pytest.mark.parametrize("case", list(BAD_ALIGN))
def test_bad_alignment_arguments_are_one_line_before_any_work(en_es, case):
    kwargs, says = BAD_ALIGN[case]
    with pytest.raises(GlassformerError) as e:
        en_es.alignments(["Hello."], **kwargs)  # raised at the call, not at the first next()
    assert says in str(e.value) and "\n" not in str(e.value) and "--" not in str(e.value)


def test_the_methods_refuse_models_they_cannot_read(char64):
    with pytest.raises(GlassformerError, match="need an encoder-decoder model"):
        char64.alignments(["hi"])
    ref = load("models/char-lm", engine="reference")
    with pytest.raises(GlassformerError, match="drop engine='reference'"):
        ref.record("hi")


@pytest.mark.parametrize(
    "argv, kwargs",
    [
        (["--align-heads", "0,4"], dict(heads="0,4")),
        (["--align-layers", "x"], dict(layers="x")),
    ],
)
def test_the_command_line_says_what_the_method_says(en_es, argv, kwargs, tmp_path, capsys):
    out = tmp_path / "al.jsonl"
    assert main(["translate", "models/en-es", "Hello.", "--alignments", str(out), *argv]) == 2
    err = capsys.readouterr().err
    with pytest.raises(GlassformerError) as e:
        en_es.alignments(["Hello."], **kwargs)
    assert err == f"glassformer: error: {said(e.value)}\n" and not out.exists()  # (its flags)
