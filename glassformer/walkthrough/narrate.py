"""The walkthroughs' one helper: record a step with its equation, axis labels and narration."""

from __future__ import annotations

from glassformer.trace import tap


def narrator():
    """`t(name, values, equation, rows, cols, note)`: `tap` with the arguments in story order."""

    def t(name, values, equation="", rows=None, cols=None, note=""):
        return tap(name, values, equation=equation, note=note, rows=rows, cols=cols)

    return t
