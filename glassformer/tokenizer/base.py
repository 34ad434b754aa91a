"""The tokenizer interface and the two that need no library: words and characters.

`Tokenizer` holds what every tokenizer shares (a vocabulary with the specials as ordinary
entries, special roles, encode / decode with unknown tokens reported, JSON); `WordTokenizer` cuts
text into words and single punctuation marks, `CharTokenizer` into characters. The BPE
tokenizers build on `Tokenizer` in `bpe.py`; the package `__init__` is the public face.
"""

from __future__ import annotations

import json
import operator
import re
from collections import Counter
from collections.abc import Iterable

from glassformer.errors import TokenizerError

SPECIAL_ROLES = ("pad", "unk", "bos", "eos")
DEFAULT_SPECIALS = {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}
FORMAT = "glassformer-tokenizer/1"
# The most bytes read from one tokenizer file: GPT-2's tokenizer.json is 1.4 MB, those of 256k-token
# vocabularies a few tens of MB; a path to a huge file (or a device) is refused, never read whole.
FILE_LIMIT = 256 * 2**20
_WORD = r"\w+|[^\w\s]"
# Word decoding glues these to their neighbour, so "hola , mundo ." reads "hola, mundo.".
_NO_SPACE_BEFORE = frozenset(".,!?;:)")
_NO_SPACE_AFTER = frozenset("(¿¡")


class Tokenizer:
    """Shared logic; subclasses define `kind` and `_split` (text -> raw pieces)."""

    kind: str = ""
    _noun = "piece"  # what a piece is called in error messages

    def __init__(
        self, vocab: list[str], specials: dict[str, str] | None = None, lowercase: bool = False
    ) -> None:
        if not isinstance(vocab, list | tuple) or not vocab:
            raise TokenizerError("vocab must be a non-empty list of token strings")
        if bad := [t for t in vocab if not isinstance(t, str) or not t]:
            raise TokenizerError(f"vocab entry {bad[0]!r} is not a non-empty string; fix vocab")
        if dupes := [t for t, n in Counter(vocab).items() if n > 1]:
            raise TokenizerError(f"token {dupes[0]!r} appears twice in vocab; remove the duplicate")
        self.vocab = list(vocab)
        self._index = {token: i for i, token in enumerate(self.vocab)}
        specials = {} if specials is None else specials
        if not isinstance(specials, dict):
            raise TokenizerError("specials must be a dict of role -> token, e.g. {'eos': '</s>'}")
        for role, token in specials.items():
            if role not in SPECIAL_ROLES or not isinstance(token, str):
                raise TokenizerError(
                    f"bad special {role!r}: {token!r}; roles are {', '.join(SPECIAL_ROLES)} "
                    "and tokens are strings"
                )
            if token not in self._index:
                raise TokenizerError(f"special {role} token {token!r} is not in vocab; add it")
        # Role order is canonical so that to_json is stable whatever order the caller used.
        self.specials = {r: specials[r] for r in SPECIAL_ROLES if r in specials}
        if not isinstance(lowercase, bool):
            raise TokenizerError(f"lowercase must be True or False, got {lowercase!r}")
        self.lowercase = lowercase

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, specials={self.specials})"

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _special_id(self, role: str) -> int | None:
        token = self.specials.get(role)
        return None if token is None else self._index[token]

    @property
    def pad_id(self) -> int | None:
        return self._special_id("pad")

    @property
    def unk_id(self) -> int | None:
        return self._special_id("unk")

    @property
    def bos_id(self) -> int | None:
        return self._special_id("bos")

    @property
    def eos_id(self) -> int | None:
        return self._special_id("eos")

    def id_of(self, token: str) -> int:
        """The id of `token`, matched exactly (no lowercasing)."""
        if token not in self._index:
            raise TokenizerError(
                f"token {token!r} is not in the vocabulary ({self._preview()}); use a token from it"
            )
        return self._index[token]

    def _split(self, text: str) -> list[str]:
        raise NotImplementedError

    def tokenize(self, text: str) -> list[str]:
        """Pieces of `text`. With lowercase, a piece is lowercased unless it is in the vocabulary
        as written: that keeps upper-case specials such as the article's "SOS" reachable."""
        pieces = self._split(text)
        if not self.lowercase:
            return pieces
        return [p if p in self._index else p.lower() for p in pieces]

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        return self.encode_with_unknown(text, add_bos, add_eos)[0]

    def encode_with_unknown(
        self, text: str, add_bos: bool = False, add_eos: bool = False
    ) -> tuple[list[int], list[str]]:
        """Ids of `text`, and the pieces that were not in the vocabulary (mapped to UNK)."""
        ids, unknown = [], []
        for piece in self.tokenize(text):
            i = self._index.get(piece)
            if i is None:
                if self.unk_id is None:
                    raise TokenizerError(
                        f"{self._noun} {piece!r} is not in the vocabulary ({self._preview()}); "
                        f"use {self._noun}s from it"
                    )
                i = self.unk_id
                unknown.append(piece)
            ids.append(i)
        return self._wrap(ids, add_bos, add_eos), unknown

    def encode_for_model(self, text: str) -> tuple[list[int], list[str]]:
        """The ids a model of this tokenizer takes for `text` (and the unknown pieces): the plain
        pieces here; a Hugging Face tokenizer adds its template ([CLS] ... [SEP] for BERT)."""
        return self.encode_with_unknown(text)

    def _wrap(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        for role, wanted in (("bos", add_bos), ("eos", add_eos)):
            if wanted and role not in self.specials:
                raise TokenizerError(
                    f"add_{role}=True but this tokenizer has no {role} token; "
                    f"add one to specials or pass add_{role}=False"
                )
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Token string of each id, specials kept."""
        out = []
        for i in ids:
            try:
                k = operator.index(i)
            except TypeError:
                raise TokenizerError(f"token id {i!r} is not an integer; pass int ids") from None
            if not 0 <= k < len(self.vocab):
                raise TokenizerError(
                    f"token id {k} is out of range for a vocabulary of {len(self.vocab)} tokens "
                    f"(ids 0..{len(self.vocab) - 1}); decode ids made with this tokenizer"
                )
            out.append(self.vocab[k])
        return out

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        tokens = self.tokens(ids)
        if skip_special:
            special = set(self.specials.values())
            tokens = [t for t in tokens if t not in special]
        return self._join(tokens)

    def _join(self, tokens: list[str]) -> str:
        raise NotImplementedError

    def to_json(self) -> str:
        """One JSON object: format, kind, vocab, specials, lowercase; non-ASCII kept as is."""
        keys = ("kind", "vocab", "specials", "lowercase")
        data = {"format": FORMAT} | {k: getattr(self, k) for k in keys}
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def _from_data(cls, data: dict) -> Tokenizer:
        """The tokenizer of a parsed `to_json` document (format and keys already checked)."""
        return cls(data["vocab"], data["specials"], data["lowercase"])

    def _preview(self) -> str:
        # The first ordinary tokens say more about what the vocabulary holds than the specials.
        special = set(self.specials.values())
        shown = [_show(t) for t in self.vocab if t not in special][:3]
        more = ", ..." if len(self.vocab) - len(special) > 3 else ""
        return f"{len(self.vocab)} tokens: {', '.join(shown)}{more}"


class WordTokenizer(Tokenizer):
    """Words (`\\w+`) and single punctuation marks; special tokens in text are kept whole."""

    kind = "word"
    _noun = "word"

    def __init__(
        self, vocab: list[str], specials: dict[str, str] | None = None, lowercase: bool = False
    ) -> None:
        super().__init__(vocab, specials, lowercase)
        self._pattern = _word_pattern(self.specials.values())

    def _split(self, text: str) -> list[str]:
        return self._pattern.findall(text)

    def _join(self, tokens: list[str]) -> str:
        out = []
        for k, token in enumerate(tokens):
            if k and token not in _NO_SPACE_BEFORE and tokens[k - 1] not in _NO_SPACE_AFTER:
                out.append(" ")
            out.append(token)
        return "".join(out)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        max_size: int | None = None,
        min_freq: int = 1,
        lowercase: bool = True,
        specials: dict[str, str] | None = DEFAULT_SPECIALS,
    ) -> WordTokenizer:
        """Specials first (pad, unk, bos, eos), then words by descending count, ties alphabetical.

        max_size counts the specials, so it is the `vocab_size` a model config must match.
        """
        head = special_head(specials)
        if max_size is not None and max_size < len(head):
            raise TokenizerError(
                f"max_size={max_size} leaves no room for the {len(head)} special tokens; "
                f"use max_size >= {len(head)}"
            )
        if min_freq < 1:
            raise TokenizerError(f"min_freq must be >= 1, got {min_freq}")
        pattern, keep = _word_pattern(head), set(head)
        counts: Counter[str] = Counter()
        for text in texts:
            pieces = pattern.findall(text)
            counts.update(p if p in keep or not lowercase else p.lower() for p in pieces)
        words = [w for w, c in counts.items() if c >= min_freq and w not in keep]
        words.sort(key=lambda w: (-counts[w], w))
        vocab = (head + words)[:max_size]
        return cls(vocab, specials, lowercase)


class CharTokenizer(Tokenizer):
    """One piece per Unicode code point. Special tokens enter only through add_bos/add_eos: a
    literal "<s>" in text is three characters, so any text over the vocabulary round-trips."""

    kind = "char"
    _noun = "character"

    def _split(self, text: str) -> list[str]:
        return list(text)

    def _join(self, tokens: list[str]) -> str:
        return "".join(tokens)

    @classmethod
    def train(
        cls, texts: Iterable[str], specials: dict[str, str] | None = DEFAULT_SPECIALS
    ) -> CharTokenizer:
        """Specials first (pad, unk, bos, eos), then the sorted set of characters seen."""
        head = special_head(specials)
        chars = set().union(*map(set, texts)) - set(head)
        return cls(head + sorted(chars), specials)


def special_head(specials: dict[str, str] | None) -> list[str]:
    """Distinct special tokens in role order: the head of a trained vocabulary."""
    specials = specials or {}
    head = [specials[r] for r in SPECIAL_ROLES if r in specials]
    return list(dict.fromkeys(head))  # two roles may share one token (GPT-2 style)


def _word_pattern(specials: Iterable[str]) -> re.Pattern[str]:
    # Specials such as "<s>" would otherwise split into "<", "s", ">"; longest first so "</s>"
    # wins over "<s>". A special ending in a word character must not match inside a longer word.
    alts = []
    for token in sorted(specials, key=len, reverse=True):
        if re.fullmatch(_WORD, token) is None:
            alts.append(re.escape(token) + (r"(?!\w)" if re.match(r"\w", token[-1]) else ""))
    return re.compile("|".join([*alts, _WORD]))


def _show(token: str) -> str:
    return token if token.isprintable() and token.strip() == token else repr(token)
