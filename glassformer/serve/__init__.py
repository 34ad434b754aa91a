"""The live explorer: `glassformer serve`, a local web app over the engines and the trace.

Type text and see, as you type, how it was split into tokens, every step of the forward pass
with its equation, shape and values, the attention maps (with a neuron view of any score), the
next-token distribution under temperature / top-k / top-p, greedy, sampled and beam-search
generation step by step, heads ablated or patched from a second prompt, two inputs or models
side by side, and a badge with the largest difference between the PyTorch and NumPy engines
(and Hugging Face's model, for a folder from there) on that input; and, for a training
checkpoint recorded with `train --snapshot-views`, a Training tab that scrubs its attention maps
and curves through training (GET /api/views, drawn by explain/assets/timelapse.js).

    sessions.py    the registry of models (by id) and the bounded cache of runs
    runs.py        a traced forward pass of one input; interventions on it
    generation.py  greedy, sampling (the draw shown) and beam search, step by step
    fidelity.py    the engines' largest difference on this input
    fields.py      a request's fields checked: which each action takes, their types and ranges
    api.py         the actions: the run found or made, answers shaped as strict JSON
    app.py         the ASGI app (Starlette) and the server (uvicorn)

The page is the static report's front end (`explain/assets/`: report.css and heatmap.js,
served as files) with explorer.html, explorer.css and explorer.js beside them; it fetches its
data from the server instead of reading it inlined. It needs the `serve` extra (starlette,
uvicorn). Nothing here prints: the command line (`cli/serve.py`) prints the URL.
"""

from glassformer.serve.api import Explorer
from glassformer.serve.app import create_app, is_loopback, make_server, serving
from glassformer.serve.sessions import Registry

__all__ = ["Explorer", "Registry", "create_app", "is_loopback", "make_server", "serving"]
