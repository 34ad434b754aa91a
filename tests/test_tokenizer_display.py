"""Readable token pieces (`tokenizer.display`), checked against the `tokenizers` library's own
decoders: a readable piece with its visible whitespace turned back is what the library decodes."""

import re

import pytest

from glassformer.tokenizer import (
    BPETokenizer,
    CharTokenizer,
    HFTokenizer,
    MetaspaceBPETokenizer,
    WordTokenizer,
    display_kind,
    display_token,
)
from glassformer.tokenizer.display import VISIBLE, display_tokens

tk = pytest.importorskip("tokenizers")

TEXTS = [
    "El niño está en la casa.\nLa niña está aquí.\t¿Dónde está?",
    "The cat sat on the mat.\n\nEstá bien, señor — gracias!",
    "naïve café crème brûlée, está está está",
]


def raw(readable: str) -> str:
    """The inverse of the display: visible whitespace and control pictures back to the
    characters they show, runs of byte names <0xNN> back to the text of their bytes."""
    for ch, sym in VISIBLE.items():
        readable = readable.replace(sym, ch)
    readable = re.sub("[\u2400-\u241f]", lambda m: chr(ord(m.group()) - 0x2400), readable)
    return re.sub(
        r"(?:<0x[0-9A-F]{2}>)+",
        lambda m: bytes.fromhex(m.group().replace("<0x", "").replace(">", "")).decode(
            "utf-8", errors="replace"
        ),
        readable.replace("␡", "\x7f"),
    )


def test_the_example_of_the_issue():
    assert display_token("Ġest", "bpe") + display_token("Ã¡", "bpe") == "␣está"
    assert tk.decoders.ByteLevel().decode(["Ġest", "Ã¡"]) == " está"
    assert display_token("▁Hola", "sp-bpe") == "␣Hola"
    assert display_token("##ing", "wordpiece") == "##ing"


def test_every_byte_symbol_decodes_as_the_library_decodes_it():
    """GPT-2's 256 byte symbols, one at a time: the ASCII ones are their character, the others
    are a part of a UTF-8 character and stay a byte, where the library writes U+FFFD."""
    decoder = tk.decoders.ByteLevel()
    for symbol in tk.pre_tokenizers.ByteLevel.alphabet():
        lib, ours = decoder.decode([symbol]), display_token(symbol, "bpe")
        if lib == "\ufffd":
            assert ours.startswith("<0x") and ours.endswith(">") and len(ours) == 6, symbol
        else:
            assert raw(ours) == lib, symbol


@pytest.mark.parametrize("kind", ["bpe", "gpt2"])
def test_byte_level_pieces_read_as_the_library_decodes_them(kind):
    if kind == "bpe":
        tok = BPETokenizer.train(TEXTS, vocab_size=400)
    else:  # a GPT-2 style Hugging Face tokenizer, as import-hf loads one
        hf = tk.ByteLevelBPETokenizer()
        hf.train_from_iterator(TEXTS, vocab_size=400, show_progress=False)
        tok = HFTokenizer(hf._tokenizer.to_str(), {})
    shown = display_kind(tok)
    assert shown == ("bpe" if kind == "bpe" else "byte-level")
    merged = []
    for i, piece in enumerate(tok.vocab):
        lib = tok._hf.decode([i], skip_special_tokens=False)
        ours = display_token(piece, shown)
        if "\ufffd" in lib:
            assert "<0x" in ours, piece  # a cut UTF-8 character stays bytes
        else:
            assert raw(ours) == lib, piece
            merged += [ours] if len(piece) > 1 else []
    assert len(merged) > 10 and "␣está" in merged and "ñ" in merged
    for text in TEXTS:
        ids = tok.encode(text)
        readable = display_tokens(tok.tokens(ids), shown)
        assert raw("".join(readable)) == text == tok.decode(ids)
        assert " " not in "".join(readable) and "\n" not in "".join(readable)
    # A piece that holds only part of a character shows that part as bytes.
    if "Â¿" not in tok.vocab:
        assert display_tokens(tok.tokens(tok.encode("¿")), shown) == ["<0xC2>", "<0xBF>"]


def test_metaspace_pieces_read_as_the_library_decodes_them():
    tok = MetaspaceBPETokenizer.train(TEXTS, vocab_size=600)
    kind = display_kind(tok)
    assert kind == "sp-bpe"
    for text in [*TEXTS, "a 😀 b\x07"]:  # the emoji and the bell fall back to bytes
        ids = tok.encode(text)
        readable = display_tokens(tok.tokens(ids), kind)
        # The library prepends one "▁" for a leading space, and strips it when decoding.
        assert raw("".join(readable)) == " " + tok.decode(ids)
    emoji = display_tokens(tok.tokens(tok.encode("😀")), kind)
    assert emoji[-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert display_token("<0x0A>", kind) == "⏎" and display_token("<0x07>", kind) == "␇"


def test_wordpiece_keeps_its_prefix_and_specials(tmp_path):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "play", "##ing", "##ed", "the", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    tok = HFTokenizer.from_files(tmp_path)
    assert display_kind(tok) == "wordpiece"
    ids, _ = tok.encode_for_model("the playing.")
    assert display_tokens(tok.tokens(ids), "wordpiece") == [
        "[CLS]", "the", "play", "##ing", ".", "[SEP]",
    ]  # fmt: skip


def test_characters_and_words_show_their_whitespace():
    tok = CharTokenizer.train(["a b\nc\td\r"])
    assert display_kind(tok) == "char"
    assert display_tokens(tok.vocab, "char") == [
        "<pad>", "<unk>", "<s>", "</s>", "⇥", "⏎", "␍", "␣", "a", "b", "c", "d",
    ]  # fmt: skip
    assert display_kind(WordTokenizer(["a", "b"])) == "word"
    assert display_token("\x00") == "␀" and display_token("\x7f") == "␡"
    assert display_token("\u00a0") == "<U+00A0>" and display_token("é") == "é"
    assert display_token("<|endoftext|>", "bpe") == "<|endoftext|>"  # a special, as written
    assert display_token("▁x", "char") == "▁x"  # "▁" means a space only to SentencePiece
