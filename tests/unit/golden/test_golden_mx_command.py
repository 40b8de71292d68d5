"""The command word's NeuronCore-v4 fields (golden ``Command.mx``, ``fp4``, ``dst_dtype``,
``rounding``, ``seed``) and the rules that reject them (``golden.command.mx_error``)."""

import pytest

from systolica.golden import Command, check_region, command_error
from systolica.golden.command import ERRORS

ROWS, COLS = 16, 8


def error(command, mx=True):
    return command_error(command, rows=ROWS, cols=COLS, mx=mx)


def mx_matmul(**fields):
    return Command(**{"op": "matmul", "k": 8, "m": 4, "n": 3, "dtype": "e4m3fn",
                      "moving_dtype": "e5m2", "mx": True, **fields})


def test_legal_mx_matmuls():
    for fields in ({}, {"k": 16}, {"fp4": (True, False)},
                   {"fp4": (True, True), "moving_dtype": "e4m3fn"},
                   {"dst_dtype": "bf16"}, {"dst_dtype": "bf16", "rounding": "stochastic",
                                          "seed": 2**32 - 1},
                   {"accumulate": True}, {"tile_position": (8, 0), "tile_size": (8, COLS)}):
        assert error(mx_matmul(**fields)) is None, fields


@pytest.mark.parametrize("op", ["matmul", "read"])
def test_a_region_crosses_banks_on_an_mx_tile_only(op):
    """NeuronCore-v4 streams up to 4,096 FP32 moving columns across the 8 banks: on a tile
    with MX a region may run from its bank into the next ones, up to the end of PSUM (8 x
    512 entries); without MX it stays in its bank. Any matmul, MX or not, and a READ."""
    def region(bank, offset, n):
        if op == "read":
            return Command("read", bank=bank, offset=offset, n=n)
        return Command("matmul", k=8, m=4, n=n, bank=bank, offset=offset, dtype="bf16")
    legal_on_v4 = [(0, 500, 13), (0, 0, 4096), (6, 511, 513), (7, 0, 512), (3, 100, 2460)]
    past_the_end = [(7, 1, 512), (6, 511, 514), (0, 1, 4096), (1, 0, 3585), (3, 100, 2461)]
    for bank, offset, n in legal_on_v4:
        assert error(region(bank, offset, n)) is None, (bank, offset, n)
        want = None if offset + n <= 512 else "N_RANGE"
        assert error(region(bank, offset, n), mx=False) == want, (bank, offset, n)
    for bank, offset, n in past_the_end:
        assert error(region(bank, offset, n)) == "N_RANGE", (bank, offset, n)
    assert error(mx_matmul(n=1024, bank=6, dst_dtype="bf16")) is None    # [MM]'s BF16 N
    assert error(mx_matmul(n=1024, bank=7, dst_dtype="bf16")) == "N_RANGE"


def test_check_region_names_the_end_of_psum_on_an_mx_tile():
    check_region("the matmul writes", 6, 511, 513, across=True)
    with pytest.raises(ValueError, match=r"^the matmul writes PSUM entries 511\.\.1024 from "
                                         r"the start of bank 6, past the end of PSUM"):
        check_region("the matmul writes", 6, 511, 514, across=True)
    with pytest.raises(ValueError, match="past the end of the 512-entry bank"):
        check_region("the matmul writes", 6, 511, 2)


def test_mx_rules_in_check_order():
    """Each MX rule alone, then pairs that show the order: a tile without MX says
    TYPE_NOT_BUILT before any MX rule; MX_TYPE before MX_K before MX_MODE before MX_TILE
    before DST_MODE; the tile rule before the MX rules."""
    cases = [
        (mx_matmul(dtype="e4m3"), "MX_TYPE"),                  # legacy e4m3 does not mix
        (mx_matmul(moving_dtype="bf16"), "MX_TYPE"),
        (mx_matmul(fp4=(False, True)), "MX_TYPE"),             # an fp4 side must be e4m3fn
        (Command("matmul", k=8, m=1, n=1, dtype="e4m3fn", fp4=(True, False)), "MX_TYPE"),
        (mx_matmul(k=12), "MX_K"),
        (mx_matmul(ftz=True), "MX_MODE"),
        (mx_matmul(dtype="e5m2", perf_mode="double_row"), "MX_MODE"),
        (mx_matmul(is_transpose=True), "MX_MODE"),
        (mx_matmul(tile_position=(0, 4), tile_size=(16, 4)), "MX_TILE"),
        (Command("matmul", k=8, m=1, n=1, dtype="bf16", dst_dtype="bf16"), "DST_MODE"),
        (mx_matmul(rounding="stochastic"), "DST_MODE"),
        # Order.
        (mx_matmul(dtype="e4m3", k=12, ftz=True), "MX_TYPE"),
        (mx_matmul(k=12, ftz=True, tile_position=(0, 4), tile_size=(16, 4)), "MX_K"),
        (mx_matmul(ftz=True, tile_position=(0, 4), tile_size=(16, 4),
                   rounding="stochastic"), "MX_MODE"),
        (mx_matmul(tile_position=(0, 4), tile_size=(16, 4), rounding="stochastic"), "MX_TILE"),
        (mx_matmul(k=12, tile_position=(0, 3), tile_size=(16, 4)), "TILE_POSITION"),
        (mx_matmul(k=17), "K_RANGE"),
        (mx_matmul(is_transpose=True, accumulate=True), "TRANSPOSE_ACCUMULATE"),
    ]
    for command, want in cases:
        assert error(command) == want, (command, want)
    assert {want for _, want in cases} >= {"MX_TYPE", "MX_K", "MX_MODE", "MX_TILE", "DST_MODE"}
    # Without the MX datapath an MX matmul is not built; fp4 and the destination still judged.
    assert error(mx_matmul(k=12, ftz=True), mx=False) == "TYPE_NOT_BUILT"
    assert error(Command("matmul", k=8, m=1, n=1, dtype="e4m3fn", fp4=(True, False)),
                 mx=False) == "MX_TYPE"
    assert error(Command("matmul", k=8, m=1, n=1, rounding="stochastic"), mx=False) == (
        "DST_MODE")
    assert ERRORS[-5:] == ("MX_TYPE", "MX_K", "MX_MODE", "MX_TILE", "DST_MODE")


def test_a_read_ignores_the_mx_fields():
    read = Command("read", n=4, mx=True, fp4=(True, True), dst_dtype="bf16",
                   rounding="stochastic", seed=9)
    assert error(read) is None and error(read, mx=False) is None


@pytest.mark.parametrize("fields,message", [
    ({"mx": 1}, "^mx must be a bool, not int$"),
    ({"fp4": (True,)}, r"^fp4 must be a pair of bools \(stationary, moving\), not \(True,\)$"),
    ({"fp4": (1, 0)}, r"^fp4 must be a pair of bools"),
    ({"dst_dtype": "fp16"}, "^dst_dtype must be one of fp32, bf16, not 'fp16'$"),
    ({"rounding": "down"}, "^rounding must be one of rne, stochastic, not 'down'$"),
    ({"seed": 2**32}, r"^seed must be an integer in 0\.\.4294967295 \(32-bit field\), not "),
    ({"seed": -1}, r"^seed must be an integer in"),
])
def test_bad_fields_are_refused_with_one_line(fields, message):
    with pytest.raises((TypeError, ValueError), match=message):
        Command("matmul", **fields)
