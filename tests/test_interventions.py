"""Interventions: `trace.intervene` replaces a step by name in both engines, and the two engines
agree under every replacement (float64, 1e-10), as they agree without one (test_parity.py).

The value function sees what its engine taps: a NumPy array of one sequence in the reference
engine, the batched tensor in the PyTorch engine; the functions used here work on both."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_parity import CASES  # noqa: E402

from glassformer import reference as R  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.formats import hf  # noqa: E402
from glassformer.inspect import interventions as I  # noqa: E402
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
    # nested blocks compose, the outer block's function first
    with intervene({"decoder.0.ffn.out": lambda x: x * 0}):
        with intervene({"decoder.0.ffn.out": lambda x: x + 1}):
            nested = run_reference(p, cfg)
    with intervene({"decoder.0.ffn.out": lambda x: x * 0 + 1}):
        np.testing.assert_array_equal(nested, run_reference(p, cfg))


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


# -- ready-made interventions and patching (glassformer.inspect.interventions) ---------------------


def runs(cfg, p):
    return I.reference_run(p, cfg), I.torch_run(from_params(cfg, p))


def ready_made(cfg):
    """Every ready-made intervention, on the stack that feeds the output."""
    stack = "encoder" if cfg.arch == "encoder" else "decoder"
    vector = np.linspace(-1.0, 1.0, cfg.d_model)
    out = {
        "zero head": I.ablate_head(1, 0, stack=stack),
        "mean head": I.ablate_head(0, 1, how="mean", stack=stack),
        "head at positions": I.ablate_head(1, 1, stack=stack, positions=[0, 2]),
        "zero attention": I.ablate_attention(0, stack=stack),
        "zero positions": I.ablate_position(1, [1, 3], stack=stack),
        "mean position": I.ablate_position(2, 4, how="mean", stack=stack),
        "scale attention": I.scale_attention(0, 1, 0.5, stack=stack),
        "set embedding": I.set_embedding(2, vector, stack=stack),
    }
    if cfg.d_ff:  # an attention-only model has no FFN to ablate
        out["mean ffn"] = I.ablate_ffn(1, how="mean", stack=stack)
    if cfg.arch == "encoder-decoder":
        out["cross head"] = I.ablate_head(1, 1, kind="cross_attn")
        out["encoder head"] = I.ablate_head(0, 0, stack="encoder")
    out["all at once"] = {k: v for fns in out.values() for k, v in fns.items()}
    return out


def case_input(cfg):
    return (SRC, IDS) if cfg.arch == "encoder-decoder" else IDS


@pytest.mark.parametrize("cfg", CASES)
def test_every_ready_made_intervention_agrees_in_both_engines(cfg):
    """Over every value of every Config option (test_parity's cases), each ready-made
    intervention changes the output and both engines give the same output."""
    p = weights.init(cfg, seed=1, std=0.4)
    ref, tor = runs(cfg, p)
    if cfg.arch == "encoder":  # a Run is a decoder's; an encoder's output is its own
        model = from_params(cfg, p)

        def ref(ids):
            return R.classify(p, cfg, ids) if cfg.n_classes else R.encoder(p, cfg, ids)

        def tor(ids):
            return run_torch(model, ids)

    plain = ref(case_input(cfg))
    for what, fns in ready_made(cfg).items():
        want = I.run_with(ref, case_input(cfg), fns)
        got = I.run_with(tor, case_input(cfg), fns)
        assert np.abs(want - plain).max() > 1e-9, what
        np.testing.assert_allclose(got, want, atol=TOL, rtol=0, err_msg=what)


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("bias", [True, False])
def test_ablating_every_head_is_removing_the_sublayer_output(norm, bias):
    """Zeroing C_h of every head of a layer gives concat = 0, so Z = b_O: the same run as one
    where the sublayer's output Z is replaced by its bias (zeroed without bias)."""
    cfg = Config(**(BASE | ARCHS["encoder-decoder"] | dict(norm=norm, bias=bias)))
    p = weights.init(cfg, seed=3, std=0.4)
    heads = {}
    for h in range(cfg.n_heads):
        heads |= I.ablate_head(1, h, kind="cross_attn")
    b = p.get("decoder.layers.1.cross_attn.o.bias")
    sublayer = (
        I.ablate_attention(1, kind="cross_attn")
        if b is None
        else {"decoder.1.cross_attn.Z": I.replace(b)}
    )
    for run in runs(cfg, p):
        got = I.run_with(run, (SRC, IDS), heads)
        np.testing.assert_array_equal(got, I.run_with(run, (SRC, IDS), sublayer))
        assert np.abs(got - run((SRC, IDS))).max() > 1e-6


@pytest.mark.parametrize("arch", ["decoder-pre", "decoder-post", "encoder-decoder"])
def test_patching_every_step_from_the_clean_run_gives_the_clean_logits_exactly(arch):
    cfg = Config(**(BASE | ARCHS[arch]))
    p = weights.init(cfg, seed=4, std=0.4)
    clean = (SRC, IDS) if cfg.arch == "encoder-decoder" else IDS
    corrupted = (SRC[::-1], IDS[:-2] + [0, 11]) if cfg.arch == "encoder-decoder" else IDS[::-1]
    for run in runs(cfg, p):
        logits, trace = I.record(run, clean)
        assert np.abs(run(corrupted) - logits).max() > 1e-3
        np.testing.assert_array_equal(I.run_with(run, corrupted, I.patch(trace, "*")), logits)
        # the residual stream's writers alone: embeddings, every head's C, every FFN output
        writers = ["*.input", "*.head*.C", "*.ffn.out"]
        np.testing.assert_array_equal(I.run_with(run, corrupted, I.patch(trace, writers)), logits)
        if cfg.arch == "encoder-decoder":  # a clean memory is a clean decoder
            got = I.run_with(run, (SRC[::-1], IDS), I.patch(trace, "encoder.output"))
            np.testing.assert_array_equal(got, logits)


def test_patch_tables_agree_in_both_engines_and_keep_their_invariants():
    cfg = Config(**(BASE | ARCHS["decoder-pre"]))
    p = weights.init(cfg, seed=5, std=0.6)
    clean, corrupted = [1, 5, 3, 7, 2, 9], [1, 5, 8, 7, 2, 9]  # position 2 differs
    metric = I.logit_diff(4, 6)
    tables = [
        (
            I.patch_heads(run, clean, corrupted, metric),
            I.patch_residual(run, clean, corrupted, metric),
        )
        for run in runs(cfg, p)
    ]
    (heads, resid), (theads, tresid) = tables
    assert heads.values.shape == (2, 2) and resid.values.shape == (3, 1, 6)
    assert heads.rows == ["layer 0", "layer 1"] and heads.cols == ["head 0", "head 1"]
    for a, b in ((heads, theads), (resid, tresid)):
        np.testing.assert_allclose(b.values, a.values, atol=1e-8, rtol=0)
        np.testing.assert_allclose(b.raw, a.raw, atol=TOL, rtol=0)
    # the token before the last block, at the metric's position, restores everything
    assert resid.values[-1, 0, -1] == 1.0
    # positions where the inputs agree carry the same embeddings: no effect before block 0
    assert not resid.values[0, 0, [0, 1, 3, 4, 5]].any()
    assert resid.values[0, 0, 2] == 1.0  # the differing token, patched, is the clean input
    per_position = I.patch_heads(runs(cfg, p)[0], clean, corrupted, metric, per_position=True)
    assert per_position.values.shape == (2, 2, 6)
    assert not per_position.values[0, :, :2].any()  # before the change a decoder sees no change
    assert set(heads.to_dict()) >= {"rows", "cols", "values", "clean", "corrupted", "names"}


def test_mean_of_and_errors_that_say_what_to_do():
    cfg = Config(**(BASE | ARCHS["decoder-pre"]))
    p = weights.init(cfg, seed=6, std=0.4)
    ref, _ = runs(cfg, p)
    traces = [I.record(ref, ids)[1] for ids in (IDS, IDS[::-1], [3, 3, 3])]
    name = "decoder.1.self_attn.head0.C"
    stacked = np.concatenate([t[name] for t in traces])
    np.testing.assert_allclose(I.mean_of(traces, name), stacked.mean(0), atol=1e-15)
    with pytest.raises(GlassformerError, match="decoder.5.ffn.out"):
        I.run_with(ref, IDS, I.ablate_ffn(5))
    with pytest.raises(GlassformerError, match="same length"):
        I.run_with(ref, IDS[:4], I.patch(traces[0], name))
    with pytest.raises(GlassformerError, match="same metric"):
        I.patch_heads(ref, IDS, IDS, I.logit_diff(1, 2))
    with pytest.raises(GlassformerError, match="'zero' or 'mean'"):
        I.ablate_head(0, 0, how="half")
    with pytest.raises(GlassformerError, match="outside"):
        I.run_with(ref, IDS, I.ablate_position(0, 9))


# -- an independent implementation: a forward hook on Hugging Face GPT-2 -------------------------


def test_head_ablation_equals_a_hook_on_hugging_face_gpt2():
    """Hugging Face GPT-2 (random weights from a config, float64) with a forward pre-hook that
    zeroes head h's slice of the input of `attn.c_proj` gives the logits of glassformer's
    ablate_head on the imported weights, in both engines."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_embd=32, n_head=4, n_layer=3, n_positions=16, vocab_size=50, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
        attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = transformers.GPT2LMHeadModel(config).eval().double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, t in theirs.named_parameters():
            noise = torch.randn(t.shape, generator=g, dtype=t.dtype) * 0.3
            t.copy_(1.0 + noise / 3 if t.ndim == 1 and name.endswith("weight") else noise)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    cfg = hf.gpt2_config(theirs.config)
    p = hf.gpt2_to_glassformer(state, cfg)
    ids = [int(i) for i in torch.randint(0, 50, (12,), generator=g)]
    D = cfg.head_dim
    for ablated in ([(1, 2)], [(0, 0), (2, 3), (2, 1)]):

        def zero_heads(layer, ablated=ablated):
            def hook(module, args):
                x = args[0].clone()
                for lay, h in ablated:
                    if lay == layer:
                        x[..., h * D : (h + 1) * D] = 0.0
                return (x,)

            return hook

        handles = [
            block.attn.c_proj.register_forward_pre_hook(zero_heads(i))
            for i, block in enumerate(theirs.transformer.h)
        ]
        with torch.no_grad():
            want = theirs(torch.tensor([ids])).logits[0].numpy()
        for handle in handles:
            handle.remove()
        fns = {k: v for lay, h in ablated for k, v in I.ablate_head(lay, h).items()}
        for run in runs(cfg, p):
            got = I.run_with(run, ids, fns)
            assert np.abs(got - want).max() < 1e-10
            assert np.abs(run(ids) - want).max() > 1e-3  # the ablation mattered
