"""Training: each stack learns (overfits a batch), resume == uninterrupted, a killed write never
loses the checkpoint, 2-process DDP == 1 process, and the training CLI end to end."""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from glassformer import data as D  # noqa: E402
from glassformer import weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config, ConfigError  # noqa: E402
from glassformer.tokenizer import CharTokenizer, MetaspaceBPETokenizer  # noqa: E402
from glassformer.training.tasks import Task, prepare_task  # noqa: E402
from glassformer.training.train import TrainConfig, lr_at, param_groups, train  # noqa: E402

TINY = dict(d_model=32, n_heads=2, d_ff=64, max_len=32)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpora")
    (d / "text.txt").write_text(D.read_text("tinyshakespeare")[:20000])
    pairs = D.read_pairs("eng-spa")[2000:2400]
    (d / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs[:300]))
    (d / "valid.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs[300:]))
    return d


def _losses(rows):
    return [r["loss"] for r in rows]


def test_schedule_and_param_groups():
    t = TrainConfig(lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=110)
    assert lr_at(0, t) == pytest.approx(1e-4) and lr_at(9, t) == pytest.approx(1e-3)
    assert lr_at(60, t) == pytest.approx(5.5e-4)  # halfway through the cosine
    assert lr_at(110, t) == pytest.approx(1e-4)
    from glassformer.torch_model import Transformer

    model = Transformer(Config(arch="decoder", vocab_size=11, **TINY))
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim == 2 and "embed" not in names[id(p)] for p in decay["params"])
    assert any("norm" in names[id(p)] for p in no_decay["params"])
    assert any("tok_embed" in names[id(p)] for p in no_decay["params"])
    assert no_decay["weight_decay"] == 0 and decay["weight_decay"] == 0.1


class OneBatch:
    """The same batch forever: a model that learns drives its loss towards zero."""

    def __init__(self, batch):
        self.batch = batch

    def next(self):
        return self.batch

    def state(self):
        return {}

    def set_state(self, state):
        pass


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder", "encoder"])
def test_each_stack_overfits_one_batch(arch, tmp_path):
    rng = np.random.default_rng(0)
    tok = CharTokenizer.train(["abcdefghij"])
    V = tok.vocab_size
    extra = {"encoder": dict(n_classes=3)}.get(arch, {})
    cfg = Config(arch=arch, vocab_size=V, **TINY, **extra)
    tcfg = TrainConfig(
        task={"decoder": "lm", "encoder-decoder": "translate", "encoder": "classify"}[arch],
        max_steps=150,
        lr=1e-2,
        min_lr=1e-2,
        warmup_steps=1,
        eval_interval=1000,
        weight_decay=0.0,
    )
    if arch == "decoder":
        x = rng.integers(4, V, size=(4, 16))
        batch, kind = {"x": x[:, :-1], "y": x[:, 1:]}, "lm"
    elif arch == "encoder-decoder":
        src = rng.integers(4, V, size=(4, 8))
        tgt = rng.integers(4, V, size=(4, 6))
        tin = np.concatenate([np.full((4, 1), tok.bos_id), tgt], 1)
        tout = np.concatenate([tgt, np.full((4, 1), tok.eos_id)], 1)
        batch = {
            "src": src,
            "src_valid": np.ones_like(src, bool),
            "tgt_in": tin,
            "tgt_out": tout,
            "tgt_valid": np.ones_like(tin, bool),
        }
        kind = "translate"
    else:
        x = rng.integers(4, V, size=(6, 10))
        batch, kind = {"x": x, "valid": np.ones_like(x, bool), "y": np.arange(6) % 3}, "classify"
    task = Task(kind, OneBatch(batch), None, tok)
    rows = train(cfg, tcfg, task, tmp_path / "ck", evaluate=lambda *a: {})
    losses = _losses(rows)
    assert losses[-1] < 0.1 * losses[0] and losses[-1] < 0.3, (losses[0], losses[-1])
    assert (tmp_path / "ck" / "model.safetensors").is_file()


def _lm_job(corpora, **kw):
    cfg = Config(arch="decoder", vocab_size=1, positions="learned", norm="pre", **TINY)
    tcfg = TrainConfig(
        task="lm",
        max_steps=8,
        batch_size=4,
        block_size=16,
        eval_interval=4,
        eval_iters=2,
        warmup_steps=2,
        dropout=0.1,
        **kw,
    )
    return (*prepare_task("lm", cfg, tcfg, str(corpora / "text.txt")), tcfg)


def test_resume_equals_uninterrupted(corpora, tmp_path):
    cfg, task, tcfg = _lm_job(corpora, grad_accum=2)
    full = train(cfg, tcfg, task, tmp_path / "full")
    cfg, task, _ = _lm_job(corpora, grad_accum=2)
    first = train(cfg, tcfg, task, tmp_path / "resumed", stop_at=3)  # "killed" after step 3
    assert _losses(first) == _losses(full)[:3]
    cfg, task, _ = _lm_job(corpora, grad_accum=2)  # a fresh process would rebuild the data
    second = train(cfg, tcfg, task, tmp_path / "resumed", resume=True)
    assert _losses(second) == _losses(full)  # identical, float for float (dropout on)
    a = weights.load(tmp_path / "full")[1]
    b = weights.load(tmp_path / "resumed")[1]
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    with open(tmp_path / "resumed" / "log.csv") as f:
        assert len(list(csv.DictReader(f))) == 8
    assert (tmp_path / "resumed" / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_snapshots_are_kept_across_resume_and_averaged(corpora, tmp_path):
    """keep_snapshots=2 keeps the weights of the last two evaluations beside the model, also
    through a resume; export --average 2 writes their element-wise mean."""
    cfg, task, tcfg = _lm_job(corpora, keep_snapshots=2)
    tcfg = TrainConfig(**{**tcfg.__dict__, "eval_interval": 2})
    train(cfg, tcfg, task, tmp_path / "ck", stop_at=5)
    assert weights.snapshot_steps(tmp_path / "ck") == [2, 4]
    cfg, task, _ = _lm_job(corpora)
    train(cfg, tcfg, task, tmp_path / "ck", resume=True)
    assert weights.snapshot_steps(tmp_path / "ck") == [6, 8]
    from safetensors.numpy import load_file

    last = load_file(str(tmp_path / "ck" / weights.snapshot_file(8)))
    model = load_file(str(tmp_path / "ck" / "model.safetensors"))
    six = load_file(str(tmp_path / "ck" / weights.snapshot_file(6)))
    assert all(np.array_equal(last[n], model[n]) for n in model)  # step 8 is the final model
    assert main(["export", str(tmp_path / "ck"), str(tmp_path / "avg"), "--average", "2",
                 "--dtype", "float32"]) == 0  # fmt: skip
    averaged = weights.load(tmp_path / "avg")[1]
    for n in model:
        expected = (six[n].astype(np.float64) + last[n].astype(np.float64)) / 2
        np.testing.assert_allclose(averaged[n], expected, rtol=1e-6, atol=1e-7)
    assert main(["export", str(tmp_path / "ck"), str(tmp_path / "x"), "--average", "3"]) == 2


def test_resume_refuses_a_different_config(corpora, tmp_path):
    from glassformer.errors import CheckpointError

    cfg, task, tcfg = _lm_job(corpora)
    train(cfg, TrainConfig(**{**tcfg.__dict__, "max_steps": 4}), task, tmp_path / "ck")
    with pytest.raises(CheckpointError, match="different config"):
        train(cfg.override("d_ff=48"), tcfg, task, tmp_path / "ck", resume=True)


KILLER = """
import sys, numpy as np
from glassformer import weights
from glassformer.config import Config
cfg = Config(arch="decoder", vocab_size=50, d_model=64, n_heads=2, d_ff=256, max_len=64)
i = 0
while True:
    i += 1
    p = weights.init(cfg, seed=i)
    weights.save(sys.argv[1], cfg, p, extra={"big.bin": bytes(2_000_000)}, overwrite=True)
    print(i, flush=True)
"""


def test_kill_9_during_saves_never_loses_the_checkpoint(tmp_path):
    ck = tmp_path / "ck"
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for attempt in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(ck)], stdout=subprocess.PIPE, env=env, text=True
        )
        proc.stdout.readline()  # at least one complete checkpoint exists
        time.sleep(0.05 + 0.07 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cfg, params, _ = weights.load(ck)  # always loadable, never half-written
        assert cfg.vocab_size == 50 and len(params) == len(weights.spec(cfg))


DDP_SCRIPT = """
import json, sys
from glassformer.config import Config
from glassformer.training.tasks import prepare_task
from glassformer.training.train import TrainConfig, train, dist_info
cfg = Config(arch="decoder", vocab_size=1, d_model=32, n_heads=2, d_ff=64, max_len=32,
             positions="learned", norm="pre")
tcfg = TrainConfig(task="lm", max_steps=4, batch_size=4, block_size=16, eval_interval=100,
                   eval_iters=1, warmup_steps=1, threads=1)
cfg, task = prepare_task("lm", cfg, tcfg, sys.argv[1])
rows = train(cfg, tcfg, task, sys.argv[2])
if dist_info()[0] == 0:
    print(json.dumps([r["loss"] for r in rows]))
"""


def test_two_process_ddp_equals_one_process(corpora, tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    text = str(corpora / "text.txt")
    single = subprocess.run(
        [sys.executable, str(script), text, str(tmp_path / "one")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    multi = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_port=29533",
            str(script),
            text,
            str(tmp_path / "two"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert multi.returncode == 0, multi.stderr[-2000:]
    one = np.array(eval(single.stdout.strip().splitlines()[-1]))
    two = np.array(eval(multi.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(two, one, rtol=1e-5)
    a, b = weights.load(tmp_path / "one")[1], weights.load(tmp_path / "two")[1]
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_train_generate_explain_eval_lm(capsys, corpora, tmp_path):
    ck = tmp_path / "lm"
    code, out, err = run(
        capsys,
        "train",
        "lm",
        "--out",
        ck,
        "--data",
        corpora / "text.txt",
        "--set",
        "d_model=32",
        "--set",
        "n_heads=2",
        "--set",
        "d_ff=64",
        "--set",
        "max_steps=6",
        "--set",
        "eval_interval=3",
        "--set",
        "eval_iters=2",
        "--quiet",
    )
    assert code == 0, err
    assert "val_loss" in out
    code, out, _ = run(capsys, "generate", ck, "ROMEO:", "--max-new-tokens", "10")
    assert code == 0 and out.startswith("ROMEO:")
    code, out, _ = run(capsys, "explain", ck, "To be", "--only", "decoder.0.self_attn.head0.A")
    assert code == 0 and "softmax" in out
    code, out, _ = run(capsys, "eval", ck, "--data", corpora / "text.txt", "--limit", "2000")
    assert code == 0 and "perplexity" in out
    code, out, _ = run(
        capsys,
        "train",
        "lm",
        "--out",
        ck,
        "--data",
        corpora / "text.txt",
        "--set",
        "max_steps=8",
        "--resume",
        "--quiet",
        "--set",
        "eval_interval=3",
        "--set",
        "eval_iters=2",
    )
    assert code == 0 and "step=8" in out


def sets(*assignments):
    return [a for kv in assignments for a in ("--set", kv)]


def test_cli_translate_and_classify(capsys, corpora, tmp_path):
    ck = tmp_path / "tr"
    small = [
        "d_model=32",
        "n_heads=2",
        "d_ff=64",
        "max_len=24",
        "n_encoder_layers=1",
        "max_steps=4",
        "eval_interval=2",
        "eval_sentences=5",
    ]
    files = [
        "--data",
        corpora / "pairs.tsv",
        "--valid",
        corpora / "valid.tsv",
        "--vocab-size",
        "400",
        "--quiet",
    ]
    common = files + sets(*small, "n_decoder_layers=1")
    code, out, err = run(capsys, "train", "translate", "--out", ck, *common)
    assert code == 0, err
    assert "bleu=" in out and "BLEU signature: nrefs:1" in out
    code, out, _ = run(capsys, "translate", ck, "Hello world.", "I am here.", "--beam", "2")
    assert code == 0 and len(out.splitlines()) == 2  # one line per sentence, even if empty
    (tmp_path / "in.txt").write_text("Hello.\n\nGood night.\n")
    code, out, _ = run(capsys, "translate", ck, "--input", tmp_path / "in.txt", "--beam", "1")
    assert code == 0 and len(out.splitlines()) == 3  # one line per input line, blank ones too
    assert out.splitlines()[1] == ""
    code, out, _ = run(
        capsys, "eval", ck, "--data", corpora / "valid.tsv", "--limit", "10", "--beam", "1"
    )
    assert code == 0 and "BLEU" in out and "chrF" in out
    cl = tmp_path / "cl"
    code, out, err = run(capsys, "train", "classify", "--out", cl, *files, *sets(*small))
    assert code == 0, err
    assert "val_acc" in out
    code, out, _ = run(capsys, "eval", cl, "--data", corpora / "valid.tsv", "--limit", "20")
    assert code == 0 and "accuracy" in out


def test_prepare_translate_with_sp_bpe(corpora):
    cfg = Config(arch="encoder-decoder", vocab_size=1, **TINY)
    tcfg = TrainConfig(task="translate", max_tokens=256)
    pairs = str(corpora / "pairs.tsv")
    cfg, task = prepare_task("translate", cfg, tcfg, pairs, tokenizer_kind="sp-bpe", vocab_size=600)
    tok = task.tokenizer
    assert type(tok) is MetaspaceBPETokenizer and cfg.vocab_size == tok.vocab_size == 600
    batch, pairs = task.train.next(), D.read_pairs(pairs)
    for row, valid, k in zip(batch["src"], batch["src_valid"], batch["index"], strict=True):
        assert tok.decode(row[valid].tolist()) == pairs[k][0]  # one vocabulary, both sides


def test_prepare_translate_with_noise_shows_the_pairs_in_other_forms(corpora):
    """lowercase_prob / no_end_prob: each training row decodes to its pair in the form its "form"
    column names (oracle: data.pair_forms on the text); validation stays the original pairs."""
    cfg = Config(arch="encoder-decoder", vocab_size=1, **TINY)
    tcfg = TrainConfig(task="translate", max_tokens=256, lowercase_prob=0.3, no_end_prob=0.5)
    path = str(corpora / "pairs.tsv")
    cfg, task = prepare_task("translate", cfg, tcfg, path, tokenizer_kind="sp-bpe", vocab_size=600)
    tok, pairs = task.tokenizer, D.read_pairs(path)
    forms = [pairs, *D.pair_forms(pairs, 0.3, 0.5)[0]]
    shown = set()
    for _ in range(len(task.train)):
        b = task.train.next()
        for k in range(len(b["index"])):
            src, tgt = forms[b["form"][k]][b["index"][k]]
            assert tok.decode(b["src"][k][b["src_valid"][k]].tolist()) == src
            assert tok.decode(b["tgt_out"][k][b["tgt_valid"][k]].tolist()[:-1]) == tgt
            shown.add(int(b["form"][k]))
    assert shown == {0, 1, 2, 3}
    assert all((b["form"] == 0).all() for b in task.valid.epoch_batches())
    with pytest.raises(ConfigError, match=r"no_end_prob must be in \[0, 1\], got 2.0"):
        TrainConfig(task="translate", no_end_prob=2.0)


def test_cli_train_accepts_sp_bpe(capsys, corpora, tmp_path):
    small = ["d_model=32", "n_heads=2", "d_ff=64", "max_len=24", "max_steps=1"]
    layers = ["n_encoder_layers=1", "n_decoder_layers=1", "eval_interval=5"]
    valid = tmp_path / "valid.tsv"  # the final evaluation decodes every pair: keep it short
    valid.write_text("".join((corpora / "valid.tsv").read_text().splitlines(True)[:5]))
    files = ["--data", corpora / "pairs.tsv", "--valid", valid, "--quiet"]
    ck = tmp_path / "sp"
    argv = ["--tokenizer", "sp-bpe", "--vocab-size", "600", *files, *sets(*small, *layers)]
    code, _, err = run(capsys, "train", "translate", "--out", ck, *argv)
    assert code == 0, err
    assert "sp-bpe tokenizer of 600 tokens" in err
    assert weights.load(ck)[2].kind == "sp-bpe"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty"), (b"ok\x00bad\n", "line 1"), (b"line\nline\n\xff\xfe\n", "line 3")],
)
def test_cli_refuses_bad_training_files(capsys, tmp_path, content, message):
    f = tmp_path / "bad.txt"
    f.write_bytes(content)
    code, out, err = run(capsys, "train", "lm", "--out", tmp_path / "o", "--data", f, "--quiet")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert str(f) in err or "bad.txt" in err


def test_cli_refuses_bad_pairs_and_flags(capsys, tmp_path):
    f = tmp_path / "bad.tsv"
    f.write_text("a\tb\nonly one column\n")
    code, _, err = run(
        capsys, "train", "translate", "--out", tmp_path / "o", "--data", f, "--quiet"
    )
    assert code == 2 and "line 2" in err
    code, _, err = run(capsys, "train", "lm", "--out", tmp_path / "o", "--set", "lr=fast")
    assert code == 2 and "lr must be a number" in err
    code, _, err = run(capsys, "train", "lm", "--out", tmp_path / "o", "--set", "speed=1")
    assert code == 2 and "unknown field 'speed'" in err
    code, _, err = run(capsys, "train", "lm", "--out", tmp_path / "none", "--resume")
    assert code == 2 and "not found" in err


def test_time_budget_stops_and_saves(corpora, tmp_path):
    cfg, task, tcfg = _lm_job(corpora)
    budget = TrainConfig(**{**tcfg.__dict__, "max_steps": 10_000, "max_minutes": 0.02})
    rows = train(cfg, budget, task, tmp_path / "ck")
    assert len(rows) < 10_000 and rows[-1]["elapsed_s"] >= 1.2
    assert "val_loss" in rows[-1]  # the last step is evaluated and checkpointed
    assert weights.load(tmp_path / "ck")[0] == cfg
    t = TrainConfig(lr=1e-3, min_lr=1e-4, warmup_steps=0, max_steps=1000)
    assert lr_at(10, t, time_fraction=1.0) == pytest.approx(1e-4)  # decayed by time


def test_export_writes_a_small_checkpoint(capsys, tmp_path):
    from glassformer.config import preset

    cfg = preset("tiny")
    weights.save(tmp_path / "ck", cfg, weights.init(cfg), extra={"training_state.pt": b"x"})
    code, out, _ = run(capsys, "export", tmp_path / "ck", tmp_path / "small", "--dtype", "float16")
    assert code == 0 and "float16" in out
    assert not (tmp_path / "small" / "training_state.pt").exists()
    _, params, _ = weights.load(tmp_path / "small")
    full = weights.load(tmp_path / "ck")[1]
    for n in params:
        np.testing.assert_allclose(params[n], full[n], atol=1e-3)
    mode = (tmp_path / "small").stat().st_mode & 0o777
    assert mode & 0o055 == 0o055 & ~(os.umask(os.umask(0)))  # not private like a mkdtemp dir


def _initial_weights(monkeypatch, cfg, tcfg, task, out) -> dict:
    """The weights train() starts from (read when it builds the optimizer)."""
    from glassformer.training import train as train_module

    seen, make_optimizer = {}, train_module.make_optimizer

    def spy(model, tcfg_, device="cpu"):
        seen.update({n: p.detach().clone() for n, p in model.named_parameters()})
        return make_optimizer(model, tcfg_, device)

    monkeypatch.setattr(train_module, "make_optimizer", spy)
    train(cfg, tcfg, task, out, evaluate=lambda *a: {})
    return seen


@pytest.mark.parametrize(("scheme", "embed_std"), [("gpt2", 0.0), ("xavier", 0.0), ("gpt2", 0.3)])
def test_a_new_model_is_drawn_once_by_its_scheme(monkeypatch, tmp_path, scheme, embed_std):
    """train() draws a new model's weights once, by TrainConfig.init and embed_std: they equal one
    `init_weights` from the run's seed over a model built without drawing (init=None). Drawing
    GPT-2's weights first and then the scheme's (what the loop once did) gives other weights. And
    `Transformer(cfg)` is that one draw with "gpt2": the same weights, torch's generator left in
    the same state (no second, silent draw)."""
    from glassformer.torch_model import Transformer, init_weights

    tok = CharTokenizer.train(["abcdefghij"])
    cfg = Config(arch="encoder-decoder", vocab_size=tok.vocab_size, **TINY)
    x = np.full((2, 3), 4)
    batch = {"src": x, "src_valid": x > 0, "tgt_in": x, "tgt_out": x, "tgt_valid": x > 0}
    tcfg = TrainConfig(
        task="translate", max_steps=1, eval_interval=10, init=scheme, embed_std=embed_std, seed=5
    )
    task = Task("translate", OneBatch(batch), None, tok)
    got = _initial_weights(monkeypatch, cfg, tcfg, task, tmp_path / "ck")

    def drawn(first_gpt2: bool) -> dict:
        torch.manual_seed(tcfg.seed)
        model = Transformer(cfg, init="gpt2" if first_gpt2 else None)
        init_weights(model, cfg, scheme, embed_std)
        return dict(model.named_parameters())

    once, twice = drawn(False), drawn(True)
    assert got.keys() == once.keys()
    assert all(torch.equal(got[n], once[n]) for n in got)
    assert any(not torch.equal(got[n], twice[n]) for n in got)
    torch.manual_seed(1)
    default, after_default = Transformer(cfg).state_dict(), torch.rand(4)
    torch.manual_seed(1)
    model = Transformer(cfg, init=None)
    init_weights(model, cfg)
    assert all(torch.equal(default[n], t) for n, t in model.state_dict().items())
    assert torch.equal(after_default, torch.rand(4))


def test_init_weights_draws_each_tensor_by_its_scheme():
    """The one initialisation, tensor by tensor, against the schemes written out here: "gpt2"
    N(0, 0.02), W_O and W2 N(0, 0.02/√(2L)); "xavier" U(-b, b) with torch's own Glorot fans
    (nn.init._calculate_fan_in_and_fan_out; Wq, Wk, Wv as nn.MultiheadAttention's fused (3C, C)),
    token embeddings N(0, 1/√C), positions and an untied head as "gpt2"; embed_std the token
    embeddings' std. Biases 0, LayerNorms 1 and 0, exactly."""
    import math

    from torch import nn

    from glassformer.torch_model import Transformer, init_weights

    cfg = Config(
        arch="encoder-decoder", vocab_size=300, d_model=64, n_heads=4, d_ff=128, max_len=40,
        positions="learned", norm="pre", tie_embeddings=False,
    )  # fmt: skip
    L = cfg.n_encoder_layers + cfg.n_decoder_layers
    for scheme, embed_std in (("gpt2", 0.0), ("xavier", 0.0), ("xavier", 0.5)):
        model = Transformer(cfg, init=None)
        torch.manual_seed(0)
        init_weights(model, cfg, scheme, embed_std)
        for name, p in model.named_parameters():
            w = p.detach().double()
            if p.ndim == 1:
                one = ".norm" in name and name.endswith(".weight")
                assert torch.equal(w, torch.full_like(w, 1.0 if one else 0.0)), name
                continue
            residual = name.endswith(("o.weight", "w2.weight"))
            std = 0.02 / math.sqrt(2 * L) if residual else 0.02
            bound = None
            if name.endswith("tok_embed.weight") and (embed_std or scheme == "xavier"):
                std = embed_std or cfg.d_model**-0.5
            elif scheme == "xavier" and "embed" not in name and name != "lm_head.weight":
                fused = name.endswith(("q.weight", "k.weight", "v.weight"))
                fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(
                    torch.empty(3 * p.shape[0] if fused else p.shape[0], p.shape[1])
                )
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                std = bound / math.sqrt(3)
            assert abs(float(w.std()) / std - 1) < 0.1, (scheme, name, float(w.std()), std)
            if bound is not None:
                assert 0.95 * bound <= float(w.abs().max()) <= bound, (scheme, name)
