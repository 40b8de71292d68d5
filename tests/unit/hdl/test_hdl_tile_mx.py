"""Unit tier: MX matmuls through a tile generated with the ``mx`` type set (amaranth.sim)
against the golden ``nc_matmul_mx`` and the cycle model: x4 stationary and moving words with
their E8M0 scales in the streams, MXFP8 of both element types and mixed, MXFP4 on either
side (converted to e4m3fn in front of the array), accumulation into PSUM, a row tile, extreme
and NaN scales, BF16 PSUM writes (RNE, overwrite and accumulate), and an ordinary FP8 matmul
on the same lanes between MX ones; every result word and every stamp."""

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import Command, command_error, command_schedule
from systolica.golden.mx import nc_matmul_mx, pack_x4
from systolica.hdl import Tile, command_layout, moving_layout, stationary_layout
from systolica.hdl.config import TileConfig
from systolica.hdl.layouts import cell_grid
from systolica.hdl.streams import simulate, stream_sink, stream_source
from systolica.tb.model import command_beat

ROWS, COLS, BANKS, ENTRIES = 16, 2, 2, 8
E4M3FN, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)
NAME = {E4M3FN: "e4m3fn", E5M2: "e5m2", E2M1: "e4m3fn"}


def elements(rng, dtype, shape):
    """Random finite elements of an MX type, [P, F, 4] (NaN / Inf codes drawn again)."""
    codes = rng.integers(0, 16 if dtype == E2M1 else 256, shape).astype(np.uint8)
    values = codes.view(dtype)
    bad = ~np.isfinite(values.astype(np.float32))
    codes[bad] &= 0xBF                  # clears the top exponent bit: finite in both types
    return codes.view(dtype)


class MxMatmul:
    """One MX matmul of a program: operands, scales and its command."""

    def __init__(self, stationary, moving, s_scale, m_scale, **fields):
        self.stationary, self.moving = stationary, moving
        self.s_scale, self.m_scale = np.asarray(s_scale, np.uint8), np.asarray(m_scale, np.uint8)
        p, m = stationary.shape[:2]
        n = moving.shape[1]
        self.command = Command("matmul", k=p, m=m, n=n, dtype=NAME[stationary.dtype],
                               moving_dtype=NAME[moving.dtype], mx=True,
                               fp4=(stationary.dtype == E2M1, moving.dtype == E2M1), **fields)

    def stationary_beats(self, cols):
        words = pack_x4(self.stationary).astype(np.uint32)
        scales = np.repeat(self.s_scale, 8, axis=0)
        pad = cols - words.shape[1]
        return [{"data": [int(v) for v in row] + [0] * pad,
                 "scale": [int(v) for v in srow] + [0] * pad}
                for row, srow in zip(words, scales, strict=True)]

    def moving_beats(self, rows):
        words = pack_x4(self.moving).astype(np.uint32)
        scales = np.repeat(self.m_scale, 8, axis=0)
        row0 = self.command.first_row
        out = []
        for n in range(words.shape[1]):
            data, scale = [0] * rows, [0] * rows
            data[row0:row0 + words.shape[0]] = [int(v) for v in words[:, n]]
            scale[row0:row0 + words.shape[0]] = [int(v) for v in scales[:, n]]
            out.append({"data": data, "scale": scale})
        return out


def row_cells(command, rows):
    """The moving beat's ``groups``: the row cells of the command's tile."""
    count, grain = cell_grid(rows)
    first, size = (command.tile_position[0], command.tile_size[0]) if command.tile_size else (
        0, rows)
    return sum(1 << g for g in range(count) if first <= g * grain < first + size)


def run(program, *, config=None, result_ready=lambda cycle: True):
    """Run ``program`` (MxMatmul, or (Command, stationary [K, cols] uint8 codes, moving [K, N]
    codes) for an ordinary FP8 matmul) through an MX tile; check every result word against
    a shadow PSUM of the golden models and every stamp against ``command_schedule``."""
    config = config or TileConfig(ROWS, COLS, "mx", psum_banks=BANKS, psum_entries=ENTRIES)
    rows, cols = config.rows, config.cols
    dut = Tile(config)
    s_layout = stationary_layout(cols, 32, True)
    m_layout = moving_layout(rows, 32, True)
    every_row = (1 << cell_grid(rows)[0]) - 1
    commands, s_beats, m_beats, expected = [], [], [], []
    psum = np.zeros((BANKS, ENTRIES, cols), np.float32)
    for item in program:
        if isinstance(item, MxMatmul):
            command = item.command
            s_beats += item.stationary_beats(cols)
            m_beats += [{**b, "groups": row_cells(command, rows)}
                        for b in item.moving_beats(rows)]
            stored = psum[command.bank, command.offset:command.offset + command.n, :
                          command.m].T.copy()
            bf16 = {"dst_dtype": ml_dtypes.bfloat16} if command.dst_dtype == "bf16" else {}
            if command.rounding == "stochastic":
                bf16.update(rounding="stochastic", seed=command.seed)
            out = nc_matmul_mx(item.stationary, item.moving, item.s_scale, item.m_scale,
                               psum=stored.astype(bf16.get("dst_dtype", np.float32)),
                               accumulate=command.accumulate, rows=rows,
                               **bf16).astype(np.float32)
        else:
            from systolica.golden import nc_matmul
            command, stationary, moving = item
            s_beats += [{"data": [int(v) for v in row] + [0] * (cols - command.m),
                         "scale": [0] * cols} for row in stationary]
            m_beats += [{"data": [int(v) for v in moving[:, n]] + [0] * (rows - command.k),
                         "scale": [0] * rows, "groups": every_row} for n in range(command.n)]
            out = nc_matmul(stationary.view(E4M3FN), moving.view(E5M2))
        assert command_error(command, rows=rows, cols=cols, banks=BANKS, entries=ENTRIES,
                             dtypes=config.dtypes, mx=True) is None, command
        commands.append(command)
        psum[command.bank, command.offset:command.offset + command.n, :command.m] = out.T
        block = psum[command.bank, command.offset:command.offset + command.n].copy()
        expected.append(block.view(np.uint32))
    stamps = {"command": [], "stationary": [], "moving": [], "result": []}
    beats = []
    total = sum(c.n for c in commands)
    collect = stream_sink(dut.result, total, beats, cycles=stamps["result"],
                          ready=result_ready, max_cycles=5000)
    sources = [stream_source(dut.command, [command_layout().const(command_beat(c))
                                           for c in commands], cycles=stamps["command"]),
               stream_source(dut.stationary, [s_layout.const(b) for b in s_beats],
                             cycles=stamps["stationary"]),
               stream_source(dut.moving, [m_layout.const(b) for b in m_beats],
                             cycles=stamps["moving"])]
    simulate(dut, collect, background=sources)
    got = np.array([[int(v) for v in beat.data] for beat in beats], np.uint32)
    want = np.concatenate(expected)
    assert (got == want).all(), (got, want)
    schedule = command_schedule(rows, cols, commands, banks=BANKS, entries=ENTRIES,
                                dtypes=config.dtypes, mx=True)
    assert stamps["command"] == [t.accept for t in schedule]
    assert stamps["stationary"] == [c for t in schedule for c in t.loads]
    assert stamps["moving"] == [c for t in schedule for c in t.issues]
    assert stamps["result"] == [c for t in schedule for c in t.results]
    return got


@pytest.mark.parametrize(("sdtype", "mdtype"), [(E4M3FN, E5M2), (E5M2, E4M3FN), (E2M1, E5M2),
                                                (E4M3FN, E2M1), (E2M1, E2M1)])
def test_mx_matmuls_are_bit_exact_and_on_time(sdtype, mdtype):
    """Two back-to-back MX matmuls of two scale groups (K = 64), then one accumulating into
    the first's region: every word equals ``nc_matmul_mx``, every stamp the cycle model's
    (an MX matmul loads and issues like any other: K beats, N beats)."""
    rng = np.random.default_rng(hash((sdtype.name, mdtype.name)) & 0xFFFF)

    def mx(p, m, n, **fields):
        return MxMatmul(elements(rng, sdtype, (p, m, 4)), elements(rng, mdtype, (p, n, 4)),
                        rng.integers(110, 140, (p // 8, m)), rng.integers(110, 140, (p // 8, n)),
                        **fields)
    run([mx(16, 2, 3), mx(8, 1, 4, bank=1, offset=2), mx(16, 2, 3, accumulate=True)])


def test_extreme_and_nan_scales_and_a_row_tile():
    """Scales 0 and 254 (products leave the normal range: subnormal and Inf) and the NaN
    scale 0xFF in one group; an MX matmul in the lower row tile (8 rows)."""
    rng = np.random.default_rng(5)
    s, v = elements(rng, E4M3FN, (16, 2, 4)), elements(rng, E5M2, (16, 3, 4))
    s_scale = np.array([[0, 254], [127, 0xFF]])
    m_scale = np.array([[0, 127, 254], [127, 100, 127]])
    tiled = MxMatmul(elements(rng, E5M2, (8, 2, 4)), elements(rng, E2M1, (8, 2, 4)),
                     [[120, 135]], [[130, 126]], tile_position=(8, 0), tile_size=(8, COLS),
                     bank=1)
    got = run([MxMatmul(s, v, s_scale, m_scale), tiled])
    assert (got[:3] == 0x7FC00000).any()            # the NaN scale's column


def test_an_fp8_matmul_between_mx_ones_is_unchanged():
    """An ordinary e4m3fn x e5m2 matmul (one element per lane, no scale) between two MX
    matmuls: the mx bit and the scales leave it alone."""
    rng = np.random.default_rng(9)

    def mx():
        return MxMatmul(elements(rng, E4M3FN, (8, 2, 4)), elements(rng, E5M2, (8, 2, 4)),
                        [[127, 128]], [[126, 127]])
    s = elements(rng, E4M3FN, (4, 2, 1))[..., 0].view(np.uint8)
    v = elements(rng, E5M2, (4, 3, 1))[..., 0].view(np.uint8)
    fp8 = (Command("matmul", k=4, m=2, n=3, dtype="e4m3fn", moving_dtype="e5m2", bank=1),
           s, v)
    run([mx(), fp8, mx()])


def test_bf16_psum_writes_round_to_nearest_even():
    """BF16 destinations: an overwrite, then an FP32 MX matmul, then a BF16 accumulation into
    the first's region (the stored BF16 word upcast, added, rounded again), the words'
    low halves zero; ties and overflow come from the wide scale range."""
    rng = np.random.default_rng(13)

    def mx(**fields):
        return MxMatmul(elements(rng, E4M3FN, (16, 2, 4)), elements(rng, E5M2, (16, 3, 4)),
                        rng.integers(100, 160, (2, 2)), rng.integers(100, 160, (2, 3)),
                        **fields)
    got = run([mx(dst_dtype="bf16"), mx(bank=1), mx(dst_dtype="bf16", accumulate=True)])
    assert (got[[0, 1, 2, 6, 7, 8]] & 0xFFFF == 0).all() and (got[3:6] & 0xFFFF != 0).any()


def test_stochastic_bf16_writes_follow_the_seeded_generators():
    """Stochastic BF16 writes: one XORWOW generator per PSUM partition, started from the
    command's seed at its first column and advanced once per element (golden
    ``round_to_bf16(..., "stochastic", seed)``), overwrite and accumulate, a second
    command restarting from its own seed, an RNE write between them."""
    rng = np.random.default_rng(17)

    def mx(**fields):
        return MxMatmul(elements(rng, E4M3FN, (16, 2, 4)), elements(rng, E5M2, (16, 5, 4)),
                        rng.integers(100, 160, (2, 2)), rng.integers(100, 160, (2, 5)),
                        dst_dtype="bf16", **fields)
    got = run([mx(rounding="stochastic", seed=0xDEADBEEF), mx(bank=1),
               mx(rounding="stochastic", seed=7, accumulate=True),
               mx(rounding="stochastic", seed=0, bank=1)])
    assert (got & 0xFFFF == 0).all()
