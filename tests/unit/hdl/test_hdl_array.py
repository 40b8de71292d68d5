"""Unit tier: the PE grid (:class:`systolica.hdl.SystolicArray`): its parameters, and in
amaranth.sim a stationary loaded row by row and skewed moving vectors streamed through it,
flat and built from blocks, INT8 and BF16, each bottom-row word against the golden
``nc_matmul`` at the cycle the docstring gives (``rows + m`` advances after row 0's
operand entered)."""

import re

import ml_dtypes
import numpy as np
import pytest

from systolica.golden import nc_matmul
from systolica.hdl import SystolicArray
from systolica.hdl.layouts import NarrowDType
from systolica.hdl.streams import simulate


def test_init():
    array = SystolicArray(4, 2, block=2, pe_module="pe")
    assert (array.rows, array.cols, array.block, array.pe_module) == (4, 2, 2, "pe")
    assert SystolicArray(1, 1).block is None


@pytest.mark.parametrize("args,kwargs,message", [
    ((2, 2), {"pe_module": "1pe"}, "pe_module must be None or a Verilog identifier, not '1pe'"),
    ((2, 2), {"block": 2, "block_module": "a-b"},
     "block_module must be None or a Verilog identifier, not 'a-b'"),
    ((4, 6), {"block": 4}, "block must be a power of two dividing rows = 4 and cols = 6, not 4"),
    ((6, 6), {"block": 3}, "block must be a power of two dividing rows = 6 and cols = 6, not 3"),
    ((2, 2), {"block": 0}, "block must be a power of two dividing rows = 2 and cols = 2, not 0"),
    ((2, 2), {"block_module": "blk"}, "block_module needs block (the side of the sub-arrays)"),
    ((4, 4), {"block": 2, "edge_registers": True},
     "edge_registers is for a flat grid (a sub-array), not with block"),
])
def test_init_wrong_parameters(args, kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        SystolicArray(*args, **kwargs)


def _operands(rng, dtype, shape):
    if dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.normal(0, 4, shape).astype(ml_dtypes.bfloat16)


def _bits(values):
    return values.view(np.uint8 if values.dtype == np.int8 else np.uint16).astype(int)


@pytest.mark.parametrize("rows,cols,block,k,dtype", [
    (3, 2, None, 3, "int8"), (3, 2, None, 2, "bf16"), (4, 2, 2, 4, "bf16")])
def test_sim_weight_stationary_matmul(rows, cols, block, k, dtype):
    rng = np.random.default_rng(rows * 10 + k)
    n = 4
    stationary = _operands(rng, dtype, (k, cols))
    moving = _operands(rng, dtype, (k, n))
    if dtype != "int8":
        # Column 0 of beat 0: every product -0, so the sum is -0 only if row 0 starts the
        # chain with its product (chain_start) instead of adding it to +0.
        stationary[:, 0] = -abs(stationary[:, 0])
        moving[:, 0] = 0
    s_bits, m_bits = _bits(stationary), _bits(moving)
    code = NarrowDType[dtype.upper()].value     # 16-bit lanes carry 3-bit type codes
    dut = SystolicArray(rows, cols, block=block)

    def lane(cycle, r):     # row r carries beat cycle - k - r (skewed)
        beat = cycle - k - r
        live = 0 <= beat < n and r < k
        return {"value": int(m_bits[r, beat]) if live else 0, "sel": 0, "active": int(live),
                "hi": 0, "stype": code if cycle >= k else 0,
                "mtype": code if cycle >= k else 0, "ftz": 0}

    got = _stream(dut, k, n, lane, lambda row, c: {"value": int(s_bits[row, c])})
    want = nc_matmul(stationary, moving)
    want_bits = want.view(np.uint32)
    for m in range(cols):
        for beat in range(n):
            assert got[m][beat] == int(want_bits[m, beat]), (m, beat, hex(got[m][beat]),
                                                             want[m, beat])


def _stream(dut, k, n, lane, load):
    """Run ``dut`` (a SystolicArray) as the array docstring describes: stationary rows
    ``0 .. k - 1`` into buffer 0 of every column, one a cycle (``load(row, c)``: the load
    lane's ``value`` and any other fields), while ``lane(cycle, r)`` drives partition row
    r's skewed moving lane (row 0's first operand at cycle ``k``). Returns the bottom-row
    word of column m for beat t, read ``rows + m`` advances after row 0's operand entered,
    as ``[m][t]`` (lists of int)."""
    rows, cols = dut.rows, dut.cols
    seen = {}

    def drive(ctx, cycle):  # a blocked array reads the lanes one advance early
        for r in range(rows):
            ctx.set(dut.moving[r], lane(cycle, r))
            ctx.set(dut.moving_next[r], lane(cycle + 1, r))

    async def bench(ctx):
        ctx.set(dut.en, 1)
        ctx.set(dut.chain_start, 1)
        for row in range(k):
            for c in range(cols):
                ctx.set(dut.load[c], {"valid": 1, "row": row, "buf": 0, **load(row, c)})
            drive(ctx, row)
            await ctx.tick()
        for c in range(cols):
            ctx.set(dut.load[c].valid, 0)
        for cycle in range(k, k + n + rows + cols):
            drive(ctx, cycle)
            seen[cycle] = [int(v) for v in ctx.get(dut.psum)]
            await ctx.tick()

    simulate(dut, bench)
    return [[seen[k + beat + rows + m][m] for beat in range(n)] for m in range(cols)]


@pytest.mark.parametrize("block", [None, 2])
def test_mx_array_streams_x4_words_and_block_scales(block):
    """An MX array (``mx=True``, PEs with the MX option): x4 stationary words and their
    scales loaded through the load lanes, skewed x4 moving words with their scales and the
    ``mx`` bit through the moving lanes, each bottom-row word equal to the golden
    ``nc_matmul_mx`` (K = 64: 16 partitions, two scale groups)."""
    from systolica.golden.mx import nc_matmul_mx
    from systolica.hdl import DType, ProcessingElement

    rows, cols, n = 16, 2, 3
    e4m3fn, e5m2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
    rng = np.random.default_rng(21)

    def codes(dtype, shape):      # finite codes (NaN / Inf codes' top exponent bit cleared)
        c = rng.integers(0, 256, shape).astype(np.uint8)
        c[~np.isfinite(c.view(dtype).astype(np.float32))] &= 0xBF
        return c

    stationary, moving = codes(e4m3fn, (rows, cols, 4)), codes(e5m2, (rows, n, 4))
    s_scale = rng.integers(115, 140, (rows // 8, cols)).astype(np.uint8)
    m_scale = rng.integers(115, 140, (rows // 8, n)).astype(np.uint8)
    lanes = np.uint32(1) << (8 * np.arange(4, dtype=np.uint32))

    def words(c):
        return (c.astype(np.uint32) * lanes).sum(-1)
    s_words, m_words = words(stationary), words(moving)
    dut = SystolicArray(rows, cols, block=block, width=32, mx=True,
                        pe=lambda: ProcessingElement(mx=True))

    def lane(cycle, r):     # row r carries beat cycle - rows - r (skewed)
        beat = cycle - rows - r
        live = 0 <= beat < n
        return {"value": int(m_words[r, beat]) if live else 0, "sel": 0, "active": int(live),
                "stype": DType.E4M3FN.value, "mtype": DType.E5M2.value, "mx": int(live),
                "scale": int(m_scale[r // 8, beat]) if live else 0}

    got = np.array(_stream(dut, rows, n, lane,
                           lambda row, c: {"value": int(s_words[row, c]),
                                           "scale": int(s_scale[row // 8, c])}),
                   dtype=np.uint32)
    want = nc_matmul_mx(stationary.view(e4m3fn), moving.view(e5m2), s_scale,
                        m_scale).view(np.uint32)
    assert (got == want).all(), (got, want)
    assert len(set(want.reshape(-1).tolist())) == cols * n      # distinct sums
