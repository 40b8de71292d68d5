"""Unit tier: docs/nki.md's table of supported names covers every name ``nki.language`` and
``nki.isa`` provide (and names nothing they lack)."""

import re
from pathlib import Path

import pytest

from systolica.nki import isa, language

DOC = (Path(__file__).resolve().parents[3] / "docs" / "nki.md").read_text()


def _section(title):
    start = DOC.index(title)
    end = DOC.index("\n## ", start) if "\n## " in DOC[start:] else len(DOC)
    return DOC[start:DOC.index("\n### ", start + 1) if title.endswith("(`nisa`)") else end]


@pytest.mark.parametrize("module, title", [(isa, "### `nki.isa` (`nisa`)"),
                                           (language, "### `nki.language` (`nl`)")])
def test_every_name_is_in_the_supported_names_table(module, title):
    table = _section(title)
    named = set(re.findall(r"^\| ([^|]*)\|", table, re.M))
    listed = {n for cell in named for n in re.findall(r"`([A-Za-z_0-9]+)`", cell)}
    missing = sorted(set(module.__all__) - listed)
    assert not missing, f"docs/nki.md lacks {missing}"
    extra = sorted(n for n in listed - set(module.__all__) if n not in ("name",))
    assert not extra, f"docs/nki.md lists {extra}, which {module.__name__} does not provide"
