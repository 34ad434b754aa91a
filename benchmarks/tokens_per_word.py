"""Tokens per word: byte-level BPE ("bpe") against SentencePiece-style BPE ("sp-bpe"), both
trained with the same vocabulary size (8000) on the shipped training pairs, source and target
together (one vocabulary, as `train translate` builds it), and measured on the 1,000 shipped
validation pairs. Words are whitespace-separated, so "mundo." is one word. Fewer tokens per word
means shorter sequences for the same text; then how three sentences are cut.

Byte-level tokens are shown as stored: "Ġ" is a space byte, "Â¿" the two UTF-8 bytes of "¿".

    .venv/bin/python benchmarks/tokens_per_word.py
"""

import argparse
import time

from glassformer.data import read_pairs
from glassformer.tokenizer import BPETokenizer, MetaspaceBPETokenizer, Tokenizer

EXAMPLES = ["Hello world.", "Hola mundo.", "¿Dónde está la estación?"]


def tokens_per_word(tok: Tokenizer, texts: list[str]) -> float:
    return sum(len(tok.encode(t)) for t in texts) / sum(len(t.split()) for t in texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vocab-size", type=int, default=8000)
    args = ap.parse_args()
    pairs = read_pairs("eng-spa")
    train = [t for p in pairs for t in p]
    valid = read_pairs("eng-spa-valid")
    sides = {
        "English": [s for s, _ in valid],
        "Spanish": [t for _, t in valid],
        "both": [t for p in valid for t in p],
    }
    toks, seconds = {}, {}
    for name, cls in (("bpe", BPETokenizer), ("sp-bpe", MetaspaceBPETokenizer)):
        t0 = time.perf_counter()
        toks[name] = cls.train(train, vocab_size=args.vocab_size)
        seconds[name] = time.perf_counter() - t0
    print(
        f"trained on {len(pairs):,} eng-spa pairs (both columns), vocab {args.vocab_size}; "
        f"measured on {len(valid):,} eng-spa-valid pairs"
    )
    words = {side: sum(len(t.split()) for t in texts) for side, texts in sides.items()}
    print(f"\n{'tokens per word':<16}" + "".join(f"{s:>10}" for s in sides) + f"{'train s':>10}")
    print(f"{'(words)':<16}" + "".join(f"{words[s]:>10,}" for s in sides))
    for name, tok in toks.items():
        row = "".join(f"{tokens_per_word(tok, texts):>10.3f}" for texts in sides.values())
        print(f"{name:<16}{row}{seconds[name]:>10.1f}")
    for text in EXAMPLES:
        print(f"\n{text}")
        for name, tok in toks.items():
            pieces = tok.tokenize(text)
            print(f"  {name:<8}{len(pieces):>2}  {' | '.join(pieces)}")


if __name__ == "__main__":
    main()
