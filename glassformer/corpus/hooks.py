"""The steps `record-corpus` reads from the PyTorch engine by forward hooks, so that the engine
stays on its fast path (SDPA, no trace, nothing replaced): a block's output, its norms' outputs,
the stack's final norm, an FFN's hidden layer (the input of its second linear layer) and output,
attention's concatenated heads (the input of its output projection), Z, and a head's C (its slice
of the concatenated heads). Any other step is read through `activations.run_with_cache` instead
(`record.py` decides). The values are the engine's own; `record.py` checks a sample against the
float64 reference engine, and tests/test_corpus.py every row.

Deliberately not here: the engine (unchanged), choosing the steps, the store.
"""

from __future__ import annotations

import re

from glassformer import activations

# Steps read by forward hooks: name pattern -> (the module's path, its input or its output).
_S, _L, _KIND = r"(?P<s>encoder|decoder)", r"(?P<l>\d+)", r"(?P<kind>self_attn|cross_attn)"
_HOOKED = [
    (rf"{_S}\.{_L}\.out", "{s}.layers.{l}", "output"),
    (rf"{_S}\.{_L}\.norm(?P<k>\d)\.out", "{s}.layers.{l}.norm{k}", "output"),
    (rf"{_S}\.norm\.out", "{s}.norm", "output"),
    (rf"{_S}\.{_L}\.ffn\.hidden", "{s}.layers.{l}.ffn.w2", "input"),
    (rf"{_S}\.{_L}\.ffn\.out", "{s}.layers.{l}.ffn", "output"),
    (rf"{_S}\.{_L}\.{_KIND}\.concat", "{s}.layers.{l}.{kind}.o", "input"),
    (rf"{_S}\.{_L}\.{_KIND}\.Z", "{s}.layers.{l}.{kind}", "output"),
    (rf"{_S}\.{_L}\.{_KIND}\.head(?P<h>\d+)\.C", "{s}.layers.{l}.{kind}.o", "input"),
]


def hooked(name: str) -> tuple[str, str, int | None] | None:
    """(module path, "input" or "output", a head's number or None) of a step the fast path reads
    by a forward hook, or None (then the steps are read through `activations.run_with_cache`).
    A head's C is its slice of the concatenated heads that the output projection reads."""
    for pattern, path, what in _HOOKED:
        m = re.fullmatch(pattern, name)
        if m:
            head = m.groupdict().get("h")
            return path.format(**m.groupdict()), what, None if head is None else int(head)
    return None


def read(m, model, names, stacks: dict) -> dict:
    """{name: (B, T, width) NumPy} of the hooked steps of one forward pass of `model`."""
    modules, got, hooks = dict(model.named_modules()), {}, []
    D = m.cfg.head_dim
    for name in names:
        path, what, head = hooked(name)

        def keep(module, args, output=None, name=name, what=what, head=head):
            x = args[0] if what == "input" else output[0] if isinstance(output, tuple) else output
            x = x if head is None else x[..., head * D : (head + 1) * D]
            got[name] = x.detach().cpu().numpy()

        module = modules[path]
        hooks.append(
            module.register_forward_pre_hook(keep)
            if what == "input"
            else module.register_forward_hook(keep)
        )
    try:
        activations.torch_forward(model, m.cfg, m.params)(stacks)
    finally:
        for h in hooks:
            h.remove()
    return got
