"""`glassformer.load(...)` gives a Model whose every method gives exactly what the corresponding
command prints, command by command: the oracle of each test is the command line's own output
(in process, through `glassformer.cli.main`), for the shipped char-lm and en-es, a classifier,
a Hugging Face GPT-2 and BERT folder (random weights, made by transformers) and a preset.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import glassformer
from glassformer import weights
from glassformer.cli import main
from glassformer.cli.flags import said as on_the_command_line
from glassformer.errors import GlassformerError, OutputExists

ROOT = Path(__file__).resolve().parents[1]
CHAR, ENES = str(ROOT / "models" / "char-lm"), str(ROOT / "models" / "en-es")


def cli(capsys, *argv) -> tuple[str, str]:
    """(stdout, stderr) of one command, which must succeed."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def refusal(capsys, *argv) -> str:
    """The one error line of a refused command, without its `glassformer: error: ` prefix."""
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0].removeprefix("glassformer: error: ")


def notes(err: str) -> list[str]:
    return [line.removeprefix("glassformer: note: ") for line in err.splitlines()]


@pytest.fixture(scope="module")
def char():
    return glassformer.load(CHAR)


@pytest.fixture(scope="module")
def enes():
    return glassformer.load(ENES)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    d = tmp_path_factory.mktemp("clf")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 20)
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer",
                 "word", "--corpus", str(corpus), "--seed", "3"]) == 0  # fmt: skip
    cfg, params, tok = weights.load(d / "enc")
    weights.save(d / "named", cfg, params, tokenizer=tok, labels=["yes", "no"])
    return str(d / "named")


# -- generate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_new_tokens": 12},
        {"temperature": 0.8, "seed": 5, "max_new_tokens": 10},
        {"strategy": "sample", "top_k": 3, "seed": 1, "max_new_tokens": 8},
        {"beam_width": 3, "max_new_tokens": 6},
    ],
)
def test_generate_is_what_the_command_prints(capsys, options):
    flags = [x for k, v in options.items() for x in (f"--{k.replace('_', '-')}", v)]
    out, err = cli(capsys, "generate", CHAR, "To be", *flags)
    m = glassformer.load(CHAR)  # its own notes
    assert m.generate("To be", **options) == out.rstrip("\n")
    assert [on_the_command_line(n) for n in m.notes] == notes(
        err
    )  # the command line's words for its notes
    assert not [n for n in m.notes if "--" in n]  # and Python's for the Model's


def test_generate_of_an_encoder_decoder_and_of_lines(capsys, tmp_path, enes):
    out, _ = cli(capsys, "generate", ENES, "Hello world.")
    assert enes.generate("Hello world.") == out.rstrip("\n")
    lines = tmp_path / "in.txt"
    lines.write_text("To be\n\nor not\n")
    out, _ = cli(capsys, "generate", CHAR, "--input", lines, "--max-new-tokens", "5")
    m = glassformer.load(CHAR)
    assert m.generate(["To be", "", "or not"], max_new_tokens=5) == out.split("\n")[:3]


def test_generate_refuses_as_the_command_does(capsys, char):
    for options, argv in [
        ({"temperature": 0.5, "beam_width": 2}, ["--temperature", "0.5", "--beam-width", "2"]),
        ({"strategy": "greedy", "top_k": 2}, ["--strategy", "greedy", "--top-k", "2"]),
        ({"strategy": "beam", "beam_width": 10**6}, ["--strategy", "beam", "--beam-width", 10**6]),
    ]:
        said = refusal(capsys, "generate", CHAR, "To be", *argv)
        with pytest.raises(GlassformerError) as e:
            char.generate("To be", **options)
        assert on_the_command_line(e.value) == said and "--" not in str(e.value)
    with pytest.raises(GlassformerError) as e:
        char.generate("   ")
    assert on_the_command_line(e.value) == refusal(
        capsys, "generate", CHAR, "   "
    ) and "--" not in str(e.value)


# -- translate ------------------------------------------------------------------------------------


def test_translate_is_what_the_command_prints(capsys, enes):
    sentences = ["Hello world.", "How are you?", "I like the house."]
    out, _ = cli(capsys, "translate", ENES, *sentences)
    assert enes.translate(sentences) == out.rstrip("\n").split("\n")
    assert enes.translate(sentences[0]) == out.split("\n")[0]
    out, _ = cli(capsys, "translate", ENES, "--beam", "1", sentences[1])
    assert enes.translate(sentences[1], beam=1) == out.rstrip("\n")
    out, _ = cli(capsys, "translate", ENES, "--n-best", "3", sentences[2])
    best = enes.translate(sentences[2], n_best=3)
    shown = [f"1\t{c.score:.4f}\t{c.logprob:.4f}\t{c.text}" for c in best]
    assert shown == out.rstrip("\n").split("\n")
    said = refusal(capsys, "translate", ENES, "--beam", "2", "--n-best", "3", "x")
    with pytest.raises(GlassformerError, match=None) as e:
        enes.translate("x", beam=2, n_best=3)
    assert on_the_command_line(e.value) == said and "--" not in str(e.value)
    with pytest.raises(GlassformerError) as e:
        glassformer.load(CHAR).translate("x")
    assert on_the_command_line(e.value) == refusal(
        capsys, "translate", CHAR, "x"
    ) and "--" not in str(e.value)


# -- encoders -------------------------------------------------------------------------------------


def test_classify_and_embed_are_what_the_commands_print(capsys, classifier):
    m = glassformer.load(classifier)
    texts = ["to be or not", "the question"]
    out, _ = cli(capsys, "classify", classifier, *texts, "--json")
    rows = [json.loads(line) for line in out.strip().splitlines()]
    got = m.classify(texts)
    for row, r in zip(rows, got, strict=True):
        assert r.to_dict() == {
            k: row[k] for k in ("label", "class", "probability", "probabilities")
        }
        assert r.label in ("yes", "no") and r.index == row["class"]
    out, _ = cli(capsys, "classify", classifier, texts[0])
    assert out == f"{got[0].label}\t{got[0].probability:.4f}\n"
    out, _ = cli(capsys, "embed", classifier, *texts, "--json")
    E = np.array([e["embedding"] for e in json.loads(out)["embeddings"]])
    np.testing.assert_array_equal(m.embed(texts), E)
    out, _ = cli(capsys, "embed", classifier, texts[1], "--json")
    np.testing.assert_array_equal(m.embed(texts[1]), json.loads(out)["embeddings"][0]["embedding"])
    with pytest.raises(GlassformerError) as e:
        glassformer.load(CHAR).classify("to be")
    assert on_the_command_line(e.value) == refusal(
        capsys, "classify", CHAR, "to be"
    ) and "--" not in str(e.value)


# -- looking inside -------------------------------------------------------------------------------


def _explain_json(capsys, *argv) -> dict:
    out, _ = cli(capsys, "explain", *argv, "--json", "-")
    return json.loads(out)


def test_a_run_is_what_explain_writes(capsys, enes):
    data = _explain_json(capsys, ENES, "Hello world.")
    run = enes.run("Hello world.")
    assert [s["name"] for s in data["steps"]] == run.trace.names()
    for s in data["steps"][::7]:
        np.testing.assert_allclose(np.asarray(s["values"], dtype=float), run.trace[s["name"]])
    assert enes.result(run).to_dict() == data["result"]
    assert enes.trace("Hello world.").names() == run.trace.names()
    readable = {k: v["readable"] for k, v in data["tokens"].items()}
    assert enes.runtime.readable(run.src) == readable["encoder"]
    assert enes.tokens("Hello world.") == readable["encoder"]


def test_a_decoder_run_with_generation_and_its_ablation(capsys, char):
    name = "decoder.0.self_attn.head0"
    data = _explain_json(capsys, CHAR, "To be", "--max-new-tokens", "4", "--ablate", name)
    run = char.run("To be", decoding=glassformer.Decoding.settle(max_new_tokens=4))
    told = char.result(run).to_dict()  # its summary in Python's words; the CLI writes its flags
    assert {**told, "summary": on_the_command_line(told["summary"])} == data["result"]
    assert char.ablate(run, [name]).to_dict() == data["interventions"]["ablation"]
    assert (
        char.ablate("To be", name).to_dict()
        == _explain_json(capsys, CHAR, "To be", "--ablate", name)["interventions"]["ablation"]
    )


def test_patching_lens_and_attribution_are_what_the_commands_write(capsys, enes, char):
    data = _explain_json(capsys, ENES, "Hello world.", "--patch-from", "Good night.")
    assert enes.patch("Hello world.", "Good night.").to_dict() == data["interventions"]["patching"]
    out, _ = cli(capsys, "lens", CHAR, "To be or", "--dla", "t", "--json", "-")
    assert out == char.lens("To be or", dla="t").to_json() + "\n"  # byte for byte
    out, _ = cli(capsys, "attribute", CHAR, "To be", "--max-new-tokens", "2", "--json", "-")
    assert out == char.attribute("To be", max_new_tokens=2).to_json() + "\n"
    with pytest.raises(GlassformerError) as e:
        char.lens("To be", versus="t")
    assert on_the_command_line(e.value) == refusal(
        capsys, "lens", CHAR, "To be", "--versus", "t"
    ) and "--" not in str(e.value)


# -- folders, presets, writing --------------------------------------------------------------------


def test_a_hugging_face_gpt2_and_bert_folder(capsys, tmp_path):
    transformers = pytest.importorskip("transformers")
    from glassformer.tokenizer.bpe import BPETokenizer

    folder = tmp_path / "gpt2"
    bpe = BPETokenizer.train(["to be or not to be that is the question " * 3], vocab_size=300)
    V = bpe.vocab_size
    config = transformers.GPT2Config(vocab_size=V, n_positions=24, n_embd=24, n_layer=2, n_head=3)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    (folder / "tokenizer.json").write_text(bpe.hf_json)
    m = glassformer.load(folder)
    assert m.family == "gpt2" and "Hugging Face gpt2" in repr(m)
    out, _ = cli(capsys, "generate", folder, "to be", "--max-new-tokens", "5")
    assert m.generate("to be", max_new_tokens=5) == out.rstrip("\n")
    bert = tmp_path / "bert"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "to", "be", "or", "not"]
    bc = transformers.BertConfig(vocab_size=len(words), hidden_size=24, num_attention_heads=3,
                                 num_hidden_layers=1, intermediate_size=40)  # fmt: skip
    transformers.BertModel(bc).save_pretrained(bert)
    (bert / "vocab.txt").write_text("\n".join(words) + "\n")
    b = glassformer.load(bert)
    names = b.run("to be").trace.names()
    assert len(names) == len(set(names)) and "embedding" in names  # one encoder pass, pooled
    out, _ = cli(capsys, "embed", bert, "to be", "--json")
    E = np.array(json.loads(out)["embeddings"][0]["embedding"])
    np.testing.assert_array_equal(b.embed("to be"), E)


def test_a_preset_has_seeded_random_weights(tmp_path, capsys):
    m = glassformer.load("hello-world", seed=1)
    cli(capsys, "init", tmp_path / "h", "--preset", "hello-world", "--seed", "1", "--std", "0.02")
    _, params, _ = weights.load(tmp_path / "h")
    for name, value in m.params.items():
        np.testing.assert_allclose(value, params[name], rtol=1e-6, atol=1e-8)  # saved float32
    assert m.generate("hello world", max_new_tokens=3) == glassformer.load(
        "hello-world", seed=1
    ).generate("hello world", max_new_tokens=3)
    w1 = "encoder.layers.0.ffn.w1.weight"
    assert not np.array_equal(m.params[w1], glassformer.load("hello-world", seed=2).params[w1])
    with pytest.raises(GlassformerError, match="preset tiny has random weights and no tokenizer"):
        glassformer.load("tiny").generate("x")
    tiny = glassformer.load("tiny")
    assert tiny.run(ids=[1, 2, 3]).logits.shape == (3, tiny.cfg.vocab_size)


def test_save_and_export_refuse_to_replace_and_round_trip(tmp_path, enes):
    out = enes.save(tmp_path / "copy", dtype="float64")
    again = glassformer.load(out)
    for name, value in enes.params.items():
        np.testing.assert_array_equal(again.params[name], value)
    assert again.translate("Hello world.") == enes.translate("Hello world.")
    with pytest.raises(OutputExists):
        enes.save(tmp_path / "copy")
    family, folder = enes.export_hf(tmp_path / "hf")
    assert glassformer.load(folder).family == family in ("marian", "pegasus")
    with pytest.raises(OutputExists):
        enes.export_hf(tmp_path / "hf")


def test_repr_and_notebook_view(enes):
    assert "encoder-decoder" in repr(enes) and "en-es" in repr(enes)
    assert "<b>glassformer.Model</b>" in enes._repr_html_()


# -- against the engines themselves: the shared code is not its own oracle ------------------------


def test_greedy_generation_is_the_reference_engines_argmax_loop(char):
    from glassformer import reference as R

    ids = char.tokenizer.encode("To be")
    for _ in range(12):
        ids.append(int(np.argmax(R.forward(char.params, char.cfg, ids)[-1])))
    assert char.generate("To be", max_new_tokens=12) == char.tokenizer.decode(ids)
    assert "stopped after max_new_tokens=12" in char.notes


def test_an_ablation_moves_the_logits_by_what_run_with_says(char):
    from glassformer.inspect import interventions as I

    ids = char.tokenizer.encode("To be or")
    run = I.reference_run(char.params, char.cfg)
    before = run(ids)
    after = I.run_with(run, ids, I.ablate_head(1, 2))
    told = char.ablate("To be or", ["decoder.1.self_attn.head2"])
    moved = [r["max_logit_change"] for r in told.positions]
    np.testing.assert_allclose(moved, np.abs(after - before).max(axis=1), rtol=0, atol=0)
    changed = [r["changed"] for r in told.positions]
    assert changed == list(before.argmax(1) != after.argmax(1))


def test_the_explorer_tells_a_class_as_classify_does(classifier):
    from glassformer.serve import runs
    from glassformer.serve.sessions import Registry

    reg = Registry([classifier], walkthroughs=False)
    model_id = next(iter(reg.entries))
    m = reg.load(model_id)
    told = runs.output(m, runs.make_run(model_id, m, "to be or not"))
    cli_told = glassformer.load(classifier, engine="reference").classify("to be or not")
    assert (told["label"], told["class"]) == (cli_told.label, cli_told.index)
    assert told["probabilities"] == pytest.approx(cli_told.probabilities, abs=1e-12)
    assert told["label"] in ("yes", "no")


def test_evaluate_is_what_eval_prints(capsys, char, enes):
    out, _ = cli(capsys, "eval", CHAR, "--data", "tinyshakespeare", "--limit", "300")
    assert char.evaluate("tinyshakespeare", limit=300) == out.rstrip("\n")
    out, _ = cli(capsys, "eval", ENES, "--data", "eng-spa-valid", "--limit", "4", "--beam", "2")
    assert enes.evaluate("eng-spa-valid", limit=4, beam=2) == out.rstrip("\n")
