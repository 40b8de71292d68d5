"""Unit tier: how the Dask engine accounts for lost workers and reports a failed program
(no cluster, no simulator: the scheduler's events and the failures are made up here; the
regression tier runs them for real in ``tests/regression/api/test_minilm_dask.py``)."""

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from systolica.hdl.config import TileConfig
from systolica.sim.api import replay
from systolica.sim.api.engine import DaskEngine, Ledger, TileProgram
from systolica.sim.builder.errors import SimulationError


def _program(key, build_root):
    rng = np.random.default_rng(3)
    return TileProgram(key=key, problems=((rng.integers(-8, 8, (4, 4), dtype=np.int8),
                                           rng.integers(-8, 8, (4, 5), dtype=np.int8)),),
                       config=TileConfig(4, 4, "int8"), simulator="verilator",
                       build_root=str(build_root),
                       matmuls=1, model_cycles=0)


class _Client:
    def __init__(self, events):
        self.events = events

    def get_events(self, topic):
        assert topic == "all"
        return self.events


def _engine(events=()):
    """A DaskEngine of run ``r1`` without a cluster: only what the accounting reads."""
    engine = object.__new__(DaskEngine)
    engine.ledger, engine._run, engine.client = Ledger(), "r1", _Client(list(events))
    return engine


def test_reschedules_are_counted_from_the_schedulers_remove_worker_events(tmp_path):
    programs = [_program(k, tmp_path) for k in ("bf16/L0/q/0", "int8/L0/k/1", "int8/L0/v/0")]
    events = [
        (1.0, {"action": "add-worker", "worker": "tcp://127.0.0.1:1"}),
        (2.0, {"action": "remove-worker", "processing-tasks": {"systolica-r1-bf16/L0/q/0",
                                                                "systolica-r0-bf16/L0/q/0",
                                                                "systolica-r1-warm-0"},
               "lost-computed-tasks": {"systolica-r1-int8/L0/k/1"}}),
        (3.0, {"action": "remove-worker", "processing-tasks": {"systolica-r1-bf16/L0/q/0"},
               "lost-computed-tasks": set()}),
        (4.0, "a message that is not a dict"),
    ]
    engine = _engine(events)
    engine._count_reschedules(programs)
    # Twice for the program two lost workers held; once for the result lost with one; an
    # earlier run's program of the same name, the warm-up task and other events: never.
    assert engine.ledger.rescheduled == {"bf16/L0/q/0": 2, "int8/L0/k/1": 1}
    assert engine.ledger.as_dict()["rescheduled"] == 3
    assert engine.ledger.as_dict()["rescheduled_programs"] == {"bf16/L0/q/0": 2,
                                                               "int8/L0/k/1": 1}
    assert Ledger().as_dict()["rescheduled"] == 0


def test_a_failed_program_is_one_line_with_a_replay_that_loads_it_back(tmp_path):
    from distributed.scheduler import KilledWorker

    program = _program("bf16/L0/q/0", tmp_path)
    engine = _engine()
    raised = engine._failed(program, RuntimeError("boom\nsecond line"))
    assert isinstance(raised, SimulationError) and "\n" not in str(raised)
    saved = tmp_path / "replay" / "bf16_L0_q_0-r1.pickle"
    assert str(raised) == (f"program bf16/L0/q/0 raised RuntimeError: boom on a Dask worker, "
                           f"3 attempts; replay it alone: {sys.executable} -m "
                           f"systolica.sim.api.replay {saved}")
    missing = engine._failed(program, ModuleNotFoundError("No module named 'systolica'"))
    assert "3 attempts (is this project, the same version, installed there?); " in str(missing)
    again = replay.load(saved)
    assert (again.key, again.rows, again.cols, again.simulator) == ("bf16/L0/q/0", 4, 4,
                                                                    "verilator")
    for (s0, m0), (s1, m1) in zip(again.problems, program.problems, strict=True):
        assert s0.dtype == s1.dtype and np.array_equal(s0, s1) and np.array_equal(m0, m1)
    lost = SimpleNamespace(address="tcp://127.0.0.1:1")
    killed = engine._failed(program, KilledWorker("k", lost, 3))
    assert str(killed).startswith("program bf16/L0/q/0 killed every worker that ran it (")
    crashed = engine._failed(program, SimulationError("the simulator crashed"))
    assert str(crashed).startswith("program bf16/L0/q/0 failed on a Dask worker: the "
                                   "simulator crashed; replay it alone: ")


@pytest.mark.parametrize("content", [b"", b"not a pickle", b"\x80\x04K\x01."])
def test_replay_refuses_a_file_that_holds_no_saved_program(tmp_path, capsys, content):
    path = tmp_path / "x.pickle"
    path.write_bytes(content)
    assert replay.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path} is not a tile program saved by systolica.sim.api.replay "
                   f"(format systolica-tile-program version 1)\n")
    assert replay.main([str(tmp_path / "missing.pickle")]) == 2
    assert capsys.readouterr().err == (f"error: cannot read {tmp_path}/missing.pickle: No "
                                       f"such file or directory\n")
    with pytest.raises(SystemExit) as done:
        replay.main([])
    assert done.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
