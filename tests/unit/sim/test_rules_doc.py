"""Unit tier: the rule index ``docs/rules.md`` cannot rot. Every golden function, RTL
component and test it names exists; its bit tables are what ``systolica.sim.rules`` generates
from the Amaranth layouts; the reference check and the generator catch each kind of break."""

from pathlib import Path

import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data

from systolica import golden
from systolica.golden import command
from systolica.hdl import layouts
from systolica.sim import rules

REPO = Path(__file__).resolve().parents[3]       # tests/unit/sim/this file
DOC = REPO / "docs" / "rules.md"


@pytest.fixture(scope="module")
def text():
    return DOC.read_text()


def test_every_reference_of_the_rule_index_exists(text):
    assert rules.check_references(text, REPO) == []
    assert len(rules.rule_rows(text)) >= 30


def test_bit_tables_are_generated_from_the_layouts(text):
    assert rules.regenerate(text) == text, "run python -m systolica.sim.rules"


def test_bit_table_rows_by_hand(text):
    # The command word's published positions (issue 30: op[0] ... n[81:66]; issue 25 adds
    # transpose[82] after them, then the tile fields, then the type codes' bit 3 for TF32 /
    # FP32, then issue 26's MX fields) and the status (error widened to 4 bits by issue 25,
    # to 5 by issue 26).
    for row in ("| `op` | [0] | 1 | `Op`: MATMUL = 0, READ = 1 |",
                "| `dtype` | [3:1] | 3 |", "| `moving_dtype` | [6:4] | 3 |",
                "| `double_row` | [7] | 1 |", "| `ftz` | [8] | 1 |", "| `accumulate` | [9] | 1 |",
                "| `bank` | [17:10] | 8 | 0..255 |", "| `offset` | [33:18] | 16 | 0..65535 |",
                "| `k` | [49:34] | 16 |", "| `m` | [65:50] | 16 |", "| `n` | [81:66] | 16 |",
                "| `transpose` | [82] | 1 |", "| `tiled` | [83] | 1 |",
                "| `tile_row` | [99:84] | 16 |", "| `tile_col` | [115:100] | 16 |",
                "| `tile_rows` | [131:116] | 16 |", "| `tile_cols` | [147:132] | 16 |",
                "| `dtype_hi` | [148] | 1 |", "| `moving_dtype_hi` | [149] | 1 |",
                "| `mx` | [150] | 1 |", "| `fp4` | [152:151] | 2 |",
                "| `bf16_out` | [153] | 1 |", "| `stochastic` | [154] | 1 |",
                "| `seed` | [186:155] | 32 |",
                "| `rejected` | [15:0] | 16 |", "| `error` | [20:16] | 5 |"):
        assert row in text, row
    assert "187 bits, bit 0 first" in text and "21 bits, bit 0 first" in text


def test_the_index_names_every_rule_function_and_error_code(text):
    named = {row["Golden"].strip("`").rpartition(":")[2] for row in rules.rule_rows(text)}
    checks = {name for name in golden.__all__ if name.startswith("check_")}
    assert checks <= named, f"rules with no row in docs/rules.md: {sorted(checks - named)}"
    assert {"command_error", "psum_accumulate", "wrap_int32", "double_row_order", "fp32_add",
            "nc_matmul_mx", "nc_transpose"} <= named
    index = text.split("## Rule index")[1].split("## Bit tables")[0]
    for code in command.ERRORS:
        assert f"`{code}`" in index, code


def test_a_layout_field_without_a_meaning_is_refused():
    layout = data.StructLayout({"op": layouts.Op, "colour": unsigned(2)})
    with pytest.raises(KeyError, match="layout field 'colour' has no meaning"):
        rules.bit_table(layout)


def test_regenerate_needs_its_markers(text):
    with pytest.raises(ValueError, match="must hold one line"):
        rules.regenerate(text.replace(rules.END, ""))
    stale = text.replace("| `n` | [81:66] |", "| `n` | [80:65] |")
    assert rules.regenerate(stale) == text


_GOLDEN = "`systolica.golden.matmul:wrap_int32`"
_RTL = "`hdl/pe.py:ProcessingElement`, `hdl/psum.py:Psum` |"
_TEST = "`tests/unit/golden/test_golden_matmul.py::test_wrap_int32_edges`"


@pytest.mark.parametrize("old, new, problem", [
    (_TEST, _TEST.replace("edges", "edge"), "test_golden_matmul.py defines no test_wrap_int32"),
    (_TEST, _TEST.replace("matmul.py", "matmul2.py"), "no file tests/unit/golden/test_golden_m"),
    (_TEST, "`test_wrap_int32_edges`", "Tests reference 'test_wrap_int32_edges' is not of the"),
    (_GOLDEN, _GOLDEN.replace("wrap_int32", "wrap_int33"), "systolica.golden.matmul has no wrap"),
    (_GOLDEN, "`systolica.golden:wrap_int32`", "defined in systolica.golden.matmul, not systol"),
    (_GOLDEN, "`systolica.golden.matmul:ENGINE_ROWS`", "is not a function or class"),
    (_GOLDEN, "`systolica.golden.nomodule:f`", "no module systolica.golden.nomodule"),
    (_GOLDEN, "wrap_int32", "Golden must be one `systolica.golden.<module>:<name>`"),
    (_RTL, _RTL.replace("Psum`", "PsumBank`"), "hdl/psum.py defines no PsumBank"),
    (_RTL, _RTL.replace("psum.py", "nothing.py"), "no file hdl/nothing.py"),
    (_RTL, "the PSUM |", "RTL names no `hdl/<file>.py:<component>` and does not start with"),
])
def test_reference_check_catches_each_kind_of_rot(text, old, new, problem):
    row = next(line for line in text.splitlines() if "**INT32 wrap.**" in line)
    assert old in row
    problems = rules.check_references(text.replace(row, row.replace(old, new)), REPO)
    assert len(problems) == 1 and problem in problems[0], problems
    assert problems[0].startswith("rule 'INT32 wrap': ")


def test_reference_check_catches_a_repeated_rule_and_a_missing_table(text):
    row = next(line for line in text.splitlines() if "**INT32 wrap.**" in line)
    problems = rules.check_references(text.replace(row, f"{row}\n{row}"), REPO)
    assert problems == ["rule 'INT32 wrap' is listed twice"]
    with pytest.raises(ValueError, match="no '## Rule index' heading"):
        rules.check_references(text.replace("## Rule index", "## Rules"), REPO)


def test_command_line_check_and_rewrite(tmp_path, text, capsys):
    doc = tmp_path / "docs" / "rules.md"
    doc.parent.mkdir()
    doc.write_text(text.replace("| `n` | [81:66] |", "| `n` | [80:65] |"))
    assert rules.main(["--check", "--doc", str(doc)]) == 1
    err = capsys.readouterr().err
    assert "the generated tables differ from the layouts" in err
    assert "no file tests/unit/golden/test_golden_types.py" in err   # tmp_path has no tests/
    assert rules.main(["--doc", str(doc)]) == 0 and doc.read_text() == text
    with pytest.raises(SystemExit) as exit_:
        rules.main(["--doc", str(tmp_path / "none.md")])
    assert exit_.value.code == 2
    assert "none.md is not a file" in capsys.readouterr().err
