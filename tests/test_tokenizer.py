"""Tokenizer tests: the article's ids, round trips, unknown words, JSON files, training rules.

Round trips are checked over seeded random inputs (hypothesis is not a dependency). Byte-level
BPE is trained on a few thousand shipped lines so that the file stays fast; the SentencePiece-style
BPE on the shipped training pairs, since which words it keeps whole is a claim about that corpus.
"""

import json
import random
import subprocess
import sys
import unicodedata

import pytest

from glassformer.errors import TokenizerError
from glassformer.tokenizer import (
    DEFAULT_SPECIALS,
    FORMAT,
    BPETokenizer,
    CharTokenizer,
    MetaspaceBPETokenizer,
    Tokenizer,
    WordTokenizer,
    article_tokenizer,
    from_json,
    load,
    save,
)

CORPUS = [
    "Hola mundo. ¿Cómo estás? (Bien, gracias)",
    "hello world! how are you; fine: thanks",
    "El niño come pan, y la niña bebe agua.",
    "¡Hola! hola hola mundo",
    "naïve café 東京 🙂 über",
]
UNICODE_TEXT = "héllo wörld ñ 東京 🙂 e\u0301 <s> tab\tnew\nline ¿¡"


@pytest.fixture
def word() -> WordTokenizer:
    return WordTokenizer.train(CORPUS)


@pytest.fixture
def char() -> CharTokenizer:
    return CharTokenizer.train([*CORPUS, UNICODE_TEXT])


# The Random Transformer article's vocabulary


def test_article_vocab_and_specials():
    tok = article_tokenizer()
    assert tok.vocab == ["hello", "mundo", "world", "how", "?", "EOS", "SOS", "a", "hola", "c"]
    assert (tok.bos_id, tok.eos_id, tok.pad_id, tok.unk_id) == (6, 5, None, None)
    assert tok.kind == "word" and tok.lowercase and tok.vocab_size == 10


def test_article_encodes_hello_world():
    assert article_tokenizer().encode("Hello World") == [0, 2]
    assert article_tokenizer().encode("HELLO world", add_bos=True, add_eos=True) == [6, 0, 2, 5]


def test_article_specials_match_as_written():
    tok = article_tokenizer()
    assert tok.tokenize("SOS Hola mundo EOS") == ["SOS", "hola", "mundo", "EOS"]
    assert tok.encode("SOS Hola mundo EOS") == [6, 8, 1, 5]


def test_article_decode():
    tok = article_tokenizer()
    assert tok.decode([6, 8, 1, 5]) == "hola mundo"
    assert tok.decode([6, 8, 1, 5], skip_special=False) == "SOS hola mundo EOS"
    assert tok.decode([3, 7, 4]) == "how a?"
    assert tok.tokens([6, 8, 1, 5]) == ["SOS", "hola", "mundo", "EOS"]


def test_article_unknown_word_message():
    with pytest.raises(TokenizerError) as err:
        article_tokenizer().encode("hello foo")
    assert str(err.value) == (
        "word 'foo' is not in the vocabulary (10 tokens: hello, mundo, world, ...); "
        "use words from it"
    )


def test_article_lowercase_does_not_reach_specials_spelled_otherwise():
    # "sos" is an ordinary word, not the special "SOS": it is unknown, and there is no UNK.
    with pytest.raises(TokenizerError, match="'sos'"):
        article_tokenizer().encode("sos hello")


# Round trips


@pytest.mark.parametrize("seed", range(25))
def test_char_round_trip_random_text(char, seed):
    rng = random.Random(seed)
    alphabet = [t for t in char.vocab if t not in char.specials.values()]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
    assert char.decode(char.encode(text)) == text
    assert char.tokens(char.encode(text)) == list(text)


def test_char_round_trip_unicode_and_literal_specials(char):
    ids = char.encode(UNICODE_TEXT)
    assert len(ids) == len(UNICODE_TEXT)  # "<s>" in text is three characters, not BOS
    assert char.bos_id not in ids
    assert char.decode(ids) == UNICODE_TEXT
    assert char.decode(char.encode(UNICODE_TEXT, add_bos=True, add_eos=True)) == UNICODE_TEXT


@pytest.mark.parametrize("seed", range(25))
def test_word_round_trip_random_ids(word, seed):
    rng = random.Random(seed)
    ordinary = [i for i, t in enumerate(word.vocab) if t not in word.specials.values()]
    ids = [rng.choice(ordinary) for _ in range(rng.randint(0, 30))]
    assert word.encode(word.decode(ids)) == ids


@pytest.mark.parametrize("seed", range(10))
def test_word_round_trip_with_specials_kept(word, seed):
    rng = random.Random(seed)
    ids = [rng.randrange(word.vocab_size) for _ in range(rng.randint(1, 30))]
    assert word.encode(word.decode(ids, skip_special=False)) == ids


@pytest.mark.parametrize(
    "text",
    ["hola mundo.", "¿cómo estás?", "(bien, gracias)", "¡hola! hola", "hello world; fine: thanks"],
)
def test_word_normalised_text_round_trips(word, text):
    assert word.decode(word.encode(text)) == text


@pytest.mark.parametrize(
    "tokens, text",
    [
        (["hola", "mundo", "."], "hola mundo."),
        (["¿", "hola", "?"], "¿hola?"),
        (["¡", "hola", "!"], "¡hola!"),
        (["(", "bien", ",", "gracias", ")"], "(bien, gracias)"),
        (["a", ";", "b", ":", "c"], "a; b: c"),
        (["hola", "(", "mundo", ")", "."], "hola (mundo)."),
    ],
)
def test_word_decode_spacing(tokens, text):
    tok = WordTokenizer(list(dict.fromkeys(tokens)))
    assert tok.decode([tok.id_of(t) for t in tokens]) == text


# Tokenizing


def test_word_tokenize_splits_words_and_single_punctuation():
    tok = WordTokenizer(["x"], lowercase=True)
    assert tok.tokenize("¿Qué tal?! Bien...") == [
        "¿",
        "qué",
        "tal",
        "?",
        "!",
        "bien",
        ".",
        ".",
        ".",
    ]


def test_word_tokenize_keeps_special_tokens_whole(word):
    assert word.tokenize("<s>hola</s> <pad>") == ["<s>", "hola", "</s>", "<pad>"]
    assert word.encode("<s> hola </s>") == [word.bos_id, word.id_of("hola"), word.eos_id]


def test_word_special_ending_in_letter_does_not_match_inside_a_word():
    tok = WordTokenizer(["<bos", "<", "boss", "x"], {"bos": "<bos"})
    assert tok.tokenize("<bos x") == ["<bos", "x"]
    assert tok.tokenize("<boss") == ["<", "boss"]


def test_lowercase_off_keeps_case():
    tok = WordTokenizer(["Hola", "hola"], lowercase=False)
    assert tok.encode("Hola hola") == [0, 1]
    with pytest.raises(TokenizerError, match="'HOLA'"):
        tok.encode("HOLA")


# Unknown pieces


def test_unknown_words_map_to_unk_and_are_reported(word):
    ids, unknown = word.encode_with_unknown("Hola zorro, hola Gato zorro")
    assert unknown == ["zorro", "gato", "zorro"]
    assert ids.count(word.unk_id) == 3
    assert ids[0] == word.id_of("hola") and ids[2] == word.id_of(",")
    assert word.encode("hola zorro") == [word.id_of("hola"), word.unk_id]


def test_known_text_reports_no_unknowns(word):
    assert word.encode_with_unknown("hola mundo.")[1] == []


def test_unknown_character_without_unk_raises_one_line():
    tok = CharTokenizer.train(["ab c"], specials={})
    with pytest.raises(TokenizerError) as err:
        tok.encode("a\nb")
    assert "'\\n'" in str(err.value) and "\n" not in str(err.value)


# Special-token ids


def test_add_bos_and_eos(word):
    body = word.encode("hola mundo")
    assert word.encode("hola mundo", add_bos=True) == [word.bos_id, *body]
    assert word.encode("hola mundo", add_eos=True) == [*body, word.eos_id]
    assert word.encode("hola mundo", add_bos=True, add_eos=True) == [
        word.bos_id,
        *body,
        word.eos_id,
    ]
    assert word.encode("", add_bos=True, add_eos=True) == [word.bos_id, word.eos_id]


def test_add_bos_without_bos_raises():
    tok = WordTokenizer(["a"], {})
    with pytest.raises(TokenizerError, match="no bos token"):
        tok.encode("a", add_bos=True)


def test_special_ids_follow_default_order(word):
    assert (word.pad_id, word.unk_id, word.bos_id, word.eos_id) == (0, 1, 2, 3)
    assert word.vocab[:4] == [DEFAULT_SPECIALS[r] for r in ("pad", "unk", "bos", "eos")]


def test_decode_skip_special(word):
    ids = [word.pad_id, word.bos_id, word.id_of("hola"), word.eos_id, word.pad_id]
    assert word.decode(ids) == "hola"
    assert word.decode(ids, skip_special=False) == "<pad> <s> hola </s> <pad>"
    assert word.tokens(ids) == ["<pad>", "<s>", "hola", "</s>", "<pad>"]


@pytest.mark.parametrize("bad", [[10], [-1], [0, 99]])
def test_decode_out_of_range_raises(bad):
    with pytest.raises(TokenizerError, match="out of range"):
        article_tokenizer().decode(bad)


def test_decode_non_integer_raises():
    with pytest.raises(TokenizerError, match="not an integer"):
        article_tokenizer().decode([1.5])


def test_id_of_names_missing_token():
    assert article_tokenizer().id_of("SOS") == 6
    with pytest.raises(TokenizerError, match="'sos'"):
        article_tokenizer().id_of("sos")


# JSON, save, load


def _same(a: Tokenizer, b: Tokenizer, texts: list[str]) -> None:
    assert type(a) is type(b)
    assert (a.kind, a.vocab, a.specials, a.lowercase) == (b.kind, b.vocab, b.specials, b.lowercase)
    for text in texts:
        assert a.encode_with_unknown(text, True, True) == b.encode_with_unknown(text, True, True)


@pytest.mark.parametrize("make", ["word", "char", "article"])
def test_json_round_trip(request, make):
    tok = article_tokenizer() if make == "article" else request.getfixturevalue(make)
    texts = ["Hello World", "SOS hola mundo EOS"] if make == "article" else CORPUS
    _same(tok, from_json(tok.to_json()), texts)
    data = json.loads(tok.to_json())
    assert data["format"] == FORMAT and data["kind"] == tok.kind


@pytest.mark.parametrize("make", ["word", "char", "article"])
def test_save_load_round_trip(request, tmp_path, make):
    tok = article_tokenizer() if make == "article" else request.getfixturevalue(make)
    path = tmp_path / "tokenizer.json"
    save(tok, path)
    texts = ["Hello World"] if make == "article" else [*CORPUS, "zzz qqq"]
    _same(tok, load(path), texts)
    _same(tok, load(str(path)), texts)


def test_saved_file_is_utf8(tmp_path, char):
    path = tmp_path / "tok.json"
    save(char, path)
    assert "東" in path.read_bytes().decode("utf-8")  # stored as UTF-8, not \u escapes


def test_specials_order_is_canonical():
    a = WordTokenizer(["a", "b"], {"eos": "b", "bos": "a"})
    assert list(a.specials) == ["bos", "eos"]
    assert json.loads(a.to_json())["specials"] == {"bos": "a", "eos": "b"}


def _json(**changes) -> str:
    data = json.loads(article_tokenizer().to_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    "text, match",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "format"),
        (_json(format="glassformer-tokenizer/2"), "format"),
        (_json(kind="sentencepiece"), "unknown tokenizer kind 'sentencepiece'"),
        (_json(kind="bpe"), "lacks the key 'hf'"),
        (_json(kind="sp-bpe"), "lacks the key 'hf'"),
        (_json(vocab=["a", "a"]), "twice"),
        (_json(vocab=[]), "non-empty"),
        (_json(vocab="hello"), "non-empty list"),
        (_json(specials={"bos": "missing"}), "'missing'"),
        (_json(specials={"cls": "hello"}), "'cls'"),
        (_json(lowercase="yes"), "lowercase"),
    ],
)
def test_from_json_rejects_bad_input(text, match):
    with pytest.raises(TokenizerError, match=match):
        from_json(text)


def test_from_json_missing_key():
    data = json.loads(article_tokenizer().to_json())
    del data["vocab"]
    with pytest.raises(TokenizerError, match="'vocab'"):
        from_json(json.dumps(data))


def test_load_missing_file_names_path(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(TokenizerError, match="nope.json"):
        load(path)


def test_load_corrupt_file_names_path(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "x"}', encoding="utf-8")
    with pytest.raises(TokenizerError, match="bad.json"):
        load(path)


def test_load_non_utf8_file_raises(tmp_path):
    path = tmp_path / "latin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TokenizerError, match="latin.json"):
        load(path)


@pytest.mark.parametrize(
    "vocab, specials, match",
    [
        (["a", "b", "a"], None, "twice"),
        (["a"], {"unk": "<unk>"}, "not in vocab"),
        (["a"], {"mask": "a"}, "'mask'"),
        ([], None, "non-empty"),
        (["a", ""], None, "non-empty string"),
    ],
)
def test_constructor_validates(vocab, specials, match):
    with pytest.raises(TokenizerError, match=match):
        WordTokenizer(vocab, specials)


# Training


def test_word_train_orders_by_count_then_alphabet():
    tok = WordTokenizer.train(["b a c b", "c b d"], specials={"unk": "<unk>", "pad": "<pad>"})
    # b: 3, c: 2, then a and d (1 each) alphabetically; specials first in role order.
    assert tok.vocab == ["<pad>", "<unk>", "b", "c", "a", "d"]


def test_word_train_is_deterministic_and_order_free():
    a = WordTokenizer.train(CORPUS)
    b = WordTokenizer.train(list(reversed(CORPUS)))
    c = WordTokenizer.train(iter(CORPUS))  # a one-shot iterator is enough
    assert a.vocab == b.vocab == c.vocab
    assert a.to_json() == b.to_json()


def test_word_train_lowercases_by_default():
    assert "hola" in WordTokenizer.train(["Hola HOLA"]).vocab
    assert "Hola" not in WordTokenizer.train(["Hola HOLA"]).vocab
    assert {"Hola", "HOLA"} <= set(WordTokenizer.train(["Hola HOLA"], lowercase=False).vocab)


@pytest.mark.parametrize("max_size", [4, 5, 8, 1000])
def test_word_train_max_size_counts_specials(max_size):
    full = WordTokenizer.train(CORPUS)
    tok = WordTokenizer.train(CORPUS, max_size=max_size)
    assert tok.vocab_size == min(max_size, full.vocab_size)
    assert tok.vocab == full.vocab[: tok.vocab_size]  # the most frequent words survive


def test_word_train_max_size_too_small_raises():
    with pytest.raises(TokenizerError, match="max_size"):
        WordTokenizer.train(CORPUS, max_size=3)


def test_word_train_min_freq():
    tok = WordTokenizer.train(["a a a b b c"], min_freq=2)
    assert tok.vocab[4:] == ["a", "b"]
    assert WordTokenizer.train(["a a a b b c"], min_freq=3).vocab[4:] == ["a"]
    with pytest.raises(TokenizerError, match="min_freq"):
        WordTokenizer.train(["a"], min_freq=0)


def test_word_train_does_not_duplicate_specials():
    tok = WordTokenizer.train(["<s> hola </s> <unk>"])
    assert tok.vocab == ["<pad>", "<unk>", "<s>", "</s>", "hola"]


def test_char_train_vocab():
    tok = CharTokenizer.train(["bca", "ñ🙂a"])
    assert tok.vocab == [*DEFAULT_SPECIALS.values(), "a", "b", "c", "ñ", "🙂"]
    assert CharTokenizer.train(["ba"], specials=None).vocab == ["a", "b"]
    assert CharTokenizer.train(["ba", "ab"]).to_json() == CharTokenizer.train(["ab"]).to_json()


def test_shared_special_token_appears_once():
    tok = WordTokenizer.train(["hola"], specials={"bos": "<|end|>", "eos": "<|end|>"})
    assert tok.vocab == ["<|end|>", "hola"]
    assert tok.bos_id == tok.eos_id == 0


# BPE (byte-level, Hugging Face tokenizers)

BPE_TEXTS = [
    "Hello, world! How are you?",
    'I don\'t know... (maybe) -- 3.14; a:b "quoted"',
    "¿Dónde está el baño? ¡Qué día más bonito!",
    "El niño comió piñones; la cigüeña voló.",
    "ÁÉÍÓÚ ÜÑ áéíóú üñ «comillas»",
    "  two  spaces, trailing space \ttab\nnewline\n",
    "naïve café 東京 🙂 — unseen characters",
    "",
]


def _bpe_corpus() -> list[str]:
    from glassformer.data import read_pairs, read_text

    pairs = read_pairs("eng-spa-valid")  # 2,000 sentences, English and Spanish
    return [t for p in pairs for t in p] + read_text("tinyshakespeare").splitlines()[:2000]


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(_bpe_corpus(), vocab_size=600)


@pytest.mark.parametrize("text", BPE_TEXTS)
def test_bpe_round_trip(bpe, text):
    ids, unknown = bpe.encode_with_unknown(text)
    assert unknown == []
    assert bpe.decode(ids) == text
    assert bpe.decode(bpe.encode(text, add_bos=True, add_eos=True)) == text
    assert bpe.tokens(ids) == bpe.tokenize(text)


@pytest.mark.parametrize("seed", range(10))
def test_bpe_round_trip_random_unicode(bpe, seed):
    rng = random.Random(seed)
    pool = "abcñáé¿¡?!.,;: \t\n'\"()-0123東🙂\u0301"
    text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 80)))
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_merges_common_words(bpe):
    text = "What do you want? ¿Qué quieres?"
    assert len(bpe.encode(text)) < len(text.encode("utf-8")) / 2
    assert "Ġthe" in bpe.vocab  # a space-prefixed word, written with the byte-level "Ġ"


def test_bpe_vocab_specials_first_then_bytes(bpe):
    assert bpe.kind == "bpe" and bpe.vocab_size == len(bpe.vocab) == 600
    assert bpe.vocab[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (bpe.pad_id, bpe.unk_id, bpe.bos_id, bpe.eos_id) == (0, 1, 2, 3)
    assert [bpe.id_of(t) for t in bpe.vocab] == list(range(600))
    assert len(set(bpe.vocab[4:260])) == 256  # every byte has a symbol: nothing is unknown


def test_bpe_specials_in_text_and_skip_special(bpe):
    ids = bpe.encode("hola</s>", add_bos=True)
    assert ids[0] == bpe.bos_id and ids[-1] == bpe.eos_id and ids.count(bpe.eos_id) == 1
    assert bpe.decode(ids) == "hola"
    assert bpe.decode(ids, skip_special=False) == "<s>hola</s>"
    assert bpe.encode(bpe.decode(ids, skip_special=False)) == ids


@pytest.mark.parametrize("vocab_size", [260, 300, 451, 1000])
def test_bpe_vocab_size_honoured(vocab_size):
    tok = BPETokenizer.train(_bpe_corpus()[:1500], vocab_size=vocab_size)
    assert tok.vocab_size == vocab_size
    assert tok.decode(tok.encode(BPE_TEXTS[2])) == BPE_TEXTS[2]


def test_bpe_vocab_size_too_small_raises():
    with pytest.raises(TokenizerError, match="vocab_size >= 260"):
        BPETokenizer.train(["hello"], vocab_size=259)
    assert BPETokenizer.train(["hello"], vocab_size=258, specials={"eos": "<|endoftext|>"})


def test_bpe_training_is_deterministic(bpe):
    again = BPETokenizer.train(_bpe_corpus(), vocab_size=600)
    assert again.to_json() == bpe.to_json()


def test_bpe_training_is_deterministic_across_processes(bpe):
    # A fresh interpreter has other hash seeds; the merges must not depend on them.
    code = (
        "import sys, tests.test_tokenizer as t; "
        "sys.stdout.write(t.BPETokenizer.train(t._bpe_corpus(), vocab_size=600).to_json())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_root()
    )
    assert out.stdout == bpe.to_json()


def _root():
    from pathlib import Path

    return Path(__file__).parent.parent


def test_bpe_lowercase():
    tok = BPETokenizer.train(_bpe_corpus()[:1500], vocab_size=400, lowercase=True)
    assert tok.lowercase
    assert tok.encode("¿DÓNDE Está?") == tok.encode("¿dónde está?")
    assert tok.decode(tok.encode("¿DÓNDE Está?")) == "¿dónde está?"
    assert from_json(tok.to_json()).lowercase


def test_bpe_json_round_trip(bpe, tmp_path):
    data = json.loads(bpe.to_json())
    assert data["format"] == FORMAT and data["kind"] == "bpe" and data["vocab"] == bpe.vocab
    assert isinstance(data["hf"], str) and json.loads(data["hf"])["model"]["type"] == "BPE"
    _same(bpe, from_json(bpe.to_json()), BPE_TEXTS)
    path = tmp_path / "bpe.json"
    save(bpe, path)
    _same(bpe, load(path), BPE_TEXTS)
    assert load(path).to_json() == bpe.to_json()


def test_bpe_hf_document_loads_in_tokenizers(bpe):
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_str(json.loads(bpe.to_json())["hf"])
    for text in BPE_TEXTS:
        assert hf.encode(text).ids == bpe.encode(text)


def _bpe_json(bpe: BPETokenizer, **changes) -> str:
    return json.dumps(json.loads(bpe.to_json()) | changes)


def test_bpe_from_json_rejects_bad_input(bpe):
    with pytest.raises(TokenizerError, match="disagrees"):
        from_json(_bpe_json(bpe, vocab=bpe.vocab[::-1]))
    with pytest.raises(TokenizerError, match="disagrees"):
        from_json(_bpe_json(bpe, lowercase=True))
    with pytest.raises(TokenizerError, match="unreadable"):
        from_json(_bpe_json(bpe, hf="{not json"))
    hf = json.loads(json.loads(bpe.to_json())["hf"])
    hf["model"] = {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
    with pytest.raises(TokenizerError, match="WordLevel, not BPE"):
        from_json(_bpe_json(bpe, hf=json.dumps(hf)))


def test_bpe_saved_before_loads_unchanged():
    # The first shipped translator's tokenizer (models/en-es until 2026-11-30, kept gzipped in
    # tests/data) was written by an earlier BPETokenizer: it must load as the same byte-level
    # tokenizer, re-save byte for byte and cut text as it always did.
    import gzip

    from tokenizers import Tokenizer as HFTokenizer

    saved = _root() / "tests" / "data" / "bpe-tokenizer-2026-11-29.json.gz"
    text = gzip.decompress(saved.read_bytes()).decode("utf-8")
    tok = from_json(text)
    assert type(tok) is BPETokenizer and tok.kind == "bpe" and tok.vocab_size == 8000
    assert tok.to_json() == text
    assert tok.encode("Hello world.") == [43, 4035, 1989, 17]
    assert tok.tokenize("Hello world.") == ["H", "ello", "Ġworld", "."]
    hf = HFTokenizer.from_str(json.loads(text)["hf"])
    for line in BPE_TEXTS:
        assert tok.encode(line) == hf.encode(line).ids
        assert tok.decode(tok.encode(line)) == line


# SentencePiece-style BPE ("sp-bpe": Metaspace "▁", byte fallback, Hugging Face tokenizers)

SP_TEXTS = [
    *BPE_TEXTS,
    " ",
    "   ",
    " leading space",
    "trailing space ",
    "  two  spaces  between  ",
    "tab\there\t",
    "\tleading tab",
    "new\nline\n",
    "\n\nblank lines\r\n",
    " \t \n ",
    "emoji 🙂🎉 and 👩‍💻",
    "never seen: 東京 Ελληνικά Кириллица ʕ•ᴥ•ʔ \x00\x7f",
    "I don't know. 3.14 2,000 100% €5",
]


def _sp_corpus() -> list[str]:
    from glassformer.data import read_pairs

    return [t for p in read_pairs("eng-spa") for t in p]  # both columns: one vocabulary


@pytest.fixture(scope="module")
def sp() -> MetaspaceBPETokenizer:
    return MetaspaceBPETokenizer.train(_sp_corpus())  # default vocab_size 8000


def test_sp_bpe_round_trips_every_validation_sentence(sp):
    from glassformer.data import read_pairs

    for pair in read_pairs("eng-spa-valid"):
        for text in pair:
            ids, unknown = sp.encode_with_unknown(text)
            assert sp.decode(ids) == text and unknown == []


@pytest.mark.parametrize("text", SP_TEXTS)
def test_sp_bpe_round_trip_whitespace_and_unseen_characters(sp, text):
    assert unicodedata.is_normalized("NFC", text)
    ids, unknown = sp.encode_with_unknown(text)
    assert sp.decode(ids) == text
    assert unknown == [] and sp.unk_id not in ids  # unseen characters fall back to bytes
    assert sp.decode(sp.encode(text, add_bos=True, add_eos=True)) == text
    assert sp.tokens(ids) == sp.tokenize(text)


@pytest.mark.parametrize("seed", range(10))
def test_sp_bpe_round_trip_random_unicode_comes_back_nfc(sp, seed):
    rng = random.Random(seed)
    pool = "abcñáé¿¡?!.,;: \t\n\r'\"()-0123東🙂\u0301\u0303\u212b\ufb01"  # some not NFC
    text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 80)))
    # Any code point but surrogates and "▁" (U+2581, the space marker: see the next test).
    points = [rng.randrange(0x110000 - 0x800) for _ in range(rng.randint(0, 20))]
    text += "".join(chr(k if k < 0xD800 else k + 0x800) for k in points).replace("▁", "")
    assert sp.decode(sp.encode(text)) == unicodedata.normalize("NFC", text)


def test_sp_bpe_documented_exceptions(sp):
    # Non-NFC text comes back NFC; U+2581 is the space marker itself, so it comes back a space;
    # a special token written in text is matched whole (as byte-level BPE does) and skipped.
    assert sp.decode(sp.encode("cafe\u0301")) == "café"
    assert sp.decode(sp.encode("a▁b")) == "a b"
    ids = sp.encode("hola</s>")
    assert ids[-1] == sp.eos_id and sp.decode(ids) == "hola"


def test_sp_bpe_keeps_frequent_words_whole(sp):
    assert sp.tokenize("Hello world.")[-2:] == ["▁world", "."]
    assert sp.tokenize("Hola mundo.")[-2:] == ["▁mundo", "."]
    assert sp.tokenize("¿Dónde está la estación?") == [
        "▁¿",
        "Dónde",
        "▁está",
        "▁la",
        "▁estación",
        "?",
    ]
    assert sp.tokenize("I don't know.") == ["▁I", "▁don't", "▁know", "."]
    # A word is the same token first in a text and after a space (byte-level BPE has two).
    assert sp.tokenize("world") == ["▁world"] and sp.tokenize("mundo") == ["▁mundo"]
    # "Hello" (6 times in 115,964 pairs) and "Hola" (16) are too rare for 8,000 tokens ...
    assert "▁Hello" not in sp.vocab and "▁Hola" not in sp.vocab


def test_sp_bpe_keeps_rare_words_whole_with_a_larger_vocabulary():
    # ... and are kept whole once the vocabulary reaches them (18,864 tokens suffice).
    tok = MetaspaceBPETokenizer.train(_sp_corpus(), vocab_size=20000)
    assert tok.tokenize("Hello world.") == ["▁Hello", "▁world", "."]
    assert tok.tokenize("Hola mundo.") == ["▁Hola", "▁mundo", "."]


def test_sp_bpe_vocab_specials_then_bytes(sp):
    assert sp.kind == "sp-bpe" and sp.vocab_size == len(sp.vocab) == 8000 and not sp.lowercase
    assert sp.vocab[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (sp.pad_id, sp.unk_id, sp.bos_id, sp.eos_id) == (0, 1, 2, 3)
    assert sp.specials == DEFAULT_SPECIALS
    assert sp.vocab[4:260] == [f"<0x{b:02X}>" for b in range(256)]
    assert [sp.id_of(t) for t in sp.vocab] == list(range(8000))


def test_sp_bpe_interface(sp):
    ids = sp.encode("Hola mundo.", add_bos=True, add_eos=True)
    assert ids[0] == sp.bos_id and ids[-1] == sp.eos_id
    assert sp.tokens(ids)[-3:] == ["▁mundo", ".", "</s>"]
    assert sp.decode(ids) == "Hola mundo."
    assert sp.decode(ids, skip_special=False) == "<s> Hola mundo.</s>"
    assert sp.decode([sp.pad_id, *ids, sp.pad_id]) == "Hola mundo."
    assert sp.encode_with_unknown("ʕ•ᴥ•ʔ") == (sp.encode("ʕ•ᴥ•ʔ"), [])
    assert sp.tokenize("ᴥ")[1:] == ["<0xE1>", "<0xB4>", "<0xA5>"]  # UTF-8 bytes of U+1D25
    with pytest.raises(TokenizerError, match="out of range"):
        sp.decode([8000])


def test_sp_bpe_json_save_load_round_trip(sp, tmp_path):
    data = json.loads(sp.to_json())
    assert data["format"] == FORMAT and data["kind"] == "sp-bpe" and data["vocab"] == sp.vocab
    assert json.loads(data["hf"])["model"]["byte_fallback"] is True
    _same(sp, from_json(sp.to_json()), SP_TEXTS)
    path = tmp_path / "sp.json"
    save(sp, path)
    _same(sp, load(path), SP_TEXTS)
    assert load(path).to_json() == sp.to_json()


def test_sp_bpe_hf_document_runs_the_same_in_tokenizers(sp):
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_str(sp.hf_json)
    for text in SP_TEXTS:
        assert hf.encode(text).ids == sp.encode(text)
        assert hf.decode(hf.encode(text).ids) == text


def _sp_small() -> str:
    from glassformer.data import read_pairs

    texts = [t for p in read_pairs("eng-spa-valid") for t in p]
    return MetaspaceBPETokenizer.train(texts, vocab_size=1000).to_json()


def test_sp_bpe_training_is_deterministic_across_processes():
    code = "import sys, tests.test_tokenizer as t; sys.stdout.write(t._sp_small())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_root()
    )
    assert out.stdout == _sp_small() == _sp_small()


def test_sp_bpe_vocab_size_rules():
    texts = ["hello world", "hello there", "ñandú"]
    with pytest.raises(TokenizerError, match="vocab_size >= 260"):
        MetaspaceBPETokenizer.train(texts, vocab_size=259)
    with pytest.raises(TokenizerError, match="distinct characters"):
        MetaspaceBPETokenizer.train(texts, vocab_size=272)  # 4 + 256 + 13 characters
    tok = MetaspaceBPETokenizer.train(texts, vocab_size=276)
    assert tok.vocab_size == 276 and tok.decode(tok.encode("¡hola!")) == "¡hola!"
    bigger = MetaspaceBPETokenizer.train(texts, vocab_size=2000)  # runs out of pairs to merge
    assert bigger.vocab_size < 2000 and bigger.vocab[:276] == tok.vocab
    tiny = MetaspaceBPETokenizer.train(texts, vocab_size=270, specials={"eos": "</s>"})
    assert tiny.vocab[:2] == ["</s>", "<0x00>"] and tiny.vocab_size == 270
    assert tiny.unk_id is None and tiny.decode(tiny.encode("héllo")) == "héllo"


def test_word_and_char_work_without_tokenizers_installed():
    code = (
        "import sys; sys.modules['tokenizers'] = None\n"
        "from glassformer.tokenizer import BPETokenizer, WordTokenizer, CharTokenizer\n"
        "from glassformer.errors import TokenizerError\n"
        "assert WordTokenizer.train(['a b']).encode('a b') == [4, 5]\n"
        "assert CharTokenizer.train(['ab']).decode([4, 5]) == 'ab'\n"
        "try:\n"
        "    BPETokenizer.train(['a b'], vocab_size=300)\n"
        "except TokenizerError as e:\n"
        "    assert 'a dependency of glassformer: reinstall' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_root())


def test_importing_the_module_does_not_import_tokenizers():
    code = "import sys, glassformer.tokenizer; assert 'tokenizers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_root())
