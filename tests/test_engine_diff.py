"""`glassformer diff`, `glassformer.engine_diff` and its renderers (`explain.diff`), against
what is known by construction: one engine against itself differs by zero; the PyTorch engine in
float64 is the reference to 1e-10 at every step (the parity contract); a weight perturbed in one
engine's copy is found at the first step it touches and no earlier; int8 first drifts at the
first linear layer's output; float32 differs by float32 rounding only; transformers itself,
hooked at the same names, is the reference on GPT-2 and BERT folders (float64)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import require  # noqa: E402

from glassformer import engine_diff as D  # noqa: E402
from glassformer import load, weights  # noqa: E402
from glassformer.cli import diff as diff_cli  # noqa: E402
from glassformer.cli.common import CommandParser, Parser, run  # noqa: E402
from glassformer.config import Config  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.explain.diff import to_html, to_text  # noqa: E402
from glassformer.model import Model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAR_LM = ROOT / "models" / "char-lm"
TEXT = "To be"
LN_INTERNALS = ("mean", "std", "normalized")
SMALL = dict(vocab_size=69, d_model=16, n_heads=2, head_dim=8, d_ff=24, max_len=32)
ARCHS = {
    "decoder": dict(arch="decoder", n_decoder_layers=2, norm="pre", positions="learned",
                    activation="gelu"),
    "encoder-decoder": dict(arch="encoder-decoder", n_encoder_layers=2, n_decoder_layers=2),
    "encoder": dict(arch="encoder", n_encoder_layers=2, positions="learned", type_vocab_size=2,
                    embed_norm=True, n_classes=3),
}  # fmt: skip


@pytest.fixture(scope="module")
def tok():
    return load(CHAR_LM).tokenizer


def small(arch: str, tok) -> Model:
    """A small random model of `arch` over the char-lm tokenizer (69 characters)."""
    cfg = Config(**(SMALL | ARCHS[arch]))
    return Model(cfg, weights.init(cfg, seed=0, std=0.3), tok, name=f"small {arch}")


def target(m: Model) -> str | None:
    return "be or" if m.cfg.arch == "encoder-decoder" else None


def int8_kernels() -> None:
    engines = torch.backends.quantized.supported_engines
    require(bool({"x86", "fbgemm"} & set(engines)), "int8 needs PyTorch's x86 kernels")


# -- the library --------------------------------------------------------------------------------


def test_an_engine_against_itself_differs_by_zero(tok):
    m = small("decoder", tok)
    r = D.diff(m, TEXT, ["reference", "reference"], tol=0.0)
    assert r.engines == ["reference", "reference#2"]
    assert len(r.rows) > 30 and r.rows[0].name == "decoder.X" and r.rows[-1].name == "probs"
    for row in r.rows:
        c = row.cells["reference#2"]
        assert c is not None and c.max_abs == 0 and c.max_rel == 0, row.name
    assert r.first_beyond == {"reference#2": None}


@pytest.mark.parametrize("arch", list(ARCHS))
def test_torch_float64_is_the_reference_at_every_step(arch, tok):
    m = small(arch, tok)
    r = D.diff(m, TEXT, ["reference", "torch"], tol=1e-10, target=target(m))
    compared = [row for row in r.rows if row.cells["torch"] is not None]
    assert len(compared) > 30
    worst = max(row.cells["torch"].max_abs for row in compared)
    assert worst < 1e-10 and r.first_beyond["torch"] is None
    assert 0 < worst  # the engines compute differently: a real comparison, not a copy
    missing = r.missing("torch")  # the LayerNorm internals the fused op does not expose ...
    others = [n for n in missing if n.rsplit(".", 1)[-1] not in LN_INTERNALS]
    assert others == [], others  # ... and nothing else (the classifier's steps are in both)
    if arch == "encoder-decoder":  # both stacks, the encoder's first
        names = [row.name for row in r.rows]
        assert names.index("encoder.output") < names.index("decoder.X")
        assert "decoder.1.cross_attn.head1.A" in names


PERTURBED = [
    ("decoder", "decoder.layers.1.ffn.w1.weight", "decoder.1.ffn.hidden"),
    ("decoder", "decoder.layers.0.self_attn.v.weight", "decoder.0.self_attn.head0.V"),
    ("encoder-decoder", "decoder.layers.0.ffn.w2.weight", "decoder.0.ffn.out"),
    ("encoder", "encoder.layers.1.self_attn.o.weight", "encoder.1.self_attn.Z"),
]


@pytest.mark.parametrize("kind", ["reference", "torch"])
@pytest.mark.parametrize(("arch", "param", "first"), PERTURBED)
def test_a_perturbed_weight_is_found_at_the_first_step_it_touches(arch, param, first, kind, tok):
    m = small(arch, tok)
    params = {n: a.copy() for n, a in m.params.items()}
    # One weight: 1e-3 on all of W could vanish (a LayerNorm's output sums to zero, and one
    # removes what is added to every feature alike).
    params[param][0, 0] += 1e-3
    other = D.Engine(kind, m.with_params(params), label="perturbed")
    r = D.diff(m, TEXT, ["reference", other], tol=1e-8, target=target(m))
    assert r.first_beyond["perturbed"] == first
    names = [row.name for row in r.rows]
    at = names.index(first)
    before = [row.cells["perturbed"] for row in r.rows[:at]]
    assert at > 5 and all(c is None or c.max_abs < 1e-12 for c in before)
    assert r.rows[at].cells["perturbed"].max_abs > 1e-5
    assert r.row("logits").cells["perturbed"].max_abs > 1e-6
    assert "on the weights of small" in r.kinds["perturbed"]


@pytest.mark.parametrize(
    ("model", "first"),
    [("char-lm", "decoder.0.self_attn.head0.Q"), ("encoder", "encoder.0.self_attn.head0.Q")],
)
def test_int8_first_drifts_at_the_first_linear_layer(model, first, tok):
    int8_kernels()
    m = load(CHAR_LM) if model == "char-lm" else small(model, tok)
    r = D.diff(m, TEXT, ["reference", "float32", "int8"], tol=1e-4)
    assert r.first_beyond == {"float32": None, "int8": first}
    at = [row.name for row in r.rows].index(first)
    before = [row.cells["int8"] for row in r.rows[:at] if row.cells["int8"] is not None]
    assert before and all(c.max_abs < 1e-6 for c in before)  # float32 rounding until then
    assert r.rows[at].cells["int8"].max_rel > 1e-3  # int8's per-row scales: ~0.5% and more
    assert "first step beyond 0.0001: " + first in to_text(r)


def test_float32_differs_by_float32_rounding(tok):
    m = load(CHAR_LM)
    r = D.diff(m, TEXT, ["reference", "float32"], tol=1e-4)
    cells = [row.cells["float32"] for row in r.rows if row.cells["float32"] is not None]
    assert max(c.max_rel for c in cells) < 1e-5 and max(c.max_abs for c in cells) < 1e-4
    assert max(c.max_abs for c in cells) > 1e-8  # it is float32, not float64
    assert r.first_beyond["float32"] is None
    tight = D.diff(m, TEXT, ["reference", "float32"], tol=1e-9)
    assert tight.first_beyond["float32"] == "decoder.input"  # X + P, rounded to float32


def test_compare_counts_non_finite_values():
    inf, nan = np.inf, np.nan
    assert D.compare(np.array([1.0, -inf, nan]), np.array([1.0, -inf, nan])).max_abs == 0
    assert D.compare(np.array([1.0, inf]), np.array([1.0, 2.0])).max_abs == inf
    assert D.compare(np.array([1.0, nan]), np.array([1.0, 2.0])).max_abs == inf
    c = D.compare(np.array([1.0, 3.5]), np.array([1.0, -4.0]))
    assert (c.max_abs, c.max_rel) == (7.5, 7.5 / 4.0)
    assert D.compare(np.zeros((2, 3)), np.zeros((3, 2))).note.startswith("shape 2 × 3")
    assert D.compare(np.array([True, False]), np.array([True, True])).max_abs == 1


def test_engines_are_checked_before_any_work(tok):
    m = small("decoder", tok)
    with pytest.raises(GlassformerError, match="unknown engine 'torh'; .* did you mean torch"):
        D.diff(m, TEXT, ["reference", "torh"])
    with pytest.raises(GlassformerError, match="at least two engines"):
        D.diff(m, TEXT, ["reference"])
    with pytest.raises(GlassformerError, match="not one: drop hf"):
        D.diff(m, TEXT, ["reference", "hf"])
    with pytest.raises(GlassformerError, match="tolerance"):
        D.diff(m, TEXT, tol=-1.0)
    with pytest.raises(GlassformerError, match="^target is for an encoder-decoder"):
        D.diff(m, TEXT, target="be")
    assert diff_cli.parse_engines(" reference , int8 ") == ["reference", "int8"]


W2 = "decoder.layers.0.ffn.w2.weight"


def test_the_result_as_data_and_page(tok):
    m = small("decoder", tok)
    params = dict(m.params, **{"decoder.layers.0.ffn.w2.weight": m.params[W2] * 1.001})
    r = D.diff(m, TEXT, ["reference", "torch", D.Engine("torch", m.with_params(params), "p")])
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))  # strict JSON
    assert data["against"] == "reference" and data["first_beyond"] == {"torch": None, "p": (
        "decoder.0.ffn.out")}  # fmt: skip
    row = next(x for x in data["rows"] if x["name"] == "decoder.0.ffn.out")
    assert row["shape"] == [5, 16] and row["engines"]["p"]["beyond"] is True
    assert next(x for x in data["rows"] if x["name"].endswith("norm1.mean"))["engines"] == {
        "torch": None, "p": None}  # fmt: skip
    page = to_html(r)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    first = next(line for line in page.split("<tr") if "decoder.0.ffn.out<" in line)
    assert "first" in first.split(">")[0] and "first beyond the tolerance: p" in first
    assert page.count("changed first") == 1 and 'class="absent"' in page


# -- transformers itself ------------------------------------------------------------------------

WORDS = "the a man woman eats food bread hello world is".split()


def _randomize(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.3
            p.copy_(1.0 + noise / 3 if p.ndim == 1 and name.endswith("weight") else noise)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    from glassformer.tokenizer import BPETokenizer

    folder = tmp_path_factory.mktemp("gpt2")
    config = transformers.GPT2Config(vocab_size=300, n_positions=24, n_embd=24, n_layer=2, n_head=3)
    model = transformers.GPT2LMHeadModel(config).eval()
    _randomize(model, 0)
    model.save_pretrained(folder)
    bpe = BPETokenizer.train([" ".join(WORDS) * 3], vocab_size=300)
    (folder / "tokenizer.json").write_text(bpe.hf_json)
    return folder


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *"bcdfgjkopqruvxyz"]
    folder = tmp_path_factory.mktemp("bert")
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=24, num_attention_heads=3, num_hidden_layers=2,
        intermediate_size=40, max_position_embeddings=32,
    )  # fmt: skip
    model = transformers.BertModel(config).eval()
    _randomize(model, 1)
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return folder


def _every_block(stack: str, n: int, pre: bool) -> list[str]:
    """The steps each block exposes as a module's input or output, in either family."""
    names = []
    for i in range(n):
        b = f"{stack}.{i}"
        names += [f"{b}.self_attn.head{h}.{x}" for h in range(3) for x in "QKVA"]
        names += [f"{b}.{s}" for s in ("self_attn.concat", "self_attn.Z", "add1", "norm1.out")]
        names += [f"{b}.{s}" for s in ("norm2.out", "ffn.hidden", "ffn.out", "add2", "out")]
    return names + ([f"{stack}.norm.out"] if pre else []) + [f"{stack}.output"]


@pytest.mark.parametrize("family", ["gpt2", "bert"])
def test_transformers_hooked_at_the_same_names_is_the_reference(family, gpt2_dir, bert_dir):
    m = load(gpt2_dir if family == "gpt2" else bert_dir)
    assert m.family == family
    r = D.diff(m, "the man eats bread", ["reference", "hf"], tol=1e-4)
    assert r.first_beyond["hf"] is None
    exposed = {row.name for row in r.rows if row.cells["hf"] is not None}
    if family == "gpt2":
        want = ["decoder.X", "decoder.P", "decoder.input", "logits"]
        want += _every_block("decoder", 2, pre=True)
    else:
        want = ["encoder.X", "encoder.P", "encoder.types", "encoder.sum", "encoder.embed_norm.out"]
        want += ["encoder.input", *_every_block("encoder", 2, pre=False)]
    assert set(want) <= exposed, sorted(set(want) - exposed)
    assert max(r.row(n).cells["hf"].max_abs for n in exposed) < 1e-10  # float64 both
    stack = "decoder" if family == "gpt2" else "encoder"
    assert r.row(f"{stack}.0.self_attn.head0.scores").cells["hf"] is None
    assert "not in hf" in to_text(r)


def test_hf_finds_a_weight_only_transformers_holds(gpt2_dir):
    m = load(gpt2_dir)
    params = dict(m.params)
    params["decoder.layers.1.self_attn.k.weight"] = (
        params["decoder.layers.1.self_attn.k.weight"] * 1.01
    )
    r = D.diff(m.with_params(params), "the man eats bread", ["reference", "hf"], tol=1e-8)
    assert r.first_beyond["hf"] == "decoder.1.self_attn.head0.K"  # their c_attn's middle third


# -- the command line ---------------------------------------------------------------------------


def cli(capsys, *argv) -> tuple[int, str, str]:
    """`glassformer diff ...` through this module's parser alone (the lead registers it)."""
    p = Parser(prog="glassformer")
    sub = p.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    diff_cli.add_parsers(sub)
    try:
        args = p.parse_args(["diff", *map(str, argv)])
    except SystemExit as e:
        out, err = capsys.readouterr()
        return e.code, out, err
    code = run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_the_table(capsys):
    int8_kernels()
    code, out, err = cli(
        capsys, CHAR_LM, TEXT, "--engines", "reference,torch,int8", "--tol", "1e-4"
    )
    assert code == 0, err
    lines = out.splitlines()
    q = next(line for line in lines if line.startswith("decoder.0.self_attn.head0.Q "))
    assert q.endswith("<- first beyond: int8") and "*" in q
    assert any(line.startswith("logits ") for line in lines)
    assert "torch: no step beyond 0.0001" in out
    assert "int8: first step beyond 0.0001: decoder.0.self_attn.head0.Q" in out


def test_cli_writes_json_and_html(capsys, tmp_path):
    j, h = tmp_path / "d.json", tmp_path / "d.html"
    code, out, err = cli(capsys, CHAR_LM, TEXT, "--json", j, "--html", h)
    assert code == 0, err
    data = json.loads(j.read_text())
    assert data["engines"] == ["reference", "torch"] and len(data["rows"]) == 198
    assert data["rows"][0]["name"] == "decoder.X" and data["first_beyond"] == {"torch": None}
    assert h.read_text().startswith("<!DOCTYPE html>")
    assert f"wrote the differences at 198 steps to {j}" in out
    code, _, err = cli(capsys, CHAR_LM, TEXT, "--json", j)
    assert code == 2 and "--overwrite" in err


def test_cli_refuses_an_unknown_engine_in_one_line(capsys):
    code, out, err = cli(capsys, CHAR_LM, TEXT, "--engines", "reference,tensorrt")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "glassformer: error: unknown engine 'tensorrt'; use some of reference, torch, float32, "
        "int8, hf"
    ]
    code, _, err = cli(capsys, CHAR_LM, TEXT, "--tol", "-1")
    assert code == 2 and len(err.splitlines()) == 1 and "--tol must be a number > 0" in err


def test_the_parser_is_built_by_add_parsers_alone():
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    diff_cli.add_parsers(sub)
    assert "diff" in sub.choices


@pytest.mark.parametrize("case", ["llama-gqa2", "llama-mha-tied-1e6", "qwen2-gqa4-1e6"])
def test_transformers_llama_and_qwen2_hooked_at_the_same_names(case, tmp_path):
    """A Llama or Qwen2 folder made by transformers: its own model, hooked, gives the reference's
    Q, the shared K/V heads, the gate, the up projection and every block's output; a weight
    changed in our copy only is found at the first step it touches."""
    pytest.importorskip("transformers")
    from test_hf_llama import CASES, build

    _, path, _ = build(case, tmp_path / case)
    m = load(path)
    kv = CASES[case][1]["num_key_value_heads"]
    r = D.diff(m, "Hello world", ["reference", "hf"], tol=1e-5)
    assert r.first_beyond["hf"] is None
    exposed = {row.name for row in r.rows if row.cells["hf"] is not None}
    want = ["decoder.X", "decoder.input", "decoder.norm.out", "decoder.output", "logits"]
    for i in range(m.cfg.n_decoder_layers):
        b = f"decoder.{i}"
        want += [f"{b}.self_attn.head{h}.{x}" for h in range(m.cfg.n_heads) for x in "QA"]
        shared = "kv_head" if kv < m.cfg.n_heads else "head"  # (one K/V head per query head)
        want += [f"{b}.self_attn.{shared}{g}.{x}" for g in range(kv) for x in "KV"]
        want += [f"{b}.{s}" for s in ("norm1.out", "self_attn.concat", "self_attn.Z", "add1")]
        want += [f"{b}.ffn.{s}" for s in ("gate", "up", "hidden", "out")] + [f"{b}.out"]
    assert set(want) <= exposed, sorted(set(want) - exposed)
    assert r.row("decoder.0.self_attn.head0.Q_rot").cells["hf"] is None  # inside their attention
    params = dict(m.params)
    params["decoder.layers.1.ffn.w3.weight"] = params["decoder.layers.1.ffn.w3.weight"] * 1.01
    r = D.diff(m.with_params(params), "Hello world", ["reference", "hf"], tol=1e-5)
    assert r.first_beyond["hf"] == "decoder.1.ffn.up"
