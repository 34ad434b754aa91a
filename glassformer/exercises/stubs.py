"""The stub of an exercise: a Python file with the function's signature and a docstring (the
equation, the article's words, the shapes) and no solution (its body raises NotImplementedError);
written atomically, never over an existing file unless asked.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from glassformer import files
from glassformer.errors import OutputExists, param, yes_or_no
from glassformer.exercises.base import Exercise
from glassformer.exercises.catalogue import EXERCISES, exercise


def _indent(text: str, n: int, width: int = 96) -> str:
    """Each line of `text` indented by n, long lines wrapped (their own indent kept)."""
    out = []
    for line in text.splitlines():
        lead = " " * (n + len(line) - len(line.lstrip()))
        out += textwrap.wrap(line, width, initial_indent=" " * n, subsequent_indent=lead) or [""]
    return "\n".join(out)


def stub(number) -> str:
    """The text of exercise `number`'s stub file."""
    ex = exercise(number)
    check = f"glassformer exercises check {ex.number} {ex.filename}"
    intro = (
        f"From {ex.article}. Write the body of {ex.function} below, then check it against "
        "glassformer's reference engine:"
    )
    after = (
        f"or, in Python: glassformer.exercises.check({ex.number}, {ex.function}). The check runs "
        "it on the article's own numbers and on random inputs of several shapes, and says where "
        "it first differs. The inputs are NumPy float64 arrays."
    )
    head = (
        f'"""Exercise {ex.number} of {len(EXERCISES)}: {ex.title}.\n\n'
        f"{_indent(intro, 0)}\n\n    {check}\n\n{_indent(after, 0)}\n" + '"""\n'
    )
    doc = [_indent(ex.summary, 0), "", "The equations:", _indent(ex.equation, 4), ""]
    doc += ["The article:", _indent(ex.passage, 4), ""]
    if ex.notes:
        doc += [_indent(ex.notes, 0), ""]
    doc += ["Shapes:", _indent(ex.shapes, 4)]
    body = _indent('"""' + "\n".join(doc) + '\n"""', 4)
    body = "\n".join(line.rstrip() for line in body.splitlines())
    raise_line = f'    raise NotImplementedError("exercise {ex.number}: write {ex.function}")\n'
    return (
        f"{head}\nimport numpy as np  # noqa: F401\n\n\n"
        f"def {ex.function}({ex.params}):\n{body}\n{raise_line}"
    )


def start(number, folder: str | Path = ".", overwrite: bool = False) -> Path:
    """Write exercise `number`'s stub into `folder` (made if missing) as exNN_name.py; an
    existing file is replaced only with overwrite=True. The path written."""
    ex: Exercise = exercise(number)
    path = Path(folder) / ex.filename
    if path.exists() and not yes_or_no(overwrite):
        raise OutputExists(
            f"{path} already exists (your work?); give {param('overwrite', True)} to replace it "
            "with a fresh "
            "stub, or choose another folder"
        )
    return files.write_file(path, stub(ex).encode("utf-8"))


def started(folder: str | Path = ".") -> dict[int, bool]:
    """{number: whether its file exists in `folder`}."""
    return {ex.number: (Path(folder) / ex.filename).is_file() for ex in EXERCISES}
