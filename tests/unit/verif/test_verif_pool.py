"""``verif.pool.worker_pool``: Ctrl-C stops the workers at once, even one that cannot take
it (a WebAssembly Yosys call or a simulator run), and a normal run still gets every result."""

import os
import signal
import time

import pytest

from systolica.verif.pool import worker_pool


def _deaf_sleep(seconds):
    """A work item that ignores SIGINT, as one inside a long native call does, then sleeps."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(seconds)
    return os.getpid()


def test_ctrl_c_kills_the_workers_at_once():
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        with worker_pool(2) as pool:
            futures = [pool.submit(_deaf_sleep, 60) for _ in range(4)]
            time.sleep(0.5)               # the first two are running
            workers = list(pool._processes.values())
            raise KeyboardInterrupt
    assert time.perf_counter() - started < 10      # not the 60 s of the running items
    # The pool's own thread reaps the workers; wait for it rather than join them here.
    deadline = time.perf_counter() + 5
    while any(w.is_alive() for w in workers) and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert [w.exitcode for w in workers] == [-signal.SIGKILL] * len(workers)
    # Every item ends: the queued ones cancelled, the running ones broken with the pool (the
    # pool's thread marks them; done() counts a cancelled one, wait() only once notified).
    deadline = time.perf_counter() + 5
    while not all(f.done() for f in futures) and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert all(f.done() for f in futures)


def test_a_normal_run_waits_for_every_result():
    with worker_pool(2) as pool:
        futures = [pool.submit(_deaf_sleep, 0.1) for _ in range(3)]
    assert all(f.done() and f.result() > 0 for f in futures)


def test_another_error_waits_for_the_running_items():
    with pytest.raises(ValueError):
        with worker_pool(1) as pool:
            future = pool.submit(_deaf_sleep, 1)
            time.sleep(0.3)
            raise ValueError("a bad result")
    assert future.done() and future.result() > 0
