"""Oracles from real libraries: torch attention and Transformer; Hugging Face GPT-2, BERT, Marian.

Every foreign model is built from a small config with random weights (nothing is downloaded);
all its parameters, biases and LayerNorm gains included, are re-drawn so that a mis-mapped
tensor changes the numbers. Weights are copied into glassformer (by hand for PyTorch, through
`glassformer.formats.hf` for Hugging Face) and the outputs are compared: 1e-5 in float32, 1e-10 in
float64.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from glassformer import reference  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import CheckpointError, ConfigError  # noqa: E402
from glassformer.formats import hf  # noqa: E402
from glassformer.torch_model import (  # noqa: E402
    MultiHeadAttention,
    Transformer,
    from_params,
    set_explicit,
)
from glassformer.trace import tracing  # noqa: E402
from glassformer.weights import spec  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
IMPLS = pytest.mark.parametrize("impl", ["eager", "sdpa"])


def close(ours, theirs, tol: float, what: str = "") -> None:
    ours = ours.detach().double().numpy() if isinstance(ours, torch.Tensor) else np.asarray(ours)
    theirs = theirs.detach().double().numpy() if isinstance(theirs, torch.Tensor) else theirs
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    err = float(np.max(np.abs(ours - theirs)))
    assert err <= tol, f"{what}: max |diff| = {err:.3g} > {tol:g}"


def randomize(module: nn.Module, seed: int, std: float = 0.3) -> None:
    """Redraw every parameter: gains of LayerNorms near 1, everything else N(0, std^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype) * std
            gain = p.ndim == 1 and name.endswith("weight")
            p.copy_(1.0 + noise / 3 if gain else noise)


def causal_additive(T: int, dtype) -> torch.Tensor:
    """Hugging Face's additive mask form: 0 where allowed, the dtype's minimum where not."""
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.zeros(T, T, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


def keys_additive(valid: torch.Tensor, dtype) -> torch.Tensor:
    """(B, S) real-token flags -> (B, 1, 1, S) additive mask."""
    return torch.zeros(valid.shape, dtype=dtype).masked_fill(~valid, torch.finfo(dtype).min)[
        :, None, None, :
    ]


def numpy_state(module: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


# -- 1. torch.nn.MultiheadAttention -------------------------------------------------------------

C_MHA, H_MHA = 12, 3  # head_dim 4


def mha_pair(dtype, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(C_MHA, H_MHA, bias=True, batch_first=True).to(dtype).eval()
    randomize(theirs, seed)
    cfg = Config(d_model=C_MHA, n_heads=H_MHA, head_dim=C_MHA // H_MHA, d_ff=8, bias=True)
    ours = MultiHeadAttention(cfg).to(dtype).eval()
    W, b = theirs.in_proj_weight, theirs.in_proj_bias  # rows: q | k | v
    with torch.no_grad():
        for j, proj in enumerate((ours.q, ours.k, ours.v)):
            proj.weight.copy_(W[j * C_MHA : (j + 1) * C_MHA])
            proj.bias.copy_(b[j * C_MHA : (j + 1) * C_MHA])
        ours.o.weight.copy_(theirs.out_proj.weight)
        ours.o.bias.copy_(theirs.out_proj.bias)
    return ours, theirs


def _inputs(dtype, B=2, T=5, S=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C_MHA, generator=g).to(dtype)
    kv = torch.randn(B, S, C_MHA, generator=g).to(dtype)
    ignore = torch.zeros(B, S, dtype=torch.bool)  # torch: True = ignore this key
    ignore[1, -3:] = True
    return x, kv, ignore


@DTYPES
@pytest.mark.parametrize("explicit", [False, True], ids=["sdpa", "explicit"])
@pytest.mark.parametrize("case", ["causal", "key_padding", "cross"])
def test_multihead_attention_matches_torch(dtype, explicit, case):
    ours, theirs = mha_pair(dtype)
    set_explicit(ours, explicit)
    x, kv, ignore = _inputs(dtype)
    T = x.shape[1]
    with torch.no_grad():
        if case == "causal":
            future = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
            want, _ = theirs(x, x, x, attn_mask=future, need_weights=False)
            got, _, _ = ours(x, x, causal=True)
        elif case == "key_padding":
            x = kv  # self-attention over the padded sequence
            want, _ = theirs(x, x, x, key_padding_mask=ignore, need_weights=False)
            got, _, _ = ours(x, x, mask=~ignore[:, None, None, :])  # ours: True = may attend
        else:
            want, _ = theirs(x, kv, kv, key_padding_mask=ignore, need_weights=False)
            got, _, _ = ours(x, kv, mask=~ignore[:, None, None, :])
    close(got, want, TOL[dtype], f"MHA {case}")


@DTYPES
@pytest.mark.parametrize("case", ["causal", "cross"])
def test_attention_weights_match_torch(dtype, case):
    """need_weights=True, average_attn_weights=False: (B, H, T, S) against our traced head*.A."""
    ours, theirs = mha_pair(dtype, seed=3)
    x, kv, ignore = _inputs(dtype, seed=4)
    T = x.shape[1]
    with torch.no_grad():
        if case == "causal":
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            _, A = theirs(x, x, x, attn_mask=future, average_attn_weights=False)
        else:
            _, A = theirs(x, kv, kv, key_padding_mask=ignore, average_attn_weights=False)
        for b in range(x.shape[0]):  # the trace records the first sequence: run one at a time
            with tracing() as tr:
                if case == "causal":
                    ours(x[b : b + 1], x[b : b + 1], causal=True)
                else:
                    ours(x[b : b + 1], kv[b : b + 1], mask=~ignore[b : b + 1, None, None, :])
            for h in range(H_MHA):
                close(tr[f"head{h}.A"], A[b, h], TOL[dtype], f"A seq {b} head {h}")
    if case == "cross":
        assert float(A[1, :, :, -3:].abs().max()) == 0.0  # the padded keys really were ignored
    else:
        assert float(A.triu(1).abs().max()) == 0.0  # no weight on future keys


# -- 2. torch.nn.Transformer --------------------------------------------------------------------

NNT = Config(
    arch="encoder-decoder",
    vocab_size=23,
    d_model=16,
    n_heads=2,
    d_ff=32,
    n_encoder_layers=2,
    n_decoder_layers=2,
    max_len=16,
    positions="none",
    norm="post",
    activation="relu",
)


def _copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    C = theirs.embed_dim
    for j, proj in enumerate((ours.q, ours.k, ours.v)):
        proj.weight.copy_(theirs.in_proj_weight[j * C : (j + 1) * C])
        proj.bias.copy_(theirs.in_proj_bias[j * C : (j + 1) * C])
    ours.o.load_state_dict(theirs.out_proj.state_dict())


def nn_transformer_pair(dtype, seed=0):
    torch.manual_seed(seed)
    theirs = nn.Transformer(
        d_model=16,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=False,
    )
    theirs = theirs.to(dtype).eval()
    randomize(theirs, seed)
    ours = Transformer(NNT).to(dtype).eval()
    randomize(ours, seed + 1)  # embeddings and the output head: ours only
    with torch.no_grad():
        for mine, layer in zip(ours.encoder.layers, theirs.encoder.layers, strict=True):
            _copy_mha(mine.self_attn, layer.self_attn)
            mine.ffn.w1.load_state_dict(layer.linear1.state_dict())
            mine.ffn.w2.load_state_dict(layer.linear2.state_dict())
            mine.norm1.load_state_dict(layer.norm1.state_dict())
            mine.norm2.load_state_dict(layer.norm2.state_dict())
        for mine, layer in zip(ours.decoder.layers, theirs.decoder.layers, strict=True):
            _copy_mha(mine.self_attn, layer.self_attn)
            _copy_mha(mine.cross_attn, layer.multihead_attn)
            mine.ffn.w1.load_state_dict(layer.linear1.state_dict())
            mine.ffn.w2.load_state_dict(layer.linear2.state_dict())
            for k in (1, 2, 3):
                getattr(mine, f"norm{k}").load_state_dict(getattr(layer, f"norm{k}").state_dict())
    return ours, theirs


@DTYPES
@pytest.mark.parametrize("padded", [False, True], ids=["causal", "causal+padding"])
@pytest.mark.parametrize("final_norms", ["identity", "by_hand"])
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # torch's fast path
def test_nn_transformer_matches(dtype, padded, final_norms):
    """nn.Transformer always ends each stack with a LayerNorm (encoder.norm, decoder.norm), even
    post-LN, where glassformer has none. "identity": replace both with nn.Identity and compare
    whole models too. "by_hand": keep them and apply them to glassformer's stack outputs
    ourselves (the normed encoder output is then the memory the decoder attends to)."""
    ours, theirs = nn_transformer_pair(dtype)
    if final_norms == "identity":
        theirs.encoder.norm = nn.Identity()
        theirs.decoder.norm = nn.Identity()
    by_hand = (theirs.encoder.norm, theirs.decoder.norm) if final_norms == "by_hand" else None
    g = torch.Generator().manual_seed(7)
    B, S, T = 2, 7, 6
    src_ids = torch.randint(0, NNT.vocab_size, (B, S), generator=g)
    tgt_ids = torch.randint(0, NNT.vocab_size, (B, T), generator=g)
    src_valid = torch.ones(B, S, dtype=torch.bool)
    tgt_valid = torch.ones(B, T, dtype=torch.bool)
    if padded:  # right padding, so every query keeps a real key
        src_valid[1, -3:] = False
        tgt_valid[0, -2:] = False
    pad = {}
    if padded:  # torch: True = ignore this key
        pad = dict(src_key_padding_mask=~src_valid, tgt_key_padding_mask=~tgt_valid)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
    with torch.no_grad():
        src = ours.encoder.tok_embed(src_ids)  # positions="none": the embeddings are the inputs
        tgt = ours.decoder.tok_embed(tgt_ids)
        memory_pad = pad.get("src_key_padding_mask")
        want = theirs(
            src, tgt, tgt_mask=future, tgt_is_causal=True, memory_key_padding_mask=memory_pad, **pad
        )
        want_memory = theirs.encoder(src, src_key_padding_mask=memory_pad)
        src_mask = src_valid[:, None, None, :] if padded else None  # ours: True = may attend
        tgt_mask = None
        if padded:
            tgt_mask = ~future[None, None] & tgt_valid[:, None, None, :]
        memory = ours.encoder(src_ids, src_mask)
        if by_hand:
            memory = by_hand[0](memory)
        out = ours.decoder(tgt_ids, tgt_mask, True, memory, src_mask)
        if by_hand:
            out = by_hand[1](out)
        if not by_hand:  # the whole glassformer model: its logits over torch's decoder output
            valid, src_ok = (tgt_valid, src_valid) if padded else (None, None)
            logits = ours(tgt_ids, valid, src_ids, src_ok)
            head = torch.nn.functional.linear(want, ours.lm_head.weight, ours.lm_head.bias)
            close(logits, head, TOL[dtype], "logits")
    # torch's encoder fast path writes zeros at padded positions: compare the real ones
    close(memory[src_valid], want_memory[src_valid], TOL[dtype], "encoder output")
    close(out, want, TOL[dtype], "decoder output")


# -- 3. Hugging Face GPT-2 ----------------------------------------------------------------------


def gpt2(impl="eager", seed=0):
    config = transformers.GPT2Config(
        n_embd=32,
        n_head=4,
        n_layer=2,
        n_positions=16,
        vocab_size=50,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation=impl,
    )
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(config).eval()
    randomize(model, seed)
    return model


def _ids(V=50, B=2, T=16, seed=5):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


@IMPLS
def test_gpt2_logits_float32(impl):
    model = gpt2(impl)
    cfg = hf.gpt2_config(model.config)
    params = hf.gpt2_to_glassformer(numpy_state(model), cfg)
    ours = from_params(cfg, params, torch.float32).eval()
    ids = _ids()
    with torch.no_grad():
        close(ours(ids), model(ids).logits, 1e-5, "GPT-2 logits f32")


@IMPLS
def test_gpt2_logits_float64(impl):
    """HF GPT-2 runs in float64 (.double()): torch engine and reference engine at 1e-10."""
    model = gpt2(impl).double()
    cfg = hf.gpt2_config(model.config)
    params = hf.gpt2_to_glassformer(numpy_state(model), cfg)
    ours = from_params(cfg, params, torch.float64).eval()
    ids = _ids()
    with torch.no_grad():
        want = model(ids).logits
        assert want.dtype == torch.float64
        close(ours(ids), want, 1e-10, "GPT-2 logits torch f64")
    for b in range(ids.shape[0]):
        got = reference.forward(params, cfg, ids[b].tolist())
        close(got, want[b], 1e-10, f"GPT-2 logits reference, sequence {b}")


def test_gpt2_round_trip_bit_exact():
    model = gpt2()
    state = numpy_state(model)
    cfg = hf.gpt2_config(model.config.to_dict())
    params = hf.gpt2_to_glassformer(state, cfg)
    assert list(params) == list(spec(cfg))
    back = hf.glassformer_to_gpt2(params, cfg)
    assert set(back) == set(state)
    for name, x in state.items():
        assert back[name].dtype == x.dtype and np.array_equal(back[name], x), name
    # torch tensors in, torch tensors out, equally exact
    tstate = {k: v.clone() for k, v in model.state_dict().items()}
    tback = hf.glassformer_to_gpt2(hf.gpt2_to_glassformer(tstate, cfg), cfg)
    assert all(torch.equal(tback[k], v) for k, v in tstate.items())
    # and the result loads strictly into a fresh model built from config_to_gpt2
    d = hf.config_to_gpt2(cfg) | dict(bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    fresh = transformers.GPT2LMHeadModel(transformers.GPT2Config(**d)).eval()
    fresh.load_state_dict(tback, strict=True)
    ids = _ids()
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, model(ids).logits)
    assert hf.gpt2_config(hf.config_to_gpt2(cfg)) == cfg


def test_gpt2_conversion_errors_name_the_tensor():
    model = gpt2()
    state = numpy_state(model)
    cfg = hf.gpt2_config(model.config)
    missing = {k: v for k, v in state.items() if k != "transformer.h.1.mlp.c_fc.bias"}
    with pytest.raises(CheckpointError, match=r"transformer\.h\.1\.mlp\.c_fc\.bias"):
        hf.gpt2_to_glassformer(missing, cfg)
    extra = state | {"transformer.h.2.ln_1.weight": state["transformer.h.0.ln_1.weight"]}
    with pytest.raises(CheckpointError, match=r"unexpected tensor 'transformer\.h\.2\.ln_1"):
        hf.gpt2_to_glassformer(extra, cfg)
    bad = state | {"transformer.h.0.attn.c_attn.weight": np.zeros((32, 99), np.float32)}
    with pytest.raises(CheckpointError, match=r"c_attn\.weight.*self_attn\.q\.weight"):
        hf.gpt2_to_glassformer(bad, cfg)
    bad = state | {"transformer.h.1.attn.c_attn.bias": np.zeros(98, np.float32)}
    with pytest.raises(CheckpointError, match=r"h\.1\.attn\.c_attn\.bias"):
        hf.gpt2_to_glassformer(bad, cfg)
    untied = state | {"lm_head.weight": state["lm_head.weight"] + 1}
    with pytest.raises(CheckpointError, match="lm_head.weight"):
        hf.gpt2_to_glassformer(untied, cfg)
    no_head = {k: v for k, v in state.items() if k != "lm_head.weight"}
    buffers = no_head | {"transformer.h.0.attn.bias": np.ones((1, 1, 16, 16), bool)}
    assert set(hf.gpt2_to_glassformer(buffers, cfg)) == set(hf.gpt2_to_glassformer(state, cfg))
    params = hf.gpt2_to_glassformer(state, cfg)
    with pytest.raises(CheckpointError, match=r"decoder\.layers\.0\.ffn\.w2\.bias"):
        hf.glassformer_to_gpt2({k: v for k, v in params.items() if "0.ffn.w2.bias" not in k}, cfg)
    with pytest.raises(ConfigError, match="scale_attn_by_inverse_layer_idx"):
        hf.gpt2_config(model.config.to_dict() | {"scale_attn_by_inverse_layer_idx": True})
    with pytest.raises(ConfigError, match="norm"):
        hf.config_to_gpt2(Config(norm="post"))


# -- 4. Hugging Face BERT -----------------------------------------------------------------------


def bert(impl, dtype, seed=0):
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=2,
        intermediate_size=64,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=16,
        attn_implementation=impl,
    )
    torch.manual_seed(seed)
    model = transformers.BertModel(config).to(dtype).eval()
    randomize(model, seed)
    return model


@IMPLS
@DTYPES
def test_bert_encoder_layers_match(impl, dtype):
    """BertEncoder on given hidden states + padding mask == glassformer's encoder blocks."""
    model = bert(impl, dtype)
    cfg = hf.bert_config(model.config)
    assert cfg.activation == "gelu" and cfg.norm == "post" and cfg.ln_eps == 1e-12
    params = hf.bert_to_glassformer(numpy_state(model), cfg, skip_unmapped=True)
    ours = from_params(cfg, params, dtype).eval()
    g = torch.Generator().manual_seed(11)
    B, S = 2, 9
    x = torch.randn(B, S, 32, generator=g).to(dtype)
    valid = torch.ones(B, S, dtype=torch.bool)
    valid[1, -4:] = False
    mask = transformers.masking_utils.create_bidirectional_mask(
        config=model.config, inputs_embeds=x, attention_mask=valid.long()
    )
    with torch.no_grad():
        want, h = [], x
        for layer in model.encoder.layer:
            h = layer(h, mask)
            want.append(h)
        close(model.encoder(x, attention_mask=mask).last_hidden_state, want[-1], 0.0, "encoder")
        h = x
        for i, block in enumerate(ours.encoder.layers):
            h = block(h, valid[:, None, None, :])
            close(h, want[i], TOL[dtype], f"BERT layer {i}, torch engine")
    if dtype == torch.float64:
        p64 = {k: v.astype(np.float64) for k, v in params.items()}
        for b in range(B):
            X = x[b].numpy()
            m = np.broadcast_to(valid[b].numpy(), (S, S))
            for i in range(cfg.n_encoder_layers):
                X = reference.encoder_block(p64, i, X, m, cfg)
                close(X, want[i][b], 1e-10, f"BERT layer {i}, reference, sequence {b}")


def bert_inputs(seed=12):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 50, (3, 9), generator=g)
    types = torch.randint(0, 2, (3, 9), generator=g)
    valid = torch.ones(3, 9, dtype=torch.bool)
    valid[1, -4:] = False
    valid[2, -7:] = False
    return ids, types, valid


@IMPLS
@DTYPES
def test_bert_whole_model_matches(impl, dtype):
    """BertModel(ids, mask, token types).last_hidden_state == glassformer's encoder, both
    engines: word + position + token-type embeddings, embedding LayerNorm, every layer."""
    model = bert(impl, dtype)
    cfg = hf.bert_config(model.config)
    assert (cfg.type_vocab_size, cfg.embed_norm) == (2, True)
    params = hf.bert_to_glassformer(numpy_state(model), cfg, skip_unmapped=True)
    ours = from_params(cfg, params, dtype).eval()
    ids, types, valid = bert_inputs()
    with torch.no_grad():
        want = model(ids, attention_mask=valid.long(), token_type_ids=types).last_hidden_state
        got = ours(ids, valid=valid, types=types)
    for b in range(3):
        n = int(valid[b].sum())
        close(got[b, :n], want[b, :n], TOL[dtype], f"BERT sequence {b}, torch engine")
        if dtype == torch.float64:
            p64 = {k: v.astype(np.float64) for k, v in params.items()}
            ref = reference.encoder(p64, cfg, ids[b, :n].tolist(), types=types[b, :n].tolist())
            close(ref, want[b, :n], 1e-10, f"BERT sequence {b}, reference engine")


def test_bert_mapping_round_trip_and_refusals():
    model = bert("eager", torch.float32)
    state = numpy_state(model)
    cfg = hf.bert_config(model.config.to_dict())
    with pytest.raises(CheckpointError, match=r"pooler\.dense\.weight: the \[CLS\] pooler"):
        hf.bert_to_glassformer(state, cfg)
    params = hf.bert_to_glassformer(state, cfg, skip_unmapped=True)
    back = hf.glassformer_to_bert(params, cfg)
    assert set(back) == set(state) - set(hf.unmapped_in(state, hf.BERT_UNMAPPED)) - {
        "embeddings.position_ids",
        "embeddings.token_type_ids",
    }
    assert all(np.array_equal(back[k], state[k]) for k in back)  # bit-exact
    np.testing.assert_array_equal(
        params["encoder.type_embed.weight"], state["embeddings.token_type_embeddings.weight"]
    )
    # a BertForMaskedLM-style checkpoint: `bert.` prefix, `cls.` head skipped with its reason
    prefixed = {f"bert.{k}": v for k, v in state.items()} | {"cls.predictions.bias": np.zeros(50)}
    with pytest.raises(CheckpointError, match=r"cls\.predictions\.bias: a pre-training head"):
        hf.bert_to_glassformer(prefixed, cfg)
    again = hf.bert_to_glassformer(prefixed, cfg, skip_unmapped=True)
    assert all(np.array_equal(again[k], params[k]) for k in params)
    wrong = state | {"encoder.layer.0.output.dense.weight": np.zeros((32, 63), np.float32)}
    with pytest.raises(CheckpointError, match=r"encoder\.layer\.0\.output\.dense\.weight"):
        hf.bert_to_glassformer(wrong, cfg, skip_unmapped=True)
    missing = {k: v for k, v in state.items() if k != "embeddings.LayerNorm.bias"}
    with pytest.raises(CheckpointError, match=r"no tensor 'embeddings\.LayerNorm\.bias'"):
        hf.bert_to_glassformer(missing, cfg, skip_unmapped=True)
    assert hf.bert_config(hf.config_to_bert(cfg)) == cfg
    with pytest.raises(ConfigError, match="position_embedding_type"):
        hf.bert_config(model.config.to_dict() | {"position_embedding_type": "relative_key"})


# -- 5. Hugging Face Marian ---------------------------------------------------------------------


def marian_pe64(m) -> torch.Tensor:
    """HF's create_weight formula kept in float64 (it rounds the table to float32 even in a
    float64 model, a 1e-8 difference that float64 parity would see)."""
    n_pos, dim = m.weight.shape
    enc = np.array(
        [[p / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for p in range(n_pos)]
    )
    return torch.from_numpy(np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1))


def marian(impl, dtype, seed=0, **overrides):
    config = transformers.MarianConfig(
        **dict(
            vocab_size=50,
            d_model=16,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_layers=2,
            decoder_layers=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            activation_function="relu",
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            scale_embedding=False,
            max_position_embeddings=32,
            pad_token_id=0,
            decoder_start_token_id=0,
            attn_implementation=impl,
        )
        | overrides
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).to(dtype).eval()
    randomize(model, seed)
    with torch.no_grad():  # the positions are a fixed table, not weights: put it back
        for m in model.modules():
            if type(m).__name__ == "MarianSinusoidalPositionalEmbedding":
                m.weight.copy_(m.create_weight() if dtype == torch.float32 else marian_pe64(m))
        g = torch.Generator().manual_seed(seed + 1)
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g))
    return model


def marian_ours(model, dtype):
    cfg = hf.marian_config(model.config)
    params = hf.marian_to_glassformer(numpy_state(model), cfg)
    return cfg, params, from_params(cfg, params, dtype).eval()


@IMPLS
@DTYPES
def test_marian_layers_match(impl, dtype):
    """Encoder layers (padding mask) and decoder layers (causal self-attention, cross-attention
    to a padded memory) on given hidden states; post-LN, ReLU."""
    model = marian(impl, dtype)
    cfg, params, ours = marian_ours(model, dtype)
    g = torch.Generator().manual_seed(13)
    B, S, T = 2, 7, 5
    x = torch.randn(B, S, 16, generator=g).to(dtype)
    y = torch.randn(B, T, 16, generator=g).to(dtype)
    valid = torch.ones(B, S, dtype=torch.bool)
    valid[0, -2:] = False
    enc_mask = keys_additive(valid, dtype)
    with torch.no_grad():
        enc_want, h = [], x
        for layer in model.model.encoder.layers:
            h = layer(h, enc_mask)
            enc_want.append(h)
        memory = h
        dec_want, h = [], y
        for layer in model.model.decoder.layers:
            h = layer(h, causal_additive(T, dtype), memory, enc_mask, use_cache=False)
            dec_want.append(h)
        h = x
        for i, block in enumerate(ours.encoder.layers):
            h = block(h, valid[:, None, None, :])
            close(h, enc_want[i], TOL[dtype], f"Marian encoder layer {i}")
        h = y
        for i, block in enumerate(ours.decoder.layers):
            h = block(h, None, True, memory, valid[:, None, None, :])
            close(h, dec_want[i], TOL[dtype], f"Marian decoder layer {i}")
    if dtype == torch.float64:
        for b in range(B):
            X, Y, mem = x[b].numpy(), y[b].numpy(), memory[b].numpy()
            m = np.broadcast_to(valid[b].numpy(), (S, S))
            for i in range(cfg.n_encoder_layers):
                X = reference.encoder_block(params, i, X, m, cfg)
                close(X, enc_want[i][b], 1e-10, f"Marian encoder layer {i}, reference")
            cross = np.broadcast_to(valid[b].numpy(), (T, S))
            for i in range(cfg.n_decoder_layers):
                Y = reference.decoder_block(params, i, Y, mem, reference.causal_mask(T), cross, cfg)
                close(Y, dec_want[i][b], 1e-10, f"Marian decoder layer {i}, reference")


@pytest.mark.parametrize("act,scale", [("relu", False), ("swish", True)])
@DTYPES
def test_marian_whole_model_matches(act, scale, dtype):
    """MarianMTModel logits (shared scaled embeddings, half-sin | half-cos positions, every layer,
    tied head + final_logits_bias) == glassformer's, both engines, padded source batch."""
    model = marian("eager", dtype, activation_function=act, scale_embedding=scale)
    cfg, params, ours = marian_ours(model, dtype)
    assert (cfg.embed_scale, cfg.activation) == (scale, {"relu": "relu", "swish": "silu"}[act])
    g = torch.Generator().manual_seed(14)
    src = torch.randint(1, 50, (2, 7), generator=g)
    tgt = torch.randint(1, 50, (2, 5), generator=g)
    valid = torch.ones(2, 7, dtype=torch.bool)
    valid[1, -3:] = False
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=valid.long(), decoder_input_ids=tgt).logits
        got = ours(tgt, src_ids=src, src_valid=valid)
    close(got, want, TOL[dtype], "Marian logits, torch engine")
    if dtype == torch.float64:
        for b in range(2):
            n = int(valid[b].sum())
            ref = reference.forward(params, cfg, tgt[b].tolist(), src_ids=src[b, :n].tolist())
            close(ref, want[b], 1e-10, f"Marian logits, reference, sequence {b}")


def test_marian_mapping_round_trip_and_refusals():
    model = marian("eager", torch.float32)
    state = numpy_state(model)
    cfg = hf.marian_config(model.config.to_dict())
    params = hf.marian_to_glassformer(state, cfg)
    np.testing.assert_array_equal(
        params["decoder.layers.1.norm2.weight"],
        state["model.decoder.layers.1.encoder_attn_layer_norm.weight"],
    )
    np.testing.assert_array_equal(params["lm_head.bias"], state["final_logits_bias"][0])
    back = hf.glassformer_to_marian(params, cfg)
    assert set(back) == set(state)
    assert all(np.array_equal(back[k], state[k]) for k in back), [
        k for k in back if not np.array_equal(back[k], state[k])
    ]
    tstate = {k: v.clone() for k, v in model.state_dict().items()}
    tback = hf.glassformer_to_marian(hf.marian_to_glassformer(tstate, cfg), cfg)
    fresh = transformers.MarianMTModel(model.config).eval()
    fresh.load_state_dict(tback, strict=True)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in tstate.items())
    untied = state | {"lm_head.weight": state["lm_head.weight"] + 1}
    with pytest.raises(CheckpointError, match=r"'lm_head\.weight' differs"):
        hf.marian_to_glassformer(untied, cfg)
    learned = state | {"model.encoder.embed_positions.weight": state["lm_head.weight"][:32] * 0}
    with pytest.raises(CheckpointError, match=r"encoder\.embed_positions\.weight' is not"):
        hf.marian_to_glassformer(learned, cfg)
    no_bias = {k: v for k, v in state.items() if k != "final_logits_bias"}
    with pytest.raises(CheckpointError, match="final_logits_bias"):
        hf.marian_to_glassformer(no_bias, cfg)
    extra = state | {"model.decoder.layers.2.fc1.bias": state["model.decoder.layers.1.fc1.bias"]}
    with pytest.raises(CheckpointError, match=r"unexpected tensor 'model\.decoder\.layers\.2"):
        hf.marian_to_glassformer(extra, cfg)
    with pytest.raises(ConfigError, match="decoder_ffn_dim"):
        hf.marian_config(model.config.to_dict() | {"decoder_ffn_dim": 64})
    with pytest.raises(ConfigError, match="decoder_vocab_size"):
        hf.marian_config(model.config.to_dict() | {"decoder_vocab_size": 60})
