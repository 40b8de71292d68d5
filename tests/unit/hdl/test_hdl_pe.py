"""Unit tier: the processing element (:class:`systolica.hdl.ProcessingElement`): its
parameters, and in Amaranth's simulator INT8, float and double-row MACs."""

import re

import ml_dtypes
import numpy as np
import pytest

from systolica.hdl import FLOAT_FIELDS, DType, ProcessingElement, streams
from systolica.hdl.layouts import NarrowDType

MASK32 = 0xFFFFFFFF


def test_init():
    assert ProcessingElement().float_dtypes == tuple(FLOAT_FIELDS)
    pe = ProcessingElement(float_dtypes=[DType.BF16], double_row=False)
    assert pe.float_dtypes == (DType.BF16,)
    assert ProcessingElement(float_dtypes=(), double_row=False).float_dtypes == ()


@pytest.mark.parametrize("kwargs,message", [
    ({"float_dtypes": [DType.INT8]},
     "float_dtypes must be float DTypes, not [<DType.INT8: 0>]"),
    ({"float_dtypes": ["bf16"], "double_row": False},
     "float_dtypes must be float DTypes, not ['bf16']"),
    ({"float_dtypes": [DType.BF16, DType.E4M3]},
     "double_row needs E4M3 and E5M2 among float_dtypes"),
])
def test_init_wrong_float_dtypes(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ProcessingElement(**kwargs)


def simulate(bench, **kwargs):
    dut = ProcessingElement(**kwargs)

    async def testbench(ctx):
        await bench(ctx, dut)

    streams.simulate(dut, testbench)


async def load(ctx, dut, buf, value):
    ctx.set(dut.load_en, 1)
    ctx.set(dut.load_buf, buf)
    ctx.set(dut.load_data, value & 0xFFFF)
    await ctx.tick()
    ctx.set(dut.load_en, 0)


def bf16_bits(x):
    return int(np.array(x, dtype=ml_dtypes.bfloat16).view(np.uint16))


def fp32_bits(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def test_int8_mac_uses_selected_weight_and_wraps():
    async def bench(ctx, dut):
        await load(ctx, dut, 0, -128)
        await load(ctx, dut, 1, 7)
        ctx.set(dut.active_in, 1)
        ctx.set(dut.en, 1)
        ctx.set(dut.moving_in, -128 & 0xFF)
        ctx.set(dut.psum_in, 2**31 - 1)   # + 16384 wraps past INT32_MAX
        ctx.set(dut.sel_in, 0)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == (2**31 - 1 + 16384) & MASK32
        assert ctx.get(dut.moving_out) == 0x80
        ctx.set(dut.sel_in, 1)
        ctx.set(dut.psum_in, -5 & MASK32)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == (-5 + 7 * -128) & MASK32
        assert ctx.get(dut.sel_out) == 1
        # 16-bit lanes carry the type as a 3-bit code (layouts.lane_dtype)
        assert (ctx.get(dut.active_out), ctx.get(dut.stype_out)) == (1, NarrowDType.INT8.value)
    simulate(bench)


def test_chain_start_takes_the_product_alone():
    async def bench(ctx, dut):
        await load(ctx, dut, 0, bf16_bits(-0.0))
        ctx.set(dut.active_in, 1)
        ctx.set(dut.stype_in, 1)
        ctx.set(dut.mtype_in, 1)
        ctx.set(dut.chain_start, 1)
        ctx.set(dut.en, 1)
        ctx.set(dut.moving_in, bf16_bits(3.0))
        ctx.set(dut.psum_in, 0)           # +0 would turn the -0 product into +0
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 0x80000000   # -0 stays -0
        # the mode travels with the operand
        assert ctx.get(dut.stype_out) == NarrowDType.BF16.value
    simulate(bench)


def test_bf16_mac_rounds_the_sum_to_nearest_even():
    async def bench(ctx, dut):
        await load(ctx, dut, 1, bf16_bits(1.0))
        ctx.set(dut.active_in, 1)
        ctx.set(dut.stype_in, 1)
        ctx.set(dut.mtype_in, 1)
        ctx.set(dut.en, 1)
        ctx.set(dut.sel_in, 1)
        # 2**24 + 1 is a tie between 2**24 and 2**24 + 2: RNE keeps the even 2**24.
        ctx.set(dut.psum_in, fp32_bits(2.0**24))
        ctx.set(dut.moving_in, bf16_bits(1.0))
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(2.0**24)
        ctx.set(dut.psum_in, fp32_bits(2.0**24 + 2))   # odd neighbour: the tie rounds up
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(2.0**24 + 4)
    simulate(bench)


def test_inactive_row_passes_psum_through():
    async def bench(ctx, dut):
        await load(ctx, dut, 1, 99)
        ctx.set(dut.active_in, 0)       # row outside K
        ctx.set(dut.en, 1)
        ctx.set(dut.sel_in, 1)
        ctx.set(dut.moving_in, 3)
        ctx.set(dut.psum_in, 1234)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 1234
    simulate(bench)


@pytest.mark.parametrize("kwargs,kept", [({}, 0xFFFF),
                                         ({"float_dtypes": (), "double_row": False}, 0xFF)])
@pytest.mark.parametrize("stype", [DType.BF16, DType.E5M2, DType.INT8])
def test_transpose_passes_the_weight_bits_and_nothing_else(kwargs, kept, stype):
    """Transpose mode: the active row's weight bits (NaN payload, -0, subnormal), whatever
    the moving value, chain start or partial sum; an inactive row passes psum_in. A PE of
    8-bit types only passes bits [7:0]."""
    async def bench(ctx, dut):
        ctx.set(dut.en, 1)
        ctx.set(dut.transpose_in, 1)
        ctx.set(dut.stype_in, NarrowDType[stype.name].value)
        ctx.set(dut.mtype_in, NarrowDType.E4M3.value)
        for weight in (0x7F81, 0xFFC5, 0x8000, 0x0001, 0xFF80):
            await load(ctx, dut, 0, weight)
            for start, moving, psum in ((1, 0x38, 0x12345678), (0, 0x7F, 0xDEADBEEF)):
                ctx.set(dut.chain_start, start)
                ctx.set(dut.moving_in, moving)
                ctx.set(dut.psum_in, psum)
                ctx.set(dut.active_in, 1)
                await ctx.tick()
                assert ctx.get(dut.psum_out) == weight & kept
                assert ctx.get(dut.transpose_out) == 1
                ctx.set(dut.active_in, 0)
                await ctx.tick()
                assert ctx.get(dut.psum_out) == psum
    simulate(bench, **kwargs)


def test_disabled_pe_holds_but_still_loads():
    async def bench(ctx, dut):
        ctx.set(dut.active_in, 1)
        ctx.set(dut.en, 1)
        await load(ctx, dut, 0, 2)
        ctx.set(dut.moving_in, 5)
        ctx.set(dut.psum_in, 1)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 11
        ctx.set(dut.en, 0)
        ctx.set(dut.moving_in, 9)
        await load(ctx, dut, 0, 3)       # load works while the datapath holds
        assert ctx.get(dut.psum_out) == 11
        assert ctx.get(dut.moving_out) == 5
        ctx.set(dut.en, 1)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 1 + 9 * 3
    simulate(bench)


def e4m3_bits(x):
    return int(np.array(x, dtype=ml_dtypes.float8_e4m3).view(np.uint8))


def test_double_row_adds_the_second_product_after_the_first():
    async def bench(ctx, dut):
        # Low byte (k = r) 1.0 x 1.0, high byte (k = r + rows) 1.0 x 1.0 (e4m3 x e5m2).
        await load(ctx, dut, 0, e4m3_bits(1.0) | e4m3_bits(1.0) << 8)
        ctx.set(dut.active_in, 1)
        ctx.set(dut.stype_in, 3)          # E4M3
        ctx.set(dut.mtype_in, 4)          # E5M2
        ctx.set(dut.en, 1)
        one_e5m2 = int(np.array(1.0, dtype=ml_dtypes.float8_e5m2).view(np.uint8))
        ctx.set(dut.moving_in, one_e5m2 | one_e5m2 << 8)
        # (2**24 + 1) + 1: each add rounds to even, so 2**24 stays; (1 + 1) first would
        # give 2**24 + 2.
        ctx.set(dut.psum_in, fp32_bits(2.0**24))
        ctx.set(dut.hi_in, 1)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(2.0**24)
        ctx.set(dut.psum_in, fp32_bits(3.0))
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(5.0)
        ctx.set(dut.hi_in, 0)             # second element beyond K: adds nothing
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(4.0)
        ctx.set(dut.chain_start, 1)       # row 0: p0 + p1 without psum_in
        ctx.set(dut.hi_in, 1)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == fp32_bits(2.0)
    simulate(bench)
