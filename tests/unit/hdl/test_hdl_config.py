"""Unit tier: :class:`systolica.hdl.config.TileConfig`, the one validated description of a
tile: its checks and one-line errors, its type sets, the PE each set generates and the
folder names of its builds."""

import re

import pytest
from amaranth.back import rtlil

from systolica.hdl import DType, Tile
from systolica.hdl.config import TYPE_SETS, TileConfig, parse_types, type_sets
from systolica.hdl.tile import pe_for


@pytest.mark.parametrize("kwargs,message", [
    ({"rows": 0}, "rows must be a positive integer, not 0"),
    ({"cols": -1}, "cols must be a positive integer, not -1"),
    ({"rows": 2.5}, "rows must be a positive integer, not 2.5"),
    ({"rows": True}, "rows must be a positive integer, not True"),
    ({"cols": "8"}, "cols must be a positive integer, not '8'"),
    # 2 x 32,768 does not fit the 16-bit K field (was: a command-field error naming "k")
    ({"rows": 32768}, "rows must be at most 32767 (a command's 16-bit K field holds K up to "
                      "2 x rows in FP8 double-row), not 32768"),
    ({"cols": 65536}, "cols must be at most 65535 (a command's 16-bit M field holds M up to "
                      "cols), not 65536"),
    ({"psum_banks": 0}, "psum_banks must be an integer in 1..256, not 0"),
    ({"psum_banks": 257}, "psum_banks must be an integer in 1..256, not 257"),
    ({"psum_entries": 1 << 16}, "psum_entries must be an integer in 1..65535, not 65536"),
    ({"queue_depth": 0}, "queue_depth must be a positive integer, not 0"),
    ({"types": "int4"}, "unknown type set 'int4'; allowed: int8, bf16, fp16, fp8, "
                        "fp8-double-row, fp32, mx, all (joined with '+' or ',')"),
    ({"types": ""}, "types must name at least one type set (int8, bf16, fp16, fp8, "
                    "fp8-double-row, fp32, mx, all), not ''"),
    ({"types": 3}, "types must be type-set names (int8, bf16, fp16, fp8, fp8-double-row, "
                   "fp32, mx, all), not 3"),
])
def test_bad_configuration_is_one_line(kwargs, message):
    args = {"rows": 4, "cols": 4, **kwargs}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TileConfig(**args)


def test_frozen_and_normalised():
    config = TileConfig(4, 2, "bf16,INT8")
    assert config.types == ("int8", "bf16") and config == TileConfig(4, 2, ["bf16", "int8"])
    with pytest.raises(AttributeError):
        config.rows = 8
    # "all" is every set but fp32 and mx, which widen every operand lane
    assert TileConfig(1, 1).types == tuple(TYPE_SETS)[:-2] == parse_types("all")
    assert "fp32" not in parse_types("all") and TYPE_SETS["fp32"] == ("tf32", "fp32")
    assert "mx" not in parse_types("all") and parse_types("mx") == ("fp8", "mx")
    assert parse_types("fp8-double-row") == ("fp8", "fp8-double-row")
    mx = TileConfig(8, 4, "int8+mx")
    assert (mx.mx, mx.operand_width, mx.types_name, TileConfig(8, 4, "mx").types_name) == (
        True, 32, "int8+mx", "mx")
    assert TileConfig(8, 4, "all+fp32+mx").types_name == "all+fp32+mx"
    assert not TileConfig(8, 4).mx and TileConfig(8, 4, "fp32").operand_width == 32


@pytest.mark.parametrize("types,dtypes,double_row,name", [
    ("int8", ("int8",), False, "int8"),
    ("bf16+int8", ("int8", "bf16"), False, "int8+bf16"),
    ("fp8", ("e4m3", "e5m2", "e3m4", "e4m3fn"), False, "fp8"),
    ("int8+bf16+fp8-double-row", ("int8", "bf16", "e4m3", "e5m2", "e3m4", "e4m3fn"), True,
     "int8+bf16+fp8-double-row"),
    ("all", ("int8", "bf16", "fp16", "e4m3", "e5m2", "e3m4", "e4m3fn"), True, "all"),
    ("fp32", ("tf32", "fp32"), False, "fp32"),
    ("all+fp32", ("int8", "bf16", "fp16", "e4m3", "e5m2", "e3m4", "e4m3fn", "tf32", "fp32"),
     True, "all+fp32"),
    ("int8+fp32", ("int8", "tf32", "fp32"), False, "int8+fp32"),
])
def test_type_sets(types, dtypes, double_row, name):
    config = TileConfig(8, 8, types)
    assert (config.dtypes, config.double_row, config.types_name) == (dtypes, double_row, name)
    assert config.operand_width == (32 if "fp32" in dtypes else 16)
    assert config.label == f"8x8-{name}"


def test_for_dtypes_takes_the_smallest_set():
    assert TileConfig.for_dtypes(2, 2, ["bf16"]).types == ("bf16",)
    assert TileConfig.for_dtypes(2, 2, ["e4m3", "int8"], double_row=True).types == (
        "int8", "fp8", "fp8-double-row")
    assert TileConfig.for_dtypes(2, 2, ["tf32"]).types == ("fp32",)
    with pytest.raises(ValueError, match="^the RTL tile has no datapath for operand type 'fp64'; "
                       "allowed on the tile: int8, "):
        TileConfig.for_dtypes(2, 2, ["fp64"])


def test_label_shows_the_geometry_when_not_the_default():
    assert TileConfig(3, 5, "int8", psum_banks=2, psum_entries=16, queue_depth=4).label == (
        "3x5-int8-psum2x16-q4")


def test_folder_name_follows_the_verilog_and_options_only():
    config = TileConfig(8, 8, "int8+bf16")
    name = config.folder_name("module a; endmodule", {"simulator": "verilator"}, "verilator")
    assert re.fullmatch(r"8x8-int8\+bf16-verilator-[0-9a-f]{12}", name)
    assert name == config.folder_name(b"module a; endmodule", {"simulator": "verilator"},
                                      "verilator")
    others = {config.folder_name("module b; endmodule", {"simulator": "verilator"}),
              config.folder_name("module a; endmodule", {"simulator": "icarus"}),
              TileConfig(8, 8, "int8").folder_name("module a; endmodule",
                                                    {"simulator": "verilator"})}
    assert len(others) == 3 and name not in others


@pytest.mark.parametrize("types,int8,floats,double_row", [
    ("int8", True, (), False),
    ("bf16", False, (DType.BF16,), False),
    ("int8+fp8", True, (DType.E4M3, DType.E5M2, DType.E3M4, DType.E4M3FN), False),
    ("all", True, (DType.BF16, DType.FP16, DType.E4M3, DType.E5M2, DType.E3M4, DType.E4M3FN),
     True),
])
def test_the_pe_is_generated_for_the_type_set(types, int8, floats, double_row):
    pe = pe_for(TileConfig(1, 1, types))
    assert (pe.has_int8, pe.float_dtypes, pe.has_double_row) == (int8, floats, double_row)


def test_a_smaller_type_set_generates_less_logic():
    sizes = [len(rtlil.convert(Tile(TileConfig(2, 2, types)), name="top"))
             for types in ("int8", "int8+bf16", "all")]
    assert sizes[0] < sizes[1] < sizes[2]


def test_largest_sizes_the_command_fields_hold_are_accepted():
    config = TileConfig(32767, 65535)      # nothing is generated: only the description
    assert (config.rows, config.cols) == (32767, 65535)


def test_type_sets_from_a_sequence_equal_the_separated_string():
    assert type_sets(["int8", " bf16+fp16 "]) == type_sets("int8/bf16+fp16")
    assert type_sets("int8,bf16") == ("int8,bf16",)    # ',' joins names of one set


@pytest.mark.parametrize("types", ["int8/", "/all", "int8/ /all", []])
def test_an_empty_type_set_is_refused(types):
    with pytest.raises(ValueError, match="none of them empty"):
        type_sets(types)


@pytest.mark.parametrize("types", ["", "  "])
def test_no_type_set_at_all_gets_the_message_every_command_gives(types):
    with pytest.raises(ValueError, match="types must name at least one type set"):
        type_sets(types)
