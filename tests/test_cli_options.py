"""No option is ever ignored: decoding options imply their strategy (said in a note) or are
refused; options that do nothing for a model are refused; mistyped commands, options, choices,
--set keys and --only names get the nearest valid one; options may come anywhere among positional
arguments; --version and bare `glassformer`; --json FILE writes only the file, '-' is stdout."""

import json
import subprocess
import sys

import pytest

from glassformer import reference as R
from glassformer.cli import main
from glassformer.cli.decoding import STRATEGY_RULE
from glassformer.cli.flags import said
from glassformer.decoding import beam_search, sample


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    corpus = d / "c.txt"
    corpus.write_text("to be or not to be, that is the question\n")
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char", "--corpus",
                 str(corpus)]) == 0  # fmt: skip
    assert main(["init", str(d / "enc"), "--preset", "encoder-classifier", "--tokenizer", "word",
                 "--corpus", str(corpus)]) == 0  # fmt: skip
    return d


# -- the decoding strategy: one rule ------------------------------------------------------------


def test_the_rule_is_in_the_help(capsys):
    for command in ("generate", "explain"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0
        rule = said(STRATEGY_RULE)  # in the command line's words: its flags
        assert "".join(rule.split()) in "".join(out.split())  # however it is wrapped


def generated(capsys, models, *options):
    code, out, err = run(capsys, "generate", models / "hello", "hello world", "--engine",
                         "reference", *options)  # fmt: skip
    assert code == 0, err
    return out, err


def oracle(models, decode, **kw) -> str:
    """The same decoding run directly over the reference engine (the oracle for the CLI)."""
    from glassformer.formats import loading

    cfg, params, tok = loading.load(models / "hello")
    src = tok.encode("hello world")
    step = R.next_token_logits(params, cfg, src)
    ids = decode(step, [tok.bos_id], cfg.max_len, eos_id=tok.eos_id, max_len=cfg.max_len, **kw)
    return tok.decode(ids.ids[1:]) + "\n"


@pytest.mark.parametrize(
    ("options", "implied"),
    [
        (["--temperature", "0.7"], "sample"),
        (["--top-k", "3"], "sample"),
        (["--top-p", "0.9"], "sample"),
        (["--seed", "4"], "sample"),
        (["--beam-width", "3"], "beam"),
        (["--length-penalty", "0.5"], "beam"),
    ],
)
def test_a_strategy_option_alone_implies_its_strategy_and_says_so(capsys, models, options, implied):
    if implied == "sample" and "--seed" not in options:
        options = [*options, "--seed", "4"]  # the same draws for both runs
    out, err = generated(capsys, models, *options)
    told = " and ".join(o for o in options if o.startswith("--"))
    assert f"glassformer: note: {told} given: decoding with --strategy {implied}" in err
    same, _ = generated(capsys, models, "--strategy", implied, *options)
    assert out == same  # exactly what the explicit strategy does


def test_implied_sampling_and_beam_decode_as_the_library_does(capsys, models):
    out, _ = generated(capsys, models, "--top-k", "2", "--seed", "9")
    assert out == oracle(models, sample, top_k=2, seed=9)
    out, _ = generated(capsys, models, "--beam-width", "3", "--length-penalty", "0.6")
    assert out == oracle(models, beam_search, width=3, length_penalty=0.6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--strategy", "greedy", "--temperature", "0.5"],
            "--temperature does nothing with --strategy greedy; drop it, or use --strategy sample",
        ),  # fmt: skip
        (["--strategy", "beam", "--top-p", "0.5"], "--top-p does nothing with --strategy beam"),
        (
            ["--strategy", "sample", "--beam-width", "2"],
            "--beam-width does nothing with --strategy sample",
        ),  # fmt: skip
        (["--strategy", "greedy", "--length-penalty", "2"], "--length-penalty does nothing"),
        (
            ["--seed", "1", "--beam-width", "2"],
            "--seed is a sampling option and --beam-width a "
            "beam search option; choose one --strategy",
        ),  # fmt: skip
    ],
)
def test_an_option_of_another_strategy_is_refused(capsys, models, options, message):
    code, out, err = run(capsys, "generate", models / "hello", "hello world", *options)
    assert code == 2 and out == "" and message in one_error(err)


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        ("enc", ["--target", "x"], "--target does nothing for an encoder"),
        ("enc", ["--max-new-tokens", "3"], "--max-new-tokens does nothing for an encoder"),
        ("enc", ["--top-k", "3"], "--top-k does nothing for an encoder"),
        ("dec", ["--target", "x"], "--target is the decoder text of an encoder-decoder"),
        ("dec", ["--strategy", "beam"], "only with --max-new-tokens N"),
        ("dec", ["--seed", "1"], "--seed chooses how to generate"),
        ("hello", ["--target", "hola", "--beam-width", "2"], "but --target gives it"),
        ("hello", ["--target", "hola", "--max-new-tokens", "2"], "but --target gives it"),
        ("hello", ["--find-nan", "--json", "x.json"], "--json does nothing with it"),
        ("hello", ["--find-nan", "--only", "A"], "--only does nothing with it"),
    ],
)
def test_explain_refuses_what_would_do_nothing(capsys, models, model, options, message):
    text = "hello world" if model == "hello" else "to be"
    code, out, err = run(capsys, "explain", models / model, text, *options)
    assert code == 2 and out == "" and message in one_error(err)


def test_walkthrough_refuses_what_would_do_nothing(capsys, tmp_path):
    code, _, err = run(capsys, "walkthrough", "self-attention", "--seed", "3")
    assert code == 2 and "--seed does nothing in the self-attention walkthrough" in one_error(err)
    code, _, err = run(capsys, "walkthrough", "hello-world", "--all", "--json", tmp_path / "x")
    assert code == 2 and "--all chooses the printed steps" in one_error(err)
    assert not (tmp_path / "x").exists()


def test_init_eval_and_train_refuse_what_would_do_nothing(capsys, models, tmp_path):
    code, _, err = run(capsys, "init", tmp_path / "x", "--corpus", models / "c.txt")
    assert code == 2 and "--corpus does nothing with the article tokenizer" in one_error(err)
    pytest.importorskip("torch")
    code, _, err = run(capsys, "eval", models / "dec", "--data", models / "c.txt", "--beam", "2")
    assert code == 2 and "--beam is for translation" in one_error(err)
    train = ["train", "lm", "--out", tmp_path / "o", "--data", models / "c.txt"]
    for extra, message in (
        (["--valid", models / "c.txt"], "--valid is for translate and classify"),
        (["--vocab-size", "50"], "--vocab-size does nothing with the char tokenizer"),
        (["--init", models / "dec", "--tokenizer", "word"], "--tokenizer does nothing with --init"),
    ):
        code, _, err = run(capsys, *train, *extra)
        assert code == 2 and message in one_error(err)
    assert not (tmp_path / "o").exists()


# -- suggestions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["genrate", "x", "y"], "did you mean generate?"),
        (["explian", "x", "y"], "did you mean explain?"),
        (["generate", "{hello}", "hi", "--max-new-tokns", "3"], "did you mean --max-new-tokens?"),
        (["generate", "{hello}", "hi", "--strategy", "bem"], "did you mean beam?"),
        (["translate", "{hello}", "hi", "--beem", "2"], "did you mean --beam?"),
        (["config", "--set", "d_modle=4"], "did you mean d_model?"),
        (["train", "lm", "--out", "{tmp}/o", "--set", "lerning_rate=1"], ""),
        (["train", "lm", "--out", "{tmp}/o", "--set", "max_step=1"], "did you mean max_steps?"),
        (["explain", "{hello}", "hello", "--only", "crossattn"], "closest: cross_attn"),
    ],
)
def test_the_nearest_valid_name_is_suggested(capsys, models, tmp_path, argv, message):
    if argv[0] == "train":
        pytest.importorskip("torch")
    argv = [a.format(hello=models / "hello", tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    line = one_error(err)
    assert message in line
    if not message:
        assert "did you mean" not in line  # nothing close: no guess


def test_only_filters_every_report_and_an_unknown_name_lists_the_closest(capsys, models, tmp_path):
    f = tmp_path / "t.json"
    code, out, err = run(capsys, "explain", models / "hello", "hello world", "--only",
                         "cross_attn.head0.A", "--json", f)  # fmt: skip
    assert code == 0
    names = [s["name"] for s in json.loads(f.read_text())["steps"]]
    assert names and all("cross_attn.head0.A" in n for n in names)
    code, _, err = run(capsys, "explain", models / "hello", "hello world", "--only", "head9.A")
    line = one_error(err)
    assert "no step name contains it; closest:" in line and "head0.A" in line


# -- where options may go, --version, bare glassformer ------------------------------------------


def test_options_may_come_among_positional_arguments(capsys, models):
    a = run(capsys, "generate", models / "hello", "hello world", "--max-new-tokens", "3")
    b = run(capsys, "generate", "--max-new-tokens", "3", models / "hello", "hello world")
    c = run(capsys, "generate", models / "hello", "--max-new-tokens", "3", "hello world")
    assert a == b == c and a[0] == 0


def test_an_option_after_double_dash_is_text_and_the_error_says_so(capsys, models):
    code, _, err = run(capsys, "generate", models / "hello", "--", "hi", "--max-new-tokens", "2")
    assert code == 2 and "--max-new-tokens came after '--'" in one_error(err)


def test_translate_takes_options_between_sentences(capsys, tmp_path):
    pytest.importorskip("torch")
    ck = tmp_path / "hello"
    assert main(["init", str(ck), "--preset", "hello-world", "--seed", "1"]) == 0
    capsys.readouterr()
    a = run(capsys, "translate", ck, "--beam", "1", "hello world", "world")
    b = run(capsys, "translate", ck, "hello world", "--beam", "1", "world")
    c = run(capsys, "translate", ck, "hello world", "world", "--beam", "1")
    assert a == b == c and a[0] == 0 and len(a[1].splitlines()) == 2


def test_version_is_the_package_metadata(capsys):
    from importlib import metadata

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"glassformer {metadata.version('glassformer')}\n"


def test_bare_glassformer_prints_help_to_stdout_and_succeeds():
    r = subprocess.run([sys.executable, "-m", "glassformer.cli"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("usage: glassformer") and "generate" in r.stdout


# -- where reports go ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["walkthrough", "explain"])
def test_json_to_a_file_prints_one_line(capsys, models, tmp_path, command):
    f = tmp_path / "r.json"
    argv = ["walkthrough", "hello-world"] if command == "walkthrough" else [
        "explain", models / "hello", "hello world", "--target", "hola mundo"]  # fmt: skip
    code, out, _ = run(capsys, *argv, "--json", f)
    n = len(json.loads(f.read_text())["steps"])
    assert code == 0 and out == f"wrote {n} steps to {f}\n"


def test_json_and_html_to_stdout(capsys, models, tmp_path):
    code, out, err = run(capsys, "explain", models / "hello", "hello world", "--json", "-")
    assert code == 0 and "steps" in json.loads(out)
    page = tmp_path / "p.html"
    code, out, err = run(capsys, "explain", models / "hello", "hello world", "--json", "-",
                         "--html", page)  # fmt: skip
    assert code == 0 and "steps" in json.loads(out)  # stdout holds the JSON only ...
    assert err.startswith(f"wrote {page} (")  # ... and what was written is said on stderr
    code, out, err = run(capsys, "walkthrough", "hello-world", "--html", "-")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    code, out, err = run(capsys, "walkthrough", "hello-world", "--html", "-", "--json", "-")
    assert code == 2 and "both write to stdout" in one_error(err)
    code, out, err = run(capsys, "walkthrough", "hello-world", "--png", "-")
    assert code == 2 and "give a folder" in one_error(err)
