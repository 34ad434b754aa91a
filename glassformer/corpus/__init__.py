"""From one input to a whole corpus: activations stored over a text, and what is learnt from them
(sparse autoencoders and transcoders: `sae.py`, SAELens's folders: `saelens.py`, an SAE judged on
a model and its features' cards: `evaluate.py`)."""
