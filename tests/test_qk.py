"""Why a head attends there (issue 40, point 2): an attention score Ω[i, j] split by the parts of
the query's and the key's residual streams. The oracle is the model's own score, recorded by each
engine: the table's entries add up to it (1e-10, float64) for every head of decoders, encoders and
encoder-decoders (cross-attention too), the Llama family's RoPE, RMSNorm, grouped K/V heads and
gated FFN, Qwen2's Q/K/V biases, and the shipped models. Post-LN models are refused, with why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from glassformer import load, weights
from glassformer import reference as R
from glassformer.config import Config
from glassformer.errors import GlassformerError
from glassformer.inspect.qk import decompose
from glassformer.trace import tracing

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-10
SMALL = dict(vocab_size=19, d_model=16, d_ff=24, max_len=20, n_heads=4, head_dim=6, norm="pre")
LLAMA = dict(
    arch="decoder", n_decoder_layers=3, n_kv_heads=2, positions="rotary", norm_kind="rmsnorm",
    ffn_kind="gated", activation="silu", bias=False, tie_embeddings=False, rope_theta=500.0,
)  # fmt: skip
CONFIGS = {
    "decoder": dict(arch="decoder", n_decoder_layers=3, bias=True),
    "encoder": dict(arch="encoder", n_encoder_layers=3, bias=True),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "llama": LLAMA,
    "qwen2": LLAMA | dict(qkv_bias=True),
    "scaled, learned positions": dict(
        arch="decoder", n_decoder_layers=2, embed_scale=True, positions="learned"
    ),
}
IDS, SRC = [1, 5, 3, 7, 2, 9, 4], [4, 2, 8, 11, 6]


def heads(trace) -> list[str]:
    return sorted({n.rsplit(".", 1)[0] for n in trace.names() if n.endswith(".scores")})


def reference_trace(cfg, p):
    with tracing() as trace:
        if cfg.arch == "encoder":
            (R.classify if cfg.n_classes else R.encoder)(p, cfg, IDS)
        else:
            R.forward(p, cfg, IDS, src_ids=SRC if cfg.arch == "encoder-decoder" else None)
    return trace


def torch_trace(cfg, p):
    torch = pytest.importorskip("torch")
    from glassformer.torch_model import from_params

    model = from_params(cfg, p)
    with torch.no_grad(), tracing() as trace:
        src = torch.tensor([SRC]) if cfg.arch == "encoder-decoder" else None
        model(torch.tensor([IDS]), src_ids=src)
    return trace


@pytest.mark.parametrize("engine", [reference_trace, torch_trace], ids=["reference", "torch"])
@pytest.mark.parametrize("name", CONFIGS)
def test_the_table_adds_up_to_the_score_for_every_head(name, engine):
    cfg = Config(**(SMALL | CONFIGS[name]))
    p = weights.init(cfg, seed=4, std=0.4)
    trace = engine(cfg, p)
    found = heads(trace)
    assert len(found) >= 2 * cfg.n_heads
    for head in found:
        scores = np.asarray(trace[head + ".scores"])
        T, S = scores.shape
        for i, j in {(0, 0), (T - 1, 0), (T - 1, S - 1), (T // 2, S // 3)}:
            t = decompose(trace, p, cfg, head, i, j)
            assert abs(t.total - scores[i, j]) <= TOL * max(1.0, abs(scores[i, j])), (head, i, j)
            assert t.table.shape == (len(t.rows), len(t.cols))


def test_the_parts_are_named_and_the_weight_is_the_maps():
    cfg = Config(**(SMALL | CONFIGS["encoder-decoder"]))
    p = weights.init(cfg, seed=4, std=0.4)
    trace = reference_trace(cfg, p)
    t = decompose(trace, p, cfg, "decoder.1.cross_attn.head2", 3, 1)
    # queries: the decoder's embeddings, block 0, block 1's self-attention; keys: the encoder's
    assert t.rows[:2] == ["tokens", "positions"] and "decoder.1.self_attn.head3" in t.rows
    assert "decoder.1.ffn" not in t.rows and t.rows[-1] == "bias"
    assert "encoder.1.ffn" in t.cols and not any(c.startswith("decoder") for c in t.cols)
    A = np.asarray(trace["decoder.1.cross_attn.head2.A"])
    assert t.weight == pytest.approx(A[3, 1], abs=1e-15)
    (a, b, v, without), *_ = t.top(1)
    assert abs(v) == np.abs(t.table).max()
    row = np.asarray(trace["decoder.1.cross_attn.head2.scaled"])[3].copy()
    row[1] -= v / np.sqrt(cfg.head_dim)
    assert without == pytest.approx(R.softmax(row)[1], abs=1e-15)  # A[3, 1] without that entry


@pytest.mark.parametrize(
    "folder, text", [("en-es", "Where is the station?"), ("char-lm", "ROMEO:")]
)
def test_the_shipped_models(folder, text):
    m = load(ROOT / "models" / folder)
    trace = m.trace(text, quiet=True)
    for head in heads(trace)[:: max(1, len(heads(trace)) // 12)]:
        scores = np.asarray(trace[head + ".scores"])
        i, j = scores.shape[0] - 1, 0
        t = decompose(trace, m.params, m.cfg, head, i, j)
        assert abs(t.total - scores[i, j]) <= TOL * max(1.0, abs(scores[i, j])), head


@pytest.mark.parametrize(
    "head, i, j, says",
    [
        ("decoder.0.self_attn", 0, 0, "is not a head"),
        ("decoder.7.self_attn.head0", 0, 0, "the trace has no decoder.7.self_attn.head0.scores"),
        ("decoder.0.self_attn.head1", 9, 0, "query 9, key 0: decoder.0.self_attn.head1 has 7"),
    ],
)
def test_what_it_cannot_split_is_refused(head, i, j, says):
    cfg = Config(**(SMALL | CONFIGS["decoder"]))
    p = weights.init(cfg, seed=4, std=0.4)
    with pytest.raises(GlassformerError, match=None) as e:
        decompose(reference_trace(cfg, p), p, cfg, head, i, j)
    assert says in str(e.value)


def test_a_post_ln_model_is_refused_with_why():
    cfg = Config(**(SMALL | CONFIGS["decoder"] | dict(norm="post")))
    p = weights.init(cfg, seed=4, std=0.4)
    with pytest.raises(GlassformerError, match="needs a pre-LN model"):
        decompose(reference_trace(cfg, p), p, cfg, "decoder.1.self_attn.head0", 2, 1)


# -- Model.qk: the same table from a Model's text -------------------------------------------------


def test_model_qk_splits_the_score_of_the_head_s_strongest_key():
    from glassformer import load

    m = load(Path(__file__).resolve().parents[1] / "models" / "en-es")
    run = m.run("Hello world.", quiet=True)
    head = "decoder.1.cross_attn.head0"
    A, scores = np.asarray(run.trace[f"{head}.A"]), np.asarray(run.trace[f"{head}.scores"])
    r = m.qk("Hello world.", head, query=2)
    d = r.to_dict()
    assert (d["i"], d["j"]) == (2, int(A[2].argmax()))  # by default where it looks most
    assert d["score"] == pytest.approx(scores[2, d["j"]], abs=1e-12)
    assert sum(map(sum, d["table"])) == pytest.approx(d["score"], abs=1e-10)
    assert d["weight"] == pytest.approx(A[2, d["j"]], abs=1e-12)
    assert (r.query_token, r.key_token) == ("ola", "␣world")  # a cross-attention key: the source
    assert d["source"] == ["␣H", "ello", "␣world", "."]
    own = m.qk("Hello world.", "decoder.0.self_attn.head1", query=-1, key=0).to_dict()
    assert own["j"] == 0 and own["key_token"] == "<s>" and "source" in own


@pytest.mark.parametrize(
    "head, options, says",
    [
        ("nope", {}, "head='nope' is not a head: name one as STACK.LAYER.KIND.headH"),
        ("decoder.9.self_attn.head0", {}, "head='decoder.9.self_attn.head0' is not in this model"),
        ("decoder.1.cross_attn.head0", dict(query=40), "query=40: decoder.1.cross_attn.head0 has"),
        ("decoder.1.cross_attn.head0", dict(key=9), "key=9: decoder.1.cross_attn.head0 reads 4"),
    ],
)
def test_model_qk_refuses_in_one_line(head, options, says):
    from glassformer import load
    from glassformer.errors import InputError

    m = load(Path(__file__).resolve().parents[1] / "models" / "en-es")
    with pytest.raises(InputError) as e:
        m.qk("Hello world.", head, **options)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_command_prints_the_table_and_writes_json(capsys, tmp_path):
    import json

    from glassformer import load
    from glassformer.cli import main

    en_es = str(Path(__file__).resolve().parents[1] / "models" / "en-es")
    head = "decoder.1.cross_attn.head0"
    out = tmp_path / "qk.json"
    assert main(["qk", en_es, "Hello world.", head, "--query", "2", "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == load(en_es).qk("Hello world.", head, query=2).to_dict()
    assert main(["qk", en_es, "Hello world.", head, "--query", "2"]) == 0
    text = capsys.readouterr().out
    assert f"{head}: query 2 (ola) -> key 2 (␣world)" in text and "(error " in text
    assert main(["qk", en_es, "Hello world.", head, "--key", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--key 7: {head} reads 4 keys" in err[0], err
