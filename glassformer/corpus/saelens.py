"""SAELens's on-disk format: a folder with cfg.json and sae_weights.safetensors, read and written.

What was read to write this (SAELens, github.com/jbloomAus/SAELens): `sae_lens/saes/sae.py`
(`SAEConfig`: d_in, d_sae, dtype, device, apply_b_dec_to_input, normalize_activations,
reshape_activations and `SAEMetadata`: model_name, hook_name, hook_layer, hook_head_index,
model_from_pretrained_kwargs, prepend_bos, context_size; `save_model` writes cfg.json and
sae_weights.safetensors of the state dict), `sae_lens/saes/standard_sae.py` (W_enc (d_in, d_sae),
b_enc (d_sae,), W_dec (d_sae, d_in), b_dec (d_in,); encode = ReLU((x - b_dec·apply_b_dec_to_input)
W_enc + b_enc)), `sae_lens/saes/topk_sae.py` ("topk", its `k`), `sae_lens/saes/transcoder.py`
("transcoder": d_out, hook_name_out, hook_layer_out; b_dec (d_out,) never subtracted from the
input), and `sae_lens/loading/pretrained_sae_loaders.py` (`handle_config_defaulting` and the
pre-6.0 configs: hook_point -> hook_name, activation_fn_str, apply_b_dec_to_input defaulting to
true, a boolean normalize_activations, the 6.0 configs' "metadata").

We write the pre-6.0 layout (every field at the top level), which SAELens 5 reads as it is and
SAELens 6 converts on loading; a "glassformer" entry, which SAELens ignores, names our steps.
Reading accepts both layouts and refuses, in one line, what glassformer does not run:
architectures other than standard / topk / transcoder (gated, jumprelu, batchtopk, ...), an
activation normalisation not folded into the weights, a per-head hook, a finetuning scale.

Hook names are TransformerLens's, mapped to glassformer's steps of a decoder (`STEP_OF`,
`step_of`): blocks.L.hook_resid_pre -> decoder.input (L = 0) or decoder.{L-1}.out, hook_resid_mid
-> decoder.L.add1, hook_resid_post -> decoder.L.out, hook_attn_out -> decoder.L.self_attn.Z,
hook_mlp_out -> decoder.L.ffn.out, attn.hook_z -> decoder.L.self_attn.concat (TransformerLens's
(pos, head, d_head), flattened), mlp.hook_post -> decoder.L.ffn.hidden, ln1/ln2.hook_normalized ->
decoder.L.norm1/norm2.normalized (TransformerLens folds the norm's gain into the next weights),
ln_final.hook_normalized -> decoder.norm.normalized. TransformerLens loads GPT-2 with
center_writing_weights: every write into the residual stream has mean 0, so its stream is ours
minus its mean over d_model. An SAE of such a step, unless its model_from_pretrained_kwargs say
center_writing_weights false, is read with `center`: its input is centered first and the mean
added back to its reconstruction (what the model's next LayerNorm does not see either way). Its
texts start with BOS unless its prepend_bos says false (SAELens's default: true); ours say false.

Deliberately not here: the SAE's maths and training (`sae.py`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from glassformer import files
from glassformer.corpus.sae import SAEConfig
from glassformer.errors import GlassformerError, param

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
NAMES = ("W_enc", "b_enc", "W_dec", "b_dec")
SUPPORTED = ("standard", "topk", "transcoder")

# TransformerLens hook (after "blocks.L.") -> glassformer step (L filled in)
_BLOCK = {
    "hook_resid_mid": "decoder.{L}.add1",
    "hook_resid_post": "decoder.{L}.out",
    "hook_attn_out": "decoder.{L}.self_attn.Z",
    "hook_mlp_out": "decoder.{L}.ffn.out",
    "attn.hook_z": "decoder.{L}.self_attn.concat",
    "mlp.hook_post": "decoder.{L}.ffn.hidden",
    "ln1.hook_normalized": "decoder.{L}.norm1.normalized",
    "ln2.hook_normalized": "decoder.{L}.norm2.normalized",
}
_CENTERED = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out")


def step_of(hook: str) -> str:
    """glassformer's step for a TransformerLens hook name, or one line saying it has none."""
    m = re.fullmatch(r"blocks\.(\d+)\.(.+)", hook)
    if m:
        layer, rest = int(m.group(1)), m.group(2)
        if rest == "hook_resid_pre":
            return "decoder.input" if layer == 0 else f"decoder.{layer - 1}.out"
        if rest in _BLOCK:
            return _BLOCK[rest].format(L=layer)
    if hook == "ln_final.hook_normalized":
        return "decoder.norm.normalized"
    raise GlassformerError(
        f"the SAE's hook {hook!r} has no glassformer step: glassformer reads blocks.L.hook_resid_"
        "pre/mid/post, hook_attn_out, hook_mlp_out, attn.hook_z, mlp.hook_post and the norms'"
        " hook_normalized"
    )


def hook_of(step: str) -> tuple[str, int]:
    """(TransformerLens hook name, layer) of a glassformer step; (step, 0) when it has none."""
    if step == "decoder.input":
        return "blocks.0.hook_resid_pre", 0
    m = re.fullmatch(r"decoder\.(\d+)\.(.+)", step)
    if m:
        layer, rest = int(m.group(1)), m.group(2)
        for hook, pattern in _BLOCK.items():
            if pattern.format(L=layer) == step:
                return f"blocks.{layer}.{hook}", layer
        if rest == "out":  # also the stream entering the next block
            return f"blocks.{layer}.hook_resid_post", layer
    return step, 0


def _bad(path, why: str) -> GlassformerError:
    return GlassformerError(f"{path}: {why}")


def _config(path: Path, d: dict) -> SAEConfig:
    """Our SAEConfig of a cfg.json's dictionary, or one line saying what we cannot run."""
    if not isinstance(d, dict):
        raise _bad(path, "is not a JSON object; it should be an SAELens cfg.json")
    meta = d.get("metadata") or d.get("meta") or {}
    meta = meta if isinstance(meta, dict) else {}

    def get(key, default=None):
        return d[key] if key in d else meta.get(key, default)

    arch = d.get("architecture", "standard")
    act = d.get("activation_fn_str", d.get("activation_fn", "relu"))
    kwargs = d.get("activation_fn_kwargs") or {}
    k = d.get("k", kwargs.get("k") if isinstance(kwargs, dict) else None)
    if arch == "standard" and act == "topk":  # SAELens 5's TopK: a standard SAE with topk
        arch = "topk"
    if arch not in SUPPORTED:
        raise _bad(
            path,
            f"architecture {arch!r} is not one glassformer runs (it runs {', '.join(SUPPORTED)}); "
            "convert it to a standard SAE or use SAELens",
        )
    if arch != "topk" and act not in ("relu", None):
        raise _bad(path, f"activation {act!r}: glassformer runs ReLU SAEs (and topk)")
    norm = d.get("normalize_activations", "none")
    if norm not in ("none", False, None):
        raise _bad(
            path,
            f"normalize_activations {norm!r}: fold the scaling into the weights first "
            "(SAELens's fold_activation_norm_scaling_factor), then save it again",
        )
    if d.get("finetuning_scaling_factor"):
        raise _bad(path, "finetuning_scaling_factor is set: glassformer does not apply it")
    if get("hook_head_index", get("hook_point_head_index")) is not None:
        raise _bad(path, "hook_head_index is set: SAEs of one head are not supported")
    ints = {key: d.get(key) for key in ("d_in", "d_sae")}
    for key, v in ints.items():
        if type(v) is not int or v < 1:
            raise _bad(path, f"{key} must be a positive integer, got {v!r}")
    if arch == "topk" and (type(k) is not int or not 1 <= k <= ints["d_sae"]):
        raise _bad(path, f"a topk SAE needs k in 1..d_sae, got {k!r}")
    ours = d.get("glassformer") if isinstance(d.get("glassformer"), dict) else {}
    hook = get("hook_name", get("hook_point"))
    if not isinstance(hook, str) or not hook:
        raise _bad(path, "has no hook_name: which activation the SAE reads is unknown")
    step = ours.get("step") or step_of(hook)
    step_out, d_out, center = None, None, False
    if arch == "transcoder":
        d_out, hook_out = d.get("d_out"), get("hook_name_out")
        if type(d_out) is not int or d_out < 1 or not isinstance(hook_out, str):
            raise _bad(path, "a transcoder needs d_out (a positive integer) and hook_name_out")
        step_out = ours.get("step_out") or step_of(hook_out)
    elif not ours:
        kw = get("model_from_pretrained_kwargs") or {}
        centered = kw.get("center_writing_weights", True) if isinstance(kw, dict) else True
        center = bool(centered) and hook.rpartition(".")[2] in _CENTERED
    return SAEConfig(
        d_in=ints["d_in"],
        d_sae=ints["d_sae"],
        step=str(step),
        architecture="topk" if arch == "topk" else "standard",
        k=k if arch == "topk" else None,
        d_out=d_out,
        step_out=step_out,
        apply_b_dec_to_input=bool(d.get("apply_b_dec_to_input", arch != "transcoder")),
        center=center,
        model_name=str(get("model_name", "") or ""),
        hook_name=hook,
        prepend_bos=bool(get("prepend_bos", True)),  # SAELens's default when it is not said
    )


def read(folder: str | Path) -> tuple[SAEConfig, dict]:
    """(config, {W_enc, b_enc, W_dec, b_dec} float64) of an SAELens folder, every shape checked."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    folder = Path(folder)
    if not folder.is_dir():
        raise GlassformerError(
            f"{folder} is not a folder; give an SAE's folder (cfg.json + {WEIGHTS_FILE})"
        )
    cfg_path = files.member(folder, CFG_FILE, required=False)
    if cfg_path is None:
        raise GlassformerError(f"{folder} has no {CFG_FILE}: it is not an SAE folder")
    try:
        d = files.read_json(cfg_path, "an SAE's cfg.json")
    except files.FileError as e:
        raise GlassformerError(f"{cfg_path} is corrupt ({e}); restore it") from None
    cfg = _config(cfg_path, d)
    w_path = files.member(folder, WEIGHTS_FILE, required=False)
    if w_path is None:
        raise GlassformerError(f"{folder} has no {WEIGHTS_FILE}: the SAE's weights are missing")
    try:
        raw = load_file(str(w_path))
    except (SafetensorError, OSError, ValueError) as e:
        raise GlassformerError(f"{w_path} is not a readable safetensors file ({e})") from None
    shapes = {
        "W_enc": (cfg.d_in, cfg.d_sae),
        "b_enc": (cfg.d_sae,),
        "W_dec": (cfg.d_sae, cfg.out),
        "b_dec": (cfg.out,),
    }
    p = {}
    for name, shape in shapes.items():
        if name not in raw:
            raise GlassformerError(f"{w_path} has no {name}; an SAE holds {', '.join(NAMES)}")
        a = np.asarray(raw[name])
        if a.shape != shape:
            raise GlassformerError(f"{w_path}: {name} is {a.shape}, cfg.json says {shape}")
        if a.dtype.kind != "f" or not np.isfinite(a).all():
            raise GlassformerError(f"{w_path}: {name} must hold finite floats")
        p[name] = a.astype(np.float64)
    return cfg, p


def config_dict(cfg: SAEConfig) -> dict:
    """cfg.json as we write it: SAELens's fields at the top level (the pre-6.0 layout)."""
    hook, layer = (cfg.hook_name, 0) if cfg.hook_name else hook_of(cfg.step)
    if cfg.hook_name:
        layer = int(m.group(1)) if (m := re.match(r"blocks\.(\d+)\.", hook)) else 0
    d = {
        "architecture": "transcoder" if cfg.transcoder else cfg.architecture,
        "d_in": cfg.d_in,
        "d_sae": cfg.d_sae,
        "dtype": "float32",
        "device": "cpu",
        # SAELens refuses a transcoder's true: its b_dec has d_out numbers
        "apply_b_dec_to_input": cfg.apply_b_dec_to_input and not cfg.transcoder,
        "normalize_activations": "none",
        "finetuning_scaling_factor": False,
        "activation_fn_str": "topk" if cfg.architecture == "topk" else "relu",
        "model_name": cfg.model_name,
        "hook_name": hook,
        "hook_layer": layer,
        "hook_head_index": None,
        "prepend_bos": cfg.prepend_bos,
        "model_from_pretrained_kwargs": {"center_writing_weights": cfg.center},
        "glassformer": {"step": cfg.step, "step_out": cfg.step_out},
    }
    if cfg.architecture == "topk":
        d |= {"k": cfg.k, "activation_fn_kwargs": {"k": cfg.k}}
    if cfg.transcoder:
        hook_out, layer_out = hook_of(cfg.step_out)
        d |= {
            "d_out": cfg.out,
            "hook_name_out": hook_out,
            "hook_layer_out": layer_out,
            "hook_head_index_out": None,
        }
    return d


def write(
    folder: str | Path,
    cfg: SAEConfig,
    params: dict,
    *,
    extra: dict[str, bytes] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write an SAELens folder (float32 weights), atomically; `extra` files beside them."""
    folder = Path(folder)
    if folder.exists() and not overwrite:
        raise GlassformerError(f"{folder} exists; give {param('overwrite', True)} to replace it")
    arrays = {n: np.ascontiguousarray(params[n], dtype=np.float32) for n in NAMES}
    text = json.dumps(config_dict(cfg), indent=2).encode()
    return files.write_directory(
        folder,
        {CFG_FILE: text, **(extra or {})},
        tensors={WEIGHTS_FILE: arrays},
        metadata={"format": "pt"},  # what SAELens's safetensors files say
    )


def feature_direction(folder: str | Path, feature: int, model_cfg) -> tuple[np.ndarray, int]:
    """(feature's decoder row (d_model,), layer): steering by an SAE's feature adds its decoder
    row where the SAE writes, which must be a decoder stream entering block `layer`
    (decoder.input: 0, decoder.L.out: L + 1), the place `Model.steer` steers."""
    cfg, p = read(folder)
    step = cfg.step_out or cfg.step
    m = re.fullmatch(r"decoder\.(\d+)\.out", step)
    if step != "decoder.input" and m is None:
        raise GlassformerError(
            f"the SAE writes {step}; steering by a feature adds its decoder row to the stream "
            "entering a block (an SAE of decoder.input or decoder.L.out)"
        )
    if cfg.out != model_cfg.d_model:
        raise GlassformerError(
            f"the SAE writes {cfg.out} numbers and this model's stream has {model_cfg.d_model}: "
            "it was made for another model"
        )
    if not 0 <= feature < cfg.d_sae:
        raise GlassformerError(
            f"{param('steer_feature', feature)}: the SAE has features 0..{cfg.d_sae - 1}"
        )
    return p["W_dec"][feature], 0 if m is None else int(m.group(1)) + 1
