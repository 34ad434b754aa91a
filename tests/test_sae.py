"""Sparse autoencoders and transcoders (corpus/sae.py, corpus/saelens.py, corpus/evaluate.py,
training/autoencoder.py, `glassformer sae`), each against an oracle: the forward pass against a
hand NumPy computation and the torch module in float64; SAELens's folder against the fields its
source names (a folder made here as its format describes) and the hook mapping against
transformers' own hidden states of a random GPT-2; the spliced and zero-ablated losses against the
PyTorch engine in float64 under the same replacement, with PyTorch's cross-entropy; a resumed run
against an uninterrupted one, bit for bit; steering by a feature against steering by its vector.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import glassformer  # noqa: E402
from glassformer import reference as R  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.corpus import saelens  # noqa: E402
from glassformer.corpus import store as S  # noqa: E402
from glassformer.corpus.evaluate import cards, documents, evaluate  # noqa: E402
from glassformer.corpus.sae import SAEConfig, SparseAutoencoder, TrainConfig, forward  # noqa: E402
from glassformer.errors import GlassformerError  # noqa: E402
from glassformer.trace import intervene, tracing  # noqa: E402
from glassformer.training.autoencoder import train  # noqa: E402

TEXT = "the cat sat on the mat. the dog sat on the log. a cat and a dog.\n"
LINES = [s.strip() + "." for s in TEXT.split(".") if s.strip()] * 2


def docs_of(m, lines, max_tokens):
    return documents([m.tokenizer.encode(t) for t in lines if t.strip()], m.cfg.max_len, max_tokens)


def random_sae(cfg: SAEConfig, seed: int = 0) -> dict:
    """Float32-representable parameters (so a folder written and read keeps them exactly)."""
    g = np.random.default_rng(seed)

    def a(*shape, shift=0.0):
        return (g.standard_normal(shape) * 0.5 + shift).astype(np.float32).astype(np.float64)

    return {"W_enc": a(cfg.d_in, cfg.d_sae), "b_enc": a(cfg.d_sae, shift=-0.3),
            "W_dec": a(cfg.d_sae, cfg.out), "b_dec": a(cfg.out)}  # fmt: skip


def make_store(folder, m, lines, steps, per_shard=2):
    """A store written by corpus/store.py's own writers from the reference engine's traces."""
    folder.mkdir()
    rows = {k: [] for k in S.ROW_FILES}
    vals = {s: [] for s in steps}
    for d, line in enumerate(lines):
        ids = m.encode(line)
        with tracing(keep=lambda n: n in steps) as tr:
            R.forward(m.params, m.cfg, ids)
        rows["tokens"].append(ids)
        rows["document"].append([d] * len(ids))
        rows["position"].append(list(range(len(ids))))
        for s in steps:
            vals[s].append(np.asarray(tr[s]))
    shards = []
    for k, a in enumerate(range(0, len(lines), per_shard)):
        cut = slice(a, a + per_shard)
        r = {key: np.concatenate(v[cut]) for key, v in rows.items()}
        arrays = S.shard_arrays(r, {s: np.concatenate(v[cut]) for s, v in vals.items()}, "float32")
        meta = {"rows": len(r["tokens"]), "first_document": a, "documents": len(lines[cut])}
        S.write_shard(folder, S.shard_name(k), arrays, meta)
        shards.append({"name": S.shard_name(k), **meta, "rank": 0})
    S.write_json(folder, S.INDEX, {
        "format": S.FORMAT, "version": S.VERSION, "config": m.cfg.to_dict(),
        "model": {"name": m.name, "fingerprint": S.fingerprint(m.cfg, m.params)},
        "corpus": {"file": "c.txt", "sha256": "", "side": "text"}, "engine": "reference",
        "compute": "float64", "dtype": "float32",
        "steps": {s: {"width": int(vals[s][0].shape[-1])} for s in steps}, "shards": shards,
        "rows": sum(s["rows"] for s in shards), "documents": len(lines), "truncated": 0,
        "max_tokens": None, "world": 1,
    })  # fmt: skip
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A random pre-LN char decoder, a text, a store of two of its steps, an SAE trained on it."""
    d = tmp_path_factory.mktemp("sae")
    corpus = d / "c.txt"
    corpus.write_text(TEXT * 4)
    sets = ["norm=pre", "positions=learned", "max_len=24", "activation=gelu"]
    sets = [x for v in sets for x in ("--set", v)]
    common = ["--tokenizer", "char", "--corpus", str(corpus), "--std", "0.5", "--seed", "3"]
    assert main(["init", str(d / "dec"), "--preset", "tiny", *sets, *common]) == 0
    other = [*common[:-1], "4"]  # the same shapes, other weights
    assert main(["init", str(d / "other"), "--preset", "tiny", *sets, *other]) == 0
    m = glassformer.load(d / "dec", engine="reference")
    make_store(d / "store", m, LINES, ["decoder.0.out", "decoder.1.norm2.out", "decoder.1.ffn.out"])
    args = ["sae", "train", str(d / "store"), "--step", "decoder.0.out", "--features", "32"]
    args += ["--steps", "30", "--batch-size", "32", "--lr", "3e-3", "--quiet"]
    assert main([*args, "--out", str(d / "sae")]) == 0
    return d, m


# -- the SAE's maths ------------------------------------------------------------------------------


def hand(cfg: SAEConfig, p: dict, x: np.ndarray) -> np.ndarray:
    """The SAE written out row by row, as SAELens's encode and decode say."""
    out = []
    for row in x:
        xin = row - row.mean() if cfg.center else row
        if cfg.apply_b_dec_to_input and not cfg.transcoder:
            xin = xin - p["b_dec"]
        pre = xin @ p["W_enc"] + p["b_enc"]
        f = np.maximum(pre, 0.0)
        if cfg.architecture == "topk":
            kept = sorted(range(len(pre)), key=lambda i: -pre[i])[: cfg.k]
            f = np.array([max(pre[i], 0.0) if i in kept else 0.0 for i in range(len(pre))])
        y = f @ p["W_dec"] + p["b_dec"]
        out.append(y + row.mean() if cfg.center else y)
    return np.array(out)


CASES = {
    "standard": SAEConfig(d_in=6, d_sae=10, step="decoder.0.out"),
    "topk": SAEConfig(d_in=6, d_sae=10, step="decoder.0.out", architecture="topk", k=7),
    "centered": SAEConfig(d_in=6, d_sae=10, step="decoder.0.out", center=True),
    "no-b_dec-in": SAEConfig(d_in=6, d_sae=10, step="decoder.0.out", apply_b_dec_to_input=False),
    "transcoder": SAEConfig(
        d_in=6, d_sae=10, step="a", d_out=4, step_out="b", apply_b_dec_to_input=False
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_is_the_hand_computation_in_numpy_and_torch(case):
    cfg = CASES[case]
    p = random_sae(cfg)
    x = np.random.default_rng(1).standard_normal((7, cfg.d_in))
    want = hand(cfg, p, x)
    assert np.abs(forward(cfg, p, x) - want).max() < 1e-12
    if cfg.center:
        return  # the torch module trains uncentered SAEs only (centring comes from SAELens files)
    module = SparseAutoencoder(cfg, dtype=torch.float64)
    module.load_state_dict({k: torch.tensor(v) for k, v in p.items()})
    with torch.no_grad():
        got = module(torch.tensor(x))[0].numpy()
    assert np.abs(got - want).max() < 1e-12


# -- SAELens's folder -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["standard", "topk", "transcoder"])
def test_our_folder_round_trips(case, tmp_path):
    cfg = CASES[case]
    cfg = SAEConfig(**{**cfg.__dict__, "step": "decoder.0.out", "model_name": "m"})
    if cfg.transcoder:
        cfg = SAEConfig(**{**cfg.__dict__, "step_out": "decoder.0.ffn.out"})
    p = random_sae(cfg)
    saelens.write(tmp_path / "s", cfg, p)
    back, q = saelens.read(tmp_path / "s")
    assert back == SAEConfig(**{**cfg.__dict__, "hook_name": back.hook_name})
    assert all(np.array_equal(p[k], q[k]) for k in p)
    d = json.loads((tmp_path / "s" / "cfg.json").read_text())
    # the fields SAELens's SAEConfig / TranscoderConfig read (sae_lens/saes/sae.py, transcoder.py)
    assert (d["d_in"], d["d_sae"], d["dtype"], d["normalize_activations"]) == (
        6, 10, "float32", "none")  # fmt: skip
    assert d["architecture"] == case and d["hook_name"] == "blocks.0.hook_resid_post"
    if cfg.transcoder:
        assert (d["d_out"], d["hook_name_out"]) == (4, "blocks.0.hook_mlp_out")


@pytest.mark.parametrize("case", ["standard", "topk", "transcoder"])
def test_saelens_itself_reads_our_folder(case, tmp_path):
    """Where SAELens is installed: its SAE.load_from_disk (Transcoder's for a transcoder) reads
    our folder and computes our forward pass (float32). Run on 2026-12-04 with sae-lens 6.54.12
    (its training-only dependencies stubbed): max |diff| 6.0e-07, 5.8e-07, 5.8e-07."""
    if importlib.util.find_spec("sae_lens") is None:  # not an importorskip: make test allows it
        pytest.skip(
            "SAELens is not installed (make test leaves it out for its heavy dependencies; "
            "pip install sae-lens runs this check)"
        )
    from sae_lens import SAE
    from sae_lens.saes.transcoder import Transcoder

    cfg = SAEConfig(**{**CASES[case].__dict__, "step": "decoder.1.out"})
    if cfg.transcoder:
        cfg = SAEConfig(
            **{**cfg.__dict__, "step": "decoder.1.add1", "step_out": "decoder.1.ffn.out"}
        )
    p = random_sae(cfg)
    saelens.write(tmp_path / "s", cfg, p)
    theirs = (Transcoder if cfg.transcoder else SAE).load_from_disk(str(tmp_path / "s"))
    x = np.random.default_rng(2).standard_normal((5, cfg.d_in))
    with torch.no_grad():
        out = theirs(torch.tensor(x, dtype=torch.float32))
    out = out[0] if isinstance(out, tuple) else out
    assert np.abs(out.double().numpy() - forward(cfg, p, x)).max() < 1e-5


def saelens_folder(folder, cfg_json: dict, d_in: int, d_sae: int, seed: int = 0):
    """A folder as SAELens's save_model writes it: cfg.json and the state dict's safetensors."""
    from safetensors.numpy import save_file

    g = np.random.default_rng(seed)
    folder.mkdir()
    (folder / "cfg.json").write_text(json.dumps(cfg_json))
    w = {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_in), "b_dec": (d_in,)}
    save_file({k: g.standard_normal(s).astype(np.float32) for k, s in w.items()},
              str(folder / "sae_weights.safetensors"))  # fmt: skip
    return folder


def test_a_saelens_folder_loads_onto_an_imported_gpt2(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=16, n_head=2, n_layer=3, n_positions=16, vocab_size=40)
    torch.manual_seed(0)
    theirs = transformers.GPT2LMHeadModel(config).eval()
    theirs.save_pretrained(tmp_path / "gpt2")
    from glassformer.formats import loading

    cfg, params = loading.load(tmp_path / "gpt2")[:2]  # imported as import-hf does, on the fly
    # SAELens 5's layout (hook_point, no architecture) and 6's (the metadata block)
    old = {"d_in": 16, "d_sae": 24, "hook_point": "blocks.2.hook_resid_pre", "dtype": "float32",
           "model_name": "gpt2-small", "hook_point_layer": 2}  # fmt: skip
    new = {"d_in": 16, "d_sae": 24, "architecture": "standard", "apply_b_dec_to_input": True,
           "normalize_activations": "none", "dtype": "float32", "device": "cpu",
           "metadata": {"hook_name": "blocks.1.hook_resid_post", "hook_layer": 1,
                        "sae_lens_version": "6.5.0", "model_name": "gpt2-small"}}  # fmt: skip
    ids = [3, 7, 9, 1, 4, 12]
    with torch.no_grad():
        hidden = theirs(torch.tensor([ids]), output_hidden_states=True).hidden_states
    with tracing() as tr:
        R.forward(params, cfg, ids)
    for name, d, block in (("old", old, 2), ("new", new, 2)):
        sae_cfg, _ = saelens.read(saelens_folder(tmp_path / name, d, 16, 24))
        assert sae_cfg.step == "decoder.1.out" and sae_cfg.center  # TransformerLens centres it
        # the oracle: transformers' residual stream entering block 2 is this step
        assert np.abs(np.asarray(tr[sae_cfg.step]) - hidden[block][0].double().numpy()).max() < 1e-5


def test_a_saelens_folder_reads_texts_as_saelens_made_it(built, capsys, tmp_path):
    """SAELens's defaults, not written in its cfg.json: texts start with BOS (prepend_bos) and a
    residual SAE reads TransformerLens's centred stream."""
    d, m = built
    folder = saelens_folder(tmp_path / "s", {"d_in": 16, "d_sae": 8,
                            "hook_name": "blocks.0.hook_resid_post"}, 16, 8)  # fmt: skip
    cfg, p = saelens.read(folder)
    assert cfg.prepend_bos and cfg.center and cfg.step == "decoder.0.out"
    capsys.readouterr()
    assert main(["sae", "eval", str(folder), str(d / "dec"), str(d / "c.txt"), "--json", "-"]) == 0
    got = json.loads(capsys.readouterr().out)
    bos = m.tokenizer.bos_id
    lines = [[bos, *m.tokenizer.encode(t)] for t in (TEXT * 4).split("\n") if t.strip()]
    want, _ = evaluate(m.params, m.cfg, cfg, p, documents(lines, m.cfg.max_len, 2048))
    assert got["loss"] == want["loss"] and got["rows"] == want["rows"] == 4 * 24


# -- the model with the SAE spliced in ------------------------------------------------------------


def torch_losses(m, sae_cfg: SAEConfig, p: dict, docs) -> dict:
    """The same three losses from the PyTorch engine in float64 and PyTorch's cross-entropy,
    the replacement written in torch."""
    from glassformer.torch_model import from_params

    net = from_params(m.cfg, m.params, torch.float64).eval()
    P = {k: torch.tensor(v) for k, v in p.items()}

    def sae_t(x):
        pre = torch.relu((x - P["b_dec"] * (not sae_cfg.transcoder)) @ P["W_enc"] + P["b_enc"])
        return pre @ P["W_dec"] + P["b_dec"]

    seen = {}

    def record(x):
        seen["x"] = x
        return x

    if sae_cfg.transcoder:
        fns = {sae_cfg.step: record, sae_cfg.step_out: lambda y: sae_t(seen["x"])}
    else:
        fns = {sae_cfg.step: sae_t}
    target = sae_cfg.step_out or sae_cfg.step
    out = {}
    for how, f in (("clean", {}), ("spliced", fns), ("zero", {target: torch.zeros_like})):
        total, n = 0.0, 0
        for ids in docs:
            t = torch.tensor([ids])
            with torch.no_grad(), intervene(f):
                logits = net(t)[0]
            ce = torch.nn.functional.cross_entropy(logits[:-1], t[0, 1:], reduction="sum")
            total += float(ce)
            n += len(ids) - 1
        out[how] = total / n
    return out


@pytest.mark.parametrize("kind", ["sae", "transcoder"])
def test_spliced_and_zeroed_losses_equal_the_pytorch_engine(built, kind):
    _, m = built
    if kind == "sae":
        cfg = SAEConfig(d_in=16, d_sae=24, step="decoder.0.out")
    else:
        cfg = SAEConfig(16, 24, "decoder.1.add1", d_out=16, step_out="decoder.1.ffn.out")
    p = random_sae(cfg, 4)
    docs = docs_of(m, LINES, 100)
    report, f = evaluate(m.params, m.cfg, cfg, p, docs)
    want = torch_losses(m, cfg, p, docs)
    for how in ("clean", "spliced", "zero"):
        assert abs(report["loss"][how] - want[how]) < 1e-10, how
    assert report["loss"]["spliced"] != report["loss"]["clean"]  # the splice changed something
    assert report["l0"] == pytest.approx((f > 0).sum(axis=1).mean())


# -- training -------------------------------------------------------------------------------------


def test_a_resumed_run_ends_equal_to_an_uninterrupted_one(built, tmp_path):
    from glassformer.corpus.sae import StoreRows

    d, _ = built
    x = StoreRows(S.open_store(d / "store"), "decoder.0.out")
    cfg = SAEConfig(d_in=16, d_sae=24, step="decoder.0.out")
    tcfg = TrainConfig(steps=8, batch_size=16, lr=3e-3, l1=0.5, seed=5)
    whole = train(x, cfg, tcfg, tmp_path / "whole", save_every=3)
    train(x, cfg, tcfg, tmp_path / "split", stop_at=5, save_every=3)
    assert saelens.read(tmp_path / "split")[1]["W_enc"].shape == (16, 24)
    rest = train(x, cfg, tcfg, tmp_path / "split", resume=True, save_every=3)
    a, b = saelens.read(tmp_path / "whole")[1], saelens.read(tmp_path / "split")[1]
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in rest] == [r["loss"] for r in whole]
    ta = torch.load(tmp_path / "whole" / "training_state.pt", weights_only=True)
    tb = torch.load(tmp_path / "split" / "training_state.pt", weights_only=True)
    for k, v in ta["optimizer"]["state"].items():
        assert torch.equal(v["exp_avg_sq"], tb["optimizer"]["state"][k]["exp_avg_sq"])


def test_ctrl_c_keeps_the_work_and_resume_ends_where_an_uninterrupted_run_does(
    built, tmp_path, capsys, monkeypatch
):
    import os
    import signal

    from glassformer.training import autoencoder as A

    d, _ = built
    base = ["sae", "train", str(d / "store"), "--step", "decoder.0.out", "--features", "24"]
    base += ["--steps", "12", "--batch-size", "16", "--l1", "0.5", "--quiet", "--out"]
    assert main([*base, str(tmp_path / "whole")]) == 0
    real = A.step_once

    def stepping(run, x, y, tcfg):  # a Ctrl-C arrives during step 5
        row = real(run, x, y, tcfg)
        if run.step == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return row

    monkeypatch.setattr(A, "step_once", stepping)
    capsys.readouterr()
    assert main([*base, str(tmp_path / "split")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted at step 5;" in err[0], err
    assert torch.load(tmp_path / "split" / "training_state.pt", weights_only=True)["step"] == 5
    monkeypatch.setattr(A, "step_once", real)
    assert main([*base, str(tmp_path / "split"), "--resume"]) == 0
    a, b = saelens.read(tmp_path / "whole")[1], saelens.read(tmp_path / "split")[1]
    assert all(np.array_equal(a[k], b[k]) for k in a)


# -- the command line -----------------------------------------------------------------------------


def test_eval_and_features_print_what_the_library_computes(built, capsys, tmp_path):
    d, m = built
    capsys.readouterr()
    assert main(["sae", "eval", str(d / "sae"), str(d / "dec"), str(d / "c.txt"), "--json", "-",
                 "--max-tokens", "60"]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    cfg, p = saelens.read(d / "sae")
    want, _ = evaluate(m.params, m.cfg, cfg, p, docs_of(m, (TEXT * 4).split("\n"), 60))
    assert got["loss"] == want["loss"] and got["explained_variance"] == want["explained_variance"]
    page = tmp_path / "e.html"
    assert main(["sae", "eval", str(d / "sae"), str(d / "dec"), str(d / "c.txt"), "--html",
                 str(page), "--max-tokens", "60", "--cards", "2"]) == 0  # fmt: skip
    assert page.read_text().count('class="gf-card"') == 2 and "loss recovered" in page.read_text()
    docs = docs_of(m, (TEXT * 4).split("\n"), 60)
    _, f = evaluate(m.params, m.cfg, cfg, p, docs)
    (card,) = cards(m, cfg, p, docs, f, [1], k=5)
    assert [e["value"] for e in card["examples"]] == sorted(f[:, 1], reverse=True)[:5]
    html = tmp_path / "f.html"
    args = ["sae", "features", str(d / "sae"), str(d / "dec"), "--store", str(d / "store")]
    files = ["--html", str(html), "--json", str(tmp_path / "f.json")]
    assert main([*args, "--feature", "1", *files]) == 0
    assert main([*args, "--feature", "1", "--k", "3"]) == 0
    text = capsys.readouterr().out
    stored = json.loads((tmp_path / "f.json").read_text())["cards"]
    assert "Feature 1" in html.read_text() and "\nfeature 1: fires on" in text
    from glassformer.corpus.sae import encode

    acts = encode(cfg, p, S.open_store(d / "store").column("decoder.0.out"))[:, 1]
    values = [e["value"] for e in stored[0]["examples"]]
    assert values == sorted(acts, reverse=True)[: len(values)]  # the store's strongest, in order
    for e in stored[0]["examples"]:  # each context's activation is the SAE's at that stored row
        assert e["value"] == acts[e["row"]]


def test_a_transcoder_trains_and_evaluates_from_the_command_line(built, capsys, tmp_path):
    d, m = built
    args = ["sae", "train", str(d / "store"), "--step", "decoder.1.norm2.out", "--features", "24"]
    args += ["--transcoder-to", "decoder.1.ffn.out", "--steps", "5", "--batch-size", "16"]
    assert main([*args, "--out", str(tmp_path / "tc"), "--quiet"]) == 0
    cfg, p = saelens.read(tmp_path / "tc")
    assert (cfg.step, cfg.step_out, cfg.transcoder) == (
        "decoder.1.norm2.out",
        "decoder.1.ffn.out",
        True,
    )
    capsys.readouterr()
    assert main(["sae", "eval", str(tmp_path / "tc"), str(d / "dec"), str(d / "c.txt"), "--json",
                 "-"]) == 0  # fmt: skip
    got = json.loads(capsys.readouterr().out)
    want, _ = evaluate(m.params, m.cfg, cfg, p, docs_of(m, (TEXT * 4).split("\n"), 2048))
    assert got["loss"] == want["loss"] and got["sae"]["step_out"] == "decoder.1.ffn.out"


def test_steering_by_a_feature_is_steering_by_its_decoder_row(built, capsys, tmp_path):
    d, _ = built
    _, p = saelens.read(d / "sae")
    np.save(tmp_path / "v.npy", p["W_dec"][2])
    run = ["generate", str(d / "dec"), "the c", "--max-new-tokens", "8", "--scale", "4"]
    capsys.readouterr()
    assert main([*run, "--sae", str(d / "sae"), "--steer-feature", "2"]) == 0
    by_feature = capsys.readouterr().out
    assert main([*run, "--steer-vector", str(tmp_path / "v.npy"), "--layer", "1"]) == 0
    by_vector = capsys.readouterr().out
    assert main(run[:-2]) == 0
    plain = capsys.readouterr().out
    assert by_feature == by_vector and by_feature != plain


# -- bad input: one line, exit 2 ------------------------------------------------------------------


def _bad_folders(d):
    """SAE folders that must be refused: another width, a corrupt or foreign cfg.json, an SAE
    of a step that is not a stream entering a block."""
    sae_cfg, p = saelens.read(d / "sae")
    cfg = json.loads((d / "sae" / "cfg.json").read_text())
    out = {}
    for name, step, d_in, text in (
        ("narrow", "decoder.0.out", 8, None),
        ("hidden", "decoder.0.ffn.hidden", 32, None),
        ("corrupt", None, None, "{not json"),
        ("jumprelu", None, None, json.dumps({**cfg, "architecture": "jumprelu"})),
    ):
        f = d / f"bad-{name}"
        out[name] = str(f)
        if f.exists():
            continue
        if text is None:
            c = SAEConfig(d_in=d_in, d_sae=4, step=step)
            saelens.write(f, c, random_sae(c))
        else:
            saelens.write(f, sae_cfg, p)
            (f / "cfg.json").write_text(text)
    return out


@pytest.mark.parametrize(
    "args, says",
    [
        (["sae", "train", "{store}", "--step", "decoder.9.out", "--features", "4", "--out",
          "{tmp}/o"], "holds no step 'decoder.9.out'"),
        (["sae", "eval", "{narrow}", "{dec}", "{corpus}"], "with width 8, and this model's is 16"),
        (["sae", "eval", "{corrupt}", "{dec}", "{corpus}"], "is corrupt"),
        (["sae", "eval", "{sae}", "{en_es}", "{corpus}"], "{en_es} is an encoder-decoder model;"),
        (["sae", "eval", "{jumprelu}", "{dec}", "{corpus}"], "architecture 'jumprelu' is not one"),
        (["generate", "{dec}", "the", "--sae", "{hidden}", "--steer-feature", "0"],
         "steering by a feature adds its decoder row"),
        (["generate", "{dec}", "the", "--sae", "{sae}", "--steer-feature", "99"],
         "the SAE has features 0..31"),
        (["sae", "features", "{sae}", "{other}", "--store", "{store}"], "not {other} (their"),
        (["sae", "train", "{store}", "--step", "decoder.0.out", "--features", "4", "--out",
          "{store}/sae"], "lies inside DIR"),
        (["sae", "train", "{store}", "--step", "decoder.0.out", "--features", "4", "--topk", "9",
          "--out", "{tmp}/o"], "--topk 9 is more than --features 4"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(built, tmp_path, capsys, args, says):
    d, _ = built
    names = {"store": d / "store", "dec": d / "dec", "corpus": d / "c.txt", "sae": d / "sae",
             "other": d / "other"}  # fmt: skip
    names = {k: str(v) for k, v in names.items()} | _bad_folders(d) | {"tmp": str(tmp_path)}
    names["en_es"] = str(Path(__file__).resolve().parents[1] / "models" / "en-es")
    capsys.readouterr()
    assert main([a.format(**names) for a in args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says.format(**names) in err[0], err


def test_a_saelens_hook_with_no_step_is_refused(tmp_path):
    d = {"d_in": 4, "d_sae": 4, "hook_name": "blocks.0.attn.hook_pattern"}
    with pytest.raises(GlassformerError, match="has no glassformer step"):
        saelens.read(saelens_folder(tmp_path / "x", d, 4, 4))
