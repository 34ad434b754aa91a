"""The tokenizers that Hugging Face `tokenizers` trains and runs (imported only when used):
byte-level BPE (`BPETokenizer`), SentencePiece-style BPE that keeps words whole behind a "▁"
(`MetaspaceBPETokenizer`), and any Hugging Face tokenizer.json or vocab files (`HFTokenizer`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from glassformer.errors import TokenizerError, install_hint
from glassformer.tokenizer.base import DEFAULT_SPECIALS, FILE_LIMIT, Tokenizer, special_head

# SentencePiece-style pieces: a word (letters with combining marks, apostrophes between letters
# included: don't, l'eau), digits or other characters, each run optionally led by the "▁" that
# stands for a space; a "▁" before another "▁" stands alone.
_SP_PIECE = r"▁?[\p{L}\p{M}]+(?:['’][\p{L}\p{M}]+)*|▁?\p{N}+|▁?[^\p{L}\p{M}\p{N}▁]+|▁"
_BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
_BYTE_TOKEN_SET = frozenset(_BYTE_TOKENS)


class BPETokenizer(Tokenizer):
    """Byte-level BPE (GPT-2 style), trained and run by Hugging Face `tokenizers`.

    Text is cut by GPT-2's pre-tokenizer regex, each piece is taken as UTF-8 bytes written as
    printable characters ("Ġ" is a space byte) and merged by the learned rules. All 256 bytes are
    in the vocabulary, so every string encodes, nothing is unknown and decode(encode(s)) == s.
    Special tokens written in text ("</s>") are matched whole, as `WordTokenizer` does.

    `hf_json` is the Hugging Face tokenizer serialised (`tokenizers.Tokenizer.to_str()`); the
    vocabulary and `lowercase` are read from it.
    """

    kind = "bpe"
    _noun = "token"

    _model_types: tuple[str, ...] | None = ("BPE",)

    def __init__(self, hf_json: str, specials: dict[str, str] | None = None) -> None:
        self._hf = _hf_from_json(hf_json, self._model_types)
        ids = self._hf.get_vocab(with_added_tokens=True)
        vocab = sorted(ids, key=ids.__getitem__)
        if [ids[t] for t in vocab] != list(range(len(vocab))):
            raise TokenizerError("tokenizer ids are not 0..n-1 without gaps; it cannot be used")
        normalizer = json.loads(hf_json).get("normalizer") or {}
        lowercase = normalizer.get("type") == "Lowercase" or bool(normalizer.get("lowercase"))
        super().__init__(vocab, specials, lowercase)
        self.hf_json = hf_json

    def tokenize(self, text: str) -> list[str]:
        return self._hf.encode(text, add_special_tokens=False).tokens

    def encode_with_unknown(
        self, text: str, add_bos: bool = False, add_eos: bool = False
    ) -> tuple[list[int], list[str]]:
        """Ids of `text` and an empty list: byte-level BPE has no unknown pieces."""
        ids = self._hf.encode(text, add_special_tokens=False).ids
        return self._wrap(ids, add_bos, add_eos), []

    def _join(self, tokens: list[str]) -> str:
        # Bytes back to text; specials map to their own characters. A cut inside a multi-byte
        # character decodes to U+FFFD, as bytes.decode(errors="replace") would.
        return self._hf.decoder.decode(tokens)

    def to_json(self) -> str:
        """The common document plus "hf": the Hugging Face tokenizer JSON, as a string."""
        return json.dumps(json.loads(super().to_json()) | {"hf": self.hf_json}, ensure_ascii=False)

    @classmethod
    def _from_data(cls, data: dict) -> BPETokenizer:
        if not isinstance(data.get("hf"), str):
            raise TokenizerError("BPE tokenizer JSON lacks the key 'hf' (a string); re-save it")
        tok = cls(data["hf"], data["specials"])
        if (tok.vocab, tok.lowercase) != (data["vocab"], data["lowercase"]):
            raise TokenizerError(
                "BPE tokenizer JSON: 'vocab' or 'lowercase' disagrees with the embedded 'hf' "
                "tokenizer; re-save it"
            )
        return tok

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        specials: dict[str, str] | None = DEFAULT_SPECIALS,
        lowercase: bool = False,
    ) -> BPETokenizer:
        """Specials first (pad, unk, bos, eos), then the 256 byte symbols, then merges until the
        vocabulary has `vocab_size` entries (fewer if the texts run out of pairs to merge).
        Deterministic: the same texts give the same tokenizer."""
        tk = _hf_module()
        head = special_head(specials)
        alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
        if not isinstance(vocab_size, int) or vocab_size < len(head) + len(alphabet):
            raise TokenizerError(
                f"vocab_size={vocab_size!r} is too small: byte-level BPE needs {len(alphabet)} "
                f"byte symbols plus {len(head)} specials; use vocab_size >= "
                f"{len(head) + len(alphabet)}"
            )
        hf = tk.Tokenizer(tk.models.BPE())
        if lowercase:
            hf.normalizer = tk.normalizers.Lowercase()
        hf.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=head,
            initial_alphabet=alphabet,
            show_progress=False,  # only the CLI prints
        )
        hf.train_from_iterator(texts, trainer)
        return cls(hf.to_str(), specials)


class MetaspaceBPETokenizer(BPETokenizer):
    """SentencePiece-style BPE, trained and run by Hugging Face `tokenizers`: a space becomes "▁"
    and starts the word after it, so "Hello world." is "▁Hello ▁world ." once both words are
    frequent enough to be merged, and a word gets the same token at the start of a text and
    inside it. A piece never mixes letters, digits and other characters, like SentencePiece's
    split_by_unicode_script and split_by_number, except that an apostrophe between letters
    belongs to the word ("▁don't" may be one token: 1.31 English tokens per word on
    eng-spa-valid instead of 1.40). Characters outside the vocabulary fall back to their UTF-8
    bytes, written <0x00>..<0xFF>, so nothing is unknown.

    Text is NFC-normalised, then "▁" is put in front of it and every space becomes "▁"; decoding
    undoes that. decode(encode(s)) == s for every NFC string s that contains no "▁" (U+2581) and
    no special token. A non-NFC string comes back NFC, a "▁" comes back as a space, and a special
    token written in text ("</s>") is matched whole, as in `BPETokenizer`.
    """

    kind = "sp-bpe"

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8000,
        specials: dict[str, str] | None = DEFAULT_SPECIALS,
    ) -> MetaspaceBPETokenizer:
        """Specials first (pad, unk, bos, eos), then the 256 byte tokens, then every character
        seen and merges of pairs seen at least twice until the vocabulary has `vocab_size`
        entries (fewer if the texts run out of pairs). Deterministic: the same texts give the
        same tokenizer. Train on source and target texts together for one shared vocabulary."""
        tk = _hf_module()
        head = special_head(specials)
        if not isinstance(vocab_size, int) or vocab_size < len(head) + len(_BYTE_TOKENS):
            raise TokenizerError(
                f"vocab_size={vocab_size!r} is too small: SentencePiece-style BPE needs 256 byte "
                f"tokens plus {len(head)} specials and the characters of the texts; use "
                f"vocab_size >= {len(head) + len(_BYTE_TOKENS)} (8000 is the default)"
            )
        # byte_fallback turns a character outside the vocabulary into byte tokens, not UNK.
        hf = tk.Tokenizer(tk.models.BPE(unk_token=(specials or {}).get("unk"), byte_fallback=True))
        # "▁" is prepended by a normaliser, not by Metaspace's prepend_scheme="always": that one
        # skips texts that already start with a space, so " a" and "a" would encode alike.
        hf.normalizer = tk.normalizers.Sequence([tk.normalizers.NFC(), tk.normalizers.Prepend("▁")])
        hf.pre_tokenizer = tk.pre_tokenizers.Sequence(
            [
                tk.pre_tokenizers.Metaspace("▁", prepend_scheme="never"),
                tk.pre_tokenizers.Split(tk.Regex(_SP_PIECE), "isolated", invert=True),
            ]
        )
        # Metaspace's own decoder drops every "▁" of the first token (all of them once fused);
        # stripping exactly the one prepended space is the exact inverse.
        hf.decoder = tk.decoders.Sequence(
            [
                tk.decoders.Replace("▁", " "),
                tk.decoders.ByteFallback(),
                tk.decoders.Fuse(),
                tk.decoders.Strip(" ", 1, 0),
            ]
        )
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size - len(_BYTE_TOKENS),  # the byte tokens are added below
            min_frequency=2,
            special_tokens=head,
            show_progress=False,  # only the CLI prints
        )
        hf.train_from_iterator(texts, trainer)
        data = json.loads(hf.to_str())
        ids = data["model"]["vocab"]
        trained = sorted(ids, key=ids.__getitem__)[len(head) :]
        vocab = head + _BYTE_TOKENS + [t for t in trained if t not in _BYTE_TOKEN_SET]
        if len(vocab) > vocab_size:
            raise TokenizerError(
                f"vocab_size={vocab_size} is too small: these texts have {len(trained)} distinct "
                f"characters, which with the specials and the 256 byte tokens make "
                f"{len(vocab)}; use vocab_size >= {len(vocab)}"
            )
        # Specials keep ids 0..len(head)-1, so the added-token entries stay right as they are.
        data["model"]["vocab"] = {t: i for i, t in enumerate(vocab)}
        return cls(json.dumps(data, ensure_ascii=False), specials)


class HFTokenizer(BPETokenizer):
    """Any Hugging Face `tokenizer.json` (WordPiece for BERT, byte-level BPE for GPT-2, ...), run
    by the `tokenizers` library exactly as `transformers` runs it: its normaliser (BERT's
    lowercasing and accent stripping), pre-tokeniser, model and decoder.

    `encode(text)` gives the pieces without the model's template; `add_bos` / `add_eos` put the
    `bos` / `eos` specials around them, which for BERT (bos = [CLS], eos = [SEP]) is the library's
    own `encode(text).ids`. Unknown pieces are the input substrings that became [UNK].
    """

    kind = "hf"
    _model_types = None  # any

    def encode_with_unknown(
        self, text: str, add_bos: bool = False, add_eos: bool = False
    ) -> tuple[list[int], list[str]]:
        ids, unknown = self._encode(text, template=False)
        return self._wrap(ids, add_bos, add_eos), unknown

    def encode_for_model(self, text: str) -> tuple[list[int], list[str]]:
        """The library's own `encode(text).ids`, template included (BERT: [CLS] ... [SEP])."""
        return self._encode(text, template=True)

    def _encode(self, text: str, template: bool) -> tuple[list[int], list[str]]:
        enc = self._hf.encode(text, add_special_tokens=template)
        unk, spans = self.unk_id, zip(enc.ids, enc.offsets, strict=True)
        return enc.ids, [text[a:b] for i, (a, b) in spans if i == unk and b > a]

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        self.tokens(ids)  # range and type checks with our messages
        return self._hf.decode(list(ids), skip_special_tokens=skip_special)

    @classmethod
    def from_files(cls, folder: str | Path) -> HFTokenizer:
        """A Hugging Face model folder's tokenizer: tokenizer.json, else a WordPiece vocab.txt
        (lowercased when tokenizer_config.json says do_lower_case), else vocab.json + merges.txt
        (GPT-2 byte-level BPE). Specials come from special_tokens_map.json or the usual names."""
        folder = Path(folder)
        tk = _hf_module()
        config = _read_json(folder / "tokenizer_config.json")
        if _has(folder, "tokenizer.json"):
            hf_json = _utf8(folder, "tokenizer.json")
        elif _has(folder, "vocab.txt"):
            _utf8(folder, "vocab.txt")
            lower = bool(config.get("do_lower_case", True))
            vocab_txt = str(folder / "vocab.txt")
            wp = _library(folder, lambda: tk.BertWordPieceTokenizer(vocab_txt, lowercase=lower))
            hf_json = wp._tokenizer.to_str()
        elif _has(folder, "vocab.json") and _has(folder, "merges.txt"):
            _utf8(folder, "vocab.json")
            _utf8(folder, "merges.txt")
            names = str(folder / "vocab.json"), str(folder / "merges.txt")
            bpe = _library(folder, lambda: tk.ByteLevelBPETokenizer(*names))
            hf_json = bpe._tokenizer.to_str()
        else:
            raise TokenizerError(
                f"{folder} has no tokenizer.json, vocab.txt or vocab.json + merges.txt; "
                "save the tokenizer there (tokenizer.save_pretrained) or import without one"
            )
        try:
            hf = _hf_from_json(hf_json, None)
        except TokenizerError as e:  # only a tokenizer.json: the vocab files' JSON is the library's
            raise TokenizerError(f"{folder / 'tokenizer.json'}: {e}") from None
        vocab = hf.get_vocab(with_added_tokens=True)
        named = _read_json(folder / "special_tokens_map.json") | config
        specials = {}
        for role, keys in _HF_SPECIAL_KEYS.items():
            for key in keys:
                token = named.get(key)
                token = token.get("content") if isinstance(token, dict) else token
                if isinstance(token, str) and token in vocab:
                    specials[role] = token
                    break
            else:
                found = [t for t in _HF_SPECIAL_NAMES[role] if t in vocab]
                if found:
                    specials[role] = found[0]
        return cls(hf_json, specials)


# Where Hugging Face folders name their specials, and the usual tokens when they do not.
_HF_SPECIAL_KEYS = {
    "pad": ("pad_token",),
    "unk": ("unk_token",),
    "bos": ("cls_token", "bos_token"),
    "eos": ("sep_token", "eos_token"),
}
_HF_SPECIAL_NAMES = {
    "pad": ("[PAD]", "<pad>"),
    "unk": ("[UNK]", "<unk>"),
    "bos": ("[CLS]", "<s>", "<|endoftext|>"),
    "eos": ("[SEP]", "</s>", "<|endoftext|>"),
}


def _has(folder: Path, name: str) -> bool:
    """Whether `folder` has the file `name` (a link out of the folder is refused, not absent)."""
    from glassformer.files import FileError, member

    try:
        return member(folder, name, required=False) is not None
    except FileError as e:
        raise TokenizerError(str(e)) from None


def _utf8(folder: Path, name: str) -> str:
    """The text of a tokenizer file inside `folder` (`files.member`), or one clear
    TokenizerError; the library reads vocab.txt, vocab.json and merges.txt after this check."""
    from glassformer.files import FileError, member, read_limited

    try:
        return read_limited(member(folder, name), FILE_LIMIT, "a tokenizer file").decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerError(f"{folder / name} is not UTF-8 text; restore it") from None
    except FileError as e:  # its message names the file and what to do
        raise TokenizerError(str(e)) from None
    except OSError as e:
        raise TokenizerError(f"cannot read {folder / name} ({e.strerror or e})") from None


def _library(folder: Path, make):
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - tokenizers raises plain Exception on bad files
        raise TokenizerError(f"the tokenizer files in {folder} are unreadable ({e})") from None


def _read_json(path: Path) -> dict:
    if not _has(path.parent, path.name):
        return {}
    from glassformer.files import FileError, parse_json

    try:
        data = parse_json(_utf8(path.parent, path.name), str(path))
    except FileError as e:
        raise TokenizerError(f"{e}; fix or remove it") from None
    return data if isinstance(data, dict) else {}


def _hf_module():
    try:
        import tokenizers
    except ImportError:
        raise TokenizerError(
            "BPE tokenizers need the Hugging Face `tokenizers` package, a dependency of "
            f"glassformer: {install_hint(None)}"
        ) from None
    return tokenizers


def _hf_from_json(hf_json: str, model_types: tuple[str, ...] | None = ("BPE",)):
    tk = _hf_module()
    try:
        model = json.loads(hf_json)["model"]["type"]
        hf = tk.Tokenizer.from_str(hf_json)
    except Exception as e:  # noqa: BLE001 - tokenizers raises plain Exception on bad JSON
        raise TokenizerError(
            f"the embedded Hugging Face tokenizer is unreadable ({e}); re-save it"
        ) from None
    # A saved tokenizer.json may carry padding / truncation settings (all-MiniLM-L6-v2 pads to
    # 128): ids here are the text's own tokens, as `transformers` gives them by default.
    hf.no_padding()
    hf.no_truncation()
    if model_types is not None and model not in model_types:
        raise TokenizerError(f"the embedded Hugging Face tokenizer is {model}, not BPE; re-train")
    return hf
