"""Token pieces as a person should read them: `display_token(piece, kind)`.

A vocabulary piece is written in its tokenizer's own alphabet: GPT-2's byte-level BPE spells a
space "Ġ" and "á" as "Ã¡" (each UTF-8 byte as one printable character), SentencePiece-style BPE
spells a space "▁" and a byte outside its vocabulary "<0xC3>", a character model has a bare " "
or "\\n" that no one can see. `display_token` turns a piece into the text it stands for, with
whitespace made visible (space ␣, newline ⏎, tab ⇥, carriage return ␍, other control characters
as their Control Pictures or <U+XXXX>); WordPiece's "##" and special tokens are kept as written.
A byte that is only part of a UTF-8 character stays a byte, written <0xNN>.

`display_kind(tok)` names the alphabet of a tokenizer's pieces. Display only: the raw pieces stay
what the tokenizer and the JSON exports use. Standard library only.
"""

from __future__ import annotations

import functools
import json
import re

VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# The kinds whose pieces are spelt in GPT-2's byte alphabet, or behind SentencePiece's "▁".
_BYTE_LEVEL = ("bpe", "byte-level")
_METASPACE = ("sp-bpe", "metaspace")


def display_token(piece: str, kind: str | None = None) -> str:
    """The readable form of one vocabulary piece of a tokenizer of this kind.

    kind: a tokenizer kind (`Tokenizer.kind`: "word", "char", "bpe", "sp-bpe") or what
    `display_kind` says of a Hugging Face tokenizer ("byte-level", "metaspace", "wordpiece");
    None or anything else: the piece as it is, whitespace made visible.
    """
    if kind in _BYTE_LEVEL:
        text = _from_byte_alphabet(piece)
    elif kind in _METASPACE:
        text = _from_metaspace(piece)
    else:
        text = piece
    return visible(text)


def display_tokens(pieces, kind: str | None = None) -> list[str]:
    return [display_token(p, kind) for p in pieces]


def visible(text: str) -> str:
    """Whitespace and control characters as visible symbols; "<0xNN>" byte names kept."""
    out = []
    for ch in text:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x20:
            out.append(chr(0x2400 + ord(ch)))  # Control Pictures: ␀ ... ␟
        elif ord(ch) == 0x7F:
            out.append("␡")
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that is not (all of) a UTF-8 character
            out.append(f"<0x{ord(ch) - 0xDC00:02X}>")
        else:
            out.append(f"<U+{ord(ch):04X}>")
    return "".join(out)


def display_kind(tok) -> str:
    """The alphabet a tokenizer's pieces are written in, for `display_token`: its own `kind`,
    or for a Hugging Face tokenizer ("hf") what its decoder undoes: "byte-level" (GPT-2),
    "metaspace" (SentencePiece "▁"), "wordpiece" (BERT "##") or "hf" (none of these)."""
    kind = getattr(tok, "kind", None) or "hf"
    if kind != "hf":
        return kind
    try:
        data = json.loads(tok.hf_json)
    except (AttributeError, TypeError, ValueError):
        return "hf"
    types = _types(data.get("decoder")) or _types(data.get("pre_tokenizer"))
    if "ByteLevel" in types:
        return "byte-level"
    if "Metaspace" in types or "Replace:▁" in types:
        return "metaspace"
    if "WordPiece" in types:
        return "wordpiece"
    return "hf"


def _types(part) -> set[str]:
    """The component types of a decoder or pre-tokenizer, Sequence members included."""
    if not isinstance(part, dict):
        return set()
    found = {str(part.get("type"))}
    if part.get("type") == "Replace" and "▁" in json.dumps(part, ensure_ascii=False):
        found.add("Replace:▁")
    for key in ("decoders", "pretokenizers"):
        for member in part.get(key) or []:
            found |= _types(member)
    return found


@functools.cache
def _byte_alphabet() -> dict[str, int]:
    """GPT-2's bytes_to_unicode, inverted: the printable character of each byte -> the byte.
    Printable Latin-1 bytes stand for themselves; the other 68 are shifted to U+0100 upward."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    chars, n = {}, 0
    for b in range(256):
        if b in kept:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def _from_byte_alphabet(piece: str) -> str:
    alphabet = _byte_alphabet()
    if not all(ch in alphabet for ch in piece):
        return piece  # a special token such as "<|endoftext|>" or an added one, as written
    raw = bytes(alphabet[ch] for ch in piece)
    return raw.decode("utf-8", errors="surrogateescape")  # a cut character: <0xNN> in `visible`


def _from_metaspace(piece: str) -> str:
    m = _BYTE_TOKEN.fullmatch(piece)
    if m:  # byte fallback: an ASCII byte is its character, a part of a UTF-8 character stays
        b = int(m.group(1), 16)
        return chr(b) if b < 0x80 else piece
    return piece.replace("▁", " ")
