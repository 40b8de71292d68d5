"""Unit tier: the non-matmul ``nki.isa`` instructions against numpy (float32 math, RNE to
the destination type) and the engine each is recorded on, in both API styles."""

import ml_dtypes
import numpy as np
import pytest

from systolica import nki
from systolica.nki import isa as nisa
from systolica.nki import language as nl

BF16 = ml_dtypes.bfloat16


def _run(kernel, *args, **kwargs):
    result = nki.run(kernel, *args, **kwargs)
    return result.outputs, result.instructions


def _store(tile):
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def test_iota_and_affine_select_in_both_styles_on_gpsimd():
    def kernel():
        old = nisa.iota(nl.arange(8)[None, :] + 10 * nl.arange(4)[:, None], dtype=nl.int32)
        new = nl.ndarray((4, 8), nl.float32)
        nisa.iota(dst=new, pattern=[[1, 8]], offset=3, channel_multiplier=100)
        ones = nl.full((4, 8), 1.0, nl.float32)
        i_p, i_f = nl.mgrid[0:4, 0:8]
        causal_old = nisa.affine_select(i_f <= i_p, ones, -9.0)
        causal_new = nl.ndarray((4, 8), nl.float32)      # keep where p - f >= 0
        nisa.affine_select(dst=causal_new, pattern=[[-1, 8]], offset=0, channel_multiplier=1,
                           on_true_tile=ones, on_false_value=-9.0, cmp_op=nl.greater_equal)
        return tuple(_store(t) for t in (old, new, causal_old, causal_new))
    (old, new, c_old, c_new), ins = _run(kernel)
    p, f = np.mgrid[0:4, 0:8]
    assert np.array_equal(old, f + 10 * p) and old.dtype == np.int32
    assert np.array_equal(new, 3 + 100 * p + f)
    causal = np.where(f <= p, 1.0, -9.0)
    assert np.array_equal(c_old, causal) and np.array_equal(c_new, causal)
    assert {i.engine for i in ins if i.opcode in ("iota", "affine_select")} == {"gpsimd"}


def test_tensor_scalar_rounds_once_to_the_destination_type():
    x = np.array([[1.0, 3.0, 1e-3, 255.0]], np.float32)

    def kernel(a):
        t = nl.load(a)
        out = nl.ndarray(t.shape, nl.bfloat16)
        nisa.tensor_scalar(dst=out, data=t, op0=nl.multiply, operand0=1.0 / 3.0,
                           op1=nl.subtract, operand1=1.0, reverse1=True)
        return _store(out)
    out, ins = _run(kernel, x)
    expected = (np.float32(1) - x * np.float32(1.0 / 3.0)).astype(BF16)
    assert out.dtype == BF16 and np.array_equal(out.view(np.uint16), expected.view(np.uint16))
    assert [i.engine for i in ins if i.opcode == "tensor_scalar"] == ["vector"]


def test_activation_with_scale_bias_and_a_summing_reduce_on_scalare():
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    bias = np.arange(4, dtype=np.float32).reshape(4, 1)

    def kernel(a, b):
        t, bt = nl.load(a), nl.load(b)
        out = nl.ndarray(t.shape, nl.float32)
        sums = nl.ndarray((4, 1), nl.float32)
        nisa.activation(dst=out, op=nl.tanh, data=t, bias=bt, scale=0.5, reduce_op=nl.add,
                        reduce_res=sums)
        return _store(out), _store(sums)
    (out, sums), ins = _run(kernel, x, bias)
    ref = np.tanh(x * np.float32(0.5) + bias)
    assert np.max(np.abs(out - ref)) < 1e-6
    assert np.max(np.abs(sums[:, 0] - ref.sum(1))) < 1e-5
    act = [i for i in ins if i.opcode == "activation"][0]
    assert act.engine == "scalar" and act.params["func"] == "tanh" and len(act.writes) == 2


def test_reductions_scan_select_and_scalar_tensor_tensor_on_vectore():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)

    def kernel(x, y):
        tx, ty = nl.load(x), nl.load(y)
        mx = nisa.tensor_reduce(nl.maximum, tx, 1, negate=True, keepdims=True)
        scan = nisa.tensor_tensor_scan(tx, ty, initial=0.0, op0=nl.multiply, op1=nl.add)
        red = nl.ndarray((4, 1), nl.float32)
        sq = nisa.tensor_scalar_reduce(data=tx, op0=nl.multiply, operand0=2.0,
                                       reduce_op=nl.add, reduce_res=red)
        pos = nisa.tensor_scalar(data=tx, op0=nl.greater, operand0=0.0)
        sel = nisa.select(pos, tx, ty)
        stt = nisa.scalar_tensor_tensor(data=tx, op0=nl.multiply, operand0=mx,
                                        op1=nl.add, operand1=ty)
        return tuple(_store(t) for t in (mx, scan, sq, red, sel, stt))
    (mx, scan, sq, red, sel, stt), ins = _run(kernel, a, b)
    assert np.array_equal(mx[:, 0], -a.max(1))
    ref, prev = np.empty_like(a), np.zeros(4, np.float32)
    for i in range(8):
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    assert np.array_equal(scan, ref)                 # float32 step by step, bit for bit
    assert np.array_equal(sq, 2 * a) and np.allclose(red[:, 0], (2 * a).sum(1), atol=1e-5)
    assert np.array_equal(sel, np.where(a > 0, a, b))
    assert np.array_equal(stt, a * -a.max(1, keepdims=True) + b)
    engines = {i.opcode: i.engine for i in ins if i.opcode != "dma_copy"}
    assert set(engines.values()) == {"vector"}


def test_transposes_on_tensore_and_vectore_and_matmul_is_transpose():
    x = np.random.default_rng(2).standard_normal((32, 16)).astype(BF16)
    eye = np.eye(32, dtype=BF16)

    def kernel(a, identity):
        t = nl.load(a)
        pe = nisa.nc_transpose(t)                                  # TensorE -> PSUM
        dve = nisa.nc_transpose(t, engine=nisa.vector_engine)      # VectorE -> SBUF
        out = nl.ndarray((16, 32), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=out, stationary=t, moving=nl.load(identity), is_transpose=True)
        return tuple(_store(nl.copy(v)) for v in (pe, dve, out))
    outs, ins = _run(kernel, x, eye)
    assert all(np.array_equal(o.view(np.uint16), x.T.view(np.uint16)) for o in outs)
    engines = [(i.opcode, i.engine) for i in ins if i.opcode in ("nc_transpose", "nc_matmul")]
    assert engines == [("nc_transpose", "tensor"), ("nc_transpose", "vector"),
                       ("nc_matmul", "tensor")]
    # Costed as the engine runs it: data [32, 16] stationary (K = 32, M = 16) times a
    # [32, 32] identity moving (N = 32), as golden.nc_transpose computes it.
    (tensor_transpose,) = [i for i in ins if i.opcode == "nc_transpose" and i.engine == "tensor"]
    assert [tensor_transpose.params[x] for x in "kmn"] == [32, 16, 32]


@pytest.mark.parametrize("position, size, target, rule", [
    ((0, 0), (64, 128), "trn1", None),
    ((32, 0), (32, 128), "trn2", None),
    ((32, 0), (32, 128), "trn1", "tile row size must be one of 128, 64 .* on trn1, not 32"),
    ((16, 0), (32, 128), "trn2", "tile start row must be a multiple of the row size 32"),
])
def test_row_and_column_tiling_rules(position, size, target, rule):
    def kernel(a, b):
        return nisa.nc_matmul(nl.load(a), nl.load(b), tile_position=position, tile_size=size)
    a = np.ones((32, 16), BF16)
    b = np.ones((32, 64), BF16)
    if rule is None:
        out = nki.run(kernel, a, b, target=target)
        assert np.array_equal(out.outputs, np.full((16, 64), 32, np.float32))
        assert out.instructions[-1].params["tile_size"] == size
    else:
        with pytest.raises(nki.NkiError, match=rule):
            nki.run(kernel, a, b, target=target)
