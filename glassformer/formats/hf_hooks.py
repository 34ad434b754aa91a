"""The hf engine of `glassformer diff`: transformers itself on a Hugging Face folder (GPT-2, BERT,
Llama, Qwen2), in float64, tapped by forward hooks on the modules that the tables of `hf.py` and
`hf_llama.py` name, its steps under glassformer's names.

    run = hf_engine(m)      # refused here, before any work, when m is no such folder
    steps = run(inputs)     # {step name: float64 NumPy array}, inputs.ids the token ids

A step no module's input or output is (the scores, the norms' internals, the rotated Q and K,
which transformers computes inside its attention) is not among them.

Deliberately not here: comparing the engines and rendering (`engine_diff.py`), the foreign names
themselves (the tables).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from glassformer.errors import GlassformerError, install_hint, param
from glassformer.formats import hf, hf_llama

# transformers' class for each family the hf engine covers, and the table naming its modules.
_LLAMA = [(ours, theirs, "linear") for ours, theirs in hf_llama.LLAMA]
HF_FAMILIES = {
    "gpt2": ("GPT2LMHeadModel", hf.GPT2),
    "bert": ("BertModel", hf.BERT),
    "llama": ("LlamaForCausalLM", _LLAMA),
    "qwen2": ("Qwen2ForCausalLM", _LLAMA),
}

Steps = dict[str, np.ndarray]  # one engine's recorded steps, by name


def _hf_modules(table: list, cfg) -> dict[str, tuple[str, int, int]]:
    """{our module: (their module, part, parts)} from a table of `hf.py`: a fused module (GPT-2's
    c_attn, q | k | v) gives each of our modules one of its equal parts along the last axis."""
    out = {}
    for ours, theirs, _kind in table:
        ours = (ours,) if isinstance(ours, str) else ours
        stack = ours[0].split(".")[0]
        n = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
        for i in range(n) if "{i}" in theirs else [None]:
            for j, o in enumerate(ours):
                out[o.format(i=i)] = (theirs.format(i=i), j, len(ours))
    return out


def _hf_points(cfg) -> list[tuple[str, str, str]]:
    """(our module, "in" or "out", our step) for each step that is a module's input or output in
    a one-stack model (GPT-2, BERT, Llama, Qwen2); "{h}" in a step: its heads, split along the
    last axis ("{g}": its shared K/V heads)."""
    s = "decoder" if cfg.arch == "decoder" else "encoder"
    n = cfg.n_decoder_layers if s == "decoder" else cfg.n_encoder_layers
    pre, points = cfg.norm == "pre", []

    def at(module: str, where: str, *steps: str) -> None:
        points.extend((f"{s}.{module}", where, f"{s}.{step}") for step in steps)

    if not cfg.embed_scale:
        at("tok_embed", "out", "X")
    at("pos_embed", "out", "P")
    at("type_embed", "out", "types")
    at("embed_norm", "in", "sum")
    at("embed_norm", "out", "embed_norm.out", "input")
    for i in range(n):
        L = f"layers.{i}"
        if pre:
            at(f"{L}.norm1", "in", *(["input"] if i == 0 else [f"{i - 1}.add2", f"{i - 1}.out"]))
        at(f"{L}.norm1", "out", f"{i}.norm1.out")
        for x in "QKV":  # shared K/V heads (grouped-query) are kv_head{g}
            who = "kv_head{g}" if x != "Q" and cfg.kv_heads != cfg.n_heads else "head{h}"
            at(f"{L}.self_attn.{x.lower()}", "out", f"{i}.self_attn.{who}.{x}")
        at(f"{L}.self_attn.o", "in", f"{i}.self_attn.concat")
        at(f"{L}.self_attn.o", "out", f"{i}.self_attn.Z")
        at(f"{L}.norm1" if not pre else f"{L}.norm2", "in", f"{i}.add1")
        at(f"{L}.norm2", "out", f"{i}.norm2.out")
        if cfg.ffn_kind == "gated":  # (a plain FFN taps act(x·W1) only: its `hidden`)
            at(f"{L}.ffn.w1", "out", f"{i}.ffn.gate")
            at(f"{L}.ffn.w3", "out", f"{i}.ffn.up")
        at(f"{L}.ffn.w2", "in", f"{i}.ffn.hidden")
        at(f"{L}.ffn.w2", "out", f"{i}.ffn.out")
        if not pre:
            at(f"{L}.norm2", "in", f"{i}.add2")
            at(f"{L}.norm2", "out", f"{i}.out", *(["output"] if i == n - 1 else []))
    if pre:
        at("norm", "in", f"{n - 1}.add2", f"{n - 1}.out")
        at("norm", "out", "norm.out", "output")
    return points


def hf_engine(m) -> Callable:
    if m.family is None:
        raise GlassformerError(
            f"the hf engine runs transformers on a Hugging Face folder; {m.name} is not one: "
            f"drop hf from {param('engines')}"
        )
    if m.family not in HF_FAMILIES:
        raise GlassformerError(
            f"the hf engine covers {', '.join(HF_FAMILIES)} folders, not model_type "
            f"{m.family!r}: drop hf from {param('engines')}"
        )
    try:
        import torch
        import transformers
    except ImportError:
        raise GlassformerError(
            f"the hf engine needs transformers (and PyTorch): {install_hint('torch,hf')}"
        ) from None
    cls_name, table = HF_FAMILIES[m.family]
    transformers.utils.logging.disable_progress_bar()
    options = dict(local_files_only=True, dtype=torch.float64, attn_implementation="eager")
    model = getattr(transformers, cls_name).from_pretrained(str(m.path), **options).eval()
    # (eager attention: it returns the attention weights)
    ours = _hf_modules(table, m.cfg)
    points = [p for p in _hf_points(m.cfg) if p[0] in ours]
    modules = dict(model.named_modules())
    wanted = sorted({ours[p[0]][0] for p in points} & set(modules))

    def run(x) -> Steps:
        seen: dict[tuple[str, str], np.ndarray] = {}

        def hook(name: str):
            def record(_module, args, output):
                if args:  # the input, when it is passed by position (always, for these modules)
                    seen[name, "in"] = _first(args[0])
                seen[name, "out"] = _first(output)

            return record

        handles = [modules[w].register_forward_hook(hook(w)) for w in wanted]
        try:
            with torch.no_grad():
                out = model(input_ids=torch.tensor([x.ids]), output_attentions=True)
        finally:
            for h in handles:
                h.remove()
        return _hf_steps(m.cfg, points, ours, seen, out)

    return run


def _first(t) -> np.ndarray:
    """A batch's first sequence as float64 NumPy."""
    return t[0].detach().double().cpu().numpy()


def _hf_steps(cfg, points, ours, seen, out) -> Steps:
    """Our steps from what the hooks saw and the model's outputs (attention weights, logits)."""
    steps: Steps = {}
    D = cfg.head_dim
    for module, where, step in points:
        their, part, n = ours[module]
        if (their, where) not in seen:
            continue
        x = seen[their, where]
        x = np.split(x, n, axis=-1)[part] if n > 1 else x
        if "{h}" in step:
            for h in range(cfg.n_heads):
                steps.setdefault(step.format(h=h), x[..., h * D : (h + 1) * D])
        elif "{g}" in step:
            for g in range(cfg.kv_heads):
                steps.setdefault(step.format(g=g), x[..., g * D : (g + 1) * D])
        else:
            steps.setdefault(step, x)
    stack = "decoder" if cfg.arch == "decoder" else "encoder"
    for i, A in enumerate(getattr(out, "attentions", None) or ()):
        for h in range(cfg.n_heads):
            steps[f"{stack}.{i}.self_attn.head{h}.A"] = _first(A)[h]
    if getattr(out, "logits", None) is not None:
        steps["logits"] = _first(out.logits)
    return steps
