"""`glassformer classify`: the class of each text from an encoder classifier, with its
probability, by either engine; the class names trained into the checkpoint (labels.json), kept by
export. Oracle: the reference engine's softmax of the classifier's logits, run here directly."""

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import reference as R  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import CheckpointError  # noqa: E402
from glassformer.formats import loading  # noqa: E402

TEXTS = ["Where is the station?", "¿Dónde está la estación?", "I like it.", "Me gusta."]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def clf(tmp_path_factory):
    """A tiny language-id classifier, trained a few steps on shipped English-Spanish pairs."""
    from glassformer import data as D

    d = tmp_path_factory.mktemp("clf")
    pairs = d / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in D.read_pairs("eng-spa")[3000:3300]))
    assert main(["train", "classify", "--out", str(d / "clf"), "--data", str(pairs), "--valid",
                 str(pairs), "--vocab-size", "300", "--quiet", "--set", "d_model=16", "--set",
                 "n_heads=2", "--set", "d_ff=32", "--set", "max_steps=3", "--set",
                 "eval_interval=3", "--set", "eval_iters=1"]) == 0  # fmt: skip
    return d / "clf"


def oracle(ck, texts):
    """Each text's class probabilities from the reference engine, run directly."""
    cfg, params, tok = loading.load(ck)
    return np.stack([R.softmax(R.classify(params, cfg, tok.encode_for_model(t)[0])) for t in texts])


def test_training_stores_the_class_names(clf):
    assert json.loads((clf / weights.LABELS_FILE).read_text()) == ["English", "Spanish"]
    cfg, _, _ = loading.load(clf)
    assert loading.class_names(clf, cfg) == ["English", "Spanish"]


@pytest.mark.parametrize(("engine", "tol"), [("reference", 1e-12), ("torch", 1e-5)])
def test_one_line_per_text_with_the_engines_probability(capsys, clf, engine, tol):
    code, out, err = run(capsys, "classify", clf, *TEXTS, "--engine", engine)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == len(TEXTS)
    p = oracle(clf, TEXTS)
    for line, row in zip(lines, p, strict=True):
        label, prob = line.split("\t")
        assert label == ["English", "Spanish"][int(row.argmax())]
        assert float(prob) == pytest.approx(row.max(), abs=max(tol, 5e-5))  # printed to 4 places


@pytest.mark.parametrize(("engine", "tol"), [("reference", 1e-12), ("torch", 1e-5)])
def test_json_lines_hold_every_class_probability(capsys, clf, engine, tol):
    code, out, _ = run(capsys, "classify", clf, *TEXTS, "--engine", engine, "--json")
    assert code == 0
    items = [json.loads(line) for line in out.splitlines()]
    p = oracle(clf, TEXTS)
    for item, text, row in zip(items, TEXTS, p, strict=True):
        assert item["text"] == text and item["class"] == int(row.argmax())
        assert item["label"] == ["English", "Spanish"][item["class"]]
        np.testing.assert_allclose(list(item["probabilities"].values()), row, rtol=0, atol=tol)
        assert item["probability"] == pytest.approx(row.max(), abs=tol)
        readable = "".join(item["tokens_readable"])
        if text.isascii():  # (a piece that is part of a UTF-8 character reads <0xNN>)
            assert readable.replace("␣", " ") == text


def test_input_file_and_arguments_combine_and_blank_lines_stay_aligned(capsys, clf, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text(f"{TEXTS[1]}\n\n{TEXTS[2]}\n", encoding="utf-8")
    code, out, _ = run(capsys, "classify", clf, TEXTS[0], "--input", f, "--engine", "reference")
    assert code == 0
    lines = out.split("\n")[:-1]
    assert len(lines) == 4 and lines[2] == ""
    alone = run(capsys, "classify", clf, TEXTS[0], TEXTS[1], TEXTS[2], "--engine", "reference")
    assert [x for x in lines if x] == alone[1].splitlines()
    code, out, _ = run(capsys, "classify", clf, "--input", f, "--json", "--engine", "reference")
    assert out.splitlines()[1] == "null"


def test_batched_torch_equals_one_at_a_time(capsys, clf):
    """Padding in a batch changes nothing: the batch of all texts, and each text alone."""
    together = run(capsys, "classify", clf, *TEXTS, "--engine", "torch", "--json")[1].splitlines()
    for text, line in zip(TEXTS, together, strict=True):
        alone = run(capsys, "classify", clf, text, "--engine", "torch", "--json")[1]
        a, b = json.loads(alone), json.loads(line)
        np.testing.assert_allclose(
            list(a["probabilities"].values()), list(b["probabilities"].values()), atol=1e-6
        )


def test_export_keeps_the_class_names_and_without_them_classes_are_numbers(capsys, clf, tmp_path):
    out = tmp_path / "small"
    assert run(capsys, "export", clf, out)[0] == 0
    assert json.loads((out / weights.LABELS_FILE).read_text()) == ["English", "Spanish"]
    bare = tmp_path / "bare"
    shutil.copytree(clf, bare)
    (bare / weights.LABELS_FILE).unlink()
    code, text, _ = run(capsys, "classify", bare, TEXTS[0], "--engine", "reference")
    k = int(oracle(clf, TEXTS[:1])[0].argmax())
    assert code == 0 and text.split("\t")[0] == str(k)


def test_explain_ends_with_the_named_class(capsys, clf, tmp_path):
    f = tmp_path / "e.json"
    assert run(capsys, "explain", clf, TEXTS[1], "--json", f)[0] == 0
    result = json.loads(f.read_text())["result"]
    p = oracle(clf, TEXTS[1:2])[0]
    assert result["label"] == ["English", "Spanish"][int(p.argmax())]
    assert result["summary"] == f"class {result['label']} with probability {p.max():.4f}"


def test_class_names_are_checked_when_saved_and_read(tmp_path, clf):
    cfg, params, tok = loading.load(clf)
    with pytest.raises(CheckpointError, match="one distinct name per class"):
        weights.save(tmp_path / "x", cfg, params, tokenizer=tok, labels=["A", "B", "C"])
    with pytest.raises(CheckpointError, match="one distinct name per class"):
        weights.save(tmp_path / "x", cfg, params, tokenizer=tok, labels=["A", "A"])
    with pytest.raises(CheckpointError, match="non-empty strings"):
        weights.save(tmp_path / "x", cfg, params, tokenizer=tok, labels=["A", 1])
    assert not (tmp_path / "x").exists()
    weights.save(tmp_path / "y", cfg, params, tokenizer=tok, labels=["en", "es"])
    assert weights.load_labels(tmp_path / "y", cfg) == ["en", "es"]
