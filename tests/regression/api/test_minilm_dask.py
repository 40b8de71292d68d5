"""Regression tier: the MiniLM workload's tile programs on Dask distributed.

A small slice (two layers on a 4 x 4 Verilator tile, one sentence, the first M-fold of each
problem on the RTL) runs serially in this process, on an embedded local cluster of two
worker processes, and on a local cluster one of whose workers is killed in the middle of a
program: results bit for bit the same, every planned matmul checked exactly once, the
reschedule counted. A program that raises on a worker stops the run with its replay
command. MiniLM layer 0 at 8 x 8 through a real ``dask scheduler`` and two ``dask worker``
processes on loopback gives the local run's report. Bad and unreachable scheduler
addresses end in one line, exit status 2, within the stated timeout.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from systolica.sim.api.engine import (
    WORKER_CONFIG,
    DaskEngine,
    SchedulerError,
    SerialEngine,
)
from systolica.sim.builder.runner import default_build_root
from systolica.workloads.minilm import run_model
from systolica.workloads.minilm.report import _accounting, busy_fraction

SENTENCES = ["The cat sleeps on the mat."]
SLICE = {"layers": [0, 1], "gemms": ["q", "scores", "context"], "rows": 4, "cols": 4,
         "rtl_folds": 1, "simulator": "verilator"}
CLI_SLICE = ["--layers", "0,1", "--gemms", "q,scores,context", "--rows", "4", "--cols", "4",
             "--rtl-folds", "1", "--sim", "verilator", "--text", SENTENCES[0],
             "--dtypes", "bf16,int8"]    # run_model's default, as the serial fixture runs


@pytest.fixture(scope="module")
def serial():
    """The slice run one program after the other in this process (the reference)."""
    run = run_model(SENTENCES, engine=SerialEngine(), **SLICE)
    assert run.exact and run.ledger.complete
    return run


def _fingerprint(run):
    """What must not depend on where the programs ran: embeddings bit for bit, and per GEMM
    its programs, matmuls, cycles and mismatches."""
    return {dtype: (prec.embeddings.tobytes(),
                    [(g.layer, g.gemm, g.programs, g.matmuls, g.cycles, g.mismatches,
                      g.differing) for g in prec.gemms])
            for dtype, prec in run.runs.items()}


def test_slice_is_bit_identical_with_one_and_two_workers(serial):
    with DaskEngine(2) as engine:
        run = run_model(SENTENCES, engine=engine, **SLICE)
    assert "LocalCluster, 2 worker processes on 127.0.0.1" in run.engine
    assert _fingerprint(run) == _fingerprint(serial)
    led = run.ledger
    # 2 precisions x 2 layers x one program each of q; q.T, k.T, scores; p.T, context
    assert led.complete and led.programs == serial.ledger.programs == 24
    assert led.matmuls == led.planned_matmuls == serial.ledger.matmuls
    assert led.rescheduled == {} and led.as_dict()["rescheduled"] == 0   # no worker lost
    # The programs ran in worker processes, not here, and kept them partly busy.
    assert all(int(w.rsplit(":", 1)[1]) != os.getpid() for w in led.workers)
    assert 0 < busy_fraction(run) <= 1
    # CPU time is measured where the programs ran: the simulators' and the workers' own.
    for ledger in (led, serial.ledger):
        assert 0 < ledger.sim_cpu_seconds and 0 < ledger.host_cpu_seconds


def test_waiting_programs_run_by_priority_on_the_cluster():
    """One worker, eight small programs submitted in one batch with rising priorities: the
    worker takes the first few before the rest arrive, but of those left waiting the
    highest priority must run first (in submission order it would run last)."""
    import numpy as np

    from systolica.hdl.config import TileConfig
    from systolica.sim.api.engine import TileProgram

    rng = np.random.default_rng(7)
    programs = [TileProgram(
        key=f"p{i}", problems=((rng.integers(-8, 8, (4, 4), dtype=np.int8),
                                rng.integers(-8, 8, (4, 6), dtype=np.int8)),),
        config=TileConfig(4, 4, "int8"), simulator="verilator", build_root=None, matmuls=1,
        model_cycles=0,
        priority=i) for i in range(8)]
    order = []
    with DaskEngine(1, on_done=lambda program, outcome: order.append(program.key)) as engine:
        engine.run(programs[:1])               # the worker is warm and the tile built
        order.clear()
        engine.ledger = type(engine.ledger)()
        engine.ledger.plan(programs)
        outcomes = engine.run(programs)
    assert [o.key for o in outcomes] == [p.key for p in programs]
    assert all(o.mismatches == 0 and o.matmuls == 1 for o in outcomes)
    assert sorted(order) == [p.key for p in programs]
    assert order[-3:] == sorted(order[-3:], reverse=True), order   # by priority, not FIFO
    assert order.index("p7") < order.index("p6") < order.index("p5"), order


def test_a_worker_killed_mid_program_leaves_no_matmul_unaccounted(serial):
    """SIGKILL a worker process while it holds a program: Dask reruns the program on a
    worker that lives, the ledger still counts each planned program once and counts the
    reschedule (of a program the killed worker held), the results are the serial run's."""
    state = {"killed": None}
    holder = {}

    def kill_a_busy_worker(program, outcome):
        if state["killed"] is not None:
            return
        engine = holder["engine"]
        pids = engine.client.run(os.getpid)    # first: the kill must follow the look at once
        busy = [(address, keys) for address, keys in engine.client.processing().items()
                if keys]
        if not busy:
            return                          # try again after the next program
        address, keys = busy[0]
        # A program can end between the look and the kill: its result, still on the
        # worker, is lost with it and run again (Dask's lost-computed), so it counts too.
        keys = set(keys) | set(engine.client.has_what().get(address, ()))
        os.kill(pids[address], signal.SIGKILL)
        # A program handed to it after the look, until the scheduler has seen the death, is
        # lost with it too: keep looking until the scheduler has dropped the worker.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            keys |= set(engine.client.processing().get(address, ()))
            if address not in engine.client.scheduler_info()["workers"]:
                break
            time.sleep(0.005)
        prefix = engine._task(program)[:-len(program.key)]
        state["killed"] = (address, {key.removeprefix(prefix) for key in keys})

    engine = DaskEngine(2, on_done=kill_a_busy_worker)
    holder["engine"] = engine
    try:
        run = run_model(SENTENCES, engine=engine, **SLICE)
    finally:
        engine.close()
    assert state["killed"] is not None, "no worker was busy to be killed"
    assert _fingerprint(run) == _fingerprint(serial)
    led = run.ledger
    assert led.complete and not led.missing and led.duplicates == 0
    assert (led.programs, led.matmuls) == (led.planned_programs, led.planned_matmuls)
    assert sum(led.workers.values()) == led.programs
    # Programs the killed worker held (running, or waiting there) were rescheduled once
    # each, and no other program (one that ended between the look and the kill may not be).
    held = state["killed"][1]
    assert led.rescheduled and set(led.rescheduled) <= held, (led.rescheduled, held)
    assert set(led.rescheduled.values()) == {1}
    count = led.as_dict()["rescheduled"]
    assert count == len(led.rescheduled)
    assert f"{count} rescheduled from a lost worker" in _accounting(run)


def _cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "systolica.sim", "--workload", "minilm",
                           *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and path.stat().st_size:
            try:
                return json.loads(path.read_text())
            except json.JSONDecodeError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"{path} did not appear within {seconds} s")


#: MiniLM layer 0 on an 8 x 8 tile, as the README's separate-process recipe runs it, cut
#: down for CI: one sentence, BF16 only, the first M-fold of each problem on the RTL (eight
#: programs; BF16 and INT8 took 47 CPU-s, this about half).
LAYER0_8X8 = ["--layers", "0", "--rows", "8", "--cols", "8", "--rtl-folds", "1", "--sim",
              "verilator", "--text", SENTENCES[0], "--dtypes", "bf16", "--json"]


def _without_times(report):
    """A JSON report without what may differ between equal runs: times and the engine."""
    if isinstance(report, dict):
        return {k: _without_times(v) for k, v in report.items()
                if "seconds" not in k
                and k not in ("engine", "workers", "wall", "worker_busy_fraction")}
    if isinstance(report, list):
        return [_without_times(v) for v in report]
    return report


def _dask_environment():
    """The embedded cluster's Dask settings (:data:`WORKER_CONFIG`: slower health ticks,
    no profiler, BLAS on one thread) as ``DASK_*`` variables for ``dask`` commands (dict of
    str: idle scheduler and worker processes then cost a tenth of the CPU time)."""
    return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): repr(value)
            for key, value in WORKER_CONFIG.items()}


def test_layer_0_through_a_scheduler_and_two_worker_processes_is_the_local_run(tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes on loopback, started as the
    README says: MiniLM layer 0 at 8 x 8 through them gives the report of the same
    command run serially in one process, bit for bit (every float of every GEMM, the
    embeddings' cosines and similarities), both workers running programs."""
    build = ["--build-dir", str(default_build_root())]   # the tile the other tests build
    local = _cli(*LAYER0_8X8, *build, "--workers", "1")
    assert local.returncode == 0, local.stderr[-3000:]
    dask = Path(sys.executable).parent / "dask"
    scheduler_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")     # noqa: SIM115 (closed below)
    env = {**os.environ, **_dask_environment()}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", scheduler_file],
                              stdout=log, stderr=subprocess.STDOUT, env=env)]
    try:
        address = _wait_for(scheduler_file, 60)["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs += [subprocess.Popen([dask, "worker", address, "--host", "127.0.0.1",
                                    "--nthreads", "1", "--no-dashboard"],
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
                  for _ in range(2)]
        from distributed import Client
        with Client(address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
        remote = _cli(*LAYER0_8X8, *build, "--scheduler", address)
        assert remote.returncode == 0, remote.stderr[-3000:]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
    mine, theirs = json.loads(remote.stdout), json.loads(local.stdout)
    assert mine["engine"] == f"Dask scheduler {address}, 2 workers"
    acc = mine["accounting"]
    # One program per GEMM of layer 0 (8) and per transpose (q.T, k.T, p.T).
    assert acc["complete"] and acc["programs"] == acc["planned_programs"] == 11
    assert len(acc["workers"]) == 2 and acc["rescheduled"] == 0
    assert _without_times(mine) == _without_times(theirs)
    assert mine["precisions"]["bf16"]["embedding_cosines"] == \
        theirs["precisions"]["bf16"]["embedding_cosines"]


#: A Dask worker preload (``distributed.worker.preload``) that makes one program raise.
_FAULT = """
from systolica.sim.api import engine

_execute = getattr(engine.execute, "unfaulty", engine.execute)   # loaded more than once


def execute(program):
    if program.key == {key!r}:
        raise RuntimeError("injected fault in " + program.key)
    return _execute(program)


execute.unfaulty = _execute
engine.execute = execute
"""


def test_a_program_that_raises_on_a_worker_stops_the_run_with_its_replay(serial, tmp_path):
    """One program raises inside the workers of the embedded cluster (a preload script
    replaces the task function there): the run ends with one line naming the program and
    the command that replays it, exit status 1, no report and no PASS; the replay runs
    the program alone here (it passes without the fault and raises with it)."""
    key = "bf16/L0/q/0"
    preload = tmp_path / "fault.py"
    preload.write_text(_FAULT.format(key=key))
    done = _cli(*CLI_SLICE, "--workers", "2", "--build-dir", str(default_build_root()),
                "--json", env={"DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(preload)])})
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stdout == "" and "PASS" not in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    head = (f"error: program {key} raised RuntimeError: injected fault in {key} on a Dask "
            f"worker, 3 attempts")
    assert errors[0].startswith(head), errors[0]
    replay = errors[0].split("; replay it alone: ", 1)[1].split()
    assert replay[:3] == [sys.executable, "-m", "systolica.sim.api.replay"]
    again = subprocess.run(replay, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    gemm = next(g for g in serial.runs["bf16"].gemms if (g.layer, g.gemm) == (0, "q"))
    assert gemm.programs == 1          # so the program's matmuls are the GEMM's
    assert again.stdout.startswith(f"replay: program {key} on a 4 x 4 verilator tile: "
                                   f"{gemm.matmuls:,} matmuls, "), again.stdout
    assert again.stdout.rstrip().endswith(" 0 mismatches, 0 differing words, "
                                          f"{gemm.cycles:,} cycles: ok"), again.stdout
    faulty = subprocess.run([sys.executable, "-c", f"import runpy, sys; "
                             f"runpy.run_path({str(preload)!r}); "
                             f"from systolica.sim.api import replay; "
                             f"sys.exit(replay.main([{replay[3]!r}]))"],
                            capture_output=True, text=True, timeout=300)
    assert faulty.returncode == 1 and f"RuntimeError: injected fault in {key}" in \
        faulty.stderr, faulty.stderr[-3000:]


class _Silent:
    """A TCP listener on loopback that accepts connections and never says a word."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.port = self.socket.getsockname()[1]
        self.held = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        try:
            while True:
                self.held.append(self.socket.accept()[0])
        except OSError:
            pass

    def close(self):
        self.socket.close()
        for s in self.held:
            s.close()


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                               # nothing listens there now: connection refused
    return port


@pytest.mark.parametrize("kind", ["refused", "silent", "silent-from-environment"])
def test_unreachable_scheduler_is_one_line_within_the_timeout(kind):
    silent = _Silent() if kind.startswith("silent") else None
    port = silent.port if silent else _closed_port()
    address = f"tcp://127.0.0.1:{port}"
    args, env = ["--connect-timeout", "3"], None
    if kind == "silent-from-environment":
        env = {"DASK_SCHEDULER_ADDRESS": address}
    else:
        args += ["--scheduler", address]
    started = time.monotonic()
    try:
        done = _cli(*CLI_SLICE, *args, env=env, timeout=120)
    finally:
        if silent:
            silent.close()
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"error: cannot reach the Dask scheduler at {address} "
                                f"within 3 s")
    assert elapsed < 3 + 30


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_unreachable_scheduler_fails_within_the_stated_timeout(kind):
    """In process (no interpreter start-up in the figure): the engine gives up after the
    timeout it was given, not Dask's longer defaults, with one line."""
    silent = _Silent() if kind == "silent" else None
    address = f"tcp://127.0.0.1:{silent.port if silent else _closed_port()}"
    started = time.monotonic()
    try:
        with pytest.raises(SchedulerError) as error:
            DaskEngine(scheduler=address, timeout=2)
    finally:
        if silent:
            silent.close()
    elapsed = time.monotonic() - started
    assert str(error.value).startswith(f"cannot reach the Dask scheduler at {address} "
                                       f"within 2 s (")
    assert "\n" not in str(error.value)
    assert elapsed < 2 + 1.0, elapsed


@pytest.mark.parametrize("address", ["127.0.0.1:8786", "tcp://127.0.0.1", "http://host:80",
                                     "tcp://127.0.0.1:0", "tcp://bad host:8786"])
def test_bad_scheduler_address_is_one_line_before_anything_runs(address):
    done = _cli("--scheduler", address, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert ("the scheduler address must be tcp://HOST:PORT or tls://HOST:PORT (port "
            f"1-65535), not {address!r}") in done.stderr


def test_security_files_must_exist(tmp_path):
    done = _cli("--scheduler", "tls://127.0.0.1:8786", "--security",
                f"{tmp_path}/ca.pem,{tmp_path}/cert.pem,{tmp_path}/key.pem", timeout=60)
    assert done.returncode == 2
    assert f"error: --security: the TLS CA file {tmp_path}/ca.pem does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    bad = _cli("--scheduler", "tls://127.0.0.1:8786", "--security", "ca.pem", timeout=60)
    assert bad.returncode == 2 and "--security must be CA_FILE,CERT_FILE,KEY_FILE" in bad.stderr
