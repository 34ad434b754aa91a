"""The training time-lapse (views.py, `train --snapshot-views`): the head scores against hand-made
attention and a real library's cross-entropy, the recorded maps against the reference engine's
trace of the saved checkpoint, resume == uninterrupted, the bounds, and the flags' refusals."""

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import glassformer  # noqa: E402
from glassformer import data as D  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import Config, ConfigError  # noqa: E402
from glassformer.training import views  # noqa: E402
from glassformer.training.tasks import prepare_task  # noqa: E402
from glassformer.training.train import TrainConfig, train  # noqa: E402

PROBE = "abcdefabcdef"
TINY = dict(d_model=32, n_heads=2, d_ff=32, max_len=32, n_decoder_layers=2)


def test_prefix_and_previous_scores_on_hand_made_attention():
    ids = [5, 6, 7, 5, 6, 7]  # the second 5 looks at 6 (after the first 5), etc.
    assert views.prefix_targets(ids) == [[], [], [], [1], [2], [3]]
    T = len(ids)
    induction = np.zeros((T, T))
    for i in range(T):
        induction[i, max(i - 2, 0) if i >= 3 else 0] = 1.0  # i-2: the token after i's twin
    assert views.prefix_score(induction, ids) == 1.0
    assert views.previous_score(induction) == pytest.approx(1 / 5)  # only row 1 looks at 0
    previous = np.eye(T, k=-1)
    previous[0, 0] = 1.0
    assert views.previous_score(previous) == 1.0
    assert views.prefix_score(previous, ids) == 0.0
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    assert views.prefix_score(uniform, ids) == pytest.approx(np.mean([1 / 4, 1 / 5, 1 / 6]))
    assert views.prefix_score(uniform, [1, 2, 3]) is None  # nothing repeats
    assert views.previous_score(np.ones((1, 1))) is None


def test_position_losses_equal_torch_cross_entropy():
    rng = np.random.default_rng(0)
    logits, ids = rng.normal(size=(7, 11)) * 3, list(rng.integers(0, 11, 7))
    want = torch.nn.functional.cross_entropy(
        torch.tensor(logits[:-1]), torch.tensor(ids[1:]), reduction="none"
    )
    np.testing.assert_allclose(views.position_losses(logits, ids), want.numpy(), rtol=1e-12)
    assert list(views.repeated([1, 2, 3, 1, 2, 4, 1, 2])) == [0, 0, 0, 1, 0, 0, 1]


def test_the_generated_corpus_repeats_every_segment():
    text = D.read_text("repeats")
    assert text == D.repeated_segments() and len(text) == 300_000  # fixed by its seed
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

    def again(t: str) -> float:  # the share of 4-grams seen again 4-28 characters later
        hits = [t[i : i + 4] in t[i + 4 : i + 32] for i in range(0, 20_000)]
        return float(np.mean(hits))

    shuffled = "".join(np.random.default_rng(0).permutation(list(text[:20_100])))
    assert again(text) > 0.15 and again(shuffled) < 0.01


def _job(tmp_path, **kw):
    (tmp_path / "text.txt").write_text(D.read_text("tinyshakespeare")[:5000])
    cfg = Config(arch="decoder", vocab_size=1, positions="learned", norm="pre", **TINY)
    settings = dict(task="lm", max_steps=12, batch_size=4, block_size=16, eval_interval=6)
    settings |= dict(eval_iters=2, warmup_steps=2, snapshot_views=PROBE, view_every=4) | kw
    tcfg = TrainConfig(**settings)
    return (*prepare_task("lm", cfg, tcfg, str(tmp_path / "text.txt")), tcfg)


def test_recorded_views_are_the_reference_engines_maps_of_the_checkpoint(tmp_path):
    cfg, task, tcfg = _job(tmp_path)
    rows = train(cfg, tcfg, task, tmp_path / "run")
    v = views.load(tmp_path / "run")
    assert v.text == PROBE and v.every == 4 and [f.step for f in v.frames] == [0, 4, 8, 12]
    last = v.frames[-1]
    assert last.row["loss"] == pytest.approx(rows[-1]["loss"]) and "val_loss" in last.row
    m = glassformer.load(tmp_path / "run", engine="reference")  # the saved weights, float32
    run = m.run(PROBE, quiet=True)
    assert last.tokens["decoder"] == m.runtime.readable(run.ids)
    for layer in range(2):
        A = last.maps[f"decoder.{layer}.self_attn"]
        assert A.dtype == np.float16 and A.shape == (2, len(run.ids), len(run.ids))
        for h in range(2):
            want = run.trace[f"decoder.{layer}.self_attn.head{h}.A"]
            np.testing.assert_array_equal(A[h], want.astype(np.float16))
            score = views.prefix_score(want, run.ids)
            got = last.metrics["prefix"][f"decoder.{layer}.self_attn"][h]
            assert got == pytest.approx(score, abs=1e-12)
    losses = views.position_losses(run.logits, run.ids)
    assert last.metrics["probe_loss"] == pytest.approx(losses.mean(), abs=1e-12)
    assert v.frames[0].metrics["probe_loss"] != last.metrics["probe_loss"]  # it trained


def test_a_resumed_run_records_the_views_of_an_uninterrupted_one(tmp_path):
    cfg, task, tcfg = _job(tmp_path)
    train(cfg, tcfg, task, tmp_path / "full")
    cfg, task, _ = _job(tmp_path)
    train(cfg, tcfg, task, tmp_path / "cut", stop_at=8)  # interrupted at a view
    assert [f.step for f in views.load(tmp_path / "cut").frames] == [0, 4, 8]
    cfg, task, _ = _job(tmp_path)
    train(cfg, tcfg, task, tmp_path / "cut", resume=True)
    full, cut = views.load(tmp_path / "full"), views.load(tmp_path / "cut")
    assert [f.step for f in cut.frames] == [f.step for f in full.frames] == [0, 4, 8, 12]
    for a, b in zip(full.frames, cut.frames, strict=True):
        assert a.metrics == b.metrics
        for name in a.maps:
            np.testing.assert_array_equal(a.maps[name], b.maps[name])
    cfg, task, _ = _job(tmp_path)
    other = TrainConfig(**{**tcfg.__dict__, "snapshot_views": "another text", "max_steps": 20})
    with pytest.raises(glassformer.errors.GlassformerError, match="same snapshot_views"):
        train(cfg, other, task, tmp_path / "cut", resume=True)


def test_frames_stay_within_their_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(views, "MAX_FRAMES", 3)
    cfg, task, tcfg = _job(tmp_path, max_steps=20, view_every=2)
    train(cfg, tcfg, task, tmp_path / "run")
    v = views.load(tmp_path / "run")
    assert len(v.frames) <= 3 and v.every == 8  # 2 -> 4 -> 8 as the frames filled up
    assert [f.step for f in v.frames] == [0, 8, 16]
    monkeypatch.setattr(views, "MAX_FRAMES", 128)
    monkeypatch.setattr(views, "MAX_BYTES", 8 * 1200)  # one frame of this probe: 1,152 bytes
    cfg, task, tcfg = _job(tmp_path, max_steps=20, view_every=2)
    train(cfg, tcfg, task, tmp_path / "small")
    v = views.load(tmp_path / "small")
    assert sum(f.nbytes for f in v.frames) <= 9600 and [f.step for f in v.frames] == [
        0,
        4,
        8,
        12,
        16,
        20,
    ]
    monkeypatch.setattr(views, "MAX_BYTES", 8 * 1100)  # the probe's one frame is too big
    cfg, task, tcfg = _job(tmp_path)
    with pytest.raises(ConfigError, match="1,152 bytes a frame.*shorter snapshot_views"):
        train(cfg, tcfg, task, tmp_path / "long")


def test_a_damaged_views_file_is_one_clear_error(tmp_path):
    (tmp_path / views.VIEWS_FILE).write_bytes(b"not a safetensors file")
    with pytest.raises(glassformer.errors.CheckpointError, match="not a glassformer views file"):
        views.load(tmp_path)
    (tmp_path / "none").mkdir()
    assert views.load(tmp_path / "none") is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--view-every", "5"], "--view-every needs --snapshot-views"),
        (["--snapshot-views", ""], "--snapshot-views is empty"),
        (["--snapshot-views", "ab", "--view-every", "0"], "view-every"),
    ],
)
def test_cli_refuses_view_flags_that_do_nothing(capsys, tmp_path, argv, message):
    code = main(["train", "lm", "--out", str(tmp_path / "o"), "--data", "repeats", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_cli_records_views_with_the_default_interval(capsys, tmp_path):
    out = tmp_path / "run"
    args = ["train", "lm", "--out", str(out), "--data", "repeats", "--quiet"]
    args += ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=16", "--set", "max_len=16"]
    args += ["--set", "max_steps=200", "--set", "eval_interval=100", "--set", "eval_iters=1"]
    assert main([*args, "--snapshot-views", "xyzxyz"]) == 0
    v = views.load(Path(out))
    assert v.every == 2 and v.frames[-1].step == 200 and len(v.frames) == 101
    assert (
        main(
            [
                *args[:3],
                str(tmp_path / "b"),
                *args[4:],
                "--snapshot-views",
                "xy",
                "--set",
                "view_every=50",
            ]
        )
        == 0
    )
    assert [f.step for f in views.load(tmp_path / "b").frames] == [0, 50, 100, 150, 200]
