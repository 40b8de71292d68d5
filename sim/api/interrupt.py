"""Ctrl-C in a run on the local Dask cluster: the terminal sends SIGINT to the whole process
group, the worker processes included. Without this, each worker printed its own 30 to 80
lines of traceback and left the folders of the simulations it was running; with it, a worker
removes those folders and ends at once, silently, and the command alone prints
``interrupted`` (:func:`systolica.cli.main.quiet_broken_pipe`)."""

import logging
import os
import signal
import threading
from contextlib import contextmanager

from distributed.diagnostics.plugin import WorkerPlugin


def _quiet_exit(signum, frame):
    from systolica.sim.api.runs import remove_live_runs

    remove_live_runs()
    os._exit(128 + signal.SIGINT)


class QuietInterrupt(WorkerPlugin):
    """A Dask worker plugin: on SIGINT the worker process removes its running simulations'
    folders and exits with status 130, printing nothing. Only for the workers of a local
    cluster (they share the terminal); a remote scheduler's workers are left alone."""

    name = "systolica-quiet-interrupt"

    def setup(self, worker):
        # A nanny's worker process runs its event loop, and so this, in its main thread.
        signal.signal(signal.SIGINT, _quiet_exit)


def quiet_local_workers(engine):
    """Install :class:`QuietInterrupt` on ``engine``'s workers when they are a local Dask
    cluster's (a :class:`~systolica.sim.api.engine.DaskEngine` this process started);
    otherwise do nothing."""
    from systolica.sim.api.engine import DaskEngine

    if isinstance(engine, DaskEngine) and engine.description.startswith("Dask LocalCluster"):
        engine.client.register_plugin(QuietInterrupt())


def _interrupt_quietly(signum, frame):
    # The workers are ending too; the scheduler's errors about the programs they take with
    # them (logged from its own thread, as the interrupt arrives) are no news.
    logging.disable(logging.ERROR)
    raise KeyboardInterrupt


@contextmanager
def quiet_interrupt():
    """In the ``with`` block, Ctrl-C raises KeyboardInterrupt as usual and first silences
    logging up to ERROR, so a local cluster's shutdown adds no log lines to the one
    ``interrupted``. Outside the main thread (which alone may set a signal handler) it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield                       # only the main thread may set a signal handler
        return
    previous = signal.signal(signal.SIGINT, _interrupt_quietly)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
