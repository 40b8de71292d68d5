"""Run a command program from a file and write the RTL's results back (for
:func:`systolica.sim.run_program`'s per-cycle path).

The host names the program file in ``$SYSTOLICA_PROGRAM`` and the results file in
``$SYSTOLICA_RESULTS``; both schemas are :mod:`systolica.tb.protocol`'s
(:func:`~systolica.tb.protocol.write_program`, :func:`~systolica.tb.protocol.write_results`).
"""

import os
import time

import cocotb

from systolica.golden import format_of
from systolica.golden.mx import MX_TYPES

from .. import protocol
from ..tile_tb import TileTB

#: MX element types by the program file's short names (``MX_TYPES``' own).
_MX_ELEMENTS = {name: dtype for dtype, (name, _, _) in MX_TYPES.items()}


@cocotb.test()
async def run_program(dut):
    """Run every command of the program (matmuls, MX matmuls, READs), check it on the
    scoreboard, save the results."""
    commands, idle, backpressure = protocol.read_program(os.environ[protocol.PROGRAM])
    tb = TileTB(dut, seed=cocotb.RANDOM_SEED, idle=idle, backpressure=backpressure,
                psum_zeroed=True)   # one program per simulation: PSUM starts at zero
    await tb.start()
    records = []
    for c in commands:
        region = {"bank": c["bank"], "offset": c["offset"]}
        if "read" in c:
            records.append(tb.read(n=c["read"], **region))
        elif c["mx"]:
            operands = (c[role].view(_MX_ELEMENTS[c[f"{role}_type"]])
                        for role in ("stationary", "moving"))
            records.append(tb.submit_mx(*operands, c["stationary_scale"], c["moving_scale"],
                                        accumulate=c["accumulate"], dst_dtype=c["dst_dtype"],
                                        rounding=c["rounding"], seed=c["seed"],
                                        tile_position=c["tile_position"],
                                        tile_size=c["tile_size"], **region))
        else:
            operands = (c[role].view(format_of(c[f"{role}_type"]).dtype)
                        for role in ("stationary", "moving"))
            records.append(tb.submit(*operands, accumulate=c["accumulate"], ftz=c["ftz"],
                                     perf_mode=c["perf_mode"],
                                     is_transpose=c["is_transpose"],
                                     tile_position=c["tile_position"],
                                     tile_size=c["tile_size"], **region))
    start = tb.cycle
    started = time.perf_counter()
    try:
        await tb.run()
    finally:
        protocol.write_results(
            os.environ[protocol.RESULTS],
            psums={r.index: tb.results(r) for r in records if len(r.results) == r.n},
            issues=[r.issues for r in records], results=[r.result_cycles for r in records],
            accept=[-1 if r.accept is None else r.accept for r in records],
            cycles=tb.finished - start, seconds=time.perf_counter() - started,
            mismatches=len(tb.scoreboard.mismatches),
            expected_beats=tb.scoreboard.expected_count,
            observed_beats=tb.scoreboard.observed_count)
    tb.check()
