"""The `modern` walkthrough (from 2017 to today): every shown matrix against an oracle.

Oracles: the reference engine's functions called afresh; rotation matrices written out by hand
from cos and sin; PyTorch's own layer_norm, rms_norm, SiLU and grouped-query
scaled_dot_product_attention; the invariants (rotary scores depend on m − n only, GQA = MHA with
copied key/value heads, RMSNorm of x − μ = LayerNorm); the torch engine's `KVCache` after a
forward for the bytes per token; and the published configs' numbers for the real sizes.
"""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from glassformer import reference as R
from glassformer import weights
from glassformer.cli import main
from glassformer.explain.text import render_matrix
from glassformer.torch_model import KVCache, Transformer
from glassformer.walkthrough import WALKTHROUGHS, modern
from glassformer.walkthrough.random_transformer import EMBEDDINGS
from glassformer.walkthrough.since_2017 import rotation_matrix
from glassformer.walkthrough.since_2017_configs import (
    ATTN,
    FFN,
    LLAMA2_7B,
    LLAMA3_8B,
    STD,
    kv_cache_bytes,
    toy,
)
from glassformer.walkthrough.since_2017_layers import copy_kv_heads

X = EMBEDDINGS  # Hello, World (2, 4)
SEEDS = [0, 1, 7]


@pytest.fixture(scope="module", params=SEEDS)
def run(request):
    return request.param, modern(seed=request.param)


@pytest.fixture(scope="module")
def trace():
    return modern()


def test_registered_beside_the_others():
    assert WALKTHROUGHS["modern"] is modern
    assert list(WALKTHROUGHS) == ["hello-world", "self-attention", "modern"]


# -- 1. sinusoidal vs rotary positions -----------------------------------------------------------


def hand_rotation(m: int, theta=(1.0, 0.01)) -> np.ndarray:
    """RoPE at position m for D = 4 in the rotate_half layout, written out: pair (0, 2) turns by
    m·θ_0, pair (1, 3) by m·θ_1 (θ_i = 10000^(-2i/4))."""
    Rm = np.zeros((4, 4))
    for i, th in enumerate(theta):
        c, s = math.cos(m * th), math.sin(m * th)
        Rm[i, i], Rm[i, i + 2], Rm[i + 2, i], Rm[i + 2, i + 2] = c, -s, s, c
    return Rm


def test_rotation_matrix_is_ropes_turn_written_out(trace):
    cfg = toy(positions="rotary")
    np.testing.assert_allclose(trace["positions.rotary.R_1"], hand_rotation(1), atol=1e-15)
    for m in (0, 1, 3, 100):
        Rm = rotation_matrix(m, cfg)
        np.testing.assert_allclose(Rm, hand_rotation(m), atol=1e-12)
        np.testing.assert_allclose(Rm.T @ Rm, np.eye(4), atol=1e-12)  # a rotation
        np.testing.assert_allclose(Rm.T @ rotation_matrix(m + 2, cfg), hand_rotation(2), atol=1e-12)
    cos, sin = R.rotary_angles(np.arange(2), 4)
    np.testing.assert_array_equal(trace["positions.rotary.cos"], cos)
    np.testing.assert_array_equal(trace["positions.rotary.sin"], sin)


def test_positions_are_the_engines_and_the_hand_rotation(run):
    seed, tr = run
    rot = toy(positions="rotary")
    p = weights.init(rot, seed=seed, std=STD)
    Wq, Wk = p[f"{ATTN}.q.weight"], p[f"{ATTN}.k.weight"]
    np.testing.assert_array_equal(tr["positions.WQ"], Wq.T)
    P = R.sinusoidal_positions(2, 4)
    np.testing.assert_array_equal(tr["positions.sinusoidal.P"], P)
    np.testing.assert_array_equal(tr["positions.sinusoidal.input"], X + P)
    E = X + P
    np.testing.assert_allclose(tr["positions.sinusoidal.head0.scores"], (E @ Wq.T) @ (E @ Wk.T).T)
    Q, K = X @ Wq.T, X @ Wk.T
    Q_rot = np.stack([hand_rotation(m) @ Q[m] for m in range(2)])
    K_rot = np.stack([hand_rotation(m) @ K[m] for m in range(2)])
    np.testing.assert_allclose(tr["positions.rotary.head0.Q"], Q, atol=1e-12)
    np.testing.assert_allclose(tr["positions.rotary.head0.Q_rot"], Q_rot, atol=1e-12)
    np.testing.assert_allclose(tr["positions.rotary.head0.K_rot"], K_rot, atol=1e-12)
    np.testing.assert_allclose(tr["positions.rotary.head0.scores"], Q_rot @ K_rot.T, atol=1e-12)
    with np.errstate(all="raise"):  # the engine's own attention, outside the walkthrough
        Z = R.multi_head_attention(p, ATTN, X, X, R.causal_mask(2), rot, positions=np.arange(2))
    np.testing.assert_array_equal(tr["positions.rotary.Z"], Z)


def test_rotary_scores_depend_only_on_m_minus_n(run):
    seed, tr = run
    grid = tr["positions.rotary.grid"]  # Hello's query at m against World's key at n
    q, k = tr["positions.rotary.head0.Q"][0], tr["positions.rotary.head0.K"][1]
    for m in range(4):
        for n in range(4):
            want = q @ hand_rotation(n - m) @ k  # q·R(m)ᵀR(n)·k = q·R(n − m)·k
            assert grid[m, n] == pytest.approx(want, abs=1e-12)
            if m and n:
                assert grid[m, n] == pytest.approx(grid[m - 1, n - 1], abs=1e-12)
    same = tr["positions.rotary_shifted.head0.scores"]
    np.testing.assert_allclose(same, tr["positions.rotary.head0.scores"], atol=1e-12)
    assert not np.allclose(
        tr["positions.rotary_shifted.head0.Q_rot"], tr["positions.rotary.head0.Q_rot"]
    )
    sin_grid = tr["positions.sinusoidal.grid"]
    assert np.abs(np.diag(sin_grid) - sin_grid[0, 0]).max() > 0.1  # 2017: where, not only how far
    change = tr["positions.shift_change"]
    assert change[1] < 1e-12 < 0.1 < change[0]
    moved = (
        tr["positions.sinusoidal_shifted.head0.scores"] - tr["positions.sinusoidal.head0.scores"]
    )
    assert change[0] == np.abs(moved).max()


def test_shifted_rotary_scores_print_the_same_digits(capsys):
    assert main(["walkthrough", "modern"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split("   ")[0]: b for b in out.split("\n\n")}
    body = [
        blocks[f"positions.{k}.head0.scores"].split("\n")[2:] for k in ("rotary", "rotary_shifted")
    ]
    assert body[0] == body[1] and len(body[0]) == 3
    sinusoidal = [
        blocks[f"positions.{k}.head0.scores"].split("\n")[2:]
        for k in ("sinusoidal", "sinusoidal_shifted")
    ]
    assert sinusoidal[0] != sinusoidal[1]


# -- 2. LayerNorm vs RMSNorm ---------------------------------------------------------------------


def test_norms_are_torchs_and_rmsnorm_of_the_centred_x_is_layernorm(trace):
    x, eps = torch.tensor(X), toy().ln_eps
    ln = F.layer_norm(x, (4,), eps=eps).numpy()
    rms = F.rms_norm(x, (4,), eps=eps).numpy()
    np.testing.assert_allclose(trace["norms.layernorm.out"], ln, atol=1e-12)
    np.testing.assert_allclose(trace["norms.rmsnorm.out"], rms, atol=1e-12)
    np.testing.assert_array_equal(trace["norms.layernorm.mean"], [[2.5], [3.5]])
    np.testing.assert_allclose(trace["norms.centred.out"], ln, atol=1e-12)
    np.testing.assert_allclose(trace["norms.layernorm.out"][0], trace["norms.layernorm.out"][1])
    assert not np.allclose(trace["norms.rmsnorm.out"][0], trace["norms.rmsnorm.out"][1])
    means = trace["norms.out_means"]
    np.testing.assert_allclose(means[:, 0], 0, atol=1e-12)
    np.testing.assert_allclose(means[:, 1], rms.mean(-1), atol=1e-12)
    torch_params = [
        sum(p.numel() for p in m.parameters()) for m in (torch.nn.LayerNorm(4), torch.nn.RMSNorm(4))
    ]
    np.testing.assert_array_equal(trace["norms.params"], torch_params)  # [8, 4]: no β


# -- 3. ReLU FFN vs SwiGLU -----------------------------------------------------------------------


def test_ffns_are_torchs_with_the_same_w1_and_w2(run):
    seed, tr = run
    p = weights.init(toy(ffn_kind="gated", activation="silu"), seed=seed, std=STD)
    W1, W2, W3 = (torch.tensor(p[f"{FFN}.{w}.weight"]) for w in ("w1", "w2", "w3"))
    x = torch.tensor(tr["norms.rmsnorm.out"])
    np.testing.assert_array_equal(tr["ffn.W1"], W1.numpy().T)
    relu = F.relu(F.linear(x, W1))
    np.testing.assert_allclose(tr["relu.ffn.hidden"], relu.numpy(), atol=1e-12)
    np.testing.assert_allclose(tr["relu.ffn.out"], F.linear(relu, W2).numpy(), atol=1e-12)
    gate = F.silu(F.linear(x, W1))
    hidden = gate * F.linear(x, W3)
    np.testing.assert_allclose(tr["swiglu.ffn.silu_gate"], gate.numpy(), atol=1e-12)
    np.testing.assert_allclose(tr["swiglu.ffn.hidden"], hidden.numpy(), atol=1e-12)
    np.testing.assert_allclose(tr["swiglu.ffn.out"], F.linear(hidden, W2).numpy(), atol=1e-12)


def test_ffn_parameter_counts(trace):
    C, Fw = 4, 8
    np.testing.assert_array_equal(
        trace["ffn.params"], [[8, 2 * C * Fw], [8, 3 * C * Fw], [5, 3 * C * 5]]
    )
    model = Transformer(toy(ffn_kind="gated", activation="silu"))  # the torch engine's own count
    held = sum(v.numel() for k, v in model.state_dict().items() if k.startswith(FFN))
    assert held == trace["ffn.params"][1, 1]
    # Llama 2 7B's MLP: 3 × 4096 × 11008 = 135,266,304 (gate_proj, up_proj, down_proj)
    real = trace["ffn.params_llama2_7b"]
    np.testing.assert_array_equal(real[:, 0], [16384, 16384, 11008])
    np.testing.assert_allclose(real[:, 1] * 1e6, [134_217_728, 201_326_592, 135_266_304])


# -- 4. multi-head vs grouped-query attention and the KV cache -----------------------------------


def test_gqa_heads_read_the_key_value_head_the_table_says(run):
    seed, tr = run
    sharing = tr["gqa.sharing"]
    assert sharing.shape == (4, 2) and (sharing.sum(1) == 1).all()
    for h in range(4):
        g = int(sharing[h].argmax())
        Q, K = tr[f"gqa.head{h}.Q"], tr[f"gqa.kv_head{g}.K"]
        np.testing.assert_allclose(tr[f"gqa.head{h}.scores"], Q @ K.T, atol=1e-12)
        other = tr[f"gqa.kv_head{1 - g}.K"]
        assert not np.allclose(tr[f"gqa.head{h}.scores"], Q @ other.T)


def test_gqa_equals_mha_with_copied_heads_and_torchs_grouped_attention(run):
    seed, tr = run
    gqa = toy(n_heads=4, head_dim=2, n_kv_heads=2)
    np.testing.assert_allclose(tr["mha_copied.Z"], tr["gqa.Z"], atol=1e-12)
    assert tr["gqa.copy_difference"] < 1e-12
    p = weights.init(gqa, seed=seed, std=STD)
    x = torch.tensor(tr["norms.rmsnorm.out"])
    q, k, v = (F.linear(x, torch.tensor(p[f"{ATTN}.{w}.weight"])) for w in "qkv")
    heads = [t.view(2, n, 2).transpose(0, 1)[None] for t, n in ((q, 4), (k, 2), (v, 2))]
    C = F.scaled_dot_product_attention(*heads, is_causal=True, enable_gqa=True)  # (1, H, T, D)
    Z = F.linear(C[0].transpose(0, 1).reshape(2, 8), torch.tensor(p[f"{ATTN}.o.weight"]))
    np.testing.assert_allclose(tr["gqa.Z"], Z.numpy(), atol=1e-12)
    copied = copy_kv_heads(p, gqa)[f"{ATTN}.k.weight"].reshape(4, 2, 4)
    for h in range(4):  # head h's copy is its group's key head
        np.testing.assert_array_equal(copied[h], p[f"{ATTN}.k.weight"].reshape(2, 2, 4)[h // 2])


def cache_bytes(cfg, T: int = 2) -> float:
    """Bytes per token per layer that the torch engine's KVCache holds after a forward of T
    tokens, in fp16."""
    torch.manual_seed(0)
    model = Transformer(cfg).half().eval()
    cache = KVCache.empty(cfg.n_decoder_layers)
    with torch.no_grad():
        model(torch.tensor([[0, 2, 0][:T]]), cache=cache)
    held = sum(t.numel() * t.element_size() for t in cache.self_k + cache.self_v)
    assert cache.length == T
    return held / (T * cfg.n_decoder_layers)


def test_kv_cache_bytes_are_the_torch_caches_at_the_toy_size(trace):
    table = trace["gqa.kv_cache_toy"]
    configs = [toy(n_heads=4, head_dim=2, n_kv_heads=kv) for kv in (4, 2, 1)]
    measured = [cache_bytes(c) for c in configs]
    np.testing.assert_array_equal(table[:, 0], [4, 2, 1])
    np.testing.assert_array_equal(table[:, 1], measured)  # [32, 16, 8]
    np.testing.assert_array_equal(table[:, 2], [2 * b for b in measured])  # 2 layers
    assert measured == [kv_cache_bytes(c) for c in configs]


def test_kv_cache_bytes_at_the_real_sizes(trace):
    """The closed form for Llama 2 7B (32 heads of 128, all keeping K and V) and Llama 3 8B (8 key/
    value heads), 32 layers, fp16; and the torch cache at their head shapes (two layers, narrow
    d_model: a cache's size depends on neither)."""
    for cfg in (LLAMA2_7B, LLAMA3_8B):
        assert (cfg.n_heads, cfg.head_dim, cfg.n_decoder_layers, cfg.d_model) == (32, 128, 32, 4096)
    assert (LLAMA2_7B.kv_heads, LLAMA2_7B.d_ff) == (32, 11008)
    assert (LLAMA3_8B.kv_heads, LLAMA3_8B.d_ff, LLAMA3_8B.rope_theta) == (8, 14336, 500000.0)
    table = trace["gqa.kv_cache_real"]
    per_layer = [2 * kv * 128 * 2 for kv in (32, 8, 1)]  # K and V, fp16
    np.testing.assert_array_equal(table[:, 1], per_layer)  # 16384, 4096, 512
    np.testing.assert_array_equal(table[:, 2], [32 * b for b in per_layer])  # 512, 128, 16 KiB
    np.testing.assert_array_equal(table[:, 3], [4096 * 32 * b / 2**30 for b in per_layer])
    assert table[0, 3] == 2.0
    for kv, want in zip((32, 8, 1), per_layer, strict=True):
        shape = toy(d_model=8, n_heads=32, head_dim=128, n_kv_heads=kv, d_ff=8)
        assert cache_bytes(shape) == want


# -- the command: text, JSON, HTML; the docs' excerpt ----------------------------------------


def test_json_holds_every_step_with_the_traces_values(capsys, trace):
    assert main(["walkthrough", "modern", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["walkthrough"] == "modern"
    steps = {s["name"]: s for s in data["steps"]}
    assert list(steps) == trace.names()
    for name in ("positions.rotary.grid", "norms.rmsnorm.out", "swiglu.ffn.hidden", "gqa.Z"):
        np.testing.assert_array_equal(steps[name]["values"], trace[name])
        assert steps[name]["equation"] and steps[name]["note"]
    assert steps["gqa.kv_cache_real"]["rows"] == ["Llama-2-7B", "Llama-3-8B", "MQA"]


def test_seed_and_html(capsys, tmp_path):
    assert main(["walkthrough", "modern", "--seed", "7", "--json", str(tmp_path / "m.json")]) == 0
    data = json.loads((tmp_path / "m.json").read_text())
    steps = {s["name"]: s["values"] for s in data["steps"]}
    np.testing.assert_array_equal(steps["gqa.Z"], modern(seed=7)["gqa.Z"])
    assert not np.array_equal(steps["gqa.Z"], modern(seed=0)["gqa.Z"])
    assert main(["walkthrough", "modern", "--html", str(tmp_path / "m.html")]) == 0
    page = (tmp_path / "m.html").read_text()
    assert "From 2017 to today" in page and "positions.rotary.grid" in page
    capsys.readouterr()
    assert main(["walkthrough", "self-attention", "--seed", "1"]) == 2  # still refused there


def _number(token: str) -> float | None:
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return None


def test_the_text_is_the_narrated_steps(capsys, trace):
    """The printed text read back, not compared with the renderer that wrote it: one block per
    narrated step in the trace's order, each its name, its shape, its note and its values
    (the rows of numbers ending each line, read as numbers: the trace's to 6 digits)."""
    assert main(["walkthrough", "modern"]) == 0
    out = capsys.readouterr().out
    blocks = [b.split("\n") for b in out.strip().split("\n\n")]
    assert [b[0].split()[0] for b in blocks] == [s.name for s in trace.steps if s.note]
    for head, note, *rows in blocks:
        step = trace.step(head.split()[0])
        assert head.endswith(f"   {step.shape}") and note == f"  {step.note}"
        c = step.shape[-1] if step.shape else 1
        want = np.asarray(step.values, dtype=float).reshape(-1, c)  # (r, c)
        got = [[_number(t) for t in r.split()[-c:]] for r in rows if len(r.split()) >= c]
        got = [r for r in got if None not in r]  # not the column labels
        np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-9, err_msg=head)
    narrated = [s.name for s in trace.steps if s.note]
    assert narrated[0] == "positions.X" and narrated[-1] == "gqa.kv_cache_real"
    for name in ("positions.rotary.R_1", "norms.params", "ffn.params", "gqa.kv_cache_toy"):
        assert f"\n{name}   " in f"\n{out}"
    assert render_matrix(trace["gqa.copy_difference"]) == "0"


def test_the_docs_excerpt_is_real_output(capsys):
    """docs/learn/walkthroughs.md shows an excerpt of `walkthrough modern`: each of its steps is
    printed, character for character, by the command."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "learn" / "walkthroughs.md").read_text()
    section = page.split("## From 2017 to today: `walkthrough modern`", 1)[1].split("\n## ", 1)[0]
    assert "glassformer walkthrough modern" in section
    excerpt = re.search(r"An excerpt of `walkthrough modern`.*?\n\n```\n(.*?)```", section, re.S)
    assert excerpt, "the walkthroughs page shows an excerpt of walkthrough modern"
    assert main(["walkthrough", "modern"]) == 0
    out = capsys.readouterr().out
    for block in excerpt.group(1).strip().split("\n\n"):
        assert block in out, block[:80]


def test_the_walkthrough_runs_without_torch():
    """NumPy only, like the other walkthroughs: no torch at run time (it starts fast)."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from glassformer.cli import main\n"
        "assert main(['walkthrough', 'modern', '--json', '-']) == 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert json.loads(done.stdout)["walkthrough"] == "modern"


def test_every_step_is_titled_in_words():
    """Each part of every step's name has its words in the glossary (TITLES for what a step is,
    PLACES for the sections): no title falls back to a raw name such as 'Gqa' or 'R 1'."""
    from glassformer.explain.select import HeadNumbers
    from glassformer.explain.words import naming, title
    from glassformer.glossary import PLACES, TITLES

    tr = WALKTHROUGHS["modern"]()
    structural = {"ffn", "self_attn", "norm"}
    for s in tr.steps:
        *places, leaf = s.name.split(".")
        for part in places:
            indexed = re.fullmatch(r"(kv_head|head|norm|add)\d+", part)
            assert part in PLACES or part in structural or indexed, (s.name, part)
        assert leaf in TITLES or leaf in ("out", "C"), (s.name, leaf)
        shown = title(s.name, naming(tr, HeadNumbers(tr.steps)))
        assert not re.search(r"[a-z]_[a-z]", shown), shown  # (θ_i is notation)
