"""The logit lens and direct logit attribution: exact against the model's own logits, in the
traces of both engines."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
from glassformer.inspect import lens  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.trace import Trace, intervene, tracing  # noqa: E402

BASE = dict(vocab_size=13, d_model=8, n_heads=2, head_dim=5, d_ff=12, max_len=12, bias=True)
ARCHS = {
    "decoder": dict(arch="decoder", n_decoder_layers=3),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
}
IDS, SRC = [1, 5, 3, 7, 2, 9], [4, 2, 8]


def model_and_runs(arch, **kw):
    cfg = Config(**(BASE | ARCHS[arch] | kw))
    p = weights.init(cfg, seed=2, std=0.5)
    inp = (SRC, IDS) if cfg.arch == "encoder-decoder" else IDS
    return cfg, p, inp, (I.reference_run(p, cfg), I.torch_run(from_params(cfg, p)))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_the_last_row_of_the_logit_lens_is_the_models_logits(arch, norm):
    cfg, p, inp, runs = model_and_runs(arch, norm=norm, logits_bias=True)
    tables = []
    for run in runs:
        logits, trace = I.record(run, inp)
        table = lens.logit_lens(trace, p, cfg, k=4, sublayers=True)
        L, k_last = cfg.n_decoder_layers, 3 if arch == "encoder-decoder" else 2
        assert table.logits.shape == (1 + L * k_last, len(IDS), cfg.vocab_size)
        assert table.points[0] == "decoder.input" and table.points[-1] == f"decoder.{L - 1}.out"
        np.testing.assert_allclose(table.logits[-1], logits, atol=1e-12, rtol=0)
        np.testing.assert_array_equal(table.top_ids[-1], np.argsort(-logits, -1)[:, :4])
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        np.testing.assert_allclose(table.top_probs[-1, :, 0], probs.max(-1), atol=1e-12)
        tables.append(table)
    ref, tor = tables
    np.testing.assert_array_equal(ref.logits[-1], runs[0](inp))  # the reference engine: bitwise
    np.testing.assert_allclose(tor.logits, ref.logits, atol=1e-10, rtol=0)
    assert set(ref.to_dict([str(i) for i in range(13)])) >= {"points", "top_ids", "top_tokens"}


@pytest.mark.parametrize("arch", ARCHS)
def test_direct_logit_attribution_adds_up_to_the_logit(arch):
    """The parts' shares plus β·w and the output bias equal the logit difference; for the last
    block's last attention sublayer, a head's share is exactly the change of the frozen-scale
    logit when the head is ablated and the FFN after it is held at its clean output."""
    cfg, p, inp, runs = model_and_runs(arch, norm="pre", logits_bias=True)
    token, versus = 3, 7
    L = cfg.n_decoder_layers
    gamma, beta = p["decoder.norm.weight"], p["decoder.norm.bias"]
    W = p["decoder.tok_embed.weight"] if cfg.tie_embeddings else p["lm_head.weight"]
    w = W[token] - W[versus]
    tables = []
    for run in runs:
        _, trace = I.record(run, inp)
        d = lens.direct_logit_attribution(trace, p, cfg, token, versus)
        assert abs(d.total - d.logit) < 1e-12
        assert d.heads.shape == (L * (2 if arch == "encoder-decoder" else 1), cfg.n_heads)
        assert "output bias" in d.other and f"{L - 1}.ffn" in d.other
        x = trace[f"decoder.{L - 1}.out"][-1]

        def frozen(r, sigma=d.scale):  # the logit difference, final LayerNorm's σ of this run
            return float(((r - r.mean()) / sigma * gamma + beta) @ w)

        kind = "cross_attn" if arch == "encoder-decoder" else "self_attn"  # the last row
        keep_ffn = I.patch(trace, f"decoder.{L - 1}.ffn.out")  # the head's part alone changes
        for h in range(cfg.n_heads):
            with intervene(I.ablate_head(L - 1, h, kind=kind) | keep_ffn):
                with tracing() as ablated:
                    run(inp)
            effect = frozen(x) - frozen(ablated[f"decoder.{L - 1}.out"][-1])
            assert abs(effect - d.heads[-1, h]) < 1e-12
        tables.append(d)
    np.testing.assert_allclose(tables[1].heads, tables[0].heads, atol=1e-10, rtol=0)


def test_lens_and_attribution_say_what_they_need():
    cfg, p, inp, (ref, _) = model_and_runs("decoder", norm="post")
    _, trace = I.record(ref, inp)
    with pytest.raises(GlassformerError, match="pre-LN"):
        lens.direct_logit_attribution(trace, p, cfg, 1)
    with pytest.raises(GlassformerError, match="record"):
        lens.logit_lens(Trace(), p, cfg)
    enc = Config(**(BASE | dict(arch="encoder", n_encoder_layers=1, n_classes=2)))
    with pytest.raises(GlassformerError, match="encoder model"):
        lens.logit_lens(trace, weights.init(enc), enc)
