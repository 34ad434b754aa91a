"""ES modules as one classic script, for the pages that must work offline from one file (the
static report, the time-lapse page): an inline `<script>` cannot import another file.

    bundle("report.js", asset)   the entry module and everything it imports, in one script

Each module runs in its own function scope, after the modules it imports: `import { a, b as c }
from "./x.js";` becomes `const { a, b: c } = __gf_x;` and the scope returns the exported names.
It reads only what the house style writes: named imports of "./name.js" in the same folder, and
`export` before a function, class, const or let of one name. Anything else (a default export, a
re-export, a namespace import, a cycle, a name not exported, an exported `let` assigned again:
an importer holds a copy) is a ValueError naming the file and line, never bundled wrongly.

Deliberately not here: a JavaScript parser (it reads lines), minifying, source maps.
"""

from __future__ import annotations

import re
from collections.abc import Callable

IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w.-]+\.js)";?\s*$')
SIDE_EFFECT = re.compile(r'^import\s*"\./([\w.-]+\.js)";?\s*$')
STATEMENT = re.compile(r"^import(?=[\s{\"'*])")  # not `importance = 1` nor `import(...)`
EXPORT = re.compile(r"^export\s+(?:async\s+function\*?|function\*?|class|const|let)\s+([\w$]+)")
NAME = re.compile(r"^[A-Za-z_$][\w$]*$")

Import = tuple[str, list[tuple[str, str]], str]  # (module, [(exported, local)], "file, line k")


def bundle(entry: str, read: Callable[[str], str]) -> str:
    """The entry module and what it imports, in order, as one classic script (see above)."""
    order: list[str] = []
    parsed: dict[str, tuple[list[Import], list[str], list[str]]] = {}

    def visit(name: str, path: tuple[str, ...], where: str) -> None:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise ValueError(f"{where}: an import cycle ({cycle}); a bundle needs an order")
        if name in parsed:
            return
        same = [n for n in parsed if _var(n) == _var(name)]
        if same:
            raise ValueError(f"{where}: {name} and {same[0]} would share the name {_var(name)}")
        try:
            text = read(name)
        except (OSError, KeyError) as e:
            raise ValueError(f"{where}: cannot read {name} ({e})") from e
        parsed[name] = _parse(name, text)
        for dep, _, line in parsed[name][0]:
            visit(dep, (*path, name), line)
        order.append(name)

    visit(entry, (), entry)
    out = ["(() => {", '"use strict";']
    for name in order:
        imports, exports, body = parsed[name]
        out.append(f"// -- {name}")
        out.append(f"const {_var(name)} = (() => {{")
        for dep, names, line in imports:
            missing = [a for a, _ in names if a not in parsed[dep][1]]
            if missing:
                raise ValueError(f"{line}: {dep} does not export {', '.join(missing)}")
            if names:
                wanted = ", ".join(a if a == b else f"{a}: {b}" for a, b in names)
                out.append(f"const {{ {wanted} }} = {_var(dep)};")
        out.extend(body)
        out.append(f"return {{ {', '.join(exports)} }};")
        out.append("})();")
    out.append("})();")
    return "\n".join(out) + "\n"


def _parse(name: str, text: str) -> tuple[list[Import], list[str], list[str]]:
    """(imports, exported names, body lines) of one module."""
    imports: list[Import] = []
    exports: list[str] = []
    body: list[str] = []
    lets: dict[str, int] = {}  # exported `let` -> the line declaring it
    lines = iter(enumerate(text.splitlines(), 1))
    for k, line in lines:
        where = f"{name}, line {k}"
        while line.startswith("import {") and "}" not in line:  # one wrapped over lines
            line += " " + next(lines, (k, "}"))[1].strip()
        if STATEMENT.match(line):
            if m := SIDE_EFFECT.match(line):
                imports.append((m.group(1), [], where))
                continue
            m = IMPORT.match(line)
            if not m:
                raise ValueError(f'{where}: only `import {{ a, b as c }} from "./x.js";` bundles')
            names = []
            for part in filter(None, (p.strip() for p in m.group(1).split(","))):
                a, _, b = (x.strip() for x in part.partition(" as "))
                if not NAME.match(a) or (b and not NAME.match(b)):
                    raise ValueError(f"{where}: cannot read the imported name {part!r}")
                names.append((a, b or a))
            imports.append((m.group(2), names, where))
            continue
        if line.startswith("export"):
            m = EXPORT.match(line)
            if not m or (line.split()[1] in ("const", "let") and _several(line)):
                raise ValueError(
                    f"{where}: only `export` before a function, class, const or let of one "
                    "name bundles (not default, lists, re-exports or several names)"
                )
            exports.append(m.group(1))
            if line.split()[1] == "let":
                lets[m.group(1)] = k
            line = line[len("export") :].lstrip()
        body.append(line)
    for let, at in lets.items():
        again = re.compile(
            rf"(?<![\w$.]){re.escape(let)}\s*(?:[-+*/%&|^]|\*\*|<<|>>>?|&&|\|\||\?\?)?=(?![=>])"
            rf"|(?<![\w$.]){re.escape(let)}\s*(?:\+\+|--)|(?:\+\+|--)\s*{re.escape(let)}(?![\w$])"
        )
        for k, line in enumerate(text.splitlines(), 1):
            if k != at and again.search(line):
                raise ValueError(
                    f"{name}, line {k}: {let} is an exported `let` assigned again, and an "
                    "importer keeps a copy; export a function that returns it"
                )
    return imports, exports, body


def _several(line: str) -> bool:
    """Whether a `const`/`let` line declares several names: a comma outside brackets and strings
    (`a = 1, b = 2`), not one inside them (`f = (a, b = 2) => a`, `s = "a, b"`)."""
    depth, quote, prev = 0, "", ""
    for c in line:
        if quote:
            quote = "" if c == quote and prev != "\\" else quote
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and (c == ";" or c + prev == "//"):
            return False
        elif depth == 0 and c == ",":
            return True
        prev = c
    return False


def _var(name: str) -> str:
    """The bundle's variable of a module: report.js -> __gf_report, timelapse-data.js ->
    __gf_timelapse_data."""
    return "__gf_" + re.sub(r"\W", "_", name.removesuffix(".js"))
