"""The mutations tools/mutate.py plants, as data, and the tests that should catch each module's.

A mutation is one small bug: an operator flipped, a constant nudged, a guard removed. Each edit
names a file, an exact snippet of it (which must occur exactly once, or the mutation is reported
as stale: update it when the code moves) and its replacement. A mutation may take several edits
when one bug spans files (a containment check removed from every reader of a kind of file).
`issue` marks the mutations issue 24 lists: planted bugs that once went through the whole suite.
"""

# ruff: noqa: E501 (the snippets are exact source text, kept whole on one line to be found)

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    id: str
    module: str  # the row of the report (a key of TESTS)
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file, exact snippet, replacement)
    issue: bool = False


def m(id, module, what, file, find, replace, issue=False, also=()):
    return Mutation(id, module, what, ((file, find, replace), *also), issue)


# The tests each module's mutants run, most targeted first (pytest -x stops at the first failure):
# file names or node ids under tests/.
TESTS: dict[str, list[str]] = {
    "reference": [
        "test_reference.py",
        "test_golden_random_transformer.py",
        "test_golden_raschka.py",
        "test_raschka_modules.py",
        "test_parity.py",
        "test_modern_options.py",
        "test_decode_oracles.py::test_reference_softmax_rows_and_columns_at_extremes",
    ],
    "torch_model": [
        "test_parity.py",
        "test_modern_options.py",
        "test_torch_model.py",
        "test_minilm.py",
    ],
    "train": [
        "test_train_oracle.py",
        "test_faults.py::test_a_signal_keeps_the_work_and_resume_equals_an_uninterrupted_run"
        "[SIGINT-37]",
    ],
    "tasks": ["test_train_oracle.py"],
    "decoding": ["test_decode_oracles.py", "test_decode.py"],
    "quantize": [
        "test_decode_oracles.py",
        "test_edges_nonfinite.py::test_int8_layers_give_nan_for_a_non_finite_input",
        "test_quantize.py",
    ],
    "files": [
        "test_readers_contained.py",
        "test_faults.py::test_the_temporary_of_a_killed_writer_is_removed_by_the_next_one",
        "test_faults.py::test_a_full_disk_leaves_the_old_report_intact",
        "test_faults.py::test_a_full_disk_is_one_line_and_leaves_nothing_behind",
        "test_weights.py",
    ],
}

REF, TM, TR, TA = (f"glassformer/{f}.py" for f in ("reference", "torch_model", "train", "tasks"))
TL = "glassformer/torch_layers.py"
DEC, Q, FILES, HFD = (f"glassformer/{f}.py" for f in ("decoding", "quantize", "files", "hf_dir"))
BPE, W = "glassformer/tokenizer/bpe.py", "glassformer/weights.py"

MUTATIONS: list[Mutation] = [
    # -- reference.py: the articles' math ---------------------------------------------------------
    m("ref-scale-d-model", "reference", "attention scaled by sqrt(d_model), not sqrt(head dim)",
      REF, "heads.append(attention(Q, K, V, mask, rotated=rope is not None))",
      "heads.append(attention(Q, K, V, mask, rotated=rope is not None, "
      "scale=math.sqrt(cfg.d_model)))", issue=True),
    m("ref-masked-row-nan", "reference", "softmax of a fully masked row: -inf - -inf = NaN",
      DEC, "return np.divide(e, s, out=np.zeros_like(e), where=s > 0)", "return e / s"),
    m("ref-ln-eps-outside", "reference", "LayerNorm eps added outside the square root",
      REF, 'np.sqrt(var + eps))', 'np.sqrt(var) + eps)'),
    m("ref-causal-peeks", "reference", "the causal mask lets a token see the next one",
      REF, "np.tril(np.ones((T, T), dtype=bool))", "np.tril(np.ones((T, T), dtype=bool), 1)"),
    m("ref-gelu-tanh-constant", "reference", "tanh-GELU's 0.044715 nudged to 0.04715",
      REF, "(x + 0.044715 * x * x * x)", "(x + 0.04715 * x * x * x)"),
    m("ref-post-ln-no-residual", "reference", "post-LN sublayer without its residual",
      REF, 'y = tap(f"add{k}", x + f(x))', 'y = tap(f"add{k}", f(x))'),
    m("ref-embed-scale", "reference", "embeddings scaled by sqrt(head dim), not sqrt(d_model)",
      REF, "X * math.sqrt(cfg.d_model) if cfg.embed_scale", "X * math.sqrt(cfg.head_dim) if cfg.embed_scale"),
    m("ref-pe-sin-cos-swapped", "reference", "sinusoidal positions: cos on even dims, sin on odd",
      REF, "P[:, 0::2] = sin\n    P[:, 1::2] = cos", "P[:, 0::2] = cos\n    P[:, 1::2] = sin"),
    m("ref-rope-sign", "reference", "rotary positions turn the wrong way",
      REF, "[x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1",
      "[x1 * cos + x2 * sin, x2 * cos - x1 * sin, rest], axis=-1"),
    m("ref-rmsnorm-eps-outside", "reference", "RMSNorm adds eps outside the square root",
      REF, "np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)",
      "np.sqrt((x * x).mean(axis=-1, keepdims=True)) + eps"),
    m("ref-pool-counts-padding", "reference", "classify's mean pooling divides by padded length",
      REF, "/ max(int(keep.sum()), 1))", "/ max(int(keep.size), 1))"),
    # -- torch_model.py: the batched engine --------------------------------------------------------
    m("torch-sdpa-scale-d-model", "torch_model", "SDPA path scaled by sqrt(d_model)",
      TL, "dropout_p=p, is_causal=causal and mask is None",
      "dropout_p=p, is_causal=causal and mask is None, scale=1 / math.sqrt(self.H * self.D)",
      issue=True),
    m("torch-explicit-scale-d-model", "torch_model", "explicit path scaled by sqrt(d_model)",
      TL, "scores / math.sqrt(self.D))", "scores / math.sqrt(self.H * self.D))", issue=True),
    m("torch-traced-heads-scale", "torch_model", "traced heads (all at once) scaled by D, not √D",
      TL, "        scaled = scores / math.sqrt(self.D)\n", "        scaled = scores / self.D\n"),
    m("torch-traced-heads-gqa", "torch_model", "traced heads repeat grouped K/V in the wrong order",
      TL, "(t.repeat_interleave(G, dim=1) for t in (k, v))", "(t.repeat(1, G, 1, 1) for t in (k, v))"),
    m("torch-cache-causal-offset", "torch_model", "with a KV cache the causal mask ignores the offset",
      TL, ".tril(S - T)", ".tril(0)"),
    m("torch-empty-rows-kept", "torch_model", "a query with no key to attend to is not zeroed",
      TL, "out = out.masked_fill(empty_rows, 0.0)", "out = out"),
    m("torch-gqa-repeat", "torch_model", "grouped K/V heads repeated in the wrong order",
      TL, "k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)",
      "k, v = k.repeat(1, G, 1, 1), v.repeat(1, G, 1, 1)"),
    m("torch-rope-cache-offset", "torch_model", "rotary angles forget the KV cache's offset",
      TM, "positions = torch.arange(start, start + T, device=ids.device)[None]  # (1, T)",
      "positions = torch.arange(0, T, device=ids.device)[None]  # (1, T)"),
    m("torch-pre-ln-no-residual", "torch_model", "pre-LN sublayer without its residual",
      TM, 'return _tap(f"add{k}", x + self.drop(z))', 'return _tap(f"add{k}", self.drop(z))'),
    m("torch-embedding-pools-padding", "torch_model", "sentence embeddings average over padding",
      TM, "\n    keep = torch.ones_like(ids, dtype=H.dtype) if valid is None else valid.to(H.dtype)",
      "\n    keep = torch.ones_like(ids, dtype=H.dtype)"),
    # -- train.py: the loop ------------------------------------------------------------------------
    m("train-no-clipping", "train", "gradient clipping switched off (the norm still logged)",
      TR, "clip_grad_norm_(model.parameters(), tcfg.grad_clip)",
      'clip_grad_norm_(model.parameters(), float("inf"))', issue=True),
    m("train-warmup-off-by-one", "train", "warmup starts at lr 0 (step, not step + 1)",
      TR, "return t.lr * (step + 1) / t.warmup_steps", "return t.lr * step / t.warmup_steps"),
    m("train-cosine-to-zero", "train", "cosine decays lr - min_lr from lr, not to min_lr",
      TR, "* (t.lr - t.min_lr)", "* t.lr"),
    m("train-decay-everything", "train", "weight decay on biases, LayerNorms and embeddings too",
      TR, "(decay if p.ndim >= 2 and not is_embedding else no_decay)", "decay"),
    m("train-accum-not-averaged", "train", "gradient accumulation sums micro-batches' gradients",
      TR, "(loss / tcfg.grad_accum).backward()", "loss.backward()"),
    m("train-beta2-ignored", "train", "AdamW's beta2 left at torch's default",
      TR, "betas=(tcfg.beta1, tcfg.beta2)", "betas=(tcfg.beta1, 0.999)"),
    m("train-first-signal-ignored", "train", "the first SIGINT / SIGTERM is ignored",
      TR, "        self.received = signum\n", "        pass\n"),
    m("train-xavier-qkv-fan", "train", "xavier init counts Q, K, V apart (not fused 3x)",
      W, "fan_out = cfg.attn_dim + 2 * cfg.kv_dim", "fan_out = fan_out"),
    # -- tasks.py: the losses ----------------------------------------------------------------------
    m("tasks-translate-no-smoothing", "tasks", "translate loss ignores its label smoothing",
      TA, "ignore_index=-100,\n            label_smoothing=label_smoothing,",
      "ignore_index=-100,\n            label_smoothing=0.0,", issue=True),
    m("tasks-translate-counts-padding", "tasks", "translate loss counts padding positions",
      TA, 'labels = t["tgt_out"].masked_fill(~t["tgt_valid"], -100)', 'labels = t["tgt_out"]',
      issue=True),
    m("tasks-lm-no-smoothing", "tasks", "lm loss ignores its label smoothing",
      TA, 't["y"].flatten(), label_smoothing=label_smoothing', 't["y"].flatten()'),
    m("tasks-classify-no-smoothing", "tasks", "classify loss ignores its label smoothing",
      TA, 'F.cross_entropy(logits, t["y"], label_smoothing=label_smoothing), t["x"].numel()',
      'F.cross_entropy(logits, t["y"]), t["x"].numel()'),
    m("tasks-translate-token-count", "tasks", "translate counts padded positions as tokens",
      TA, 'return loss, int(t["tgt_valid"].sum())', 'return loss, int(t["tgt_valid"].numel())'),
    # -- decoding.py: greedy, sampling, beam -------------------------------------------------------
    m("decode-log-softmax-no-max", "decoding", "log-softmax without subtracting the max",
      DEC, "    z = z - z.max()\n    return z - np.log(np.exp(z).sum())",
      "    return z - np.log(np.exp(z).sum())", issue=True),
    m("decode-softmax-no-max", "decoding", "the softmax without subtracting the max",
      DEC, "shifted = x - np.where(np.isfinite(m), m, 0.0)", "shifted = x"),
    m("decode-temperature-times", "decoding", "logits multiplied by the temperature",
      DEC, "shifted /= temperature", "shifted *= temperature"),
    m("decode-top-k-one-more", "decoding", "top-k keeps k + 1 tokens",
      DEC, "keep[order[top_k:]] = False", "keep[order[top_k + 1 :]] = False"),
    m("decode-top-p-one-fewer", "decoding", "top-p drops the token that reaches p",
      DEC, "n = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1",
      "n = max(1, int(np.searchsorted(cumulative, top_p - 1e-12)))"),
    m("decode-top-p-unsorted", "decoding", "top-p accumulates in vocabulary order",
      DEC, "cumulative = np.cumsum(probs[order])", "cumulative = np.cumsum(probs)"),
    m("decode-length-penalty-times", "decoding", "length penalty multiplies instead of divides",
      DEC, "return self.logprob / n**length_penalty", "return self.logprob * n**length_penalty"),
    m("decode-beam-stops-early", "decoding", "beam stops once width hypotheses finish",
      DEC, "if worst_finished[0] <= best_alive[0]:", "if True:"),
    m("decode-beam-live-dropped", "decoding", "hypotheses live at the limit do not compete",
      DEC, "sorted(self.finished + self.alive,", "sorted(self.finished or self.alive,"),
    m("decode-penalty-counts-prompt", "decoding", "length penalty counts one token more",
      DEC, "n = max(self.n_generated, 1)", "n = max(self.n_generated + 1, 1)"),
    # -- quantize.py: int8 -------------------------------------------------------------------------
    m("int8-scale-doubled", "quantize", "int8 weight scale twice too large (one bit lost)",
      Q, "scale = (w.abs().amax(dim=1) / _HALF_RANGE)", "scale = (w.abs().amax(dim=1) / 63.75)"),
    m("int8-scale-nudged", "quantize", "int8 weight scale max|row| / 127 (torch's is / 127.5)",
      Q, "_HALF_RANGE = 127.5", "_HALF_RANGE = 127.0"),
    m("int8-reduce-range-flipped", "quantize", "7-bit inputs exactly where VNNI makes 8 safe",
      Q, "self.reduce_range = not has_vnni() if", "self.reduce_range = has_vnni() if"),
    m("int8-nonfinite-unchecked", "quantize", "a NaN input row goes into the int8 kernel",
      Q, "if math.isfinite(float(x.sum())):", "if True:"),
    # -- files.py and its readers: file safety -----------------------------------------------------
    m("files-swap-not-atomic", "files", "folder replacement falls back to the two-rename swap",
      FILES, "if _exchange(tmp, path):", "if False:", issue=True),
    m("files-shard-reader-uncontained", "files", "HF shard reader without the containment check",
      HFD, "weight_files = [files.member(folder, s, required=False) for s in names]",
      "weight_files = [(folder / s) if (folder / s).exists() else None for s in names]",
      issue=True),
    m("files-tokenizer-reader-uncontained", "files",
      "tokenizer reader without the containment check",
      HFD, "        _member(folder, name)  # a tokenizer file that links out is refused, never left out\n",
      "        pass\n",
      issue=True,
      also=((BPE, "return member(folder, name, required=False) is not None",
             "return (Path(folder) / name).exists()"),
            (BPE, "return member(folder, name).read_bytes().decode", "return (Path(folder) / name).read_bytes().decode"))),
    m("files-member-no-containment", "files", "the one containment rule removed",
      FILES, "if not target.is_relative_to(folder.resolve()):", "if False:"),
    m("files-live-temporary-removed", "files", "a live writer's temporary folder is deleted",
      FILES, "if pid.isdecimal() and not _alive(int(pid)):", "if pid.isdecimal():"),
    m("files-failed-build-left", "files", "a failed folder build leaves its temporary behind",
      FILES, "        shutil.rmtree(tmp, ignore_errors=True)\n        raise _write_error(path, e) from None",
      "        raise _write_error(path, e) from None"),
]  # fmt: skip
