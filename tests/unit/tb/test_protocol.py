"""Unit tier: the host <-> cocotb protocol (tb/protocol.py): its test catalogue names exactly
the cocotb module's tests, its files read back what was written, every environment variable
it names is one the cocotb side reads."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from systolica.sim.waves.gtkwave import LANE_MODES
from systolica.tb import fault_injection, protocol
from systolica.tb.model import TileModel
from systolica.tb.scoreboard import Scoreboard

TB = Path(protocol.__file__).resolve().parent


def test_catalogue_names_every_cocotb_test_of_the_tile_module_in_order():
    # What cocotb's discovery registers: the module's test objects, in definition order
    # (the factory registers its cases under their own names).
    from cocotb._decorators import TestGenerator

    from systolica.tb.cases import tile

    tests = [test.name for test in vars(tile).values() if isinstance(test, TestGenerator)]
    assert tests and tests == list(protocol.TILE_TEST_LANES)
    assert set(protocol.TILE_TEST_LANES.values()) <= set(LANE_MODES)


def test_program_file_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (3, 2), dtype=np.int8)
    b = rng.standard_normal((3, 5)).astype(ml_dtypes.bfloat16)
    commands = [{"bank": 1, "offset": 4, "stationary": a, "moving": a, "stationary_type": "int8",
                 "moving_type": "int8", "accumulate": False, "ftz": True, "perf_mode": None},
                {"bank": 0, "offset": 0, "read": 7},
                {"bank": 2, "offset": 0, "stationary": b, "moving": b, "stationary_type": "bf16",
                 "moving_type": "bf16", "accumulate": True, "ftz": False,
                 "perf_mode": "double_row"}]
    protocol.write_program(tmp_path / "p.npz", commands, idle=0.25, backpressure=0.5)
    back, idle, backpressure = protocol.read_program(tmp_path / "p.npz")
    assert (idle, backpressure) == (0.25, 0.5)
    assert back[1] == commands[1]
    for want, got in ((commands[0], back[0]), (commands[2], back[2])):
        for key in ("bank", "offset", "stationary_type", "moving_type", "accumulate", "ftz",
                    "perf_mode"):
            assert got[key] == want[key], key
        for role in ("stationary", "moving"):
            assert got[role].tobytes() == want[role].tobytes()
            assert got[role].dtype.kind == "u" and got[role].shape == want[role].shape


def test_program_file_round_trips_mx_matmuls(tmp_path):
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 256, (16, 3, 4), dtype=np.uint8)
    e2m1 = (codes[:, :2] & 0xF).view(ml_dtypes.float4_e2m1fn)    # [P, M, 4] MXFP4
    e5m2 = codes.view(ml_dtypes.float8_e5m2)                       # [P, N, 4], NaN codes too
    s_scale = np.uint8([[0, 255], [127, 254]])
    m_scale = np.uint8([[1, 2, 3], [200, 201, 202]]).view(ml_dtypes.float8_e8m0fnu)
    mx = {"bank": 3, "offset": 500, "mx": True, "stationary": e2m1, "moving": e5m2,
          "stationary_type": "e2m1", "moving_type": "e5m2", "stationary_scale": s_scale,
          "moving_scale": m_scale, "accumulate": True, "dst_dtype": "bf16",
          "rounding": "stochastic", "seed": 0xFFFFFFFF, "tile_position": (8, 0),
          "tile_size": (8, 2)}
    plain = {"bank": 0, "offset": 0, "stationary": codes[0].view(np.int8),
             "moving": codes[1].view(np.int8), "stationary_type": "int8",
             "moving_type": "int8", "accumulate": False, "ftz": False, "perf_mode": None}
    protocol.write_program(tmp_path / "p.npz", [mx, plain])
    back, _, _ = protocol.read_program(tmp_path / "p.npz")
    got = back[0]
    assert set(got) == set(mx)
    for key in ("bank", "offset", "mx", "stationary_type", "moving_type", "accumulate",
                "dst_dtype", "rounding", "seed", "tile_position", "tile_size"):
        assert got[key] == mx[key] and type(got[key]) is type(mx[key]), key
    for key in ("stationary", "moving", "stationary_scale", "moving_scale"):
        assert got[key].dtype == np.uint8 and got[key].shape == mx[key].shape, key
        assert got[key].tobytes() == mx[key].tobytes(), key
    assert back[1]["mx"] is False and back[1]["ftz"] is False
    assert not any(key.endswith("scale") for key in back[1])


def test_results_file_round_trips(tmp_path):
    psum = np.arange(6, dtype=np.int32).reshape(2, 3)
    protocol.write_results(tmp_path / "r.npz", psums={0: psum}, issues=[[5, 6], []],
                           results=[[9, 10], [11]], accept=[3, -1], cycles=12, seconds=0.5,
                           mismatches=0, expected_beats=3, observed_beats=3)
    out = protocol.read_results(tmp_path / "r.npz", 2)
    assert out["psums"][1] is None and np.array_equal(out["psums"][0], psum)
    assert out["issues"] == [(5, 6), ()] and out["results"] == [(9, 10), (11,)]
    assert out["accept"] == [3, -1]
    assert (out["cycles"], out["seconds"], out["mismatches"]) == (12, 0.5, 0)


def test_every_environment_variable_is_read_by_name_from_the_protocol():
    names = {value for key, value in vars(protocol).items()
             if key.isupper() and isinstance(value, str) and value.startswith("SYSTOLICA_")}
    assert len(names) == 12
    sources = "\n".join(p.read_text() for p in TB.rglob("*.py") if p.name != "protocol.py")
    for name in names:
        assert f'"{name}"' not in sources, f"{name} spelled out instead of taken from protocol"


def test_fault_injection_flips_one_bit_of_the_first_matmul_only():
    ones = np.ones((2, 2), np.int8)
    clean, corrupt = (cls(2, 2, Scoreboard()) for cls in (TileModel,
                                                          fault_injection.CorruptFirstMatmul))
    for model in (clean, corrupt):
        model.submit(ones, ones)
        model.submit(ones, ones)
    (c0, c1), (x0, x1) = ([r.expected for r in m.records] for m in (clean, corrupt))
    assert np.array_equal(c1, x1)                       # the second matmul is untouched
    diff = c0 ^ x0
    assert diff[0, 0] == 1 << fault_injection.CORRUPT_BIT and np.count_nonzero(diff) == 1
    assert fault_injection.model_class() is TileModel   # off unless the variable is set


def test_timing_file_round_trips_by_name(tmp_path):
    path = tmp_path / "timing.txt"
    protocol.write_timing(path, cycles=1234, seconds=0.1 + 0.2, cpu_seconds=0.25, rejected=2,
                          error=4)
    assert protocol.read_timing(path) == {"cycles": 1234, "seconds": 0.30000000000000004,
                                          "cpu_seconds": 0.25, "rejected": 2, "error": 4}
    protocol.write_timing(path, cpu_seconds=1.5, seconds=2.0, cycles=7)     # free_run's
    assert protocol.read_timing(path) == {"cycles": 7, "seconds": 2.0, "cpu_seconds": 1.5,
                                          "rejected": None, "error": None}
    protocol.write_progress(path, results=3, cycle=99)
    assert protocol.read_progress(path) == {"results": 3, "cycle": 99}


@pytest.mark.parametrize("text, match", [
    ("1234 0.5 0 0 0.4\n", r"'1234' is not one of cycles=<value>, seconds=<value>"),
    ("cycles=12 seconds=0.5\n", "missing fields cpu_seconds"),
    ("cycles=1.5 seconds=0.5 cpu_seconds=0.1\n", "cycles must be int, not '1.5'"),
    ("cycles=1 seconds=1 cpu_seconds=1 colour=2\n", "'colour=2' is not one of"),
])
def test_bad_timing_files_give_one_line_errors(tmp_path, text, match):
    path = tmp_path / "timing.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as error:
        protocol.read_timing(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)
    with pytest.raises(ValueError, match="unknown fields colour"):
        protocol.write_timing(path, cycles=1, seconds=1.0, cpu_seconds=1.0, colour=2)


def test_harness_files_are_written_and_read_only_through_the_protocol():
    """The harness's environment (budget, timing and progress files) is set by its one
    runner (tb/harness.py) and read by its cocotb side alone: the run API and the fuzzer
    call the runner and write none of it themselves."""
    root = TB.parent
    names = ("BULK_TIMING", "PROGRESS", "MAX_CYCLES", "BULK_RUNNER")
    users = [p for folder in ("tb", "sim", "verif", "systolica") for p in
             (root / folder).rglob("*.py") if p.name != "protocol.py" and any(
                 f"protocol.{name}" in p.read_text() for name in names)]
    assert {p.relative_to(root).as_posix() for p in users} == {
        "tb/cases/bulk.py", "tb/harness.py"}
    for path in users:
        source = path.read_text()
        assert any(f"protocol.{verb}_{what}(" in source for verb in ("read", "write")
                   for what in ("timing", "progress")), path
        assert "read_text().split()" not in source, f"{path} reads a file by position"


def test_tile_config_travels_as_plain_values():
    from systolica.hdl.config import TileConfig

    config = TileConfig(3, 5, "int8+fp8-double-row", psum_banks=2, psum_entries=64)
    env = {protocol.TILE_CONFIG: protocol.tile_config_env(config)}
    assert protocol.read_tile_config(env) == {
        "rows": 3, "cols": 5, "banks": 2, "entries": 64,
        "dtypes": ["int8", "e4m3", "e5m2", "e3m4", "e4m3fn"], "double_row": True, "mx": False}
    mx = protocol.read_tile_config({protocol.TILE_CONFIG: protocol.tile_config_env(
        TileConfig(8, 2, "int8+mx"))})
    assert (mx["mx"], mx["double_row"]) == (True, False)
    assert protocol.read_tile_config({}) is None
