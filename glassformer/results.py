"""What the Model's verbs return: small typed results that print in a few lines.

    told = m.lens("To be or", dla="t")
    told                      # <glassformer.Lens of 8 tokens: ...> a few lines, never the arrays
    told.lens["top_tokens"]   # the fields are the top-level keys of the JSON
    told.to_json()            # what `glassformer lens --json -` prints, byte for byte

Each result is a dataclass whose fields are the top-level keys of the JSON the command line writes
(`Lens`: input, lens, dla), typed; `to_dict()` gives that dict (a field that is None and has no
key today is left out), `to_json()` that JSON text exactly, `repr` a few lines (what, where, the
headline numbers) and `_repr_html_` a small table of the same lines for Jupyter. Fields hold what
the JSON holds (lists and dicts, not arrays), so a result reads the same from Python and from a
`--json` file.

    Lens            `Model.lens`       the logit lens, and direct logit attribution with dla=
    Steered         `Model.steered`    a text decoded without and with steering, step by step
    Choice          `Model.explain_choice`  why beam search kept a hypothesis, split exactly
    Faithfulness    `Model.faithfulness`  deletion and insertion curves of each explanation
    Attribution     `Model.attribute`  each predicted token's logit shared among the inputs
    Ablation        `Model.ablate`     per position the prediction with and without the ablation
    Patching        `Model.patch`      how much of the clean run each head restores
    Classification  `Model.classify`   a text's class, its probability, every class's
    Record          `Model.record`     one generation's --record line (less its "place")
    NextToken, GeneratedText, PooledEmbedding, PredictedClass   `Model.result`, by kind

Deliberately not here: computing any of them (`touch.py`, `generating.py`, the Model), the
reports that render them in full (`explain/`), printing and writing files (`cli/`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import ClassVar

import numpy as np

from glassformer.trace import clip


def _scalar(o):
    """A NumPy scalar as the Python number JSON writes (the command line's `json.dumps`)."""
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def to_json(data) -> str:
    """`data` as the command line's --json writes it: UTF-8 as is, NumPy scalars as numbers."""
    return json.dumps(data, ensure_ascii=False, default=_scalar)


def _words(pieces: list[str], width: int = 70) -> str:
    return clip(" ".join(pieces), width)


def _top(probabilities: dict[str, float], k: int = 3) -> str:
    best = sorted(probabilities.items(), key=lambda kv: -kv[1])[:k]
    return ", ".join(f"{clip(name, 30)} {p:.4f}" for name, p in best)


class Result:
    """What every result shares: `to_json`, a repr of a few lines, a small HTML table. A result
    says what it is in `_title` (one line) and its headline numbers in `_lines` (label, text)."""

    def to_dict(self) -> dict:
        raise NotImplementedError

    def to_json(self) -> str:
        """The JSON the command line writes (--json), byte for byte."""
        return to_json(self.to_dict())

    def _title(self) -> str:
        raise NotImplementedError

    def _lines(self) -> list[tuple[str, str]]:
        return []

    def __repr__(self) -> str:
        lines = [f"<glassformer.{type(self).__name__} {self._title()}"]
        lines += [f"  {label}: {text}" for label, text in self._lines()]
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{escape(label)}</th><td>{escape(text)}</td></tr>"
            for label, text in self._lines()
        )
        title = f"<b>glassformer.{type(self).__name__}</b> {escape(self._title())}"
        return f"<div>{title}<table>{rows}</table></div>"


def _without_none(d: dict, *optional: str) -> dict:
    """`d` less the optional keys whose value is None (keys today's JSON does not write)."""
    return {k: v for k, v in d.items() if not (k in optional and v is None)}


# -- probes ---------------------------------------------------------------------------------------


@dataclass(repr=False)
class Circuit(Result):
    """`Model.circuit`: the exact attribution graph of one logit (`inspect.circuit.Graph`),
    pruned at `threshold`·|logit|: `graph` (the pruned graph's `to_dict()`: target, logit, error,
    kept, nodes, edges), the decoder's readable tokens `input`, the token explained, `versus`."""

    input: list[str]
    token: str
    versus: str | None
    threshold: float
    graph: dict

    def to_dict(self) -> dict:
        d = {"input": self.input, "token": self.token, "versus": self.versus}
        return _without_none(d, "versus") | {"threshold": self.threshold, "graph": self.graph}

    def _title(self) -> str:
        g = self.graph
        return f"of {g['target']}: {g['kept']['nodes']} of {g['kept']['of']} nodes"

    def _lines(self) -> list[tuple[str, str]]:
        g = self.graph
        return [
            ("logit", f"{g['logit']:.6f} (edges in: completeness error {g['error']:.1e})"),
            ("kept", f"{g['kept']['share']:.1%} of the logit at threshold {self.threshold:g}"),
        ]


@dataclass(repr=False)
class QK(Result):
    """`Model.qk`: why a head attends from one position to another (`inspect.qk.QKTable`): its
    score Ω[i, j] split into q_i(a)·k_j(b) over the parts a, b that wrote the query's and the
    key's residual streams. `parts` is the table's `to_dict()` (head, i, j, rows, cols, table,
    score, total, weight, top: the largest entries with the weight A[i, j] would have without
    each); `input` the readable tokens the queries read (an encoder-decoder's decoder text), its
    `source` apart, and the two tokens of the pair."""

    input: list[str]
    source: list[str] | None
    query_token: str
    key_token: str
    parts: dict

    def to_dict(self) -> dict:
        d = {"input": self.input, "source": self.source}
        d |= {"query_token": self.query_token, "key_token": self.key_token}
        return _without_none(d, "source") | self.parts

    def _title(self) -> str:
        p, q, k = self.parts, self.query_token, self.key_token
        return f"{p['head']}: {q!r} (query {p['i']}) -> {k!r} (key {p['j']})"

    def _lines(self) -> list[tuple[str, str]]:
        p = self.parts
        top = p["top"][0] if p["top"] else None
        lines = [
            ("score", f"Ω = {p['score']:.6f}; the table adds up to {p['total']:.6f}"),
            ("weight", f"A = {p['weight']:.4f}"),
        ]
        if top:
            lines.append(
                (
                    "largest",
                    f"{top['query']} · {top['key']} = {top['value']:+.4f} "
                    f"(A would be {top['weight_without']:.4f} without it)",
                )
            )
        return lines


@dataclass(repr=False)
class Faithfulness(Result):
    """`Model.faithfulness`: how faithful each explanation of one logit is on this input
    (`inspect.faithfulness`): the model's readable tokens (`input`; an encoder-decoder's decoder
    text, its `source` apart), the `token` explained (a classifier's class) at `position`, minus
    `versus`'s, the random order's `seed`, and one report per kind of unit, `tokens` and
    `components` (None where no component method applies), each: units, stack, removal, names,
    clean, empty, notes, curves (method, scores, order, deletion, insertion, deletion_area,
    insertion_area, predicted)."""

    input: list[str]
    source: list[str] | None
    token: str
    versus: str | None
    position: int
    seed: int
    tokens: dict
    components: dict | None
    notes: list[str]

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return _without_none(d, "source", "versus", "components")

    def _title(self) -> str:
        what = repr(self.token) + (f" minus {self.versus!r}" if self.versus else "")
        return f"of {what} at position {self.position}"

    def _lines(self) -> list[tuple[str, str]]:
        out = []
        for report in (self.tokens, self.components):
            if report is None:
                continue
            for c in report["curves"]:
                if c["deletion_area"] is None:
                    continue
                areas = f"deletion {c['deletion_area']:.3f}, insertion {c['insertion_area']:.3f}"
                out.append((f"{report['units']}: {c['method'].replace('_', ' ')}", areas))
        return out


@dataclass(repr=False)
class Choice(Result):
    """`Model.explain_choice`: why beam search kept `kept` (`inspect.choice`). `steps`: each of
    its steps, its token against the runner-up token, the log-probability gap (`gap`) split into
    `parts` (heads, FFNs: direct effects) and `tokens` (source and target positions: total
    effects); against `dropped` (`dropped_by` "runner-up": the n-best list's second, or
    "versus"), `parting`: the step where their tokens first differ, split alike, and the final
    `score_gap` (with the length penalty); `beam_ranks`: both ranks in the beam after each step.
    `error`: the largest gap between a sum of parts and the model's number."""

    input: list[str]
    kept: dict
    steps: list[dict]
    length_penalty: float
    beam: int
    error: float
    dropped: dict | None = None
    dropped_by: str | None = None
    parting: dict | None = None
    score_gap: float | None = None
    logprob_gap: float | None = None
    beam_ranks: list[dict] | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        d = {
            "input": self.input,
            "kept": self.kept,
            "dropped": self.dropped,
            "dropped_by": self.dropped_by,
            "length_penalty": self.length_penalty,
            "beam": self.beam,
            "parting": self.parting,
            "score_gap": self.score_gap,
            "logprob_gap": self.logprob_gap,
            "beam_ranks": self.beam_ranks,
            "steps": self.steps,
            "error": self.error,
            "note": self.note,
        }
        optional = ("dropped", "dropped_by", "parting", "score_gap", "logprob_gap", "beam_ranks")
        return _without_none(d, *optional, "note")

    def _title(self) -> str:
        if self.parting is None:
            return f"of {self.kept['text']!r}: {len(self.steps)} steps"
        p = self.parting
        return (
            f"kept {self.kept['text']!r} over {self.dropped['text']!r} at step {p['step']}: "
            f"{p['gap']:+.4f}"
        )

    def _lines(self) -> list[tuple[str, str]]:
        lines = [("steps", f"{len(self.steps)}, each token over the runner-up token")]
        if self.parting is not None:
            top = ", ".join(f"{q['name']} {q['value']:+.4f}" for q in self.parting["parts"][:3])
            lines += [("parts", top), ("final score gap", f"{self.score_gap:+.4f}")]
        return lines + [("error", f"{self.error:.1e} (sums of parts against the model)")]


@dataclass(repr=False)
class Steered(Result):
    """`Model.steered`: one text decoded without and with a `Steering` (`inspect.steering.
    compare`): the steering (pair, layer, step, scale, from_step, norm), the strategy, both
    outputs (`text`, `steered`) and per new token of the steered output (`steps`) its token and
    the top tokens before and after, with p_before and p_after of the token chosen."""

    input: str
    steering: dict
    strategy: str
    text: str
    steered: str
    steps: list[dict]

    def to_dict(self) -> dict:
        keys = ("input", "steering", "strategy", "text", "steered", "steps")
        return {k: getattr(self, k) for k in keys}

    def _title(self) -> str:
        s = self.steering
        return f"at {s['step']} x {s['scale']:g}: {len(self.steps)} new tokens"

    def _lines(self) -> list[tuple[str, str]]:
        changed = sum(s["before"][0]["id"] != s["after"][0]["id"] for s in self.steps)
        return [
            ("without", clip(self.text, 70)),
            ("with", clip(self.steered, 70)),
            ("steps", f"{changed} of {len(self.steps)} top tokens changed"),
        ]


@dataclass(repr=False)
class Lens(Result):
    """`Model.lens`: the decoder's readable tokens (`input`), the logit lens table (`lens`:
    points, labels, top_ids, top_logits, top_probs, norm, top_tokens; rows are residual
    streams, then positions, then the top k) and, with dla=, the direct logit attribution
    (`dla`: rows, cols, heads, other, total, logit, scale, position, norm, token, versus)."""

    input: list[str]
    lens: dict
    dla: dict | None = None

    def to_dict(self) -> dict:
        return _without_none({"input": self.input, "lens": self.lens, "dla": self.dla}, "dla")

    def _title(self) -> str:
        return f"of {len(self.input)} tokens: {len(self.lens['labels'])} residual streams"

    def _lines(self) -> list[tuple[str, str]]:
        lens = self.lens
        last = f"after {clip(self.input[-1], 20)!r}: "
        first, final = lens["top_tokens"][0][-1], lens["top_tokens"][-1][-1]
        out = [
            ("input", _words(self.input)),
            (lens["labels"][0], last + f"{clip(first[0], 20)!r} {lens['top_probs'][0][-1][0]:.4f}"),
            (
                lens["labels"][-1],
                last + f"{clip(final[0], 20)!r} {lens['top_probs'][-1][-1][0]:.4f}",
            ),
        ]
        if self.dla is not None:
            d = self.dla
            what = repr(d["token"]) + (f" minus {d['versus']!r}" if d["versus"] else "")
            sums = f"logit {d['logit']:.4f}, sum of the parts {d['total']:.4f}"
            out.append(("dla", f"{what} at position {d['position']}: {sums}"))
        return out


@dataclass(repr=False)
class Attribution(Result):
    """`Model.attribute`: the input's readable tokens (`input`), the tokens predicted
    (`predicted`), and the attribution: its `method` and `stack`, the `targets` positions and
    `tokens` (ids) explained, `scores` (one row per predicted token, one column per input token),
    `f` (each predicted token's logit), `f_baseline` and `completeness` (integrated gradients:
    f at the baseline, and |sum of scores - (f - f_baseline)|; else None), the `baseline` token
    when one was given, and a `note` when the default baseline cannot be resolved."""

    input: list[str]
    predicted: list[str]
    method: str
    stack: str
    targets: list[int]
    tokens: list[int]
    scores: list[list[float]]
    f: list[float]
    f_baseline: list[float] | None
    completeness: list[float] | None
    baseline: str | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return _without_none(d, "baseline", "note")

    def _title(self) -> str:
        how = self.method.replace("_", " ")
        return f"({how}) of {len(self.predicted)} predicted tokens over {len(self.input)} inputs"

    def _lines(self) -> list[tuple[str, str]]:
        out = [("input", _words(self.input)), ("predicted", _words(self.predicted))]
        if self.scores:
            row = np.asarray(self.scores[0], dtype=float)[: len(self.input)]
            k = int(np.argmax(np.abs(row)))
            most = f"most from {clip(self.input[k], 20)!r} ({row[k]:+.4f}) of f = {self.f[0]:.4f}"
            out.append((f"-> {clip(self.predicted[0], 20)}", most))
        if self.completeness is not None:
            out.append(("completeness error", f"at most {max(self.completeness):.1e}"))
        if self.baseline is not None:
            out.append(("baseline", self.baseline))
        if self.note is not None:
            out.append(("note", clip(self.note, 120)))
        return out


# -- interventions --------------------------------------------------------------------------------


def _class_lines(classes: list[dict] | None, k: int = 3) -> list[tuple[str, str]]:
    """A classifier's classes before -> after, the most changed first (a few of them)."""
    rows = sorted(classes or (), key=lambda r: -abs(r["change"]))[:k]
    return [
        (f"class {clip(r['label'], 30)}", f"{r['before']:.4f} -> {r['after']:.4f}") for r in rows
    ]


@dataclass(repr=False)
class Ablation(Result):
    """`Model.ablate`: the names ablated, the trace `steps` they zeroed, per position of a model
    that predicts tokens (`positions`: position, after_token, predicted, predicted_ablated,
    changed, max_logit_change; None for a classifier), for a classifier each class's
    probability before and after (`classes`: label, before, after, change; None otherwise), the
    `notes` on shared K/V heads (None: none), and the output generated again without and with
    the ablation (`text`, `text_ablated`; None when the run generated nothing)."""

    ablated: list[str]
    steps: list[str]
    positions: list[dict] | None = None
    classes: list[dict] | None = None
    notes: list[str] | None = None
    text: str | None = None
    text_ablated: str | None = None

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return _without_none(d, "positions", "classes", "notes", "text", "text_ablated")

    @property
    def changed(self) -> list[int]:
        """The positions whose predicted token the ablation changed."""
        return [r["position"] for r in self.positions or () if r["changed"]]

    def _title(self) -> str:
        n = len(self.steps)
        return f"of {clip(', '.join(self.ablated), 80)} ({n} step{'s' * (n != 1)})"

    def _lines(self) -> list[tuple[str, str]]:
        out = _class_lines(self.classes)
        if self.positions is None:
            return out
        changed, n = self.changed, len(self.positions)
        where = f" (positions {clip(', '.join(map(str, changed)), 60)})" if changed else ""
        out.append(("predictions changed", f"{len(changed)} of {n}{where}"))
        if self.positions:
            worst = max(self.positions, key=lambda r: r["max_logit_change"])
            at = f"{worst['max_logit_change']:.4f} at position {worst['position']}"
            out.append(("largest logit change", at))
        if self.text_ablated is not None:
            out += [("output", clip(repr(self.text), 80))]
            out += [("with the ablation", clip(repr(self.text_ablated), 80))]
        return out


@dataclass(repr=False)
class Patching(Result):
    """`Model.patch`: the `clean` text, the `position` patched for (after `after_token`; both
    None for a classifier, which has one output), the `metric` (a logit difference), per
    attention kind the table of each head's restored share (`tables`: rows, cols, positions,
    values, raw, clean, corrupted, names) and, for a classifier, each class's probability in
    this run (before) and in the clean run (after) (`classes`: label, before, after, change;
    None otherwise)."""

    clean: str
    metric: str
    tables: dict[str, dict]
    position: int | None = None
    after_token: str | None = None
    classes: list[dict] | None = None

    def to_dict(self) -> dict:
        d = {"clean": self.clean, "position": self.position, "after_token": self.after_token}
        d |= {"metric": self.metric, "tables": self.tables, "classes": self.classes}
        return _without_none(d, "position", "after_token", "classes")

    def _title(self) -> str:
        at = f" at position {self.position}" if self.position is not None else ""
        return f"from {clip(repr(self.clean), 60)}{at}"

    def _lines(self) -> list[tuple[str, str]]:
        after = f" after {self.after_token!r}" if self.after_token is not None else ""
        out = [("metric", f"{clip(self.metric, 100)}{after}"), *_class_lines(self.classes)]
        for kind, t in self.tables.items():
            v = np.asarray(t["values"], dtype=float)
            if v.ndim == 2 and np.isfinite(v).any():
                i, j = np.unravel_index(int(np.nanargmax(np.abs(v))), v.shape)
                out.append((kind, f"{t['rows'][i]} {t['cols'][j]} restores {v[i, j]:+.3f}"))
        return out


# -- what a model predicts ------------------------------------------------------------------------


@dataclass(repr=False)
class Classification(Result):
    """`Model.classify`: the class a text is given, its `label` (name) and `index` (number;
    "class" in the JSON), its `probability`, and every class's (`probabilities` by name)."""

    label: str
    index: int
    probability: float
    probabilities: dict[str, float]

    @classmethod
    def of(cls, names: list[str], probs) -> Classification:
        """The most likely of the classes `names` under the probabilities `probs`."""
        k = int(np.argmax(probs))
        every = dict(zip(names, map(float, probs), strict=True))
        return cls(names[k], k, float(probs[k]), every)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "class": self.index,
            "probability": self.probability,
            "probabilities": self.probabilities,
        }

    def _title(self) -> str:
        return f"{clip(self.label, 60)} with probability {self.probability:.4f}"

    def _lines(self) -> list[tuple[str, str]]:
        return [("top classes", _top(self.probabilities))]


@dataclass(repr=False)
class Record(Result):
    """`Model.record`: one generation's `--record` line less its "place": the `input`'s pieces,
    the new `ids` and their `tokens`, per recorded step its values at every new token
    (`steps`: {name: [values per token]}) and, when top_tokens > 0, the next tokens at every
    new token (`top_k`: [{ids, tokens, logprobs}]; None otherwise)."""

    input: list[str]
    ids: list[int]
    tokens: list[str]
    steps: dict[str, list]
    top_k: list[dict] | None = None

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return _without_none(d, "top_k")

    def _title(self) -> str:
        return f"of {len(self.ids)} new tokens after {len(self.input)} input tokens"

    def _lines(self) -> list[tuple[str, str]]:
        out = [("new tokens", _words(self.tokens))]
        names = list(self.steps)
        if names:
            out.append(("steps", clip(", ".join(names), 100)))
        if self.top_k:
            out.append(("top tokens per new token", str(len(self.top_k[0]["ids"]))))
        return out


# -- what a run says (`Model.result`), one kind each ----------------------------------------------


@dataclass(repr=False)
class _Outcome(Result):
    kind: ClassVar[str]

    def _fields(self) -> dict:
        raise NotImplementedError

    def _title(self) -> str:
        return clip(self.summary, 200)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **self._fields(), "summary": self.summary}


@dataclass(repr=False)
class NextToken(_Outcome):
    """A run that generated nothing: the most likely next token (`id`, its piece `token`) with its
    `probability`, and the one-line `summary` of an explain report."""

    kind: ClassVar[str] = "next token"
    id: int
    token: str
    probability: float
    summary: str

    def _fields(self) -> dict:
        return {"id": self.id, "token": self.token, "probability": self.probability}


@dataclass(repr=False)
class GeneratedText(_Outcome):
    """A run that generated its output: the new `ids`, their `text`, and the `summary`."""

    kind: ClassVar[str] = "text"
    ids: list[int]
    text: str
    summary: str

    def _fields(self) -> dict:
        return {"ids": self.ids, "text": self.text}


@dataclass(repr=False)
class PooledEmbedding(_Outcome):
    """An encoder without a classifier: the pooled `embedding` (unit length) and the `summary`."""

    kind: ClassVar[str] = "embedding"
    embedding: list[float]
    summary: str

    def _fields(self) -> dict:
        return {"embedding": self.embedding}


@dataclass(repr=False)
class PredictedClass(_Outcome):
    """A classifier: its `classification` of the text (`Classification`) and the `summary`;
    the JSON holds the classification's keys at the top level."""

    kind: ClassVar[str] = "class"
    classification: Classification
    summary: str

    def _fields(self) -> dict:
        return self.classification.to_dict()

    def _lines(self) -> list[tuple[str, str]]:
        return self.classification._lines()


Outcome = NextToken | GeneratedText | PooledEmbedding | PredictedClass
