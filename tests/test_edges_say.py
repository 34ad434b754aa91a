"""Round three's "say it" family (issue 35, point 6): where the program used to stay silent, it
now speaks, in one line.

- `diff` stops at the first step where an engine's values turn NaN or infinite and names the
  engine, the step and what to do (exit 2, as `explain` without --find-nan), instead of 80 rows
  of inf and a "first step beyond" that points before the overflow. The damaged models set every
  FFN weight to +-1e30: x·W1 stays within float32 (about 1e31) and (x·W1)·W2 passes its 3.4e38,
  so the float32 engine's first non-finite step is `ffn.out` by construction; +-1e200 passes
  float64's range at the same step.
- `diff --engines` with an empty name (a doubled or trailing comma) or an unknown one: refused.
- Llama / Qwen2 token ids in config.json outside the vocabulary: refused, naming key and size.
- `train --snapshot-views` text with pieces the tokenizer does not know: a note naming them.
- `train --resume` on data other than the run's own (train_config.json records each corpus's
  sha256): refused unless --new-data, then a note; a file changed since, or gone: refused.
- The first probe's three families: a tokenizer file that cannot be read (a real process without
  the right to read it: as root, one without CAP_DAC_OVERRIDE), a size `init` cannot allocate
  (estimated before any is drawn, a MemoryError past the estimate in one line; real processes
  under an address-space limit), evaluation data too small for one batch.

Table rows run the command line through tests/table.py (refusals: exit 2, one error line,
nothing written; notes: exit 0 and the note's words); `Proc` rows run a real process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from table import (  # noqa: E402
    ENV,
    Case,
    build_models,
    case_id,
    check_case,
    copy_of,
    damaged,
    make_file,
    one_error_line,
    snapshot,
)

from glassformer import engine_diff, load, numerics, weights  # noqa: E402
from glassformer.cli import main  # noqa: E402
from glassformer.cli.diff import parse_engines  # noqa: E402
from glassformer.errors import InputError, TokenizerError  # noqa: E402
from glassformer.formats import hf_llama  # noqa: E402
from glassformer.tokenizer import HFTokenizer  # noqa: E402
from glassformer.trace import tracing  # noqa: E402

FAMILY = "say"
CASES: list = []


def add(argv, message, code=2, setup=None):
    CASES.append(Case(FAMILY, argv, message, code, setup))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """table.py's models, and `llama`: a Llama folder (export-hf of a tiny rotary / RMSNorm /
    SwiGLU / grouped-query decoder with a char tokenizer of 20 tokens)."""
    d = build_models(tmp_path_factory)
    modern = ["positions=rotary", "norm=pre", "norm_kind=rmsnorm", "ffn_kind=gated",
              "bias=false", "activation=silu", "n_kv_heads=1"]  # fmt: skip
    sets = [x for s in modern for x in ("--set", s)]
    assert main(["init", str(d / "llm"), "--preset", "tiny", "--tokenizer", "char",
                 "--corpus", str(d / "corpus.txt"), *sets]) == 0  # fmt: skip
    assert main(["export-hf", str(d / "llm"), str(d / "llama")]) == 0
    return d


# -- diff: the first non-finite step, named ----------------------------------------------------


F32 = "the float64 reference engine stays finite on this input, so the overflow is in a lower "
F32 += "precision: diff the float64 engines instead (--engines reference,torch)"
F64 = "the model passes float64's range on this input"
for name, text, stack in [("dec", "to be", "decoder"), ("hello", "hello world", "encoder"),
                          ("enc", "to be", "encoder")]:  # fmt: skip
    for engines in ("reference,float32", "float32,reference", "reference,int8"):
        kind = engines.replace("reference", "").strip(",")
        said = f"the {kind} engine's values are non-finite (NaN or inf) from {stack}.0.ffn.out on"
        add(["diff", "{bad}", text, "--engines", engines], said, setup=damaged(name, 1e30))
    add(["diff", "{bad}", text, "--engines", "reference,float32"], F32, setup=damaged(name, 1e30))
    # the float64 engines agree until both overflow: the first engine given is named
    said = f"the reference engine's values are non-finite (NaN or inf) from {stack}.0.ffn.out on"
    if name != "hello":  # (hello's greedy target is refused first: generation stopped)
        add(["diff", "{bad}", text, "--engines", "reference,torch"], said,
            setup=damaged(name, 1e200))  # fmt: skip
        add(["diff", "{bad}", text, "--engines", "torch,reference"], F64,
            setup=damaged(name, 1e200))  # fmt: skip
# float32 of weights 1e200 is inf already: NaN at ffn.hidden, before float64's own overflow
add(["diff", "{bad}", "to be", "--engines", "reference,float32"],
    "from decoder.0.ffn.hidden on (NaN at [0, 0]); they first appear at decoder.0.ffn.out",
    setup=damaged("dec", 1e200))  # fmt: skip
# refused before its outputs are written (check_case: no file appears)
add(["diff", "{bad}", "to be", "--engines", "reference,float32", "--json", "{tmp}/d.json",
     "--html", "{tmp}/d.html"], "decoder.0.ffn.out", setup=damaged("dec", 1e30))  # fmt: skip
# no false alarm: the same model undamaged answers, float32 within its rounding
add(["diff", "{dec}", "to be", "--engines", "reference,float32"], "float32: no step beyond", 0)

# -- diff --engines: empty and unknown names ---------------------------------------------------

for engines, message in [
    ("reference,,torch", "has an empty engine name (name 2 of 3)"),
    ("reference,torch,", "has an empty engine name (name 3 of 3)"),
    (",reference,torch", "has an empty engine name (name 1 of 3)"),
    ("reference, ,float32", "has an empty engine name (name 2 of 3)"),
    ("reference,gpu", "unknown engine 'gpu'; use some of reference, torch, float32, int8, hf"),
    ("reference,toch", "unknown engine 'toch'; use some of reference, torch, float32, int8, hf; "
                       "did you mean torch?"),
    ("Reference,torch", "did you mean reference?"),
]:  # fmt: skip
    add(["diff", "{dec}", "to be", "--engines", engines], message)
add(["diff", "{dec}", "to be", "--engines", " reference , torch "], "torch: no step beyond", 0)

# -- Llama / Qwen2 token ids against the vocabulary ----------------------------------------------


def llama_config(drop_ours: bool = False, **fields):
    """A copy of the Llama folder at {tmp}/bad with config.json fields changed (drop_ours: without
    glassformer-tokenizer.json, so that tokenizer.json and config.json's ids are read)."""

    def setup(tmp, models):
        shutil.copytree(models / "llama", tmp / "bad")
        path = tmp / "bad" / "config.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | fields))
        if drop_ours:
            (tmp / "bad" / "glassformer-tokenizer.json").unlink()

    return setup


V = "is not a token id of this model, whose vocabulary has 20 tokens (vocab_size; ids 0-19)"
for fields, message in [
    (dict(bos_token_id=10**6), f"config.json: bos_token_id 1000000 {V}: correct bos_token_id"),
    (dict(eos_token_id=-5), f"config.json: eos_token_id -5 {V}"),
    (dict(eos_token_id=20), f"eos_token_id 20 {V}"),  # one past the last id
    (dict(eos_token_id=[3, 10**6]), f"eos_token_id [3, 1000000]: 1000000 {V}"),
    (dict(eos_token_id=[3, -1]), f"eos_token_id [3, -1]: -1 {V}"),
    (dict(eos_token_id=[3, "x"]), f'eos_token_id [3, "x"]: "x" {V}'),
    (dict(bos_token_id=True), f"bos_token_id true {V}"),
    (dict(bos_token_id=2.0), f"bos_token_id 2.0 {V}"),
]:
    for drop in (False, True):
        add(["generate", "{bad}", "to", "--max-new-tokens", "1"], message,
            setup=llama_config(drop, **fields))  # fmt: skip
    add(["import-hf", "{bad}", "{tmp}/out"], message, setup=llama_config(**fields))
for fields in (dict(eos_token_id=19), dict(eos_token_id=[3, 19]), dict(bos_token_id=None)):
    add(["generate", "{bad}", "to", "--max-new-tokens", "1"], "stopped after", 0,
        setup=llama_config(True, **fields))  # fmt: skip

# -- a tokenizer file that is not a readable file ------------------------------------------------


def tokenizer_file(name: str, how: str):
    """The Llama folder at {tmp}/bad with its own tokenizer dropped and `name` a folder, or text
    that is not a tokenizer (tokenizer.json then read)."""

    def setup(tmp, models):
        llama_config(True)(tmp, models)
        bad = tmp / "bad"
        if name == "vocab.txt":
            (bad / "tokenizer.json").unlink()
        target = bad / name
        target.unlink(missing_ok=True)
        if how == "folder":
            target.mkdir()
            (target / "x").write_text("x")
        else:
            target.write_text(how)

    return setup


for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
    add(["generate", "{bad}", "to"], f"{name} is a folder; it should be a file",
        setup=tokenizer_file(name, "folder"))  # fmt: skip
    add(["import-hf", "{bad}", "{tmp}/out"], f"{name} is a folder",
        setup=tokenizer_file(name, "folder"))  # fmt: skip
for text in ("", "not json", "[1, 2]", '{"model": 5}'):
    add(["generate", "{bad}", "to"], "tokenizer.json: the embedded Hugging Face tokenizer is "
        "unreadable", setup=tokenizer_file("tokenizer.json", text))  # fmt: skip

# -- init: a size that cannot be allocated -----------------------------------------------------

for sets, message in [
    (["d_model=1000000", "vocab_size=1000000"], "GiB for its weights (float64) but"),
    (["vocab_size=10000000000"], "GiB for its weights (float64) but"),
    (["d_ff=100000000000"], "choose smaller sizes"),
    (["n_decoder_layers=100000000"], "choose smaller sizes"),
]:
    add(["init", "{tmp}/big", "--preset", "tiny", *[x for s in sets for x in ("--set", s)]],
        message)  # fmt: skip

# -- evaluation data too small for one batch ---------------------------------------------------

ONE_PAIR_BOTH_SIDES = "No.\tNo.\n"  # language_id leaves out a sentence on both sides
add(["eval", "{lm}", "--data", "{tmp}/one.txt"],
    "one.txt gives 1 token; a loss needs at least 2, one read and the next predicted",
    setup=make_file("one.txt", "t"))  # fmt: skip
add(["eval", "{lm}", "--data", "{models}/corpus.txt", "--limit", "1"],
    "gives 1 token (the first 1 kept by --limit)")  # fmt: skip
add(["eval", "{lm}", "--data", "{tmp}/two.txt"], "(1 tokens, windows of 16)", 0,
    setup=make_file("two.txt", "to"))  # fmt: skip
add(["eval", "{enc}", "--data", "{tmp}/same.tsv"], "same.tsv has no sentence to score",
    setup=make_file("same.tsv", ONE_PAIR_BOTH_SIDES))  # fmt: skip
TINY = ["--quiet", "--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32", "--set",
        "max_len=16", "--set", "block_size=16", "--set", "max_steps=1"]  # fmt: skip
SENTENCE = "to be or not to be, that is the question.\n"  # 42 characters
# 3 sentences: 126 characters, the last 10% (13) short of a window of 17; 17 characters: the
# first 90% (15) short of it
add(["train", "lm", "--out", "{tmp}/run", "--data", "{tmp}/small.txt", *TINY],
    "the validation part of --data (its last 10%) gives 13 tokens, and one batch needs a window "
    "of block_size + 1 = 17: give --data of at least about 170 tokens (126 now)",
    setup=make_file("small.txt", SENTENCE * 3))  # fmt: skip
add(["train", "lm", "--out", "{tmp}/run", "--data", "{tmp}/small.txt", *TINY],
    "the training part of --data (its first 90%) gives 15 tokens, and one batch needs a window "
    "of block_size + 1 = 17: give --data of at least about 19 tokens (17 now)",
    setup=make_file("small.txt", SENTENCE[:17]))  # fmt: skip
# at the boundary: 160 characters leave 16 for validation (refused), 168 leave 17 (a window)
add(["train", "lm", "--out", "{tmp}/run", "--data", "{tmp}/small.txt", *TINY],
    "the validation part of --data (its last 10%) gives 16 tokens",
    setup=make_file("small.txt", (SENTENCE * 4)[:160]))  # fmt: skip
add(["train", "lm", "--out", "{tmp}/run", "--data", "{tmp}/small.txt", *TINY], "step=1 ", 0,
    setup=make_file("small.txt", SENTENCE * 4))  # fmt: skip
add(["train", "classify", "--out", "{tmp}/run", "--data", "{models}/pairs.tsv", "--valid",
     "{tmp}/same.tsv", *TINY[:-6]], "--valid gives no sentence to classify",
    setup=make_file("same.tsv", ONE_PAIR_BOTH_SIDES))  # fmt: skip

# -- train --snapshot-views: text the tokenizer cannot encode ------------------------------------

LM = ["train", "lm", "--out", "{tmp}/run", "--data", "{models}/corpus.txt", *TINY]
add([*LM, "--snapshot-views", "Zebra ☃ to be"],
    "glassformer: note: --snapshot-views: 'Z', '☃' are not in the char tokenizer's vocabulary, "
    "so every frame reads them as <unk>", 0)  # fmt: skip
add([*LM, "--snapshot-views", "to be xx"], "'x' is not in the char tokenizer's vocabulary, so "
    "every frame reads it as <unk>", 0)  # fmt: skip
add([*LM, "--tokenizer", "word", "--snapshot-views", "to be zebra or not"],
    "--snapshot-views: 'zebra' is not in the word tokenizer's vocabulary", 0)  # fmt: skip

# -- train --resume on other data ----------------------------------------------------------------

RESUME = ["train", "lm", "--out", "{bad}", *TINY[:-2], "--set", "max_steps=3", "--resume"]
OTHER = "the cat sat on the mat.\n" * 40  # other text (of the run's characters and others)


def with_file(name, content, model="lm"):
    def setup(tmp, models):
        copy_of(model)(tmp, models)
        make_file(name, content)(tmp, models)

    return setup


NOT_OWN = "is not the data the run in"
add([*RESUME, "--data", "{tmp}/other.txt"], NOT_OWN, setup=with_file("other.txt", OTHER))
add([*RESUME, "--data", "{tmp}/other.txt"], "add --new-data to continue on",
    setup=with_file("other.txt", OTHER))  # fmt: skip
add([*RESUME, "--data", "tinyshakespeare"], NOT_OWN, setup=copy_of("lm"))
add([*RESUME, "--data", "{tmp}/other.txt", "--new-data"],
    "glassformer: note: --new-data: the run in", 0,
    setup=with_file("other.txt", OTHER))  # fmt: skip
# the same text elsewhere is the same data; no --data: the run's own (not tinyshakespeare)
add([*RESUME, "--data", "{tmp}/copy.txt"], "resuming", 0,
    setup=with_file("copy.txt", SENTENCE * 40))  # fmt: skip
add(RESUME, "resuming", 0, setup=copy_of("lm"))
add([*RESUME, "--data", "{models}/corpus.txt", "--new-data"],
    "--new-data does nothing here: the run in", setup=copy_of("lm"))  # fmt: skip
add(["train", "lm", "--out", "{tmp}/new", "--data", "{models}/corpus.txt", "--new-data"],
    "--new-data is for --resume")  # fmt: skip
TR = ["train", "translate", "--out", "{bad}", "--data", "{models}/pairs.tsv", "--quiet",
      "--set", "max_steps=3", "--resume"]  # fmt: skip
add([*TR, "--valid", "{tmp}/v.tsv"], f"v.tsv {NOT_OWN}",
    setup=with_file("v.tsv", "Hi.\tHola.\n", "tr"))  # fmt: skip


def moved_run(change):
    """A copy of lm whose recorded --data is a file of {tmp} (train_config.json's source points
    at it), then change(that file)."""

    def setup(tmp, models):
        copy_of("lm")(tmp, models)
        data = tmp / "data.txt"
        data.write_text((models / "corpus.txt").read_text())
        path = tmp / "bad" / "train_config.json"
        config = json.loads(path.read_text())
        config["source"]["data"]["name"] = str(data)
        path.write_text(json.dumps(config))
        change(data)

    return setup


add(RESUME, "data.txt has changed since the run in",
    setup=moved_run(lambda p: p.write_text(p.read_text() + "x")))  # fmt: skip
add(RESUME, "data.txt, which is gone: give --data with the same text",
    setup=moved_run(lambda p: p.unlink()))  # fmt: skip
add([*RESUME, "--new-data"], "glassformer: note: --new-data: the run in", 0,
    setup=moved_run(lambda p: p.write_text(OTHER)))  # fmt: skip


TABLE = [c for c in CASES if isinstance(c, Case)]


@pytest.mark.parametrize("case", TABLE, ids=[case_id(c) for c in TABLE])
def test_say_cli(case, models, tmp_path, capsys):
    check_case(case, models, tmp_path, capsys)


# -- real processes: a file it may not read, a limit on memory -----------------------------------

NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
          "--inh-caps=-dac_override,-dac_read_search"]  # fmt: skip


@dataclass
class Proc:
    """A command run in its own process: `locked` (a path under {tmp}) made unreadable, or
    `limit` bytes of address space beyond what the process maps before it runs the command
    (as a fraction of init's float64 weights: the `init` rows), with `patch` (Python run first)."""

    family: str
    argv: list[str]
    message: str
    setup: object = None
    locked: str | None = None
    limit: float | None = None
    patch: str = ""
    id: str = field(default="")


PROCS: list[Proc] = []
for name, drop in [("tokenizer.json", None), ("vocab.txt", "tokenizer.json"),
                   ("tokenizer_config.json", None), ("special_tokens_map.json", None)]:  # fmt: skip

    def setup(tmp, models, name=name, drop=drop):
        llama_config(True)(tmp, models)
        if drop:
            (tmp / "bad" / drop).unlink()
        if name == "vocab.txt":
            (tmp / "bad" / name).write_text("\n".join(["[UNK]", "t", "o"]) + "\n")
        if name == "special_tokens_map.json":
            (tmp / "bad" / name).write_text('{"bos_token": "<s>"}')

    for argv in (["generate", "{bad}", "to"], ["import-hf", "{bad}", "{tmp}/out"]):
        PROCS.append(Proc(FAMILY, argv, f"cannot read {{bad}}/{name}", setup, f"bad/{name}"))
PROCS.append(Proc(FAMILY, ["generate", "{bad}", "to"], "cannot read {bad} (Permission denied)",
                  llama_config(), "bad"))  # fmt: skip
PROCS.append(Proc(FAMILY, ["import-hf", "{bad}", "{tmp}/out"], "cannot read {bad} (",
                  llama_config(), "bad"))  # fmt: skip
# init's weights drawn in float64 and written in float32: 1.5 x the float64 bytes at the peak.
BIG = ["init", "{tmp}/big", "--preset", "tiny", "--set", "d_model=2048", "--set", "d_ff=8192",
       "--set", "n_heads=8"]  # fmt: skip
ENOUGH_FOR_FLOAT64 = "init would need about"
PROCS.append(Proc(FAMILY, BIG, ENOUGH_FOR_FLOAT64, limit=1.25))  # float64 fits, the copy not
PROCS.append(Proc(FAMILY, BIG, "ran out of memory drawing the weights, about", limit=0.5,
                  patch="weights.available_memory = lambda: 2**50"))  # fmt: skip
CASES += PROCS

RUN_LIMITED = """
import resource, sys
from glassformer import weights
from glassformer.cli import main
from glassformer.config import preset
{patch}
cfg = preset("tiny").override("d_model=2048", "d_ff=8192", "n_heads=8", "vocab_size=10")
mapped = [l for l in open("/proc/self/status") if l.startswith("VmSize:")][0].split()[1]
cap = int(mapped) * 1024 + int({limit} * weights.memory_bytes(cfg))
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
sys.exit(main(sys.argv[1:]))
"""


def _fill(text: str, tmp: Path, models: Path) -> str:
    return text.format(tmp=tmp, models=models, bad=tmp / "bad", lm=models / "lm")


@pytest.mark.parametrize("proc", PROCS, ids=[f"{p.argv[0]}-{p.locked or p.limit}" for p in PROCS])
def test_say_in_a_process(proc, models, tmp_path):
    if proc.locked and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("SKIPPED LOUDLY: root reads any file, and setpriv (to drop that) is missing")
    if proc.setup:
        proc.setup(tmp_path, models)
    argv = [_fill(a, tmp_path, models) for a in proc.argv]
    before = snapshot(tmp_path, models)
    env = dict(ENV, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if proc.limit is not None:
        script = RUN_LIMITED.format(patch=proc.patch, limit=proc.limit)
        cmd = [sys.executable, "-c", script, *argv]
    else:
        cmd = [*(NO_DAC if os.geteuid() == 0 else []), sys.executable, "-m", "glassformer.cli"]
        cmd += argv
    locked = tmp_path / proc.locked if proc.locked else None
    if locked is not None:
        locked.chmod(0)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    finally:
        if locked is not None:
            locked.chmod(0o755 if locked.is_dir() else 0o644)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    line = one_error_line(r.stderr)
    assert _fill(proc.message, tmp_path, models) in line, line
    if locked is not None:  # named once (a wrapped message once said it twice)
        assert line.count(str(locked)) == 1, line
    assert snapshot(tmp_path, models) == before  # nothing written, nothing changed


# -- the pieces under them ---------------------------------------------------------------------


def test_diff_names_the_step_the_engines_own_trace_finds_first(models, tmp_path):
    """The step named is the first non-finite step of the float32 engine's own trace (found
    here by numerics.first_nonfinite over the engine run alone, not through diff's rows)."""
    damaged("dec", 1e30)(tmp_path, models)
    m = load(tmp_path / "bad")
    engine = m.runtime.torch("float32")
    ids = m.run("to be", quiet=True).ids
    with np.errstate(all="ignore"), torch.no_grad(), tracing() as trace:
        engine(torch.tensor([list(ids)]))
    step, what = numerics.first_nonfinite(trace)
    assert step == "decoder.0.ffn.out"  # by construction: see the module docstring
    with pytest.raises(numerics.NonFiniteError) as e:
        engine_diff.diff(m, "to be", ("reference", "float32"))
    assert f"the float32 engine's values are non-finite (NaN or inf) from {step} on ({what})" in (
        str(e.value)
    )
    # the reference alone stays finite: diff compares every step of a model that does
    r = engine_diff.diff(load(models / "dec"), "to be", ("reference", "float32"))
    assert r.first_beyond["float32"] is None and len(r.rows) > 60


def test_parse_engines_keeps_spaces_and_refuses_empty_names():
    assert parse_engines(" reference , int8 ") == ["reference", "int8"]
    for text in ("reference,,torch", "reference,torch,", ",torch,reference"):
        with pytest.raises(InputError, match="has an empty engine name"):
            parse_engines(text)


def test_config_specials_refuses_an_id_past_the_tokenizer(models):
    """An id within the embedding table (Qwen2's is longer than its tokenizer) but past the
    tokenizer names no token: refused, never skipped; one inside is taken."""
    tok = HFTokenizer.from_files(models / "llama")  # its tokenizer.json: 20 tokens
    with pytest.raises(TokenizerError, match=r"eos_token_id \[3, 20\]: 20 is not a token of"):
        hf_llama.config_specials(tok, {"eos_token_id": [3, 20]})
    with pytest.raises(TokenizerError, match="bos_token_id 25: 25 is not a token of"):
        hf_llama.config_specials(tok, {"bos_token_id": 25})
    taken = hf_llama.config_specials(tok, {"eos_token_id": 7, "bos_token_id": None})
    assert taken.eos_id == 7 and taken.bos_id == tok.bos_id


def test_available_memory_sees_an_address_space_limit():
    """The estimate init and loading compare with: below a ulimit -v that MemAvailable ignores."""
    code = (
        "import resource\nfrom glassformer import weights\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))\n"
        "print(weights.available_memory())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    assert 0 < int(r.stdout) < 3 * 2**30
    assert weights.available_memory() > 0


def test_resume_records_and_keeps_its_own_data(models, tmp_path, capsys):
    """A run records the sha256 of what it read; --resume without --data reads the run's own
    (its train_config.json still names that file afterwards, not the default tinyshakespeare);
    --new-data records the new data."""
    import hashlib

    shutil.copytree(models / "lm", tmp_path / "run")
    path = tmp_path / "run" / "train_config.json"
    corpus = (models / "corpus.txt").read_text()
    recorded = json.loads(path.read_text())["source"]
    assert recorded == {
        "data": {
            "name": str((models / "corpus.txt").resolve()),
            "sha256": hashlib.sha256(corpus.encode()).hexdigest(),
        },
        "valid": None,
    }
    resume = ["train", "lm", "--out", str(tmp_path / "run"), *TINY[:-2], "--resume"]
    assert main([*resume, "--set", "max_steps=3"]) == 0
    assert json.loads(path.read_text())["source"] == recorded
    other = tmp_path / "other.txt"
    other.write_text(OTHER)
    assert main([*resume, "--set", "max_steps=4", "--data", str(other), "--new-data"]) == 0
    now = json.loads(path.read_text())["source"]["data"]
    assert now == {"name": str(other), "sha256": hashlib.sha256(OTHER.encode()).hexdigest()}
    capsys.readouterr()


def test_no_note_when_the_probe_is_known(models, tmp_path, capsys):
    assert main([*[_fill(a, tmp_path, models) for a in LM], "--snapshot-views", "to be"]) == 0
    assert "note: --snapshot-views" not in capsys.readouterr().err
