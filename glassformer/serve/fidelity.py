"""Fidelity shown, not claimed: how far the other engines are from the reference on this input.

`torch_vs_reference(m, run)` runs the PyTorch engine in float64 with the trace on (its explicit
attention path) on the run's input and returns the largest |difference| over every step both
engines record (all but the LayerNorm internals the fused op does not expose), and where it is.
`hf_vs_reference(m, run)`, for a model read from a Hugging Face folder when `transformers` is
installed, runs that library's own model class on the same folder (float64, local files only)
and compares its output: logits (GPT-2, Marian, Pegasus) or the last hidden state (BERT).
Without torch or transformers the badge says so. Nothing is fetched from a hub.

A float32 view's run (`runs.py`) shows the PyTorch engine's float32 numbers: its badge compares
what is shown, every step, with the float64 reference made for it (`view_vs_reference`), and
says whether the largest difference over the largest value stays within FLOAT32_REL.
"""

from __future__ import annotations

import numpy as np

from glassformer.engine_diff import compare
from glassformer.errors import INSTALL_TORCH, install_hint
from glassformer.model import Model
from glassformer.serve.runs import REFERENCE, Run, reference
from glassformer.serve.sessions import Fixed
from glassformer.trace import tracing

# The class of each family, and what of its output is compared with which step of the trace.
HF_CLASSES = {
    "gpt2": ("GPT2LMHeadModel", "logits", "logits"),
    "bert": ("BertModel", "last_hidden_state", "encoder.output"),
    "marian": ("MarianMTModel", "logits", "logits"),
    "pegasus": ("PegasusForConditionalGeneration", "logits", "logits"),
    "llama": ("LlamaForCausalLM", "logits", "logits"),
    "qwen2": ("Qwen2ForCausalLM", "logits", "logits"),
}
FLOAT32_REL = 1e-4  # a float32 view agrees when every step is this close, relative to its scale


def badge(m: Model | Fixed, run: Run) -> dict:
    """Both comparisons for this run (made once per run)."""
    if "fidelity" not in run.extra:
        if isinstance(m, Fixed):
            run.extra["fidelity"] = {
                "torch": None,
                "note": "a walkthrough: the articles' own steps, checked against their printed "
                "numbers by the tests",
            }
        else:
            mine = torch_vs_reference if run.engine == REFERENCE else view_vs_reference
            run.extra["fidelity"] = {"torch": mine(m, run)} | {"hf": hf_vs_reference(m, run)}
        run.extra["fidelity"]["steps"] = len(run.trace)  # what "compared" is out of: the page's
    return run.extra["fidelity"]


def _largest(pairs) -> dict:
    """The largest difference over the steps both engines recorded with one shape
    (`engine_diff.compare`: equal infinities agree, a non-finite value against another differs by
    inf), and the step where it is."""
    worst, where, n = 0.0, None, 0
    for name, a, b in pairs:
        if np.shape(a) != np.shape(b):
            continue
        n += 1
        d = compare(a, b).max_abs
        if where is None or d > worst:
            worst, where = d, name
    return {"max_abs_diff": worst, "where": where, "compared": n}


def view_vs_reference(m: Model, run: Run) -> dict:
    """A float32 view against the float64 reference: every step both record (the view's own
    values, its deferred steps made now): the largest difference, and the largest relative to
    a step's largest value (what float32 rounding makes), with where each is."""
    ref = reference(m, run)
    cells = [
        (s.name, compare(s.values, ref[s.name]))
        for s in run.trace.steps
        if s.name in ref and s.shape == ref.step(s.name).shape
    ]
    by_abs = max(cells, key=lambda c: c[1].max_abs, default=(None, None))
    by_rel = max(cells, key=lambda c: c[1].max_rel, default=(None, None))
    return {
        "available": True,
        "engine": "PyTorch float32 (shown) vs NumPy float64",
        "max_abs_diff": by_abs[1].max_abs if cells else 0.0,
        "where": by_abs[0],
        "max_rel_diff": by_rel[1].max_rel if cells else 0.0,
        "where_rel": by_rel[0],
        "compared": len(cells),
        "tolerance": FLOAT32_REL,
    }


def torch_vs_reference(m: Model, run: Run) -> dict:
    model = m.runtime.torch("float64")
    if model is None:
        return {"available": False, "note": f"PyTorch is not installed: {INSTALL_TORCH}"}
    import torch

    cfg = m.cfg
    with torch.no_grad(), np.errstate(all="ignore"), tracing() as tr:
        if cfg.arch == "encoder-decoder":
            model(torch.tensor([run.ids]), src_ids=torch.tensor([run.src]))
        else:
            model(torch.tensor([run.ids]))
    ref = run.trace
    pairs = [(s.name, s.values, ref[s.name]) for s in tr.steps if s.name in ref]
    return {"available": True, "engine": "PyTorch float64"} | _largest(pairs)


def hf_vs_reference(m: Model, run: Run) -> dict | None:
    """None when the model did not come from a Hugging Face folder."""
    if m.family is None:
        return None
    if m.family not in HF_CLASSES:
        return {"available": False, "note": f"no comparison for model_type {m.family!r}"}
    try:
        import torch
        import transformers
    except ImportError:
        why = f"transformers is not installed (optional): {install_hint('torch,hf')}"
        return {"available": False, "note": why}
    cls_name, field, step = HF_CLASSES[m.family]

    def load():
        transformers.utils.logging.disable_progress_bar()  # the server never prints
        cls = getattr(transformers, cls_name)
        return cls.from_pretrained(str(m.path), local_files_only=True, dtype=torch.float64).eval()

    try:
        model = m.runtime.cached("hf", load)
        with torch.no_grad():
            if m.cfg.arch == "encoder-decoder":
                out = model(
                    input_ids=torch.tensor([run.src]), decoder_input_ids=torch.tensor([run.ids])
                )
            else:
                out = model(input_ids=torch.tensor([run.ids]))
        theirs = getattr(out, field)[0].double().numpy()
    except Exception as e:  # noqa: BLE001 - optional: any failure is a note on the badge
        return {"available": False, "note": f"transformers could not run it ({type(e).__name__})"}
    ours = reference(m, run)[step]  # the float64 reference's, even when a view is shown
    if theirs.shape != ours.shape:  # e.g. a vocabulary padded differently
        return {"available": False, "note": f"shapes differ: {theirs.shape} vs {ours.shape}"}
    result = _largest([(step, theirs, ours)])
    return {"available": True, "engine": f"transformers {cls_name}", "step": step} | result
