"""Batched generation (`inference.greedy_prompts`, `generate --input FILE`): the oracle is
generation one prompt at a time (`decoding.greedy` over `step_fn`, and `generate TEXT`)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import decoding  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.inference import greedy_prompts  # noqa: E402
from glassformer.torch_model import Transformer  # noqa: E402
from glassformer.torch_steps import step_fn  # noqa: E402


def decoder(positions: str) -> Transformer:
    cfg = Config(
        arch="decoder",
        vocab_size=23,
        d_model=16,
        n_heads=2,
        head_dim=8,
        d_ff=32,
        n_encoder_layers=0,
        n_decoder_layers=2,
        max_len=12,
        positions=positions,
    )
    torch.manual_seed(0)
    return Transformer(cfg).double().eval()


@pytest.mark.parametrize("window", [True, False])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none", "rotary"])
def test_batched_greedy_equals_one_prompt_at_a_time(positions, window):
    """Prompts of 1 to 15 tokens (past max_len 12: a sliding window, or no room), EOS 5."""
    model = decoder(positions)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 23, size=k).tolist() for k in (1, 3, 7, 12, 15, 2, 11)]
    got = greedy_prompts(model, prompts, 20, eos_id=5, window=window)
    max_len = None if window else model.cfg.max_len
    step = lambda: step_fn(model, window=window)  # noqa: E731
    want = [decoding.greedy(step(), p, 20, eos_id=5, max_len=max_len).new_ids for p in prompts]
    assert got == want


def test_batch_composition_changes_nothing():
    model = decoder("learned")
    prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10], [11, 12]]
    together = greedy_prompts(model, prompts, 10)
    alone = [greedy_prompts(model, [p], 10)[0] for p in prompts]
    assert together == alone


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    corpus = d / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\nwhat is it\n" * 40)
    assert main(["init", str(d / "dec"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(corpus), "--seed", "3"]) == 0  # fmt: skip
    assert main(["init", str(d / "hello"), "--preset", "hello-world", "--seed", "1"]) == 0
    return d


def run(capsys, argv) -> list[str]:
    assert main(argv) == 0
    return capsys.readouterr().out.split("\n")[:-1]


def escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", ["dec", "hello"])
def test_generate_input_prints_what_generate_text_prints(models, tmp_path, capsys, model, dtype):
    """One output line per input line, in order, blank for blank; each line what `generate
    TEXT` prints for it alone (newlines escaped), in batches smaller than the file."""
    lines = ["to be", "", "what is", "the question", "or not to be, that"]
    if model == "hello":
        lines = ["hello world", "", "world", "hello", "hello hello world"]
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(lines) + "\n")
    ckpt = str(models / model)
    options = ["--max-new-tokens", "30", "--dtype", dtype]
    got = run(capsys, ["generate", ckpt, "--input", str(path), "--batch-size", "2", *options])
    want = [
        escaped("\n".join(run(capsys, ["generate", ckpt, line, *options]))) if line else ""
        for line in lines
    ]
    assert got == want


def test_generate_input_sampling_runs_one_prompt_at_a_time(models, tmp_path, capsys):
    path = tmp_path / "prompts.txt"
    path.write_text("to be\nwhat is\n")
    ckpt = str(models / "dec")
    options = ["--max-new-tokens", "12", "--seed", "7", "--top-k", "5"]
    got = run(capsys, ["generate", ckpt, "--input", str(path), *options])
    want = [
        escaped("\n".join(run(capsys, ["generate", ckpt, t, *options])))
        for t in ("to be", "what is")
    ]
    assert got == want


def test_generate_input_refusals(models, tmp_path, capsys):
    ckpt = str(models / "dec")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    assert main(["generate", ckpt]) == 2
    assert "give TEXT or --input FILE" in capsys.readouterr().err
    assert main(["generate", ckpt, "x", "--input", str(blank)]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["generate", ckpt, "--input", str(blank)]) == 2
    assert "give a file with text" in capsys.readouterr().err


def test_generate_input_names_the_line_it_refuses(models, tmp_path, capsys):
    path = tmp_path / "long.txt"
    path.write_text("hello\n" + "hello " * 40 + "\n")
    assert main(["generate", str(models / "hello"), "--input", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}, line 2:" in err and len(err.strip().splitlines()) == 1


def test_reference_engine_input_matches_torch(models, tmp_path, capsys):
    path = tmp_path / "p.txt"
    path.write_text("to be\nwhat is\n")
    ckpt = str(models / "dec")
    common = ["generate", ckpt, "--input", str(path), "--max-new-tokens", "10"]
    assert run(capsys, [*common, "--engine", "reference"]) == run(capsys, common)
