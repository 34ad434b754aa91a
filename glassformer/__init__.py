"""glassformer: the transformer you can see through.

A NumPy float64 reference engine (`glassformer.reference`) that *is* the math of two articles
(Raschka's trainable self-attention; Sanseviero's "Random Transformer"), with every intermediate
recorded by `glassformer.trace`, over one `Config` and one weight-naming scheme (`weights.spec`).
"""

from glassformer.interrupts import hold_during_imports

with hold_during_imports():  # Ctrl-C or SIGTERM here: one line, once the import under way ends
    from glassformer import explain  # noqa: F401 (installs Trace._repr_html_: Jupyter shows it)
    from glassformer.config import PRESETS, Config, preset
    from glassformer.errors import CheckpointError, ConfigError, GlassformerError, TokenizerError

__all__ = [
    "load",
    "models",
    "Model",
    "Decoding",
    "Config",
    "PRESETS",
    "preset",
    "GlassformerError",
    "ConfigError",
    "CheckpointError",
    "TokenizerError",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """`glassformer.load` (`Model.load`), `glassformer.models` (every model name it takes:
    `catalog.models`), `Model` (`glassformer.model`), `Decoding`
    (`glassformer.decoding`) and `glassformer.exercises`, imported on first use."""
    if name == "load":
        from glassformer.model import Model

        return Model.load
    if name == "models":
        from glassformer.catalog import models

        return models
    homes = {"Model": "model", "Decoding": "decoding"}
    if name in homes:
        import importlib

        return getattr(importlib.import_module(f"glassformer.{homes[name]}"), name)
    if name == "exercises":
        import importlib

        return importlib.import_module("glassformer.exercises")
    raise AttributeError(f"module 'glassformer' has no attribute {name!r}")
