"""The neuron view: one attention score taken apart (bertviz's neuron view), from the trace.

A head's score Ω[i, j] is the dot product of row i of its queries and row j of its keys: Q and K,
or with rotary positions the rotated Q_rot and K_rot (the scores are Q_rot·K_rotᵀ); with
grouped-query attention the keys are those of the K/V head the head shares (`kv_head{g}`).
`sources` finds the two steps, `take_apart` the numbers, and `about` the words the page shows
beside a head's map (what it shares, whether its scores are of rotated Q and K).

Deliberately not here: the request's fields (`fields.py`), drawing (`assets/explorer.js`).
"""

from __future__ import annotations

import numpy as np

from glassformer.explain.html_pieces import table
from glassformer.explain.select import KVGroups, kv_groups
from glassformer.explain.words import rotated, sharing
from glassformer.trace import Trace


def sources(trace: Trace, prefix: str) -> tuple[str, str] | None:
    """The steps whose rows' dot products are head `prefix`'s scores: (queries, keys), the
    rotated ones when recorded; None when the trace has no 2-d Q and K of that head."""
    found = kv_groups(trace).kv_of(prefix + ".")
    keys = found[0] if found else prefix
    q = next((f"{prefix}.{n}" for n in ("Q_rot", "Q") if f"{prefix}.{n}" in trace), None)
    k = next((f"{keys}.{n}" for n in ("K_rot", "K") if f"{keys}.{n}" in trace), None)
    if q is None or k is None or len(trace.step(q).shape) != 2 or len(trace.step(k).shape) != 2:
        return None
    return q, k


def about(trace: Trace, prefix: str, groups: KVGroups | None = None) -> str:
    """What to say of a head beside its map: what it shares, and whether it rotates. groups:
    the trace's `KVGroups`, when the caller asks of many heads (made from every name)."""
    groups = groups if groups is not None else kv_groups(trace)
    said = [sharing(prefix + ".", groups), rotated(trace, prefix)]
    return " ".join(s for s in said if s)


def _rows_of(step: str, i: int) -> str:
    """'row i of Q_rot' and where it comes from, for the sentence under the numbers."""
    prefix, _, last = step.rpartition(".")
    where = prefix.rpartition(".")[2]
    whose = f" of {where.replace('kv_head', 'K/V head ')}" if where.startswith("kv_head") else ""
    return f"row {i} of {last}{whose}"


def take_apart(trace: Trace, step, i: int, j: int, rows, cols) -> dict:
    """Score [i, j] of the map `step` as the page draws it: q_i and k_j per dimension, their
    product, the sum, the scaling and the softmax weight. i and j are checked by the caller
    against `extent`."""
    prefix = step.name.rpartition(".")[0]
    q_name, k_name = sources(trace, prefix)
    q, k = trace[q_name][i], trace[k_name][j]
    prod = q * k
    out = {
        "name": prefix,
        "i": i,
        "j": j,
        "q": q,
        "k": k,
        "product": prod,
        "sum": float(prod.sum()),
        "D": int(q.size),
        "q_step": q_name,
        "k_step": k_name,
        "query": rows[i] if rows and i < len(rows) else str(i),
        "key": cols[j] if cols and j < len(cols) else str(j),
        "html": table(np.stack([q, k, prod]), ["q", "k", "q×k"], list(map(str, range(q.size)))),
        "says": f"q is {_rows_of(q_name, i)}, k is {_rows_of(k_name, j)}",
        "about": about(trace, prefix),
    }
    for what in ("scores", "scaled", "A"):
        if f"{prefix}.{what}" in trace and trace[f"{prefix}.{what}"].ndim == 2:
            out[what] = float(trace[f"{prefix}.{what}"][i, j])
    if f"{prefix}.A" in trace and trace[f"{prefix}.A"].ndim == 2:
        out["row"] = trace[f"{prefix}.A"][i]
    mask = f"{prefix}.mask"
    out["masked"] = bool(mask in trace and trace[mask].ndim == 2 and not trace[mask][i, j])
    return out


def extent(trace: Trace, prefix: str) -> tuple[int, int]:
    """How many query rows and key rows the head has (the ranges of i and j)."""
    q_name, k_name = sources(trace, prefix)
    return trace[q_name].shape[0], trace[k_name].shape[0]
