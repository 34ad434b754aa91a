"""The explorer's stores of activations (`serve MODEL --store DIR`): which store belongs to a
model (its fingerprint: the Config and weights it was recorded from), the steps it holds, and a
unit's top examples over it (`corpus/top.py`), for the card of a step; with `serve --sae SAE`, an
SAE's feature card on the card of the step it reads: the feature's top examples over the store and
its logit effect (`corpus/evaluate.effect`).

Deliberately not here: reading a store (`corpus/store.py`), ranking (`corpus/top.py`), HTTP and
the request's fields (`app.py`, `fields.py`), drawing (`assets/corpus.js`).
"""

from __future__ import annotations

import threading

from glassformer.corpus.store import Store, fingerprint
from glassformer.corpus.top import top_examples
from glassformer.serve import fields
from glassformer.serve.sessions import Fixed, NotFound

MAX_K = 50  # examples one request may ask for


class Stores:
    """The stores given to the server, matched to the models they were recorded from."""

    def __init__(self, stores: list[Store], saes=()):
        self.stores = list(stores)
        self.saes = list(saes)  # (folder, SAEConfig, params) of each `serve --sae SAE`
        self._of: dict[str, Store | None] = {}  # model id -> its store (fingerprint computed once)
        self._lock = threading.Lock()

    def of(self, model_id: str, m) -> Store | None:
        with self._lock:
            if model_id not in self._of:
                found = None
                if self.stores and not isinstance(m, Fixed):
                    mine = fingerprint(m.cfg, m.params)
                    found = next(
                        (s for s in self.stores if s.index["model"]["fingerprint"] == mine), None
                    )
                self._of[model_id] = found
            return self._of[model_id]

    def steps(self, model_id: str, m) -> dict:
        """{"store": its folder or None, "steps": the steps it holds, "rows"}."""
        st = self.of(model_id, m)
        if st is None:
            return {"store": None, "steps": [], "rows": 0}
        features = {
            cfg.step: {"sae": i, "d_sae": cfg.d_sae}
            for i, (_, cfg, _) in enumerate(self.saes)
            if not cfg.transcoder and st.steps.get(cfg.step) == cfg.d_in
        }
        return {
            "store": str(st.path),
            "steps": list(st.steps),
            "rows": st.rows,
            "features": features,
        }

    def top(self, model_id: str, m, body: dict) -> dict:
        """`Top.to_dict()` of the unit `body["unit"]` over the model's store: k examples."""
        st = self.of(model_id, m)
        if st is None:
            raise NotFound(
                "no store of activations of this model was given to the explorer: start it with a "
                "store recorded from this model"
            )
        unit = fields.text(body, "unit")
        k = fields.integer(body, "k", 1, MAX_K, default=10)
        if fields.get(body, "sae", None) is None:
            return top_examples(st, unit, k=k, before=16, after=4).to_dict()
        if not self.saes:
            raise NotFound("no SAE was given to the explorer: start it with --sae SAE")
        folder, cfg, p = self.saes[fields.integer(body, "sae", 0, len(self.saes) - 1)]
        if not unit.startswith("feature:"):
            raise fields.RequestError(400, f"'unit' must be feature:N with 'sae', got {unit!r}")
        from glassformer.corpus.evaluate import effect

        out = top_examples(st, unit, k=k, before=16, after=4, sae=folder).to_dict()
        return out | effect(m, cfg, p, int(unit.partition(":")[2]))
