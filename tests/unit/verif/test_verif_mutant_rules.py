"""Unit tier: the mutation run's class rules (``mutant_rules.CLASS_RULES``) call a synthetic
mutation of their class equivalent and leave one just outside it open."""

import re
from pathlib import Path

import pytest

from systolica.verif import mutant_rules, mutants, netlist

ADDER = "systolica_tile.array.pe_1_0.adder"
ADDER_HI_ROW0 = "systolica_tile.array.pe_0_1.adder_hi"
ADDER_HI_ROW1 = "systolica_tile.array.pe_1_1.adder_hi"
MUL_HI = "systolica_tile.array.pe_0_0.multiplier_hi"


def _adder(name):
    return f"""module \\{name}
  wire width 32 input 1 \\a
  wire width 32 input 2 \\b
  wire width 32 output 3 \\sum
  wire width 32 \\lz_s16
  wire width 32 \\lz_s8
  wire \\lz_z8
  wire width 9 \\l_exp
  wire width 9 \\s_exp
  wire width 9 \\diff
  wire $dangling
  wire width 9 $shift_wide
  wire width 5 \\shift
  wire $gt_y
  wire width 31 \\l_mag
  wire $l_zero
  wire $a_frac
  attribute \\src "/x/hdl/fp32_add.py:32"
  cell $mux $103
    parameter \\WIDTH 32
    connect \\A \\lz_s16
    connect \\B {{ \\lz_s16 [23:0] 8'00000000 }}
    connect \\S \\lz_z8
    connect \\Y \\lz_s8
  end
  cell $sub $88
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 9
    parameter \\B_WIDTH 9
    parameter \\Y_WIDTH 10
    connect \\A \\l_exp
    connect \\B \\s_exp
    connect \\Y {{ $dangling \\diff }}
  end
  cell $gt $89
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 9
    parameter \\B_WIDTH 6
    parameter \\Y_WIDTH 1
    connect \\A \\diff
    connect \\B 6'011111
    connect \\Y $gt_y
  end
  cell $mux $90
    parameter \\WIDTH 9
    connect \\A \\diff
    connect \\B 9'000011111
    connect \\S $gt_y
    connect \\Y $shift_wide
  end
  cell $eq $82
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 8
    parameter \\B_WIDTH 8
    parameter \\Y_WIDTH 1
    connect \\A \\l_mag [30:23]
    connect \\B 8'00000000
    connect \\Y $l_zero
  end
  cell $ne $63
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 23
    parameter \\B_WIDTH 23
    parameter \\Y_WIDTH 1
    connect \\A \\a [22:0]
    connect \\B 23'00000000000000000000000
    connect \\Y $a_frac
  end
  connect \\shift $shift_wide [4:0]
  connect \\sum {{ \\lz_s8 \\l_exp [0] \\s_exp [0] \\diff [0] \\lz_z8 $l_zero $a_frac }}
end
"""


MUL_HI_TEXT = f"""module \\{MUL_HI}
  wire width 3 input 1 \\a_type
  wire width 32 output 2 \\product
  wire width 12 signed \\exp
  wire $ge_y
  wire $cmp_y
  wire width 5 \\right
  cell $ge $168
    parameter \\A_SIGNED 1
    parameter \\B_SIGNED 1
    parameter \\A_WIDTH 12
    parameter \\B_WIDTH 9
    parameter \\Y_WIDTH 1
    connect \\A \\exp
    connect \\B 9'011111111
    connect \\Y $ge_y
  end
  cell $eq $procmux$1_CMP0
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 3
    parameter \\B_WIDTH 3
    parameter \\Y_WIDTH 1
    connect \\A \\a_type
    connect \\B 3'100
    connect \\Y $cmp_y
  end
  attribute \\src "/x/hdl/float_mul.py:130"
  cell $sub $161
    parameter \\A_SIGNED 1
    parameter \\B_SIGNED 1
    parameter \\A_WIDTH 2
    parameter \\B_WIDTH 12
    parameter \\Y_WIDTH 5
    connect \\A 2'01
    connect \\B \\exp
    connect \\Y \\right
  end
  connect \\product {{ $ge_y $cmp_y \\right \\exp [7:0] }}
end
"""

ISSUE = "systolica_tile.issue"
ISSUE_TEXT = f"""module \\{ISSUE}
  wire input 1 \\clk
  wire width 26 \\mode_0
  wire width 26 $next
  wire output 2 \\hi
  cell $dff $127
    parameter \\WIDTH 26
    parameter \\CLK_POLARITY 1
    connect \\D $next
    connect \\CLK \\clk
    connect \\Q \\mode_0
  end
  cell $gt $94
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 16
    parameter \\B_WIDTH 3
    parameter \\Y_WIDTH 1
    connect \\A \\mode_0 [25:10]
    connect \\B 3'101
    connect \\Y \\hi
  end
end
"""
#: the PE modules name the tile's rows (3 here)
PES = "".join(f"module \\systolica_tile.array.pe_{r}_0\nend\n" for r in range(3))

DESIGN = (_adder(ADDER) + _adder(ADDER_HI_ROW0) + _adder(ADDER_HI_ROW1) + MUL_HI_TEXT
          + ISSUE_TEXT + PES)


def _rule(args):
    found = mutant_rules.class_rule_matches([mutants.Mutation(1, args, ())], DESIGN)
    return found[1][0].name if 1 in found else None


@pytest.mark.parametrize("args, rule", [
    # lz_s8 (span 32) is read from bit 25 up
    (f"-mode const0 -module {ADDER} -cell $103 -port Y -portbit 12 -wire lz_s8 -wirebit 12",
     "lz-stage"),
    (f"-mode const1 -module {ADDER} -cell $103 -port A -portbit 24", "lz-stage"),
    (f"-mode const1 -module {ADDER} -cell $103 -port A -portbit 25", None),
    (f"-mode inv -module {ADDER} -cell $103 -port Y -portbit 30 -wire lz_s8 -wirebit 30",
     None),
    (f"-mode inv -module {ADDER} -cell $103 -port S -portbit 0", None),
    # exponent field == 0: a flip while another bit is 1 cannot make it 0
    (f"-mode cnot1 -module {ADDER} -cell $82 -port A -portbit 6 -ctrlbit 0",
     "constant-compare"),
    (f"-mode cnot0 -module {ADDER} -cell $82 -port A -portbit 6 -ctrlbit 0", None),
    (f"-mode const0 -module {ADDER} -cell $82 -port A -portbit 6", None),
    # diff = l_exp - s_exp in 0..254, read as min(diff, 31)
    (f"-mode cnot1 -module {ADDER} -cell $88 -port Y -portbit 1 -ctrlbit 9 -wire diff "
     "-wirebit 1", "value-range"),
    (f"-mode cnot1 -module {ADDER} -cell $88 -port Y -portbit 7 -ctrlbit 5 -wire diff "
     "-wirebit 7", "value-range"),
    (f"-mode cnot1 -module {ADDER} -cell $88 -port Y -portbit 5 -ctrlbit 4 -wire diff "
     "-wirebit 5", None),
    (f"-mode const1 -module {ADDER} -cell $88 -port Y -portbit 8 -wire diff -wirebit 8",
     None),
    # the mux's bits 5..8 go to a temporary that only bits 0..4 of are read
    (f"-mode inv -module {ADDER} -cell $90 -port A -portbit 7", "unread-bit"),
    (f"-mode inv -module {ADDER} -cell $90 -port A -portbit 3", None),
    # row 0's adder_hi: a and l_mag have bits 0..15 zero; not in row 1
    (f"-mode cnot1 -module {ADDER_HI_ROW0} -cell $82 -port A -portbit 8 -ctrlbit 0",
     "constant-compare"),
    # multiplier_hi: exp in 93..160, types 3 or 4
    (f"-mode cnot1 -module {MUL_HI} -cell $168 -port A -portbit 11 -ctrlbit 9",
     "value-range"),
    (f"-mode const1 -module {MUL_HI} -cell $168 -port A -portbit 7", None),
    (f"-mode const1 -module {MUL_HI} -cell $procmux$1_CMP0 -port A -portbit 2",
     "value-range"),
    (f"-mode const0 -module {MUL_HI} -cell $procmux$1_CMP0 -port A -portbit 2", None),
    (f"-mode const1 -module {MUL_HI} -cell $161 -port B -portbit 4", "hi-subnormal"),
    # a constant bit forced to its own value
    (f"-mode const1 -module {MUL_HI} -cell $procmux$1_CMP0 -port B -portbit 2",
     "same-constant"),
    (f"-mode const0 -module {MUL_HI} -cell $procmux$1_CMP0 -port B -portbit 2", None),
    # mode_0.k (bits 10..25 of row cell 0's mode, after the transpose bit) <= 2 x rows = 6: its
    # bits 3 and up (mode_0's 13 and up) are 0
    (f"-mode const0 -module {ISSUE} -cell $94 -port A -portbit 7", "value-range"),
    (f"-mode cnot1 -module {ISSUE} -cell $127 -port Q -portbit 2 -ctrlbit 22 -wire mode_0 "
     "-wirebit 2", "value-range"),
    (f"-mode cnot1 -module {ISSUE} -cell $127 -port Q -portbit 2 -ctrlbit 13 -wire mode_0 "
     "-wirebit 2", "value-range"),
    (f"-mode const0 -module {ISSUE} -cell $94 -port A -portbit 2", None),
    (f"-mode cnot1 -module {ISSUE} -cell $127 -port Q -portbit 2 -ctrlbit 11 -wire mode_0 "
     "-wirebit 2", None),
    # mode_0's bit 12 is K's bit 2 (the rule had K at bit 9, before the transpose bit)
    (f"-mode cnot1 -module {ISSUE} -cell $127 -port Q -portbit 2 -ctrlbit 12 -wire mode_0 "
     "-wirebit 2", None),
])
def test_class_rules_match_their_class_only(args, rule):
    assert _rule(args) == rule


def test_zero_bits_hold_only_in_their_rows():
    """adder_hi's operand bits 0..15 are zero in partition row 0 only."""
    mutation = "-mode const0 -module {} -cell $63 -port A -portbit 3"
    assert _rule(mutation.format(ADDER_HI_ROW0)) == "value-range"
    assert _rule(mutation.format(ADDER_HI_ROW1)) is None


def test_sigspec_bits_are_least_significant_first():
    widths = {"\\a": 4, "\\b": 2}
    assert netlist.sig_bits("{ \\a [1:0] 2'10 \\b }", widths) == [
        ("\\b", 0), ("\\b", 1), "0", "1", ("\\a", 0), ("\\a", 1)]


def _rule_texts():
    yield from (entry.why for entry in mutant_rules.VALUE_RANGES)
    yield from (rule.argument for rule in mutant_rules.CLASS_RULES)


def test_rule_texts_cite_statements_that_are_in_the_hdl():
    """Each citation (``file.py `code```, or a run of backticked code after one file
    name) names code that is in that hdl file, and no citation is a line number."""
    hdl = Path(__file__).resolve().parents[3] / "hdl"
    cited = 0
    for text in _rule_texts():
        assert not re.search(r"\.py:\d|\blines? \d", text), text
        for file, codes in re.findall(r"(\w+\.py)((?:,? `[^`]+`(?: to `[^`]+`)?)+)", text):
            source = " ".join((hdl / file).read_text().split())
            for code in re.findall(r"`([^`]+)`", codes):
                assert " ".join(code.split()) in source, (file, code)
                cited += 1
    assert cited >= 15
