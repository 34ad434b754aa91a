"""Interventions: `trace.intervene` replaces a step by name in both engines, and the two engines
agree under every replacement (float64, 1e-10), as they agree without one (test_parity.py).

The value function sees what its engine taps: a NumPy array of one sequence in the reference
engine, the batched tensor in the PyTorch engine; the functions used here work on both."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import reference as R  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402
from glassformer.trace import intervene, tracing  # noqa: E402

TOL = 1e-10
BASE = dict(vocab_size=13, d_model=8, n_heads=2, head_dim=5, d_ff=12, max_len=12)
ARCHS = {
    "decoder-pre": dict(arch="decoder", n_decoder_layers=2, norm="pre"),
    "decoder-post": dict(arch="decoder", n_decoder_layers=2, norm="post", bias=False),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "encoder": dict(
        arch="encoder", n_encoder_layers=2, n_classes=3, embed_norm=True, type_vocab_size=2
    ),
}
IDS, SRC = [1, 5, 3, 7, 2, 9], [4, 2, 8, 6, 1]


def engines(arch: str):
    cfg = Config(**(BASE | ARCHS[arch]))
    p = weights.init(cfg, seed=1, std=0.4)
    return cfg, p, from_params(cfg, p)


def run_reference(p, cfg, ids=IDS, src=SRC):
    if cfg.arch == "encoder":
        return R.classify(p, cfg, ids)
    return R.forward(p, cfg, ids, src_ids=src if cfg.arch == "encoder-decoder" else None)


def run_torch(model, ids=IDS, src=SRC):
    cfg = model.cfg
    src_t = torch.tensor([src]) if cfg.arch == "encoder-decoder" else None
    with torch.no_grad():
        return model(torch.tensor([ids]), src_ids=src_t)[0].numpy()


def nudge(x):
    """A change that works on either engine's values: floats move, masks open up."""
    if x.dtype in (bool, torch.bool):
        return x | True
    return x * 1.5 + 0.25 * x * x  # not affine: a LayerNorm right after must not undo it


@pytest.mark.parametrize("arch", ARCHS)
def test_every_tapped_step_can_be_replaced_and_the_engines_agree(arch):
    """Each step alone: the replacement flows on (the output moves, so every tap site computes
    with what `tap` returns) and both engines give the same output. The reference engine's
    LayerNorm internals (mean, std, normalized), which the fused torch op does not expose, are
    checked in the reference engine alone."""
    cfg, p, model = engines(arch)
    plain = run_reference(p, cfg)
    with tracing() as ref:
        run_reference(p, cfg)
    with tracing() as tor:
        run_torch(model)
    terminal = {"probs"}  # computed from the logits, after them
    checked = 0
    for name in ref.names():
        if name in terminal:
            continue
        with intervene({name: nudge}) as swap:
            want = run_reference(p, cfg)
        assert swap.matched == [name]
        assert np.abs(want - plain).max() > 1e-9, f"replacing {name} changed nothing"
        if name in tor:
            with intervene({name: nudge}):
                got = run_torch(model)
            np.testing.assert_allclose(got, want, atol=TOL, rtol=0, err_msg=name)
            checked += 1
        else:
            assert name.rsplit(".", 1)[-1] in ("mean", "std", "normalized"), name
    assert checked == len([n for n in tor.names() if n not in terminal]) > 30


def test_globs_batches_and_the_recorded_replacement():
    """A glob matches every name it covers; the torch function sees the whole batch (each
    sequence replaced); a trace taken inside shows the replaced value."""
    cfg, p, model = engines("decoder-pre")
    seen = []

    def zero_and_look(x):
        seen.append(tuple(x.shape))
        return x * 0

    with intervene({"decoder.*.self_attn.head1.C": zero_and_look}) as swap, tracing() as tr:
        want = run_reference(p, cfg)
    assert swap.matched == ["decoder.0.self_attn.head1.C", "decoder.1.self_attn.head1.C"]
    assert seen == [(6, 5), (6, 5)]
    assert not tr["decoder.1.self_attn.head1.C"].any()
    assert not tr["decoder.1.self_attn.concat"][:, 5:].any()
    seen.clear()
    batch = torch.tensor([IDS, IDS[::-1]])
    with torch.no_grad(), intervene({"decoder.*.self_attn.head1.C": zero_and_look}):
        got = model(batch).numpy()
    assert seen == [(2, 6, 5), (2, 6, 5)]
    np.testing.assert_allclose(got[0], want, atol=TOL, rtol=0)
    with intervene({"decoder.*.self_attn.head1.C": lambda x: x * 0}):
        np.testing.assert_allclose(got[1], run_reference(p, cfg, IDS[::-1]), atol=TOL, rtol=0)
    # outside the block nothing is replaced, and a key that matches nothing is reported
    np.testing.assert_allclose(run_torch(model), run_reference(p, cfg), atol=TOL, rtol=0)
    with intervene({"decoder.7.ffn.out": nudge, "decoder.0.ffn.out": nudge}) as swap:
        run_reference(p, cfg)
    assert swap.unmatched() == ["decoder.7.ffn.out"]


def test_gradients_flow_through_the_replacement():
    """With gradients on (the fused-projection training path), a replacement is part of the
    graph: the gradient reaching a head's value weights through C -> 2·C equals the reference
    engine's finite difference under the same intervention, and C -> 0·C cuts it off."""
    cfg, p, model = engines("decoder-pre")
    name, key = "decoder.1.self_attn.head0.C", "decoder.layers.1.self_attn.v.weight"
    v = model.decoder.layers[1].self_attn.v.weight  # head 0 owns rows 0..4

    def grad(fn):
        model.zero_grad()
        with intervene({name: fn}):
            out = model(torch.tensor([IDS]))
            np.testing.assert_allclose(
                out[0].detach().numpy(), run_reference(p, cfg), atol=TOL, rtol=0
            )
        out[0, -1, 3].backward()
        return v.grad.clone()

    def finite_difference(fn, i, j, h=1e-5):
        values = []
        for sign in (1, -1):
            q = dict(p)
            q[key] = p[key].copy()
            q[key][i, j] += sign * h
            with intervene({name: fn}):
                values.append(run_reference(q, cfg)[-1, 3])
        return (values[0] - values[1]) / (2 * h)

    g2, g0 = grad(lambda x: 2.0 * x), grad(lambda x: x * 0)
    assert g2[:5].abs().max() > 1e-3
    for i, j in [(0, 0), (2, 5), (4, 7)]:
        assert abs(float(g2[i, j]) - finite_difference(lambda x: 2.0 * x, i, j)) < 1e-8
    assert g0[:5].abs().max() == 0.0
