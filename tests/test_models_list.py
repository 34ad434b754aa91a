"""`glassformer models` and `glassformer.models()` (issue 37, point 4): the shipped models with
their cards' first line, the presets with their shape and size, and the folders here (one level,
and runs/*) that a command takes: glassformer checkpoints, Hugging Face folders, nanoGPT out_dirs.
Oracles: the folders on disk (models/, their README.md, config.json), `glassformer.PRESETS` and
`weights.n_params`, and folders made here of each kind (and of none)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import glassformer
from glassformer import PRESETS, weights
from glassformer.cli import main
from glassformer.config import Config
from glassformer.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (ROOT / "models").iterdir() if (p / "config.json").is_file())


def card(name: str) -> str:
    """The first line of a shipped model's card, without its '# name: '."""
    first = (ROOT / "models" / name / "README.md").read_text(encoding="utf-8").splitlines()[0]
    return first.removeprefix(f"# {name}: ")


def size(folder: Path) -> int:
    return weights.n_params(Config.from_dict(json.loads((folder / "config.json").read_text())))


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working folder with one folder of each kind, a folder of none, and the shipped models
    linked as a clone has them."""
    (tmp_path / "models").symlink_to(ROOT / "models")
    glassformer.load("tiny").save(tmp_path / "runs" / "lm")
    glassformer.load("hello-world").save(tmp_path / "hw")
    hf = tmp_path / "runs" / "hf"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "out-shakespeare-char").mkdir()
    (tmp_path / "out-shakespeare-char" / "ckpt.pt").write_bytes(b"")
    (tmp_path / "notes").mkdir()  # a folder that is no model
    (tmp_path / "runs" / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_python_lists_the_shipped_models_presets_and_folders_here(here):
    found = glassformer.models()
    assert [m["name"] for m in found.shipped] == [f"models/{n}" for n in SHIPPED]
    for m, name in zip(found.shipped, SHIPPED, strict=True):
        assert m["about"] == card(name) and m["parameters"] == size(ROOT / "models" / name)
    assert [p["name"] for p in found.presets] == list(PRESETS)
    for p in found.presets:
        cfg = PRESETS[p["name"]]
        assert (p["arch"], p["parameters"]) == (cfg.arch, weights.n_params(cfg)) and p["about"]
    kinds = {f["name"]: f["kind"] for f in found.folders}
    assert kinds == {
        "hw": "glassformer",
        "runs/lm": "glassformer",
        "runs/hf": "hugging face",
        "out-shakespeare-char": "nanogpt",
    }
    lm = next(f for f in found.folders if f["name"] == "runs/lm")
    assert (lm["arch"], lm["parameters"]) == ("decoder", weights.n_params(PRESETS["tiny"]))
    assert "meta.pkl" in next(f["about"] for f in found.folders if f["kind"] == "nanogpt")
    assert json.loads(found.to_json()) == found.to_dict()
    assert repr(found).startswith(f"<glassformer.Models {len(SHIPPED)} shipped, {len(PRESETS)}")


def test_the_command_prints_every_name_and_the_same_json(here, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in [*(f"models/{n}" for n in SHIPPED), *PRESETS, "runs/lm", "runs/hf", "hw"]:
        assert f"  {name} " in out, name
    assert all(card(n) in out for n in SHIPPED)
    assert "notes" not in out and "runs/empty" not in out
    assert out.rstrip().splitlines()[-1].startswith("glassformer never downloads a model")
    assert main(["models", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == glassformer.models().to_dict()


def test_another_folder_is_looked_into_and_named_as_given(here, capsys):
    assert main(["models", "runs", "--json"]) == 0
    names = [f["name"] for f in json.loads(capsys.readouterr().out)["folders"]]
    assert names == ["runs/hf", "runs/lm"]
    assert main(["models", "no-such-folder"]) == 2
    assert "no-such-folder is not a folder" in capsys.readouterr().err


def test_outside_the_clone_the_shipped_models_have_their_full_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = glassformer.models()
    assert [m["name"] for m in found.shipped] == [str(ROOT / "models" / n) for n in SHIPPED]
    assert found.folders == []


def test_an_unknown_name_names_the_list_in_python_and_on_the_command_line(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError) as e:
        glassformer.load("hello_world")
    said = str(e.value)
    assert "'hello-world'" in said and "glassformer.models()" in said and "never downloads" in said
    assert main(["generate", "hello_world", "Hi"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'hello-world'" in err[0] and "never downloads" in err[0], err
    assert "glassformer models" in err[0] and "glassformer.models()" not in err[0]


def test_a_config_linked_out_of_its_folder_is_not_read(tmp_path, monkeypatch):
    """The list reads a folder's files only from inside it (files.member): a config.json that is
    a link to a valid config elsewhere leaves its folder out of the list (member refuses it), never
    gives a row built from the file outside (the control: the same file copied in is read)."""
    monkeypatch.chdir(tmp_path)
    src = ROOT / "models" / "char-lm"
    for name, how in (("copied", shutil.copy), ("linked", os.symlink)):
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        how(src / "config.json", d / "config.json")
        (d / "model.safetensors").write_bytes(b"")
    rows = {Path(f["name"]).name: f for f in glassformer.models().folders}
    assert rows["copied"]["arch"] == "decoder"
    assert "linked" not in rows
    # a card or a config linked out of a models/ folder is not read either
    from glassformer import catalog

    (tmp_path / "elsewhere.md").write_text("# x: read from outside\n", encoding="utf-8")
    for name, how in (("copied", shutil.copy), ("linked", os.symlink)):
        d = tmp_path / "models" / name
        d.mkdir(parents=True)
        how(src / "config.json", d / "config.json")
        how(tmp_path / "elsewhere.md", d / "README.md")
    rows = {Path(r["name"]).name: r for r in catalog._shipped(tmp_path / "models")}
    assert rows["copied"]["about"] == "x: read from outside" and rows["copied"]["arch"] == "decoder"
    assert rows["linked"]["about"] == "" and rows["linked"]["arch"] is None
