"""Unit tier: the numpy packer against the Amaranth layouts' own const()/from_bits()."""

import numpy as np
import pytest

from systolica.hdl.layouts import (
    command_layout,
    moving_layout,
    result_layout,
    stationary_layout,
)
from systolica.tb.packing import LayoutPacker

LAYOUTS = [command_layout(), stationary_layout(1), stationary_layout(5), moving_layout(8),
           result_layout(3), result_layout(16)]


def random_fields(packer, rng, beats, layout=None):
    values = {}
    enums = {name: field.shape for name, field in (layout or [])
             if hasattr(field.shape, "__members__")}
    for name, (_, width, lanes) in packer.fields.items():
        shape = (beats,) if lanes is None else (beats, lanes)
        if name in enums:       # only the codes the enumeration defines
            codes = np.array([member.value for member in enums[name]], dtype=np.uint64)
            values[name] = rng.choice(codes, shape)
        else:
            values[name] = rng.integers(0, 1 << width, shape, dtype=np.uint64)
    return values


def as_const_dict(layout, values, beat):
    out = {}
    for name, field in layout:
        value = values[name][beat]
        if np.ndim(value):
            out[name] = [int(v) for v in value]
        else:
            value = int(value)
            out[name] = field.shape(value) if hasattr(field.shape, "__members__") else value
    return out


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: f"{layout.size}bits")
def test_pack_equals_layout_const(layout):
    rng = np.random.default_rng(layout.size)
    packer = LayoutPacker(layout)
    values = random_fields(packer, rng, 50, layout)
    lines = packer.pack_hex(50, **values).splitlines()
    assert all(len(line) == packer.digits for line in lines)
    for beat, line in enumerate(lines):
        assert int(line, 16) == layout.const(as_const_dict(layout, values, beat)).as_bits()


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: f"{layout.size}bits")
def test_unpack_equals_layout_from_bits(layout):
    rng = np.random.default_rng(layout.size + 1)
    packer = LayoutPacker(layout)
    raws = [int(rng.integers(0, 1 << 62)) << max(0, layout.size - 62) | int(rng.integers(0, 4))
            for _ in range(40)]
    raws = [raw & ((1 << layout.size) - 1) for raw in raws]
    # $writememh style: comments and short lines are allowed.
    text = "// header\n" + "".join(f"{raw:x}\n" for raw in raws)
    fields = packer.unpack_hex(text)
    for beat, raw in enumerate(raws):
        view = layout.from_bits(raw)
        for name, _ in layout:
            want = view[name]
            if packer.fields[name][2] is None:
                want = getattr(want, "value", want)
                assert int(fields[name][beat]) == int(want)
            else:
                assert [int(v) for v in fields[name][beat]] == [int(v) for v in want]


def test_values_that_do_not_fit_are_refused():
    packer = LayoutPacker(stationary_layout(2))
    with pytest.raises(ValueError, match="does not fit in 16 bits"):
        packer.pack_hex(1, data=[[1 << 16, 0]])
    with pytest.raises(KeyError, match="not a field"):
        packer.pack_hex(1, lanes=[[0, 0]])


def test_undefined_bits_from_the_simulation_are_an_error():
    with pytest.raises(ValueError, match="not a hex digit"):
        LayoutPacker(stationary_layout(1)).unpack_hex("00x1\n")


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: f"{layout.size}bits")
def test_full_width_lines_unpack_to_what_was_packed(layout):
    """Lines of full width and nothing else (as Verilator's $writememh writes them) take the
    vectorised path; it must agree with the packer."""
    packer = LayoutPacker(layout)
    values = random_fields(packer, np.random.default_rng(layout.size + 2), 30)
    fields = packer.unpack_hex(packer.pack_hex(30, **values))
    for name, value in values.items():
        np.testing.assert_array_equal(fields[name], value)
