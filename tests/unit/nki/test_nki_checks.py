"""Unit tier: every rule the NKI front end enforces gives a one-line error naming the kernel
line, the instruction and the rule (and passes when the rule is kept), and an exception
raised inside a kernel reports the kernel's own line."""

import inspect
import os
import warnings

import ml_dtypes
import numpy as np
import pytest

from systolica import nki
from systolica.nki import NkiError, NkiWarning
from systolica.nki import isa as nisa
from systolica.nki import language as nl

BF16 = ml_dtypes.bfloat16
HERE = os.path.basename(__file__)


def _line(func, marker):
    """``file:LINE`` of the line of ``func`` that holds ``marker``."""
    lines, start = inspect.getsourcelines(func)
    for i, text in enumerate(lines):
        if marker in text:
            return f"{HERE}:{start + i}"
    raise AssertionError(f"{marker!r} not in {func.__name__}")


def _error(kernel, *args, **kwargs):
    with pytest.raises(NkiError) as info:
        nki.run(kernel, *args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def _bf16(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(BF16)


def test_partition_dimension_at_most_128():
    def kernel(n):
        return nl.ndarray((n, 4), nl.float32, buffer=nl.sbuf)  # alloc
    nki.run(kernel, 128)
    message = _error(kernel, 129)
    assert message.startswith(_line(kernel, "# alloc") + ": nl.ndarray: partition dimension 129")


@pytest.mark.parametrize("target, fits", [("trn1", False), ("trn2", True)])
def test_sbuf_capacity_per_partition_follows_the_target(target, fits):
    def kernel():
        a = nl.ndarray((128, 50 * 1024), nl.bfloat16)    # 100 KiB per partition
        b = nl.ndarray((128, 50 * 1024), nl.bfloat16)    # second
        return a, b
    if fits:                   # 200 KiB <= 224 KiB (NeuronCore-v3)
        nki.run(kernel, target=target)
        return
    message = _error(kernel, target=target)     # 200 KiB > 192 KiB (NeuronCore-v2)
    assert message.startswith(_line(kernel, "# second") + ": nl.ndarray: SBUF capacity")
    assert "192 KiB" in message


def test_an_allocation_in_a_loop_reuses_its_space_unless_kept():
    def kernel(keep):
        kept = []
        for _i in nl.affine_range(2):
            t = nl.ndarray((128, 50 * 1024), nl.bfloat16)     # 100 KiB, twice
            if keep:
                kept.append(t)
        nl.ndarray((128, 20 * 1024), nl.bfloat16)             # 40 KiB more
        return kept
    nki.run(kernel, False, target="trn1")                     # 140 KiB
    message = _error(kernel, True, target="trn1")             # 240 KiB
    assert message.startswith(_line(kernel, "# 40 KiB") + ": nl.ndarray: SBUF capacity")


def test_psum_capacity_is_16_kib_per_partition():
    def kernel(extra):
        banks = nl.ndarray((128, 8, 512), nl.float32, buffer=nl.psum)     # all 8 banks
        if extra:
            nl.ndarray((128, 1), nl.float32, buffer=nl.psum)       # one word more
        return banks
    nki.run(kernel, False)
    message = _error(kernel, True)
    assert message.startswith(_line(kernel, "# one word") + ": nl.ndarray: PSUM capacity")


def test_a_psum_tile_must_fit_one_bank():
    def kernel(n):
        return nl.ndarray((128, n), nl.float32, buffer=nl.psum)    # tile
    nki.run(kernel, 512)
    message = _error(kernel, 513)
    assert message.startswith(_line(kernel, "# tile") + ": nl.ndarray: a PSUM tile must fit")


def test_a_matmul_region_crossing_a_psum_bank_is_refused():
    def kernel(a, b, j):
        sa = nl.load(a)
        sb = nl.load(b)
        acc = nl.ndarray((128, 4, 384), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, j, :], stationary=sa, moving=sb)     # matmul
    a, b = _bf16(128, 128), _bf16(128, 384, seed=1)
    nki.run(kernel, a, b, 0)                     # bytes 0..1536 of the partition
    message = _error(kernel, a, b, 1)            # bytes 1536..3072: crosses 2048
    assert message.startswith(_line(kernel, "# matmul") + ": nc_matmul: the PSUM tile")
    assert "bank boundary" in message


def _matmul_kernel(a, b):
    return nisa.nc_matmul(nl.load(a), nl.load(b))     # mm


def test_int8_matmuls_are_refused():
    a = np.ones((128, 8), np.int8)
    message = _error(_matmul_kernel, a, a)
    assert message.startswith(_line(_matmul_kernel, "# mm") + ": nc_matmul: the tensor engine "
                                                              "has no integer matmul")


def test_fp32_pairs_only_with_fp32_in_the_golden_models_words():
    f32 = np.ones((128, 8), np.float32)
    message = _error(_matmul_kernel, f32, _bf16(128, 8))
    assert message.startswith(_line(_matmul_kernel, "# mm") + ": nc_matmul: tfloat32 and "
                                                              "float32 pair only with")
    nki.run(_matmul_kernel, f32, f32)


def test_moving_free_size_at_most_512():
    nki.run(_matmul_kernel, _bf16(128, 8), _bf16(128, 512))
    message = _error(_matmul_kernel, _bf16(128, 8), _bf16(128, 513))
    assert message.startswith(_line(_matmul_kernel, "# mm") + ": nc_matmul: moving free size "
                                                              "513 exceeds 512")


def test_out_of_bounds_slices_are_refused():
    def kernel(x, stop):
        return nl.load(x[0:stop, :])                 # slice
    x = _bf16(128, 16)
    nki.run(kernel, x, 128)
    message = _error(kernel, x, 129)
    assert message.startswith(_line(kernel, "# slice") + ": index: slice [0:129] is out of "
                                                         "bounds")


def test_out_of_bounds_index_expressions_are_refused_unless_masked():
    def kernel(x, masked):
        i_p, i_f = nl.mgrid[0:128, 0:16]
        out = nl.ndarray((128, 16), x.dtype, buffer=nl.shared_hbm)
        rows = 100 + i_p
        if masked:
            t = nl.load(x[rows, i_f], mask=rows < 200)
        else:
            t = nl.load(x[rows, i_f])                # expression
        nl.store(out, value=t)
        return out
    x = _bf16(200, 16)
    out = nki.run(kernel, x, True).outputs
    assert np.array_equal(out[:100], x[100:]) and not out[100:].any()
    message = _error(kernel, x, False)
    assert message.startswith(_line(kernel, "# expression") + ": dma_copy: out-of-bounds")


def test_shape_mismatches_are_refused():
    def kernel(x, width):
        t = nl.ndarray((128, width), x.dtype)
        nisa.dma_copy(dst=t, src=x)                  # copy
    x = _bf16(128, 32)
    nki.run(kernel, x, 32)
    message = _error(kernel, x, 64)
    assert message.startswith(_line(kernel, "# copy") + ": dma_copy: shape mismatch")


def test_accumulating_onto_psum_no_matmul_wrote_warns():
    def kernel(a, b, first):
        sa, sb = nl.load(a), nl.load(b)
        acc = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=sa, moving=sb, accumulate=first)   # first
        nisa.nc_matmul(dst=acc, stationary=sa, moving=sb, accumulate=True)
    a, b = _bf16(128, 8), _bf16(128, 16, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nki.run(kernel, a, b, False)
    with pytest.warns(NkiWarning) as caught:
        result = nki.run(kernel, a, b, True)
    assert str(caught[0].message).startswith(_line(kernel, "# first") + ": nc_matmul: "
                                                                        "accumulate=True")
    assert len(result.warnings) == 1


def test_an_exception_inside_a_kernel_reports_the_kernel_line():
    def kernel(x):
        t = nl.load(x)
        return t.shape[5]                            # raises
    message = _error(kernel, _bf16(128, 4))
    assert message.startswith(_line(kernel, "# raises") + ": in kernel kernel: IndexError")


def test_a_call_outside_a_kernel_run_is_an_error():
    with pytest.raises(NkiError, match="called outside a kernel run"):
        nl.ndarray((128, 4), nl.float32)
