"""The activation store (issue 41, points 1 and 3): `Model.record_corpus` / `record-corpus` and
`glassformer top`, against oracles.

- rows: every row of a store equals the reference engine's own run of its document alone
  (`run_with_cache(engine="reference")`, float64): 1e-5 for float32 (the fast path's forward
  hooks and the intervention path alike), 1e-10 for a float64 store, half an int8 step for int8;
  a translator's target side teacher-forced after its source;
- resumable: a run that fails after shard k (a fault injected into the shard writer, a full
  disk) keeps its complete shards, and the same command run again ends with a store whose every
  file is byte for byte a clean run's;
- refusals, one line each and nothing lost: an empty corpus, an unknown step, a step that is not
  one row per token, a store from another model, a corrupt or truncated shard;
- top: the best rows equal a brute-force sort of the whole column (a neuron, a head's ||C||),
  and `top` works under an address-space cap smaller than the store (`resource.RLIMIT_AS` in a
  subprocess), where loading the column whole fails (the control).
"""

from __future__ import annotations

import errno
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import glassformer  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.corpus import store as S  # noqa: E402
from glassformer.corpus.top import top_examples  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LINES = [
    "First Citizen:",
    "Before we proceed any further, hear me speak.",
    "",
    "All:",
    "Speak, speak.",
    "You are all resolved rather to die than to famish?",
    "Resolved. resolved.",
    "First, you know Caius Marcius is chief enemy to the people.",
    "We know't, we know't.",
    "Let us kill him, and we'll have corn at our own price.",
]
STEPS = "decoder.1.ffn.hidden,decoder.0.self_attn.head1.C,decoder.2.out"


@pytest.fixture(scope="module")
def m():
    return glassformer.load(ROOT / "models" / "char-lm")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "lines.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


@pytest.fixture(scope="module")
def clean(m, corpus, tmp_path_factory):
    """A store recorded in one go: 3 steps, shards of about 50 rows (4)."""
    out = tmp_path_factory.mktemp("clean") / "store"
    m.record_corpus(corpus, steps=STEPS, out=out, shard_rows=50, check_rows=4)
    return out


def reference_rows(m, names, docs, targets=None):
    """{name: the rows of every document, run alone by the float64 reference engine}."""
    out = {n: [] for n in names}
    for i, d in enumerate(docs):
        cache = m.run_with_cache(
            [d], names=names, engine="reference", targets=None if targets is None else [targets[i]]
        )
        for n in names:
            out[n].append(cache.unpadded(n, 0))
    return {n: np.concatenate(v) for n, v in out.items()}


def scaled_error(got, want) -> float:
    scale = np.maximum(1.0, np.abs(want).max(axis=1, keepdims=True))
    return float((np.abs(got - want) / scale).max())


# -- rows equal the reference engine's ------------------------------------------------------------


def test_the_rows_equal_the_reference_engine_float32(m, clean):
    st = S.open_store(clean)
    assert len(st.shards()) > 1 and list(st.steps) == STEPS.split(",")[:2][::-1] + ["decoder.2.out"]
    docs = [x for x in LINES if x.strip()]
    want = reference_rows(m, list(st.steps), docs)
    for n in st.steps:
        assert st.column(n).shape == want[n].shape
        assert scaled_error(st.column(n), want[n]) < 1e-5, n
    ids = np.concatenate([m.encode(d) for d in docs])
    assert np.array_equal(st.row_files("tokens"), ids)
    assert np.array_equal(np.unique(st.row_files("document")), [0, 1, 3, 4, 5, 6, 7, 8, 9])
    assert st.index["model"]["fingerprint"] == S.fingerprint(m.cfg, m.params)
    ctx = st.context(int(np.flatnonzero(st.row_files("document") == 4)[3]), before=10)
    assert "".join(ctx["pieces"]).replace("␣", " ") == "Spea" and ctx["at"] == 3


@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_float64_and_int8_stores(m, corpus, tmp_path, dtype):
    """float64: the PyTorch engine in float64 through its hooks, and the intervention path (a
    residual stream's add1, which no hook reads), equal the reference to 1e-10; int8 within half
    a step of each row's scale."""
    steps = "decoder.1.ffn.hidden,decoder.0.add1"
    r = m.record_corpus(corpus, steps=steps, out=tmp_path / "s", dtype=dtype, max_tokens=150)
    st = S.open_store(tmp_path / "s")
    assert st.rows == 150 == r.rows and st.dtype == dtype and r.check["ok"]
    docs = [x for x in LINES if x.strip()]
    want = reference_rows(m, steps.split(","), docs)
    for n in st.steps:
        got, ref = st.column(n), want[n][:150]
        if dtype == "float64":
            v = np.concatenate([np.asarray(s.array(n)) for s in st.shards()])
            assert v.dtype == np.float64 and scaled_error(v, ref) < 1e-10, n
        else:
            assert scaled_error(got, ref) <= 0.5 / 127 + 1e-5, n


def test_the_reference_engine_gives_the_reference_to_1e10(m, corpus, tmp_path):
    out = tmp_path / "s"
    m.record_corpus(corpus, steps="decoder.3.out", out=out, engine="reference", dtype="float64",
                    max_tokens=60)  # fmt: skip
    st = S.open_store(out)
    docs = [x for x in LINES if x.strip()][:3]
    want = reference_rows(m, ["decoder.3.out"], docs)["decoder.3.out"][:60]
    v = np.asarray(st.shards()[0].array("decoder.3.out"))
    assert st.index["engine"] == "reference" and np.abs(v - want).max() < 1e-10


def test_a_translators_target_side_is_teacher_forced(tmp_path):
    m = glassformer.load(ROOT / "models" / "en-es")
    tsv = tmp_path / "pairs.tsv"
    pairs = [("Hello world.", "Hola mundo."), ("I am here.", "Estoy aquí.")]
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    steps = ["decoder.1.cross_attn.head2.C", "decoder.2.out"]
    m.record_corpus(tsv, steps=",".join(steps), out=tmp_path / "s", side="target")
    st = S.open_store(tmp_path / "s")
    want = reference_rows(m, steps, [a for a, _ in pairs], [b for _, b in pairs])
    for n in steps:
        assert scaled_error(st.column(n), want[n]) < 1e-5, n
    assert st.row_files("tokens")[0] == m.runtime.bos()[0]  # the decoder's input: BOS first


# -- resumable: a failed run continues to the identical store -------------------------------------


def same_store(a: Path, b: Path) -> None:
    names = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for n in names:
        if n.name == "record.json":
            continue  # the corpus's path as given differs; the rest is the same
        assert filecmp.cmp(a / n, b / n, shallow=False), n


@pytest.mark.parametrize("fault", ["killed", "full disk"])
def test_a_failed_run_resumes_to_the_identical_store(m, corpus, clean, tmp_path, monkeypatch,
                                                      capsys, fault):  # fmt: skip
    out = tmp_path / "store"
    real, calls = S.write_shard, []

    def failing(folder, name, arrays, meta):
        calls.append(name)
        if len(calls) == 3:
            if fault == "killed":
                raise KeyboardInterrupt  # a Ctrl-C (or a kill) while the third shard is built
            save = S._save_npy
            monkeypatch.setattr(S, "_save_npy", lambda *a: (_ for _ in ()).throw(
                OSError(errno.ENOSPC, "No space left on device")))  # fmt: skip
            try:
                return real(folder, name, arrays, meta)
            finally:
                monkeypatch.setattr(S, "_save_npy", save)
        return real(folder, name, arrays, meta)

    monkeypatch.setattr(S, "write_shard", failing)
    argv = ["record-corpus", str(ROOT / "models" / "char-lm"), str(corpus), "--steps", STEPS,
            "--out", str(out), "--shard-rows", "50", "--check-rows", "4"]  # fmt: skip
    if fault == "killed":
        assert main(argv) == 130  # the command line: 128 + SIGINT, and what it kept
        err = capsys.readouterr().err.strip()
        assert err == f"glassformer: interrupted: 2 complete shards kept in {out}; run the same " \
            "command again to continue"  # fmt: skip
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "No space left" in err and "2 complete shards are kept" in err
    kept = sorted(p.name for p in out.iterdir())
    assert kept == ["record.json", "shard-00000", "shard-00001"]  # no index, no half shard
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".store.")]  # nor a lock
    monkeypatch.setattr(S, "write_shard", real)
    with pytest.raises(GlassformerError, match="no index.json: its recording did not finish"):
        S.open_store(out)
    assert main(argv) == 0
    assert "2 shards kept from a killed run" in capsys.readouterr().out
    same_store(clean, out)


# -- refusals: one line, nothing lost -------------------------------------------------------------


def refused(argv, capsys) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("glassformer: error:"), err
    return err


def test_bad_input_is_one_line(m, corpus, clean, tmp_path, capsys):
    lm = ROOT / "models" / "char-lm"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    out = tmp_path / "s"
    assert "empty" in refused(["record-corpus", lm, empty, "--steps", "decoder.0.out",
                                "--out", out], capsys)  # fmt: skip
    err = refused(["record-corpus", lm, corpus, "--steps", "decoder.9.out", "--out", out], capsys)
    assert "--steps decoder.9.out matches no step" in err
    err = refused(["record-corpus", lm, corpus, "--steps", "decoder.0.self_attn.head1.A",
                   "--out", out], capsys)  # fmt: skip
    assert "not one row per token position" in err and "--steps" in err
    assert not out.exists()
    # a killed recording of another model is not continued, and not touched
    half = tmp_path / "half"
    S.write_json(half, "record.json", json.loads((clean / "record.json").read_text()))
    other = tmp_path / "other"
    m.with_params({**m.params, "decoder.norm.weight": m.params["decoder.norm.weight"] * 2}).save(
        other
    )
    err = refused(["record-corpus", other, corpus, "--steps", STEPS, "--out", half], capsys)
    assert "recorded from another model" in err
    assert sorted(p.name for p in half.iterdir()) == ["record.json"]
    err = refused(["record-corpus", lm, corpus, "--steps", STEPS, "--out", clean], capsys)
    assert "already holds a complete store" in err


def test_a_corrupt_or_truncated_shard_is_refused(clean, tmp_path, capsys):
    import shutil

    for harm in ("truncated", "flipped"):
        copy = tmp_path / harm
        shutil.copytree(clean, copy)
        f = copy / "shard-00001" / "decoder.1.ffn.hidden.npy"
        data = bytearray(f.read_bytes())
        if harm == "truncated":
            f.write_bytes(bytes(data[: len(data) // 2]))
            err = refused(["top", copy, "--unit", "decoder.1.ffn.hidden:3"], capsys)
            assert "is corrupt or truncated" in err
        else:
            data[-7] ^= 0xFF
            f.write_bytes(bytes(data))
            with pytest.raises(GlassformerError, match="is corrupt"):
                S.open_store(copy).verify()
            with pytest.raises(GlassformerError, match="is corrupt"):
                S.complete_shards(copy)  # what a resumed run checks of the shards it keeps


# -- top ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["decoder.1.ffn.hidden:7", "decoder.0.self_attn.head1"])
def test_top_equals_a_sort_of_the_whole_column(clean, unit):
    st = S.open_store(clean)
    if unit.endswith(":7"):
        v = st.column("decoder.1.ffn.hidden")[:, 7].astype(np.float64)
    else:
        v = np.linalg.norm(st.column("decoder.0.self_attn.head1.C").astype(np.float64), axis=1)
    order = np.lexsort((np.arange(len(v)), -v))[:6]
    top = top_examples(st, unit, k=6, chunk_rows=37)  # chunks cut across the best rows
    assert [e["row"] for e in top.examples] == order.tolist()
    assert np.allclose([e["value"] for e in top.examples], v[order], rtol=1e-6)
    e = top.examples[0]
    assert e["pieces"][e["at"]] == st.piece(int(st.row_files("tokens")[e["row"]]))


def test_top_bad_units_are_one_line(clean, capsys):
    for unit, says in [("decoder.1.ffn.hidden:512", "has units 0..511"),
                       ("decoder.3.self_attn.head0", "which"), ("feature:3", "--sae"),
                       ("decoder.1.ffn.hiden", "holds no step")]:  # fmt: skip
        assert says in refused(["top", clean, "--unit", unit], capsys)


CAPPED = """
import resource, sys
import numpy as np
from glassformer.corpus.store import open_store
from glassformer.corpus.top import top_examples
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[2]), vm + int(sys.argv[2])))
st = open_store(sys.argv[1])
if sys.argv[3] == "whole":
    st.column("x")
else:
    print(top_examples(st, "x:5", k=3).examples[0]["row"])
"""


def test_top_reads_a_store_larger_than_its_address_space(tmp_path):
    """A store of 6 shards x 24 MiB under a cap of 64 MiB above what Python has mapped at the
    start: `top` finds the planted row; the control, the column loaded whole, runs out."""
    out, width, rows = tmp_path / "big", 512, 12288
    rng = np.random.default_rng(0)
    shards = []
    for k in range(6):
        v = rng.standard_normal((rows, width), dtype=np.float32)
        if k == 4:
            v[777, 5] = 100.0
        ids = {"tokens": np.zeros(rows), "document": np.full(rows, k), "position": np.arange(rows)}
        S.write_shard(out, S.shard_name(k), S.shard_arrays(ids, {"x": v}, "float32"),
                      {"rows": rows, "first_document": k, "documents": 1})  # fmt: skip
        shards.append({"name": S.shard_name(k), "rows": rows, "first_document": k, "documents": 1})
    index = {"format": S.FORMAT, "version": S.VERSION, "model": {"name": "m", "fingerprint": ""},
             "config": {}, "corpus": {}, "dtype": "float32", "steps": {"x": {"width": width}},
             "shards": shards, "rows": 6 * rows, "documents": 6}  # fmt: skip
    S.write_json(out, S.INDEX, index)
    size = sum(p.stat().st_size for p in out.rglob("*.npy"))
    cap = 64 * 2**20
    assert size > 2 * cap

    def run(how):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        args = [sys.executable, "-c", CAPPED, str(out), str(cap), how]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)

    ok = run("top")
    assert ok.returncode == 0 and ok.stdout.strip() == str(4 * rows + 777), ok.stderr
    whole = run("whole")
    assert whole.returncode != 0 and "MemoryError" in whole.stderr


# -- under torchrun: 2 processes equal 1 ----------------------------------------------------------


def test_two_processes_under_torchrun_equal_one(clean, corpus, tmp_path):
    """`torchrun --nproc_per_node 2 -m glassformer.cli record-corpus ...` (gloo on the CPU): each
    rank writes its own shards of its block of documents, rank 0 the index; the store's rows, in
    the index's order, are the one-process store's, and so are the values."""
    import socket

    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "two"
    torchrun = Path(sys.executable).with_name("torchrun")
    argv = [str(torchrun), "--nproc_per_node", "2", "--master-addr", "127.0.0.1",
            "--master-port", str(port), "-m", "glassformer.cli", "record-corpus",
            str(ROOT / "models" / "char-lm"), str(corpus), "--steps", STEPS, "--out", str(out),
            "--shard-rows", "50", "--check-rows", "2", "--threads", "1"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("recorded 279 rows") == 1  # rank 0 alone prints
    one, two = S.open_store(clean), S.open_store(out)
    ranks = [s["rank"] for s in two.index["shards"]]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1} and two.index["world"] == 2
    for k in ("tokens", "document", "position"):
        assert np.array_equal(one.row_files(k), two.row_files(k)), k
    for n in one.steps:
        assert scaled_error(two.column(n), one.column(n).astype(np.float64)) < 1e-6, n


def test_top_ranks_an_sae_feature_as_the_sae_computes_it(clean, tmp_path):
    """`top --unit feature:N --sae SAE` (the SAE folder read by corpus/saelens.py): the best rows
    equal a sort of the feature computed by the SAE's own NumPy encoder over the whole column."""
    from glassformer.corpus import sae, saelens

    argv = ["sae", "train", str(clean), "--step", "decoder.1.ffn.hidden", "--features", "16",
            "--steps", "5", "--batch-size", "64", "--out", str(tmp_path / "sae"),
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    st = S.open_store(clean)
    cfg, p = saelens.read(tmp_path / "sae")
    f = sae.encode(cfg, p, st.column(cfg.step).astype(np.float64))[:, 3]
    order = np.lexsort((np.arange(len(f)), -f))[:5]
    top = top_examples(st, "feature:3", k=5, sae=tmp_path / "sae", chunk_rows=50)
    assert [e["row"] for e in top.examples] == order.tolist()
    assert np.allclose([e["value"] for e in top.examples], f[order], rtol=1e-12)


HOLD = """
import sys, time
from glassformer import files
with files.locked(sys.argv[1], "record-corpus"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_one_writer_per_folder(corpus, tmp_path, capsys):
    """A second record-corpus into a folder another process is writing (holding its lock) is
    refused in one line naming that process, and writes nothing there."""
    out = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True, env=env)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        err = refused(["record-corpus", ROOT / "models" / "char-lm", corpus, "--steps", STEPS,
                       "--out", out], capsys)  # fmt: skip
        assert f"process {holder.pid}" in err and "is in use" in err
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
