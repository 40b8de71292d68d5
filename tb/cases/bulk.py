"""cocotb entry point of the bulk-stimulus harness (see :mod:`systolica.tb.bulk`).

Environment (names in :mod:`systolica.tb.protocol`): ``SYSTOLICA_MAX_CYCLES`` bounds the
run; ``SYSTOLICA_PROGRESS`` (a file) and ``SYSTOLICA_PROGRESS_CYCLES`` ask for progress
reports; the stimulus and result files are named by the harness's plusargs. Checking happens
on the host after the run. This module imports only cocotb and the protocol's names: the
simulator process should not pay for numpy, ml_dtypes or Amaranth.
"""

import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer

from .. import protocol


def _report_progress(dut, path):
    """Write the results received so far and the cycle to the progress file ``path``
    (:func:`~systolica.tb.protocol.write_progress`; replaced atomically)."""
    partial = f"{path}.part"
    protocol.write_progress(partial, results=int(dut.r_received.value),
                            cycle=int(dut.cycle.value))
    os.replace(partial, path)


async def run_harness(dut, *, max_cycles, clock_period_ns=10, reset_cycles=3,
                      progress=None, progress_cycles=1024):
    """cocotb side: clock the harness (GPI clock, no Python per cycle) until it has dumped
    its results, or raise ``AssertionError`` naming its counters after ``max_cycles``.

    With ``progress`` (a file path), Python wakes every ``progress_cycles`` cycles and, at
    most four times a second, writes the results received so far and the cycle there.

    Returns the harness's final cycle count (int).
    """
    Clock(dut.clk, clock_period_ns, unit="ns", impl="gpi").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    finished = RisingEdge(dut.dumped)
    step = progress_cycles if progress else max_cycles
    elapsed, reported = 0, time.monotonic()
    while not dut.dumped.value and elapsed < max_cycles:
        chunk = min(step, max_cycles - elapsed)
        if await First(finished, Timer(chunk * clock_period_ns, unit="ns")) is finished:
            break
        elapsed += chunk
        if progress and time.monotonic() - reported >= 0.25:
            _report_progress(dut, progress)
            reported = time.monotonic()
    if not dut.dumped.value:
        raise AssertionError(
            f"{protocol.STUCK} harness not done after {max_cycles} cycles; commands sent "
            f"{int(dut.c_sent.value)}, stationary beats sent {int(dut.s_sent.value)}, "
            f"moving beats sent {int(dut.m_sent.value)}, results "
            f"received {int(dut.r_received.value)}")
    return int(dut.cycle.value)


@cocotb.test()
async def run_bulk(dut):
    """Clock the harness until every result is captured and dumped (skipped as a no-op when
    only the free-running rate is asked for)."""
    if os.environ.get(protocol.FREE_RUN_CYCLES):
        return
    started, cpu = time.perf_counter(), time.process_time()
    cycles = await run_harness(
        dut, max_cycles=int(os.environ[protocol.MAX_CYCLES]),
        progress=os.environ.get(protocol.PROGRESS),
        progress_cycles=int(os.environ.get(protocol.PROGRESS_CYCLES, "1024")))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    path = os.environ.get(protocol.BULK_TIMING)
    if path:
        protocol.write_timing(path, cycles=cycles, seconds=seconds, cpu_seconds=cpu,
                              rejected=int(dut.rejected.value), error=int(dut.error.value))
    dut._log.info("harness done: %d cycles in %.3f s", cycles, seconds)


@cocotb.test()
async def free_run(dut):
    """Clock only, no Python per cycle and no stimulus: the build's free-running rate.

    Runs when ``SYSTOLICA_FREE_RUN_CYCLES`` is set (``make bench``) and writes
    the timing file (:func:`~systolica.tb.protocol.write_timing`) named by
    ``SYSTOLICA_BULK_TIMING``.
    """
    cycles = int(os.environ.get(protocol.FREE_RUN_CYCLES, "0"))
    if not cycles:
        return
    Clock(dut.clk, 10, unit="ns", impl="gpi").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    started, cpu = time.perf_counter(), time.process_time()
    await Timer(cycles * 10, unit="ns")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    protocol.write_timing(os.environ[protocol.BULK_TIMING], cycles=cycles, seconds=seconds,
                          cpu_seconds=cpu)
