"""An SAE judged on a model and a text, in the float64 reference engine, and its features' cards.

`evaluate` reads the text as a store does (one document a line, cut to the model's context:
`documents`) and runs each document three times through the reference engine
(`reference.forward` under `trace.intervene`):

- clean: the model as it is; the SAE's input (and a transcoder's target) recorded there;
- spliced: the SAE's step replaced by its reconstruction x̂ = SAE(x) (a transcoder's target step
  by the transcoder of its input step), so that everything after reads x̂;
- zero: that step replaced by zeros (the reference point of SAELens's "CE loss recovered").

It reports the next-token cross-entropy (nats per predicted token) of each, the share of the
clean-to-zero gap the SAE recovers, (zero - spliced) / (zero - clean), and on the recorded rows:
the reconstruction MSE (mean over rows and numbers), the explained variance 1 - Σ||x - x̂||² /
Σ||x - mean x||², the mean L0 (features > 0 per row) and the features that never fired.

A feature card (`cards`) holds the contexts where the feature fires most (the window's tokens up
to the row, the token itself, the activation) and its logit effect: the decoder row w_i through
the unembedding, W_U · (γ ⊙ (w_i - mean w_i)) for a LayerNorm (γ ⊙ w_i for RMSNorm): the final
norm's centring and gain applied, its division by the stream's scale left out (a positive factor
per position, which does not change the tokens' order). Only an SAE that writes the residual
stream (a block's output or input, its attention or FFN output) has one.

Deliberately not here: the SAE itself (`sae.py`), reading folders, the command line.
"""

from __future__ import annotations

import numpy as np

from glassformer import reference as R
from glassformer.corpus.sae import SAEConfig, decode, encode, forward
from glassformer.errors import GlassformerError
from glassformer.trace import intervene, tracing

RESIDUAL = (".out", ".add1", ".ffn.out", ".self_attn.Z", "decoder.input")


def documents(lines, size: int, max_tokens: int) -> list[list[int]]:
    """The documents' token ids as a store holds them (record-corpus: one document a line, its
    first `size` tokens, blank lines left out), until max_tokens tokens in all (the last cut).
    `lines` may be lazy: none is read after the last one needed."""
    out, left = [], max_tokens
    for ids in lines:
        ids = list(ids)[: min(size, left)]
        if ids:
            out.append(ids)
            left -= len(ids)
        if left <= 0:
            break
    return out


def check_fits(cfg: SAEConfig, names: dict[str, int]) -> None:
    """The SAE's steps exist in this model with its widths (names: step -> width)."""
    for step, width, what in ((cfg.step, cfg.d_in, "reads"), (cfg.step_out, cfg.out, "writes")):
        if step is None:
            continue
        if step not in names:
            raise GlassformerError(
                f"the SAE {what} {step}, a step this model does not have (it has e.g. "
                f"{', '.join(list(names)[:3])}): use an SAE made for this model"
            )
        if names[step] != width:
            raise GlassformerError(
                f"the SAE {what} {step} with width {width}, and this model's is {names[step]}: "
                "it was made for another model"
            )


def step_widths(params: dict, model_cfg, ids: list[int]) -> dict[str, int]:
    with tracing() as tr:
        R.forward(params, model_cfg, list(ids[:2]))
    return {n: int(np.shape(tr[n])[-1]) for n in tr.keys() if np.ndim(tr[n]) == 2}


def _ce(logits: np.ndarray, ids: list[int]) -> tuple[float, int]:
    """Summed next-token cross-entropy over positions 0..T-2 and how many."""
    z = logits[:-1] - logits[:-1].max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-logp[np.arange(len(ids) - 1), ids[1:]].sum()), len(ids) - 1


def _run(params, model_cfg, ids, fns: dict, keep: tuple = ()) -> tuple[np.ndarray, dict]:
    with tracing(keep=lambda n: n in keep) as tr, intervene(fns):
        logits = R.forward(params, model_cfg, list(ids))
    return np.asarray(logits), {n: np.asarray(tr[n], np.float64) for n in keep if n in tr}


def splice(cfg: SAEConfig, p: dict) -> dict:
    """The intervention that puts the SAE in: {step: x -> x̂} (a transcoder: its input recorded
    at `step`, its target step replaced)."""
    if not cfg.transcoder:
        return {cfg.step: lambda x: forward(cfg, p, x)}
    seen = {}

    def record(x):
        seen["x"] = np.asarray(x, np.float64)
        return x

    return {cfg.step: record, cfg.step_out: lambda y: forward(cfg, p, seen["x"])}


def evaluate(params: dict, model_cfg, cfg: SAEConfig, p: dict, docs: list[list[int]]) -> dict:
    """The report of the module docstring over the documents `docs`, and the rows' features."""
    target = cfg.step_out or cfg.step
    keep = tuple(dict.fromkeys([cfg.step, target]))
    loss = {"clean": 0.0, "spliced": 0.0, "zero": 0.0}
    count, xs, ys, fs = 0, [], [], []
    for ids in docs:
        logits, rec = _run(params, model_cfg, ids, {}, keep)
        ce, n = _ce(logits, ids)
        loss["clean"] += ce
        count += n
        xs.append(rec[cfg.step])
        ys.append(rec[target])
        fs.append(encode(cfg, p, rec[cfg.step]))
        loss["spliced"] += _ce(_run(params, model_cfg, ids, splice(cfg, p))[0], ids)[0]
        loss["zero"] += _ce(_run(params, model_cfg, ids, {target: np.zeros_like})[0], ids)[0]
    if count == 0:
        raise GlassformerError("the text has no line of 2 tokens or more: nothing to predict")
    x, y, f = np.concatenate(xs), np.concatenate(ys), np.concatenate(fs)
    recon = decode(cfg, p, f, x)
    err = ((recon - y) ** 2).sum()
    var = ((y - y.mean(axis=0)) ** 2).sum()
    loss = {k: v / count for k, v in loss.items()}
    gap = loss["zero"] - loss["clean"]
    return {
        "sae": {
            "step": cfg.step,
            "step_out": cfg.step_out,
            "d_in": cfg.d_in,
            "d_sae": cfg.d_sae,
            "architecture": cfg.architecture,
            "k": cfg.k,
        },
        "tokens": count,
        "rows": int(len(x)),
        "mse": float(err / y.size),
        "explained_variance": float(1.0 - err / var) if var > 0 else float("nan"),
        "l0": float((f > 0).sum(axis=-1).mean()),
        "dead": int((~(f > 0).any(axis=0)).sum()),
        "loss": loss,
        "loss_recovered": float((loss["zero"] - loss["spliced"]) / gap) if gap else float("nan"),
    }, f


def logit_effect(
    params: dict, model_cfg, cfg: SAEConfig, p: dict, feature: int
) -> np.ndarray | None:
    """(V,) the feature's decoder row through the final norm's centring and gain and the
    unembedding (the module docstring), or None when the SAE does not write the stream."""
    step = cfg.step_out or cfg.step
    if not step.endswith(RESIDUAL) or cfg.out != model_cfg.d_model:
        return None
    w = np.asarray(p["W_dec"][feature], np.float64)
    if model_cfg.norm == "pre":
        if model_cfg.norm_kind == "layernorm":
            w = w - w.mean()
        w = w * params["decoder.norm.weight"]
    W = params["decoder.tok_embed.weight"] if model_cfg.tie_embeddings else params["lm_head.weight"]
    return W @ w


def cards(
    m, cfg: SAEConfig, p: dict, docs: list[list[int]], f: np.ndarray, features, k: int = 8
) -> list[dict]:
    """A card per feature: its top k contexts in `docs` (rows of f in document order) and logit
    effect (top and bottom tokens)."""
    where = [(w, t) for w, ids in enumerate(docs) for t in range(len(ids))]
    out = []
    for i in features:
        col = f[:, i]
        top = [int(r) for r in np.argsort(-col, kind="stable")[:k] if col[r] > 0]
        examples = []
        for r in top:
            w, t = where[r]
            ids = docs[w]
            examples.append(
                {
                    "before": m.decode(ids[max(0, t - 24) : t]),
                    "token": m.decode([ids[t]]),
                    "after": m.decode(ids[t + 1 : t + 6]),
                    "value": float(col[r]),
                }
            )
        card = {
            "feature": int(i),
            "fires": float((col > 0).mean()),
            "max": float(col.max()),
            "examples": examples,
            "up": [],
            "down": [],
        }
        card |= effect(m, cfg, p, int(i))
        out.append(card)
    return out


def effect(m, cfg: SAEConfig, p: dict, feature: int) -> dict:
    """{"up", "down"}: the six tokens the feature's logit effect raises and lowers most."""
    eff = logit_effect(m.params, m.cfg, cfg, p, feature)
    if eff is None:
        return {"up": [], "down": []}
    order = np.argsort(-eff, kind="stable")
    pair = lambda j: (m.tokens(ids=[int(j)])[0], float(eff[j]))  # noqa: E731 (pieces as read)
    return {"up": [pair(j) for j in order[:6]], "down": [pair(j) for j in order[::-1][:6]]}


def store_cards(m, store, cfg: SAEConfig, p: dict, features, k: int = 8) -> list[dict]:
    """Cards of `features` from a store's rows of the SAE's step (read a chunk at a time): the k
    rows where each fires most, their contexts from the stored tokens, and the logit effect."""
    from glassformer.corpus.store import fingerprint

    store.check_model(fingerprint(m.cfg, m.params), m.name)
    features = np.asarray(list(features), dtype=np.int64)
    best_v = np.full((len(features), k), -np.inf)
    best_r = np.full((len(features), k), -1, np.int64)
    fired, n = np.zeros(len(features), np.int64), 0
    for c in store.chunks(cfg.step):
        f = encode(cfg, p, c.values)[:, features].T  # (n_features, rows)
        fired += (f > 0).sum(axis=1)
        n += f.shape[1]
        v = np.concatenate([best_v, f], axis=1)
        r = np.concatenate([best_r, np.broadcast_to(c.start + np.arange(f.shape[1]), f.shape)], 1)
        keep = np.argsort(-v, axis=1, kind="stable")[:, :k]
        best_v, best_r = np.take_along_axis(v, keep, 1), np.take_along_axis(r, keep, 1)
    out = []
    for j, i in enumerate(features):
        examples = []
        for v, r in zip(best_v[j], best_r[j], strict=True):
            if r < 0 or v <= 0:
                continue
            ctx = store.context(int(r), before=24, after=5)
            at, ids = ctx["at"], ctx["ids"]
            examples.append(
                {
                    "before": m.decode(ids[:at]),
                    "token": m.decode([ids[at]]),
                    "after": m.decode(ids[at + 1 :]),
                    "value": float(v),
                    "row": int(r),
                }
            )
        card = {
            "feature": int(i),
            "fires": float(fired[j] / max(n, 1)),
            "max": float(max(best_v[j][0], 0.0)),
            "examples": examples,
        }
        out.append(card | effect(m, cfg, p, int(i)))
    return out
