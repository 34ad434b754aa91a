"""A name that is neither a folder nor a preset leads somewhere (issue 37, point 4): the refusal
names the nearest presets and folders, lists the presets, and says that nothing is downloaded;
a preset without a tokenizer is called a preset, not a checkpoint. The oracle: the presets
themselves (`glassformer.PRESETS`) and the folders beside the name."""

import pytest

import glassformer
from glassformer import PRESETS
from glassformer.cli import main
from glassformer.errors import CheckpointError, GlassformerError


@pytest.mark.parametrize(
    "name, nearest",
    [("hello_world", "hello-world"), ("helloworld", "hello-world"), ("gpt2", "gpt2-small")],
)
def test_a_near_miss_names_the_preset_it_meant(name, nearest, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError) as e:
        glassformer.load(name)
    said = str(e.value)
    assert f"did you mean '{nearest}'" in said and "never downloads" in said
    assert all(p in said for p in PRESETS)  # every preset listed
    assert "\n" not in said


def test_a_hub_name_is_told_that_nothing_is_downloaded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match="never downloads") as e:
        glassformer.load("Qwen/Qwen2-0.5B")
    assert "did you mean" not in str(e.value)  # nothing near it: no guess


def test_a_misspelt_folder_names_the_folder_beside_it(tmp_path, monkeypatch):
    glassformer.load("hello-world").save(tmp_path / "models" / "en-es")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=r"did you mean 'models/en-es'"):
        glassformer.load("models/en_es")


def test_the_command_line_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "hello_world", "Hello"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "did you mean 'hello-world'" in err[0], err


def test_a_preset_without_a_tokenizer_is_called_a_preset():
    m = glassformer.load("gpt2-small")
    with pytest.raises(GlassformerError) as e:
        m.generate("Hello")
    said = str(e.value)
    assert said.startswith("preset gpt2-small has random weights and no tokenizer")
    assert "checkpoint" not in said.split(":")[0]
