"""`explain --why` (issue 40, point 6): the report carries why the model predicted what it did, each
part checked against another oracle: the translator's choice at the step where the kept and the
given translations part (its gap: the two hypotheses' own log-probabilities) is the logit
difference the attribution graph explains (the graph's logit: the reference run's), and the head
shown is the one with the largest direct edge into it, its score the trace's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from glassformer import load
from glassformer.cli import main

ROOT = Path(__file__).resolve().parents[1]
EN_ES, CHAR_LM = str(ROOT / "models" / "en-es"), str(ROOT / "models" / "char-lm")


@pytest.fixture(scope="module")
def translated(tmp_path_factory):
    out = tmp_path_factory.mktemp("why") / "why.json"
    args = ["explain", EN_ES, "Hello world.", "--why", "--versus", "Hola mundo.", "--only", "A"]
    assert main([*args, "--json", str(out)]) == 0
    return json.loads(out.read_text())["why"]


def test_the_choice_the_graph_and_the_head_agree(translated):
    choice, graph, qk = translated["choice"], translated["circuit"]["graph"], translated["qk"]
    part = choice["parting"]
    assert (part["step"], part["token"], part["versus"]) == (2, "␣el", "␣mundo")
    assert graph["logit"] == pytest.approx(part["logprob_gap"], abs=1e-10)
    assert (
        graph["target"] == f"logit[{part['token_id']}] - logit[{part['versus_id']}] at position 2"
    )
    assert graph["error"] < 1e-10
    direct = {e["from"]: abs(e["weight"]) for e in graph["edges"] if e["to"] == "logit"}
    heads = {n: w for n, w in direct.items() if ".head" in n}
    assert qk["head"] + "@2" == max(heads, key=heads.get) and qk["i"] == 2
    run = load(EN_ES).run("Hello world.", target="Hola el mundo.", quiet=True)
    scores = np.asarray(run.trace[qk["head"] + ".scores"])
    assert qk["score"] == pytest.approx(scores[2, qk["j"]], abs=1e-12)


def test_a_decoder_gets_the_graph_of_its_next_token_and_the_page_draws_it(capsys):
    assert main(["explain", CHAR_LM, "ROMEO: But", "--why", "--only", "logits"]) == 0
    text = capsys.readouterr().out
    assert "the attribution graph of" in text and "at position 9" in text and "Ω =" in text
    assert "Why this translation won" not in text and "over the runner-up" not in text
    assert main(["explain", CHAR_LM, "ROMEO: But", "--why", "--html", "-"]) == 0
    page = capsys.readouterr().out
    why = page.split('<section id="gf-why">', 1)[1].split("</section>", 1)[0]
    assert '<svg class="graph"' in why and "Why its strongest head attends there" in why
    assert "http" not in page.split("</style>", 1)[1].replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize(
    "model, args, says",
    [
        (EN_ES, ["--versus", "Hola mundo."], "--versus is --why's other translation: add --why"),
        (CHAR_LM, ["--why", "--versus", "x"], "--versus compares two translations; this model"),
        (EN_ES, ["--why", "--target", "Hola"], "--why explains the model's own translation"),
        (EN_ES, ["--why", "--versus", "Hola el mundo."], "'Hola el mundo.' is the hypothesis kept"),
    ],
)
def test_bad_input_gets_one_line(capsys, model, args, says):
    assert main(["explain", model, "Hello world.", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
