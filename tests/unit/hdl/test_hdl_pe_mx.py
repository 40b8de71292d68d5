"""Unit tier: the PE's MX option (``ProcessingElement(mx=True)``) in Amaranth's simulator.

A column of 16 MX PEs, their partial sums chained as the array chains them, against the
golden model's ``nc_matmul_mx`` for one output element (K = 64: two scale groups of eight
partitions), bit for bit: every element-type pair (MXFP4 converted to e4m3fn in front of the
PEs, as the tile will), random and special words, random and extreme scales and NaN
scales, both stationary buffers. And the option leaves the PE's other datapaths as they were
(an x4 word with ``mx`` low is an FP8 matmul of its lane 0; FTZ does not touch MX).
"""

import ml_dtypes
import numpy as np
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from systolica.golden import nc_matmul
from systolica.golden.mx import nc_matmul_mx
from systolica.hdl import DType
from systolica.hdl.pe import MX_TRAVELLING, ProcessingElement, pe_signature, travelling

E4M3FN, E5M2, E2M1 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                      np.dtype(ml_dtypes.float4_e2m1fn))
ROWS = 16
#: FP8 codes mixed into the words: zeros, NaN / Inf, max finite, subnormals, one.
SPECIAL = {E4M3FN: [0x00, 0x80, 0x7F, 0x7E, 0xFE, 0x01, 0x07, 0x38],
           E5M2: [0x00, 0x80, 0x7C, 0xFC, 0x7D, 0x7B, 0x01, 0x03, 0x3C]}
#: The moving operand's two group scales of each trial: around 2^0, the extremes (2^-127,
#: 2^127: underflow and overflow with the stationary's), NaN (0xFF); None: the scale that
#: puts the column's sum in FP32's subnormal range (FTZ is set on odd trials and must not
#: flush an MX sum). And the special codes in each trial's moving words.
MOVING_SCALES = [(127, 127), (0, 254), (255, 127), (140, 110), (1, 127), None,
                 (254, 254), (100, 150)]
SPECIALS = [0, 1, 2, 3, 1, 0, 2, 1]


class _Column(wiring.Component):
    """``ROWS`` PEs of one array column: PE p's ``psum_next`` is PE p + 1's ``psum_in`` (the
    array registers it; the column's combinational sum is the same bits), PE 0 starts the
    chain. Every PE gets its own stationary word and scale, moving word and scale; the mode
    is shared."""

    def __init__(self, **options):
        self._options = options
        super().__init__({
            "load_en": In(1), "load_buf": In(1), "sel": In(1), "mx": In(1), "ftz": In(1),
            "stype": In(DType), "mtype": In(DType),
            "load_data": In(32).array(ROWS), "load_scale": In(8).array(ROWS),
            "moving": In(32).array(ROWS), "scale": In(8).array(ROWS),
            "psum": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        psum = 0
        for p in range(ROWS):
            pe = m.submodules[f"pe{p}"] = ProcessingElement(**self._options)
            m.d.comb += [
                pe.en.eq(1), pe.load_en.eq(self.load_en), pe.load_buf.eq(self.load_buf),
                pe.load_data.eq(self.load_data[p]), pe.chain_start.eq(p == 0),
                pe.moving_in.eq(self.moving[p]), pe.sel_in.eq(self.sel),
                pe.active_in.eq(1), pe.stype_in.eq(self.stype), pe.mtype_in.eq(self.mtype),
                pe.ftz_in.eq(self.ftz), pe.psum_in.eq(psum),
            ]
            if pe.has_mx:
                m.d.comb += [pe.load_scale.eq(self.load_scale[p]), pe.mx_in.eq(self.mx),
                             pe.scale_in.eq(self.scale[p])]
            psum = pe.psum_next
        m.d.comb += self.psum.eq(psum)
        return m


def _run(dut, steps):
    """Run ``steps`` in order on one simulation of ``dut``: ``("load", values)`` writes the
    stationary registers on a clock edge, ``("read", values)`` drives ``values`` (port ->
    int, or a per-PE list) and reads ``psum``. Returns the reads (list of int)."""
    got = []

    def drive(ctx, values):
        for name, value in values.items():
            port = getattr(dut, name)
            if isinstance(value, (list, np.ndarray)):
                for p, v in enumerate(value):
                    ctx.set(port[p], int(v))
            else:
                ctx.set(port, int(value))

    async def bench(ctx):
        for kind, values in steps:
            if kind == "load":
                drive(ctx, {**values, "load_en": 1})
                await ctx.tick()
                ctx.set(dut.load_en, 0)
            else:
                drive(ctx, values)
                got.append(ctx.get(dut.psum))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def _words(rng, dtype, shape, specials=0):
    """Element codes of ``dtype`` (uint8): finite codes (NaN / Inf codes have their top
    exponent bit cleared), then ``specials`` of them replaced by special codes (FP8 types)."""
    codes = rng.integers(0, 16 if dtype == E2M1 else 256, shape).astype(np.uint8)
    if dtype != E2M1:
        values = codes.view(dtype).astype(np.float32)
        codes[~np.isfinite(values)] &= 0xBF
        flat = codes.reshape(-1)
        flat[rng.choice(flat.size, specials, replace=False)] = rng.choice(SPECIAL[dtype],
                                                                          specials)
    return codes


def _subnormal_scale(stationary, moving, s_scale):
    """Both groups' moving scale that makes every scaled PE term at most 2^-136, so the
    column's sum of 16 is below 2^-131: subnormal (unless it cancels to zero)."""
    terms = np.abs(stationary.astype(np.float64) * moving.astype(np.float64)).sum(-1)
    largest = (terms * np.exp2(np.repeat(s_scale, 8) - 127.0)).max()
    return np.full(2, int(np.clip(127 - 136 - np.ceil(np.log2(largest)), 0, 254)))


def _packed(codes, dtype):
    """x4 words the PE takes: lane j in bits 8 j + 7 .. 8 j, MXFP4 as e4m3fn (exact)."""
    fp8 = codes.view(dtype).astype(np.float32).astype(E4M3FN).view(np.uint8) \
        if dtype == E2M1 else codes
    return (fp8.astype(np.uint32) << (8 * np.arange(4, dtype=np.uint32))).sum(-1)


def _code(dtype):
    return (DType.E5M2 if dtype == E5M2 else DType.E4M3FN).value


#: Element-type pairs (stationary, moving): every FP8 pair, MXFP4 on either side and both.
PAIRS = [(E4M3FN, E4M3FN), (E4M3FN, E5M2), (E5M2, E4M3FN), (E5M2, E5M2), (E2M1, E4M3FN),
         (E5M2, E2M1), (E2M1, E2M1)]


def test_a_column_of_mx_pes_is_nc_matmul_mx():
    groups, trials = ROWS // 8, len(MOVING_SCALES)
    steps, want = [], []
    for s_dtype, m_dtype in PAIRS:
        rng = np.random.default_rng([11, s_dtype.num, m_dtype.num])
        stationary = [_words(rng, s_dtype, (ROWS, 4)) for _ in range(2)]    # buffers 0, 1
        # buffer 0's scales small enough for a subnormal column sum, buffer 1's around 2^0
        s_scales = [rng.integers(40, 60, groups), rng.integers(110, 145, groups)]
        steps += [("load", {"load_buf": buf, "load_data": _packed(stationary[buf], s_dtype),
                            "load_scale": np.repeat(s_scales[buf], 8)}) for buf in (0, 1)]
        for trial in range(trials):
            buf = trial // 2 % 2
            moving = _words(rng, m_dtype, (ROWS, 4), specials=SPECIALS[trial])
            m_scale = np.array(MOVING_SCALES[trial] or _subnormal_scale(
                stationary[buf].view(s_dtype), moving.view(m_dtype), s_scales[buf]))
            steps.append(("read", {"sel": buf, "mx": 1, "ftz": trial % 2,
                                   "stype": _code(s_dtype), "mtype": _code(m_dtype),
                                   "moving": _packed(moving, m_dtype),
                                   "scale": np.repeat(m_scale, 8)}))
            golden = nc_matmul_mx(stationary[buf].view(s_dtype)[:, None, :],
                                  moving.view(m_dtype)[:, None, :],
                                  s_scales[buf].astype(np.uint8)[:, None],
                                  m_scale.astype(np.uint8)[:, None])
            want.append(int(golden.view(np.uint32)[0, 0]))
    got = _run(_Column(mx=True), steps)
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    assert not bad, [f"{PAIRS[i // trials]} trial {i % trials}: want {want[i]:08x} got "
                     f"{got[i]:08x}" for i in bad[:6]]
    for pair in range(len(PAIRS)):      # each pair: distinct sums, and a NaN or Inf
        sums = want[pair * trials:(pair + 1) * trials]
        finite = [w for w in sums if (w >> 23) & 0xFF != 0xFF]
        assert len(set(finite)) > trials // 3 and len(finite) < trials
        assert any(0 < w & 0x7FFFFFFF < 0x00800000 for w in sums)       # a subnormal sum


def test_mx_low_leaves_the_fp8_matmul_and_mx_ignores_ftz():
    rng = np.random.default_rng(12)
    stationary = _words(rng, E4M3FN, (ROWS, 4))
    moving = _words(rng, E4M3FN, (ROWS, 4))
    loads = [{"load_buf": 0, "load_data": _packed(stationary, E4M3FN),
              "load_scale": np.full(ROWS, 127)}]
    fp8 = {"sel": 0, "mx": 0, "ftz": 0, "stype": DType.E4M3FN.value,
           "mtype": DType.E4M3FN.value, "moving": _packed(moving, E4M3FN),
           "scale": np.full(ROWS, 200)}
    got = _run(_Column(mx=True), [("load", load) for load in loads]
               + [("read", fp8), ("read", {**fp8, "mx": 1, "ftz": 1})])
    lane0 = nc_matmul(stationary[:, :1].view(E4M3FN), moving[:, :1].view(E4M3FN))
    assert got[0] == int(lane0.view(np.uint32)[0, 0])       # scales unused
    quad = nc_matmul_mx(stationary.view(E4M3FN)[:, None, :], moving.view(E4M3FN)[:, None, :],
                        np.full((2, 1), 127, np.uint8), np.full((2, 1), 200, np.uint8))
    assert got[1] == int(quad.view(np.uint32)[0, 0]) != got[0]


def test_the_mx_option_adds_its_ports_and_nothing_else():
    assert travelling(32, mx=True) == travelling(32) + MX_TRAVELLING
    plain, mx = pe_signature(32).members, pe_signature(32, mx=True).members
    assert set(mx) - set(plain) == {"load_scale", "mx_in", "mx_out", "scale_in", "scale_out"}
    assert ProcessingElement(mx=True).has_mx and not ProcessingElement().has_mx
    only = ProcessingElement(mx=True, float_dtypes=(), double_row=False, int8=False)
    assert only.signature.members["moving_in"].shape == 32
