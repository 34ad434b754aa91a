"""ES modules as one classic script, for the pages that must work offline from one file (the
static report, the time-lapse page): an inline `<script>` cannot import another file.

    bundle("report.js", asset)   the entry module and everything it imports, in one script

Each module (`read(name)` gives its text) runs in its own function scope, after the modules it
imports; its `import { a, b as c } from "./x.js";` lines become `const { a, b: c } = __gf_x;`
and its exported names are what its scope returns. The house style keeps what this reads small:
named imports of "./name.js" files of the same folder, and `export` before a `function`,
`async function`, `class`, `const` or `let` declaring one name.

Deliberately not here: minifying, source maps, anything a module loader does at run time (the
explorer serves the same files as modules; the browser loads them itself).
"""

from __future__ import annotations

import re
from collections.abc import Callable

IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w.-]+\.js)";?\s*$')
SIDE_EFFECT = re.compile(r'^import\s*"\./([\w.-]+\.js)";?\s*$')
EXPORT = re.compile(r"^export\s+(?:async\s+function\*?|function\*?|class|const|let)\s+([\w$]+)")
NAME = re.compile(r"^[A-Za-z_$][\w$]*$")


def bundle(entry: str, read: Callable[[str], str]) -> str:
    """The entry module and what it imports, in order, as one classic script (see above)."""
    order: list[str] = []
    parsed: dict[str, tuple[list[tuple[str, list[tuple[str, str]]]], list[str], list[str]]] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise ValueError(f"{name}: an import cycle ({cycle}); a bundle needs an order")
        if name in parsed:
            return
        parsed[name] = _parse(name, read(name))
        for dep, _ in parsed[name][0]:
            visit(dep, (*path, name))
        order.append(name)

    visit(entry, ())
    out = ["(() => {", '"use strict";']
    for name in order:
        imports, exports, body = parsed[name]
        out.append(f"// -- {name}")
        out.append(f"const {_var(name)} = (() => {{")
        for dep, names in imports:
            if names:
                wanted = ", ".join(a if a == b else f"{a}: {b}" for a, b in names)
                out.append(f"const {{ {wanted} }} = {_var(dep)};")
        out.extend(body)
        out.append(f"return {{ {', '.join(exports)} }};")
        out.append("})();")
    out.append("})();")
    return "\n".join(out) + "\n"


def _parse(name: str, text: str):
    """(imports [(module, [(exported, local)])], exported names, body lines) of one module."""
    imports: list[tuple[str, list[tuple[str, str]]]] = []
    exports: list[str] = []
    body: list[str] = []
    lines = iter(enumerate(text.splitlines(), 1))
    for k, line in lines:
        where = f"{name}, line {k}"
        while line.startswith("import {") and "}" not in line:  # one wrapped over lines
            line += " " + next(lines, (k, "}"))[1].strip()
        if line.startswith("import"):
            if m := SIDE_EFFECT.match(line):
                imports.append((m.group(1), []))
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
            imports.append((m.group(2), names))
            continue
        if line.startswith("export"):
            m = EXPORT.match(line)
            if not m or re.match(r"^export\s+(?:const|let)\s+[\w$]+\s*=.*,\s*[\w$]+\s*=", line):
                raise ValueError(
                    f"{where}: only `export` before a function, class, const or let of one "
                    "name bundles (not default, lists, re-exports or several names)"
                )
            exports.append(m.group(1))
            line = line[len("export") :].lstrip()
        body.append(line)
    return imports, exports, body


def _var(name: str) -> str:
    """The bundle's variable of a module: report.js -> __gf_report, timelapse-data.js ->
    __gf_timelapse_data."""
    return "__gf_" + re.sub(r"\W", "_", name.removesuffix(".js"))
