"""Scaling layer: the layout rule (scaling imports only golden, numpy, stdlib, rich, matplotlib)."""

import ast
import sys
from pathlib import Path

ALLOWED_THIRD_PARTY = {"numpy", "rich", "matplotlib"}
SCALING = Path(__file__).resolve().parents[1] / "scaling"


def test_scaling_imports_only_what_the_layout_allows():
    seen = set()
    for path in SCALING.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                seen.add(name)
                top = name.split(".")[0]
                if top == "systolica":
                    assert name.startswith("systolica.golden"), f"{path.name} imports {name}"
                else:
                    assert top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY, \
                        f"{path.name} imports {name}"
    assert "systolica.golden.timing" in seen
