"""Run a matmul program from a file and write the RTL's results back (for ``systolica.sim``).

Environment:

- ``SYSTOLICA_PROGRAM``: ``.npz`` with ``count`` and, for each matmul ``i``: ``stationary_i``
  [K, M] and ``moving_i`` [K, N] (int8, or BF16 as uint16 bit patterns), ``bf16_i``,
  ``accumulate_i`` and ``ftz_i`` flags; optional ``idle`` and ``backpressure`` floats.
- ``SYSTOLICA_RESULTS``: ``.npz`` written here: ``psum_i`` ([M, N] int32 or float32),
  ``first_accept`` and ``last_result`` (cycle stamps per matmul), ``cycles`` (first cycle
  after reset to the last result, inclusive), ``seconds`` (wall time of that clock loop),
  ``mismatches``, ``expected_beats``, ``observed_beats``.
"""

import os
import time

import cocotb
import numpy as np

from .stimulus import from_bits
from .tile_tb import TileTB


def _operands(program, i):
    stationary, moving = program[f"stationary_{i}"], program[f"moving_{i}"]
    if bool(program[f"bf16_{i}"]):
        return from_bits(stationary), from_bits(moving)
    return stationary, moving


@cocotb.test()
async def run_program(dut):
    """Run every matmul of the program, check it on the scoreboard, save the results."""
    program = np.load(os.environ["SYSTOLICA_PROGRAM"])
    idle = float(program["idle"]) if "idle" in program else 0.0
    backpressure = float(program["backpressure"]) if "backpressure" in program else 0.0
    tb = TileTB(dut, seed=cocotb.RANDOM_SEED, idle=idle, backpressure=backpressure)
    await tb.start()
    records = [tb.submit(*_operands(program, i), accumulate=bool(program[f"accumulate_{i}"]),
                         ftz=bool(program[f"ftz_{i}"]))
               for i in range(int(program["count"]))]
    start = tb.cycle
    started = time.perf_counter()
    try:
        await tb.run()
    finally:
        out = {f"psum_{r.index}": tb.results(r) for r in records if len(r.results) == r.n}
        out.update(
            first_accept=np.array([r.first_accept if r.first_accept is not None else -1
                                   for r in records]),
            last_result=np.array([r.last_result if r.last_result is not None else -1
                                  for r in records]),
            cycles=np.int64(tb.finished - start),
            seconds=np.float64(time.perf_counter() - started),
            mismatches=np.int64(len(tb.scoreboard.mismatches)),
            expected_beats=np.int64(tb.scoreboard.expected_count),
            observed_beats=np.int64(tb.scoreboard.observed_count),
        )
        np.savez(os.environ["SYSTOLICA_RESULTS"], **out)
    tb.check()
