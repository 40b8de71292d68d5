"""Run a command program from a file and write the RTL's results back (for ``systolica.sim``).

Environment:

- ``SYSTOLICA_PROGRAM``: ``.npz`` with ``count`` and, for each command ``i``: ``bank_i``
  and ``offset_i``; for a READ, ``read_i`` (entries to read); for a matmul,
  ``stationary_i`` [K, M] and ``moving_i`` [K, N] (bit patterns as uint8 / uint16),
  ``stationary_type_i`` and ``moving_type_i`` (short type names, ``"int8"``, ``"e4m3"``),
  optional ``perf_mode_i``, ``accumulate_i`` and ``ftz_i`` flags; optional ``idle`` and
  ``backpressure``.
- ``SYSTOLICA_RESULTS``: ``.npz`` written here: ``psum_i`` (int32 or float32), ``accept``
  (command accept cycle per command), ``issues_i`` and ``results_i`` (moving-beat and
  result-beat cycles), ``cycles`` (first cycle after reset to the last result, inclusive),
  ``seconds`` (wall time of that clock loop), ``mismatches``, ``expected_beats``,
  ``observed_beats``.
"""

import os
import time

import cocotb
import numpy as np

from systolica.golden import FORMATS

from .tile_tb import TileTB


def _operands(program, i):
    return tuple(program[f"{role}_{i}"].view(FORMATS[str(program[f"{role}_type_{i}"])].dtype)
                 for role in ("stationary", "moving"))


@cocotb.test()
async def run_program(dut):
    """Run every matmul of the program, check it on the scoreboard, save the results."""
    program = np.load(os.environ["SYSTOLICA_PROGRAM"])
    idle = float(program["idle"]) if "idle" in program else 0.0
    backpressure = float(program["backpressure"]) if "backpressure" in program else 0.0
    tb = TileTB(dut, seed=cocotb.RANDOM_SEED, idle=idle, backpressure=backpressure,
                psum_zeroed=True)   # one program per simulation: PSUM starts at zero
    await tb.start()
    records = []
    for i in range(int(program["count"])):
        region = {"bank": int(program[f"bank_{i}"]), "offset": int(program[f"offset_{i}"])}
        if f"read_{i}" in program:
            records.append(tb.read(n=int(program[f"read_{i}"]), **region))
        else:
            records.append(tb.submit(*_operands(program, i),
                                     accumulate=bool(program[f"accumulate_{i}"]),
                                     ftz=bool(program[f"ftz_{i}"]),
                                     perf_mode=(str(program[f"perf_mode_{i}"])
                                                if f"perf_mode_{i}" in program else None),
                                     **region))
    start = tb.cycle
    started = time.perf_counter()
    try:
        await tb.run()
    finally:
        out = {f"psum_{r.index}": tb.results(r) for r in records if len(r.results) == r.n}
        for r in records:
            out[f"issues_{r.index}"] = np.array(r.issues, dtype=np.int64)
            out[f"results_{r.index}"] = np.array(r.result_cycles, dtype=np.int64)
        out.update(
            accept=np.array([-1 if r.accept is None else r.accept for r in records]),
            cycles=np.int64(tb.finished - start),
            seconds=np.float64(time.perf_counter() - started),
            mismatches=np.int64(len(tb.scoreboard.mismatches)),
            expected_beats=np.int64(tb.scoreboard.expected_count),
            observed_beats=np.int64(tb.scoreboard.observed_count),
        )
        np.savez(os.environ["SYSTOLICA_RESULTS"], **out)
    tb.check()
