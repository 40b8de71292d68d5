"""The build lock (systolica.sim.builder.runner.locked) reports how long a process waited
for another's build of the same configuration, which the run reports as build time."""

import contextlib
import threading

from systolica.sim.builder.runner import locked


@contextlib.contextmanager
def _held_elsewhere(path, seconds=0.4):
    """Another holder (a thread) takes the lock on ``path`` and lets it go ``seconds`` after
    the ``with`` block starts."""
    held, release = threading.Event(), threading.Event()

    def other():
        with locked(path):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    held.wait(5)
    threading.Timer(seconds, release.set).start()
    try:
        yield
    finally:
        release.set()
        thread.join()


def test_a_free_lock_reports_no_wait(tmp_path):
    with locked(tmp_path / ".lock") as waited:
        assert waited == 0.0


def test_waiting_for_another_holder_is_measured(tmp_path):
    with _held_elsewhere(tmp_path / ".lock"), locked(tmp_path / ".lock") as waited:
        assert 0.3 <= waited < 5


def test_waiting_for_another_process_generating_the_verilog_counts_as_build(tmp_path,
                                                                             monkeypatch):
    """A worker that waits while the other generates the tile's Verilog, and then finds the
    build done, reports the wait as build seconds (it was host time, and made a fresh
    `make sim`'s first time-left estimate six times too long)."""
    from systolica.hdl.config import TileConfig
    from systolica.sim.builder import runner

    monkeypatch.setattr(runner, "_run_build", lambda *args, **kwargs: None)   # no compiler
    config = TileConfig(1, 1, "int8")
    first = runner.build(config, "icarus", build_root=tmp_path)
    assert (first.directory / "systolica.stamp").is_file()
    assert runner.build(config, "icarus", build_root=tmp_path).seconds == 0.0   # there
    with _held_elsewhere(runner.verilog_folder(config, tmp_path, None) / ".lock"):
        assert 0.3 <= runner.build(config, "icarus", build_root=tmp_path).seconds < 5
