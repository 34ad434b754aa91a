"""Round two's runs: the lock on an output folder, training_state.pt checked field by field on
--resume, and the training steps a new user meets first.

Families: lock (one writer per output folder: a second is refused naming the holder, a killed
holder's lock is taken over), resume (every field of the training state against the model,
config.json as the run started, steps, repeating the run's own options), newuser (`train lm
--preset tiny` works out of the box; the same command again with --resume continues). Table rows
run the command line through tests/table.py; the rest are real processes (two trainings on one
--out, kill -9 of a holder, damaged states that used to crash torch) and hypothesis fuzzing of
training_state.pt.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from table import (  # noqa: E402
    Case,
    build_models,
    case_id,
    check_case,
    config_edit,
    copy_of,
    edit,
    one_error_line,
    state_edit,
)

from glassformer import files, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

CASES: list = []


def add(family, argv, message, **kw):
    CASES.append(Case(family, argv, message, **kw))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory)


# -- lock: one writer per output folder -----------------------------------------------------------

HOLDER = {"pid": 4242, "command": "glassformer train lm", "since": "2026-12-01 09:30:00"}
HELD = "process 4242 (glassformer train lm, since 2026-12-01 09:30:00) is writing it"
_HOLDERS: list[int] = []  # lock files held by the setups below, released after each test


@pytest.fixture(autouse=True)
def _release_holders():
    yield
    while _HOLDERS:
        os.close(_HOLDERS.pop())


def held(name, record=HOLDER, then=None):
    """A setup: {tmp}/NAME's lock held, as another process holds it (its own open file, flock),
    the lock file naming `record` (raw bytes as they are; None: nothing written yet)."""

    def setup(tmp, models):
        if then:
            then(tmp, models)
        fd = os.open(files.lock_file(tmp / name), os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if record is not None:
            os.write(fd, record if isinstance(record, bytes) else json.dumps(record).encode())
        _HOLDERS.append(fd)

    return setup


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def stale(name, record=None):
    """A setup: the lock file a killed holder of {tmp}/NAME left (no one holds it)."""

    def setup(tmp, models):
        data = record if record is not None else {**HOLDER, "pid": _dead_pid()}
        data = data if isinstance(data, bytes) else json.dumps(data).encode()
        files.lock_file(tmp / name).write_bytes(data)

    return setup


def hf_folder(tmp, models):
    assert main(["export-hf", str(models / "lm"), str(tmp / "hf")]) == 0


LM = ["--data", "{models}/corpus.txt", "--quiet", "--set", "d_model=16", "--set", "n_heads=2",
      "--set", "d_ff=32", "--set", "max_len=16", "--set", "block_size=16"]  # fmt: skip
RESUME_LM = ["train", "lm", "--out", "{bad}", *LM, "--set", "max_steps=3", "--resume"]
for argv, setup in [
    (["init", "{tmp}/out"], held("out")),
    (["init", "{tmp}/out", "--overwrite"], held("out", then=copy_of("hello"))),
    (["init", "{tmp}/out/"], held("out")),  # the same folder spelt with a slash
    (["init", "{tmp}/sub/../out"], held("out")),
    (["export", "{dec}", "{tmp}/out"], held("out")),
    (["export", "{dec}", "{tmp}/out", "--dtype", "float32", "--overwrite"], held("out")),
    (["export", "{lm}", "{tmp}/out", "--average", "1"], held("out")),
    (["export-hf", "{dec}", "{tmp}/out"], held("out")),
    (["import-hf", "{tmp}/hf", "{tmp}/out"], held("out", then=hf_folder)),
    (["train", "lm", "--out", "{tmp}/out", *LM, "--set", "max_steps=2"], held("out")),
    (["train", "lm", "--out", "{bad}", *LM, "--overwrite"], held("bad", then=copy_of("lm"))),
    (RESUME_LM, held("bad", then=copy_of("lm"))),  # a second --resume while the first runs
    (
        [
            "train",
            "translate",
            "--out",
            "{bad}",
            "--data",
            "{models}/pairs.tsv",
            "--valid",
            "{models}/pairs.tsv",
            "--quiet",
            "--resume",
        ],
        held("bad", then=copy_of("tr")),
    ),  # fmt: skip
]:
    add("lock", argv, HELD, setup=setup)


def _linked_parent(tmp, models):
    (tmp / "link").symlink_to(tmp, target_is_directory=True)
    held("out")(tmp, models)


add("lock", ["init", "{tmp}/link/out"], HELD, setup=_linked_parent)  # another path to the folder
add("lock", ["init", "{tmp}/out"], "another process (not yet named", setup=held("out", None))
add("lock", ["init", "{tmp}/out"], "another process (not yet named",
    setup=held("out", b"\xff junk"))  # fmt: skip
add("lock", ["init", "{tmp}/out"], "another process (not yet named",
    setup=held("out", b"[" * 4000))  # fmt: skip
add("lock", ["init", "{tmp}/out"], "another process (not yet named",
    setup=held("out", {"pid": "4242"}))  # fmt: skip
add("lock", ["init", "{tmp}/out"], "process 4242 (evil second line, since",
    setup=held("out", {**HOLDER, "command": "evil\nsecond line"}))  # fmt: skip
add("lock", ["init", "{tmp}/out"], "wait for it to finish or stop it (kill 4242)",
    setup=held("out"))  # fmt: skip
# a lock left by a killed process is taken over (and said); a lock of another folder is no bar
add("lock", ["init", "{tmp}/out"], "took over the lock", code=0, setup=stale("out"))
add("lock", ["init", "{tmp}/out"], "which no longer runs", code=0, setup=stale("out"))
add("lock", ["init", "{tmp}/out"], "wrote", code=0, setup=stale("out", b"junk"))
add("lock", ["init", "{tmp}/out"], "wrote", code=0, setup=stale("out", b""))
add("lock", ["train", "lm", "--out", "{tmp}/out", *LM, "--set", "max_steps=1"], "took over",
    code=0, setup=stale("out"))  # fmt: skip
add("lock", RESUME_LM, "step=3", code=0, setup=lambda t, m: (copy_of("lm")(t, m),
                                                            stale("bad")(t, m)))  # fmt: skip
add("lock", ["export", "{dec}", "{tmp}/out"], "took over", code=0, setup=stale("out"))
add("lock", ["init", "{tmp}/out"], "wrote", code=0, setup=held("other"))
add("lock", ["init", "{tmp}/out"], "wrote", code=0, setup=held("out.lock"))
add("lock", ["init", "{tmp}/out.lock"], "wrote", code=0, setup=held("out"))


TINY_RUN = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32", "--set", "max_len=16",
            "--set", "block_size=16", "--set", "eval_interval=50", "--set", "eval_iters=1",
            "--set", "threads=1", "--quiet"]  # fmt: skip


def _steps(out: Path) -> list[int]:
    with open(out / "log.csv") as fh:
        return [int(r["step"]) for r in csv.DictReader(fh)]


CASES.append(("lock", "two trainings on one --out at once"))


def test_two_trainings_on_one_out_at_once(models, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "glassformer.cli", "train", "lm", "--out", str(out), "--data",
            str(models / "corpus.txt"), *TINY_RUN, "--set", "max_steps=20"]  # fmt: skip
    procs = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], errs  # without the lock both pass the empty-folder check: [0, 0]
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    line = one_error_line(errs[loser])
    assert f"process {procs[winner].pid} (glassformer train lm, since" in line, line
    assert "Traceback" not in errs[winner]
    cfg, params, _ = weights.load(out)  # the winner's checkpoint, whole
    assert len(params) == len(weights.spec(cfg)) and _steps(out) == list(range(1, 21))
    assert not files.lock_file(out).exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "run"
    ]


CASES.append(("lock", "refused while a real train holds the folder, taken over after kill -9"))


def test_writers_are_refused_while_a_training_runs_and_a_killed_ones_lock_is_taken_over(
    models, tmp_path, capsys
):
    out = tmp_path / "run"
    hf_folder(tmp_path, models)
    argv = [sys.executable, "-m", "glassformer.cli", "train", "lm", "--out", str(out), "--data",
            str(models / "corpus.txt"), *TINY_RUN, "--set", "max_steps=100000",
            "--set", "eval_interval=5"]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.time() + 120
        while not (out / "log.csv").exists() and time.time() < deadline:
            time.sleep(0.05)  # the first checkpoint is saved: the run is well under way
        assert proc.poll() is None
        writers = [
            ["init", str(out), "--overwrite"],
            ["export", str(models / "dec"), str(out), "--overwrite"],
            ["export-hf", str(models / "dec"), str(out), "--overwrite"],
            ["import-hf", str(tmp_path / "hf"), str(out), "--overwrite"],
            [
                "train",
                "lm",
                "--out",
                str(out),
                "--data",
                str(models / "corpus.txt"),
                "--resume",
                "--quiet",
                "--set",
                "max_steps=100001",
            ],  # fmt: skip
        ]
        capsys.readouterr()
        for w in writers:
            assert main(w) == 2, w
            line = one_error_line(capsys.readouterr().err)
            assert f"process {proc.pid} (glassformer train lm, since" in line, line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert files.lock_file(out).exists()  # left by the killed holder, naming it
    step = _steps(out)[-1]
    code = main(["train", "lm", "--out", str(out), "--data", str(models / "corpus.txt"),
                 "--resume", "--quiet", "--set", f"max_steps={step + 1}"])  # fmt: skip
    out_, err = capsys.readouterr()
    assert code == 0, err
    assert f"took over the lock of {out} left by process {proc.pid}" in err
    assert not files.lock_file(out).exists() and _steps(out)[-1] == step + 1


CASES.append(("lock", "the swap and the clean-up of temporaries never touch the lock file"))


def test_the_lock_file_survives_the_swap_and_the_removal_of_temporaries(models, tmp_path):
    cfg, params, tok = weights.load(models / "hello")
    target = tmp_path / "ck"
    stale_tmp = tmp_path / f".ck.{_dead_pid()}.abc"  # a killed writer's temporary: removed
    stale_tmp.mkdir()
    with files.locked(target, "test") as previous:
        assert previous is None
        record = files.lock_file(target).read_bytes()
        assert json.loads(record)["pid"] == os.getpid()
        weights.save(target, cfg, params, tokenizer=tok)
        weights.save(target, cfg, params, tokenizer=tok, overwrite=True)  # swapped in again
        assert files.lock_file(target).read_bytes() == record and not stale_tmp.exists()
        with files.locked(target, "nested"):  # the same process again: re-entrant
            pass
        assert files.lock_file(target).exists()
        with pytest.raises(files.FolderInUse, match=f"process {os.getpid()} \\(test, since"):
            _lock_in_another_open_file(target)
    assert not files.lock_file(target).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def _lock_in_another_open_file(target):
    """files.locked as another process would call it (this process's record forgotten)."""
    lock = files.lock_file(target)
    saved = files._HELD.pop(lock)
    try:
        with files.locked(target, "second"):
            pass
    finally:
        files._HELD[lock] = saved


CASES.append(("lock", "the Python API's train() is refused while another writer holds out"))


def test_the_library_train_is_refused_while_the_folder_is_held(models, tmp_path):
    from glassformer.training.tasks import prepare_task
    from glassformer.training.train import TrainConfig, train

    cfg = weights.load(models / "lm")[0]
    tcfg = TrainConfig(max_steps=1, block_size=16, eval_iters=1)
    cfg, task = prepare_task("lm", cfg, tcfg, str(models / "corpus.txt"))
    held("run")(tmp_path, models)
    with pytest.raises(GlassformerError, match="process 4242 .* is writing it"):
        train(cfg, tcfg, task, tmp_path / "run")
    assert not (tmp_path / "run").exists()


CASES.append(("lock", "many writers in turn: never two inside the lock at once"))

COUNTER = """
import sys, time
from pathlib import Path
from glassformer import files
target, done = Path(sys.argv[1]), 0
while done < 40:
    try:
        with files.locked(target, "counter"):
            n = int((target.parent / "n").read_text())
            time.sleep(0.0005)
            (target.parent / "n").write_text(str(n + 1))
            done += 1
    except files.FolderInUse:
        pass
"""


def test_the_lock_excludes_under_contention(tmp_path):
    """Processes taking and leaving the lock in a loop, each adding one to a counter inside it: a
    lost update would show two holders at once (the file unlinked by one, locked by two)."""
    (tmp_path / "n").write_text("0")
    argv = [sys.executable, "-c", COUNTER, str(tmp_path / "out")]
    procs = [subprocess.Popen(argv, env=ENV) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert (tmp_path / "n").read_text() == "120"
    assert not files.lock_file(tmp_path / "out").exists()


# -- resume: training_state.pt checked field by field ---------------------------------------------

RESUME = ["train", "translate", "--out", "{bad}", "--data", "{models}/pairs.tsv", "--valid",
          "{models}/pairs.tsv", "--quiet", "--resume"]  # fmt: skip
MORE = [*RESUME, "--set", "max_steps=3"]


def _opt(fn):
    return lambda s: fn(s["optimizer"])


def _entry(i, key, value):
    def change(s):
        entry = s["optimizer"]["state"][i]
        entry[key] = value(entry) if callable(value) else value

    return change


def _group(i, key, value):
    def change(s):
        group = s["optimizer"]["param_groups"][i]
        group[key] = value(group) if callable(value) else value

    return change


def _set(key, value):
    return lambda s: s.__setitem__(key, value)


def _log(fn):
    def change(s):
        rows = json.loads(s["log"])
        fn(rows)
        s["log"] = json.dumps(rows)

    return change


def _row(key, value):
    return _log(lambda rows: rows[0].__setitem__(key, value))


def _state_config(**changes):
    def change(s):
        s["config"] = json.dumps(json.loads(s["config"]) | changes)

    return change


F32 = torch.float32
STATE_CASES = [
    # the moments of AdamW: their parameter's shape and dtype, finite (a wrong shape segfaulted)
    (_entry(0, "exp_avg", torch.zeros(3)), "'exp_avg' must be"),
    (_entry(1, "exp_avg_sq", torch.zeros(7, 7)), "'exp_avg_sq' must be"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].double()), "torch.float64"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].long()), "torch.int64"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].half()), "torch.float16"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].to_sparse()), "'exp_avg' must be"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].to(torch.complex64)), "'exp_avg' must be"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].tolist()), "'exp_avg' must be"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"][None]), "'exp_avg' must be"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].fill_(float("nan"))), "not finite"),
    (_entry(0, "exp_avg", lambda e: e["exp_avg"].fill_(float("inf"))), "not finite"),
    (_entry(0, "exp_avg_sq", lambda e: e["exp_avg_sq"].fill_(-1.0)), "< 0"),
    # the step count of each parameter: a whole number within the run's steps
    (_entry(0, "step", torch.tensor(-5.0)), "'step' -5.0"),
    (_entry(0, "step", torch.zeros(3)), "scalar float tensor"),
    (_entry(0, "step", "x"), "scalar float tensor"),
    (_entry(0, "step", 2), "scalar float tensor"),
    (_entry(0, "step", torch.tensor(2)), "scalar float tensor"),
    (_entry(0, "step", torch.tensor(2.5)), "whole number"),
    (_entry(0, "step", torch.tensor(99.0)), "in [0, 2]"),
    (_entry(0, "step", torch.tensor(float("inf"))), "'step' inf"),
    (_entry(0, "max_exp_avg_sq", lambda e: e["exp_avg"]), "state ['exp_avg', 'exp_avg_sq',"),
    (lambda s: s["optimizer"]["state"][0].pop("exp_avg"), "state ['exp_avg_sq', 'step']"),
    (lambda s: s["optimizer"]["state"].__setitem__(0, [1, 2]), "state list"),
    # the parameter ids: this model's, in its groups
    (lambda s: s["optimizer"]["state"].__setitem__(9999, {}), "parameter 9999"),
    (lambda s: s["optimizer"]["state"].__setitem__("0", {}), "parameter '0'"),
    (_opt(lambda o: o.__setitem__("state", [1, 2])), "'state' is not a dictionary"),
    (_opt(lambda o: o.pop("state")), "must hold 'state' and 'param_groups'"),
    (_set("optimizer", [1, 2]), "must hold 'state' and 'param_groups'"),
    (_opt(lambda o: o.__setitem__("param_groups", {})), "this model's 2 groups"),
    (_opt(lambda o: o["param_groups"].append(dict(o["param_groups"][0]))), "2 groups"),
    (_opt(lambda o: o["param_groups"].__setitem__(0, "g")), "group 0 is not a dictionary"),
    (_group(0, "params", lambda g: [0] * len(g["params"])), "this model's parameters"),
    (_group(0, "params", lambda g: [str(i) for i in g["params"]]), "this model's parameters"),
    (_group(0, "params", lambda g: [i + 1 for i in g["params"]]), "this model's parameters"),
    (_group(1, "params", lambda g: g["params"][:-1]), "group 1 does not list"),
    # the hyper-parameters: numbers (this run's TrainConfig sets their values)
    (_group(0, "lr", "x"), "'lr' is 'x'"),
    (_group(0, "betas", (1,)), "'betas' is (1,)"),
    (_group(0, "betas", (0.9, float("nan"))), "'betas'"),
    (_group(0, "eps", float("nan")), "'eps' is nan"),
    (_group(0, "weight_decay", 10**400), "'weight_decay'"),
    (_group(0, "weight_decay", True), "'weight_decay' is True"),
    (_group(0, "amsgrad", "yes"), "'amsgrad' is 'yes'"),
    (lambda s: s["optimizer"]["param_groups"][0].pop("lr"), "group 0 has no 'lr'"),
    # the random generators' states (an invalid one made torch and random.setstate raise)
    (_set("torch_rng", torch.zeros(5056, dtype=torch.uint8)), "not a valid generator state"),
    (_set("torch_rng", torch.zeros(5056, dtype=torch.int64)), "uint8 tensor"),
    (_set("torch_rng", torch.zeros(2, 2528, dtype=torch.uint8)), "uint8 tensor"),
    (_set("python_rng", [2**40] * 625), "in [0, 2**32)"),
    (_set("python_rng", [1] * 624 + [625]), "position <= 624"),
    (_set("python_rng", [-1] * 625), "in [0, 2**32)"),
    (_set("python_rng", [0] * 625), "all zeros"),
    (_set("python_rng", [True] * 625), "python_rng"),
    (_set("python_rng", [1.0] * 625), "python_rng"),
    (_set("python_rng", "x" * 625), "python_rng"),
    # the log rows: one a step, numbers where numbers are read
    (_row("step", "x"), "row 1 must have step 1"),
    (_log(lambda rows: rows.__setitem__(0, {})), "row 1 must have step 1"),
    (_log(lambda rows: rows.reverse()), "row 1 must have step 1, got 2"),
    (_row("step", True), "row 1 must have step 1, got True"),
    (_row("elapsed_s", "x"), "elapsed_s must be a number"),
    (_row("elapsed_s", float("nan")), "elapsed_s must be a finite number"),
    (_row("elapsed_s", -1.0), "elapsed_s must be a finite number"),
    (_row("elapsed_s", 10**400), "elapsed_s must be a finite number"),
    (_row("loss", "low"), "loss must be a number"),
    (_row("notes", [1, 2]), "notes must be a number"),
    (_log(lambda rows: rows[0].pop("loss")), "row 1 has no loss"),
    (_log(lambda rows: rows.pop()), "has 1 rows for step 2"),
    (_set("log", json.dumps({"step": 1})), "must be a JSON list of rows"),
    # the step: within the run's max_steps, one log row each
    (_set("step", 10**6), "is 1000000, beyond the run's max_steps 2"),
    (_set("step", 3), "is 3, beyond the run's max_steps 2"),
    (_set("step", 1), "has 2 rows for step 1"),
    (_set("step", 2.0), "must be a non-negative integer"),
    # the model the run was started with
    (_set("config", "{junk"), "'config' is not a model config"),
    (_set("config", 5), "'config' is not a model config"),
    (_state_config(d_ff=64), "d_ff is 32, the run was started with 64"),
    (_state_config(activation="relu"), "activation is 'gelu', the run was started with 'relu'"),
    # the data position
    (_set("data", json.dumps({"kind": "lm"})), "'data' does not fit this data"),
    (_set("data", json.dumps({})), "'data' does not fit this data"),
]
for fn, msg in STATE_CASES:
    add("resume", MORE, msg, setup=state_edit(fn))
for change, msg in [
    (config_edit(activation="relu"), "activation is 'relu', the run was started with 'gelu'"),
    (config_edit(activation="silu"), "activation is 'silu', the run was started with 'gelu'"),
    (config_edit(ln_eps=1e-3), "ln_eps is 0.001"),
    (config_edit(embed_scale=False), "embed_scale is False"),
]:
    add("resume", MORE, msg, setup=edit("tr", "config.json", change))
add("resume", MORE, "config.json was changed since the run was saved",
    setup=edit("tr", "config.json", config_edit(activation="relu")))  # fmt: skip
# steps: a resumed run must have steps left to train (it used to exit 0 doing nothing)
add("resume", [*RESUME, "--set", "max_steps=1"], "is at step 2 and max_steps is 1",
    setup=copy_of("tr"))  # fmt: skip
add("resume", [*RESUME, "--set", "max_steps=2"], "give --set max_steps=N with N > 2",
    setup=copy_of("tr"))  # fmt: skip
add("resume", RESUME, "nothing to train", setup=copy_of("tr"))  # a finished run
add("resume", MORE, "max_steps 2 -> 3", code=0, setup=copy_of("tr"))
add("resume", [*MORE, "--set", "beta2=0.9"], "beta2 0.98 -> 0.9", code=0, setup=copy_of("tr"))
_STRIDED = _entry(0, "exp_avg", lambda e: e["exp_avg"].t().contiguous().t())  # a strided view
add("resume", MORE, "step=3", code=0, setup=state_edit(_STRIDED))
add("resume", MORE, "step=3", code=0, setup=state_edit(lambda s: s.pop("config")))  # older states
# the run's own options may be repeated; others are refused
TR_SETS = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32", "--set", "max_len=24",
           "--set", "n_encoder_layers=1", "--set", "n_decoder_layers=1"]  # fmt: skip
add("resume", [*MORE, "--preset", "translator", *TR_SETS], "max_steps 2 -> 3", code=0,
    setup=copy_of("tr"))  # fmt: skip
add("resume", [*MORE, "--tokenizer", "sp-bpe"], "max_steps 2 -> 3", code=0, setup=copy_of("tr"))
add("resume", [*MORE, "--vocab-size", "400"], "max_steps 2 -> 3", code=0, setup=copy_of("tr"))
add("resume", [*MORE, "--preset", "translator"], "--preset translator gives d_model",
    setup=copy_of("tr"))  # fmt: skip
add("resume", [*MORE, "--preset", "hello-world", *TR_SETS], "--preset hello-world gives",
    setup=copy_of("tr"))  # fmt: skip
add("resume", [*MORE, "--tokenizer", "bpe"], "started with --tokenizer sp-bpe",
    setup=copy_of("tr"))  # fmt: skip
add("resume", [*MORE, "--vocab-size", "500"], "started with --vocab-size 400",
    setup=copy_of("tr"))  # fmt: skip


def _fine_tuned(tmp, models):
    assert main(["train", "lm", "--init", str(models / "lm"), "--out", str(tmp / "bad"),
                 "--data", str(models / "corpus.txt"), "--quiet", "--set", "block_size=16",
                 "--set", "max_steps=1", "--set", "eval_iters=1"]) == 0  # fmt: skip


FT = ["train", "lm", "--out", "{bad}", "--data", "{models}/corpus.txt", "--quiet", "--set",
      "block_size=16", "--set", "max_steps=2", "--set", "eval_iters=1", "--resume"]  # fmt: skip
add("resume", [*FT, "--init", "{lm}"], "step=2", code=0, setup=_fine_tuned)
add("resume", [*FT, "--init", "{dec}"], "--init", setup=_fine_tuned)


CRASHED = {  # damaged states that crashed the process before they were checked
    "exp_avg": _entry(0, "exp_avg", torch.zeros(3)),  # SIGSEGV in the fused AdamW step
    "exp_avg_sq": _entry(1, "exp_avg_sq", torch.zeros(7, 7)),  # SIGSEGV
    "params": _group(0, "params", lambda g: [0] * len(g["params"])),  # SIGSEGV
    "torch_rng": _set("torch_rng", torch.zeros(5056, dtype=torch.uint8)),  # a traceback
}
CASES += [("resume", f"crashed torch, in a real process: {name}") for name in CRASHED]
RESUME_EACH = """
import sys
from glassformer.cli import main
for argv in sys.argv[1:]:
    print(main(argv.split("\\t")), flush=True)
"""


def test_damaged_states_that_crashed_are_one_line_in_a_real_process(models, tmp_path):
    """One process resumes each damaged state in turn: a segfault would end it (rc -11)."""
    runs = []
    for name, fn in CRASHED.items():
        state_edit(fn)(tmp_path, models)
        (tmp_path / "bad").rename(tmp_path / name)
        runs.append("\t".join(a.format(bad=tmp_path / name, models=models) for a in MORE))
    r = subprocess.run([sys.executable, "-c", RESUME_EACH, *runs], capture_output=True,
                       text=True, env=ENV, timeout=300)  # fmt: skip
    assert r.returncode == 0 and r.stdout.split() == ["2"] * len(CRASHED), r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == len(CRASHED) and all("training_state.pt" in x for x in lines), lines


CASES.append(("resume", "a resumed run uses its TrainConfig's hyper-parameters"))


def test_a_resumed_run_takes_its_changed_hyper_parameters(models, tmp_path, capsys):
    """--set beta2 / weight_decay on --resume change the optimizer (the saved param_groups used
    to override them silently while the note said they changed)."""
    shutil.copytree(models / "tr", tmp_path / "bad")
    argv = [a.format(bad=tmp_path / "bad", models=models) for a in MORE]
    code = main([*argv, "--set", "beta2=0.9", "--set", "weight_decay=0.5"])
    assert code == 0, capsys.readouterr()
    groups = torch.load(tmp_path / "bad" / "training_state.pt")["optimizer"]["param_groups"]
    assert [g["betas"] for g in groups] == [(0.9, 0.9)] * 2
    assert [g["weight_decay"] for g in groups] == [0.5, 0.0]


# -- resume: fuzzing training_state.pt ------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ = settings(
    max_examples=int(os.environ.get("GLASSFORMER_FUZZ_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.uint8, torch.bool]
TENSORS = st.builds(
    lambda shape, dtype, fill: torch.full(shape, fill).to(dtype),
    st.lists(st.integers(0, 5), max_size=3).map(tuple),
    st.sampled_from(DTYPES),
    st.sampled_from([0.0, 1.0, -1.0, 2.0, float("nan"), float("inf"), 1e30]),
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6)
    | TENSORS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.integers(-2, 20) | st.text(max_size=4), inner, max_size=4),
    max_leaves=8,
)  # fmt: skip


@pytest.fixture(scope="module")
def run(models, tmp_path_factory):
    """A fresh run to restore the translator's training state into: (folder, state, make)."""
    from glassformer.training.tasks import prepare_task
    from glassformer.training.train import saved_train_config

    folder = tmp_path_factory.mktemp("fz") / "tr"
    shutil.copytree(models / "tr", folder)
    cfg, _, tok = weights.load(folder)
    tcfg = saved_train_config(folder)
    pairs = str(models / "pairs.tsv")
    cfg, task = prepare_task("translate", cfg, tcfg, pairs, pairs, tokenizer=tok)
    state = torch.load(folder / "training_state.pt", weights_only=True)
    return folder, cfg, tcfg, task, state


def _paths(state, prefix=()):
    """Every place in the state (dict keys and list items), as key paths."""
    yield prefix
    items = (
        state.items()
        if isinstance(state, dict)
        else (enumerate(state) if isinstance(state, list | tuple) and len(state) < 50 else ())
    )
    for k, v in items:
        yield from _paths(v, (*prefix, k))  # fmt: skip


def _replaced(state, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(state, dict):
        return {**state, head: _replaced(state[head], rest, value)}
    items = list(state)
    items[head] = _replaced(items[head], rest, value)
    return type(state)(items) if isinstance(state, tuple) else items


@FUZZ
@given(st.data())
def test_fuzzed_training_states_give_only_glassformer_errors(run, data):
    import copy

    from glassformer.torch_model import Transformer
    from glassformer.training.checkpoint import restore
    from glassformer.training.train import make_optimizer

    folder, cfg, tcfg, task, state = run
    changed = copy.deepcopy(state)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(changed))))  # where the state is now
        parent = _get(changed, path[:-1]) if path else None
        if isinstance(parent, dict) and data.draw(st.booleans()):  # drop the entry
            rest = {k: v for k, v in parent.items() if k != path[-1]}
            changed = _replaced(changed, path[:-1], rest)
        else:
            changed = _replaced(changed, path, data.draw(VALUES))
    torch.save(changed, folder / "training_state.pt")
    model = Transformer(cfg)
    opt = make_optimizer(model, tcfg)
    try:
        restore(folder, cfg, model, opt, task, max_step=tcfg.max_steps)
    except GlassformerError:
        pass


def _get(state, path):
    for k in path:
        state = state[k]
    return state


# -- newuser: the first training commands ---------------------------------------------------------

TINY = ["train", "lm", "--preset", "tiny", "--out", "{tmp}/out", "--data", "{models}/corpus.txt",
        "--quiet", "--set", "max_steps=2", "--set", "eval_iters=1"]  # fmt: skip
add("newuser", TINY, "block_size 32, the model's max_len", code=0)  # was: block_size 64 > 32
add("newuser", TINY, "step=2", code=0)
add("newuser", [*TINY, "--set", "max_len=16"], "block_size 16, the model's max_len", code=0)
add("newuser", [*TINY, "--set", "block_size=24"], "step=2", code=0)  # a given one is kept
add("newuser", [*TINY, "--set", "block_size=64"], "block_size 64 exceeds the model's max_len 32")
add("newuser", ["train", "lm", "--init", "{dec}", *TINY[4:]], "block_size 32", code=0)


def _interrupted(argv):
    """A setup: the run of `argv` as it stands after its first step (as if stopped there)."""

    def setup(tmp, models):
        from table import fill

        assert main([*fill(argv, tmp, models), "--set", "max_steps=1"]) == 0

    return setup


for extra in ([], ["--tokenizer", "char"], ["--set", "d_ff=64"]):
    again = [*TINY[:-4], "--set", "max_steps=2", *extra]
    add("newuser", [*again, "--resume"], "resuming", code=0, setup=_interrupted(again))
add("newuser", [*TINY[:-4], "--resume"], "--preset tiny gives d_ff",
    setup=_interrupted([*TINY[:-4], "--set", "d_ff=64"]))  # fmt: skip
add("newuser", [*TINY[:-4], "--preset", "char-lm", "--resume"], "--preset char-lm gives",
    setup=_interrupted(TINY[:-4]))  # fmt: skip

TABLE = [c for c in CASES if isinstance(c, Case)]


@pytest.mark.parametrize("case", TABLE, ids=case_id)
def test_case(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


def test_every_case_is_in_a_family_of_this_file():
    families = [c.family if isinstance(c, Case) else c[0] for c in CASES]
    assert set(families) == {"lock", "resume", "newuser"}
