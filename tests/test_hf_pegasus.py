"""The translator runs anywhere: a pre-LN encoder-decoder exported as a Pegasus folder is loaded by
`transformers` (AutoModelForSeq2SeqLM and AutoTokenizer, in a process where glassformer cannot be
imported) and converted by CTranslate2, and both give glassformer's greedy translation; import-hf
of the folder gives back the same Config and the same float32 weights, bit for bit.

Every supported Config maps both ways against PegasusForConditionalGeneration with random weights
(logits to 1e-5 in float32 and 1e-10 in float64); the shipped models/en-es is compared on the
first 50 validation sentences (two implementations side by side, no translation is hard-coded).
Nothing is downloaded.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from glassformer import decoding, reference, translating, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.config import preset  # noqa: E402
from glassformer.data import read_pairs  # noqa: E402
from glassformer.formats import hf_pegasus, loading  # noqa: E402
from glassformer.tokenizer import BPETokenizer, MetaspaceBPETokenizer  # noqa: E402
from glassformer.torch_model import from_params  # noqa: E402

SHIPPED = Path(__file__).resolve().parent.parent / "models" / "en-es"
SMALL = ("d_model=16", "d_ff=24", "n_heads=2", "max_len=12", "n_encoder_layers=2")
SMALL += ("n_decoder_layers=2", "vocab_size=40")
POSITIONS = ("sinusoidal", "sinusoidal_split", "learned", "none")
COMBOS = list(itertools.product(POSITIONS, (True, False), (True, False), (False, True)))
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def random_params(cfg, seed: int) -> dict[str, np.ndarray]:
    """Every tensor redrawn (biases and LayerNorm gains too), float32 values in float64 arrays:
    what a float32 file holds, so that a round trip through one is bit-exact."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, x in weights.init(cfg, seed=seed, std=0.3).items():
        noise = rng.normal(0.0, 0.1 if name.endswith("bias") or ".norm" in name else 0.0, x.shape)
        out[name] = (x + noise).astype(np.float32).astype(np.float64)
    return out


def small(positions="sinusoidal", share=True, tie=True, logits_bias=False, *more):
    sets = (f"positions={positions}", f"share_embeddings={share}", f"tie_embeddings={tie}")
    return preset("translator").override(*SMALL, *sets, f"logits_bias={logits_bias}", *more)


def hf_model(cfg, state: dict, dtype):
    fields = hf_pegasus.config_to_pegasus(cfg)
    fields = {k: v for k, v in fields.items() if k not in ("model_type", "architectures")}
    config = transformers.PegasusConfig(**fields, pad_token_id=2, decoder_start_token_id=2)
    model = transformers.PegasusForConditionalGeneration(config).to(dtype).eval()
    tensors = {k: torch.from_numpy(np.asarray(v)).to(dtype) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # What the folder leaves out is what transformers ties, or a logits bias that is absent.
    allowed = {hf_pegasus.PEGASUS_BIAS} if not cfg.lm_bias else set()
    if hf_pegasus._tied(cfg):
        allowed |= {hf_pegasus.PEGASUS_HEAD, *hf_pegasus.PEGASUS_EMBED.values()}
    assert set(missing) <= allowed and not unexpected, (missing, unexpected)
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("positions,share,tie,logits_bias", COMBOS)
def test_every_supported_config_maps_both_ways(positions, share, tie, logits_bias, dtype):
    """PegasusForConditionalGeneration with our tensors gives our logits (a padded batch); the
    tensors and the PegasusConfig give back the same Config and the same tensors, bit for bit."""
    cfg = small(positions, share, tie, logits_bias)
    params = random_params(cfg, seed=len(positions) + 2 * share + 4 * tie)
    state = hf_pegasus.glassformer_to_pegasus(params, cfg)
    model = hf_model(cfg, state, dtype)
    src = [[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]]
    tgt = [[2, 11, 12, 13], [2, 14, 15, 16]]
    with torch.no_grad():
        want = model(
            input_ids=torch.tensor(src),
            attention_mask=torch.tensor([[1] * 5, [1] * 3 + [0] * 2]),
            decoder_input_ids=torch.tensor(tgt),
        ).logits.double()
    for b, n in enumerate((5, 3)):
        ref = reference.forward(params, cfg, tgt[b], src_ids=src[b][:n])
        err = float(np.abs(ref - want[b].numpy()).max())
        assert err < TOL[dtype], f"sequence {b}: max |diff| {err:.3g}"
    back_cfg = hf_pegasus.pegasus_config(model.config, state)
    # An untied head has a bias anyway (bias=True): logits_bias says nothing more there.
    assert back_cfg == (cfg if tie else cfg.override("logits_bias=false"))
    back = hf_pegasus.pegasus_to_glassformer(state, back_cfg)
    assert list(back) == list(params)
    assert all(np.array_equal(back[n], params[n]) for n in params)


def test_a_transformers_pegasus_imports(tmp_path):
    """A folder save_pretrained wrote (Pegasus's own half-sin | half-cos positions, a random
    final_logits_bias; then an untied one) reads as a glassformer checkpoint with equal logits."""
    for tied in (True, False):
        config = transformers.PegasusConfig(
            vocab_size=40,
            d_model=16,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=24,
            decoder_ffn_dim=24,
            max_position_embeddings=12,
            activation_function="gelu",
            scale_embedding=tied,
            tie_word_embeddings=tied,
        )
        model = transformers.PegasusForConditionalGeneration(config).eval()
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "embed_positions" not in name:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g))
        model.save_pretrained(tmp_path / str(tied))
        cfg, params, tok = loading.load(tmp_path / str(tied))
        assert tok is None and cfg.positions == "sinusoidal_split" and cfg.activation == "gelu"
        assert (cfg.share_embeddings, cfg.tie_embeddings, cfg.logits_bias) == (tied, tied, tied)
        src, tgt = [5, 6, 7, 3], [0, 8, 9]
        with torch.no_grad():
            want = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt]))
        ref = reference.forward(params, cfg, tgt, src_ids=src)
        assert float(np.abs(ref - want.logits[0].double().numpy()).max()) < 1e-5


# -- a folder transformers loads without glassformer -----------------------------------------------

# Run by a fresh interpreter in which `import glassformer` fails: the folder alone must do.
HF_SCRIPT = r"""
import json, sys
sys.modules["glassformer"] = None
import torch, transformers
folder, texts, forced = sys.argv[1], json.loads(sys.stdin.read()), json.loads(sys.argv[2])
tok = transformers.AutoTokenizer.from_pretrained(folder)
out = {"src": [tok(t)["input_ids"] for t in texts], "tokenizer": type(tok).__name__}
for dtype in sys.argv[3:]:
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=getattr(torch, dtype))
    with torch.no_grad():
        g = model.eval().generate(**tok(texts, return_tensors="pt", padding=True))
        logits = [
            model(input_ids=torch.tensor([s]), decoder_input_ids=torch.tensor([t])).logits[0]
            for s, t in zip(out["src"], forced)
        ]
    out[dtype] = {
        "model": type(model).__name__,
        "ids": g.tolist(),
        "text": tok.batch_decode(g, skip_special_tokens=True),
        "logits": [x.double().tolist() for x in logits],
    }
assert not [m for m, v in sys.modules.items() if m.startswith("glassformer") and v is not None]
print(json.dumps(out))
"""


def run_transformers(folder, texts, forced, dtypes=("float32", "float64")) -> dict:
    """AutoTokenizer + AutoModelForSeq2SeqLM on `folder` in another process: source ids, the
    folder's own generate() settings on the padded batch, teacher-forced logits of `forced`."""
    r = subprocess.run(
        [sys.executable, "-c", HF_SCRIPT, str(folder), json.dumps(forced), *dtypes],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def generated(ids: list[int], bos: int, eos: int) -> list[int]:
    """transformers' output row without the start token, cut at EOS (padding after it)."""
    assert ids[0] == bos
    ids = ids[1:]
    return ids[: ids.index(eos)] if eos in ids else ids


def ours_greedy(cfg, params, tok, texts: list[str], dtype=torch.float32) -> list[list[int]]:
    """glassformer's greedy translation (`translate`'s batched greedy), ids without BOS/EOS."""
    model = from_params(cfg, params, dtype).eval()
    srcs = [tok.encode(t)[: cfg.max_len] for t in texts]
    return translating.greedy_batch(
        model, srcs, tok.pad_id, tok.bos_id, tok.eos_id, cfg.max_len - 1
    )


def texts(n: int, start: int = 0) -> list[str]:
    return [en for en, _ in read_pairs("eng-spa-valid")[start : start + n]]


SETUPS = {
    # The translator preset's choices: one shared √d-scaled matrix, interleaved sinusoids, sp-bpe.
    "translator": ((), MetaspaceBPETokenizer),
    # models/en-es's: learned positions, a separate encoder matrix, byte-level BPE; GELU and a
    # logits bias that makes EOS likely, so that sentences stop at different lengths.
    "en-es-like": (
        ("positions=learned", "share_embeddings=false", "embed_scale=false", "activation=gelu")
        + ("logits_bias=true",),
        BPETokenizer,
    ),
}


@pytest.fixture(scope="module", params=list(SETUPS))
def exported(request, tmp_path_factory):
    """A small random model of each setup saved as a float32 checkpoint and exported."""
    more, kind = SETUPS[request.param]
    pairs = read_pairs("eng-spa-valid")[:300]
    tok = kind.train([s for p in pairs for s in p], vocab_size=600)
    cfg = preset("translator").override(
        f"vocab_size={tok.vocab_size}", "d_model=32", "d_ff=48", "n_heads=4", "max_len=24", *more
    )
    params = random_params(cfg, seed=3)
    if cfg.lm_bias:
        params["lm_head.bias"][tok.eos_id] = 5.0
    base = tmp_path_factory.mktemp(request.param)
    weights.save(base / "ck", cfg, params, tokenizer=tok, dtype="float32")
    assert main(["export-hf", str(base / "ck"), str(base / "hf")]) == 0
    return request.param, base, cfg, params, tok


def test_transformers_loads_the_export_and_translates_like_glassformer(exported):
    name, base, cfg, params, tok = exported
    sentences = texts(12)
    ours = ours_greedy(cfg, params, tok, sentences)
    assert len({len(x) for x in ours}) > 1 or name == "translator"  # EOS reached at several lengths
    forced = [[tok.bos_id, *x][: cfg.max_len] for x in ours[:3]]
    got = run_transformers(base / "hf", sentences, forced)
    assert got["tokenizer"] == "TokenizersBackend"
    assert got["src"] == [tok.encode(t) for t in sentences]  # the encoder sees the same ids
    ref64 = [
        decoding.greedy(
            reference.next_token_logits(params, cfg, tok.encode(t)),
            [tok.bos_id],
            cfg.max_len - 1,
            tok.eos_id,
            max_len=cfg.max_len,
        ).ids[1:]
        for t in sentences[:4]
    ]
    assert [[i for i in x if i != tok.eos_id] for x in ref64] == ours[:4]
    for dtype, tol in (
        ("float32", 1e-5),
        ("float64", 1e-6 if "sinusoidal" in cfg.positions else 1e-10),
    ):
        hf = got[dtype]
        assert hf["model"] == "PegasusForConditionalGeneration"
        assert [generated(x, tok.bos_id, tok.eos_id) for x in hf["ids"]] == ours
        assert hf["text"] == [tok.decode(x) for x in ours]
        for src, tgt, logits in zip(got["src"][:3], forced, hf["logits"], strict=True):
            if dtype == "float32":
                model = from_params(cfg, params, torch.float32).eval()
                with torch.no_grad():
                    want = (
                        model(torch.tensor([tgt]), src_ids=torch.tensor([src]))[0].double().numpy()
                    )
            else:
                want = reference.forward(params, cfg, tgt, src_ids=src)
            err = float(np.abs(np.array(logits) - want).max())
            assert err < tol, f"{dtype}: max |diff| {err:.3g}"


def test_import_hf_of_the_export_round_trips_bit_exactly(exported, capsys):
    name, base, cfg, params, tok = exported
    assert main(["import-hf", str(base / "hf"), str(base / "back")]) == 0
    assert "imported pegasus" in capsys.readouterr().out
    back_cfg, back, back_tok = weights.load(base / "back")
    assert back_cfg == cfg
    assert list(back) == list(params) and all(np.array_equal(back[n], params[n]) for n in params)
    assert back_tok.to_json() == tok.to_json()


def test_ctranslate2_converts_the_export_and_translates_like_glassformer(exported):
    ctranslate2 = pytest.importorskip(
        "ctranslate2", reason="CTranslate2 is the ct2 extra (make demo installs it)"
    )
    from ctranslate2.converters import TransformersConverter

    name, base, cfg, params, tok = exported
    sentences = texts(12)
    TransformersConverter(str(base / "hf")).convert(str(base / "ct2"), force=True)
    translator = ctranslate2.Translator(str(base / "ct2"), device="cpu", compute_type="float32")
    results = translator.translate_batch(
        [tok.tokens(tok.encode(t)) for t in sentences],
        beam_size=1,
        max_decoding_length=cfg.max_len - 1,
        min_decoding_length=0,
        max_input_length=0,
    )
    got = [[tok.id_of(t) for t in r.hypotheses[0]] for r in results]
    assert got == ours_greedy(cfg, params, tok, sentences)


# -- the shipped translator ----------------------------------------------------------------------


@pytest.mark.skipif(not (SHIPPED / "config.json").is_file(), reason="models/en-es is not here")
def test_the_shipped_translator_runs_in_transformers_and_ctranslate2(tmp_path):
    """models/en-es exported: transformers and CTranslate2 give glassformer's greedy translation
    of the first 50 validation sentences, and import-hf gives back the same model."""
    cfg, params, tok = loading.load(SHIPPED)
    assert main(["export-hf", str(SHIPPED), str(tmp_path / "hf")]) == 0
    sentences = texts(50)
    ours = ours_greedy(cfg, params, tok, sentences)
    forced = [[tok.bos_id, *ours[0]][: cfg.max_len]]
    got = run_transformers(tmp_path / "hf", sentences, forced, dtypes=("float32",))
    assert got["src"] == [tok.encode(t) for t in sentences]
    hf = got["float32"]
    assert [generated(x, tok.bos_id, tok.eos_id) for x in hf["ids"]] == ours
    assert hf["text"] == translating.translate(
        from_params(cfg, params, torch.float32).eval(), tok, sentences
    )
    model = from_params(cfg, params, torch.float32).eval()
    with torch.no_grad():
        want = model(torch.tensor(forced), src_ids=torch.tensor(got["src"][:1]))[0].numpy()
    assert float(np.abs(np.array(hf["logits"][0]) - want).max()) < 1e-5
    assert main(["import-hf", str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    back_cfg, back, _ = weights.load(tmp_path / "back")
    assert back_cfg == cfg
    assert all(np.array_equal(back[n], params[n]) for n in params)  # float16 values: exact
    try:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        pytest.skip("CTranslate2 is the ct2 extra (make demo installs it)")
    TransformersConverter(str(tmp_path / "hf")).convert(str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32")
    results = translator.translate_batch(
        [tok.tokens(tok.encode(t)) for t in sentences],
        beam_size=1,
        max_decoding_length=cfg.max_len - 1,
        min_decoding_length=0,
        max_input_length=0,
    )
    assert [[tok.id_of(t) for t in r.hypotheses[0]] for r in results] == ours


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override,needs",
    [
        ("norm=post", "norm='pre'"),
        ("bias=false", "bias=True"),
        ("ln_eps=1e-6", "ln_eps=1e-05"),
        ("embed_norm=true", "embed_norm=False"),
        ("head_dim=4", "head_dim = d_model / n_heads"),
    ],
)
def test_export_hf_refuses_what_pegasus_cannot_express(override, needs, tmp_path, capsys):
    cfg = small().override(override)
    tok = MetaspaceBPETokenizer.train(texts(50), vocab_size=300)
    cfg = cfg.override(f"vocab_size={tok.vocab_size}")
    weights.save(tmp_path / "ck", cfg, weights.init(cfg), tokenizer=tok)
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glassformer: error: export-hf writes an encoder-decoder as a Pegasus")
    assert needs in err and err.count("\n") == 1
    assert not (tmp_path / "hf").exists()


def test_export_hf_of_an_encoder_decoder_needs_bos_and_eos(tmp_path, capsys):
    from glassformer.tokenizer import WordTokenizer

    tok = WordTokenizer(["<pad>", "</s>", "hola", "mundo"], {"pad": "<pad>", "eos": "</s>"})
    cfg = small().override(f"vocab_size={tok.vocab_size}")
    weights.save(tmp_path / "ck", cfg, weights.init(cfg), tokenizer=tok)
    assert main(["export-hf", str(tmp_path / "ck"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "needs the checkpoint's tokenizer with bos and eos" in err and err.count("\n") == 1
    assert not (tmp_path / "hf").exists()
