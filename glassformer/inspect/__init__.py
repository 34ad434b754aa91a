"""The inspect wing: looking inside a run beyond its trace, and touching it.

    interventions.py  ablation and activation patching over trace names, and their sweeps
    lens.py           the logit lens and direct logit attribution
    qk.py             why a head attends there: a score split by the parts of the residual streams
    circuit.py        why it predicted that: the exact attribution graph of one logit
    attribution.py    gradient x input and integrated gradients to the input tokens
    touch.py          the traced run and its result, ablation and patching (the Model's verbs)
    probes.py         the lens and attribution of one input (`Model.lens`, `Model.attribute`)

One layer, on the engines and the trace and below the Model, which calls touch and probes.
Nothing is re-exported here: import the module you need (`from glassformer.inspect import lens`).
"""
