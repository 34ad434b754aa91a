"""Threads and devices (issue 36, point 7): `load(threads=, device=)`, `--threads` on every command
that computes, `--device` on the inference commands.

Oracles: the libraries' own readings once threads are set (torch.get_num_threads, threadpoolctl's
view of the BLAS), each in a fresh interpreter; the CPU engine for a CUDA GPU (its float32 outputs
equal the CPU's within 1e-4: run only where PyTorch sees a GPU, `benchmarks/gpu_check.sh`); and
refusals that are one line (exit 2 on the command line).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import glassformer
from glassformer import devices, engine_diff, weights
from glassformer.cli import main
from glassformer.errors import GlassformerError, InputError
from glassformer.tokenizer import CharTokenizer, WordTokenizer

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not CUDA, reason="PyTorch sees no CUDA GPU here (benchmarks/gpu_check.sh)")
no_gpu = pytest.mark.skipif(CUDA, reason="a GPU is here: the refusal is for machines without one")
TEXT = "to be or not to be, that is the question. " * 4


def fresh(code: str, *argv: str) -> list:
    """`code` run in a new interpreter (threads are the process's): the JSON it prints last."""
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A character decoder, the article's encoder-decoder and a word classifier, as folders."""
    d = tmp_path_factory.mktemp("devices")
    ct, wt = CharTokenizer.train([TEXT]), WordTokenizer.train([TEXT])
    dec = glassformer.preset("tiny").override("max_len=32", f"vocab_size={ct.vocab_size}")
    clf = glassformer.preset("encoder-classifier").override(
        "d_model=16", "n_heads=2", "d_ff=32", "n_encoder_layers=2", f"vocab_size={wt.vocab_size}"
    )
    weights.save(d / "dec", dec, weights.init(dec, seed=1), tokenizer=ct)
    weights.save(d / "clf", clf, weights.init(clf, seed=2), tokenizer=wt, labels=["yes", "no"])
    glassformer.load("hello-world", seed=3).save(d / "s2s")
    (d / "corpus.txt").write_text(TEXT)
    (d / "pairs.tsv").write_text("Hello world\tHola mundo\nthe cat\tel gato\n")
    return d


# -- threads --------------------------------------------------------------------------------------

THREADS = """
import json, sys
hide = sys.argv[1]
if hide:
    sys.modules[hide] = None  # as on a machine without it
import glassformer
n = int(sys.argv[2])
if sys.argv[3] == "torch first":
    import torch
m = glassformer.load("hello-world", engine=sys.argv[4], threads=n)
before = "torch" in sys.modules
blas = None
if hide != "threadpoolctl":
    import threadpoolctl
    blas = sorted({i["num_threads"] for i in threadpoolctl.threadpool_info()
                   if i["user_api"] == "blas"})
import torch
print(json.dumps([before, blas, torch.get_num_threads(), m.threads, m.notes]))
"""


@pytest.mark.parametrize("when", ["torch later", "torch first"])
def test_load_threads_sets_pytorch_and_blas(when):
    """3 threads: neither library's own count on the 2-core machines (2), nor 1. PyTorch is not
    imported to be set: a reference-engine model leaves it unloaded until something imports it."""
    pytest.importorskip("threadpoolctl")
    before, blas, n_torch, kept, notes = fresh(THREADS, "", "3", when, "reference")
    assert (before, blas, n_torch, kept, notes) == (when == "torch first", [3], 3, 3, [])


def test_without_threadpoolctl_a_note_says_blas_keeps_its_count():
    before, blas, n_torch, kept, notes = fresh(THREADS, "threadpoolctl", "3", "", "auto")
    assert n_torch == 3 and kept == 3
    assert len(notes) == 1 and "PyTorch only" in notes[0] and "OPENBLAS_NUM_THREADS" in notes[0]


def test_threads_none_leaves_both_libraries_as_they_are():
    code = THREADS.replace("threads=n", "threads=None")
    _, blas, n_torch, kept, notes = fresh(code, "", "3", "", "auto")
    assert kept is None and notes == [] and 3 not in (blas or []) + [n_torch]


CLI = """
import json, sys
from glassformer.cli import main
code = main(json.loads(sys.argv[1]))
loaded = "torch" in sys.modules
import threadpoolctl, torch
info = threadpoolctl.threadpool_info()
blas = sorted({i["num_threads"] for i in info if i["user_api"] == "blas"})
print(json.dumps([code, loaded, blas, torch.get_num_threads()]))
"""


@pytest.mark.parametrize(
    "argv, torch_loaded",
    [
        (["generate", "{dec}", "to be", "--max-new-tokens", "3"], True),
        (["explain", "{dec}", "to be"], False),  # NumPy only: PyTorch stays unloaded
        (["classify", "{clf}", "to be", "--engine", "reference"], False),
        (["lens", "{dec}", "to be"], False),
    ],
    ids=lambda a: a[0] if isinstance(a, list) else str(a),
)
def test_threads_on_the_command_line(folders, argv, torch_loaded):
    pytest.importorskip("threadpoolctl")
    argv = [a.format(dec=folders / "dec", clf=folders / "clf") for a in argv] + ["--threads", "3"]
    assert fresh(CLI, json.dumps(argv)) == [0, torch_loaded, [3], 3]


def test_every_command_that_computes_takes_threads():
    from glassformer.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    computing = ["walkthrough", "explain", "lens", "attribute", "generate", "translate", "train"]
    computing += ["eval", "embed", "classify", "serve", "diff", "faithfulness", "record-corpus"]
    for name in computing:
        assert "--threads" in sub[name]._option_string_actions, name
    for name in ("generate", "translate", "embed", "classify", "eval", "train"):
        assert "--device" in sub[name]._option_string_actions, name


def test_train_threads_are_the_run_s(folders, tmp_path, capsys):
    tiny = [
        "--set",
        "max_steps=1",
        "--set",
        "d_model=16",
        "--set",
        "n_heads=2",
        "--set",
        "d_ff=32",
        "--set",
        "max_len=16",
        "--set",
        "block_size=16",
        "--set",
        "eval_interval=50",
        "--set",
        "eval_iters=1",
        "--quiet",
    ]
    base = ["train", "lm", "--data", str(folders / "corpus.txt"), *tiny]
    assert main([*base, "--out", str(tmp_path / "a"), "--threads", "1"]) == 0
    from glassformer.training.train import saved_train_config

    assert saved_train_config(tmp_path / "a").threads == 1  # kept, as --set threads=1 is
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "b"), "--threads", "1", "--set", "threads=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--threads and --set threads" in err[0]
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_threads_must_be_an_integer_of_at_least_one(value):
    with pytest.raises(InputError, match=r"^threads=.*: must be .*at least 1"):
        glassformer.load("hello-world", threads=value)


# -- devices --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"device": "tpu"}, r"^device='tpu': must be 'cpu', 'cuda' or 'cuda:N'$"),
        ({"device": "cuda:x"}, r"^device='cuda:x': must be"),
        ({"device": 0}, r"^device=0: must be"),
        ({"device": "cuda", "engine": "reference"}, r"engine='reference' is NumPy float64 on "),
        ({"device": "cuda", "dtype": "int8"}, r"^dtype='int8' runs on the CPU only"),
    ],
)
def test_a_device_the_engine_cannot_use_is_refused_in_one_line(kwargs, says):
    with pytest.raises(InputError, match=says) as info:
        glassformer.load("hello-world", **kwargs)
    assert "\n" not in str(info.value)


@no_gpu
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_without_a_gpu_cuda_is_refused_naming_what_is_here(device):
    with pytest.raises(GlassformerError, match=rf"^device='{device}': .*only the CPU") as info:
        glassformer.load("hello-world", device=device)
    assert "use device='cpu'" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(GlassformerError, match=rf"^device='{device}'"):  # the engine's own guard
        from glassformer.inference import torch_engine

        torch_engine(glassformer.preset("hello-world"), {}, "float32", device)


@no_gpu
@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "{dec}", "to be"],
        ["translate", "{s2s}", "Hello world"],
        ["embed", "{clf}", "to be"],
        ["classify", "{clf}", "to be"],
        ["eval", "{dec}", "--data", "{corpus}"],
        ["train", "lm", "--out", "{tmp}/out", "--data", "{corpus}"],
    ],
    ids=lambda a: a[0],
)
def test_without_a_gpu_device_cuda_exits_2_in_one_line(folders, tmp_path, capsys, argv):
    names = dict(dec=folders / "dec", s2s=folders / "s2s", clf=folders / "clf", tmp=tmp_path)
    argv = [a.format(corpus=folders / "corpus.txt", **names) for a in argv]
    capsys.readouterr()
    assert main([*argv, "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("glassformer: error: "), err
    assert re.search(r"cuda.*only the CPU.*cpu", lines[0]), lines[0]
    assert not (tmp_path / "out").exists()


def test_the_device_check_names_the_gpus_it_sees(monkeypatch):
    """With GPUs (faked: the count PyTorch reports), a number past them is refused naming them."""
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.check_device("cuda:1") == "cuda:1"
    with pytest.raises(
        GlassformerError,
        match=r"^device='cuda:2': PyTorch sees 2 GPU\(s\) here: "
        r"cuda:0, cuda:1; use one of them, or device='cpu'$",
    ):
        devices.check_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(GlassformerError, match=r"sees no CUDA GPU here, only the CPU"):
        devices.check_device("cuda")


def test_a_model_keeps_its_device_and_its_engines_are_on_it():
    m = glassformer.load("hello-world")
    assert m.device == "cpu" and m.threads is None
    engine = m.runtime.torch("float32")
    assert engine is m.runtime.torch("float32") and {
        p.device.type for p in engine.parameters()
    } == {"cpu"}


# -- on a GPU: the same numbers as the CPU's ------------------------------------------------------

TOL = 1e-4


def pair(folder, **kw):
    return (
        glassformer.load(folder, dtype="float32", **kw),
        glassformer.load(folder, dtype="float32", device="cuda", **kw),
    )


@gpu
def test_cuda_engine_is_on_the_gpu(folders):
    _, gpu_m = pair(folders / "dec")
    assert {p.device.type for p in gpu_m.torch("float32").parameters()} == {"cuda"}


@gpu
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_cuda_generate_equals_cpu(folders, strategy):
    cpu_m, gpu_m = pair(folders / "dec")
    prompts = ["to be", "that is the", "or not"]
    want = [cpu_m.generate(p, max_new_tokens=8, strategy=strategy) for p in prompts]
    assert [gpu_m.generate(p, max_new_tokens=8, strategy=strategy) for p in prompts] == want
    if strategy == "greedy":  # batched: left-padded prompts in one KV cache
        assert gpu_m.generate(prompts, max_new_tokens=8) == want
    ids = cpu_m.encode(want[0])
    steps = [m.step(prompt_len=1) for m in (cpu_m, gpu_m)]
    for t in range(1, len(ids) + 1):
        np.testing.assert_allclose(steps[1](ids[:t]), steps[0](ids[:t]), atol=TOL, rtol=0)


@gpu
def test_cuda_record_equals_cpu(folders):
    cpu_m, gpu_m = pair(folders / "dec")
    kw = dict(steps="decoder.0.self_attn.head0.A,logits", top_tokens=3, max_new_tokens=5)
    (text_c, rec_c), (text_g, rec_g) = cpu_m.record("to be", **kw), gpu_m.record("to be", **kw)
    assert (
        text_g == text_c
        and rec_g["ids"] == rec_c["ids"]
        and rec_g["steps"].keys() == {"decoder.0.self_attn.head0.A", "logits"}
    )
    for name, want in rec_c["steps"].items():
        for a, b in zip(rec_g["steps"][name], want, strict=True):
            np.testing.assert_allclose(a, b, atol=TOL, rtol=0)
    for a, b in zip(rec_g["top_k"], rec_c["top_k"], strict=True):
        assert a["ids"] == b["ids"]
        np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=TOL, rtol=0)


@gpu
@pytest.mark.parametrize("beam", [1, 4])
def test_cuda_translate_equals_cpu(folders, beam):
    cpu_m, gpu_m = pair(folders / "s2s")
    texts = ["Hello world", "how are you ?", "hello"]
    assert gpu_m.translate(texts, beam=beam) == cpu_m.translate(texts, beam=beam)
    if beam > 1:
        for a, b in zip(
            gpu_m.translate(texts, beam=beam, n_best=2),
            cpu_m.translate(texts, beam=beam, n_best=2),
            strict=True,
        ):
            assert [c.text for c in a] == [c.text for c in b]
            np.testing.assert_allclose([c.score for c in a], [c.score for c in b], atol=TOL)


@gpu
def test_cuda_classify_and_embed_equal_cpu(folders):
    cpu_m, gpu_m = pair(folders / "clf")
    texts = ["to be or not", "that is the question", "be"]
    want, got = cpu_m.classify(texts), gpu_m.classify(texts)
    assert [g["label"] for g in got] == [w["label"] for w in want]
    probabilities = [[list(r["probabilities"].values()) for r in rs] for rs in (got, want)]
    np.testing.assert_allclose(*probabilities, atol=TOL, rtol=0)
    np.testing.assert_allclose(gpu_m.embed(texts), cpu_m.embed(texts), atol=TOL, rtol=0)


@gpu
def test_cuda_evaluate_and_diff_equal_cpu(folders):
    cpu_m, gpu_m = pair(folders / "dec")
    numbers = [
        re.findall(r"[\d.]+", m.evaluate(str(folders / "corpus.txt"))) for m in (cpu_m, gpu_m)
    ]
    np.testing.assert_allclose(
        np.asarray(numbers[1], float), np.asarray(numbers[0], float), rtol=TOL
    )
    # parity on the GPU: the float64 engine within 1e-6 of the reference at every step, float32
    assert engine_diff.diff(gpu_m, "to be").first_beyond == {"torch": None}
    assert engine_diff.diff(gpu_m, "to be", ("reference", "float32"), 1e-3).first_beyond == {
        "float32": None
    }


# -- the default: the cores less the other runnable tasks -----------------------------------------

POLICY = """
import json, os, sys
os.sched_getaffinity = lambda pid: set(range(int(sys.argv[1])))  # a machine of that many cores
from glassformer import devices
devices.others_runnable = lambda readings=3: int(sys.argv[2])  # that many others runnable
import torch
start = torch.get_num_threads()
argv = json.loads(sys.argv[3])
if argv[0] == "load":
    import glassformer
    glassformer.load("hello-world", engine="torch")
else:
    from glassformer.cli import main
    assert main(argv) == 0
print(json.dumps([start, torch.get_num_threads()]))
"""


def policy(cores: int, others: int, argv: list[str], env: dict | None = None) -> list[int]:
    """PyTorch's threads before and after `argv` (a command, or ["load"]) in a new interpreter on
    a machine of `cores` cores with `others` other tasks runnable, no thread count in the
    environment unless `env` sets one."""
    clean = {k: v for k, v in os.environ.items() if k not in devices.THREAD_VARIABLES}
    r = subprocess.run([sys.executable, "-c", POLICY, str(cores), str(others), json.dumps(argv)],
                       capture_output=True, text=True, env={**clean, **(env or {})})  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_default_threads_are_the_cores_less_the_others_runnable(monkeypatch):
    for var in devices.THREAD_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    for others, n in ((0, 4), (1, 3), (3, 1), (9, 1)):
        monkeypatch.setattr(devices, "others_runnable", lambda readings=3, k=others: k)
        assert devices.default_threads() == n
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's count is kept
    assert devices.default_threads() is None


def test_others_runnable_sees_spinning_processes():
    """Oracle: the kernel. Two spinning processes are runnable the whole time they live."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        assert devices.others_runnable() >= 2
    finally:
        for p in spin:
            p.kill()
            p.wait()


@pytest.mark.parametrize(
    "argv", [["load"], ["generate", "{dec}", "to be", "--max-new-tokens", "2"]], ids=["load", "cli"]
)
def test_a_command_and_load_take_the_cores_less_the_others(folders, argv):
    argv = [a.format(dec=folders / "dec") for a in argv]
    assert policy(3, 1, argv)[1] == 2
    assert policy(3, 0, argv)[1] == 3
    start, after = policy(3, 0, argv, env={"OMP_NUM_THREADS": "1"})
    assert after == start == 1  # the environment's count is kept


def test_a_new_training_keeps_its_default_threads_and_its_resume_takes_them(folders, tmp_path):
    from glassformer.training.train import saved_train_config

    run = ["train", "lm", "--data", str(folders / "corpus.txt"), "--out", str(tmp_path / "r"),
           "--set", "max_steps=1", "--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32",
           "--set", "max_len=16", "--set", "block_size=16", "--set", "eval_interval=50",
           "--set", "eval_iters=1", "--quiet"]  # fmt: skip
    assert policy(3, 1, run)[1] == 2
    assert saved_train_config(tmp_path / "r").threads == 2  # kept by the run
    resume = ["train", "lm", "--out", str(tmp_path / "r"), "--resume", "--set", "max_steps=2",
              "--quiet"]  # fmt: skip
    assert policy(3, 0, resume)[1] == 2  # the run's count, not today's load
