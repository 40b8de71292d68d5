"""The command word's NeuronCore-v4 fields (golden ``Command.mx``, ``fp4``, ``dst_dtype``,
``rounding``, ``seed``) and the rules that reject them (``golden.command.mx_error``)."""

import pytest

from systolica.golden import Command, command_error
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
