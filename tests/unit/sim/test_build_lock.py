"""The build lock (systolica.sim.builder.runner.locked) reports how long a process waited
for another's build of the same configuration, which the run reports as build time."""

import threading

from systolica.sim.builder.runner import locked


def test_a_free_lock_reports_no_wait(tmp_path):
    with locked(tmp_path / ".lock") as waited:
        assert waited == 0.0


def test_waiting_for_another_holder_is_measured(tmp_path):
    held, release = threading.Event(), threading.Event()

    def other_build():
        with locked(tmp_path / ".lock"):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=other_build)
    thread.start()
    held.wait(5)
    threading.Timer(0.4, release.set).start()
    with locked(tmp_path / ".lock") as waited:
        assert 0.3 <= waited < 5
    thread.join()
