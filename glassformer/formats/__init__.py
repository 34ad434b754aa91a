"""The formats wing: the only place that knows other programs' names for a model's weights,
configs and folders, one file per family or folder kind.

    hf.py          GPT-2, BERT and Marian: the tables of foreign tensor names, the transforms
                   beside them (Conv1D transpose, fused-qkv split), the config translations
    hf_llama.py    Llama and Qwen2
    hf_pegasus.py  Pegasus (the pre-LN encoder-decoder transformers and CTranslate2 load)
    nanogpt.py     nanoGPT's ckpt.pt and meta.pkl
    hf_dir.py      Hugging Face folders read (safetensors, shards, tokenizer) and written
    loading.py     the one loader: a glassformer checkpoint, a Hugging Face folder or a nanoGPT
                   out_dir
    hf_hooks.py    transformers itself, hooked at glassformer's step names (`glassformer diff`)

One layer: these import the ground floor (config, errors, files, weights, tokenizer, reference)
and each other, never the Model, training or inspect. Nothing is re-exported here: import the
module you need (`from glassformer.formats import hf_dir`).
"""
