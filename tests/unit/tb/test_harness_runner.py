"""Unit tier: the bulk harness's one runner (tb/harness.py) without a simulator: what it
hands the simulator process (plusargs, budget, timing file) and how a failed, stuck or
garbled run becomes one-line errors in its HarnessRun, nothing counted as checked."""

from types import SimpleNamespace

import numpy as np

from systolica.hdl.config import TileConfig
from systolica.tb import protocol
from systolica.tb.bulk import BulkProgram
from systolica.tb.harness import HarnessRun, cycle_budget, run_harness

#: The tail of a cocotb log of a stuck run: the message under its traceback, then cocotb's
#: summary table (longer than the five lines the run API once searched).
STUCK_LOG = """\
1020.00ns WARNING  cocotb.regression  systolica.tb.cases.bulk.run_bulk failed
    Traceback (most recent call last):
      File "tb/cases/bulk.py", line 55, in run_harness
    AssertionError: tile stuck: harness not done after 9 cycles; commands sent 1, results \
received 0
1020.00ns INFO     cocotb.regression  ************************************************
    ** TEST                  STATUS  SIM TIME (ns)  **
    **************************************************
    ** run_bulk              FAIL        1020.00    **
    **************************************************
    ** TESTS=1 PASS=0 FAIL=1 SKIP=0                 **
    **************************************************
"""


class FakeTile:
    """A harness build whose simulator run only records what it was given and writes the
    log and files it is told to."""

    simulator, harness_depth = "icarus", 1 << 20

    def __init__(self, tmp_path, *, failed=0, log="", timing=None):
        self.calls, self._failed, self._log, self._timing = [], failed, log, timing
        self._folder = tmp_path

    def run_tests(self, module, run_dir, **options):
        self.calls.append((module, run_dir, options))
        log = run_dir / "sim.log"
        log.write_text(self._log)
        if self._timing is not None:
            (run_dir / "timing.txt").write_text(self._timing)
            (run_dir / "results.hex").write_text("0\n")
        return SimpleNamespace(failed=self._failed, log=log, seconds=0.5, waveform=None)


def _program():
    program = BulkProgram(TileConfig(2, 2, "int8"))
    ones = np.ones((2, 2), np.int8)
    program.submit(ones, ones)
    return program


def test_the_runner_hands_the_simulator_its_plusargs_budget_and_timing_file(tmp_path):
    program = _program()
    tile = FakeTile(tmp_path, failed=1)
    run_harness(program, tile, tmp_path, seed=7, idle=0.25, backpressure=0.5,
                plusargs=("+extra=1",))
    (module, run_dir, options), = tile.calls
    assert module == protocol.BULK_RUNNER and options["testcase"] == "run_bulk"
    assert options["seed"] == 7
    assert {"+seed=7", "+idle=64", "+bp=128", "+extra=1", "+r_count=2"} <= set(
        options["plusargs"])
    env = options["extra_env"]
    assert env[protocol.BULK_TIMING] == str(tmp_path / "timing.txt")
    assert int(env[protocol.MAX_CYCLES]) == cycle_budget(program, 0.25, 0.5)
    # Stalls make room: half the cycles idle and a quarter stalled at least double it.
    assert cycle_budget(program, 0.25, 0.5) > 2 * cycle_budget(program) - 2000


def test_a_stuck_run_is_its_message_from_anywhere_in_the_log(tmp_path):
    run = run_harness(_program(), FakeTile(tmp_path, failed=1, log=STUCK_LOG), tmp_path)
    assert isinstance(run, HarnessRun) and not run.checked and not run.passed
    assert run.errors == [f"tile stuck: harness not done after 9 cycles; commands sent 1, "
                          f"results received 0; see {tmp_path / 'sim.log'}"]
    assert (run.expected_beats, run.missing_beats, run.result_beats) == (2, 2, 0)


def test_a_failed_run_without_a_message_says_so(tmp_path):
    run = run_harness(_program(), FakeTile(tmp_path, failed=1, log="crashed\n"), tmp_path)
    assert run.errors == [f"the harness run failed; see {tmp_path / 'sim.log'}"]


def test_an_unreadable_timing_file_is_one_line_and_nothing_is_checked(tmp_path):
    run = run_harness(_program(), FakeTile(tmp_path, timing="cycles=x\n"), tmp_path)
    assert not run.checked and run.missing_beats == 2
    assert len(run.errors) == 1 and "cycles must be int, not 'x'" in run.errors[0]
    assert "\n" not in run.errors[0]


def test_a_program_of_rejected_commands_needs_no_results_file(tmp_path):
    """Every command illegal: no result beat, so the harness writes no results file, and
    the run is checked all the same (the status against the model's)."""
    from systolica.golden import Command

    program = BulkProgram(TileConfig(2, 2, "int8"))
    program.submit_command(Command("matmul", k=3, m=1, n=1))      # K > rows: K_RANGE
    tile = FakeTile(tmp_path, timing=None)
    code = program.model.expected_status()
    (tmp_path / "timing.txt").write_text(
        f"cycles=9 seconds=0.1 cpu_seconds=0.1 rejected={code[0]} error={code[1]}\n")
    tile.run_tests = lambda module, run_dir, **options: SimpleNamespace(
        failed=0, log=run_dir / "sim.log", seconds=0.5, waveform=None)
    run = run_harness(program, tile, tmp_path)
    assert run.checked and not run.errors and run.expected_beats == 0
    assert run.status == code and run.cycles == 9
