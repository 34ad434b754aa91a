"""The command line: smoke tests end to end, and one clear line for every bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import load_golden

from glassformer.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "hello"
    assert main(["init", str(path), "--preset", "hello-world", "--seed", "1"]) == 0
    return path


def test_walkthrough_hello_world_prints_the_articles_numbers(capsys):
    code, out, _ = run(capsys, "walkthrough", "hello-world")
    assert code == 0
    for text in ("68", "105.21", "4.6770e-10", "11.4639", "1.71888", "nan", "SOS"):
        assert text in out, text


def test_walkthrough_json_holds_every_step(capsys, tmp_path):
    f = tmp_path / "hw.json"
    code, out, _ = run(capsys, "walkthrough", "hello-world", "--json", str(f))
    assert code == 0 and "wrote" in out
    data = json.loads(f.read_text())
    steps = {s["name"]: s for s in data["steps"]}
    g = load_golden("rt_04_attention_div30_concat_W0.json")
    np.testing.assert_allclose(steps["div30.Z"]["values"], g["Z_printed"], atol=1e-7)
    assert steps["div30.Z"]["shape"] == [2, 4]
    assert steps["div30.Z"]["equation"]
    assert steps["head1.A"]["rows"] == ["Hello", "World"]
    naive = steps["overflow.naive.output"]["values"]
    assert naive[0][0] == "nan"  # strict JSON: NaN written as a string


def test_walkthrough_self_attention_json_to_stdout(capsys):
    code, out, _ = run(capsys, "walkthrough", "self-attention", "--json", "-")
    assert code == 0
    steps = {s["name"]: s for s in json.loads(out)["steps"]}
    g = load_golden("raschka_02_selfattention_v1.json")
    np.testing.assert_allclose(
        steps["trainable.context_2"]["values"], g["expected"]["context_vec_2_full"], atol=1e-6
    )


def test_walkthrough_self_attention_tells_the_whole_chapter(capsys):
    code, out, _ = run(capsys, "walkthrough", "self-attention")
    assert code == 0
    titles = [line.split("   ")[0] for line in out.splitlines() if line and line[0] != " "]
    new = [
        *("dropout.mask", "dropout.ones", "dropout.A", "batch.X", "causal_attention.W_query"),
        *("causal_attention.Q", "causal_attention.scores", "causal_attention.A"),
        *("causal_attention.C", "wrapper.head1.W_query", "wrapper.head1.C", "wrapper.C"),
        *("batched_matmul.a", "batched_matmul.a_aT", "batched_matmul.head0"),
        *("batched_matmul.head1", "mha.W_query", "mha.out_proj.weight", "mha.out_proj.bias"),
        *("mha.Q_split", "mha.scores", "mha.A", "mha.concat", "mha.out"),
    ]
    assert titles[titles.index("causal.A") + 1 :] == new  # after the causal mask, in order
    assert "(2, 2, 6, 6)" in out and "\n    [1, 1]\n" in out  # a 4-D tensor, matrix by matrix
    g = load_golden("raschka_08_multihead_attention.json")["expected"]["output_printed"]
    for v in g[0][0]:  # the book's first output row, to its printed 4 decimals
        assert f"{v:.4f}"[:-1] in out.split("mha.out ")[1]


def test_walkthrough_self_attention_json_holds_the_new_steps(capsys):
    code, out, _ = run(capsys, "walkthrough", "self-attention", "--json", "-")
    assert code == 0
    steps = {s["name"]: s for s in json.loads(out)["steps"]}
    for name, file in (
        ("causal_attention.C", "raschka_06_causal_attention_class.json"),
        ("wrapper.C", "raschka_07_multihead_wrapper.json"),
        ("mha.out", "raschka_08_multihead_attention.json"),
    ):
        g = load_golden(file)["expected"]
        assert steps[name]["shape"] == g["output_shape"] and steps[name]["note"]
        np.testing.assert_allclose(steps[name]["values"], g["output_full"], rtol=0, atol=1e-6)
    assert steps["mha.A"]["shape"] == [2, 2, 6, 6] and steps["mha.A"]["equation"]
    assert steps["dropout.A"]["rows"] == ["Your", "journey", "starts", "with", "one", "step"]


def test_config_prints_json_with_overrides(capsys):
    code, out, err = run(capsys, "config", "--preset", "tiny", "--set", "d_model=32")
    assert code == 0 and json.loads(out)["d_model"] == 32 and "parameters" in err


def test_generate_and_explain_end_to_end(capsys, ckpt):
    code, out, _ = run(capsys, "generate", str(ckpt), "Hello World")
    assert code == 0 and out.strip()
    assert set(out.split()) <= {"hello", "mundo", "world", "how", "?", "a", "hola", "c"}
    code, out, _ = run(
        capsys,
        "explain",
        str(ckpt),
        "Hello World",
        "--target",
        "hola mundo",
        "--only",
        "decoder.0.cross_attn.head0.A",
    )
    assert code == 0
    assert "hello" in out and "world" in out and "hola" in out  # labelled rows and columns


def test_explain_json_has_every_intermediate(capsys, ckpt, tmp_path):
    f = tmp_path / "t.json"
    code, _, _ = run(capsys, "explain", str(ckpt), "hello world", "--json", str(f))
    assert code == 0
    names = [s["name"] for s in json.loads(f.read_text())["steps"]]
    assert "encoder.5.self_attn.head1.A" in names and "probs" in names


def test_decoder_and_encoder_checkpoints(capsys, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("to be or not to be\n")
    dec = tmp_path / "dec"
    assert (
        run(
            capsys,
            "init",
            str(dec),
            "--preset",
            "tiny",
            "--tokenizer",
            "char",
            "--corpus",
            str(corpus),
        )[0]
        == 0
    )
    code, out, _ = run(capsys, "generate", str(dec), "to be", "--max-new-tokens", "5")
    assert code == 0 and out.startswith("to be") and len(out.rstrip("\n")) <= 10
    enc = tmp_path / "enc"
    assert (
        run(
            capsys,
            "init",
            str(enc),
            "--preset",
            "encoder-classifier",
            "--tokenizer",
            "word",
            "--corpus",
            str(corpus),
        )[0]
        == 0
    )
    code, out, _ = run(capsys, "explain", str(enc), "to be", "--only", "probs")
    assert code == 0 and "probs" in out


BAD = [
    (["generate", "{ck}", ""], "empty"),
    (["generate", "{ck}", "   "], "empty"),
    (["generate", "{ck}", "hello world " * 5], "max_len 8"),
    (["generate", "{ck}", "hello banana"], "'banana' is not in the vocabulary"),
    (["generate", "{missing}", "hello"], "not found"),
    (["config", "--set", "d_model=abc"], "d_model must be an integer"),
    (["config", "--set", "norm=middle"], "norm must be one of"),
    (["config", "--set", "nofield=1"], "unknown field"),
    (["init", "{tmp}/x", "--tokenizer", "char"], "needs --corpus"),
    (["init", "{tmp}/x", "--tokenizer", "char", "--corpus", "{tmp}/none.txt"], "cannot read"),
    (["generate", "{ck}", "hello", "--max-new-tokens", "0"], "at least 1"),
]


@pytest.mark.parametrize(("argv", "message"), BAD)
def test_bad_input_gives_one_line_and_nonzero_exit(capsys, ckpt, tmp_path, argv, message):
    argv = [a.format(ck=ckpt, missing=tmp_path / "missing", tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glassformer: error:"), err
    assert message in lines[0]
    assert "Traceback" not in err + out


def test_corrupt_checkpoint_from_the_command_line(capsys, ckpt, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 2])
    code, _, err = run(capsys, "generate", str(bad), "hello")
    assert code == 2 and "truncated or corrupt" in err and len(err.strip().splitlines()) == 1


def test_invalid_utf8_corpus_names_the_line(capsys, tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"fine line\nbad \xff byte\n")
    code, _, err = run(
        capsys, "init", str(tmp_path / "x"), "--tokenizer", "char", "--corpus", str(f)
    )
    assert code == 2 and "line 2" in err


def test_console_script_exits_nonzero_without_traceback(tmp_path):
    """The real process: argparse errors and library errors both exit non-zero, no traceback."""
    for argv in (["generate", str(tmp_path / "none"), "x"], ["walkthrough", "nope"]):
        r = subprocess.run(
            [sys.executable, "-m", "glassformer.cli", *argv], capture_output=True, text=True
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip()


def test_generate_engines_and_strategies_agree(capsys, ckpt):
    """Both engines decode the same text; beam width 1 and top-k 1 equal greedy."""
    outs = set()
    for extra in (
        ["--engine", "reference"],
        ["--engine", "torch"],
        ["--strategy", "beam", "--beam-width", "1"],
        ["--strategy", "sample", "--top-k", "1", "--seed", "3"],
    ):
        code, out, _ = run(capsys, "generate", str(ckpt), "hello world", *extra)
        assert code == 0
        outs.add(out)
    assert len(outs) == 1
    a = run(capsys, "generate", str(ckpt), "hello", "--strategy", "sample", "--seed", "7")[1]
    b = run(capsys, "generate", str(ckpt), "hello", "--strategy", "sample", "--seed", "7")[1]
    assert a == b
    code, _, err = run(
        capsys, "generate", str(ckpt), "hello", "--strategy", "sample", "--top-p", "2"
    )
    assert code == 2 and "top-p must be in (0, 1]" in err


def test_explain_shows_beam_and_sampling_steps(capsys, ckpt, tmp_path):
    """The report explains the decoding strategy: the beam after each step, or what the sampling
    filters kept."""
    cases = {
        "beam": (["--strategy", "beam", "--beam-width", "3"], "beam after step 0"),
        "sample": (["--strategy", "sample", "--top-k", "2", "--seed", "1"], "sampling kept 2"),
    }
    for name, (options, shown) in cases.items():
        page = tmp_path / f"{name}.html"
        argv = ["explain", str(ckpt), "hello world", *options, "--html", str(page)]
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        assert shown in page.read_text()


NO_TORCH = """
import sys
sys.modules["torch"] = None  # any `import torch` now fails, as on a machine without it
from glassformer.cli import main
codes = [main(["walkthrough", "self-attention"]), main(["init", sys.argv[1]]),
         main(["explain", sys.argv[1], "hello world", "--only", "logits"]),
         main(["generate", sys.argv[1], "hello world"]),
         main(["embed", sys.argv[1], "hello world", "--engine", "reference"]),
         main(["embed", sys.argv[1], "hello world"])]
print("codes", codes)
"""


def test_numpy_parts_work_without_torch(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(tmp_path / "ck")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "codes [0, 0, 0, 0, 0, 2]" in r.stdout
    assert "--engine torch (the default) needs PyTorch" in r.stderr


def test_translate_says_which_translations_ran_to_max_len(capsys, tmp_path):
    """The shipped translator never ends some short inputs unlike any training pair ("hmm": it
    repeats a piece up to max_len); the command says so, naming where each is, and stays quiet
    when every translation ends. Which input never ends is found with `translate_iter(cut=)`
    (tests/test_translating.py checks it against one-sentence greedy and beam search)."""
    pytest.importorskip("torch")
    from pathlib import Path

    from glassformer import inference, translating
    from glassformer.formats import loading

    en_es = Path(__file__).resolve().parents[1] / "models" / "en-es"
    cfg, params, tok = loading.load(en_es)
    candidates, cut = ["hmm", "hi", "zzz", "mmm", "ha ha ha"], set()
    model = inference.torch_engine(cfg, params)
    list(translating.translate_iter(model, tok, candidates, beam=1, cut=cut))
    assert cut, f"the shipped translator ends all of {candidates}: pick another input"
    never = candidates[min(cut)]
    f = tmp_path / "in.txt"
    f.write_text(f"Hello!\n\n{never}\n")
    code, out, err = run(capsys, "translate", str(en_es), never, "--input", str(f), "--beam", "1")
    assert code == 0, err
    first, _, blank, third, end = out.split("\n")
    assert first == third and len(first) > 40 and blank == end == ""  # a runaway translation
    assert err.count("\n") == 1 and "2 of 3 translation(s) reached the decoder's max_len 64" in err
    assert f"(sentence 1; {f}, line 3)" in err
    code, out, err = run(capsys, "translate", str(en_es), "Hello!", "--beam", "1")
    from glassformer import decoding
    from glassformer import reference as R

    step = R.next_token_logits(params, cfg, tok.encode("Hello!"))  # the float64 oracle
    limits = dict(max_new_tokens=cfg.max_len - 1, eos_id=tok.eos_id, max_len=cfg.max_len)
    oracle = tok.decode(decoding.greedy(step, [tok.bos_id], **limits).ids[1:])
    assert (code, out, err) == (0, oracle + "\n", "")
    (tmp_path / "pairs.tsv").write_text(f"Hello!\t¡Hola!\n{never}\thola\n")
    code, out, err = run(capsys, "eval", str(en_es), "--data", str(tmp_path / "pairs.tsv"))
    assert code == 0 and "| 2 sentences" in out
    assert "1 of 2 translation(s) reached the decoder's max_len 64" in err and "(pair 2)" in err


def test_translate_input_as_people_write_it(capsys, tmp_path):
    """A BOM, CRLF line ends and a blank line: one output line per input line, blanks kept."""
    pytest.importorskip("torch")
    from pathlib import Path

    en_es = Path(__file__).resolve().parents[1] / "models" / "en-es"
    f = tmp_path / "in.txt"
    f.write_bytes("\ufeffHello!\r\n\r\nThank you.\r\n".encode())
    code, out, err = run(capsys, "translate", str(en_es), "--input", str(f), "--beam", "1")
    assert code == 0, err
    lines = out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # 3 lines + the final newline
    code, alone, _ = run(capsys, "translate", str(en_es), "Hello!", "Thank you.", "--beam", "1")
    assert alone.split("\n")[:2] == [lines[0], lines[2]]  # the BOM changed nothing


def test_translate_n_best_prints_each_sentences_candidates(capsys, tmp_path):
    """--n-best K: K lines a sentence, N<TAB>score<TAB>log-probability<TAB>text, N the input line
    (blank lines skipped, still counted), the first candidate the plain translation, ranked by
    score = log-probability / tokens; more than the beam is refused in one line."""
    pytest.importorskip("torch")
    from pathlib import Path

    from glassformer.formats import loading

    en_es = Path(__file__).resolve().parents[1] / "models" / "en-es"
    f = tmp_path / "in.txt"
    f.write_text("Thank you.\n\nGood morning.\n")
    code, plain, err = run(capsys, "translate", str(en_es), "Hello!", "--input", str(f))
    assert code == 0, err
    code, out, err = run(
        capsys, "translate", str(en_es), "Hello!", "--input", str(f), "--n-best", "3"
    )
    assert (code, err) == (0, "")
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[0] for r in rows] == ["1"] * 3 + ["2"] * 3 + ["4"] * 3
    assert [rows[i][3] for i in (0, 3, 6)] == [t for t in plain.splitlines() if t]
    tok = loading.load(en_es)[2]
    for n in range(3):
        scores = [float(r[1]) for r in rows[3 * n : 3 * n + 3]]
        assert scores == sorted(scores, reverse=True)
        assert len({r[3] for r in rows[3 * n : 3 * n + 3]}) == 3
    for r in rows:
        n_tokens = len(tok.encode(r[3])) + 1  # and the end token
        assert float(r[1]) == pytest.approx(float(r[2]) / n_tokens, abs=1e-3)
    code, out, err = run(capsys, "translate", str(en_es), "Hello!", "--n-best", "5")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "--n-best 5 is more than the beam width 4" in err and "--beam 5" in err
