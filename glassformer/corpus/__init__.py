"""From one input to a whole corpus: activations stored over a text, and what is learnt from them
(sparse autoencoders and transcoders: `sae.py`, SAELens's folders: `saelens.py`, an SAE judged on
a model and its features' cards: `evaluate.py`).

The store of activations: its on-disk format, written and read (`store.py`: `open_store(path)
-> Store`, every field in its docstring), a model run over a corpus into one, resumable and split
over torchrun's ranks (`record.py`: `Model.record_corpus`, `glassformer record-corpus`; the steps
it reads by forward hooks on the engine's fast path: `hooks.py`), and the
contexts that activate a unit most (`top.py`: `top_examples`, `glassformer top`). A store is not a
model: reading one is these modules' functions, not a Model's method. One layer, above the
engines, `inspect/` and `activations.py`, below the Model and the outer ring."""
