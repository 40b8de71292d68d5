"""Unit tier: the equivalence prover's netlist handling (``verif.equivalence``): which
outputs of a module its parent reads (through ``connect`` aliases), the canonical form the
netlist-identity check compares, and the miter script's fix (no x-aware comparison under a
two-valued solver, the mutation applied before flattening)."""

import pytest

from systolica.verif import equivalence

# A parent with one instance of ``child``: o_read reaches a $not through an alias wire,
# o_alias only reaches an alias nobody reads, o_port drives the parent's output port,
# o_open is left unconnected.
DESIGN = r"""
module \top.child
  wire input 1 \a
  wire output 2 \o_read
  wire output 3 \o_alias
  wire output 4 \o_port
  wire output 5 \o_open
  connect \o_read \a
  connect \o_alias \a
  connect \o_port \a
  connect \o_open \a
end
module \top
  wire input 1 \a
  wire output 2 \y
  wire output 3 \z
  wire \r
  wire \r_alias
  wire width 2 \pair
  wire \dead
  cell \top.child \child
    connect \a \a
    connect \o_read \r
    connect \o_alias \dead
    connect \o_port \z
  end
  connect \r_alias \r
  connect \pair { \dead \r_alias }
  cell $not $1
    parameter \A_SIGNED 0
    parameter \A_WIDTH 1
    parameter \Y_WIDTH 1
    connect \A \pair [0]
    connect \Y \y
  end
end
"""


def test_unread_outputs_follow_aliases_to_a_reader():
    assert equivalence.unread_outputs("top.child", DESIGN) == ["o_alias", "o_open"]
    assert equivalence.unread_outputs("top", DESIGN) == []


def test_split_connect_keeps_slices_and_concatenations_whole():
    assert equivalence._split_connect(r"\pair [1:0] { \a \b }") == (r"\pair [1:0]",
                                                                     r"{ \a \b }")
    assert equivalence._split_connect(r"\m$2[1].value \w") == (r"\m$2[1].value", r"\w")
    with pytest.raises(ValueError, match="cannot split"):
        equivalence._split_connect(r"\lonely")


def _module(cells, extra_wire=""):
    return "autoidx 7\nmodule \\top\n  wire input 1 \\a\n  wire output 2 \\y\n" + \
        extra_wire + cells + "end\n"


NOT = "  cell $not $1\n    connect \\A \\a\n    connect \\Y \\y\n  end\n"
AND = "  cell $and $2\n    connect \\A \\a\n    connect \\B \\a\n    connect \\Y \\y\n  end\n"


def test_canonical_form_ignores_order_autoidx_and_orphan_wires_only():
    one = _module(NOT + "  cell $and $3\n    connect \\A \\a\n  end\n")
    two = _module("  cell $and $3\n    connect \\A \\a\n  end\n" + NOT,
                  extra_wire="  attribute \\init 1'0\n  wire \\orphan\n").replace(
                      "autoidx 7", "autoidx 9")
    assert equivalence.canonical_rtlil(one) == equivalence.canonical_rtlil(two)
    assert equivalence.canonical_rtlil(_module(NOT)) != equivalence.canonical_rtlil(
        _module(AND))


def test_miter_compares_every_bit_and_mutates_before_flattening():
    text = equivalence.script("-mode const1 -module top.child -cell $1 -port Y -portbit 0 "
                              "-src /x/y.py:3", "top.child", "top", unread=["o_alias"])
    miter = next(line for line in text.splitlines() if line.startswith("miter"))
    assert "-ignore_gold_x" not in miter and "-equiv" in miter
    uut = text.split("# uut")[1].splitlines()
    assert uut.index("mutate -mode const1 -module top.child -cell $1 -port Y -portbit 0") < \
        uut.index("flatten")
    assert "delete -output w:o_alias" in uut and "-src" not in text
    with pytest.raises(ValueError, match="does not hold"):
        equivalence.script("-mode inv", "top.other", "top.child")


def test_a_clock_pin_mutation_is_never_proven_equivalent(tmp_path, monkeypatch):
    """A clock pin tied to a constant leaves no clock wire for the script's one-clock check
    to see (CI's sample once drew one on issue.skew and PDR called it equivalent): the
    prover answers unknown without running."""
    def refuse(*args, **kwargs):
        raise AssertionError("no proof may be attempted for a clock-pin mutation")
    monkeypatch.setattr(equivalence, "attempt", refuse)
    mutation = equivalence.Drawn(7, "-mode const1 -module systolica_tile.issue.skew -cell $5 "
                                    "-port CLK -portbit 0 -wire clk -wirebit 0")
    verdict = equivalence.prove(mutation, tmp_path, levels=1)
    assert verdict.verdict == "unknown" and "no exact model: a mutation on a clock pin" in (
        verdict.detail)
