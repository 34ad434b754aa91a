"""The mutations tools/mutate.py plants, as data, and the tests that should catch each module's.

A mutation is one small bug: an operator flipped, a constant nudged, a guard removed. Each edit
names a file, an exact snippet of it (which must occur exactly once, or the mutation is reported
as stale: update it when the code moves) and its replacement. A mutation may take several edits
when one bug spans files (a containment check removed from every reader of a kind of file).
`issue` marks the mutations an issue lists (24, 35): planted bugs that once went through the whole
suite.
"""

# ruff: noqa: E501 (the snippets are exact source text, kept whole on one line to be found)

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mutation:
    id: str
    module: str  # the row of the report (a key of TESTS)
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file, exact snippet, replacement)
    issue: int | None = None  # the issue that found the bug going through the whole suite
    wave: int | None = None  # the issue whose work added the mutant (None: before issue 35)


def m(id, module, what, file, find, replace, issue=None, also=()):
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
        "test_generate_batched.py::test_batched_greedy_equals_one_prompt_at_a_time",
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
    "hf_llama": ["test_hf_llama.py"],
    "nanogpt": ["test_nanogpt.py"],
    "recording": ["test_recording.py", "test_model_recording.py"],
    "fidelity": ["test_serve_view.py"],
    "numerics": ["test_numerics.py", "test_edges_nonfinite.py", "test_decode_oracles.py"],
    "words": [
        "test_walkthrough_modern.py::test_the_text_is_the_narrated_steps",
        "test_timelapse.py::test_the_headline_names_the_best_head_of_the_last_frame",
        "test_timelapse.py::test_the_page_carries_exactly_the_recorded_values",
        "test_timelapse.py::test_the_text_table_is_the_frames_metrics",
    ],
    "lock": [
        "test_lock_record.py",
        "test_writers_contained.py",
        "test_edges_runs.py::test_writers_are_refused_while_a_training_runs_and_a_killed_ones_lock"
        "_is_taken_over",
        "test_edges_runs.py::test_the_lock_file_survives_the_swap_and_the_removal_of_temporaries",
        "test_edges_runs.py::test_the_lock_excludes_under_contention",
    ],
    "exercises": ["test_exercise_verdicts.py", "test_exercises.py", "test_edges_learner.py"],
    "files": [
        "test_readers_contained.py",
        "test_faults.py::test_the_temporary_of_a_killed_writer_is_removed_by_the_next_one",
        "test_faults.py::test_a_full_disk_leaves_the_old_report_intact",
        "test_faults.py::test_a_full_disk_is_one_line_and_leaves_nothing_behind",
        "test_weights.py",
    ],
}

REF, TM, TR, TA = (
    f"glassformer/{f}.py" for f in ("reference", "torch_model", "training/train", "training/tasks")
)
TL = "glassformer/torch_layers.py"
DEC, Q, FILES, HFD = (
    f"glassformer/{f}.py" for f in ("decoding", "quantize", "files", "formats/hf_dir")
)
BPE, W = "glassformer/tokenizer/bpe.py", "glassformer/weights.py"
LL, NG, REC, NUM = (
    f"glassformer/{f}.py" for f in ("formats/hf_llama", "formats/nanogpt", "recording", "numerics")
)
FID, TRC = "glassformer/serve/fidelity.py", "glassformer/trace.py"
CHK = "glassformer/exercises/checking.py"
TXT, TLP = "glassformer/explain/text.py", "glassformer/explain/timelapse.py"

MUTATIONS: list[Mutation] = [
    # -- reference.py: the articles' math ---------------------------------------------------------
    m("ref-scale-d-model", "reference", "attention scaled by sqrt(d_model), not sqrt(head dim)",
      REF, "heads.append(attention(Q, K, V, mask, rotated=rope is not None))",
      "heads.append(attention(Q, K, V, mask, rotated=rope is not None, "
      "scale=math.sqrt(cfg.d_model)))", issue=24),
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
      issue=24),
    m("torch-explicit-scale-d-model", "torch_model", "explicit path scaled by sqrt(d_model)",
      TL, "scores / math.sqrt(self.D))", "scores / math.sqrt(self.H * self.D))", issue=24),
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
      'clip_grad_norm_(model.parameters(), float("inf"))', issue=24),
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
      "ignore_index=-100,\n            label_smoothing=0.0,", issue=24),
    m("tasks-translate-counts-padding", "tasks", "translate loss counts padding positions",
      TA, 'labels = t["tgt_out"].masked_fill(~t["tgt_valid"], -100)', 'labels = t["tgt_out"]',
      issue=24),
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
      "    return z - np.log(np.exp(z).sum())", issue=24),
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
      FILES, "if _exchange(tmp, path):", "if False:", issue=24),
    m("files-shard-reader-uncontained", "files", "HF shard reader without the containment check",
      HFD, "weight_files = [files.member(folder, s, required=False) for s in names]",
      "weight_files = [(folder / s) if (folder / s).exists() else None for s in names]",
      issue=24),
    m("files-tokenizer-reader-uncontained", "files",
      "tokenizer reader without the containment check",
      HFD, "        _member(folder, name)  # a tokenizer file that links out is refused, never left out\n",
      "        pass\n",
      issue=24,
      also=((BPE, "return member(folder, name, required=False) is not None",
             "return (Path(folder) / name).exists()"),
            (BPE, "return read_limited(member(folder, name), FILE_LIMIT,", "return read_limited(Path(folder) / name, FILE_LIMIT,"))),
    m("files-member-no-containment", "files", "the one containment rule removed",
      FILES, "if not target.is_relative_to(folder.resolve()):", "if False:"),
    m("files-live-temporary-removed", "files", "a live writer's temporary folder is deleted",
      FILES, "if match is None or _alive(int(match[1])):", "if match is None:"),
    m("files-failed-build-left", "files", "a failed folder build leaves its temporary behind",
      FILES, "        shutil.rmtree(tmp, ignore_errors=True)\n        raise _write_error(path, e) from None",
      "        raise _write_error(path, e) from None"),
]  # fmt: skip

# The mutants of issue 35 (point 8): the code the wave before it added, and the planted bugs that
# went through the whole suite then (issue=35). `tools/mutate.py --wave 35` runs these alone.
WAVE_35: list[Mutation] = [
    # -- reference.py: rotary, RMSNorm, SwiGLU, GQA -----------------------------------------------
    m("ref-rope-theta-odd", "reference", "rotary frequencies base^(-(2i+1)/r), not base^(-2i/r)",
      REF, "theta = 1.0 / base ** (np.arange(0, r, 2, dtype=np.float64) / r)  # (r/2,)",
      "theta = 1.0 / base ** (np.arange(1, r + 1, 2, dtype=np.float64) / r)  # (r/2,)"),
    m("ref-rope-halves-swapped", "reference", "rotary pairs taken (x_{i+r/2}, x_i)",
      REF, "x1, x2, rest = x[:, :h], x[:, h : 2 * h], x[:, 2 * h :]  # (T, r/2)",
      "x2, x1, rest = x[:, :h], x[:, h : 2 * h], x[:, 2 * h :]  # (T, r/2)"),
    m("ref-rope-keys-not-turned", "reference", "rotary turns the queries only",
      REF, "        return turned(\"K\", K), V\n", "        return K, V\n"),
    m("ref-rmsnorm-centred", "reference", "RMSNorm subtracts the mean (LayerNorm's variance)",
      REF, "np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)",
      "np.sqrt(x.var(axis=-1, keepdims=True) + eps)"),
    m("ref-rmsnorm-no-gain", "reference", "RMSNorm ignores its gain g",
      REF, "x / rms * g, equation=RMSNORM_OUT", "x / rms, equation=RMSNORM_OUT"),
    m("ref-swiglu-gate-on-up", "reference", "SwiGLU's activation on the up projection, not the gate",
      REF, 'act(gate) * up, equation=eq["hidden"]', 'gate * act(up), equation=eq["hidden"]'),
    m("ref-silu-is-sigmoid", "reference", "SiLU computed as the sigmoid alone",
      REF, "return x * 0.5 * (1.0 + np.tanh(0.5 * x))", "return 0.5 * (1.0 + np.tanh(0.5 * x))"),
    m("ref-gqa-interleaved", "reference", "query head h reads K/V head h % KV, not h // G",
      REF, "K, V = shared[h // G] if G > 1 else kv_head(h)", "K, V = shared[h % KV] if G > 1 else kv_head(h)"),
    # -- torch_layers.py: the same four in the batched engine -------------------------------------
    m("torch-rope-theta", "torch_model", "rotary frequencies base^(-2i/(r+2))",
      TL, "theta = 1.0 / base ** (two_i / r)  # (r/2,)", "theta = 1.0 / base ** (two_i / (r + 2))  # (r/2,)"),
    m("torch-rope-sign", "torch_model", "rotary positions turn the wrong way",
      TL, "torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)",
      "torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin, rest], dim=-1)"),
    m("torch-rope-keys-not-turned", "torch_model", "rotary turns the queries only",
      TL, "q, k = rotary(q, *rope), rotary(k, *rope)", "q = rotary(q, *rope)"),
    m("torch-rmsnorm-eps-outside", "torch_model", "RMSNorm adds eps outside the square root",
      TL, "h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)",
      "h = h / (h.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)"),
    m("torch-rmsnorm-no-gain", "torch_model", "RMSNorm ignores its gain",
      TL, "return h.to(x.dtype) * self.weight", "return h.to(x.dtype)"),
    m("torch-rmsnorm-half-precision", "torch_model", "float16 / bfloat16 normalised in their own precision",
      TL, "h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x", "h = x"),
    m("torch-swiglu-gate-on-up", "torch_model", "SwiGLU's activation on the up projection",
      TL, 'self.act(gate) * up, eq["hidden"]', 'gate * self.act(up), eq["hidden"]'),
    m("torch-gqa-sdpa-ungrouped", "torch_model", "SDPA's grouped K/V heads repeated in the wrong order",
      TL, "                    grouped = {\"enable_gqa\": True}\n",
      "                    k, v = (t.repeat(1, self.H // self.KV, 1, 1) for t in (k, v))\n"),
    m("torch-rope-left-padding", "torch_model", "rotary positions of a left-padded row not shifted",
      TM, "positions = (positions - cache.pad_left[:, None]).clamp(min=0)", "positions = positions"),
    # -- hf_llama.py: the Llama / Qwen2 table and config.json --------------------------------------
    m("llama-top-level-theta-ignored", "hf_llama", "rope_theta at config.json's top level ignored (4.x form)",
      LL, 'theta = rope.get("rope_theta", d.get("rope_theta", 10000.0))', 'theta = rope.get("rope_theta", 10000.0)', issue=35),
    m("llama-nested-theta-ignored", "hf_llama", "rope_theta nested in rope_parameters ignored (5.x form)",
      LL, 'theta = rope.get("rope_theta", d.get("rope_theta", 10000.0))', 'theta = d.get("rope_theta", 10000.0)'),
    m("llama-scaling-theta-ignored", "hf_llama", "rope_scaling does not stand for rope_parameters",
      LL, 'key, rope = ("rope_scaling", scaling) if scaling else ("rope_parameters", rope or {})',
      'key, rope = ("rope_scaling", scaling or {}) if scaling else ("rope_parameters", rope or {})\n    rope = {k: v for k, v in rope.items() if k != "rope_theta"} if scaling else rope'),
    m("llama-tie-default-true", "hf_llama", "a missing tie_word_embeddings read as true",
      LL, '"tie_word_embeddings": False}', '"tie_word_embeddings": True}', issue=35),
    m("llama-eps-default", "hf_llama", "a missing rms_norm_eps read as 1e-5 (transformers: 1e-6)",
      LL, '"rms_norm_eps": 1e-6,', '"rms_norm_eps": 1e-5,'),
    m("llama-qwen2-kv-default", "hf_llama", "Qwen2's missing num_key_value_heads read as the query heads",
      LL, '"num_key_value_heads": 32}', '"num_key_value_heads": None}'),
    m("llama-max-positions-default", "hf_llama", "a missing max_position_embeddings read as 4096",
      LL, '"max_position_embeddings": 2048,', '"max_position_embeddings": 4096,'),
    m("llama-head-dim-default", "hf_llama", "a missing head_dim read as hidden / K/V heads",
      LL, '_size(d, "head_dim", d["hidden_size"] // heads)', '_size(d, "head_dim", d["hidden_size"] // kv)'),
    m("llama-gate-up-swapped", "hf_llama", "Llama's gate_proj and up_proj read the other way round",
      LL, '(_D + "ffn.w1", _H + "mlp.gate_proj"),', '(_D + "ffn.w1", _H + "mlp.up_proj"),',
      also=((LL, '(_D + "ffn.w3", _H + "mlp.up_proj"),', '(_D + "ffn.w3", _H + "mlp.gate_proj"),'),)),
    m("llama-norms-swapped", "hf_llama", "input and post-attention norms read the other way round",
      LL, '(_D + "norm1", _H + "input_layernorm"),', '(_D + "norm1", _H + "post_attention_layernorm"),',
      also=((LL, '(_D + "norm2", _H + "post_attention_layernorm"),', '(_D + "norm2", _H + "input_layernorm"),'),)),
    m("llama-mlp-bias-unchecked", "hf_llama", "Llama's mlp_bias read as attention_bias",
      LL, 'd.get("attention_bias", False), d.get("mlp_bias", False)', 'd.get("attention_bias", False), d.get("attention_bias", False)'),
    m("llama-sliding-window-unchecked", "hf_llama", "Qwen2's sliding-window layers not refused",
      LL, "    if sliding:\n        raise ConfigError(", "    if False:\n        raise ConfigError("),
    # -- nanogpt.py: nanoGPT's table -----------------------------------------------------------------
    m("nano-gelu-tanh", "nanogpt", "nanoGPT's exact GELU read as the tanh form",
      NG, 'activation="gelu",  # nn.GELU(): the exact, erf form', 'activation="gelu_tanh",'),
    m("nano-ln-eps", "nanogpt", "nanoGPT's LayerNorm eps read as 1e-6", NG, "ln_eps=1e-5,", "ln_eps=1e-6,"),
    m("nano-c-attn-order", "nanogpt", "c_attn split as v | k | q",
      NG, "out[name] = x[j * rows : (j + 1) * rows]", "out[name] = x[(n - 1 - j) * rows : (n - j) * rows]"),
    m("nano-bias-default", "nanogpt", "a missing model_args['bias'] read as false (GPTConfig: true)",
      NG, 'bias = model_args.get("bias", True)', 'bias = model_args.get("bias", False)'),
    m("nano-tied-by-shape", "nanogpt", "a head of the embedding's shape read as tied",
      NG, "return tuple(head.shape) == tuple(wte.shape) and bool((head == wte).all())",
      "return tuple(head.shape) == tuple(wte.shape)"),
    m("nano-bias-free-beta", "nanogpt", "a bias-free LayerNorm's beta read as ones",
      NG, "out[names[0]] = np.zeros(shapes[names[0]])", "out[names[0]] = np.ones(shapes[names[0]])"),
    m("nano-vocab-unsorted", "nanogpt", "--vocab-from's characters in reverse order",
      NG, "chars = sorted(seen)", "chars = sorted(seen, reverse=True)"),
    m("nano-compile-prefix-kept", "nanogpt", "torch.compile's _orig_mod. prefix kept",
      NG, "state[name.removeprefix(PREFIX)] = x", "state[name] = x"),
    # -- quantize.py: int8 biases --------------------------------------------------------------------
    m("int8-tied-head-bias-dropped", "quantize", "the tied head's logits bias dropped in int8",
      Q, "b = model.lm_head.bias if cfg.lm_bias else None", "b = None", issue=35),
    m("int8-linear-bias-dropped", "quantize", "every int8 layer drops its bias",
      Q, "b = None if bias is None else bias.detach().to(torch.float32).contiguous()", "b = None", issue=35),
    # -- recording.py: the fast path's records and word alignment -------------------------------------
    m("rec-alignment-backwards", "recording", "word alignment pairs written target-source",
      REC, "(src_words[s], tgt_words[t])", "(tgt_words[t], src_words[s])", issue=35),
    m("rec-lone-space-a-word", "recording", "a piece that is whitespace alone counted as a word",
      REC, 'if kind != "word" and p and all(c in WHITESPACE for c in p):', "if False:"),
    m("rec-wordpiece-starts", "recording", "a WordPiece ## piece starts a word",
      REC, 'starts = not p.startswith("##") or w < 0', "starts = True"),
    m("rec-query-not-turned", "recording", "the recorded query not turned by rotary positions",
      REC, "q = rotary(q, rope[0][..., -1:, :], rope[1][..., -1:, :])", "q = q"),
    m("rec-rope-first-position", "recording", "the recorded query turned by the first position's angle",
      REC, "q = rotary(q, rope[0][..., -1:, :], rope[1][..., -1:, :])", "q = rotary(q, rope[0][..., :1, :], rope[1][..., :1, :])"),
    m("rec-gqa-head-map", "recording", "query head h reads K/V head h % KV",
      REC, "kh = k[:, [h // G for h in both]]", "kh = k[:, [h % module.KV for h in both]]"),
    m("rec-mean-count", "recording", "the alignment mean divided by one head more",
      REC, 'now["mean"] = now["mean"] / len(self.mean_of)', 'now["mean"] = now["mean"] / (len(self.mean_of) + 1)'),
    m("rec-beam-row-zero", "recording", "beam records read the sentence's first live row",
      REC, "out.append({k: v[offset + j] for k, v in s.values.items()})", "out.append({k: v[offset] for k, v in s.values.items()})"),
    m("rec-self-attn-cut-padding", "recording", "a left-padded row's self-attention cut from the left",
      REC, "a = a[a.shape[0] - queries[t] :]", "a = a[: queries[t]]"),
    # -- serve/fidelity.py and trace.py: the float32 view and its badge ------------------------------
    m("fid-rel-from-abs-step", "fidelity", "the badge's relative difference from the largest absolute one's step",
      FID, '"max_rel_diff": by_rel[1].max_rel if cells', '"max_rel_diff": by_abs[1].max_rel if cells', issue=35),
    m("fid-kept-steps-only", "fidelity", "the badge compares only the steps the view stored",
      FID, "if s.name in ref and s.shape == ref.step(s.name).shape", "if s.name in ref and s.data is not None and s.shape == ref.step(s.name).shape"),
    m("fid-torch-smallest", "fidelity", "the float64 badge keeps the smallest difference",
      FID, "if where is None or d > worst:", "if where is None or d < worst:"),
    m("fid-hf-against-view", "fidelity", "transformers compared with the view's float32 logits",
      FID, "ours = reference(m, run)[step]", "ours = run.trace[step]"),
    m("trace-keep-ignored", "fidelity", "tracing(keep=...) stores every step",
      TRC, "if trace.keep is not None and not trace.keep(full):", "if False:"),
    m("trace-fill-dtype", "fidelity", "a deferred step read in the full trace's dtype",
      TRC, "return v if v.dtype == bool or v.dtype == self.dtype else v.astype(self.dtype)", "return v"),
    # -- numerics.py: where non-finite values start -------------------------------------------------
    m("num-masked-nan-ignored", "numerics", "a NaN among masked scores passes as masking",
      NUM, "bad = np.isnan(v) | np.isposinf(v)", "bad = np.isposinf(v)"),
    m("num-last-bad-row", "numerics", "the error names the last failing row, not the first",
      NUM, "row = int(bad[0] if rows is None else min(bad, key=lambda r: rows[r]))",
      "row = int(bad[-1] if rows is None else min(bad, key=lambda r: rows[r]))"),
    m("num-rows-unmapped", "numerics", "a reordered batch's failing row named by position",
      NUM, "row = int(bad[0] if rows is None else min(bad, key=lambda r: rows[r]))", "row = int(bad[0])"),
    m("num-sum-overflow-is-nan", "numerics", "a finite array whose sum overflows reported non-finite",
      NUM, "return math.isfinite(x.sum()) or bool(np.isfinite(x).all())", "return math.isfinite(x.sum())"),
    m("num-token-count", "numerics", "generation stopped at the token before",
      NUM, "n = len(ids) - prompt_len + 1", "n = len(ids) - prompt_len"),
    m("num-nan-inf-swapped", "numerics", "NaN and inf named the other way round",
      NUM, 'kind = "NaN" if np.isnan(v[where]) else "inf"', 'kind = "inf" if np.isnan(v[where]) else "NaN"'),
    m("num-window-ignored", "numerics", "the origin sought in more than max_len tokens",
      NUM, "return what, list(ids)[-cfg.max_len :], src_ids", "return what, list(ids), src_ids"),
    # -- text a learner reads: compared with the function that wrote it, these went through ---------
    m("text-rows-reversed", "words", "a printed matrix's rows in reverse order (labels kept)",
      TXT, "for row in v[:show_r]]", "for row in v[:show_r][::-1]]", issue=35),
    m("headline-earlier-score-from-last", "words", "the headline's earlier score read from the last frame",
      TLP, 'before = first.metrics.get("prefix", {})', 'before = last.metrics.get("prefix", {})', issue=35),
    # -- files.py's lock (written last: others were changing this code in the same wave) ----------
    m("lock-follows-links", "lock", "the lock file opened following a link",
      FILES, "flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | _NOFOLLOW",
      "flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK", issue=35),
    m("lock-any-file-kind", "lock", "a lock file that is no regular file, or a hard link, is written",
      FILES, "if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:", "if False:"),
    m("lock-hard-link-written", "lock", "a lock file that is a hard link to another file is written",
      FILES, "if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:", "if not stat.S_ISREG(found.st_mode):"),
    m("lock-held-ignored", "lock", "a folder another process holds is written anyway",
      FILES, "        if held:\n            for _ in range(20):", "        if False:\n            for _ in range(20):"),
    m("lock-not-reentrant", "lock", "a second lock of the same folder in one process refused",
      FILES, "    if lock in _HELD:\n        _HELD[lock][1] += 1", "    if False:\n        _HELD[lock][1] += 1"),
    m("lock-file-left", "lock", "the lock file left behind on leaving",
      FILES, "        _unlink(lock)  # before the release", "        pass  # before the release"),
    m("lock-takeover-silent", "lock", "a killed holder's lock taken over without saying so",
      FILES, "        yield previous\n", "        yield None\n"),
    m("lock-record-not-truncated", "lock", "the holder's record written over an older, longer one",
      FILES, "        os.ftruncate(fd, 0)\n", ""),
    # -- exercises/checking.py (written last: others were changing this code in the same wave) -----
    m("ex-loose-tolerance", "exercises", "an answer within 1% passes",
      CHK, "RTOL, ATOL = 1e-6, 1e-8", "RTOL, ATOL = 1e-2, 1e-8"),
    m("ex-last-part-first", "exercises", "the difference reported in the last part, not the first",
      CHK, "    for part in ex.parts:\n        want, have", "    for part in reversed(ex.parts):\n        want, have"),
    m("ex-length-index-last", "exercises", "a 1-D answer of another length: its last wrong element named",
      CHK, "i = int(bad[0]) if bad.size else n", "i = int(bad[-1]) if bad.size else n"),
    m("ex-no-transpose-hint", "exercises", "a transposed answer gets the general hint",
      CHK, "if want.ndim == 2 and have.shape == want.T.shape and _close(want.T, have).all():",
      "if False:"),
    m("ex-mistake-not-narrowed", "exercises", "several matching mistakes not narrowed by the later cases",
      CHK, "for j in range(k + 1, len(cases) + 1) if len(found) > 1 else ():", "for j in ():"),
    m("ex-base-exception-escapes", "exercises", "sys.exit / a BaseException of the learner's escapes the check",
      CHK, "    except BaseException as e:\n        if real is not None and real(e):",
      "    except Exception as e:\n        if real is not None and real(e):", issue=35),
    m("ex-raised-interrupt-is-real", "exercises", "a KeyboardInterrupt the learner raises stops the check as a Ctrl-C",
      CHK, "(bool(seen) and isinstance(e, KeyboardInterrupt))", "isinstance(e, KeyboardInterrupt)"),
    m("ex-outermost-frame", "exercises", "the error names the outermost frame, not the deepest",
      CHK, "return (mine or outside or [None])[-1]", "return (mine or outside or [None])[0]"),
]  # fmt: skip
MUTATIONS += [replace(x, wave=35) for x in WAVE_35]
