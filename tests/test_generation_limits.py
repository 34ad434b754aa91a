"""Generation never stops silently: a decoder slides over its context (both engines, the torch
one recomputing its KV cache when the window moves), an encoder-decoder stops at its max_len, and
the command line says once why generation stopped."""

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import reference as R  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.decoding import beam_search, greedy, sample  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.model import Model  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.torch_steps import step_fn  # noqa: E402

TOL = 1e-10
L = 6  # max_len: short, so that every test slides far past it


def decoder(positions: str) -> Config:
    return Config(
        arch="decoder",
        vocab_size=11,
        d_model=8,
        n_heads=2,
        d_ff=16,
        n_decoder_layers=2,
        max_len=L,
        positions=positions,
        norm="pre",
    )


def engines(cfg, window=True, seed=0):
    params = weights.init(cfg, seed=seed, std=0.5)
    model = from_params(cfg, params, dtype=torch.float64).eval()
    return R.next_token_logits(params, cfg, window=window), step_fn(model, window=window)


POSITIONS = ["learned", "sinusoidal", "none"]


@pytest.mark.parametrize("positions", POSITIONS)
def test_windowed_torch_equals_windowed_reference_step_by_step(positions):
    """Fed as decoding feeds it (each call one token longer), the cached torch step gives the
    reference engine's logits on the last max_len ids, well past the context."""
    ref, tor = engines(decoder(positions))
    ids = [1, 2, 3]
    for _ in range(4 * L):
        a, b = ref(ids), tor(ids)
        np.testing.assert_allclose(b, a, rtol=0, atol=TOL)
        ids.append(int(np.argmax(a)))
    assert len(ids) > 3 * L


@pytest.mark.parametrize("positions", POSITIONS)
def test_the_window_is_the_last_max_len_ids_at_positions_from_0(positions):
    """The oracle for the window itself: the unwindowed reference engine on ids[-max_len:]."""
    cfg = decoder(positions)
    params = weights.init(cfg, seed=1, std=0.5)
    windowed, plain = (
        R.next_token_logits(params, cfg, window=True),
        R.next_token_logits(params, cfg),
    )
    _, tor = engines(cfg, seed=1)
    rng = random.Random(0)
    for _ in range(30):  # any order, any length: as beam hypotheses and restarts call it
        ids = [rng.randrange(cfg.vocab_size) for _ in range(rng.randrange(1, 3 * L))]
        np.testing.assert_array_equal(windowed(ids), plain(ids[-L:]))
        np.testing.assert_allclose(tor(ids), plain(ids[-L:]), rtol=0, atol=TOL)


def test_learned_positions_shift_when_the_window_slides():
    """Not a no-op: past the context, the same last token at another place of the window gives
    other logits than a cache that kept growing would (positions are the window's)."""
    cfg = decoder("learned")
    params = weights.init(cfg, seed=2, std=0.5)
    plain = R.next_token_logits(params, cfg)
    ids = [1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(GlassformerError, match="max_len"):
        plain(ids)  # unwindowed, the model has no position 6
    assert not np.allclose(plain(ids[-L:]), plain(ids[:L]))


@pytest.mark.parametrize("positions", POSITIONS)
def test_within_the_context_nothing_changes(positions):
    """Up to max_len ids, the windowed step functions are the plain ones, in both engines."""
    cfg = decoder(positions)
    ref_w, tor_w = engines(cfg, window=True)
    ref, tor = engines(cfg, window=False)
    ids = [3]
    while len(ids) <= L:
        np.testing.assert_array_equal(ref_w(ids), ref(ids))
        np.testing.assert_array_equal(tor_w(ids), tor(ids))
        ids.append(int(np.argmax(ref(ids))))
    g = greedy(ref, [3], 20, max_len=L)
    assert greedy(ref_w, [3], len(g.ids) - 1).ids == g.ids  # the first max_len tokens agree


@pytest.mark.parametrize("positions", POSITIONS)
def test_every_strategy_decodes_the_same_past_the_context_in_both_engines(positions):
    cfg = decoder(positions)
    ref, tor = engines(cfg)
    n = 3 * L
    a, b = greedy(ref, [1, 2], n), greedy(tor, [1, 2], n)
    assert a.ids == b.ids and len(a.ids) == 2 + n
    a, b = sample(ref, [1, 2], n, seed=5), sample(tor, [1, 2], n, seed=5)
    assert a.ids == b.ids and len(a.ids) == 2 + n
    a, b = beam_search(ref, [1, 2], n, None, width=3), beam_search(tor, [1, 2], n, None, width=3)
    assert a.ids == b.ids and len(a.ids) == 2 + n
    assert a.best.logprob == pytest.approx(b.best.logprob, abs=1e-9)


def test_step_function_passes_the_window_to_either_engine():
    cfg = decoder("learned")
    params = weights.init(cfg, seed=3, std=0.5)
    ids = list(range(1, 10))
    ref = Model(cfg, params, engine="reference").runtime.step(window=True)(ids)
    tor = Model(cfg, params, engine="torch").runtime.step(window=True)(ids)
    np.testing.assert_allclose(tor, ref, rtol=0, atol=1e-5)  # the torch engine here is float32


# -- the command line: the window, and why generation stopped, said once ------------------------


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm")
    corpus = d / "c.txt"
    corpus.write_text("to be or not to be, that is the question\n")
    assert main(["init", str(d / "lm"), "--preset", "tiny", "--tokenizer", "char", "--corpus",
                 str(corpus), "--set", "max_len=8"]) == 0  # fmt: skip
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    return d


def notes(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert all(x.startswith("glassformer: note: ") for x in lines), err
    return [x.removeprefix("glassformer: note: ") for x in lines]


def windowed_greedy_text(ck, prompt: str, n: int) -> str:
    """The oracle: greedy over the plain reference engine fed the last max_len ids."""
    from glassformer.formats import loading

    cfg, params, tok = loading.load(ck)
    plain = R.next_token_logits(params, cfg)
    ids = greedy(lambda x: plain(x[-cfg.max_len :]), tok.encode(prompt), n).ids
    return tok.decode(ids)


@pytest.mark.parametrize("engine", ["reference", "torch"])
def test_a_decoder_generates_past_its_context_and_says_so_once(capsys, lm, engine):
    code, out, err = run(capsys, "generate", lm / "lm", "to be", "--max-new-tokens", "30",
                         "--engine", engine)  # fmt: skip
    assert code == 0
    assert out == windowed_greedy_text(lm / "lm", "to be", 30) + "\n"
    said = notes(err)
    assert len(said) == 2 and "sliding window" in said[0] and "last 8" in said[0]
    assert said[1] == "stopped after --max-new-tokens 30"


def test_a_prompt_as_long_as_the_context_still_generates(capsys, lm):
    code, out, err = run(capsys, "generate", lm / "lm", "to be or", "--max-new-tokens", "4")
    assert code == 0 and out == windowed_greedy_text(lm / "lm", "to be or", 4) + "\n"
    assert "sliding window" in err
    code, out, err = run(capsys, "generate", lm / "lm", "to be or not to be", "--max-new-tokens",
                         "4")  # fmt: skip
    assert code == 0 and out == windowed_greedy_text(lm / "lm", "to be or not to be", 4) + "\n"


def test_the_default_bound_is_max_len_new_tokens(capsys, lm):
    code, out, err = run(capsys, "generate", lm / "lm", "to")
    assert code == 0 and out == windowed_greedy_text(lm / "lm", "to", 8) + "\n"
    assert "stopped after 8 new tokens (--max-new-tokens, default max_len)" in notes(err)


def test_an_encoder_decoder_stops_at_its_max_len_with_a_note(capsys, lm):
    """hello-world's decoder has max_len 8: SOS and 7 tokens, then no position is left."""
    cfg = Config.from_json((lm / "hello" / "config.json").read_text())
    code, out, err = run(capsys, "generate", lm / "hello", "hello world", "--max-new-tokens", "50")
    assert code == 0
    said = notes(err)
    assert len(said) == 1
    if said[0].startswith("stopped at EOS"):
        pytest.skip("this model reaches EOS first")
    assert said == [f"stopped at the decoder's max_len {cfg.max_len}: it has no position for "
                    f"token {cfg.max_len + 1}"]  # fmt: skip
    assert len(out.split()) <= cfg.max_len - 1


def test_eos_is_said(capsys, tmp_path):
    """A decoder whose every step prefers EOS stops at once, and says EOS."""
    from safetensors.numpy import load_file, save_file

    from glassformer import tokenizer as tk

    corpus = tmp_path / "c.txt"
    corpus.write_text("ab\n")
    ck = tmp_path / "ck"
    assert main(["init", str(ck), "--preset", "tiny", "--tokenizer", "char", "--corpus",
                 str(corpus)]) == 0  # fmt: skip
    tok = tk.load(ck / "tokenizer.json")
    t = load_file(str(ck / "model.safetensors"))
    t["decoder.layers.1.norm2.weight"][:] = 0  # post-LN: the last LayerNorm's output ...
    t["decoder.layers.1.norm2.bias"][:] = 1  # ... is all ones at every position
    t["lm_head.weight"][:] = 0
    t["lm_head.weight"][tok.eos_id] = 1  # so the logit of EOS is d_model, every other 0
    t["lm_head.bias"][:] = 0
    save_file(t, str(ck / "model.safetensors"))
    for engine in ("reference", "torch"):
        code, out, err = run(capsys, "generate", ck, "ab", "--engine", engine)
        assert code == 0 and notes(err) == ["stopped at EOS after 1 new token"], err


def test_notes_never_come_before_a_refusal(capsys, lm):
    code, out, err = run(capsys, "explain", lm / "hello", "hello world", "--heads", "7",
                         "--top-k", "2", "--html", lm / "x.html")  # fmt: skip
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("glassformer: error: ")
