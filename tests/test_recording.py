"""Recording on the fast path (`recording.Recorder`; `translate --alignments`, `generate --record`):
what is recorded equals the reference engine's trace of the same tokens (float64 within 1e-10,
float32 within 1e-5; int8 against the float64 reference within its quantization error), beam
search's record is the chosen hypothesis's through the beam's reorderings, the outputs are the
same with and without recording, and bad requests are one line and exit 2."""

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

from glassformer import generating, load, recording, translating, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.decoding import Decoding  # noqa: E402
from glassformer.model import Model  # noqa: E402

TOL = {"float64": 1e-10, "float32": 1e-5, "int8": 3e-2}
SENTENCES = ["I like cats.", "Where is the station?", "Thank you.", "She is reading a book."]


@pytest.fixture(scope="module")
def en_es():
    return load("models/en-es", on_note=lambda _: None)


@pytest.fixture(scope="module")
def char_lm():
    return load("models/char-lm", on_note=lambda _: None)


def _valid(n: int) -> list[str]:
    """n of the 1,000 validation sentences, every k-th (the file is sorted by length)."""
    pairs = read_pairs("eng-spa-valid")
    return [s for s, _ in pairs[:: len(pairs) // n][:n]]


def _mean_of(tr, pairs, n: int) -> np.ndarray:
    return np.mean([tr[name] for name in recording.heads_named(pairs)], axis=0)[:n]  # (n, S)


def _sp_words(pieces: list[str]) -> list[int]:
    """Word numbers of SentencePiece pieces, counted here: "▁" starts a word, "▁" alone is none."""
    out, w = [], -1
    for i, p in enumerate(pieces):
        if p == "▁":
            out.append(-1)
            continue
        w += i == 0 or p.startswith("▁") or out[-1] == -1
        out.append(w)
    return out


def _check_alignment(want: np.ndarray, rec: dict) -> bool:
    """A record's words, argmax and Pharaoh pairs against their computation from the reference
    trace's rows (`want`, target x source) and the pieces. Returns whether the pairs read
    differently backwards: a test needs one such sentence, else writing them backwards passes."""
    src, tgt = _sp_words(rec["source"]), _sp_words(rec["target"])
    assert (rec["source_words"], rec["target_words"]) == (src, tgt)
    argmax = want.argmax(-1).tolist()
    assert rec["argmax"] == argmax
    pairs = {(src[s], tgt[t]) for t, s in enumerate(argmax) if src[s] >= 0 and tgt[t] >= 0}
    assert rec["alignment"] == " ".join(f"{i}-{j}" for i, j in sorted(pairs))
    return pairs != {(j, i) for i, j in pairs}


# -- translate --alignments ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8"])
@pytest.mark.parametrize("beam", [1, 4])
def test_alignments_equal_the_reference_trace_of_the_translation(en_es, dtype, beam):
    m = en_es
    pairs = recording.alignment_heads(m.cfg, "0,2", "1,3") if beam == 4 else None
    pairs = pairs or recording.alignment_heads(m.cfg, None, None)
    plain = list(m.runtime.translations(SENTENCES, beam=beam, dtype=dtype))
    got = list(generating.translations(m.runtime, SENTENCES, beam, None, dtype, None, pairs))
    assert [t for t, _ in got] == plain  # recording changes no translation
    asymmetric = []
    for s, (text, rec) in zip(SENTENCES, got, strict=True):
        ids = m.tokenizer.encode(text)
        assert rec["target"] == m.runtime.pieces(ids) and rec["source"] == m.runtime.pieces(
            m.tokenizer.encode(s)
        )
        tr = m.trace(s, target=m.runtime.bos() + ids)
        want = _mean_of(tr, pairs, len(ids))
        A = np.array(rec["attention"])
        assert A.shape == want.shape
        assert np.abs(A - want).max() < TOL[dtype], (s, np.abs(A - want).max())
        if dtype != "int8":
            asymmetric.append(_check_alignment(want, rec))
    assert dtype == "int8" or any(asymmetric)


def test_beam_record_follows_the_chosen_hypothesis_through_reorderings(en_es):
    """The chosen hypothesis is often not the first row of its sentence at every step: the
    record must be read from the row its prefix occupied (a reading of row 0, or of the row it
    ends in, differs from the reference trace)."""
    m, pairs = en_es, recording.alignment_heads(en_es.cfg, None, None)
    model = m.runtime.torch("float64")
    srcs = [m.tokenizer.encode(s)[: m.cfg.max_len] for s in _valid(24)]
    tok, L = m.tokenizer, m.cfg.max_len
    rec = recording.Recorder(model, mean_of=pairs)
    with rec:
        results = translating.beam_batch(
            model, srcs, tok.bos_id, tok.eos_id, 4, L - 1, L, 1.0, 0, recorder=rec
        )
    moved = 0
    for b, r in enumerate(results):
        h = r.best
        n = len(h.ids) - 1 - h.finished
        rows = []  # where the chosen prefix sat among its sentence's live rows, per step
        for s in rec.recorded[:n]:
            alive = dict(s.alive)[b]
            rows.append([a.ids for a in alive].index(h.ids[: len(alive[0].ids)]))
        moved += any(rows)
        got = np.array([v["mean"][: len(srcs[b])] for v in rec.path(b, h.ids, n)])
        tr = m.trace(ids=None, text=m.decode(srcs[b]), target=h.ids[: n + 1])
        assert np.abs(got - _mean_of(tr, pairs, n)).max() < 1e-10
    assert moved >= 3, "no chosen hypothesis left row 0: this test would not see a wrong row"


def test_a_recorder_reads_only_its_own_threads_forwards(en_es):
    """A Model shares one engine between threads (the explorer): another thread's decoding
    through it while this one records must not land in this record."""
    import threading

    model = en_es.runtime.torch("float32")
    rec = recording.Recorder(model, mean_of=[(0, 0)])
    args = (model, en_es.tokenizer, ["Hi."], 1)
    other = threading.Thread(target=translating.translate, args=args)
    with rec:
        other.start()
        other.join()
        rec.step()
    assert rec.recorded[0].values == {}


def test_translate_alignments_command_writes_one_line_per_sentence(en_es, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("I like cats.\n\nThank you.\n", encoding="utf-8")
    out = tmp_path / "al.jsonl"
    assert main(["translate", "models/en-es", "--input", str(src), "--beam", "1"]) == 0
    plain = capsys.readouterr().out
    argv = ["translate", "models/en-es", "--input", str(src), "--beam", "1", "--alignments"]
    assert main([*argv, str(out), "--align-layers", "1", "--align-heads", "0,2"]) == 0
    assert capsys.readouterr().out == plain  # the same translations, the blank line kept
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["place"] for x in lines] == [f"{src}, line 1", f"{src}, line 3"]
    assert lines[0]["heads"] == ["decoder.1.cross_attn.head0.A", "decoder.1.cross_attn.head2.A"]
    ids = en_es.tokenizer.encode(plain.splitlines()[0])
    tr = en_es.trace("I like cats.", target=en_es.runtime.bos() + ids)
    want = (tr["decoder.1.cross_attn.head0.A"] + tr["decoder.1.cross_attn.head2.A"])[:-1] / 2
    assert np.abs(np.array(lines[0]["attention"]) - want).max() < 1e-5
    assert _check_alignment(want, lines[0])


def test_word_alignment_joins_pieces_into_words():
    # "▁¿" "Dónde" is one word; a lone space belongs to none; WordPiece "##" continues
    assert recording.words_of(["␣¿", "Dónde", "␣está", "?"], "sp-bpe") == [0, 0, 1, 1]
    assert recording.words_of(["a", "␣", "b", "c"], "char") == [0, -1, 1, 1]
    assert recording.words_of(["play", "##ing", "now"], "wordpiece") == [0, 0, 1]
    assert recording.words_of(["a", "b"], "word") == [0, 1]
    # 5 target x 5 source pieces; source words [0 1 1 -1 2], target words [0 1 1 2 -1]: pieces
    # 0..4 point at source pieces 4 2 4 0 1 -> (2,0) (1,1) (2,1) (0,2), piece 4 has no word. Not
    # symmetric (backwards: 0-2 1-1 1-2 2-0) and not in the order the pieces come.
    A = np.full((5, 5), 0.1)
    A[np.arange(5), [4, 2, 4, 0, 1]] = 0.6
    argmax, words = recording.word_alignment(A, [0, 1, 1, -1, 2], [0, 1, 1, 2, -1])
    assert argmax == [4, 2, 4, 0, 1] and words == ["0-2", "1-1", "2-0", "2-1"]
    # a target piece pointing at a space has no pair
    assert recording.word_alignment(A[:1], [0, 1, 1, -1, -1], [0]) == ([4], [])


# -- generate --record --------------------------------------------------------------------------

RECORDED = "decoder.*.self_attn.head*.A,decoder.1.out,decoder.output,logits"


def _check_generation(m, prompt_ids, new, values, top, dtype, enc_dec=False):
    """Each new token's values against the reference trace of prompt + new[:-1]."""
    tol = TOL[dtype]
    if enc_dec:
        tr = m.trace(ids=None, text=m.decode(prompt_ids), target=m.runtime.bos() + new[:-1])
        first = 0
    else:
        tr = m.trace(ids=prompt_ids + new[:-1])
        first = len(prompt_ids) - 1
    names = [n for n in values if n not in ("top_k", "top_logp")]
    assert names, "nothing recorded"
    for name in names:
        want = tr[name]
        for t, got in enumerate(values[name]):
            row = want[first + t]
            if ".self_attn." in name:
                row = row[: first + t + 1]
            scale = max(1.0, float(np.abs(row).max()))
            assert np.abs(np.asarray(got) - row).max() < tol * scale, (name, t)
    logp = tr["logits"] - np.log(np.exp(tr["logits"]).sum(-1, keepdims=True))
    for t, (ids, lps) in enumerate(zip(values["top_k"], values["top_logp"], strict=True)):
        want = logp[first + t]
        assert np.abs(want[ids] - lps).max() < tol * 10
        assert (
            set(ids.tolist()) == set(np.argsort(-want)[: len(ids)].tolist()) or dtype != "float64"
        )
    assert top == len(values["top_k"][0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_generate_record_equals_the_reference_trace(char_lm, dtype, strategy):
    m = load("models/char-lm", dtype=dtype, on_note=lambda _: None)
    texts = ["The cat ", "Once upon a time", "", "I"]  # left-padded batch, a blank line
    given = {"sample": dict(seed=3, top_k=5), "beam": dict(beam_width=3)}.get(strategy, {})
    how = Decoding.settle(strategy, 6, **given)
    steps = recording.select_steps(m.cfg, RECORDED)
    got = generating.recorded(m.runtime, texts, how, 2, None, steps, 3)
    assert [t for t, _ in got] == m.generate(texts, decoding=how, batch_size=2)
    assert got[2] == ("", None)
    for text, (_, rec) in zip(texts, got, strict=True):
        if rec is None:
            continue
        ids, rec = m.runtime.encode(text, window=True), rec.to_dict()
        assert rec["input"] == m.runtime.pieces(ids) and len(rec["ids"]) == 6
        values = {k: [np.asarray(x) for x in v] for k, v in rec["steps"].items()}
        values["top_k"] = [np.array(x["ids"]) for x in rec["top_k"]]
        values["top_logp"] = [np.array(x["logprobs"]) for x in rec["top_k"]]
        _check_generation(m, ids, rec["ids"], values, 3, dtype)


def test_generate_record_of_an_encoder_decoder_reads_self_and_cross_attention(en_es):
    m = en_es
    steps = recording.select_steps(m.cfg, "decoder.0.*.head2.A,decoder.2.cross_attn.head0.A")
    assert steps == [
        "decoder.0.self_attn.head2.A",
        "decoder.0.cross_attn.head2.A",
        "decoder.2.cross_attn.head0.A",
    ]
    how = Decoding.settle("greedy", None)
    m64 = load("models/en-es", dtype="float64", on_note=lambda _: None)
    recorded = generating.recorded(m64.runtime, SENTENCES[:2], how, 8, None, steps, 2)
    for (_, rec), s in zip(recorded, SENTENCES[:2], strict=True):
        rec = rec.to_dict()
        values = {k: [np.asarray(x) for x in v] for k, v in rec["steps"].items()}
        values["top_k"] = [np.array(x["ids"]) for x in rec["top_k"]]
        values["top_logp"] = [np.array(x["logprobs"]) for x in rec["top_k"]]
        assert rec["tokens"][-1] == "</s>"  # the end token's step is recorded too
        _check_generation(
            m64, m.tokenizer.encode(s), rec["ids"], values, 2, "float64", enc_dec=True
        )


def test_rotary_grouped_query_model_records_turned_queries(char_lm):
    """A Llama-like decoder (rotary, 2 K/V heads for 4 query heads): the hook turns q by the
    new position's angles and reads each query head's K/V head."""
    cfg = Config(
        arch="decoder",
        vocab_size=char_lm.cfg.vocab_size,
        d_model=16,
        d_ff=24,
        max_len=24,
        n_decoder_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=6,
        positions="rotary",
        norm="pre",
        norm_kind="rmsnorm",
        ffn_kind="gated",
        activation="silu",
        bias=False,
        tie_embeddings=False,
    )
    m = Model(cfg, weights.init(cfg, seed=1, std=0.4), char_lm.tokenizer, dtype="float64")
    steps = recording.select_steps(cfg, "decoder.*.self_attn.head*.A,decoder.0.out")
    how = Decoding.settle("greedy", 5)
    for text, (_, rec) in zip(
        ["ab", "hello"],
        generating.recorded(m.runtime, ["ab", "hello"], how, 2, None, steps, 2),
        strict=True,
    ):
        rec = rec.to_dict()
        values = {k: [np.asarray(x) for x in v] for k, v in rec["steps"].items()}
        values["top_k"] = [np.array(x["ids"]) for x in rec["top_k"]]
        values["top_logp"] = [np.array(x["logprobs"]) for x in rec["top_k"]]
        _check_generation(m, m.runtime.encode(text, window=True), rec["ids"], values, 2, "float64")


# -- bad requests: one line, exit 2 -------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, char_lm):
    """An encoder-only checkpoint with a tokenizer: it does not generate."""
    cfg = Config(
        arch="encoder",
        vocab_size=char_lm.cfg.vocab_size,
        d_model=16,
        d_ff=24,
        max_len=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=0,
        n_classes=2,
    )
    path = tmp_path_factory.mktemp("enc") / "classifier"
    weights.save(path, cfg, weights.init(cfg, seed=0), tokenizer=char_lm.tokenizer)
    return str(path)


@pytest.fixture
def existing(tmp_path):
    f = tmp_path / "out.jsonl"
    f.write_text("keep me\n")
    return f


BAD = {
    "unknown head": (
        ["translate", "models/en-es", "hi", "--alignments", "NEW", "--align-heads", "4"],
        "--align-heads: '4'",
    ),
    "unknown layer": (
        ["translate", "models/en-es", "hi", "--alignments", "NEW", "--align-layers", "0,7"],
        "--align-layers: '7'",
    ),
    "existing output": (
        ["translate", "models/en-es", "hi", "--alignments", "OLD"],
        "give --overwrite",
    ),
    "stdout": (["translate", "models/en-es", "hi", "--alignments", "-"], "give a file name"),
    "heads without file": (
        ["translate", "models/en-es", "hi", "--align-heads", "0"],
        "add --alignments",
    ),
    "not an encoder-decoder": (
        ["translate", "models/char-lm", "hi", "--alignments", "NEW"],
        "encoder-decoder",
    ),
    "record existing": (
        ["generate", "models/char-lm", "hi", "--record", "OLD"],
        "give --overwrite",
    ),
    "cross on a decoder": (
        [
            "generate",
            "models/char-lm",
            "hi",
            "--record",
            "NEW",
            "--record-steps",
            "decoder.0.cross_attn.head0.A",
        ],
        "names no step",
    ),
    "unknown step": (
        ["generate", "models/char-lm", "hi", "--record", "NEW", "--record-steps", "decoder.9.out"],
        "names no step",
    ),
    "steps without file": (
        ["generate", "models/char-lm", "hi", "--record-top-k", "3"],
        "add --record",
    ),
    "an encoder": (["generate", "ENC", "hi", "--record", "NEW"], "does not generate"),
    "reference engine": (
        ["generate", "models/char-lm", "hi", "--engine", "reference", "--record", "NEW"],
        "PyTorch engine",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_requests_are_one_line_and_exit_2(case, existing, encoder, capsys):
    argv, says = BAD[case]
    new = existing.parent / "new.jsonl"
    named = {"OLD": str(existing), "NEW": str(new), "ENC": encoder}
    argv = [named.get(a, a) for a in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and says in err, err
    assert existing.read_text() == "keep me\n" and not new.exists()
