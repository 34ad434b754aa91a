"""Word, character and BPE tokenizers: text <-> token ids, special tokens, JSON save/load.

A tokenizer is a vocabulary (id -> token, specials included as ordinary entries), a map from
special roles (pad, unk, bos, eos) to tokens, and a rule that cuts text into pieces: words and
single punctuation marks (`WordTokenizer`), characters (`CharTokenizer`), byte-level BPE
subwords (`BPETokenizer`) or SentencePiece-style BPE subwords that keep words whole behind a "▁"
(`MetaspaceBPETokenizer`), both trained and run by Hugging Face `tokenizers` (imported only when
used). `article_tokenizer()` is the 10-word vocabulary of the Random Transformer article, ids in
the article's order.

Deliberately not here: our own BPE implementation (minbpe shows one; we use the library),
Unicode normalisation beyond optional lowercasing and the SentencePiece-style tokenizer's NFC,
padding, truncation and batching (those belong to `data.py`). Tokenizers are treated
as immutable: build a new one rather than editing `vocab` in place.

This package is the public face: `base.py` holds the interface and the word and character
tokenizers, `bpe.py` the ones built on `tokenizers`, `display.py` the readable form of a piece
(`display_token`: ␣ for a space, byte-level pieces decoded); reading and writing the JSON are
here.
"""

from __future__ import annotations

from pathlib import Path

from glassformer.errors import OutputExists, TokenizerError, yes_or_no
from glassformer.files import FileError, parse_json, read_limited, write_file
from glassformer.tokenizer.base import (
    DEFAULT_SPECIALS,
    FILE_LIMIT,
    FORMAT,
    SPECIAL_ROLES,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
)
from glassformer.tokenizer.bpe import BPETokenizer, HFTokenizer, MetaspaceBPETokenizer
from glassformer.tokenizer.display import display_kind, display_token

__all__ = [
    "DEFAULT_SPECIALS",
    "FORMAT",
    "SPECIAL_ROLES",
    "BPETokenizer",
    "CharTokenizer",
    "HFTokenizer",
    "MetaspaceBPETokenizer",
    "Tokenizer",
    "WordTokenizer",
    "article_tokenizer",
    "display_kind",
    "display_token",
    "from_json",
    "load",
    "save",
]

_KINDS: dict[str, type[Tokenizer]] = {
    "word": WordTokenizer,
    "char": CharTokenizer,
    "bpe": BPETokenizer,
    "sp-bpe": MetaspaceBPETokenizer,
    "hf": HFTokenizer,
}


def from_json(text: str) -> Tokenizer:
    """The tokenizer that `Tokenizer.to_json` wrote."""
    try:
        data = parse_json(text, "tokenizer file")
    except FileError as e:
        raise TokenizerError(str(e)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise TokenizerError(f"tokenizer JSON has format {got!r}, expected {FORMAT!r}; re-save it")
    if missing := [k for k in ("kind", "vocab", "specials", "lowercase") if k not in data]:
        raise TokenizerError(f"tokenizer JSON lacks the key {missing[0]!r}; re-save it")
    kind = data["kind"]
    if not isinstance(kind, str) or kind not in _KINDS:
        raise TokenizerError(f"unknown tokenizer kind {kind!r}; use one of {', '.join(_KINDS)}")
    return _KINDS[kind]._from_data(data)


def load(path: str | Path) -> Tokenizer:
    """Read a tokenizer file (UTF-8 JSON written by `save`); a path that is not a regular file
    (a FIFO, a device) is refused before it is opened."""
    try:
        text = read_limited(path, FILE_LIMIT, "a tokenizer file").decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TokenizerError(f"cannot read tokenizer {str(path)!r} ({e}); check the path") from None
    except FileError as e:
        raise TokenizerError(str(e)) from None
    try:
        return from_json(text)
    except TokenizerError as e:
        raise TokenizerError(f"{path}: {e}") from None


def save(tok: Tokenizer, path: str | Path, overwrite: bool = False) -> None:
    """Write the tokenizer as UTF-8 JSON, atomically; an existing file only with overwrite=True."""
    if Path(path).exists() and not yes_or_no(overwrite):
        raise OutputExists(f"{path} already exists; pass overwrite=True to replace it")
    write_file(path, (tok.to_json() + "\n").encode("utf-8"))


def article_tokenizer() -> WordTokenizer:
    """The Random Transformer article's vocabulary, ids as in the article ("hello" = 0, ...).

    It has no PAD or UNK: encoding a word outside these ten raises `TokenizerError`.
    """
    vocab = ["hello", "mundo", "world", "how", "?", "EOS", "SOS", "a", "hola", "c"]
    return WordTokenizer(vocab, {"bos": "SOS", "eos": "EOS"}, lowercase=True)
