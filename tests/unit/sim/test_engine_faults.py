"""Unit tier: how the Dask engine accounts for lost workers and reports a failed program
(no cluster, no simulator: the scheduler's events and the failures are made up here; the
regression tier runs them for real in ``tests/regression/api/test_minilm_dask.py``)."""

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from systolica.hdl.config import TileConfig
from systolica.sim.api import engine as engines
from systolica.sim.api import replay
from systolica.sim.api.engine import DaskEngine, Ledger, SerialEngine, TileProgram
from systolica.sim.builder.errors import BuildError, SimulationError


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
    engine._on_done = None
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
    raised = engine._failed(program, RuntimeError("boom\nsecond line"), 3)
    assert isinstance(raised, SimulationError) and "\n" not in str(raised)
    saved = tmp_path / "replay" / "bf16_L0_q_0-r1.pickle"
    assert str(raised) == (f"program bf16/L0/q/0 raised RuntimeError: boom on a Dask worker, "
                           f"3 attempts; replay it alone: {sys.executable} -m "
                           f"systolica.sim.api.replay {saved}")
    missing = engine._failed(program, ModuleNotFoundError("No module named 'systolica'"), 3)
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


class _Future:
    """A Dask future whose task ran here at submit time (its value or exception kept)."""

    def __init__(self, fn, arg):
        try:
            self.value, self.error = fn(arg), None
        except Exception as error:  # noqa: BLE001
            self.value, self.error = None, error

    def result(self):
        if self.error is not None:
            raise self.error
        return self.value

    def release(self):
        pass


def _failing(monkeypatch, error):
    """``execute`` raising ``error`` (an exception, or None to succeed) for every program."""
    def execute(program):
        if error is not None:
            raise error
        return SimpleNamespace(key=program.key, matmuls=program.matmuls)
    monkeypatch.setattr(engines, "execute", execute)


def _dask_run(monkeypatch, program):
    """Run ``program`` through DaskEngine.run with a client that runs each task at once,
    counting the tasks submitted (a retried task would be resubmitted by the scheduler)."""
    import distributed

    engine = _engine()
    submitted = []

    def submit(fn, arg, **kwargs):
        submitted.append(kwargs["retries"])
        return _Future(fn, arg)

    engine.client.submit = submit
    engine.client.loop = None
    monkeypatch.setattr(distributed, "as_completed", lambda futures, loop: iter(futures))
    monkeypatch.setattr(engines.Ledger, "accept", lambda self, outcome: None)
    try:
        return engine.run([program])
    finally:
        assert submitted == [engines.RETRIES]


@pytest.mark.parametrize("error, kind, message", [
    (SimulationError("3 PSUM words differ"), SimulationError,
     "program bf16/L0/q/0 failed{where}: 3 PSUM words differ; replay it alone: "),
    (RuntimeError("boom"), SimulationError,
     "program bf16/L0/q/0 raised RuntimeError: boom{where}{attempts}; replay it alone: "),
    (ValueError("K must be at most 128"), ValueError, "K must be at most 128"),
    (BuildError("verilator failed"), BuildError, "verilator failed"),
])
@pytest.mark.parametrize("where", ["serial", "dask"])
def test_both_engines_end_a_failed_program_the_same_way(monkeypatch, tmp_path, error, kind,
                                                         message, where):
    """A failed simulation or an unexpected exception: one SimulationError (exit status 1)
    with a replay command, in this process as on a worker; bad input and a failing tool:
    their own error (exit status 2). Only the unexpected exception is retried on a worker
    (its task raises; the others come back as values, which Dask does not retry)."""
    program = _program("bf16/L0/q/0", tmp_path)
    _failing(monkeypatch, error)
    with pytest.raises(kind) as raised:
        if where == "serial":
            SerialEngine().run([program])
        else:
            _dask_run(monkeypatch, program)
    dask = where == "dask"
    expected = message.format(where=" on a Dask worker" if dask else "",
                              attempts=f", {engines.RETRIES + 1} attempts" if dask else "")
    assert str(raised.value).startswith(expected), str(raised.value)
    if kind is SimulationError:
        assert "\n" not in str(raised.value)
    retried = not isinstance(error, (SimulationError, ValueError, BuildError))
    outcome = None
    try:
        outcome = engines._execute_on_worker(program)
    except RuntimeError:
        assert retried
    else:
        assert not retried and outcome.error is error


def test_a_program_that_passes_comes_back_from_either_engine(monkeypatch, tmp_path):
    program = _program("int8/L0/k/0", tmp_path)
    _failing(monkeypatch, None)
    monkeypatch.setattr(engines.Ledger, "accept", lambda self, outcome: None)
    assert [o.key for o in SerialEngine().run([program])] == ["int8/L0/k/0"]
    assert [o.key for o in _dask_run(monkeypatch, program)] == ["int8/L0/k/0"]
