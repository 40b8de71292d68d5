"""Unit tier: the no-stall cycle model's formulas and argument checks."""

import random

import pytest

from systolica.golden import (
    Command,
    command_error,
    command_schedule,
    matmul_cycles,
    program_cycles,
    program_schedule,
    tile_latency,
)
from systolica.golden.command import ERRORS


def test_latency_is_rows_plus_cols():
    assert tile_latency(1, 1) == 2
    assert tile_latency(128, 128) == 256
    assert tile_latency(2, 3) == 5


def test_isolated_matmul_cycles():
    assert matmul_cycles(8, 8, 1) == 17
    assert matmul_cycles(4, 5, 100) == 109


@pytest.mark.parametrize("args", [(0, 1), (1, -2), (1.5, 2), (True, 1)])
def test_bad_sizes_rejected(args):
    with pytest.raises(ValueError, match="must be a positive integer"):
        tile_latency(*args)


def test_bad_n_rejected():
    with pytest.raises(ValueError, match="n must be a positive integer"):
        matmul_cycles(2, 2, 0)


def test_schedule_hides_loads_behind_long_matmuls():
    # Command 0 is taken in cycle 0, its 4 rows load in cycles 1-4; later loads hide
    # behind 20-beat matmuls: after the first, one beat per cycle.
    schedule = program_schedule(4, 4, [(4, 20)] * 5)
    firsts = [t.first_issue for t in schedule]
    assert firsts == [5, 25, 45, 65, 85]
    assert [t.accept for t in schedule] == [0, 1, 2, 6, 26]   # queue of three commands
    assert program_cycles(4, 4, [(4, 20)] * 5) == 85 + 20 - 1 + 8 + 1


def test_schedule_waits_for_buffer_until_its_matmul_sent_its_last_beat():
    # The third load reuses matmul 0's buffer: it starts the cycle after matmul 0's last
    # moving beat, long before that beat's result leaves.
    schedule = program_schedule(2, 2, [(2, 10), (2, 1), (2, 1)])
    assert schedule[2].load_start == schedule[0].last_issue + 1 < schedule[0].last_result


def test_a_load_into_a_row_tile_waits_for_the_old_beat_to_pass_its_first_row():
    """Hand-derived on 4 x 4: A (K = 1, N = 2) loads in cycle 1 and issues in 2, 3; B
    loads in 2 and issues in 4, 5; C reuses A's buffer in the lower row tile (rows 2, 3):
    A's last beat (cycle 3) reaches row 2 two cycles after row 0, so C loads in
    3 + 1 + 2 = 6 (not 4) and issues in 7. The stepped model (backpressure pattern that
    is always ready) agrees; in double-row mode the tile's 2 rows bound the load beats."""
    program = [Command("matmul", k=1, m=4, n=2), Command("matmul", k=1, m=4, n=2),
               Command("matmul", k=1, m=4, n=1, tile_position=(2, 0), tile_size=(2, 4))]
    for ready in (None, lambda cycle: True):
        schedule = command_schedule(4, 4, program, result_ready=ready)
        assert [(t.loads, t.issues) for t in schedule] == [
            ((1,), (2, 3)), ((2,), (4, 5)), ((6,), (7,))]
    double = Command("matmul", k=4, m=4, n=1, dtype="e4m3", perf_mode="double_row",
                     tile_position=(0, 0), tile_size=(2, 4))
    assert double.load_beats(4) == 2 and double.first_row == 0


@pytest.mark.parametrize("k,n", [(16, 16), (16, 1), (4, 16), (16, 4), (1, 1)])
def test_back_to_back_matmuls_take_max_k_n_cycles_each(k, n):
    schedule = program_schedule(16, 16, [(k, n)] * 10)
    firsts = [t.first_issue for t in schedule]
    gaps = {b - a for a, b in zip(firsts, firsts[1:], strict=False)}
    assert gaps == {max(k, n)}


def test_schedule_rejects_k_above_rows():
    with pytest.raises(ValueError, match="K of matmul 1 is 5, more than rows = 4"):
        program_schedule(4, 4, [(4, 1), (5, 1)])


def test_double_row_schedule_loads_min_k_rows_beats():
    # K = 8 on 4 rows in double-row loads 4 beats: the same stamps as K = 4 single-row.
    assert program_schedule(4, 4, [(8, 16), (8, 16)], perf_mode="double_row") == \
        program_schedule(4, 4, [(4, 16), (4, 16)])
    with pytest.raises(ValueError, match="more than rows = 4, 2 x rows = 8 in double_row"):
        program_schedule(4, 4, [(9, 1)], perf_mode="double_row")
    check = {"rows": 4, "cols": 3}
    assert command_error(Command("matmul", k=8, m=3, dtype="e5m2", moving_dtype="e4m3",
                                 perf_mode="double_row"), **check) is None
    assert command_error(Command("matmul", k=9, m=3, dtype="e5m2",
                                 perf_mode="double_row"), **check) == "K_RANGE"
    assert command_error(Command("matmul", k=5, m=3, dtype="e5m2"), **check) == "K_RANGE"


def test_command_error_rules_in_order():
    check = {"rows": 4, "cols": 3, "banks": 2, "entries": 16}
    assert command_error(Command("matmul", k=4, m=3, n=16), **check) is None
    assert command_error(Command("matmul", k=5, m=9, n=99, bank=2), **check) == "BANK_RANGE"
    assert command_error(Command("matmul", k=5, m=9, n=99), **check) == "K_RANGE"
    assert command_error(Command("matmul", k=1, m=4, n=99), **check) == "M_RANGE"
    assert command_error(Command("matmul", k=1, m=3, n=10, offset=7), **check) == "N_RANGE"
    assert command_error(Command("read", k=0, m=0, n=16), **check) is None   # K, M unused
    assert command_error(Command("read", n=0), **check) == "N_RANGE"
    assert command_error(Command("matmul", k=1, m=3, n=16, dtype="bf16",
                                 perf_mode="double_row"), **check) == "DOUBLE_ROW_TYPE"


@pytest.mark.parametrize("dtype,moving_dtype,error", [
    ("e4m3", "e5m2", None), ("e5m2", None, None), ("e4m3", "fp16", "DOUBLE_ROW_TYPE"),
    ("int8", None, "DOUBLE_ROW_TYPE"), ("e4m3fn", "e4m3", "DOUBLE_ROW_TYPE"),
    ("bf16", "e3m4", "DOUBLE_ROW_TYPE")])
def test_double_row_needs_an_fp8_pair(dtype, moving_dtype, error):
    """A double-row matmul of another pair is a command the tile rejects (checked after the
    ranges), not one that cannot be written: the run API refuses it (operand_formats), the
    RTL does not see the API."""
    check = {"rows": 4, "cols": 3, "banks": 2, "entries": 16}
    command = Command("matmul", k=8, m=3, n=4, dtype=dtype, moving_dtype=moving_dtype,
                      perf_mode="double_row")
    assert command_error(command, **check) == error
    # The earlier rules come first; a READ ignores the operand fields.
    assert command_error(Command("matmul", k=9, m=3, n=4, dtype="int8",
                                 perf_mode="double_row"), **check) == "K_RANGE"
    assert command_error(Command("read", n=4, dtype="bf16", perf_mode="double_row"),
                         **check) is None
    assert ERRORS[4:6] == ("DOUBLE_ROW_TYPE", "TYPE_NOT_BUILT")


@pytest.mark.parametrize("fields,types,error", [
    ({"dtype": "e4m3", "perf_mode": "double_row", "accumulate": True, "ftz": True}, None,
     "TRANSPOSE_DOUBLE_ROW"),
    ({"dtype": "bf16", "accumulate": True, "ftz": True}, None, "TRANSPOSE_ACCUMULATE"),
    ({"dtype": "fp16", "ftz": True}, None, "TRANSPOSE_FTZ"),
    ({"dtype": "int8", "perf_mode": "double_row"}, None, "DOUBLE_ROW_TYPE"),
    ({"dtype": "bf16", "accumulate": True}, ("int8",), "TYPE_NOT_BUILT"),
    ({"dtype": "e5m2", "moving_dtype": "bf16"}, None, None),
])
def test_transpose_modes_are_rejected_after_the_other_rules(fields, types, error):
    """A transpose with double-row, accumulate or FTZ is rejected with the first of them
    (check_transpose's order), after every other rule; a READ ignores the bit."""
    check = {"rows": 4, "cols": 3, "banks": 2, "entries": 16}
    if types is not None:
        check["dtypes"] = types
    command = Command("matmul", k=3, m=3, n=4, is_transpose=True, **fields)
    assert command_error(command, **check) == error
    assert command_error(Command("matmul", k=3, m=3, n=4, **fields), **check) == (
        error if error in ("DOUBLE_ROW_TYPE", "TYPE_NOT_BUILT") else None)
    assert command_error(Command("read", n=4, is_transpose=True, ftz=True), **check) is None


@pytest.mark.parametrize("command,dtypes,double_row,error", [
    (Command("matmul", k=4, m=3, dtype="bf16"), ("int8",), False, "TYPE_NOT_BUILT"),
    (Command("matmul", k=4, m=3, dtype="bf16", moving_dtype="fp16"), ("int8", "bf16"), True,
     "TYPE_NOT_BUILT"),
    (Command("matmul", k=4, m=3, dtype="bf16"), ("int8", "bf16"), False, None),
    (Command("matmul", k=8, m=3, dtype="e4m3", perf_mode="double_row"),
     ("e4m3", "e5m2", "e3m4", "e4m3fn"), False, "TYPE_NOT_BUILT"),
    (Command("matmul", k=8, m=3, dtype="e4m3", perf_mode="double_row"),
     ("e4m3", "e5m2", "e3m4", "e4m3fn"), True, None),
    # The earlier rules come first, and a READ has no operand type.
    (Command("matmul", k=5, m=3, dtype="bf16"), ("int8",), False, "K_RANGE"),
    (Command("matmul", k=8, m=3, dtype="bf16", perf_mode="double_row"), ("int8",), False,
     "DOUBLE_ROW_TYPE"),
    (Command("read", n=4, dtype="bf16"), ("int8",), False, None)])
def test_a_type_the_tile_was_not_generated_for_is_rejected(command, dtypes, double_row,
                                                           error):
    check = {"rows": 4, "cols": 3, "banks": 2, "entries": 16}
    assert command_error(command, **check, dtypes=dtypes, double_row=double_row) == error


@pytest.mark.parametrize("kwargs,match", [
    ({"op": "write"}, "op must be one of matmul, read"),
    ({"k": -1}, "k must be an integer in 0..65535"),
    ({"n": 1 << 16}, "n must be an integer in 0..65535"),
    ({"bank": 256}, r"bank must be an integer in 0..255 \(8-bit field\)"),
    ({"dtype": "fp8"}, "dtype must be one of int8, bf16, fp16, e4m3, e5m2, e3m4, e4m3fn, "
                       "tf32, fp32, not 'fp8'"),
    ({"dtype": "bf16", "moving_dtype": "int8"}, "int8 pairs only with int8"),
    ({"ftz": 1}, "ftz must be a bool, not int"),
])
def test_bad_command_fields_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Command(**kwargs)


def test_rejected_command_takes_one_cycle_and_nothing_else():
    ok = Command("matmul", k=2, m=2, n=3)
    bad = Command("matmul", k=9, m=2, n=3)
    with_bad = command_schedule(2, 2, [ok, bad, ok])
    without = command_schedule(2, 2, [ok, ok])
    assert with_bad[1].error == "K_RANGE" and with_bad[1].results == ()
    assert with_bad[1].accept == 1 and with_bad[2].accept == 2
    # The legal matmuls run as if the rejected command had not been there.
    assert with_bad[2].issues == without[1].issues
    assert with_bad[2].results == without[1].results


def test_read_follows_the_previous_command_and_takes_no_load():
    matmul = Command("matmul", k=3, m=2, n=4)
    read = Command("read", n=5)
    first, second = command_schedule(3, 2, [matmul, read])
    assert second.load_start is None
    assert second.issues == tuple(range(first.last_issue + 1, first.last_issue + 6))
    assert second.results[0] == second.issues[0] + 5           # rows + cols later


def test_queue_of_three_holds_back_the_fourth_command():
    long = Command("matmul", k=1, m=1, n=50)
    schedule = command_schedule(1, 1, [long] * 5)
    # Commands 0 to 2 are taken at once; 3 waits for 0 to start, 4 for 1 to start.
    assert [t.accept for t in schedule] == [0, 1, 2, schedule[0].first_issue + 1,
                                            schedule[1].first_issue + 1]


@pytest.mark.parametrize("trial", range(40))
def test_stepped_model_equals_the_recurrence_without_stalls(trial):
    rng = random.Random(trial)
    rows, cols = rng.randint(1, 5), rng.randint(1, 5)
    commands = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.3:
            commands.append(Command("read", n=rng.randint(1, 9), offset=rng.randint(0, 9),
                                    bank=rng.randint(0, 8)))
        else:
            commands.append(Command("matmul", k=rng.randint(0, rows + 1), m=1,
                                    n=rng.randint(1, 20), bank=rng.randint(0, 8)))
    assert command_schedule(rows, cols, commands) == command_schedule(
        rows, cols, commands, result_ready=lambda cycle: True)


def test_backpressure_delays_results_by_the_refused_cycles():
    commands = [Command("matmul", k=2, m=2, n=3)]
    free = command_schedule(2, 2, commands)[0]
    blocked = command_schedule(2, 2, commands,
                               result_ready=lambda c: c >= free.results[0] + 4)[0]
    assert blocked.results == tuple(r + 4 for r in free.results)


def test_schedule_arguments_are_checked():
    with pytest.raises(TypeError, match="command 0 must be a systolica.golden.Command"):
        command_schedule(2, 2, [(2, 3)])
    with pytest.raises(ValueError, match="banks must be a positive integer"):
        command_schedule(2, 2, [], banks=0)
