"""No import circles anywhere in the package (issue 36, point 9): every module's imports, read with
`test_layout.imports` (`ast`, nothing imported; imports inside functions and under TYPE_CHECKING
count too), make a graph whose strongly connected components are single modules. A circle means
two modules that cannot be read, tested or moved apart: the seam is in the wrong place.
"""

from __future__ import annotations

from test_layout import MODULES, imports


def graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, without the packages above it (importing
    `a.b.c` runs `a.b`'s __init__, which is no circle of `a.b.c`'s making)."""
    return {
        m: {i for i in imports(m) if i in MODULES and i != m and not m.startswith(i + ".")}
        for m in MODULES
    }


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_finder_finds_a_circle_and_only_circles():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert circles(g) == [["a", "b", "c"], ["e", "f"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions():
    # runtime.py imports generating inside `translations`; model.py imports runtime at the top
    assert "glassformer.generating" in graph()["glassformer.runtime"]
    assert "glassformer.runtime" in graph()["glassformer.model"]


def test_no_module_imports_itself_back():
    found = circles(graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)
