"""Unit tier: the processing element in Amaranth's simulator."""

from amaranth.sim import Simulator

from systolica.hdl import ProcessingElement


def simulate(bench):
    dut = ProcessingElement()
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def testbench(ctx):
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    sim.run()


async def load(ctx, dut, buf, value):
    ctx.set(dut.load_en, 1)
    ctx.set(dut.load_buf, buf)
    ctx.set(dut.load_data, value)
    await ctx.tick()
    ctx.set(dut.load_en, 0)


def test_mac_uses_selected_weight_and_wraps():
    async def bench(ctx, dut):
        await load(ctx, dut, 0, -128)
        await load(ctx, dut, 1, 7)
        ctx.set(dut.row_active, 0b11)
        ctx.set(dut.en, 1)
        ctx.set(dut.moving_in, -128)
        ctx.set(dut.psum_in, 2**31 - 1)   # + 16384 wraps past INT32_MAX
        ctx.set(dut.sel_in, 0)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 2**31 - 1 + 16384 - 2**32
        assert ctx.get(dut.moving_out) == -128
        ctx.set(dut.sel_in, 1)
        ctx.set(dut.psum_in, -5)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == -5 + 7 * -128
        assert ctx.get(dut.sel_out) == 1
    simulate(bench)


def test_inactive_row_passes_psum_through():
    async def bench(ctx, dut):
        await load(ctx, dut, 1, 99)
        ctx.set(dut.row_active, 0b01)   # buffer 1 inactive
        ctx.set(dut.en, 1)
        ctx.set(dut.sel_in, 1)
        ctx.set(dut.moving_in, 3)
        ctx.set(dut.psum_in, 1234)
        await ctx.tick()
        assert ctx.get(dut.psum_out) == 1234
    simulate(bench)


def test_disabled_pe_holds_but_still_loads():
    async def bench(ctx, dut):
        ctx.set(dut.row_active, 0b11)
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
