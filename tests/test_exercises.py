"""`glassformer exercises`: every exercise's check passes its reference solution
(tests/exercise_solutions.py) and fails on typical mistakes written here as a learner would write
them, naming the right one; the cases hold the articles' golden numbers; the first wrong element
is the right one; stubs hold no solution; `start` never overwrites unasked; a learner's syntax
error or exception is one line naming their file and line; the command line's exit codes.
"""

import ast
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import exercise_solutions as S
import numpy as np
import pytest
from conftest import load_golden

from glassformer import exercises as E
from glassformer.cli import main
from glassformer.errors import GlassformerError, OutputExists

SOLUTIONS = Path(__file__).with_name("exercise_solutions.py")
NUMBERS = [ex.number for ex in E.catalogue()]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- the path ------------------------------------------------------------------------------------


def test_the_path_covers_both_articles_in_at_least_twelve_exercises():
    rows = E.catalogue()
    assert len(rows) >= 12 and [ex.number for ex in rows] == list(range(1, len(rows) + 1))
    titles = " | ".join(ex.title.lower() for ex in rows)
    topics = ["softmax", "one head", "selfattention_v1", "selfattention_v2", "causal mask"]
    topics += ["dropout", "w_o", "sinusoidal", "textbook", "article's code", "feed-forward"]
    topics += ["encoder block", "cross-attention", "greedy", "beam", "kv cache"]
    for topic in topics:
        assert topic in titles, topic
    assert {ex.article.split(",")[0] for ex in rows} == {"Raschka ch. 3", "The Random Transformer"}
    assert len({ex.filename for ex in rows}) == len(rows)
    assert rows[2].filename == "ex03_selfattention_v1.py"


def test_the_list_says_which_files_exist(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "exercises")
    assert code == 0 and "started" not in out
    assert run(capsys, "exercises", "start", 3)[0] == 0
    code, out, _ = run(capsys, "exercises")
    line = next(x for x in out.splitlines() if x.strip().startswith("3 "))
    assert (
        "SelfAttention_v1" in line
        and "Raschka ch. 3" in line
        and "ex03_selfattention_v1.py" in line
    )
    assert sum("started" in x for x in out.splitlines()) == 1


# -- each check passes its solution --------------------------------------------------------------


@pytest.mark.parametrize("n", NUMBERS)
def test_the_solution_passes(n):
    ex = E.exercise(n)
    result = E.check(n, getattr(S, ex.function))
    assert result.passed and bool(result), result.message
    assert result.cases >= 4 and result.message.endswith(f"passed ({result.cases} cases)")
    assert result.difference is None and result.error is None


@pytest.mark.parametrize("n", NUMBERS)
def test_the_solutions_file_passes_from_the_command_line(capsys, n):
    code, out, _ = run(capsys, "exercises", "check", n, SOLUTIONS)
    assert code == 0 and "passed (" in out


def test_the_cases_hold_the_articles_golden_numbers():
    """The first case of each article exercise is the article's own numbers (tests/golden)."""

    def first(n, part):
        return E.exercise(n).cases()[0].expected[part]

    g = load_golden("rt_06_softmax_example.json")
    np.testing.assert_allclose(first(1, "probs"), g["expected_exact"], rtol=1e-12)
    g = load_golden("rt_03_attention_sqrt3.json")
    np.testing.assert_allclose(first(2, "C"), g["head1"]["output_exact"], atol=1e-9)
    g = load_golden("raschka_02_selfattention_v1.json")["expected"]
    np.testing.assert_allclose(first(3, "C"), g["SelfAttention_v1_output_full"], atol=1e-6)
    g = load_golden("raschka_03_selfattention_v2.json")["expected"]
    np.testing.assert_allclose(first(4, "C"), g["output_full"], atol=1e-6)
    g = load_golden("raschka_04_causal_mask.json")["expected"]
    np.testing.assert_allclose(first(5, "A"), g["attn_weights_masked_softmax_full"], atol=1e-6)
    g = load_golden("rt_04_attention_div30_concat_W0.json")
    np.testing.assert_allclose(first(7, "Z"), g["Z_exact"], atol=1e-9)
    g = load_golden("pe_standard_sinusoidal.json")
    np.testing.assert_allclose(E.exercise(8).cases()[1].expected["PE"], g["d4_pos0to5"], atol=1e-12)
    g = load_golden("rt_05_residual_layernorm.json")
    np.testing.assert_allclose(first(10, "y"), g["output_exact_code_variant"], atol=1e-9)
    np.testing.assert_allclose(first(9, "y"), g["output_printed"], atol=1e-6)
    g = load_golden("raschka_05_dropout.json")
    assert set(np.unique(first(6, "A"))) == {0.0, 2.0}  # ones -> 1/(1-p) or 0 (golden: properties)
    ids = first(14, "ids")
    assert ids[0] == 6 and ids[-1] == 5  # SOS ... EOS of the article's vocabulary


# -- and fails on typical mistakes, naming them ---------------------------------------------------


def _softmax_rows(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _mha(X, heads, W_O, scale=None, by=None, order=1, out=True):
    outs = []
    for WQ, WK, WV in heads[::order]:
        Q, K, V = X @ WQ, X @ WK, X @ WV
        c = scale or math.sqrt(by or K.shape[-1])
        outs.append(S.softmax(Q @ K.T / c) @ V)
    concat = np.concatenate(outs, axis=-1)
    return concat @ W_O if out else concat


def _ln(x, ddof=0, eps=1e-5, inside=True, axis=-1):
    mu, var = x.mean(axis, keepdims=True), x.var(axis, keepdims=True, ddof=ddof)
    return (x - mu) / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)


def _block(X, heads, W_O, W1, b1, W2, b2, eps=1e-5, order="post", ddof=0):
    def ffn(y):
        return np.maximum(y @ W1 + b1, 0) @ W2 + b2

    if order == "pre":
        Y = X + _mha(_ln(X, eps=eps), heads, W_O)
        return Y + ffn(_ln(Y, eps=eps))
    if order == "none":
        Y = _ln(_mha(X, heads, W_O), eps=eps)
        return _ln(ffn(Y), eps=eps)
    Y = _ln(X + _mha(X, heads, W_O), ddof, eps)
    return _ln(Y + ffn(Y), ddof, eps)


def _cross(Y, M, heads, W_O, mode):
    outs = []
    for WQ, WK, WV in heads:
        if mode == "swap":
            Q, K, V = M @ WQ, Y @ WK, Y @ WV
        else:
            src = Y if mode == "self" else M
            Q, K, V = Y @ WQ, src @ WK, src @ WV
        scores = Q @ K.T / math.sqrt(K.shape[-1])
        if mode == "causal":
            scores = np.where(np.tri(*scores.shape, dtype=bool), scores, -np.inf)
        outs.append(S.softmax(scores) @ V)
    return np.concatenate(outs, axis=-1) @ W_O


def _greedy(step, bos_id, eos_id, max_len, stop=True, keep_eos=True, new_tokens=False):
    ids = [bos_id]
    while len(ids) < max_len + new_tokens:
        t = int(np.argmax(step(ids)))
        if t == eos_id and stop:
            return ids + [t] if keep_eos else ids
        ids.append(t)
    return ids


def _beam(hyps, logprobs, width, mode):
    cands = []
    for h, ((ids, base), row) in enumerate(zip(hyps, logprobs, strict=True)):
        mine = [
            (lp if mode == "alone" else base + lp, ids + [t], base + lp) for t, lp in enumerate(row)
        ]
        mine.sort(key=lambda c: -c[0])
        if mode == "per_hyp":
            cands += mine[:width]
        elif mode != "best" or h == 0:
            cands += mine
    cands.sort(key=lambda c: -c[0])
    return [(ids, s) for _, ids, s in (cands if mode == "per_hyp" else cands[:width])]


def _cached(x, Wq, Wk, Wv, cache, mode):
    K, V = cache
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    if mode == "no_growth":
        return S.softmax(q @ k[None].T / math.sqrt(len(k))) @ v[None], cache
    K, V = np.vstack([K, q if mode == "queries" else k]), np.vstack([V, v])
    c = 1.0 if mode == "unscaled" else math.sqrt(K.shape[-1])
    return S.softmax(q @ K.T / c) @ V, (K, V)


def _sa(X, Wq, Wk, Wv, linear=False, by="d_out", axis=-1, values=True):
    """SelfAttention_v1 (X·W) or v2 (X·Wᵀ), as a learner might get it wrong."""
    Q, K, V = (X @ (W.T if linear else W) for W in (Wq, Wk, Wv))
    c = {"d_out": K.shape[1], "d_in": X.shape[1], "none": 1}[by]
    return _softmax_rows(Q @ K.T / math.sqrt(c), axis=axis) @ (V if values else X)


def _causal(Q, K, mode):
    T = len(Q)
    scaled = Q @ K.T / math.sqrt(K.shape[1])
    if mode == "after":
        return S.softmax(scaled) * np.tri(T)
    if mode == "zero":
        return S.softmax(np.where(np.tri(T) > 0, scaled, 0))
    return S.softmax(np.where(np.tri(T, k=-1) > 0, scaled, -np.inf))  # the diagonal masked


def _positions_j(T, C, split=False):
    """The article's printed table: the dimension index j in the exponent."""
    j = np.arange(C)
    angle = np.arange(T)[:, None] / 10000 ** (2 * j / C)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def _swapped(T, C, split=False):
    PE = S.sinusoidal_positions(T, C + C % 2)
    return PE.reshape(T, -1, 2)[:, :, ::-1].reshape(T, -1)[:, :C]


# (exercise, the learner's wrong function, a substring of the mistake the check must name)
MISTAKES = [
    (1, lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True), "naive softmax"),
    (1, lambda x: _softmax_rows(x, axis=0), "wrong axis"),
    (1, _softmax_rows, "entirely -inf"),
    (2, lambda Q, K, V: S.softmax(Q @ K.T) @ V, "not scaled"),
    (2, lambda Q, K, V: _softmax_rows(Q @ K.T / math.sqrt(K.shape[1]), axis=0) @ V, "wrong axis"),
    (2, lambda Q, K, V: S.softmax(Q @ K.T / K.shape[1]) @ V, "divided by d_k instead"),
    (3, lambda *a: _sa(*a, by="d_in"), "√d_in"),
    (3, lambda *a: _sa(*a, values=False), "value projection left out"),
    (3, lambda *a: _sa(*a, by="none"), "not scaled"),
    (4, lambda *a: _sa(*a, linear=True, by="d_in"), "√d_in"),
    (4, lambda *a: _sa(*a, linear=True, axis=0), "wrong axis"),
    (5, lambda Q, K: _causal(Q, K, "after"), "after the softmax"),
    (5, lambda Q, K: _causal(Q, K, "zero"), "set to 0"),
    (5, lambda Q, K: _causal(Q, K, "diagonal"), "diagonal masked"),
    (6, lambda A, keep, p: A * keep, "not rescaled by 1/(1-p)"),
    (6, lambda A, keep, p: A * keep / p, "1/p instead"),
    (6, lambda A, keep, p: A * (1 - keep) / (1 - p), "mask inverted"),
    (7, lambda X, hs, W_O, scale=None: _mha(X, hs, W_O, scale, by=X.shape[1]), "√d_model inst"),
    (7, lambda X, hs, W_O, scale=None: _mha(X, hs, W_O, scale, out=False), "W_O left out"),
    (7, lambda X, hs, W_O, scale=None: _mha(X, hs, W_O, scale, order=-1), "wrong order"),
    (7, lambda X, hs, W_O, scale=None: _mha(X, hs, W_O), "scale argument ignored"),
    (8, _positions_j, "dimension index j"),
    (8, lambda T, C, split=False: S.sinusoidal_positions(T, C), "interleaved where split"),
    (8, _swapped, "swapped"),
    (9, lambda x, g, b, eps=1e-5: _ln(x, ddof=1, eps=eps) * g + b, "unbiased variance"),
    (9, lambda x, g, b, eps=1e-5: _ln(x, eps=eps, inside=False) * g + b, "standard deviation"),
    (9, lambda x, g, b, eps=1e-5: _ln(x, eps=eps, axis=0) * g + b, "wrong axis"),
    (10, lambda x, eps=1e-6: _ln(x, eps=eps), "under the square root"),
    (10, lambda x, eps=1e-6: _ln(x, ddof=1, eps=eps, inside=False), "unbiased"),
    (11, lambda x, W1, b1, W2, b2: (x @ W1 + b1) @ W2 + b2, "no ReLU"),
    (11, lambda x, W1, b1, W2, b2: np.maximum(S.ffn(x, W1, b1, W2, b2), 0), "second layer too"),
    (11, lambda x, W1, b1, W2, b2: (np.maximum(x @ W1, 0) + b1) @ W2 + b2, "b1 added after"),
    (12, lambda *a, eps=1e-5: _block(*a, eps=eps, order="none"), "no residual"),
    (12, lambda *a, eps=1e-5: _block(*a, eps=eps, order="pre"), "pre-LN"),
    (12, lambda *a, eps=1e-5: _block(*a, eps=eps, ddof=1), "unbiased variance"),
    (13, lambda Y, M, heads, W_O: _cross(Y, M, heads, W_O, "swap"), "queries from the encoder"),
    (13, lambda Y, M, heads, W_O: _cross(Y, M, heads, W_O, "self"), "M is not used"),
    (13, lambda Y, M, heads, W_O: _cross(Y, M, heads, W_O, "causal"), "causal mask"),
    (14, lambda *a: _greedy(*a, stop=False), "did not stop at EOS"),
    (14, lambda *a: _greedy(*a, keep_eos=False), "EOS left out"),
    (14, lambda *a: _greedy(*a, new_tokens=True), "max_len counted as new tokens"),
    (15, lambda h, lp, w: _beam(h, lp, w, "alone"), "new token's log-probability alone"),
    (15, lambda h, lp, w: _beam(h, lp, w, "per_hyp"), "per hypothesis"),
    (15, lambda h, lp, w: _beam(h, lp, w, "best"), "only the best hypothesis"),
    (16, lambda *a: _cached(*a, "no_growth"), "does not grow"),
    (16, lambda *a: _cached(*a, "queries"), "queries cached"),
    (16, lambda *a: _cached(*a, "unscaled"), "not scaled"),
]


@pytest.mark.parametrize(("n", "fn", "named"), MISTAKES, ids=[f"{n}-{m}" for n, _, m in MISTAKES])
def test_a_typical_mistake_fails_and_is_named(n, fn, named):
    result = E.check(n, fn)
    assert not result.passed, f"exercise {n} passed a learner's mistake: {named}"
    d = result.difference
    assert d is not None, result.message
    assert d.mistake and named in d.mistake, result.message
    assert f"typical mistake: {d.mistake}" in result.message and f"hint: {d.hint}" in result.message


def test_every_exercise_catches_at_least_two_typical_mistakes():
    counts = {n: sum(m == n for m, _, _ in MISTAKES) for n in NUMBERS}
    assert min(counts.values()) >= 2, counts


def test_a_mistake_that_breaks_the_shapes_says_so_in_one_line():
    """Raschka's v2 weights used as v1's (X·W with W (d_out, d_in)): numpy's shape error, on the
    learner's line, with the exercise's hint about the layout."""
    result = E.check(4, lambda X, Wq, Wk, Wv: S.attention(X @ Wq, X @ Wk, X @ Wv))
    assert not result.passed and result.error and "\n" not in result.error
    assert "test_exercises.py, line" in result.error and "ValueError" in result.error
    assert "nn.Linear's weight is (d_out, d_in)" in result.error


@pytest.mark.parametrize("n", NUMBERS)
def test_every_listed_mistake_is_recognised_as_itself(n):
    """The catalogue's own variants: each fails its exercise and is named (or, where the article's
    shapes refuse it, fails with the exercise's shape hint)."""
    ex = E.exercise(n)
    for m in ex.mistakes:
        result = E.check(n, m.fn)
        assert not result.passed, m.name
        if result.difference is None:
            assert ex.error_hint and ex.error_hint in result.error, (m.name, result.error)
        else:
            assert result.difference.mistake == m.name, (m.name, result.message)


# -- the first wrong element --------------------------------------------------------------------


def test_the_first_wrong_element_is_the_one_that_is_wrong():
    """One element of the article's SelfAttention_v1 output changed: that index, that value."""

    def nearly(X, Wq, Wk, Wv):
        C = S.self_attention_v1(X, Wq, Wk, Wv)
        if len(X) == 6:  # the article's case only
            C[3, 1] += 0.25
        return C

    result = E.check(3, nearly)
    d = result.difference
    assert not result.passed and d.case_number == 1 and d.index == (3, 1)
    want = load_golden("raschka_02_selfattention_v1.json")["expected"]
    assert d.expected == pytest.approx(want["SelfAttention_v1_output_full"][3][1], abs=1e-6)
    assert d.got == pytest.approx(d.expected + 0.25)
    assert d.part == "C" and 'step "all.C" of glassformer walkthrough self-attention' in d.source
    assert d.mistake is None and "all.scores" in d.hint  # no known mistake: where to look
    assert "first wrong element: C[3, 1]" in result.message


def test_a_wrong_shape_and_a_short_sequence_are_reported():
    result = E.check(3, lambda X, Wq, Wk, Wv: S.self_attention_v1(X, Wq, Wk, Wv).T)
    assert result.difference.index is None
    assert "wrong shape: C is (2, 6), expected (6, 2)" in result.message
    assert result.difference.mistake == "the transpose"
    result = E.check(14, lambda step, b, e, n: S.greedy_decode(step, b, e, n)[:3])
    d = result.difference
    assert d.index == (3,) and d.got is None and "nothing (the sequence ended)" in result.message


def test_a_learner_changing_the_inputs_in_place_does_not_change_the_next_case():
    def scribbles(x):
        out = S.softmax(x)
        x[...] = 0  # the learner's own business
        return out

    assert E.check(1, scribbles).passed


def test_what_a_function_returns_must_be_the_answer():
    for fn, says in ((lambda x: None, "returned None"), (lambda x: (x, x), "tuple of 2 values")):
        result = E.check(1, fn)
        assert not result.passed and says in result.error and "\n" not in result.error
    result = E.check(16, lambda x, Wq, Wk, Wv, cache: x @ Wq)
    assert "return a pair (z, (K, V))" in result.error


# -- stubs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", NUMBERS)
def test_the_stub_has_the_signature_the_words_and_no_solution(n):
    ex = E.exercise(n)
    text = E.stub(n)
    tree = ast.parse(text)
    (fn,) = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
    params = ast.parse(f"def f({ex.params}): pass").body[0].args
    assert fn.name == ex.function and ast.unparse(fn.args) == ast.unparse(params)
    doc, body = ast.get_docstring(fn), fn.body[1:]
    assert [type(b) for b in body] == [ast.Raise] and "NotImplementedError" in ast.unparse(body[0])
    for piece in ("The equations:", "The article:", "Shapes:", "returns"):
        assert piece in doc, piece
    assert ("«" in doc and "seed 0" in doc) or "section 3.5.2" in doc  # the article, cited
    assert f"glassformer exercises check {n} {ex.filename}" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    namespace = {}
    exec(compile(text, ex.filename, "exec"), namespace)
    result = E.check(n, namespace[ex.function])
    assert not result.passed and "NotImplementedError" in result.error
    assert "the stub is not filled in yet" in result.error and "\n" not in result.error


def test_start_writes_the_stub_and_refuses_to_overwrite(capsys, tmp_path):
    code, out, _ = run(capsys, "exercises", "start", 3, tmp_path / "work")
    path = tmp_path / "work" / "ex03_selfattention_v1.py"
    assert code == 0 and f"wrote {path}" in out and path.read_text() == E.stub(3)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
    path.write_text("my work")
    code, out, err = run(capsys, "exercises", "start", 3, tmp_path / "work")
    assert code == 2 and "already exists" in err and "--overwrite" in err and out == ""
    assert len(err.strip().splitlines()) == 1 and path.read_text() == "my work"
    with pytest.raises(OutputExists):
        E.start(3, tmp_path / "work")
    assert run(capsys, "exercises", "start", 3, tmp_path / "work", "--overwrite")[0] == 0
    assert path.read_text() == E.stub(3)


def test_start_goes_through_the_atomic_writer(tmp_path, monkeypatch):
    from glassformer import files

    written = []
    monkeypatch.setattr(files, "write_file", lambda p, data: written.append(p) or Path(p))
    E.start(5, tmp_path)
    assert written == [tmp_path / "ex05_causal_mask.py"]


# -- the learner's file ------------------------------------------------------------------------


def test_a_stub_checked_from_the_command_line_fails_in_one_line(capsys, tmp_path):
    assert run(capsys, "exercises", "start", 2, tmp_path)[0] == 0
    path = tmp_path / "ex02_attention.py"
    code, out, err = run(capsys, "exercises", "check", 2, path)
    line = len(E.stub(2).splitlines())
    assert code == 1 and err == "" and out.count("\n") == 1
    assert out.startswith(f"{path}, line {line}: NotImplementedError: exercise 2: write attention")


BROKEN = {
    "syntax": ("import numpy as np\n\ndef attention(Q, K, V)\n    return Q\n", 3, "SyntaxError"),
    "name": (
        "import numpy as np\n\ndef attention(Q, K, V):\n    A = W @ K\n    return A\n",
        4,
        "NameError: name 'W' is not defined",
    ),
    "raise": (
        "def attention(Q, K, V):\n    return helper(Q)\n\n\ndef helper(Q):\n"
        "    raise ValueError('no')\n",
        6,
        "ValueError: no",
    ),
    "import": ("import numpy as np\nnp.zeros(3)[7]\n", 2, "IndexError"),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_a_broken_file_is_one_line_naming_the_learners_file_and_line(kind, tmp_path):
    """In a fresh process, as a learner runs it: their file and line, no traceback, exit 1."""
    source, line, error = BROKEN[kind]
    path = tmp_path / "ex02_attention.py"
    path.write_text(source)
    argv = [sys.executable, "-m", "glassformer.cli", "exercises", "check", "2", path.name]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stdout + r.stderr and r.stderr == ""
    assert r.stdout.count("\n") == 1 and r.stdout.startswith(f"ex02_attention.py, line {line}: ")
    assert error in r.stdout
    assert not (tmp_path / "__pycache__").exists()  # nothing written beside the learner's file


def test_an_error_raised_below_the_learners_code_names_their_line():
    """A decoding loop that never stops: the step function refuses past max_len, and the line is
    the learner's call of it, not glassformer's frame that raised."""

    def endless(step, bos_id, eos_id, max_len):
        ids = [bos_id]
        while True:
            ids.append(int(np.argmax(step(ids))))  # the line named

    result = E.check(14, endless)
    line = endless.__code__.co_firstlineno + 3
    assert result.error.startswith(f"{__file__}, line {line}: LengthLimit: step() was given")
    assert "glassformer" not in result.error.split(":")[0]


def test_a_file_without_the_function_and_a_learners_own_module(capsys, tmp_path):
    (tmp_path / "helpers.py").write_text(
        "import numpy as np\n\ndef stable(x):\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    )
    (tmp_path / "mine.py").write_text("from helpers import stable as softmax\n")
    code, out, _ = run(capsys, "exercises", "check", 2, tmp_path / "mine.py")
    assert code == 1 and "defines no function attention" in out
    code, out, _ = run(capsys, "exercises", "check", 1, tmp_path / "mine.py")
    assert code == 1 and "entirely -inf" in out  # it ran: helpers imported from the file's folder
    assert str(tmp_path) not in sys.path


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["exercises", "check", "17", "x.py"], "no exercise '17'"),
        (["exercises", "start", "0"], "no exercise '0'"),
        (["exercises", "check", "three", "x.py"], "no exercise 'three'"),
        (["exercises", "check", "3"], "needs FILE"),
        (["exercises", "start"], "needs N"),
        (["exercises", "check", "3", "{tmp}/none.py"], "no such file"),
        (["exercises", "check", "3", "{tmp}"], "a folder"),
        (["exercises", "3"], "invalid choice"),
        (["exercises", "list", "3"], "takes no number"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(capsys, tmp_path, argv, message):
    code, out, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_the_exercises_never_import_torch(tmp_path):
    """NumPy only, like the walkthroughs: listing, a stub and a check start fast."""
    code = (
        "import sys\nfrom glassformer.cli import main\n"
        "assert main(['exercises']) == 0\n"
        f"assert main(['exercises', 'start', '16', {str(tmp_path)!r}]) == 0\n"
        f"assert main(['exercises', 'check', '16', {str(SOLUTIONS)!r}]) == 0\n"
        "print('torch' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "False"


def test_a_wrong_answer_exits_1_and_a_right_one_0(capsys, tmp_path):
    path = tmp_path / "ex01_softmax.py"
    path.write_text(
        "import numpy as np\n\ndef softmax(x):\n    return np.exp(x) / np.exp(x).sum()\n"
    )
    code, out, err = run(capsys, "exercises", "check", 1, path)
    assert code == 1 and "wrong in case" in out and "hint:" in out and err == ""
    path.write_text("from exercise_solutions import softmax\n")
    sys.path.insert(0, str(SOLUTIONS.parent))
    try:
        assert run(capsys, "exercises", "check", 1, path)[0] == 0
    finally:
        sys.path.remove(str(SOLUTIONS.parent))


# -- the Python (Jupyter) path ------------------------------------------------------------------


def test_the_python_path_returns_a_result_object():
    result = E.check(6, lambda A, keep, p: A * keep)
    assert not result and not result.passed and result.number == 6
    d = result.difference
    assert (d.case_number, d.part, d.index) == (1, "A", (0, 0))
    assert (d.expected, d.got) == (2.0, 1.0)  # the book's ones: kept -> 2
    assert d.mistake == "dropout not rescaled by 1/(1-p)" and "1 / (1 - p)" in d.hint
    assert str(result) == repr(result) == result.message
    assert isinstance(E.stub(6), str) and E.catalogue()[5].function == "dropout"
    with pytest.raises(GlassformerError, match="no exercise"):
        E.check(99, print)
    with pytest.raises(GlassformerError, match="checks a function"):
        E.check(1, "softmax")


def test_results_are_json_friendly_for_notebooks():
    d = E.check(2, lambda Q, K, V: S.softmax(Q @ K.T) @ V).difference
    json.dumps({k: v for k, v in vars(d).items()})  # plain numbers and strings


# -- the Python path's guards (in this process: no time limit, see checking's docstring) ----------


def _right_dropout(A, keep, p):
    return A * keep / (1 - p)


@pytest.mark.parametrize(
    ("fn", "says"),
    [
        (lambda A, k, p: (A * k / (1 - p)).astype(complex), "complex numbers (dtype complex128)"),
        (lambda A, k, p: (A * k / (1 - p)).astype(str), "text (dtype <U32)"),
        (lambda A, k, p: (A * k / (1 - p)).astype(object), "Python objects (dtype object)"),
        (lambda A, k, p: k > 0, "booleans, not numbers (dtype bool)"),
        (lambda A, k, p: np.full(A.shape, np.datetime64(1, "s")), "dates (dtype datetime64[s])"),
        (lambda A, k, p: str(float(A[0, 0] * 2)), "text (dtype <U3)"),
    ],
)
def test_an_answer_that_is_not_numbers_fails_with_its_dtype_named(fn, says):
    """float64 would drop an imaginary part, read '2.0' or True as a number: refused instead."""
    result = E.check(6, fn)
    assert not result.passed and result.cases == 0 and result.difference is None
    assert result.error == (
        f"dropout returned {says}: return A as real numbers (float64) (exercise 6, case 1 of 6: "
        "the book's 6 × 6 matrix of ones, p = 0.5)"
    )


def test_integers_and_float32_are_still_numbers():
    assert E.check(6, lambda A, k, p: (A * k / (1 - p)).astype(np.float32)).passed
    assert E.check(14, lambda *a: [np.int64(t) for t in S.greedy_decode(*a)]).passed


class _Halt(BaseException):
    pass


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")

    def __repr__(self):
        raise RuntimeError("no")


def _raises(e):
    def dropout(A, keep, p):
        raise e  # the line named

    return dropout, dropout.__code__.co_firstlineno + 1


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (SystemExit(0), "SystemExit: exit(0) - return the answer instead of ending the program"),
        (KeyboardInterrupt(), "KeyboardInterrupt - raised by your code (a Ctrl-C stops the whole"),
        (_Halt("stop"), "_Halt: stop"),
        (GeneratorExit(), "GeneratorExit"),
        (_Unprintable(), "_Unprintable: (its message cannot be shown: its __str__ raised Runtime"),
        (ValueError("word\n" * 1000), "ValueError: " + "word " * 59 + "wo..."),  # 300 chars
    ],
)
def test_however_the_function_ends_it_is_one_line_naming_its_line(error, says):
    fn, line = _raises(error)
    result = E.check(6, fn)
    assert not result.passed and "\n" not in result.error
    assert result.error.startswith(f"{__file__}, line {line}: {says}")
    assert result.error.endswith(
        "(exercise 6, case 1 of 6: the book's 6 × 6 matrix of ones, p = 0.5)"
    )


def test_a_real_ctrl_c_stops_the_python_check_but_the_learners_own_does_not():
    """A SIGINT while the learner's function runs is the user's Ctrl-C: it stops the check (as
    KeyboardInterrupt); the same exception raised by their code is their answer, one line."""
    import signal

    def interrupted(A, keep, p):
        signal.raise_signal(signal.SIGINT)
        return A * keep / (1 - p)

    with pytest.raises(KeyboardInterrupt):
        E.check(6, interrupted)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    fn, _ = _raises(KeyboardInterrupt())
    assert "raised by your code" in E.check(6, fn).error


def test_a_sigterm_the_command_lines_gate_takes_stops_the_python_check_too():
    """Under the command line's gate (glassformer.interrupts), a SIGTERM while the learner's
    function runs is raised as Stopped: a real stop, never the learner's answer."""
    import signal

    from glassformer import interrupts

    def terminated(A, keep, p):
        signal.raise_signal(signal.SIGTERM)
        return A * keep / (1 - p)

    with interrupts.command() as gate, pytest.raises(interrupts.Stopped) as e:
        try:
            E.check(6, terminated)
        finally:
            interrupts.acted_on(gate.received and interrupts.Stopped(gate.received))
    assert e.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the gate gave it back


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), 10**400, True, "5", None])
def test_check_file_refuses_a_timeout_that_is_not_a_positive_number(bad, tmp_path):
    path = tmp_path / "ex06_dropout.py"
    path.write_text("def dropout(A, keep, p):\n    return A * keep / (1 - p)\n")
    with pytest.raises(GlassformerError, match="positive number of seconds") as e:
        E.check_file(6, path, timeout=bad)
    assert "\n" not in str(e.value) and str(e.value).startswith("timeout=")
    assert E.check_file(6, path, timeout=np.float64(2)).passed
