"""Every explain report starts with how the input was split into tokens (readable, over their
ids) and ends with the result: the output text, the next token, the class with its probability,
or the pooled embedding; in text, JSON and HTML alike. Readable tokens also in `embed --json`.

Oracles: the tokenizer's own ids, the readable pieces joined back into the input text, and the
reference engine run directly (greedy decoding, softmax of the logits, the torch engine's
embedding).
"""

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from glassformer import reference as R
from glassformer.cli import main
from glassformer.decoding import greedy
from glassformer.formats import loading
from glassformer.tokenizer.display import display_kind, display_tokens

MODELS = Path(__file__).resolve().parents[1] / "models"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def explain_json(capsys, tmp_path, *argv) -> dict:
    f = tmp_path / "t.json"
    run(capsys, "explain", *argv, "--json", f)
    return json.loads(f.read_text())


def section(page: str, name: str) -> str:
    m = re.search(rf'<section id="gf-{name}">(.*?)</section>', page, re.S)
    assert m, f"no {name} section"
    return m.group(1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    corpus = d / "c.txt"
    corpus.write_text("to be or not to be,\nthat is the question\n")
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char", "--corpus",
                 str(corpus)]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer", "word",
                 "--corpus", str(corpus)]) == 0  # fmt: skip
    assert main(["init", str(d / "emb"), "--preset", "encoder-classifier", "--set",
                 "n_classes=0", "--tokenizer", "word", "--corpus", str(corpus)]) == 0  # fmt: skip
    return d


def joined(readable: list[str]) -> str:
    """Readable pieces back into text: ␣ is a space, ⏎ a newline."""
    return "".join(readable).replace("␣", " ").replace("⏎", "\n")


# -- the tokens ---------------------------------------------------------------------------------


def test_spanish_source_tokens_read_as_the_text(capsys, tmp_path):
    """The shipped translator's SentencePiece pieces ("▁está") read as the text; the "▁" that
    SentencePiece puts before the first word (its dummy prefix) is shown, as the model reads it."""
    text = "¿Dónde está la estación?"
    data = explain_json(capsys, tmp_path, MODELS / "en-es", text, "--only", "logits")
    cfg, params, tok = loading.load(MODELS / "en-es")
    assert tok.kind == "sp-bpe"
    enc = data["tokens"]["encoder"]
    assert enc["ids"] == tok.encode_for_model(text)[0]
    assert enc["pieces"] == tok.tokens(enc["ids"])
    assert any("▁" in p for p in enc["pieces"])  # the raw pieces are kept beside ...
    assert not any("▁" in p or "<0x" in p for p in enc["readable"])  # ... the readable ones
    assert joined(enc["readable"]) == " " + text  # the dummy prefix, then the text
    assert tok.decode(enc["ids"]) == text  # which decoding strips
    assert "␣¿" in enc["readable"] and "␣está" in enc["readable"]
    assert data["labels_readable"]["encoder"] == enc["readable"]


def test_character_tokens_make_whitespace_visible(capsys, tmp_path, models):
    text = "to be,\nor"
    data = explain_json(capsys, tmp_path, models / "dec", text, "--only", "logits")
    t = data["tokens"]["decoder"]
    assert t["pieces"] == list(text) and t["readable"] == list("to␣be,⏎or")


def test_text_report_starts_with_the_tokens_and_ends_with_the_result(capsys, models):
    out, _ = run(capsys, "explain", models / "dec", "to be", "--only", "probs")
    lines = out.rstrip("\n").splitlines()
    assert lines[0] == "the text: 5 tokens (decoder)"
    assert lines[1].split() == ["token", "t", "o", "␣", "b", "e"]
    _, _, tok = loading.load(models / "dec")
    assert lines[2].split() == ["id", *map(str, tok.encode("to be"))]
    assert lines[-1].startswith("Result: the most likely next token is")


def test_long_inputs_wrap_the_token_rows(capsys, models):
    text = "to be or not to be, that is th"  # 30 characters: more than one row of 100 columns
    out, _ = run(capsys, "explain", models / "dec", text, "--only", "probs")
    head = out.split("\n\n")[0].splitlines()
    assert head[0] == f"the text: {len(text)} tokens (decoder)"
    assert len(head) > 3 and all(len(line) <= 100 for line in head)
    tokens = [w for line in head[1::2] for w in line.split()[1:]]
    assert joined(tokens) == text  # every token once, in order


# -- the result ---------------------------------------------------------------------------------


def test_translation_result_is_the_greedy_output(capsys, tmp_path):
    text = "Where is the station?"
    data = explain_json(capsys, tmp_path, MODELS / "en-es", text, "--only", "logits")
    cfg, params, tok = loading.load(MODELS / "en-es")
    src = tok.encode_for_model(text)[0]
    step = R.next_token_logits(params, cfg, src)
    ids = greedy(step, [tok.bos_id], cfg.max_len, tok.eos_id, cfg.max_len).ids
    assert data["result"]["kind"] == "text"
    assert data["result"]["text"] == tok.decode(ids[1:])
    assert data["tokens"]["decoder"]["ids"] == ids
    assert "stopped at EOS" in data["result"]["summary"]


def test_decoder_result_is_the_most_likely_next_token(capsys, tmp_path, models):
    data = explain_json(capsys, tmp_path, models / "dec", "to be", "--only", "logits")
    cfg, params, tok = loading.load(models / "dec")
    probs = R.softmax(R.forward(params, cfg, tok.encode("to be"))[-1])
    r = data["result"]
    assert r["kind"] == "next token" and r["id"] == int(probs.argmax())
    assert r["probability"] == pytest.approx(float(probs.max()), abs=1e-12)
    assert f"{probs.max():.4f}" in r["summary"]


def test_generated_result_is_the_whole_text(capsys, tmp_path, models):
    data = explain_json(capsys, tmp_path, models / "dec", "to", "--max-new-tokens", "4",
                        "--only", "logits")  # fmt: skip
    cfg, params, tok = loading.load(models / "dec")
    ids = greedy(R.next_token_logits(params, cfg), tok.encode("to"), 4, tok.eos_id, cfg.max_len)
    assert data["result"]["text"] == tok.decode(ids.ids)
    assert data["result"]["ids"] == ids.new_ids


def test_classifier_result_is_the_class_with_its_probability(capsys, tmp_path, models):
    data = explain_json(capsys, tmp_path, models / "enc", "to be or", "--only", "logits")
    cfg, params, tok = loading.load(models / "enc")
    probs = R.softmax(R.classify(params, cfg, tok.encode("to be or")))
    r = data["result"]
    k = int(probs.argmax())
    assert r["kind"] == "class" and r["class"] == k and r["label"] == str(k)  # no names saved
    np.testing.assert_allclose(list(r["probabilities"].values()), probs, rtol=0, atol=1e-12)
    assert r["summary"] == f"class {k} with probability {probs[k]:.4f}"


def test_encoder_result_is_the_pooled_embedding(capsys, tmp_path, models):
    torch = pytest.importorskip("torch")
    from glassformer.torch_model import from_params, sentence_embeddings

    data = explain_json(capsys, tmp_path, models / "emb", "to be or", "--only", "output")
    cfg, params, tok = loading.load(models / "emb")
    model = from_params(cfg, params).eval()
    with torch.no_grad():
        e = sentence_embeddings(model, torch.tensor([tok.encode("to be or")]))[0].numpy()
    r = data["result"]
    assert r["kind"] == "embedding" and f"{len(e)} dims" in r["summary"]
    np.testing.assert_allclose(r["embedding"], e, rtol=0, atol=1e-10)


# -- the HTML report ----------------------------------------------------------------------------


def test_html_report_opens_with_the_tokens_and_closes_with_the_result(capsys, tmp_path):
    page_file = tmp_path / "r.html"
    run(capsys, "explain", MODELS / "en-es", "¿Dónde está?", "--html", page_file, "--layers", "0")
    page = page_file.read_text(encoding="utf-8")
    sections = re.findall(r'<section id="gf-([a-z]+)">', page)
    assert sections[0] == "tokens" and sections[-1] == "result"
    tokens = section(page, "tokens")
    cells = re.findall(r"<span class='tokid'>(.*?)</small></span>", tokens)
    chips = [html.unescape(re.sub("<[^>]+>", "", c)) for c in cells]  # token then id
    assert chips and "▁" not in tokens
    _, _, tok = loading.load(MODELS / "en-es")
    ids = tok.encode_for_model("¿Dónde está?")[0]
    readable = display_tokens(tok.tokens(ids), display_kind(tok))
    assert chips[: len(ids)] == [f"{w}{i}" for w, i in zip(readable, ids, strict=True)]
    result = section(page, "result")
    assert "class='result'" in result and "stopped at EOS" in result


def test_html_classifier_result_shows_every_class(capsys, tmp_path, models):
    page_file = tmp_path / "r.html"
    run(capsys, "explain", models / "enc", "to be or", "--html", page_file)
    result = section(page_file.read_text(encoding="utf-8"), "result")
    assert "with probability" in result and "<th>0</th>" in result and "<th>1</th>" in result


def test_embed_json_has_readable_tokens_beside_the_raw_ones(capsys, models):
    out, _ = run(capsys, "embed", models / "emb", "to be", "or not", "--engine", "reference",
                 "--json")  # fmt: skip
    items = json.loads(out)["embeddings"]
    for item in items:
        assert joined(item["tokens_readable"]).replace(" ", "") == item["text"].replace(" ", "")
        assert len(item["tokens_readable"]) == len(item["tokens"]) == len(item["ids"])
