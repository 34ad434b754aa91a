"""Why this beam won (issue 40, point 3). Oracles: each hypothesis's log-probabilities computed
on its own, by the reference engine and by the PyTorch engine in float64 (the parting step's gap
is the difference of the two summed log-probabilities there; the final score gap is
`decoding.Hypothesis.score`'s on them), a beam search of the PyTorch engine (the kept hypothesis
and the n-best runner-up), the first index where the two token sequences differ (the parting
step), and exact sums: the parts, the tokens and a head's key positions add up to the gap within
1e-10. On the shipped translator ("Hello world.") and a random Llama-style decoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from glassformer import decoding, load, weights
from glassformer import reference as R
from glassformer.config import Config
from glassformer.errors import GlassformerError

ROOT = Path(__file__).resolve().parents[1]
EN_ES, CHAR_LM = ROOT / "models" / "en-es", ROOT / "models" / "char-lm"
TOL = 1e-10
LLAMA = dict(
    arch="decoder", n_decoder_layers=2, n_heads=4, n_kv_heads=2, head_dim=6, d_model=16, d_ff=24,
    max_len=24, positions="rotary", norm="pre", norm_kind="rmsnorm", ffn_kind="gated",
    activation="silu", bias=False, tie_embeddings=False,
)  # fmt: skip


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def logits_of(engine: str, m, src, ids) -> np.ndarray:
    """(len(ids) - 1, V) next-token logits of one hypothesis, by one engine in float64."""
    if engine == "reference":
        return np.asarray(R.forward(m.params, m.cfg, ids[:-1], src_ids=src), dtype=np.float64)
    import torch

    model = torch_model(m)
    with torch.no_grad():
        s = None if src is None else torch.tensor([src])
        return model(torch.tensor([ids[:-1]]), src_ids=s)[0].numpy()


_TORCH: dict = {}


def torch_model(m):
    """The PyTorch engine in float64 on a Model's weights, made once per Model."""
    import torch

    from glassformer.torch_model import from_params

    if id(m) not in _TORCH:
        _TORCH[id(m)] = (m, from_params(m.cfg, m.params, dtype=torch.float64).eval())
    return _TORCH[id(m)][1]


def new_logprobs(engine, m, src, ids, n) -> np.ndarray:
    lp = log_softmax(logits_of(engine, m, src, ids))
    return lp[np.arange(n - 1, len(ids) - 1), ids[n:]]


def check_adds_up(s: dict) -> None:
    """A split's parts, tokens (with the constants) and each head's key positions add up."""
    scale = max(1.0, abs(s["gap"]))
    assert abs(sum(p["value"] for p in s["parts"]) - s["gap"]) <= TOL * scale
    assert abs(sum(t["value"] for t in s["tokens"]) + s["constants"] - s["gap"]) <= TOL * scale
    later = [t for t in s["tokens"] if t["stack"] == "decoder" and t["position"] > s["position"]]
    assert not later  # the causal mask keeps later positions out
    heads = [p for p in s["parts"] if p["kind"] == "head"]
    assert heads and all("reads" in p for p in heads)
    for p in heads:
        assert abs(sum(r["value"] for r in p["reads"]) - p["value"]) <= TOL * scale
    assert s["error"] <= TOL * scale


def check_choice(m, c, src, prompt) -> None:
    """The parting step and its gap against each engine's own log-probabilities, the splits,
    the final score gap, and every step's gap against the runner-up token."""
    n, kept, dropped = len(prompt), c.kept["ids"], c.dropped["ids"]
    first = next(k for k, (a, b) in enumerate(zip(kept[n:], dropped[n:], strict=False)) if a != b)
    p = c.parting
    assert p["step"] == first and (p["token_id"], p["versus_id"]) == (
        kept[n + first],
        dropped[n + first],
    )
    for engine in ("reference", "torch"):
        a, b = (new_logprobs(engine, m, src, ids, n) for ids in (kept, dropped))
        gap = a[: first + 1].sum() - b[: first + 1].sum()
        assert abs(p["gap"] - gap) <= TOL * max(1.0, abs(gap)), engine
        lp = c.length_penalty
        score = decoding.Hypothesis(kept, a.sum(), len(a)).score(lp)
        other = decoding.Hypothesis(dropped, b.sum(), len(b)).score(lp)
        assert abs(c.score_gap - (score - other)) <= TOL, engine
        z = logits_of(engine, m, src, kept)
        for s in c.steps:
            row = z[s["position"]].copy()
            row[s["token_id"]] = -np.inf
            assert s["versus_id"] == int(np.argmax(row))  # the runner-up token
            want = z[s["position"], s["token_id"]] - row.max()
            assert abs(s["gap"] - want) <= TOL * max(1.0, abs(want)), engine
    check_adds_up(p)
    for s in c.steps:
        check_adds_up(s)
    ranks = c.beam_ranks  # before they part, the two are one hypothesis in the beam
    assert all(r["kept"] == r["dropped"] for r in ranks[:first])
    assert c.error <= TOL * 10


@pytest.fixture(scope="module")
def en_es():
    m = load(EN_ES)
    return m, m.tokenizer.encode("Hello world."), [m.tokenizer.bos_id]


@pytest.fixture(scope="module")
def runner_up(en_es):
    return en_es[0].explain_choice("Hello world.")


@pytest.fixture(scope="module")
def hola_mundo(en_es):
    return en_es[0].explain_choice("Hello world.", versus="Hola mundo.")


def test_the_translator_kept_hola_el_mundo_over_the_runner_up(en_es, runner_up):
    from glassformer.torch_steps import step_fn

    m, src, prompt = en_es
    c = runner_up
    model = torch_model(m)
    beam = decoding.beam_search(
        step_fn(model, src), prompt, m.cfg.max_len - 1, m.tokenizer.eos_id, 4, 1.0, m.cfg.max_len
    )
    assert c.kept["ids"] == beam.best.ids and c.kept["text"] == "Hola el mundo."
    assert c.dropped["ids"] == beam.ranked[1].ids and c.dropped_by == "runner-up"
    check_choice(m, c, src, prompt)
    assert c.parting["step"] == 2 and c.parting["context"] == "Hola"


def test_versus_parts_where_the_tokens_first_differ(en_es, hola_mundo):
    m, src, prompt = en_es
    c = hola_mundo
    assert c.dropped["text"] == "Hola mundo." and c.dropped_by == "versus"
    check_choice(m, c, src, prompt)
    assert (c.parting["step"], c.parting["token"], c.parting["versus"]) == (2, "␣el", "␣mundo")
    d = c.to_dict()
    assert d == json.loads(c.to_json()) and d["parting"]["gap"] > 0 and d["score_gap"] > 0


@pytest.fixture(scope="module")
def random_decoder(tmp_path_factory):
    """A Llama-style decoder (RoPE, grouped K/V heads, RMSNorm, SwiGLU) with random weights and
    the char-LM's tokenizer."""
    _, _, tok = weights.load(CHAR_LM)
    cfg = Config(**LLAMA, vocab_size=len(tok.vocab))
    path = tmp_path_factory.mktemp("choice") / "llama"
    weights.save(path, cfg, weights.init(cfg, seed=7, std=0.5), tokenizer=tok)
    return load(path)


def test_a_random_decoder_parts_at_a_known_step(random_decoder):
    m = random_decoder
    prompt = m.tokenizer.encode("ab")
    c = m.explain_choice("ab", beam=3, max_new_tokens=6)
    check_choice(m, c, None, prompt)
    new = c.kept["ids"][len(prompt) :]
    other = next(i for i in m.tokenizer.encode("xyz") if i != new[2])
    versus = m.tokenizer.decode(new[:2] + [other])
    v = m.explain_choice("ab", beam=3, max_new_tokens=6, versus=versus)
    assert v.parting["step"] == 2 and v.parting["versus_id"] == other
    check_choice(m, v, None, prompt)


def test_a_beam_of_one_explains_each_step(random_decoder):
    c = random_decoder.explain_choice("ab", beam=1, max_new_tokens=3)
    assert c.parting is None and "give versus (or a wider beam)" in c.note and len(c.steps) == 3
    for s in c.steps:
        check_adds_up(s)
        assert s["gap"] >= 0  # greedy: each token the likeliest


def test_the_explorers_answer_is_the_models(en_es, hola_mundo):
    """/api/choice on two hypotheses' ids: the parting split `Model.explain_choice` gives."""
    pytest.importorskip("starlette")
    from glassformer.serve import Explorer, Registry

    m, src, prompt = en_es
    c = hola_mundo
    explorer = Explorer(Registry([str(EN_ES)]))
    body = {"model": "en-es", "src": src, "n_prompt": 1, "kept": c.kept["ids"]}
    d = explorer.choice(body | {"dropped": c.dropped["ids"]})
    assert d["parting"]["gap"] == pytest.approx(c.parting["gap"], abs=1e-12)
    assert d["dropped_by"] == "picked" and "steps" in d and not d["steps"]
    with pytest.raises(GlassformerError, match="the hypothesis picked is the hypothesis kept"):
        explorer.choice(body | {"dropped": c.kept["ids"]})
    with pytest.raises(GlassformerError, match="are not two hypotheses of one decoding"):
        explorer.choice(body | {"dropped": c.dropped["ids"], "src": None})


def test_what_cannot_be_explained_is_refused(random_decoder, seeded_classifier):
    m = random_decoder
    kept = m.explain_choice("ab", beam=2, max_new_tokens=3).kept["text"]
    with pytest.raises(GlassformerError, match="versus='.*' is the hypothesis kept"):
        m.explain_choice("ab", beam=2, max_new_tokens=3, versus=kept)
    with pytest.raises(GlassformerError, match="one hypothesis continues the other"):
        m.explain_choice("ab", beam=2, max_new_tokens=3, versus=kept[:1])
    with pytest.raises(GlassformerError, match="beam=0"):
        m.explain_choice("ab", beam=0)
    with pytest.raises(GlassformerError, match="is an encoder: it decodes nothing"):
        load(seeded_classifier).explain_choice("to be")


# -- the command line ----------------------------------------------------------------------------


def test_translate_explain_choice_prints_json_and_html(capsys, tmp_path, runner_up):
    from glassformer.cli import main

    args = ["translate", str(EN_ES), "Hello world.", "--explain-choice"]
    assert main([*args, "--versus", "Hola mundo."]) == 0
    text = capsys.readouterr().out
    assert text.startswith('kept "Hola el mundo." over "Hola mundo." (--versus) at step 2: +0.9')
    assert "sum of parts 0.9018" in text and "final scores (log p / n^1)" in text
    out, page = tmp_path / "c.json", tmp_path / "c.html"
    assert main([*args, "--json", str(out), "--html", str(page)]) == 0
    assert json.loads(out.read_text()) == runner_up.to_dict()
    assert "Kept <b>“Hola el mundo.”</b> over" in page.read_text()
    assert "wrote the explanation of 6 steps to" in capsys.readouterr().out
    gen = ["generate", str(CHAR_LM), "RO", "--explain-choice", "--strategy", "beam"]
    assert main([*gen, "--beam-width", "2", "--max-new-tokens", "3", "--json", "-"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["beam"] == 2 and len(d["steps"]) == 3 and d["error"] < TOL


@pytest.mark.parametrize(
    "command, says",
    [
        (["translate", "hello-world", "hello world", "--explain-choice"], "needs a pre-LN model"),
        (["translate", str(CHAR_LM), "ROMEO", "--explain-choice"], "translate needs an encoder-"),
        (["translate", str(EN_ES), "Hello world.", "--explain-choice", "--versus",
          "Hola el mundo."], "--versus 'Hola el mundo.' is the hypothesis kept"),
        (["translate", str(EN_ES), "Hello world.", "--versus", "Hola"], "goes with --explain-"),
        (["translate", str(EN_ES), "a", "b", "--explain-choice"], "explains one sentence"),
        (["generate", str(CHAR_LM), "RO", "--explain-choice", "--temperature", "2"],
         "sampling draws its tokens"),
    ],
)  # fmt: skip
def test_bad_input_gets_one_line(capsys, command, says):
    from glassformer.cli import main

    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
