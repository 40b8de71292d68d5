"""Unit tier: the tile in Amaranth's own simulator against the golden model and cycle model.

Drivers offer every beat as soon as the previous one is taken, and every transfer is
stamped, so the cycle model's stamps (including with result backpressure) are compared
exactly, as well as every result word.
"""

import re

import numpy as np
import pytest

from systolica.golden import Command, command_error, command_schedule, nc_matmul
from systolica.hdl import (
    ErrorCode,
    Tile,
    command_layout,
    moving_layout,
    stationary_layout,
)
from systolica.hdl.config import TileConfig
from systolica.hdl.layouts import cell_grid
from systolica.hdl.streams import simulate, stream_sink, stream_source
from systolica.tb.model import command_beat


def run_tile(rows, cols, program, *, banks=2, entries=16, result_ready=lambda cycle: True,
             max_cycles=5000, block=None, rejections=None):
    """Run ``program`` (list of (Command, stationary [K, cols] int8 or None, moving [K, N] or
    None)) through a Tile in amaranth.sim. Operands of rejected commands are not sent.

    Every command uses the whole array: its moving beats name every row cell, its result
    beats (every column cell) carry ``last`` in every cell or none.

    Returns (results, stamps, status): result words per command (uint32 [N, cols]), the
    transfer cycles of every stream (dict of lists) and the final (rejected, error). With
    ``rejections`` (a list), every change of the rejected count is appended to it as
    ``(rejected, error)``, the error code as the status port showed it then.
    """
    dut = Tile(TileConfig(rows, cols, psum_banks=banks, psum_entries=entries), block=block)
    s_layout, m_layout = stationary_layout(cols), moving_layout(rows)
    row_cells = (1 << cell_grid(rows)[0]) - 1      # every row cell
    legal = [command_error(c, rows=rows, cols=cols, banks=banks, entries=entries) is None
             for c, _, _ in program]
    s_beats, m_beats = [], []
    for (command, stationary, moving), ok in zip(program, legal, strict=True):
        if ok and command.op == "matmul":
            s_beats += [[int(v) & 0xFF for v in row] for row in stationary]
            m_beats += [[int(v) & 0xFF for v in moving[:, c]] + [0] * (rows - command.k)
                        for c in range(command.n)]
    expected_beats = sum(c.n for (c, _, _), ok in zip(program, legal, strict=True) if ok)
    stamps = {"command": [], "stationary": [], "moving": [], "result": []}
    beats, status = [], []
    collect = stream_sink(dut.result, expected_beats, beats, cycles=stamps["result"],
                          ready=result_ready, max_cycles=max_cycles)

    async def monitor(ctx):
        await collect(ctx)
        for _ in range(rows + cols + 4):   # an extra beat would show up here
            ctx.set(dut.result.ready, 1)
            _, _, valid = await ctx.tick().sample(dut.result.valid)
            assert not valid, "tile sent more result beats than the commands ask for"
        status.extend([ctx.get(dut.status.rejected), ctx.get(dut.status.error)])

    async def watch_status(ctx):
        seen = 0
        async for _, _, rejected, error in ctx.tick().sample(dut.status.rejected,
                                                             dut.status.error):
            if rejected != seen:
                rejections.append((rejected, error))
                seen = rejected

    sources = [stream_source(dut.command, [command_layout().const(command_beat(c))
                                           for c, _, _ in program], cycles=stamps["command"]),
               stream_source(dut.stationary, [s_layout.const({"data": b}) for b in s_beats],
                             cycles=stamps["stationary"]),
               stream_source(dut.moving, [m_layout.const({"data": b, "groups": row_cells})
                                          for b in m_beats], cycles=stamps["moving"])]
    if rejections is not None:
        sources.append(watch_status)
    simulate(dut, monitor, background=sources)
    every = (1 << cell_grid(cols)[0]) - 1      # all column cells
    assert all(int(beat.groups) == every for beat in beats)
    words = [[int(v) for v in beat.data] + [{0: 0, every: 1}.get(int(beat.last), -1)]
             for beat in beats]
    results, position = [], 0
    for (command, _, _), ok in zip(program, legal, strict=True):
        if ok:
            block = words[position:position + command.n]
            assert [w[-1] for w in block] == [0] * (command.n - 1) + [1], "last flags"
            results.append(np.array([w[:-1] for w in block], dtype=np.uint32))
            position += command.n
        else:
            results.append(None)
    return results, stamps, status


def expected_stamps(schedule):
    """The cycle model's stamps in the layout run_tile measures."""
    out = {"command": [t.accept for t in schedule], "stationary": [], "moving": [],
           "result": []}
    for t in schedule:
        if t.error is None:
            if t.loads:
                out["stationary"] += list(t.loads)
                out["moving"] += list(t.issues)
            out["result"] += list(t.results)
    return out


def matmul(rng, k, m, n, cols, **fields):
    stationary = np.zeros((k, cols), np.int8)
    stationary[:, :m] = rng.integers(-128, 128, size=(k, m), dtype=np.int8)
    moving = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    return Command("matmul", k=k, m=m, n=n, **fields), stationary, moving


def golden_psum(rows, cols, program, banks, entries):
    """Expected result words per command (uint32 [N, cols]) from a shadow PSUM."""
    psum = np.zeros((banks, entries, cols), np.int64)
    out = []
    for command, stationary, moving in program:
        if command_error(command, rows=rows, cols=cols, banks=banks, entries=entries):
            out.append(None)
            continue
        region = slice(command.offset, command.offset + command.n)
        if command.op == "matmul":
            masked = stationary.copy()
            masked[:, command.m:] = 0
            old = psum[command.bank, region].T.astype(np.int32)
            if command.is_transpose:
                new = nc_matmul(masked, moving, rows=cols, is_transpose=True).view(np.uint16)
            else:
                new = nc_matmul(masked, moving, psum=old, accumulate=command.accumulate)
            psum[command.bank, region] = new.T
        out.append(psum[command.bank, region].astype(np.int32).view(np.uint32)
                   .astype(np.uint32))
    return out


def check(rows, cols, program, banks=2, entries=16, result_ready=None, block=None,
          rejections=None):
    results, stamps, status = run_tile(rows, cols, program, banks=banks, entries=entries,
                                       block=block, rejections=rejections,
                                       **({} if result_ready is None
                                          else {"result_ready": result_ready}))
    for got, want in zip(results, golden_psum(rows, cols, program, banks, entries),
                         strict=True):
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want)
    schedule = command_schedule(rows, cols, [c for c, _, _ in program], banks=banks,
                                entries=entries, result_ready=result_ready)
    assert stamps == expected_stamps(schedule)
    return schedule, status


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (3, 2), (4, 4)])
def test_matmuls_match_golden_and_cycle_model(rows, cols):
    rng = np.random.default_rng(rows * 10 + cols)
    program = [matmul(rng, rows, cols, 5, cols),
               matmul(rng, max(1, rows - 1), cols, 3, cols, bank=1, offset=4),
               matmul(rng, rows, max(1, cols - 1), 1, cols, offset=2)]
    check(rows, cols, program)


@pytest.mark.parametrize("rows,cols,block", [(4, 4, 2), (4, 2, 2), (2, 4, 1)])
def test_array_built_from_blocks_matches_golden_and_cycle_model(rows, cols, block):
    """A grid of B x B sub-arrays (how large tiles are verilated) is the same tile."""
    rng = np.random.default_rng(rows * 100 + cols * 10 + block)
    program = [matmul(rng, rows, cols, 5, cols),
               matmul(rng, rows - 1, cols, 3, cols, bank=1, offset=4),
               matmul(rng, rows, cols - 1, 2, cols, offset=2, accumulate=True),
               (Command("read", n=6), None, None)]
    check(rows, cols, program, block=block)


def selector(rng, k, n):
    """A transpose's moving [K, N] int8: one 1 per column, in a random row."""
    moving = np.zeros((k, n), np.int8)
    moving[rng.integers(0, k, size=n), np.arange(n)] = 1
    return moving


@pytest.mark.parametrize("block", [None, 2])
def test_transpose_passes_stationary_rows_unchanged_between_matmuls(block):
    """Transposes (random selectors, K < rows, M < cols) among accumulating matmuls and
    READs: every word and stamp as golden and the cycle model; -128 and other extremes come
    out as their 8 bits with the upper bits zero."""
    rng = np.random.default_rng(25)
    edges = np.array([[-128, -1, 127, 0], [1, -127, 64, -2], [5, 6, 7, 8], [9, 10, 11, 12]],
                     np.int8)
    program = [matmul(rng, 4, 4, 5, 4),
               (Command("matmul", k=4, m=4, n=4, offset=5, is_transpose=True), edges,
                np.eye(4, dtype=np.int8)),
               (Command("matmul", k=3, m=2, n=6, bank=1, is_transpose=True),
                np.concatenate([edges[:3, :2], np.zeros((3, 2), np.int8)], axis=1),
                selector(rng, 3, 6)),
               matmul(rng, 4, 4, 5, 4, accumulate=True),
               (Command("read", n=9), None, None),
               (Command("read", bank=1, n=6), None, None)]
    check(4, 4, program, block=block)


def test_accumulate_and_read_out_regions_of_two_banks():
    rng = np.random.default_rng(5)
    program = [matmul(rng, 3, 3, 6, 3, bank=1, offset=10),
               matmul(rng, 2, 3, 6, 3, bank=1, offset=10, accumulate=True),
               matmul(rng, 3, 2, 4, 3, bank=0, offset=0),
               (Command("read", bank=1, offset=8, n=8), None, None),
               matmul(rng, 3, 3, 2, 3, bank=0, offset=1, accumulate=True),
               (Command("read", bank=0, offset=0, n=16), None, None)]
    check(3, 3, program)


def test_backpressure_keeps_every_result_and_the_stepped_model_follows_it():
    rng = np.random.default_rng(3)
    pattern = np.random.default_rng(11).random(4000) < 0.6
    program = [matmul(rng, 3, 3, 6, 3), matmul(rng, 2, 2, 4, 3, bank=1),
               (Command("read", n=6), None, None), matmul(rng, 1, 3, 1, 3, offset=15),
               matmul(rng, 3, 1, 2, 3, accumulate=True)]
    check(3, 3, program, result_ready=lambda cycle: bool(pattern[cycle]))


#: One illegal command of each kind (and of each way to be one) with the error the tile
#: must report for it, on a 4 x 3 tile of 2 banks of 16 entries.
ILLEGAL = [
    (Command("matmul", k=5, m=1, n=1), "K_RANGE"),
    (Command("matmul", k=0, m=1, n=1), "K_RANGE"),
    (Command("matmul", k=1, m=4, n=1), "M_RANGE"),
    (Command("matmul", k=1, m=0, n=1), "M_RANGE"),
    (Command("matmul", k=1, m=1, n=0), "N_RANGE"),
    (Command("matmul", k=1, m=1, n=10, offset=7), "N_RANGE"),
    (Command("read", n=17), "N_RANGE"),
    (Command("read", n=1, bank=2), "BANK_RANGE"),
    (Command("matmul", k=9, m=9, n=99, bank=7), "BANK_RANGE"),
    (Command("matmul", k=8, m=3, n=4, dtype="bf16", perf_mode="double_row"),
     "DOUBLE_ROW_TYPE"),
    (Command("matmul", k=1, m=1, n=1, dtype="e4m3", moving_dtype="e4m3fn",
             perf_mode="double_row"), "DOUBLE_ROW_TYPE"),
    (Command("matmul", k=9, m=1, n=1, dtype="int8", perf_mode="double_row"), "K_RANGE"),
    (Command("matmul", k=2, m=1, n=1, dtype="e5m2", perf_mode="double_row", ftz=True,
             accumulate=True, is_transpose=True), "TRANSPOSE_DOUBLE_ROW"),
    (Command("matmul", k=2, m=1, n=1, dtype="bf16", ftz=True, accumulate=True,
             is_transpose=True), "TRANSPOSE_ACCUMULATE"),
    (Command("matmul", k=2, m=1, n=1, dtype="e4m3", ftz=True, is_transpose=True),
     "TRANSPOSE_FTZ"),
    (Command("matmul", k=1, m=1, n=1, tile_position=(0, 0), tile_size=(3, 3)), "TILE_SIZE"),
    (Command("matmul", k=1, m=1, n=1, tile_position=(1, 0), tile_size=(2, 3)),
     "TILE_POSITION"),
    (Command("matmul", k=3, m=1, n=1, tile_position=(2, 0), tile_size=(2, 3)),
     "TILE_K_RANGE"),
    # The NeuronCore-v4 fields on a tile without the MX datapath.
    (Command("matmul", k=4, m=1, n=1, dtype="e4m3fn", mx=True), "TYPE_NOT_BUILT"),
    (Command("matmul", k=1, m=1, n=1, dtype="e4m3fn", fp4=(False, True)), "MX_TYPE"),
    (Command("matmul", k=1, m=1, n=1, dtype="bf16", dst_dtype="bf16"), "DST_MODE"),
    (Command("matmul", k=1, m=1, n=1, dtype="bf16", rounding="stochastic", seed=7),
     "DST_MODE"),
]


def test_illegal_commands_are_rejected_with_their_errors_and_not_executed():
    """Every command of ``ILLEGAL`` in one program, each between two legal matmuls (the
    second accumulating): each is dropped, counted and named on the status port as it is
    rejected, and the legal matmuls around it run as if it had not been sent (every word and
    stamp checked). One simulation: a tile elaborated and simulated per command cost 2.5
    to 7.6 s each, by load."""
    rng = np.random.default_rng(1)
    program = [matmul(rng, 4, 3, 4, 3)]
    for command, error in ILLEGAL:
        assert command_error(command, rows=4, cols=3, banks=2, entries=16) == error
        program += [(command, None, None), matmul(rng, 4, 3, 4, 3, accumulate=True)]
    rejections = []
    schedule, status = check(4, 3, program, rejections=rejections)
    errors = [error for _, error in ILLEGAL]
    assert [t.error for t in schedule[1::2]] == errors
    assert all(t.error is None for t in schedule[0::2])
    assert rejections == [(count, ErrorCode[error]) for count, error in
                          enumerate(errors, start=1)]
    assert status == [len(errors), ErrorCode[errors[-1]]]


def test_default_psum_geometry_is_the_neuroncore_one():
    from systolica.golden import PSUM_BANKS, PSUM_ENTRIES
    from systolica.hdl import layouts

    tile = Tile(TileConfig(2, 2))
    assert (tile.psum_banks, tile.psum_entries) == (PSUM_BANKS, PSUM_ENTRIES) == (
        layouts.PSUM_BANKS, layouts.PSUM_ENTRIES) == (8, 512)
    # The command's double_row bit is the golden Command's perf_mode, transpose its
    # is_transpose, the tile fields its tile_position and tile_size.
    tile_fields = {"tiled", "tile_row", "tile_col", "tile_rows", "tile_cols"}
    assert set(Command.__dataclass_fields__) >= (set(command_layout().members)
                                                 - {"double_row", "transpose", "dtype_hi",
                                                    "moving_dtype_hi", "bf16_out",
                                                    "stochastic"} - tile_fields
                                                 | {"perf_mode", "is_transpose",
                                                    "tile_position", "tile_size", "dst_dtype",
                                                    "rounding"})
    assert [e.name for e in ErrorCode if e.name != "NONE"] == [
        "BANK_RANGE", "K_RANGE", "M_RANGE", "N_RANGE", "DOUBLE_ROW_TYPE", "TYPE_NOT_BUILT",
        "TRANSPOSE_DOUBLE_ROW", "TRANSPOSE_ACCUMULATE", "TRANSPOSE_FTZ", "TILE_SIZE",
        "TILE_POSITION", "TILE_K_RANGE", "TILE_M_RANGE", "TILE_DOUBLE_ROW", "MX_TYPE", "MX_K",
        "MX_MODE", "MX_TILE", "DST_MODE"]


def test_tile_takes_only_a_config():
    with pytest.raises(TypeError, match="^config must be a TileConfig, not int$"):
        Tile(2)


def test_probes_are_ports_of_the_tile_components_in_the_netlist():
    """Every published probe names a port of a component the tile instances under that
    name, with that width, and the RTLIL (so the Verilog and a dump) has it there."""

    from amaranth.back import rtlil
    from amaranth.hdl import Shape

    from systolica.hdl.tile import PROBES, pe_probes, tile_probes

    config = TileConfig(2, 3, psum_banks=2, psum_entries=4)
    tile = Tile(config)
    assert list(tile.probes) == list(PROBES) and tile.probes == tile_probes(config)
    text = rtlil.convert(tile, name="top")
    wires = {}
    for module, body in re.findall(r"^module \\(\S+)\n(.*?)^end$", text, re.M | re.S):
        wires[module] = {name: int(width) for width, name in
                         re.findall(r"^\s*wire width (\d+) (?:(?:input|output) \d+ +)?\\(\S+)$",
                                    body, re.M)}
    for probe in [*tile.probes.values(), *pe_probes(1, 2).values()]:
        scope, _, port = probe.name.rpartition(".")
        if probe.width:
            assert wires[f"top.{scope}"][port] == probe.width, probe
        if probe.instance in tile._components:
            component = tile._components[probe.instance]
            signal = component
            for name in probe.port:
                signal = getattr(signal, name)
            assert Shape.cast(signal.shape()).width == probe.width
