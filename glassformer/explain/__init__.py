"""Explaining a trace: the renderers (terminal text, JSON, self-contained HTML, PNG heatmaps).

Importing this package installs `Trace._repr_html_`, so that Jupyter shows a trace as the same
self-contained report as `--html`; `glassformer/__init__.py` imports it, so that
`from glassformer.trace import tracing` alone is enough. The trace itself never imports this
package: recording knows nothing of presentation.
"""

from glassformer.trace import Trace


def _repr_html_(trace: Trace) -> str:  # Jupyter: the same self-contained report as `--html`
    from glassformer.explain.html import render_html

    return render_html(trace)


Trace._repr_html_ = _repr_html_
