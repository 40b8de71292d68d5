"""Unit tier: every package imports only what the layering rules allow, and no module imports
itself back through others (no import cycles).

The rules (README, "Layout"):

- ``golden``: the standard library, numpy and ml_dtypes only;
- ``hdl``: the standard library and Amaranth only;
- ``tb``: the golden models and ``hdl.layouts`` (the stream layouts; Amaranth for their
  types), cocotb, numpy and ml_dtypes;
- ``sim.build``: ``golden``, ``hdl`` and ``tb`` (it generates and builds the tile);
- ``sim.api``: that and ``sim.build``; ``sim.waves``: that and ``sim.api``;
- ``sim.apps``: anything (the applications; the only part of ``sim`` that may import
  ``scaling``);
- ``scaling``: ``golden``, numpy, rich, matplotlib;
- ``nki``: ``golden``, ``scaling`` (the hardware presets) and ``sim.api`` (the run API);
  nothing below it imports it;
- the ``systolica`` top level: only the command's entry point.

Every import counts, also those inside functions (a lazy import still ties the layers).
"""

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]   # tests/unit/this file
#: Source folder of each top-level package (pyproject's package-dir).
ROOTS = {"golden": "golden", "hdl": "hdl", "tb": "tb", "sim": "sim", "scaling": "scaling",
         "systolica": "systolica", "nki": "nki"}

#: Layer -> (systolica modules it may import, by prefix; third-party top-level names, or
#: None for any).
RULES = {
    "golden": ({"golden"}, {"numpy", "ml_dtypes"}),
    "hdl": ({"hdl"}, {"amaranth"}),
    "tb": ({"tb", "golden", "hdl.layouts"}, {"cocotb", "numpy", "ml_dtypes", "amaranth"}),
    "sim.build": ({"sim.build", "golden", "hdl", "tb"}, None),
    "sim.api": ({"sim.api", "sim.build", "golden", "hdl", "tb"}, None),
    "sim.waves": ({"sim.waves", "sim.api", "sim.build", "golden", "hdl", "tb"}, None),
    "sim.apps": ({"sim", "golden", "hdl", "tb", "scaling"}, None),
    "sim": ({"sim"}, set()),                       # sim/__init__.py, sim/__main__.py
    "scaling": ({"scaling", "golden"}, {"numpy", "rich", "matplotlib"}),
    "systolica": ({"sim.apps.main"}, set()),
    "nki": ({"nki", "golden", "scaling", "sim.api"}, None),
}


def _modules():
    """{module name without 'systolica.': (path, is_package)} for every source file."""
    found = {}
    for package, folder in ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            parts = parts[:-1] if is_package else parts
            found[".".join((package,) + parts)] = (path, is_package)
    return found


def _imports(name, path, is_package):
    """(systolica modules, third-party top-level names) that the file at ``path`` (module
    ``name``, without the ``systolica.`` prefix) imports."""
    own, third = set(), set()
    package = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[:len(package) - node.level + 1])
            targets = ([f"systolica.{base}.{node.module}"] if node.module else
                       [f"systolica.{base}.{alias.name}" for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            targets = ([f"{node.module}.{alias.name}" for alias in node.names]
                       if node.module.startswith("systolica") else [node.module])
        else:
            continue
        for target in targets:
            if target.startswith("systolica."):
                own.add(target.removeprefix("systolica."))
            elif target.split(".")[0] not in sys.stdlib_module_names:
                third.add(target.split(".")[0])
    return own, third


def _layer(name):
    for layer in sorted(RULES, key=len, reverse=True):
        if name == layer or name.startswith(layer + "."):
            return layer
    raise AssertionError(f"module {name} belongs to no layer")


def _resolve(target):
    """The module a systolica import names ('from package import name' may name a function
    or class: then the package)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target


MODULES = _modules()
GRAPH = {name: _imports(name, *info) for name, info in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_imports_follow_the_layering_rules(name):
    own, third = GRAPH[name]
    allowed_own, allowed_third = RULES[_layer(name)]
    wrong = sorted(m for m in (_resolve(t) for t in own)
                   if not any(m == p or m.startswith(p + ".") for p in allowed_own))
    assert not wrong, f"{name} (layer {_layer(name)}) imports {wrong}"
    if allowed_third is not None:
        assert third <= allowed_third, \
            f"{name} (layer {_layer(name)}) imports third-party {sorted(third - allowed_third)}"


def _cycles(edges):
    """Every back edge of a depth-first walk of ``edges`` ({node: set of nodes}), as the
    path that closes it (list of lists)."""
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return cycles


def test_there_are_no_import_cycles():
    # A module's own parent packages are not edges: Python imports them first anyway, and a
    # package may re-export its modules.
    edges = {name: {m for m in (_resolve(t) for t in GRAPH[name][0])
                    if m and m != name and not name.startswith(m + ".")}
             for name in MODULES}
    cycles = _cycles(edges)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_checks_catch_a_break(tmp_path):
    """The checker itself: a golden module importing hdl and scipy is seen, and a cycle is
    found (so a passing run means something)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from systolica.hdl import layouts\nimport scipy\nimport os\n")
    own, third = _imports("golden.probe", probe, False)
    assert own == {"hdl.layouts"} and third == {"scipy"}
    assert not any(_resolve("hdl.layouts").startswith(p) for p in RULES["golden"][0])
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
