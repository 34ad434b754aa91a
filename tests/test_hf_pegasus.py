"""Pegasus tensors <-> glassformer: every supported Config maps both ways against
PegasusForConditionalGeneration with random weights (logits to 1e-5 in float32 and 1e-10 in
float64; tensors and Config back bit for bit). Nothing is downloaded.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from glassformer import hf_pegasus, reference, weights  # noqa: E402
from glassformer.config import preset  # noqa: E402

SMALL = ("d_model=16", "d_ff=24", "n_heads=2", "max_len=12", "n_encoder_layers=2")
SMALL += ("n_decoder_layers=2", "vocab_size=40")
POSITIONS = ("sinusoidal", "sinusoidal_split", "learned", "none")
COMBOS = list(itertools.product(POSITIONS, (True, False), (True, False), (False, True)))
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def random_params(cfg, seed: int) -> dict[str, np.ndarray]:
    """Every tensor redrawn (biases and LayerNorm gains too), float32 values in float64 arrays:
    what a float32 file holds, so that a round trip through one is bit-exact."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, x in weights.init(cfg, seed=seed, std=0.3).items():
        noise = rng.normal(0.0, 0.1 if name.endswith("bias") or ".norm" in name else 0.0, x.shape)
        out[name] = (x + noise).astype(np.float32).astype(np.float64)
    return out


def small(positions="sinusoidal", share=True, tie=True, logits_bias=False, *more):
    sets = (f"positions={positions}", f"share_embeddings={share}", f"tie_embeddings={tie}")
    return preset("translator").override(*SMALL, *sets, f"logits_bias={logits_bias}", *more)


def hf_model(cfg, state: dict, dtype):
    fields = hf_pegasus.config_to_pegasus(cfg)
    fields = {k: v for k, v in fields.items() if k not in ("model_type", "architectures")}
    config = transformers.PegasusConfig(**fields, pad_token_id=2, decoder_start_token_id=2)
    model = transformers.PegasusForConditionalGeneration(config).to(dtype).eval()
    tensors = {k: torch.from_numpy(np.asarray(v)).to(dtype) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # What the folder leaves out is what transformers ties, or a logits bias that is absent.
    allowed = {hf_pegasus.PEGASUS_BIAS} if not cfg.lm_bias else set()
    if hf_pegasus._tied(cfg):
        allowed |= {hf_pegasus.PEGASUS_HEAD, *hf_pegasus.PEGASUS_EMBED.values()}
    assert set(missing) <= allowed and not unexpected, (missing, unexpected)
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("positions,share,tie,logits_bias", COMBOS)
def test_every_supported_config_maps_both_ways(positions, share, tie, logits_bias, dtype):
    """PegasusForConditionalGeneration with our tensors gives our logits (a padded batch); the
    tensors and the PegasusConfig give back the same Config and the same tensors, bit for bit."""
    cfg = small(positions, share, tie, logits_bias)
    params = random_params(cfg, seed=len(positions) + 2 * share + 4 * tie)
    state = hf_pegasus.glassformer_to_pegasus(params, cfg)
    model = hf_model(cfg, state, dtype)
    src = [[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]]
    tgt = [[2, 11, 12, 13], [2, 14, 15, 16]]
    with torch.no_grad():
        want = model(
            input_ids=torch.tensor(src),
            attention_mask=torch.tensor([[1] * 5, [1] * 3 + [0] * 2]),
            decoder_input_ids=torch.tensor(tgt),
        ).logits.double()
    for b, n in enumerate((5, 3)):
        ref = reference.forward(params, cfg, tgt[b], src_ids=src[b][:n])
        err = float(np.abs(ref - want[b].numpy()).max())
        assert err < TOL[dtype], f"sequence {b}: max |diff| {err:.3g}"
    back_cfg = hf_pegasus.pegasus_config(model.config, state)
    # An untied head has a bias anyway (bias=True): logits_bias says nothing more there.
    assert back_cfg == (cfg if tie else cfg.override("logits_bias=false"))
    back = hf_pegasus.pegasus_to_glassformer(state, back_cfg)
    assert list(back) == list(params)
    assert all(np.array_equal(back[n], params[n]) for n in params)
