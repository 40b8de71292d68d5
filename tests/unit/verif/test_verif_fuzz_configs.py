"""The fuzzer's configurations: the tile of each program from ``--sizes`` and the type
sets of ``--types`` (``make fuzz SIZES=... TYPES=...``), without building anything."""

import pytest

from systolica.verif import fuzz


def test_one_type_set_takes_the_sizes_in_turn():
    """One type set: program p runs on sizes[p % len(sizes)], as before type-set turns."""
    sizes = ((4, 4), (3, 4), (5, 3))
    got = [fuzz.program_config(p, sizes, "int8+bf16") for p in range(7)]
    assert [(c.rows, c.cols) for c in got] == [sizes[p % 3] for p in range(7)]
    assert {c.types_name for c in got} == {"int8+bf16"}


def test_type_sets_take_every_size_then_the_next_set():
    sizes = ((16, 16), (4, 3))
    got = [fuzz.program_config(p, sizes, "int8/fp8-double-row/all") for p in range(8)]
    assert [(c.rows, c.cols, c.types_name) for c in got] == [
        (16, 16, "int8"), (4, 3, "int8"),
        (16, 16, "fp8-double-row"), (4, 3, "fp8-double-row"),
        (16, 16, "all"), (4, 3, "all"),
        (16, 16, "int8"), (4, 3, "int8")]


def test_replay_names_every_type_set():
    line = fuzz.replay_command(3, 5, 500, ((16, 16),), "int8/fp8-double-row")
    assert line.endswith("--seed 3 --program 5 --chunk 500 --sizes 16x16 "
                         "--types int8/fp8-double-row --keep")


def test_the_summary_gives_harness_time_to_its_precision():
    # The trial's 4 x 4 run printed "in 0 s of harness runs (X cycles/s)": seconds rounded
    # to 0 and a rate divided by a floor of 1e-9.
    from types import SimpleNamespace
    fast = [SimpleNamespace(seconds=0.0031, cycles=564)]
    assert fuzz._harness_time(fast, 564) == "0.0031 s of harness runs (182,000 cycles/s)"
    assert fuzz._harness_time([SimpleNamespace(seconds=0.0)], 10) == "under 1 ms of harness runs"
    # The 10^4-command 128 x 128 run printed "3.28e+03 s".
    slow = [SimpleNamespace(seconds=3276.4)]
    assert fuzz._harness_time(slow, 470537) == "3,276 s of harness runs (144 cycles/s)"


def test_a_build_of_another_type_set_is_refused_not_run():
    # The mutation runner once ran the 'all' programs (16-bit lanes) on its all+fp32 build
    # (32-bit lanes): the harness read the stream words at the wrong width and stalled.
    from types import SimpleNamespace

    from systolica.hdl.config import TileConfig
    build = SimpleNamespace(config=TileConfig(4, 4, "all+fp32"), rows=4, cols=4)
    with pytest.raises(ValueError, match=r"^the build passed as tile is a 4 x 4 tile, types "
                                         r"all\+fp32, program 0 runs on a 4 x 4 tile, types "
                                         r"all; pass"):
        fuzz.run_program_index(1, 0, chunk=5, sizes=((4, 4),), tile=build)
