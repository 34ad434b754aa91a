"""The probes of one input: the logit lens with direct logit attribution (`Model.lens`), the
exact attribution graph of one logit (`Model.circuit`) and input attribution
(`Model.attribute`), from a Model's text (read through its `Runtime`, `m` below) to
`lens.py`'s and `attribution.py`'s work and back as typed results (`results.Lens`,
`results.Attribution`). The lens runs on the float64 reference engine, attribution on the PyTorch
engine in float64.

Deliberately not here: the traced run, ablation and patching (`touch.py`); argument parsing,
printing, HTML.
"""

from __future__ import annotations

import difflib

import numpy as np

from glassformer import numerics, results
from glassformer import reference as R
from glassformer.errors import InputError, Said, param
from glassformer.inputs import utf8
from glassformer.trace import tracing

# A decoder's text is its TEXT; only an encoder-decoder's decoder reads a target.
_NOT_A_TARGET = (
    f"{param('target')} is the decoder text of an encoder-decoder; for a decoder, put it in "
    f"{param('text')}"
)


def decoder_input(m, text: str, target: str | None) -> tuple[list[int] | None, list[int]]:
    """(source ids or None, decoder ids) a probe runs on: a decoder's text; an encoder-decoder's
    source and --target, or its greedy translation (the end token left out)."""
    ids = m.encode(text)
    if m.cfg.arch == "decoder":
        return None, ids
    if m.cfg.arch != "encoder-decoder":
        raise InputError(
            f"{m.name} is an encoder: it predicts no tokens to probe; use a decoder or "
            "an encoder-decoder (explain shows an encoder's every step)"
        )
    if target is not None:
        return ids, m.bos() + m.encode(target, room=1, what=param("target"))
    from glassformer.decoding import greedy

    step = m.step(ids, reference=True, fix=None)
    gen = greedy(step, m.bos(), m.cfg.max_len - 1, m.tok.eos_id, m.cfg.max_len)
    return ids, gen.ids[:-1] if gen.stopped_at_eos else gen.ids


def _position(position: int | None, n: int, reader: str) -> int:
    """The position a probe explains (None: the last) among the n tokens `reader` reads."""
    position = -1 if position is None else position
    if not -n <= position < n:
        raise InputError(
            f"{param('position', position)}: {reader} reads {n} tokens, so a position "
            f"is in 0..{n - 1} (or -{n}..-1, counted from the end)"
        )
    return position


def token_id(m, text: str, name: str) -> int:
    """The one token `text` is (the parameter `name`: dla, versus), or #ID: the token of that id."""
    if not isinstance(text, str) or not utf8(text, param(name)):
        raise InputError(f"{param(name)} is empty: give one token")
    ids = m.need_tokenizer().encode(text)
    if len(ids) != 1 and text[0] == "#" and text[1:].isdigit():  # a token by its id: #445
        if int(text[1:]) >= m.cfg.vocab_size:
            raise InputError(
                f"{param(name, text=repr(text))}: the vocabulary has {m.cfg.vocab_size} tokens, "
                f"#0..#{m.cfg.vocab_size - 1}"
            )
        return int(text[1:])
    if len(ids) != 1:
        pieces = m.readable(ids)
        raise InputError(
            f"{param(name, text=repr(text))} is {len(ids)} tokens ({' '.join(pieces)}); give one "
            "token"
        )
    return ids[0]


def lens(
    m, text: str, *, target=None, k=3, sublayers=False, dla=None, versus=None, position=None
) -> results.Lens:
    """See `Model.lens`: the readable tokens, the logit lens table and the DLA."""
    from glassformer.inspect import lens as L

    if target is not None and m.cfg.arch == "decoder":
        raise InputError(_NOT_A_TARGET)
    if dla is None and versus is not None:
        raise InputError(
            f"{param('versus', versus, flag_alone=True)} subtracts a token's logit in "
            f"{param('dla')}'s attribution: give {param('dla', text='TOKEN')} too, or drop "
            f"{param('versus')}"
        )
    if dla is None and position is not None:
        raise InputError(
            f"{param('position', position, flag_alone=True)} chooses the position "
            f"{param('dla')} explains: give {param('dla', text='TOKEN')} too, or drop "
            f"{param('position')}"
        )
    src, ids = decoder_input(m, text, target)
    position = _position(position, len(ids), "the decoder")
    with tracing() as trace:
        logits = R.forward(m.params, m.cfg, ids, src_ids=src)
    numerics.check(logits[None], lambda _: ("the logits", ids, src), m.params, m.cfg)
    table = L.logit_lens(trace, m.params, m.cfg, k=k, sublayers=sublayers)
    result = results.Lens(
        m.readable(ids), table.to_dict(tokens=m.readable(range(m.cfg.vocab_size)))
    )
    if dla is not None:
        token = token_id(m, dla, "dla")
        other = token_id(m, versus, "versus") if versus is not None else None
        d = L.direct_logit_attribution(trace, m.params, m.cfg, token, other, position)
        result.dla = d.to_dict() | {"token": dla, "versus": versus}
    return result


def circuit(
    m,
    text: str,
    *,
    target=None,
    versus=None,
    position=None,
    decoder=None,
    threshold=0.02,
    neurons=0,
):
    """See `Model.circuit`: the exact attribution graph of one logit, pruned."""
    from glassformer.inspect import circuit as C

    if decoder is not None and m.cfg.arch != "encoder-decoder":
        raise InputError(
            f"{param('decoder')} is the decoder text of an encoder-decoder; for a decoder, put "
            f"it in {param('text')}"
        )
    if not 0 <= threshold <= 1:
        raise InputError(f"{param('threshold', threshold)}: a share of the logit in 0..1")
    src, ids, trace, logits = _traced(m, text, decoder)
    position = _position(position, len(ids), "the model")
    row = logits[position if m.cfg.arch != "encoder" else 0]
    token = int(row.argmax()) if target is None else _choice(m, target, "target")
    other = None if versus is None else _choice(m, versus, "versus")
    g = C.graph(trace, m.params, m.cfg, token, other, position, neurons=neurons)
    if m.cfg.arch == "encoder":
        name = m.class_names.__getitem__
    else:
        name = lambda i: m.readable([i])[0]  # noqa: E731
    kept = g.pruned(threshold).to_dict()
    read = {"encoder": m.readable(src if src is not None else ids), "decoder": m.readable(ids)}
    for node in kept["nodes"]:  # the token at the node's position, as the reader sees it
        if node["position"] >= 0:
            node["token"] = read[node["stack"]][node["position"]]
    kept["tokens"] = {s: read[s] for s in dict.fromkeys(g.stacks)}  # every position's, by stack
    other_name = None if other is None else name(other)
    return results.Circuit(m.readable(ids), name(token), other_name, threshold, kept)


def _traced(m, text: str, decoder: str | None):
    """(source ids or None, ids, trace, logits) of one traced pass of the reference engine on a
    probe's input: an encoder's text, a decoder's, an encoder-decoder's source and decoder text
    (default its greedy translation). A classifier's logits are (1, n_classes)."""
    if m.cfg.arch == "encoder":
        src, ids = None, m.encode(text)
    else:
        src, ids = decoder_input(m, text, decoder)
    with tracing() as trace:
        if m.cfg.arch == "encoder":
            logits = R.classify(m.params, m.cfg, ids)[None]  # (1, n_classes)
        else:
            logits = R.forward(m.params, m.cfg, ids, src_ids=src)
    numerics.check(logits[None], lambda _: ("the logits", ids, src), m.params, m.cfg)
    return src, ids, trace, logits


def qk(m, text: str, head: str, *, query=None, key=None, decoder=None) -> results.QK:
    """See `Model.qk`: why `head` attends from `query` to `key`, Ω[i, j] split by the parts of
    the residual streams (`inspect/qk.py`)."""
    from glassformer.inspect import qk as Q

    if decoder is not None and m.cfg.arch != "encoder-decoder":
        raise InputError(
            f"{param('decoder')} is the decoder text of an encoder-decoder; for a decoder, put "
            f"it in {param('text')}"
        )
    if not Q.HEAD.match(head):
        raise InputError(
            f"{param('head', text=repr(head))} is not a head: name one as STACK.LAYER.KIND.headH, "
            "e.g. decoder.0.self_attn.head1"
        )
    src, ids, trace, _ = _traced(m, text, decoder)
    if f"{head}.A" not in trace:
        heads = [n[:-2] for n in trace if n.endswith(".A") and Q.HEAD.match(n[:-2])]
        raise InputError(
            f"{param('head', text=repr(head))} is not in this model: its heads are "
            f"{heads[0]} .. {heads[-1]}"
        )
    A = np.asarray(trace[f"{head}.A"], dtype=np.float64)  # (T, S)
    (T, S), i = A.shape, -1 if query is None else query
    if not -T <= i < T:
        raise InputError(f"{param('query', i)}: {head} has {T} queries, 0..{T - 1} (or -{T}..-1)")
    i %= T
    j = int(A[i].argmax()) if key is None else key  # default: where it looks most
    if not 0 <= j < S:
        raise InputError(f"{param('key', j)}: {head} reads {S} keys, 0..{S - 1}")
    table = Q.decompose(trace, m.params, m.cfg, head, i, j)
    queries = m.readable(ids)
    keys = m.readable(src) if ".cross_attn." in head else queries
    source = None if src is None else m.readable(src)
    return results.QK(queries, source, queries[i], keys[j], table.to_dict(k=10))


def _choice(m, text: str, name: str) -> int:
    """A classifier's class (by label) or one token (`token_id`)."""
    if m.cfg.arch == "encoder":
        classes = m.class_names
        if text not in classes:
            said = param(name, text=repr(text))
            raise InputError(f"{said} is not a class: choose one of {', '.join(classes)}")
        return classes.index(text)
    return token_id(m, text, name)


def attribute(
    m,
    text: str,
    *,
    target=None,
    method="integrated_gradients",
    steps=None,
    max_new_tokens=None,
    baseline=None,
) -> results.Attribution:
    """See `Model.attribute`: the input's tokens, those predicted, and the attribution."""
    import torch

    from glassformer.decoding import greedy
    from glassformer.inspect import attribution
    from glassformer.torch_model import from_params
    from glassformer.torch_steps import step_fn

    cfg = m.cfg
    if target is not None and cfg.arch == "decoder":
        raise InputError(_NOT_A_TARGET)
    if steps is not None and method != "integrated_gradients":
        raise InputError(
            f"{param('attribute.steps', steps, flag_alone=True)} sets integrated gradients' "
            f"nodes, and {method.replace('_', ' ')} has none: drop {param('attribute.steps')}"
        )
    if max_new_tokens is not None and cfg.arch == "encoder-decoder":
        raise InputError(
            f"{param('max_new_tokens', max_new_tokens, flag_alone=True)} sets how many tokens a "
            "decoder predicts; an encoder-decoder's are its translation (or "
            f"{param('target')}): drop it"
        )
    steps = 64 if steps is None else steps
    base = None if baseline is None else baseline_id(m, baseline, method)
    if cfg.arch == "decoder":
        prompt = m.encode(text, room=1)
        model = from_params(cfg, m.params, dtype=torch.float64).eval()
        room = min(max_new_tokens or 5, cfg.max_len - len(prompt))
        step = numerics.checked(step_fn(model), m.params, cfg, len(prompt))
        gen = greedy(step, prompt, room, m.tok.eos_id, cfg.max_len)
        ids, src, stack, shown = gen.ids, None, "decoder", gen.ids  # a token explains later ones
        targets = list(range(len(prompt) - 1, len(ids) - 1))
    else:
        src, ids = decoder_input(m, text, target)
        model = from_params(cfg, m.params, dtype=torch.float64).eval()
        stack, shown = "encoder", src
        targets = list(range(len(ids) - 1))
    if not targets:
        raise InputError("nothing was predicted to explain: give a shorter text")
    res = attribution.input_attribution(
        model, ids, targets, method=method, steps=steps, stack=stack, src_ids=src, baseline=base
    )
    numerics.check(res.scores[None], lambda _: ("the attributions", ids, src), m.params, cfg)
    out = results.Attribution(m.readable(shown), m.readable(res.tokens), **res.to_dict())
    if base is not None:
        out.baseline = m.readable([base])[0]
    elif method == "integrated_gradients" and cfg.positions in ("rotary", "none"):
        out.note = Said(
            "this model adds no position vectors, so the baseline (every token embedding 0) is an "
            "all-zero input, where its norms jump (each scales a vanishing row by up to 1/√ε): "
            f"the integral cannot be resolved and the completeness error stays large at any "
            f"{param('attribute.steps')}; give a token's embedding as the baseline instead "
            f"({param('baseline', text='TOKEN')}, e.g. "
            f"{m.tok.specials.get('pad') or m.tok.vocab[0]!r}), or use gradient_x_input"
        )
    return out


def baseline_id(m, token, method: str) -> int:
    """Integrated gradients' baseline token: an id, a vocabulary piece, or `#id`."""
    if method != "integrated_gradients":
        raise InputError(
            f"{param('baseline')} is integrated gradients'; {method} has none: drop it"
        )
    vocab = m.tok.vocab
    if isinstance(token, int) and not isinstance(token, bool):
        return token  # (the range is checked by attribution)
    if token in vocab:
        return vocab.index(token)
    if isinstance(token, str) and token.startswith("#") and token[1:].isdigit():
        return int(token[1:])
    close = difflib.get_close_matches(str(token), vocab, n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise InputError(
        f"{param('baseline', text=repr(token))} is not a piece of the vocabulary{hint}: give a "
        "token as the "
        "vocabulary spells it, or #ID"
    )


def faithfulness(
    m,
    text: str,
    *,
    target=None,
    versus=None,
    position=None,
    decoder=None,
    baseline=None,
    steps=None,
    seed=0,
) -> results.Faithfulness:
    """See `Model.faithfulness`: every explanation's deletion and insertion curves against
    exact ablations of the reference engine (`inspect/faithfulness.py`)."""
    from glassformer.inspect import circuit as C
    from glassformer.inspect import faithfulness as F
    from glassformer.inspect import interventions as I
    from glassformer.inspect import lens as L

    cfg, encoder = m.cfg, m.cfg.arch == "encoder"
    if decoder is not None and cfg.arch != "encoder-decoder":
        raise InputError(
            f"{param('decoder')} is the decoder text of an encoder-decoder; for a decoder, put "
            f"it in {param('text')}"
        )
    if steps is not None and not cfg.has_decoder:
        raise InputError(
            f"{param('faithfulness.steps', steps, flag_alone=True)} sets integrated gradients' "
            f"nodes, which explain a decoder's tokens: a classifier has none; drop it"
        )
    src, ids = (None, m.encode(text)) if encoder else decoder_input(m, text, decoder)
    position = _position(position, len(ids), "the model") % len(ids)
    run = F.reference_run(m.params, cfg)
    inp = ids if src is None else (src, ids)
    logits, trace = I.record(run, inp)
    numerics.check(logits[None], lambda _: ("the logits", ids, src), m.params, cfg)
    at = 0 if encoder else position
    token = int(logits[at].argmax()) if target is None else _choice(m, target, "target")
    other = None if versus is None else _choice(m, versus, "versus")
    metric = I.logit_diff(token, other, at)
    stack = "decoder" if cfg.arch == "decoder" else "encoder"
    shown = ids if src is None else src
    n = position + 1 if cfg.arch == "decoder" else len(shown)  # what the position can read
    base = None if baseline is None else baseline_id(m, baseline, "integrated_gradients")
    if base is not None and not 0 <= base < cfg.vocab_size:
        raise InputError(f"{param('baseline', base)}: a token id in [0, {cfg.vocab_size})")
    tokens = F.token_units(run, inp, stack, n, m.readable(shown), base)
    said, notes = {}, []
    if cfg.has_decoder:
        said |= _gradients(m, ids, src, stack, position, token, other, base, steps, n)
    said["attention"] = F.attention_scores(trace, cfg, stack, position, n)
    rollout = F.rollout_scores(trace, cfg, position, n)
    if rollout is not None:
        said["attention_rollout"] = rollout
    components = F.component_units(trace, cfg)
    parts = {}
    if cfg.norm == "pre":
        G = C.graph(trace, m.params, cfg, token, other, position)
        said["attribution_graph"] = F.graph_scores(G, tokens)
        if cfg.has_decoder:
            d = L.direct_logit_attribution(trace, m.params, cfg, token, other, position)
            parts["direct_logit_attribution"] = F.dla_scores(d, components)
        parts["attribution_graph"] = F.graph_scores(G, components)
    else:
        notes.append(
            "post-LN: the attribution graph and direct logit attribution need a pre-LN model, "
            "so only the tokens are shown"
        )
    if not cfg.has_decoder:
        notes.append(
            "integrated gradients and gradient × input explain a decoder's tokens: a "
            "classifier's are not offered"
        )
    predicts = ("attribution_graph", "direct_logit_attribution")
    by_tokens = F.report(F.Runner(run, inp, metric, tokens), said, seed)
    if "integrated_gradients" in said:
        total, change = float(said["integrated_gradients"].sum()), by_tokens.clean - by_tokens.empty
        by_tokens.notes.append(
            f"integrated gradients' scores add up to {total:.6g}, and removing every token "
            f"changes the metric by {change:.6g} (gap {abs(total - change):.1e}: the "
            "quadrature's error)"
        )
    by_parts = F.report(F.Runner(run, inp, metric, components), parts, seed, predicts)
    name = m.class_names.__getitem__ if encoder else lambda i: m.readable([i])[0]
    return results.Faithfulness(
        input=m.readable(ids),
        source=None if src is None else m.readable(src),
        token=name(token),
        versus=None if other is None else name(other),
        position=at,
        seed=seed,
        tokens=by_tokens.to_dict(),
        components=by_parts.to_dict() if parts else None,
        notes=notes,
    )


def _gradients(m, ids, src, stack, position, token, other, base, steps, n) -> dict:
    """Integrated gradients and gradient × input of logit[token] (- logit[other]) at `position`
    over the first n tokens of `stack`, in the PyTorch engine (float64): IG is linear in the
    logit, so a difference's is the difference of the two."""
    import torch

    from glassformer.inspect.attribution import input_attribution
    from glassformer.torch_model import from_params

    model = from_params(m.cfg, m.params, dtype=torch.float64).eval()
    targets = [position] * (1 if other is None else 2)
    tokens = [token] + ([] if other is None else [other])
    out = {}
    for method in ("integrated_gradients", "gradient_x_input"):
        options = dict(steps=64 if steps is None else steps, baseline=base)
        if method != "integrated_gradients":
            options = dict(steps=1)
        r = input_attribution(
            model, ids, targets, tokens, method=method, stack=stack, src_ids=src, **options
        )
        scores = r.scores[0] - (0.0 if other is None else r.scores[1])
        out[method] = scores[:n]
    return out
