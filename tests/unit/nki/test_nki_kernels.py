"""Unit tier: the project's NKI kernels (``nki/kernels``) against numpy references.

Tensor-engine results (matmuls, transposes) must equal the golden model bit for bit; the
ScalarE/VectorE kernels (softmax, RMSNorm, LayerNorm, attention) must be within the stated
tolerance of a float64 reference (docs/nki.md, "Numerics")."""

import ml_dtypes
import numpy as np
import pytest

from systolica import nki
from systolica.golden import nc_matmul, psum_accumulate
from systolica.nki import reference
from systolica.nki.kernels import attention, matmul, norms, transpose
from systolica.sim.api.tiling import golden_tiled_matmul

BF16 = ml_dtypes.bfloat16


def _rand(shape, dtype=BF16, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_single_tile_matmul_is_the_golden_nc_matmul():
    a, b = _rand((128, 64)), _rand((128, 512), seed=1)
    assert _same_bits(nki.simulate(matmul.matmul_single_tile)(a, b), nc_matmul(a, b))


@pytest.mark.parametrize("name", ["matmul_tiled", "matmul_hoisted", "matmul_free_blocked",
                                  "matmul_blocked"])
def test_tutorial_matmul_steps_equal_the_golden_tiled_matmul(name):
    a, b = _rand((256, 256)), _rand((256, 1024), seed=1)
    out = nki.simulate(getattr(matmul, name))(a, b)
    assert _same_bits(out, golden_tiled_matmul(a, b, 128))


def test_blocked_matmul_streams_k_in_blocks():
    a, b = _rand((512, 128)), _rand((512, 512), seed=1)
    out = nki.simulate(matmul.matmul_blocked)(a, b, 1, 1, 2)      # two K blocks of 2 tiles
    # Each K block's PSUM sum is added to the SBUF sum: not the slab-by-slab order.
    blocks = [golden_tiled_matmul(a[k0:k0 + 256], b[k0:k0 + 256], 128) for k0 in (0, 256)]
    assert _same_bits(out, psum_accumulate(blocks[0], blocks[1]))
    assert _same_bits(out, reference.matmul_blocked(a, b, 1, 1, 2))
    assert not _same_bits(out, golden_tiled_matmul(a, b, 128))


def test_the_steps_issue_fewer_dma_copies_in_the_tutorial_order():
    a, b = _rand((256, 256)), _rand((256, 1024), seed=1)
    counts = [sum(i.opcode == "dma_copy" for i in nki.run(getattr(matmul, n), a, b).instructions)
              for n in ("matmul_tiled", "matmul_hoisted", "matmul_free_blocked")]
    assert counts[0] > counts[1] > counts[2]


def test_fp8_double_row_matmul_is_the_golden_double_row():
    a = _rand((256, 64), ml_dtypes.float8_e4m3)
    b = _rand((256, 512), ml_dtypes.float8_e5m2, seed=1)
    out = nki.simulate(matmul.matmul_fp8_double_row)(a, b)
    assert _same_bits(out, nc_matmul(a, b, perf_mode="double_row"))
    ins = [i for i in nki.run(matmul.matmul_fp8_double_row, a, b).instructions
           if i.opcode == "nc_matmul"]
    assert ins[0].params["perf_mode"] == "double_row" and ins[0].params["k"] == 256
    assert ins[0].partitions == 128


@pytest.mark.parametrize("dtype", [BF16, np.float32, ml_dtypes.float8_e4m3])
def test_transpose_moves_the_bits_unchanged(dtype):
    x = _rand((256, 128), dtype)
    out = nki.simulate(transpose.transpose_2d)(x)
    assert out.dtype == x.dtype and np.array_equal(out.view(np.uint8), x.T.copy().view(np.uint8))


def test_softmax_within_tolerance():
    x = _rand((256, 300), np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    assert np.max(np.abs(nki.simulate(norms.softmax)(x) - ref)) < 1e-6


def test_rmsnorm_within_tolerance():
    x, g = _rand((128, 256), np.float32), _rand((1, 256), np.float32, seed=1)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * g
    assert np.max(np.abs(nki.simulate(norms.rmsnorm)(x, g) - ref)) < 1e-5


def test_layernorm_within_tolerance():
    x = _rand((128, 256), np.float32)
    g, b = _rand((1, 256), np.float32, seed=1), _rand((1, 256), np.float32, seed=2)
    mu = x.astype(np.float64).mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * g + b
    assert np.max(np.abs(nki.simulate(norms.layernorm)(x, g, b) - ref)) < 1e-5


def test_attention_forward_within_tolerance():
    d, sq, sk = 64, 512, 1024            # one group of 4 query tiles, 2 K/V blocks
    q, k, v = _rand((d, sq)), _rand((d, sk), seed=1), _rand((sk, d), seed=2)
    s = q.astype(np.float64).T @ k.astype(np.float64) * d ** -0.5
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)
    out = nki.simulate(attention.attention_fwd)(q, k, v)
    # bf16 probabilities and output: about 3 significant digits
    assert out.dtype == BF16 and np.max(np.abs(out.astype(np.float64) - ref)) < 4e-3


def test_attention_forward_with_a_128_key_block_within_tolerance():
    """block=128 (the block a 128-token sequence uses) computes the same softmax."""
    d, sq, sk = 64, 128, 256            # one query tile, 2 K/V blocks of 128
    q, k, v = _rand((d, sq), seed=3), _rand((d, sk), seed=4), _rand((sk, d), seed=5)
    s = q.astype(np.float64).T @ k.astype(np.float64) * d ** -0.5
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)
    out = nki.simulate(attention.attention_fwd)(q, k, v, block=128)
    assert np.max(np.abs(out.astype(np.float64) - ref)) < 4e-3


@pytest.mark.parametrize("d, row_tiles, target", [(64, 2, "trn1"), (32, 4, "trn2"),
                                                   (48, 2, "trn2")])
def test_row_tiled_attention_is_bit_identical_and_its_scores_matmuls_overlap(d, row_tiles,
                                                                             target):
    """Row tiles (scores of 128 / R-query sub-tiles in disjoint diagonal PE tiles) change no
    bit of the output on the golden numerics, and the engine model runs each tile's R
    scores matmuls at the same time once their operands are loaded."""
    q, k, v = _rand((d, 256), seed=6), _rand((d, 1024), seed=7), _rand((1024, d), seed=8)
    plain = nki.run(attention.attention_fwd, q, k, v, target=target)
    tiled = nki.run(attention.attention_fwd, q, k, v, row_tiles=row_tiles, target=target)
    assert np.array_equal(plain.outputs.view(np.uint16), tiled.outputs.view(np.uint16))
    scores = [p for p, ins in zip(nki.schedule(tiled.instructions, target).instructions,
                                  tiled.instructions, strict=True)
              if ins.opcode == "nc_matmul" and ins.params["tile_size"]]
    assert len(scores) == 2 * 2 * row_tiles      # 2 query tiles x 2 key blocks x R
    assert {ins.params["tile_size"] for ins in tiled.instructions
            if ins.params.get("tile_size")} == {(128 // row_tiles,) * 2}
    # in the second key block (data loaded under the first) each tile's R start together
    for j in range(2 * row_tiles, len(scores), row_tiles):
        group = scores[j:j + row_tiles]
        assert max(p.start for p in group) == pytest.approx(min(p.start for p in group))


def test_row_tiles_need_a_head_dimension_that_fits_the_tile():
    q, k, v = _rand((96, 128)), _rand((96, 512)), _rand((512, 96))
    with pytest.raises(nki.NkiError, match="d <= 128 / row_tiles"):
        nki.simulate(attention.attention_fwd)(q, k, v, row_tiles=2)


def _trace(kernel, k, m, n, target="trn2"):
    """The kernel's trace on lhsT [k, m], rhs [k, n] BF16, TensorE shapes only."""
    a, b = np.zeros((k, m), BF16), np.zeros((k, n), BF16)
    return nki.run(kernel, a, b, target=target, tensor_engine="none").instructions


def test_the_matmul_steps_get_faster_in_the_tutorials_order():
    """AWS's matmul tutorial: tiled > loads hoisted > free dimensions blocked > all dimensions
    blocked in latency; here on lhsT [1024, 1024] x rhs [1024, 2048] BF16 on trn2."""
    seconds = [nki.schedule(_trace(getattr(matmul, name), 1024, 1024, 2048), "trn2").seconds
               for name in ("matmul_tiled", "matmul_hoisted", "matmul_free_blocked",
                            "matmul_blocked")]
    assert seconds == sorted(seconds, reverse=True) and len(set(seconds)) == 4


def test_the_blocked_matmul_is_tensore_bound_at_the_stated_size():
    """The issue's done-when: PE busy at least 85 % at lhsT [1024, 2048] x rhs [1024, 4096]
    BF16 on trn2 (the README's size): the fully blocked kernel moves 56 MiB through HBM
    (rhs once, lhsT once per N block, the FP32 result once) against 4.3 G MACs."""
    profile = nki.schedule(_trace(matmul.matmul_blocked, 1024, 2048, 4096), "trn2")
    assert profile.engine_busy["tensor"] >= 0.85
    assert profile.hbm_bytes == (8 + 4 * 4 + 32) * 2**20       # rhs, lhsT x 4 N blocks, out


def test_shapes_only_tensor_engine_records_the_same_trace():
    a, b = _rand((256, 256)), _rand((256, 1024), seed=1)
    full = nki.run(matmul.matmul_blocked, a, b)
    shapes = nki.run(matmul.matmul_blocked, a, b, tensor_engine="none")
    assert [(i.opcode, i.reads, i.writes) for i in shapes.instructions] == \
        [(i.opcode, i.reads, i.writes) for i in full.instructions]
    assert not shapes.outputs.any() and full.outputs.any()


def _busy_at_once(profile, engines, at_least):
    """Fraction of the kernel's time during which at least ``at_least`` of ``engines`` are
    busy (a sweep over the placed intervals; an engine runs one instruction at a time)."""
    events = sorted((t, d) for p in profile.instructions if p.engine in engines
                    for t, d in ((p.start, 1), (p.end, -1)))
    busy, last, total = 0, 0.0, 0.0
    for t, delta in events:
        if busy >= at_least:
            total += t - last
        busy, last = busy + delta, t
    return total / profile.seconds


def _dma_under_compute(profile):
    """Fraction of the time DMA moves data during which a compute engine is busy too."""
    events = sorted((t, p.engine == "dma", d) for p in profile.instructions
                    for t, d in ((p.start, 1), (p.end, -1)))
    dma = compute = 0
    last, moving, both = 0.0, 0.0, 0.0
    for t, is_dma, delta in events:
        if dma:
            moving += t - last
            both += (t - last) if compute else 0.0
        dma, compute = (dma + delta, compute) if is_dma else (dma, compute + delta)
        last = t
    return both / moving


def test_attention_engines_overlap():
    """Issue 24's done-when: the attention kernel's timeline shows the engines overlapping
    (docs/nki.md, "The project's kernels"): 8 query tiles (2 groups of 4) over 4 streamed
    K/V blocks on trn2. Measured: 56 % of the time two or more of TensorE, VectorE, ScalarE
    are busy, 7 % all three; 84 % of the DMA time runs under compute."""
    d, sq, sk = 128, 1024, 2048
    q, k, v = np.zeros((d, sq), BF16), np.zeros((d, sk), BF16), np.zeros((sk, d), BF16)
    trace = nki.run(attention.attention_fwd, q, k, v, tensor_engine="none").instructions
    profile = nki.schedule(trace, "trn2")
    assert _busy_at_once(profile, ("tensor", "vector", "scalar"), 2) > 0.4
    assert _busy_at_once(profile, ("tensor", "vector", "scalar"), 3) > 0.03
    for pair in (("tensor", "vector"), ("scalar", "vector"), ("tensor", "scalar")):
        assert _busy_at_once(profile, pair, 2) > 0.05
    assert _dma_under_compute(profile) > 0.5
