"""The Hugging Face form of glassformer's word and character tokenizers: a tokenizer.json that
`tokenizers` (and `transformers.AutoTokenizer`) runs to the same ids as glassformer's `encode`.

A character tokenizer is a WordLevel model over one piece per code point; a word tokenizer a
WordLevel model over the pieces of its own pattern (words and single punctuation marks; a special
written in the text is matched whole, a special ending in a letter only as a whole word), with a
Lowercase normalizer when it lowercases (its trained vocabulary is lower-case, specials excepted:
they are matched before lowercasing). Unknown pieces map to its UNK.

Where the two could differ this refuses (TokenizerError) rather than write a tokenizer that
encodes otherwise: a lowercasing character tokenizer (glassformer keeps a character that is in
the vocabulary as written), a lowercasing word tokenizer with an upper-case word in its
vocabulary, or one without UNK (glassformer refuses an unknown piece). Deliberately not here:
decoding rules (Hugging Face joins words with spaces).
"""

from __future__ import annotations

import re

from glassformer.errors import TokenizerError
from glassformer.tokenizer.base import _WORD, CharTokenizer, Tokenizer, WordTokenizer


def hf_form(tok: Tokenizer) -> str | None:
    """tokenizer.json text that encodes as `tok` does (None for a kind that is not word or
    character), or one TokenizerError saying why it cannot be written."""
    if not isinstance(tok, CharTokenizer | WordTokenizer):
        return None
    special = set(tok.specials.values())
    why = None
    if tok.unk_id is None:
        why = "it has no UNK token (it refuses an unknown piece, Hugging Face cannot)"
    elif tok.lowercase and isinstance(tok, CharTokenizer):
        why = "it lowercases characters unless the vocabulary has them as written"
    elif tok.lowercase and any(t != t.lower() for t in tok.vocab if t not in special):
        why = "it lowercases words but its vocabulary has upper-case ones"
    if why:
        raise TokenizerError(
            f"this {tok.kind} tokenizer has no Hugging Face form that encodes as it does: {why}; "
            "give the model a tokenizer with an UNK token and a lower-case vocabulary"
        )
    from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HF

    vocab = {t: i for i, t in enumerate(tok.vocab)}
    hf = HF(models.WordLevel(vocab, unk_token=tok.specials["unk"]))
    if isinstance(tok, CharTokenizer):
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        hf.decoder = decoders.Fuse()
    else:
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(_WORD), behavior="removed", invert=True)
        if tok.lowercase:
            hf.normalizer = normalizers.Lowercase()
        # A special in the text is one piece, kept as written (not lowercased); one ending in a
        # word character only as a whole word ("SOS" of the article, base._word_pattern).
        whole = {t: re.match(r"\w", t[-1]) is not None for t in tok.specials.values()}
        hf.add_special_tokens(
            [AddedToken(t, special=True, normalized=False, single_word=w) for t, w in whole.items()]
        )
    return hf.to_str()
