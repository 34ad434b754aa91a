"""Batched translation, `glassformer.translating` (oracles: one-sentence `decoding.beam_search`
over the same engine and over the reference engine, batched greedy for width 1, and the shipped
translator decoded both ways); the invariants: the order and the batching of the input change
nothing per sentence."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import decoding, weights  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.tokenizer import WordTokenizer  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import many_step_fn, step_fn  # noqa: E402
from glassformer.translating import (  # noqa: E402
    _top,
    _topk_blocks,
    beam_batch,
    greedy_batch,
    translate,
    translate_iter,
    translate_nbest_iter,
)

PAD, BOS, EOS = 0, 1, 14
LIMITS = [(12, 16), (20, 9)]  # (max_new_tokens, max_len): the first binds, or the second


@pytest.fixture(scope="module")
def toy():
    """A float64 random encoder-decoder and 20 sources of 1 to 14 tokens. With EOS = 14 its
    beams end in EOS after 2 to 11 tokens for most sources and run to the length limit for the
    rest (seed, std and EOS were chosen for that spread; the tests check it still holds)."""
    cfg = Config(
        arch="encoder-decoder",
        vocab_size=16,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=2,
        n_decoder_layers=2,
        max_len=16,
        positions="learned",
        norm="pre",
    )
    params = weights.init(cfg, seed=0, std=0.5)
    rng = np.random.default_rng(1)
    srcs = [rng.integers(3, 16, size=int(rng.integers(1, 15))).tolist() for _ in range(20)]
    return cfg, params, from_params(cfg, params).eval(), srcs


def toy_words():
    """The toy's vocabulary as words, and a tokenizer over them (PAD, BOS, EOS at their ids)."""
    vocab = ["<pad>", "<s>", "<unk>", *(f"w{i}" for i in range(3, 14)), "</s>", "w15"]
    tok = WordTokenizer(vocab, {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"})
    return vocab, tok


def one_at_a_time(model, src, width, length_penalty, max_new, max_len):
    """Beam search for one sentence, as translate did before batching."""
    with torch.no_grad():
        return decoding.beam_search(
            step_fn(model, src),
            [BOS],
            max_new,
            EOS,
            width,
            length_penalty,
            max_len,
            step_many=many_step_fn(model, src),
        )


def same_search(got: decoding.BeamResult, want: decoding.BeamResult) -> None:
    assert got.ids == want.ids
    assert got.best.finished == want.best.finished
    assert got.best.logprob == pytest.approx(want.best.logprob, abs=1e-9)
    assert [h.ids for h in got.finished] == [h.ids for h in want.finished]
    assert [[h.ids for h in s] for s in got.steps] == [[h.ids for h in s] for s in want.steps]


@pytest.mark.parametrize("max_new,max_len", LIMITS)
@pytest.mark.parametrize("length_penalty", [0.6, 1.0])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_batched_beam_equals_one_sentence_beam_search(toy, width, length_penalty, max_new, max_len):
    _, _, model, srcs = toy
    got = beam_batch(model, srcs, BOS, EOS, width, max_new, max_len, length_penalty, PAD)
    for src, r in zip(srcs, got, strict=True):
        same_search(r, one_at_a_time(model, src, width, length_penalty, max_new, max_len))
    ended = [r.best.finished for r in got]
    assert any(ended)
    if (length_penalty, max_len) != (0.6, 16):  # (a penalty < 1 favours the short finished ones)
        assert not all(ended)  # both endings are exercised
    if width > 1:  # and some searches really are searches: their best is not the greedy path
        greedy = greedy_batch(model, srcs, PAD, BOS, EOS, min(max_new, max_len - 1))
        assert any(
            [t for t in r.ids[1:] if t != EOS] != g for r, g in zip(got, greedy, strict=True)
        )


def test_batched_beam_equals_beam_search_over_the_reference_engine(toy):
    cfg, params, model, srcs = toy
    got = beam_batch(model, srcs[:6], BOS, EOS, 4, 12, 16, 0.6, PAD)
    for src, r in zip(srcs[:6], got, strict=True):
        same_search(
            r,
            decoding.beam_search(R.next_token_logits(params, cfg, src), [BOS], 12, EOS, 4, 0.6, 16),
        )


def test_width_1_is_batched_greedy(toy):
    _, _, model, srcs = toy
    got = beam_batch(model, srcs, BOS, EOS, 1, 12, None, 1.0, PAD)
    want = greedy_batch(model, srcs, PAD, BOS, EOS, 12)
    assert [[t for t in r.ids[1:] if t != EOS] for r in got] == want


def test_input_order_and_batch_composition_change_nothing(toy):
    _, _, model, srcs = toy
    got = beam_batch(model, srcs, BOS, EOS, 4, 12, 16, 1.0, PAD)
    order = np.random.default_rng(2).permutation(len(srcs))
    shuffled = beam_batch(model, [srcs[i] for i in order], BOS, EOS, 4, 12, 16, 1.0, PAD)
    assert [r.ids for r in shuffled] == [got[i].ids for i in order]
    alone = [beam_batch(model, [s], BOS, EOS, 4, 12, 16, 1.0, PAD)[0] for s in srcs[:5]]
    assert [r.ids for r in alone] == [r.ids for r in got[:5]]
    assert beam_batch(model, srcs[:3], BOS, EOS, 4, 0, 16, 1.0, PAD)[0].ids == [BOS]


def test_translate_iter_yields_in_input_order_whatever_the_batching(toy):
    cfg, _, model, srcs = toy
    vocab, tok = toy_words()
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (PAD, BOS, EOS)
    sentences = [" ".join(vocab[t] for t in s) for s in srcs]
    L = cfg.max_len
    want = [tok.decode(one_at_a_time(model, s, 4, 1.0, L - 1, L).ids[1:]) for s in srcs]
    assert len(set(want)) > 10
    assert translate(model, tok, sentences, beam=4) == want
    for batch_size, window in ((1, None), (3, 7), (4, 4), (64, 5)):
        it = translate_iter(model, tok, sentences, 4, batch_size, window=window)
        assert list(it) == want
    greedy = greedy_batch(model, srcs, PAD, BOS, EOS, L - 1)
    assert translate(model, tok, sentences, beam=1, batch_size=3) == [tok.decode(g) for g in greedy]


def test_top_breaks_ties_like_decode():
    rng = np.random.default_rng(0)
    for dtype in (torch.float32, torch.float64):
        logits = torch.as_tensor(rng.integers(-3, 0, size=(50, 9))).to(dtype)  # many ties
        logits[:, 0] += torch.as_tensor(rng.normal(size=50) * 40).to(dtype)  # and large ranges
        for width in (1, 2, 4, 9, 12):
            tokens, values = _top(logits, width)
            for row, t, v in zip(logits.numpy(), tokens, values, strict=True):
                logp = decoding._log_softmax(row)  # float64, the one-sentence search's
                np.testing.assert_array_equal(t, decoding.top_tokens(logp, width))
                tol = 1e-13 if dtype == torch.float64 else 1e-5
                np.testing.assert_allclose(v, logp[t], rtol=0, atol=tol)


@pytest.mark.parametrize("V", [5, 64, 200, 8000, 8001])
def test_topk_blocks_equals_topk(V):
    """The block search gives torch.topk's values, and its tokens where values are distinct."""
    gen = torch.Generator().manual_seed(V)
    x = torch.randn(33, V, generator=gen) * 4
    x[:3] = torch.randint(-2, 1, (3, V), generator=gen).float()  # rows full of ties
    x[3, : V // 2] = float("-inf")
    for k in (1, 3, 5):
        values, tokens = _topk_blocks(x, min(k, V))
        want_v, want_t = x.topk(min(k, V), dim=-1)
        assert torch.equal(values, want_v)
        assert torch.equal(x.gather(1, tokens), values)  # each token holds its value
        assert torch.equal(tokens[3:], want_t[3:])  # distinct values: the same tokens


def test_shipped_translator_batched_equals_one_at_a_time():
    """The float32 translator on 100 validation sentences (every 10th: the file is sorted by
    length), beam 4: the batched search and the one-sentence search give the same tokens (a
    float32 near-tie between two candidates could in principle order them differently; none
    does here)."""
    from glassformer.data import read_pairs

    folder = Path(__file__).resolve().parents[1] / "models" / "en-es"
    cfg, params, tok = weights.load(folder)
    model = from_params(cfg, params, dtype=torch.float32).eval()
    srcs = [tok.encode(s)[: cfg.max_len] for s, _ in read_pairs("eng-spa-valid")[::10]]
    L = cfg.max_len
    got = beam_batch(model, srcs, tok.bos_id, tok.eos_id, 4, L - 1, L, 1.0, tok.pad_id)
    for src, r in zip(srcs, got, strict=True):
        with torch.no_grad():
            want = decoding.beam_search(
                step_fn(model, src),
                [tok.bos_id],
                L - 1,
                tok.eos_id,
                4,
                max_len=L,
                step_many=many_step_fn(model, src),
            )
        assert r.ids == want.ids, tok.decode(src)


@pytest.mark.parametrize("beam", [1, 4])
def test_translate_iter_names_the_translations_cut_at_the_length_limit(toy, beam):
    """`cut` gets the sentences whose search reached max_len without EOS (oracle: each sentence
    alone, `decoding.beam_search`'s best.finished, `decoding.greedy`'s stopped_at_eos)."""
    cfg, _, model, srcs = toy
    vocab, tok = toy_words()
    sentences = [" ".join(vocab[t] for t in s) for s in srcs]
    L = cfg.max_len
    with torch.no_grad():
        if beam == 1:
            ended = [
                decoding.greedy(step_fn(model, s), [BOS], L - 1, EOS).stopped_at_eos for s in srcs
            ]
        else:
            ended = [one_at_a_time(model, s, beam, 1.0, L - 1, L).best.finished for s in srcs]
    want = {i for i, e in enumerate(ended) if not e}
    assert 0 < len(want) < len(srcs)  # both endings occur
    for batch_size in (1, 3, 64):
        cut: set[int] = set()
        texts = list(translate_iter(model, tok, sentences, beam, batch_size, cut=cut))
        assert cut == want
        assert texts == translate(model, tok, sentences, beam)


def teacher_forced_logprob(cfg, params, src, ids) -> float:
    """The reference engine's summed log-probability of `ids` (after BOS) given `src`."""
    logits = R.forward(params, cfg, [BOS, *ids[:-1]], src_ids=src)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(sum(logp[i, t] for i, t in enumerate(ids)))


@pytest.mark.parametrize("length_penalty", [0.6, 1.0])
def test_nbest_lists_the_beams_candidates_scored_as_the_reference_engine_scores_them(
    toy, length_penalty
):
    """Each n-best list starts with translate_iter's translation, is ranked by score, and each
    candidate's log-probability is the reference engine's, teacher-forced, for those tokens;
    the candidates are the one-sentence beam search's finished and still-live hypotheses, and
    `cut` names the sentences whose best one reached max_len."""
    cfg, params, model, srcs = toy
    vocab, tok = toy_words()
    sentences = [" ".join(vocab[t] for t in s) for s in srcs]
    L = cfg.max_len
    plain = translate(model, tok, sentences, beam=4, length_penalty=length_penalty)
    cut: set[int] = set()
    got = list(translate_nbest_iter(model, tok, sentences, 4, 4, 3, None, length_penalty, cut=cut))
    assert [c[0].text for c in got] == plain
    sizes, unfinished, never_ended = set(), 0, set()
    for i, (src, cands) in enumerate(zip(srcs, got, strict=True)):
        want = one_at_a_time(model, src, 4, length_penalty, L - 1, L)
        if not want.best.finished:
            never_ended.add(i)
        assert [tok.decode(h.ids[1:]) for h in want.ranked[:4]] == [c.text for c in cands]
        scores = [c.score for c in cands]
        assert scores == sorted(scores, reverse=True)
        for c, h in zip(cands, want.ranked, strict=False):
            ids = h.ids[1:]
            assert c.finished == (ids[-1] == EOS) and c.n_tokens == len(ids)
            assert c.logprob == pytest.approx(
                teacher_forced_logprob(cfg, params, src, ids), abs=1e-9
            )
            assert c.score == pytest.approx(c.logprob / len(ids) ** length_penalty, abs=1e-12)
        sizes.add(len(cands))
        unfinished += sum(not c.finished for c in cands)
    assert max(sizes) == 4 and unfinished  # full lists, and live hypotheses at the limit too
    assert cut == never_ended  # the sentences whose best reached max_len
    assert cut or length_penalty < 1  # (a penalty < 1 favours the short finished ones)
    one = list(translate_nbest_iter(model, tok, sentences, 1, 1))
    assert [c[0].text for c in one] == translate(model, tok, sentences, beam=1)
    for bad in (0, 5):
        with pytest.raises(GlassformerError, match="n_best must be between 1 and the beam width"):
            next(translate_nbest_iter(model, tok, sentences, bad, 4))
