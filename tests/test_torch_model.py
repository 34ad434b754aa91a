"""The PyTorch engine beyond parity: KV cache == recomputation, gradients (gradcheck), masked
rows, dtypes, dropout."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import weights  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.decoding import beam_search, greedy, sample  # noqa: E402
from glassformer.torch_model import (  # noqa: E402
    Block,
    KVCache,
    MultiHeadAttention,
    Transformer,
    from_params,
    inference_layout,
)
from glassformer.torch_steps import step_fn  # noqa: E402

BASE = dict(vocab_size=17, d_model=16, n_heads=4, d_ff=32, max_len=24)
DEC = Config(
    **BASE,
    arch="decoder",
    n_decoder_layers=2,
    positions="learned",
    norm="pre",
    activation="gelu_tanh",
    tie_embeddings=True,
)
ENCDEC = Config(**BASE, arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2)
ENC = Config(**BASE, arch="encoder", n_encoder_layers=2, n_classes=3)


def model_of(cfg, dtype=torch.float32, seed=0):
    return from_params(cfg, weights.init(cfg, seed=seed, std=0.3), dtype=dtype).eval()


@pytest.mark.parametrize("cfg", [DEC, ENCDEC], ids=["decoder", "encoder-decoder"])
def test_kv_cache_equals_full_recomputation_at_every_step(cfg):
    model = model_of(cfg)
    src = torch.tensor([[3, 4, 5, 6]]) if cfg.arch == "encoder-decoder" else None
    ids = torch.tensor([[1, 7, 2]])
    cache = KVCache.empty(cfg.n_decoder_layers)
    with torch.no_grad():
        new = ids
        for step in range(10):
            cached = model(new, src_ids=src, cache=cache, last_only=True)[0, -1]
            full = model(ids, src_ids=src)[0, -1]
            assert torch.allclose(cached, full, atol=1e-5, rtol=0), step
            nxt = int(torch.argmax(full))
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
            new = torch.tensor([[nxt]])
    assert cache.length == ids.shape[1] - 1
    if cfg.arch == "encoder-decoder":
        assert cache.cross_k[0] is not None and cache.memory is not None  # computed once


@pytest.mark.parametrize("cfg", [DEC, ENCDEC], ids=["decoder", "encoder-decoder"])
def test_cached_decoding_equals_uncached(cfg):
    model = model_of(cfg)
    src = [3, 4, 5] if cfg.arch == "encoder-decoder" else None
    cached, plain = step_fn(model, src, use_cache=True), step_fn(model, src, use_cache=False)
    assert greedy(cached, [1], 12).ids == greedy(plain, [1], 12).ids
    assert sample(cached, [1], 12, seed=3).ids == sample(plain, [1], 12, seed=3).ids
    b1 = beam_search(cached, [1], 8, eos_id=2, width=3)
    b2 = beam_search(plain, [1], 8, eos_id=2, width=3)
    assert b1.ids == b2.ids and b1.best.logprob == pytest.approx(b2.best.logprob, abs=1e-4)
    assert beam_search(cached, [1], 8, eos_id=2, width=1).ids == greedy(plain, [1], 8, 2).ids


def test_gradcheck_attention():
    cfg = Config(**BASE, arch="decoder")
    attn = MultiHeadAttention(cfg).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(2, 4, 16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: attn(a, a, causal=True)[0], (x,))
    assert torch.autograd.gradcheck(lambda a, b: attn(a, b)[0], (x, kv))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_gradcheck_block(norm):
    cfg = Config(**BASE, arch="encoder-decoder", norm=norm, activation="gelu")
    block = Block(cfg, cross=True).double()
    x = torch.randn(1, 4, 16, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(1, 3, 16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, m: block(a, causal=True, memory=m), (x, mem))


@pytest.mark.parametrize("cfg", [DEC, ENCDEC, ENC], ids=["decoder", "encoder-decoder", "encoder"])
def test_gradcheck_whole_model(cfg):
    small = Config(
        **(
            cfg.to_dict()
            | dict(
                d_model=8,
                n_heads=2,
                head_dim=4,
                d_ff=8,
                n_encoder_layers=min(cfg.n_encoder_layers, 1),
                n_decoder_layers=min(cfg.n_decoder_layers, 1),
            )
        )
    )
    model = model_of(small, dtype=torch.float64)
    params = dict(model.named_parameters())
    names = list(params)
    ids = torch.tensor([[1, 2, 3]])
    src = torch.tensor([[4, 5]]) if small.arch == "encoder-decoder" else None

    def f(*tensors):
        out = torch.func.functional_call(
            model, dict(zip(names, tensors, strict=True)), (ids,), {"src_ids": src}
        )
        return out.sum()

    assert torch.autograd.gradcheck(f, tuple(p.detach().requires_grad_() for p in params.values()))


def test_fully_masked_query_row_gives_zeros_and_finite_gradients():
    cfg = Config(**BASE, arch="decoder")
    attn = MultiHeadAttention(cfg).double()
    x = torch.randn(1, 3, 16, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    for explicit in (False, True):
        attn.explicit = explicit
        z, _, _ = attn(x, x, mask[None, None])
        concat = attn.o.bias.expand(3, -1)  # a row of zeros projects to the output bias
        assert torch.allclose(z[0, 1], concat[1])
        z.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


def test_padding_rows_do_not_leak_into_real_tokens():
    model = model_of(ENC, dtype=torch.float64)
    ids = torch.tensor([[5, 6, 7, 0, 0]])
    valid = torch.tensor([[True, True, True, False, False]])
    with torch.no_grad():
        a = model(ids, valid=valid)
        b = model(torch.tensor([[5, 6, 7, 9, 9]]), valid=valid)
    assert torch.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_dtypes_track_float64(dtype):
    ref = model_of(DEC, dtype=torch.float64)
    low = model_of(DEC, dtype=dtype)
    ids = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, got = ref(ids), low(ids)
    assert got.dtype == dtype
    err = (got.double() - want).abs().max().item()
    assert err < (1e-5 if dtype == torch.float32 else 0.1), err


def test_dropout_only_in_training_mode():
    cfg = DEC
    model = Transformer(cfg, dropout=0.5)
    ids = torch.tensor([[1, 2, 3, 4]])
    model.eval()
    with torch.no_grad():
        a, b = model(ids), model(ids)
    assert torch.equal(a, b)
    model.train()
    torch.manual_seed(0)
    c = model(ids)
    assert not torch.allclose(a, c)
    assert np.isfinite(c.detach().numpy()).all()


def test_causal_and_padding_masks_combine():
    """A padding mask given with causal=True keeps the causal mask (both are applied)."""
    cfg = Config(**BASE, arch="decoder")
    attn = MultiHeadAttention(cfg).double()
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    all_valid = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    for explicit in (False, True):
        attn.explicit = explicit
        a = attn(x, x, causal=True)[0]
        b = attn(x, x, all_valid, causal=True)[0]
        assert torch.allclose(a, b, atol=1e-12)


def test_kv_cache_with_padding_equals_uncached():
    """Right-padded batch decoded with a cache: real positions match the uncached forward."""
    model = model_of(DEC, dtype=torch.float64)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6], [7, 8, 9, 0, 0, 0]])
    valid = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    with torch.no_grad():
        full = model(ids, valid=valid)
        cache = KVCache.empty(DEC.n_decoder_layers)
        first = model(ids[:, :4], valid=valid[:, :4], cache=cache)
        rest = model(ids[:, 4:], valid=valid[:, 4:], cache=cache)
    got = torch.cat([first, rest], dim=1)
    for b, n in enumerate((6, 3)):
        assert torch.allclose(got[b, :n], full[b, :n], atol=1e-10)


@pytest.mark.parametrize("cfg", [DEC, ENCDEC], ids=["decoder", "encoder-decoder"])
def test_batched_beam_scoring_equals_one_at_a_time(cfg):
    from glassformer.torch_steps import many_step_fn

    model = model_of(cfg)
    src = [3, 4, 5] if cfg.arch == "encoder-decoder" else None
    one = beam_search(step_fn(model, src), [1], 8, eos_id=2, width=3)
    many = beam_search(
        step_fn(model, src), [1], 8, eos_id=2, width=3, step_many=many_step_fn(model, src)
    )
    assert many.ids == one.ids
    assert many.best.logprob == pytest.approx(one.best.logprob, abs=1e-4)


def test_a_fully_masked_input_pools_to_zeros_in_both_engines():
    """A classifier input whose every token is padding: pooled = 0 (the head's bias), not NaN."""
    from glassformer import reference as R
    from glassformer import weights
    from glassformer.torch_model import from_params

    cfg = ENC
    p = weights.init(cfg, seed=3, std=0.3)
    p["classifier.bias"] = np.arange(cfg.n_classes, dtype=np.float64)
    model = from_params(cfg, p)
    with torch.no_grad():
        logits = model(torch.tensor([[5, 6, 7]]), valid=torch.zeros(1, 3, dtype=torch.bool))
    ref = R.classify(p, cfg, [5, 6, 7], valid=np.zeros(3, bool))
    np.testing.assert_array_equal(logits[0].numpy(), p["classifier.bias"])
    np.testing.assert_array_equal(ref, p["classifier.bias"])


@pytest.mark.parametrize("cfg", [DEC, ENCDEC, ENC], ids=["decoder", "encoder-decoder", "encoder"])
def test_inference_layout_keeps_the_weights_and_the_outputs(cfg):
    """The inference layout only changes how weights lie in memory: the same state_dict (names,
    shapes, values), the same outputs (float64, cached decoding too), Wq/Wk/Wv views into one
    fused array, and none of that in state_dict."""
    plain = model_of(cfg, torch.float64)
    fast = inference_layout(model_of(cfg, torch.float64))
    a, b = plain.state_dict(), fast.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[n], b[n]) for n in a)
    attn = (
        fast.encoder.layers[0].self_attn
        if cfg.arch == "encoder"
        else fast.decoder.layers[0].self_attn
    )
    assert attn.q.weight.data_ptr() == attn.qkv_t.data_ptr()  # a view, no second copy
    assert attn.k.weight.data_ptr() == attn.qkv_t.data_ptr() + cfg.attn_dim * 8
    assert attn.q.weight.stride() == (1, 3 * cfg.attn_dim)  # (in, out) in memory
    ids = torch.tensor([[1, 7, 2, 9, 4]])
    src = torch.tensor([[3, 4, 5, 6]]) if cfg.arch == "encoder-decoder" else None
    with torch.no_grad():
        assert torch.allclose(plain(ids, src_ids=src), fast(ids, src_ids=src), atol=1e-12, rtol=0)
    if cfg.arch != "encoder":
        srcl = None if src is None else src[0].tolist()
        got = greedy(step_fn(fast, srcl), [1], 12)
        want = greedy(step_fn(plain, srcl, use_cache=False), [1], 12)
        assert got.ids == want.ids
        assert np.allclose(got.chosen_probs, want.chosen_probs, atol=1e-10, rtol=0)


def test_inference_layout_is_what_the_inference_engine_uses():
    from glassformer.inference import torch_engine

    model = torch_engine(DEC, weights.init(DEC, seed=0), "float32")
    assert model.decoder.layers[0].self_attn.qkv_t is not None
    assert not model.decoder.tok_embed.weight.is_contiguous()  # the tied head, (in, out) in memory


def _cache(n_layers: int = 2, B: int = 3, cross: bool = True) -> KVCache:
    """A cache whose every field holds distinct rows (cross False: a decoder's, no encoder)."""
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(B, *shape, generator=g)

    def layers(*shape):
        return [t(*shape) if cross else None for _ in range(n_layers)]

    return KVCache(
        self_k=[t(2, 5, 4) for _ in range(n_layers)],
        self_v=[t(2, 5, 4) for _ in range(n_layers)],
        cross_k=layers(2, 6, 4),
        cross_v=layers(2, 6, 4),
        memory=t(6, 8) if cross else None,
        memory_valid=t(6) > 0 if cross else None,
        self_valid=t(5) > 0,
        length=5,
        pad_left=torch.tensor([0, 2, 1][:B]),
    )


ENCODER_FIELDS = {"cross_k", "cross_v", "memory", "memory_valid"}


@pytest.mark.parametrize("cross", [True, False])
@pytest.mark.parametrize("encoder", [True, False], ids=["encoder-decoder", "decoder"])
def test_kv_cache_row_selection_covers_every_field(cross, encoder):
    """KVCache owns its fields: select_rows keeps (and repeats) the rows `index` of every cached
    tensor, the encoder's only with cross=True. The fields are enumerated from the dataclass, so a
    field added and forgotten by select_rows fails here. Oracle: index_select on each field."""
    import dataclasses

    cache, index = _cache(cross=encoder), torch.tensor([2, 0, 0])
    chosen = cache.copy()
    chosen.select_rows(index, cross=cross)
    for f in dataclasses.fields(KVCache):
        before, after = getattr(cache, f.name), getattr(chosen, f.name)
        if f.name == "length":
            assert after == before
            continue
        moved = cross or f.name not in ENCODER_FIELDS
        for x, y in zip(
            *((v if isinstance(v, list) else [v]) for v in (before, after)), strict=True
        ):
            if x is None:  # a decoder's cache has no encoder rows
                assert y is None and not encoder and f.name in ENCODER_FIELDS
                continue
            assert isinstance(x, torch.Tensor), f.name  # every other field is a cached tensor
            assert torch.equal(y, x.index_select(0, index) if moved else x), f.name


def test_kv_cache_copy_grows_apart_and_shares_the_tensors():
    """copy: the same values in every field (the very tensors, never copied), per-layer lists of
    its own, so that a hypothesis grown from it leaves its parent's cache as it was."""
    import dataclasses

    cache = _cache()
    child = cache.copy()
    for f in dataclasses.fields(KVCache):
        a, b = getattr(cache, f.name), getattr(child, f.name)
        if isinstance(a, list):
            assert a is not b and all(x is y for x, y in zip(a, b, strict=True)), f.name
        else:
            assert a is b or a == b, f.name
    kept = cache.self_k[0]
    child.self_k[0], child.cross_v[1] = None, None
    assert cache.self_k[0] is kept and cache.cross_v[1] is not None


def test_the_engine_finds_no_mode_by_name():
    """One name, one meaning (docs/design.md): torch_model.py (and its layers, torch_layers.py)
    declares its forms and optional parts; it finds none with hasattr, getattr or setattr, and
    every form's slot is declared on a fresh model."""
    import ast
    import inspect

    from glassformer import torch_layers, torch_model

    found = [
        (module.__name__, node.lineno, node.func.id)
        for module in (torch_model, torch_layers)
        for top in ast.parse(inspect.getsource(module)).body
        for node in ast.walk(top)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr", "setattr")
    ]
    assert not found, found
    fresh = Transformer(ENCDEC)
    assert fresh.output_head is None and fresh.classifier is None
    attns = [m for m in fresh.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attns) == 6 and all(m.qkv_t is None and m.qkv_b is None for m in attns)
    assert fresh.encoder.type_embed is None and fresh.encoder.embed_norm is None
