"""The induction-head demo (recipes/induction-heads.sh, models/induction): in the shipped views an
induction head forms (its prefix-matching score rises past a threshold while the loss on the
repeated tokens drops), the views are those of the shipped weights (the reference engine's maps
of the probe), and the same training, redone here from the shipped settings, forms it again."""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import glassformer  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.training import views  # noqa: E402
from glassformer.training.tasks import prepare_task  # noqa: E402
from glassformer.training.train import TrainConfig, train  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "models" / "induction"


def _best(frame) -> tuple[float, str, int]:
    """(score, site, head) of the frame's highest prefix-matching score."""
    return max((s, site, h) for site, per in frame.metrics["prefix"].items()
               for h, s in enumerate(per))  # fmt: skip


@pytest.fixture(scope="module")
def shipped():
    return views.load(DEMO)


def test_an_induction_head_forms_in_the_shipped_views(shipped):
    first, last = shipped.frames[0], shipped.frames[-1]
    assert first.step == 0 and last.step == 2000 and len(shipped.frames) == 81
    assert _best(first)[0] < 0.1  # untrained: about uniform attention (1/T on average)
    score, site, head = _best(last)
    assert score > 0.6 and site == "decoder.1.self_attn"  # a layer-1 head, as Olsson et al.
    formed = next(f for f in shipped.frames if _best(f)[0] > 0.5)
    assert 500 <= formed.step <= 1500  # a phase change mid-run, not from the start
    # ... while the loss on the tokens an earlier copy gives away drops, and no other does
    assert first.metrics["repeat_loss"] > 3.5 and last.metrics["repeat_loss"] < 1.0
    assert last.metrics["first_loss"] > 3.5
    before = [f for f in shipped.frames if f.step <= formed.step - 200]
    assert max(f.metrics["repeat_loss"] for f in before[-4:]) > 3.2
    # layer 0 holds the previous-token head the induction head reads (K-composition)
    assert max(last.metrics["previous"]["decoder.0.self_attn"]) > 0.3
    assert max(first.metrics["previous"]["decoder.0.self_attn"]) < 0.2


def test_the_shipped_views_are_the_shipped_weights_maps(shipped):
    m = glassformer.load(DEMO, engine="reference")
    run = m.run(shipped.text, quiet=True)
    last = shipped.frames[-1]
    assert last.tokens["decoder"] == m.runtime.readable(run.ids)
    for site, A in last.maps.items():
        layer = int(site.split(".")[1])
        for h in range(A.shape[0]):
            want = run.trace[f"decoder.{layer}.self_attn.head{h}.A"]
            np.testing.assert_allclose(A[h], want, atol=1e-3)  # float16 of float32 weights
            score = views.prefix_score(want, run.ids)
            assert last.metrics["prefix"][site][h] == pytest.approx(score, abs=1e-5)
    losses = views.position_losses(run.logits, run.ids)
    assert last.metrics["probe_loss"] == pytest.approx(losses.mean(), abs=1e-5)


def test_the_recipe_forms_the_head_again(tmp_path):
    """The shipped settings, trained again here for the first 1,250 of their 2,000 steps (the
    same schedule, stopped as if interrupted): the head forms by then."""
    cfg = Config.from_json((DEMO / "config.json").read_text())
    saved = json.loads((DEMO / "train_config.json").read_text())
    tcfg = TrainConfig(**{**saved, "view_every": 250})
    cfg, task = prepare_task("lm", cfg, tcfg, "repeats")
    train(cfg, tcfg, task, tmp_path / "run", stop_at=1250)
    got = views.load(tmp_path / "run")
    assert [f.step for f in got.frames] == [0, 250, 500, 750, 1000, 1250]
    assert _best(got.frames[0])[0] < 0.1
    score, site, _ = _best(got.frames[-1])
    assert score > 0.5 and site == "decoder.1.self_attn"
    assert got.frames[-1].metrics["repeat_loss"] < 2.0 < got.frames[0].metrics["repeat_loss"]
