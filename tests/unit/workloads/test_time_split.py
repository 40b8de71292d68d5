"""A precision pass's time split (PrecisionRun.time_split): on workers shared with other
passes, its wall time holds their programs, so the host side is its own programs' task time
less build and simulator; serially, it is the pass's wall time less them."""

from types import SimpleNamespace

import numpy as np

from systolica.workloads.minilm.run import PrecisionRun


def _run(wall, programs):
    gemms = [SimpleNamespace(build_seconds=b, sim_seconds=s, clock_seconds=c, seconds=t)
             for b, s, c, t in programs]
    return PrecisionRun(dtype="bf16", embeddings=np.zeros((1, 1)), cosines=np.ones(1),
                        similarity=np.ones((1, 1)), similarity_max_diff=0.0, neighbours=[-1],
                        neighbours_unchanged=True, gemms=gemms, seconds=wall)


def test_on_workers_the_wait_for_other_passes_is_not_host_time():
    # Two programs: one built the tile (100 s), each ran 40 s in the simulator and 2 s of
    # host work; the pass took 1,000 s of wall time beside the other precisions.
    run = _run(1000.0, [(100.0, 40.0, 35.0, 142.0), (0.0, 40.0, 35.0, 42.0)])
    assert run.time_split(on_workers=True) == (100.0, 80.0, 70.0, 4.0)


def test_serially_the_rest_of_the_pass_is_host_time():
    run = _run(300.0, [(100.0, 40.0, 35.0, 142.0), (0.0, 40.0, 35.0, 42.0)])
    assert run.time_split() == (100.0, 80.0, 70.0, 120.0)
