"""The inspect wing: looking inside a run beyond its trace, and touching it.

    interventions.py  ablation and activation patching over trace names, and their sweeps
    lens.py           the logit lens and direct logit attribution
    attribution.py    gradient x input and integrated gradients to the input tokens
    touch.py          the traced run and its result, and the above on it (the Model's verbs)

One layer, on the engines and the trace and below the Model, which calls touch. Nothing is
re-exported here: import the module you need (`from glassformer.inspect import lens`).
"""
