"""Config: presets, validation errors that name the field, resolution of None, JSON, override."""

import dataclasses
import json

import pytest

from glassformer import weights
from glassformer.config import PRESETS, Config, preset
from glassformer.errors import ConfigError, GlassformerError

# -- presets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_json_round_trip(name):
    cfg = preset(name)
    assert isinstance(cfg, Config)
    back = Config.from_json(cfg.to_json())
    assert back == cfg
    assert back.to_dict() == cfg.to_dict()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_dict_round_trip(name):
    cfg = preset(name)
    data = cfg.to_dict()
    assert set(data) == {f.name for f in dataclasses.fields(Config)}
    # Through real JSON text too, so the dict holds only JSON-representable values.
    assert Config.from_dict(json.loads(json.dumps(data))) == cfg
    assert Config.from_dict(data) == cfg


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's batch_first advice
def test_presets_are_the_libraries_reference_models():
    """gpt2-small is transformers' GPT2Config() (GPT-2 small as released); transformer-base is
    torch.nn.Transformer()'s defaults, Vaswani et al.'s base model (post-LN, ReLU)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    g, ours = transformers.GPT2Config(), preset("gpt2-small")
    assert (ours.vocab_size, ours.d_model, ours.n_heads, ours.n_decoder_layers, ours.max_len,
            ours.d_ff, ours.ln_eps, ours.tie_embeddings) == (
        g.vocab_size, g.n_embd, g.n_head, g.n_layer, g.n_positions, g.n_inner or 4 * g.n_embd,
        g.layer_norm_epsilon, g.tie_word_embeddings)  # fmt: skip
    assert (g.activation_function, ours.activation) == ("gelu_new", "gelu_tanh")  # tanh form
    t = torch.nn.Transformer(device="meta")
    base = preset("transformer-base")
    for stack, n in ((t.encoder, base.n_encoder_layers), (t.decoder, base.n_decoder_layers)):
        layer = stack.layers[0]
        assert len(stack.layers) == n and layer.norm_first is (base.norm == "pre")
        assert (layer.self_attn.embed_dim, layer.self_attn.num_heads) == (base.d_model,
                                                                          base.n_heads)  # fmt: skip
        assert layer.linear1.out_features == base.d_ff and layer.norm1.eps == base.ln_eps
        assert layer.activation is torch.nn.functional.relu and base.activation == "relu"


def test_unknown_preset_lists_names():
    with pytest.raises(ConfigError) as e:
        preset("nope")
    msg = str(e.value)
    assert "nope" in msg
    for name in PRESETS:
        assert name in msg


def test_config_error_is_a_glassformer_error():
    with pytest.raises(GlassformerError):
        Config(d_model="x")
    with pytest.raises(ValueError):
        Config(d_model="x")


def test_hello_world_has_the_articles_sizes():
    """The sizes the article states (golden rt_07's hyperparameters, copied from the post)."""
    from conftest import load_golden

    h = load_golden("rt_07_unseeded_random_outputs.json")["hyperparameters"]
    cfg = preset("hello-world")
    assert cfg.arch == "encoder-decoder"
    assert (cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.d_ff) == (
        h["d_model"], h["n_heads"], h["d_k"], h["d_ff"])  # fmt: skip
    assert h["d_k"] == h["d_q"] == h["d_v"] and cfg.attn_dim == h["n_heads"] * h["d_v"]
    assert (cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.vocab_size) == (
        h["n_encoder_blocks"], h["n_decoder_blocks"], h["vocab_size"])  # fmt: skip
    assert cfg.norm == "post"
    assert cfg.positions == "sinusoidal"
    assert cfg.activation == "relu"


def test_gpt2_small_parameter_count():
    # GPT-2 small: 124,439,808 parameters with the output head tied to wte.
    assert weights.n_params(preset("gpt2-small")) == 124_439_808


def test_gpt2_small_untied_adds_the_head():
    cfg = dataclasses.replace(preset("gpt2-small"), tie_embeddings=False, bias=False)
    tied_no_bias = dataclasses.replace(preset("gpt2-small"), bias=False)
    assert weights.n_params(cfg) - weights.n_params(tied_no_bias) == 50257 * 768


# -- validation ---------------------------------------------------------------------------------


def _raises_naming(field, **kwargs):
    with pytest.raises(ConfigError) as e:
        Config(**kwargs)
    assert field in str(e.value), str(e.value)
    return str(e.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("arch", "transformer"),
        ("arch", "Decoder"),
        ("positions", "rope"),
        ("norm", "middle"),
        ("activation", "swish"),
        ("activation", None),
    ],
)
def test_wrong_literal_names_field_and_choices(field, value):
    msg = _raises_naming(field, **{field: value})
    assert repr(value) in msg
    hint_choices = {
        "arch": ("encoder-decoder", "decoder", "encoder"),
        "positions": ("sinusoidal", "learned", "none"),
        "norm": ("post", "pre"),
        "activation": ("relu", "gelu", "gelu_tanh"),
    }[field]
    for choice in hint_choices:
        assert choice in msg


@pytest.mark.parametrize(
    "field,value",
    [
        ("d_model", 64.0),
        ("d_model", "64"),
        ("d_model", None),
        ("vocab_size", 1.5),
        ("head_dim", 3.0),
        ("n_encoder_layers", "2"),
        ("max_len", [128]),
    ],
)
def test_non_int_where_int_expected(field, value):
    kwargs = {field: value}
    if field == "n_encoder_layers":
        kwargs["arch"] = "encoder"
    msg = _raises_naming(field, **kwargs)
    assert "integer" in msg


@pytest.mark.parametrize(
    "field", ["d_model", "vocab_size", "n_heads", "head_dim", "d_ff", "max_len", "n_classes"]
)
def test_bool_where_int_expected(field):
    kwargs = {field: True}
    if field == "n_classes":
        kwargs["arch"] = "encoder"
    _raises_naming(field, **kwargs)


@pytest.mark.parametrize("field", ["bias", "tie_embeddings"])
@pytest.mark.parametrize("value", [1, 0, "true", None])
def test_non_bool_where_bool_expected(field, value):
    _raises_naming(field, **{field: value})


@pytest.mark.parametrize("value", [True, "1e-5", None])
def test_ln_eps_wrong_type(value):
    _raises_naming("ln_eps", ln_eps=value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("vocab_size", 0),
        ("vocab_size", -1),
        ("d_model", 0),
        ("d_model", -8),
        ("n_heads", -1),
        ("head_dim", 0),
        ("head_dim", -2),
        ("d_ff", -5),
        ("max_len", 0),
        ("max_len", -1),
        ("n_encoder_layers", -1),
        ("n_decoder_layers", -1),
        ("n_classes", -1),
    ],
)
def test_non_positive_sizes(field, value):
    _raises_naming(field, **{field: value})


def test_zero_heads_with_explicit_head_dim():
    _raises_naming("n_heads", n_heads=0, head_dim=8)


def test_zero_heads_with_default_head_dim():
    _raises_naming("n_heads", n_heads=0)


def test_d_model_not_divisible_by_heads():
    msg = _raises_naming("head_dim", d_model=10, n_heads=4)
    assert "n_heads" in msg and "10" in msg


def test_d_model_not_divisible_is_fine_with_explicit_head_dim():
    cfg = Config(d_model=10, n_heads=4, head_dim=3)
    assert cfg.head_dim == 3
    assert cfg.attn_dim == 12


@pytest.mark.parametrize("value", [0, 0.0, -1e-5, 1.0, 2.0, float("nan"), float("inf")])
def test_ln_eps_out_of_range(value):
    _raises_naming("ln_eps", ln_eps=value)


@pytest.mark.parametrize("value", [1e-12, 1e-5, 0.5])
def test_ln_eps_in_range(value):
    assert Config(ln_eps=value).ln_eps == value


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"arch": "decoder", "n_encoder_layers": 3}, "n_encoder_layers"),
        ({"arch": "decoder", "n_decoder_layers": 0}, "n_decoder_layers"),
        ({"arch": "encoder", "n_decoder_layers": 1}, "n_decoder_layers"),
        ({"arch": "encoder", "n_encoder_layers": 0}, "n_encoder_layers"),
        ({"arch": "encoder-decoder", "n_encoder_layers": 0}, "n_encoder_layers"),
        ({"arch": "encoder-decoder", "n_decoder_layers": 0}, "n_decoder_layers"),
    ],
)
def test_layer_counts_inconsistent_with_arch(kwargs, field):
    msg = _raises_naming(field, **kwargs)
    assert kwargs["arch"] in msg


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_n_classes_only_on_encoder(arch):
    _raises_naming("n_classes", arch=arch, n_classes=2)


def test_n_classes_on_encoder_is_allowed():
    assert Config(arch="encoder", n_classes=3).n_classes == 3


def test_tie_embeddings_refused_on_encoder():
    _raises_naming("tie_embeddings", arch="encoder", tie_embeddings=True)


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_tie_embeddings_allowed_with_a_decoder(arch):
    assert Config(arch=arch, tie_embeddings=True).tie_embeddings is True


# -- resolution of None -------------------------------------------------------------------------


@pytest.mark.parametrize("d_model,n_heads", [(64, 4), (12, 3), (8, 8), (7, 1)])
def test_head_dim_none_resolves(d_model, n_heads):
    cfg = Config(d_model=d_model, n_heads=n_heads)
    assert cfg.head_dim == d_model // n_heads
    assert type(cfg.head_dim) is int
    assert cfg.attn_dim == d_model


@pytest.mark.parametrize(
    "arch,enc,dec",
    [("decoder", 0, 2), ("encoder", 2, 0), ("encoder-decoder", 2, 2)],
)
def test_layer_counts_none_resolve(arch, enc, dec):
    cfg = Config(arch=arch)
    assert (cfg.n_encoder_layers, cfg.n_decoder_layers) == (enc, dec)
    assert cfg.has_encoder == (enc > 0)
    assert cfg.has_decoder == (dec > 0)


def test_explicit_layer_counts_kept():
    cfg = Config(arch="encoder-decoder", n_encoder_layers=3, n_decoder_layers=5)
    assert (cfg.n_encoder_layers, cfg.n_decoder_layers) == (3, 5)


def test_resolved_values_survive_json():
    data = json.loads(Config(arch="encoder", d_model=12, n_heads=3).to_json())
    assert data["head_dim"] == 4
    assert data["n_encoder_layers"] == 2
    assert data["n_decoder_layers"] == 0


# -- from_dict / from_json ----------------------------------------------------------------------


def test_from_dict_unknown_keys_named():
    with pytest.raises(ConfigError) as e:
        Config.from_dict({"d_model": 8, "n_layer": 2, "dropout": 0.1})
    msg = str(e.value)
    assert "n_layer" in msg and "dropout" in msg
    assert "d_model" in msg  # the allowed names are listed


def test_from_json_unknown_key_named():
    with pytest.raises(ConfigError, match="hidden_size"):
        Config.from_json('{"hidden_size": 8}')


@pytest.mark.parametrize("text", ["", "{", "{'d_model': 8}", '{"d_model": 8,}', "not json"])
def test_from_json_invalid_json(text):
    with pytest.raises(ConfigError, match="JSON"):
        Config.from_json(text)


@pytest.mark.parametrize("text", ["[]", "null", "3", '"decoder"'])
def test_from_json_not_an_object(text):
    with pytest.raises(ConfigError, match="object"):
        Config.from_json(text)


def test_from_json_invalid_value_names_field():
    with pytest.raises(ConfigError, match="norm"):
        Config.from_json('{"norm": "middle"}')
    with pytest.raises(ConfigError, match="d_model"):
        Config.from_json('{"d_model": 64.5}')


def test_from_dict_partial_uses_defaults():
    cfg = Config.from_dict({"d_model": 8, "n_heads": 2})
    assert cfg == Config(d_model=8, n_heads=2)
    assert cfg.head_dim == 4


# -- override -----------------------------------------------------------------------------------


def test_override_parses_each_value_by_type():
    base = Config()
    cfg = base.override("d_model=8", "norm=pre", "bias=false", "head_dim=none", "ln_eps=1e-6")
    assert cfg.d_model == 8 and type(cfg.d_model) is int
    assert cfg.norm == "pre"
    assert cfg.bias is False
    assert cfg.head_dim == 8 // base.n_heads
    assert cfg.ln_eps == 1e-6 and type(cfg.ln_eps) is float
    # Everything else is unchanged, and the original is untouched.
    same = {"d_model", "norm", "bias", "head_dim", "ln_eps"}
    for f in dataclasses.fields(Config):
        if f.name not in same:
            assert getattr(cfg, f.name) == getattr(base, f.name), f.name
    assert base == Config()


@pytest.mark.parametrize(
    "item,field,value",
    [
        ("bias=true", "bias", True),
        ("bias=0", "bias", False),
        ("tie_embeddings=yes", "tie_embeddings", True),
        ("arch=encoder", "arch", "encoder"),
        ("activation=gelu_tanh", "activation", "gelu_tanh"),
        ("positions=learned", "positions", "learned"),
        (" max_len = 16 ", "max_len", 16),
        ("ln_eps=0.001", "ln_eps", 0.001),
    ],
)
def test_override_single_values(item, field, value):
    base = Config(arch="encoder") if field == "arch" else Config()
    cfg = base.override(item)
    assert getattr(cfg, field) == value
    assert type(getattr(cfg, field)) is type(value)


def test_override_without_assignments_is_equal():
    cfg = preset("char-lm")
    assert cfg.override() == cfg


@pytest.mark.parametrize(
    "item,needle",
    [
        ("d_model=abc", "d_model"),
        ("d_model=8.0", "d_model"),
        ("norm=middle", "norm"),
        ("bias=maybe", "bias"),
        ("ln_eps=small", "ln_eps"),
        ("nokey=1", "nokey"),
        ("noequals", "noequals"),
        ("=5", "key=value"),
    ],
)
def test_override_bad_assignment(item, needle):
    with pytest.raises(ConfigError) as e:
        Config().override(item)
    assert needle in str(e.value), str(e.value)


def test_override_result_is_validated():
    with pytest.raises(ConfigError, match="n_classes"):
        Config().override("n_classes=2")
    with pytest.raises(ConfigError, match="ln_eps"):
        Config().override("ln_eps=2")


# -- frozen -------------------------------------------------------------------------------------


@pytest.mark.parametrize("field,value", [("d_model", 8), ("arch", "encoder"), ("head_dim", 1)])
def test_config_is_frozen(field, value):
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cfg, field, value)
    assert cfg == Config()


def test_configs_are_hashable_and_compare_by_value():
    assert Config(d_model=8, n_heads=2) == Config(d_model=8, n_heads=2, head_dim=4)
    assert hash(Config(d_model=8, n_heads=2)) == hash(Config(d_model=8, n_heads=2, head_dim=4))
    assert Config(d_model=8, n_heads=2) != Config(d_model=8, n_heads=4)


def test_override_rederives_fields_that_followed_the_changed_ones():
    # head_dim was d_model // n_heads: it follows a new d_model or n_heads...
    assert Config().override("d_model=128").head_dim == 32
    assert Config().override("n_heads=8").head_dim == 8
    # ...but an explicitly different head_dim (the article's 3 with d_model 4) is kept.
    assert preset("hello-world").override("d_model=8").head_dim == 3
    # Layer counts follow arch: a stack the new arch lacks gets 0, a new stack the default 2.
    dec = preset("hello-world").override("arch=decoder")
    assert (dec.n_encoder_layers, dec.n_decoder_layers) == (0, 6)
    ed = preset("tiny").override("arch=encoder-decoder")
    assert (ed.n_encoder_layers, ed.n_decoder_layers) == (2, 2)
    enc = preset("tiny").override("arch=encoder", "n_classes=3")
    assert (enc.n_encoder_layers, enc.n_decoder_layers, enc.n_classes) == (2, 0, 3)
    assert preset("encoder-classifier").override("arch=decoder").n_classes == 0


# -- today's decoders' options (Llama, Qwen2, Mistral): rotary, RMSNorm, gated FFN, GQA ----------


def test_modern_options_default_to_the_classic_model():
    cfg = Config()
    assert (cfg.norm_kind, cfg.ffn_kind, cfg.n_kv_heads, cfg.qkv_bias) == (
        "layernorm", "plain", None, None)  # fmt: skip
    assert (cfg.kv_heads, cfg.kv_dim, cfg.has_qkv_bias, cfg.rope_dim) == (4, 64, True, 0)
    assert cfg.modern_options() == []
    assert Config(bias=False).has_qkv_bias is False
    assert Config(bias=False, qkv_bias=True).has_qkv_bias is True  # Qwen2


def test_old_config_json_without_the_new_fields_loads_with_the_defaults():
    data = preset("tiny").to_dict()
    for name in ("rope_theta", "rope_fraction", "norm_kind", "ffn_kind", "n_kv_heads", "qkv_bias"):
        del data[name]
    assert Config.from_dict(data) == preset("tiny")


def test_modern_fields_round_trip_through_json():
    cfg = Config(positions="rotary", rope_theta=5e5, rope_fraction=0.5, norm_kind="rmsnorm",
                 ffn_kind="gated", activation="silu", n_heads=4, n_kv_heads=2, head_dim=16,
                 qkv_bias=True, bias=False, d_ff=32)  # fmt: skip
    back = Config.from_json(cfg.to_json())
    assert back == cfg and back.to_dict() == cfg.to_dict()
    assert cfg.rope_dim == 8 and cfg.kv_dim == 32
    assert set(cfg.modern_options()) == {
        "positions='rotary'",
        "norm_kind='rmsnorm'",
        "ffn_kind='gated'",
        "n_kv_heads=2",
        "qkv_bias=True",
    }


def test_override_parses_the_new_fields():
    new = ("positions=rotary", "rope_theta=1e6", "norm_kind=rmsnorm", "ffn_kind=gated")
    cfg = Config().override(*new, "n_kv_heads=2", "qkv_bias=none")
    assert (cfg.rope_theta, cfg.n_kv_heads, cfg.qkv_bias, cfg.ffn_kind) == (1e6, 2, None, "gated")
    assert Config().override("d_ff=0").d_ff == 0
    # leaving rotary positions resets their settings (unless set in the same override)
    back = cfg.override("rope_fraction=0.5").override("positions=learned")
    assert (back.positions, back.rope_theta, back.rope_fraction) == ("learned", 10000.0, 1.0)
    with pytest.raises(ConfigError, match="rope_theta"):
        cfg.override("positions=learned", "rope_theta=5e5")
    assert cfg.override("qkv_bias=true").qkv_bias is True
    # n_kv_heads None follows n_heads; a value set stays, and is checked against the new n_heads
    assert Config(n_heads=4).override("n_heads=8").kv_heads == 8
    with pytest.raises(ConfigError, match="n_kv_heads"):
        Config(n_heads=4, n_kv_heads=4).override("n_heads=2", "head_dim=32")


def test_attention_only_is_d_ff_zero():
    cfg = Config(d_ff=0)
    assert cfg.d_ff == 0 and cfg.modern_options() == ["d_ff=0"]
    assert not any(".ffn." in n for n in weights.spec(cfg))


@pytest.mark.parametrize(
    "kwargs,field,needle",
    [
        ({"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads", "divisor"),
        ({"n_heads": 4, "n_kv_heads": 0}, "n_kv_heads", ">= 1"),
        ({"n_heads": 4, "n_kv_heads": 8}, "n_kv_heads", "divisible"),
        ({"n_kv_heads": 2.0}, "n_kv_heads", "integer"),
        ({"qkv_bias": 1}, "qkv_bias", "true or false"),
        ({"norm_kind": "rms"}, "norm_kind", "'rmsnorm'"),
        ({"ffn_kind": "swiglu"}, "ffn_kind", "'gated'"),
        ({"d_ff": -1}, "d_ff", ">= 0"),
        ({"d_ff": 0, "ffn_kind": "gated"}, "ffn_kind", "d_ff"),
        ({"positions": "rotary", "rope_theta": 0.0}, "rope_theta", "> 0"),
        ({"positions": "rotary", "rope_theta": float("inf")}, "rope_theta", "finite"),
        ({"positions": "rotary", "rope_fraction": 0.0}, "rope_fraction", "(0, 1]"),
        ({"positions": "rotary", "rope_fraction": 1.5}, "rope_fraction", "(0, 1]"),
        ({"positions": "rotary", "head_dim": 5}, "rope_fraction", "even"),
        ({"positions": "rotary", "head_dim": 8, "rope_fraction": 0.1}, "rope_fraction", "even"),
        ({"positions": "learned", "rope_theta": 5e5}, "rope_theta", "positions='rotary'"),
        ({"rope_fraction": 0.5}, "rope_fraction", "positions='rotary'"),
    ],
)
def test_modern_options_are_validated(kwargs, field, needle):
    msg = _raises_naming(field, **kwargs)
    assert needle in msg, msg


def test_partial_rotary_counts_dimensions_as_hugging_face_does():
    """rope_dim = int(head_dim · rope_fraction): Phi-2's 80 × 0.4 = 32, GPT-NeoX's 0.25."""
    assert Config(positions="rotary", d_model=80, n_heads=1, rope_fraction=0.4).rope_dim == 32
    assert Config(positions="rotary", n_heads=2, rope_fraction=0.25).rope_dim == 8
