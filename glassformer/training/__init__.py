"""The training wing: what trains a model and what a training run leaves behind.

    train.py       `TrainConfig`, the loop, DDP, `train(...)`
    checkpoint.py  the checkpoint a run continues from (model, tokenizer, optimizer, schedule,
                   RNG and data position, log), written atomically and restored checked
    tasks.py       a task's data (lm, translate, classify), its batch loss and its evaluation
    views.py       the time-lapse (`train --snapshot-views`): a probe's attention maps every N steps

One layer, above the Model (views.py runs its probe through a `Model`) and below the command
line and the explorer, which read it. Nothing is re-exported here: import the module you need
(`from glassformer.training import train`).
"""
