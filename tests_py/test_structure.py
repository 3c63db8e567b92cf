"""The structure the docs promise, checked on the real tree.

- Go layering: the fenced ``layers`` block of docs/architecture.md lists the
  module's packages, one layer per line, top to bottom. A package may import
  only packages on lines below its own; every package of the module is named
  there, and every name there is a package of the module.
- ``import bitnet_go`` imports neither ``bitnet_go.bench`` nor torch.
- No import cycle among the modules of the ``bitnet_go`` package, counting the
  imports inside functions (which hide cycles from a plain import).

The checkers are plain functions over text and graphs, unit-tested below on
small synthetic inputs, then run on the repository.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCH_DOC = ROOT / "docs" / "architecture.md"
PY_SRC = ROOT / "python"

# Build configurations whose imports are united: a file behind a build
# constraint (driver_other.go, noasm fallbacks) counts as much as the host's.
GO_CONFIGS: list[tuple[dict[str, str], list[str]]] = [
    ({}, []),
    ({}, ["-tags", "noasm"]),
    ({"GOOS": "darwin", "GOARCH": "arm64", "CGO_ENABLED": "1"}, []),
    ({"GOOS": "windows", "GOARCH": "amd64", "CGO_ENABLED": "1"}, []),
]

Graph = Mapping[str, Iterable[str]]


# ---------------------------------------------------------------- Go layering


def parse_layers(markdown: str) -> list[list[str]]:
    """The layers of the one fenced ```layers block in ``markdown``, top layer first.

    Raises ValueError when there is no such block, more than one, or a package
    is named twice.
    """
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in markdown.splitlines():
        stripped = line.strip()
        if current is None:
            if stripped == "```layers":
                current = []
        elif stripped.startswith("```"):
            blocks.append(current)
            current = None
        else:
            current.append(stripped)
    if current is not None:
        raise ValueError("the ```layers block is not closed")
    if len(blocks) != 1:
        raise ValueError(f"expected one ```layers block, found {len(blocks)}")
    layers = [line.split() for line in blocks[0] if line]
    seen: set[str] = set()
    for pkg in (p for layer in layers for p in layer):
        if pkg in seen:
            raise ValueError(f"{pkg} is named twice in the layers block")
        seen.add(pkg)
    return layers


def layering_violations(layers: list[list[str]], imports: Graph) -> list[str]:
    """Every way the import graph breaks the layering, one message each (empty: none).

    ``imports`` maps each package of the module to the module packages it
    imports (paths relative to the module root). A package may import only
    packages on a later (lower) line of ``layers``.
    """
    line_of = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    problems: list[str] = []
    for pkg in sorted(imports):
        if pkg not in line_of:
            problems.append(f"{pkg}: a package of the module that the layers block does not name")
    for pkg in sorted(line_of):
        if pkg not in imports:
            problems.append(f"{pkg}: named in the layers block but no such package in the module")
    for pkg in sorted(imports):
        for dep in sorted(set(imports[pkg])):
            if pkg not in line_of or dep not in line_of:
                continue  # reported above
            if line_of[dep] <= line_of[pkg]:
                where = "its own line" if line_of[dep] == line_of[pkg] else f"line {line_of[dep] + 1}, above"
                problems.append(f"{pkg} (line {line_of[pkg] + 1}) imports {dep} ({where})")
    return problems


def go_import_graph(root: Path) -> dict[str, set[str]]:
    """The module's packages and their in-module imports (not test imports), united over GO_CONFIGS."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("the structure check needs Go on PATH")
    module = subprocess.run([go, "list", "-m"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    graph: dict[str, set[str]] = {}
    fmt = "{{if not .Error}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}"
    for i, (env, flags) in enumerate(GO_CONFIGS):
        # -e on the cross configurations: a package with no files for that
        # platform is not an error there; the host's list must be clean.
        cmd = [go, "list", *flags, *(["-e"] if i else []), "-f", fmt, "./..."]
        out = subprocess.run(cmd, cwd=root, env={**os.environ, **env}, capture_output=True, text=True)
        assert out.returncode == 0, f"{' '.join(cmd)} ({env}): {out.stderr}"
        for line in out.stdout.splitlines():
            if not line.strip():
                continue
            pkg, *deps = line.split()
            rel = _relative(module, pkg)
            assert rel is not None, f"go list ./... listed {pkg} outside module {module}"
            graph.setdefault(rel, set()).update(r for r in (_relative(module, d) for d in deps) if r is not None)
    return graph


def _relative(module: str, path: str) -> str | None:
    """``path`` relative to the module root, or None for a package outside the module."""
    if path == module:
        return "."
    if path.startswith(module + "/"):
        return path[len(module) + 1 :]
    return None


def test_parse_layers() -> None:
    doc = "# x\n```go\nnot this\n```\n```layers\na\n\nb c\n  d  \n```\ntext\n"
    assert parse_layers(doc) == [["a"], ["b", "c"], ["d"]]
    with pytest.raises(ValueError, match="expected one"):
        parse_layers("no block")
    with pytest.raises(ValueError, match="expected one"):
        parse_layers("```layers\na\n```\n```layers\nb\n```\n")
    with pytest.raises(ValueError, match="not closed"):
        parse_layers("```layers\na\n")
    with pytest.raises(ValueError, match="named twice"):
        parse_layers("```layers\na b\nc a\n```\n")


def test_layering_accepts_downward_imports() -> None:
    layers = [["top"], ["mid1", "mid2"], ["low"]]
    graph = {"top": {"mid1", "low"}, "mid1": {"low"}, "mid2": set(), "low": set()}
    assert layering_violations(layers, graph) == []


@pytest.mark.parametrize(
    ("graph", "want"),
    [
        # upward edge
        (
            {"top": set(), "mid1": {"top"}, "mid2": set(), "low": set()},
            ["mid1 (line 2) imports top (line 1, above)"],
        ),
        # same line
        (
            {"top": set(), "mid1": {"mid2"}, "mid2": set(), "low": set()},
            ["mid1 (line 2) imports mid2 (its own line)"],
        ),
        # a package the block does not name (and its edges are not judged)
        (
            {"top": set(), "mid1": set(), "mid2": set(), "low": set(), "extra": {"top"}},
            ["extra: a package of the module that the layers block does not name"],
        ),
        # a name in the block that is no package
        (
            {"top": set(), "mid1": set(), "low": set()},
            ["mid2: named in the layers block but no such package in the module"],
        ),
        # every offending edge is reported, not only the first
        (
            {"top": set(), "mid1": set(), "mid2": set(), "low": {"top", "mid1", "mid2"}},
            [
                "low (line 3) imports mid1 (line 2, above)",
                "low (line 3) imports mid2 (line 2, above)",
                "low (line 3) imports top (line 1, above)",
            ],
        ),
    ],
)
def test_layering_rejects(graph: dict[str, set[str]], want: list[str]) -> None:
    assert layering_violations([["top"], ["mid1", "mid2"], ["low"]], graph) == want


def test_go_packages_follow_the_documented_layers() -> None:
    layers = parse_layers(ARCH_DOC.read_text())
    problems = layering_violations(layers, go_import_graph(ROOT))
    assert not problems, "docs/architecture.md layering:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------- Python imports


def test_import_bitnet_go_imports_neither_bench_nor_torch() -> None:
    import bitnet_go

    pkg_parent = str(Path(bitnet_go.__file__).resolve().parent.parent)  # the copy under test
    code = (
        "import json, sys; import bitnet_go; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] == 'torch' or m == 'bitnet_go.bench' or m.startswith('bitnet_go.bench.'))))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_parent, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"import bitnet_go imported {loaded}"


def python_import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """The imports among the modules of ``package`` (found under ``src``), from their syntax.

    Every import statement counts, at module level or inside a function or
    class, except those under ``if TYPE_CHECKING:`` (never executed). ``from P
    import n`` is an edge to module ``P.n`` when that is a module of the
    package, else to ``P``. Importing a submodule is not counted as importing
    its parent packages (every submodule would otherwise close a cycle with an
    ``__init__`` that imports it).
    """
    base = src / package
    modules: dict[str, Path] = {}
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    parent = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    parent = node.module or ""
                targets = [f"{parent}.{a.name}" if f"{parent}.{a.name}" in modules else parent for a in node.names]
            for target in targets:
                # `import a.b.c` binds and runs a.b.c: the deepest module of the package named
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_cycles(graph: Graph) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected group of mutually importing modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(_cycle_through(graph, set(g)) for g in groups)


def _cycle_through(graph: Graph, group: set[str]) -> list[str]:
    """A shortest cycle from the group's first module back to itself, within the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    return paths[v] + [start]
                if w in group and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def _write_package(root: Path, spec: str) -> Path:
    """Write a synthetic package tree under ``root`` and return ``root``.

    ``spec`` holds the files one after another, each after a ``# file: PATH`` line.
    """
    path: Path | None = None
    for line in textwrap.dedent(spec).splitlines(keepends=True):
        if line.startswith("# file: "):
            path = root / line[len("# file: ") :].strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        elif path is not None:
            with path.open("a") as f:
                f.write(line)
    return root


def test_python_import_graph_resolves_every_form(tmp_path: Path) -> None:
    spec = """
        # file: pkg/__init__.py
        from . import a
        from .sub import c
        # file: pkg/a.py
        import numpy
        from ._b import f
        # file: pkg/_b.py
        def f():
            from pkg.sub import c
            import pkg.sub.d as d
        # file: pkg/sub/__init__.py
        from .. import a
        from ..a import x
        # file: pkg/sub/c.py
        from . import d
        from pkg import name_in_init
        # file: pkg/sub/d.py
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from pkg import a
        else:
            import pkg._b
    """
    assert python_import_graph(_write_package(tmp_path, spec), "pkg") == {
        "pkg": {"pkg.a", "pkg.sub.c"},
        "pkg.a": {"pkg._b"},
        "pkg._b": {"pkg.sub.c", "pkg.sub.d"},
        "pkg.sub": {"pkg.a"},
        "pkg.sub.c": {"pkg.sub.d", "pkg"},
        "pkg.sub.d": {"pkg._b"},
    }


def test_import_cycles_found_even_inside_functions(tmp_path: Path) -> None:
    spec = """
        # file: pkg/__init__.py
        from .x import f
        # file: pkg/x.py
        from . import y
        def f():
            pass
        # file: pkg/y.py
        def g():
            from . import x  # hidden by a local import
        # file: pkg/z.py
        from .x import f
    """
    assert import_cycles(python_import_graph(_write_package(tmp_path, spec), "pkg")) == [["pkg.x", "pkg.y", "pkg.x"]]


def test_import_cycles() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d2"}, "d2": {"d"}}) == [
        ["a", "b", "c", "a"],
        ["d", "d2", "d"],
    ]
    # one group, reported once, by a shortest way round
    assert import_cycles({"a": {"b", "c"}, "b": {"a"}, "c": {"b"}}) == [["a", "b", "a"]]


def test_no_import_cycles_in_bitnet_go() -> None:
    cycles = import_cycles(python_import_graph(PY_SRC, "bitnet_go"))
    assert not cycles, "import cycles (counting imports inside functions):\n  " + "\n  ".join(
        " -> ".join(c) for c in cycles
    )
