"""The README's Python examples run as written, and where a plain block follows one it is the
output the example really prints (documentation that runs)."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run_and_print_what_the_readme_shows(tmp_path, monkeypatch):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```(?:\n\n```\n(.*?)```)?", text, flags=re.S)
    assert blocks, "the README has a Python example"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").symlink_to(README.parent / "models")  # the shipped models, read only
    printed = []
    for code, shown in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), {"__name__": "readme"})
        printed.append(out.getvalue())
        if shown:
            assert out.getvalue().splitlines() == shown.splitlines(), code[:60]
    assert "encoder.0.self_attn.head1.A" in "".join(printed)
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
