"""Regression tier: the MiniLM workload's tile programs on Dask distributed.

A small slice (two layers on a 4 x 4 Verilator tile, one sentence, the first M-fold of each
problem on the RTL) runs serially in this process, on an embedded local cluster of two
worker processes, on a local cluster one of whose workers is killed in the middle of a
program, and through a real ``dask scheduler`` + ``dask worker`` on loopback: results bit
for bit the same, every planned matmul checked exactly once. Bad and unreachable scheduler
addresses end in one line, exit status 2, within a bounded time.
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

from systolica.sim.api.engine import DaskEngine, SerialEngine
from systolica.sim.builder.runner import default_build_root
from systolica.workloads.minilm import run_model
from systolica.workloads.minilm.report import busy_fraction

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
    assert led.complete and led.programs == serial.ledger.programs == 12
    assert led.matmuls == led.planned_matmuls == serial.ledger.matmuls
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

    from systolica.sim.api.engine import TileProgram

    rng = np.random.default_rng(7)
    programs = [TileProgram(
        key=f"p{i}", problems=((rng.integers(-8, 8, (4, 4), dtype=np.int8),
                                rng.integers(-8, 8, (4, 6), dtype=np.int8)),),
        rows=4, cols=4, simulator="verilator", build_root=None, matmuls=1, model_cycles=0,
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
    """SIGKILL a worker process while it runs a program: Dask reruns the program on a
    worker that lives, the ledger still counts each planned program once, the results are
    the serial run's."""
    state = {"killed": None}
    holder = {}

    def kill_a_busy_worker(program, outcome):
        if state["killed"] is not None:
            return
        client = holder["engine"].client
        busy = [address for address, keys in client.processing().items() if keys]
        if not busy:
            return                          # try again after the next program
        pids = client.run(os.getpid)
        os.kill(pids[busy[0]], signal.SIGKILL)
        state["killed"] = (busy[0], pids[busy[0]])

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


def test_slice_through_a_real_scheduler_and_worker_on_loopback(serial, tmp_path):
    dask = Path(sys.executable).parent / "dask"
    scheduler_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")     # noqa: SIM115 (closed below)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--dashboard-address", "127.0.0.1:0", "--no-show",
                               "--scheduler-file", scheduler_file],
                              stdout=log, stderr=subprocess.STDOUT)]
    try:
        address = _wait_for(scheduler_file, 60)["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs.append(subprocess.Popen([dask, "worker", address, "--host", "127.0.0.1",
                                       "--nthreads", "1", "--nworkers", "1",
                                       "--no-dashboard"],
                                      stdout=log, stderr=subprocess.STDOUT))
        done = _cli(*CLI_SLICE, "--scheduler", address, "--build-dir",
                    str(default_build_root()), "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
    assert report["engine"].startswith(f"Dask scheduler {address}, 1 workers")
    acc = report["accounting"]
    assert acc["complete"] and acc["programs"] == acc["planned_programs"] == 12
    assert acc["matmuls_checked"] == serial.ledger.matmuls and acc["mismatches"] == 0
    for dtype, prec in serial.runs.items():
        # Cosines are computed from the embeddings: equal floats mean equal embeddings.
        assert report["precisions"][dtype]["embedding_cosines"] == [float(c) for c in
                                                                    prec.cosines]


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
