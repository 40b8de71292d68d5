"""The time-left estimate of a run of tile programs (systolica.cli.progress.TimeLeft), on a
fake clock: what it says before anything is known, from remembered figures, and from the
run's own finished programs."""

from types import SimpleNamespace

import pytest

from systolica.cli.progress import CostMemory, ProgramCost, ProgramProgress, TimeLeft


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def outcome(cycles, clock_s, startup_s, host_s, build_s=0.0):
    """A ProgramOutcome's timing fields: task seconds = build + simulator + host."""
    return SimpleNamespace(cycles=cycles, clock_seconds=clock_s,
                           sim_seconds=clock_s + startup_s, build_seconds=build_s,
                           seconds=build_s + clock_s + startup_s + host_s)


def test_nothing_known_says_estimating_until_two_programs_finished():
    clock = FakeClock()
    left = TimeLeft(workers=2, clock=clock)
    left.plan(10, 100, 10_000)
    assert left.text() == "estimating"
    # The first program's time holds a 300 s build: its figures alone are no estimate.
    left.finished(10, 1000, outcome(1000, 10.0, 2.0, 5.0, build_s=300.0))
    assert left.text() == "estimating"
    left.finished(10, 1000, outcome(1000, 10.0, 2.0, 5.0))
    # Per program: 2 s start-up, 0.5 s host per matmul (5 s per 10), 100 cycles/s;
    # 8 programs, 80 matmuls, 8,000 cycles left on 2 workers: (16 + 40 + 80) / 2 = 68 s.
    assert left.seconds_left() == pytest.approx(68.0)
    assert left.text() == "~68 s left"


def test_remembered_figures_give_the_first_estimate_with_the_build():
    clock = FakeClock()
    cost = ProgramCost(startup_s=1.0, host_s_per_matmul=0.1, cycles_per_s=200.0, build_s=120.0)
    left = TimeLeft(workers=2, remembered=cost, build_pending=True, clock=clock)
    left.plan(4, 40, 4000)
    # Work: 4 x 1 + 40 x 0.1 + 4000 / 200 = 28 worker seconds over 2 workers; + the build.
    assert left.seconds_left() == pytest.approx(14.0 + 120.0)
    clock.now += 100.0               # the build is under way: 20 s of it left
    assert left.seconds_left() == pytest.approx(14.0 + 20.0)
    clock.now += 50.0                # late: the build is not counted below zero
    assert left.seconds_left() == pytest.approx(14.0)
    # Once a program has finished the build is over, whatever it took.
    left.finished(10, 1000, outcome(1000, 5.0, 1.0, 1.0, build_s=150.0))
    assert left.seconds_left() == pytest.approx((3 + 30 * 0.1 + 3000 / 200) / 2)


def test_a_built_tile_is_not_counted_and_the_last_program_has_one_worker():
    cost = ProgramCost(startup_s=1.0, host_s_per_matmul=0.0, cycles_per_s=100.0, build_s=500.0)
    left = TimeLeft(workers=4, remembered=cost, build_pending=False, clock=FakeClock())
    left.plan(1, 10, 1000)
    assert left.seconds_left() == pytest.approx(11.0)     # one program runs on one worker


def test_own_figures_replace_remembered_ones_after_two_programs():
    cost = ProgramCost(startup_s=100.0, host_s_per_matmul=10.0, cycles_per_s=1.0)
    left = TimeLeft(workers=1, remembered=cost, clock=FakeClock())
    left.plan(3, 30, 3000)
    for _ in range(2):
        left.finished(10, 1000, outcome(1000, 10.0, 0.0, 0.0))
    assert left.seconds_left() == pytest.approx(10.0)      # 1000 cycles at 100 cycles/s


def test_cost_memory_round_trip_and_changed_sources(tmp_path):
    memory = CostMemory(tmp_path, "128x128 verilator", "hdl-a -O3")
    assert memory.load() == (None, True)
    cost = ProgramCost(startup_s=2.5, host_s_per_matmul=0.01, cycles_per_s=150.0, build_s=200.0)
    memory.save(cost)
    assert memory.load() == (cost, False)
    assert CostMemory(tmp_path, "128x128 verilator", "hdl-b -O3").load() == (cost, True)
    assert CostMemory(tmp_path, "64x64 verilator", "hdl-a -O3").load() == (None, True)
    (tmp_path / CostMemory.NAME).write_text("not json")
    assert memory.load() == (None, True)


def test_progress_line_shows_the_estimate():
    import io

    clock = FakeClock()
    cost = ProgramCost(startup_s=1.0, host_s_per_matmul=0.0, cycles_per_s=100.0)
    progress = ProgramProgress(stream=io.StringIO(),
                               time_left=TimeLeft(1, remembered=cost, clock=clock))
    progress.plan(2, 20, 2000)
    assert progress.status().endswith("s elapsed, ~22 s left")
    progress.stop()


def test_a_run_that_reused_the_build_keeps_the_remembered_build_time():
    cost = ProgramCost(startup_s=1.0, host_s_per_matmul=0.0, cycles_per_s=100.0, build_s=500.0)
    reused = TimeLeft(1, remembered=cost, build_pending=False, clock=FakeClock())
    built = TimeLeft(1, remembered=cost, build_pending=True, clock=FakeClock())
    for left in (reused, built):
        left.plan(3, 30, 3000)
        left.finished(10, 1000, outcome(1000, 10.0, 1.0, 0.0, build_s=0.02))   # a lock wait
        left.finished(10, 1000, outcome(1000, 10.0, 1.0, 0.0, build_s=300.0 * left.build_pending))
    assert reused.cost().build_s == 500.0
    assert built.cost().build_s == 300.0


def test_a_first_build_is_named_while_nothing_is_known():
    # The trial saw "estimating" through a two-minute first build, with no word of why.
    left = TimeLeft(workers=1, build_pending=True, clock=FakeClock())
    left.plan(4, 40, 4_000)
    assert left.text() == "estimating after the tile's build"
    left.finished(10, 1000, outcome(1000, 10.0, 2.0, 5.0, build_s=120.0))
    assert left.text() == "estimating"          # built; one program is no rate yet
