"""Bit-exact golden model of the tensor engine's ``nc_matmul``.

The data type of a matmul is taken from its operands: int8 (INT8 x INT8 -> INT32) or
``ml_dtypes.bfloat16`` (BF16 x BF16 -> FP32, see :mod:`systolica.golden.bf16` and
``docs/numerics.md``).

INT8 numerics: products are exact, sums are formed exactly in int64 and then wrapped to
INT32 two's complement (modulo 2**32), which is what an INT32 accumulator that wraps on
overflow produces whatever the order of the adds. numpy's ``int8 @ int8`` returns int8 and
is not used.
"""

import numpy as np

from .bf16 import BF16, FP32, bf16_matmul, bf16_matmul_batch

_INT32_MOD = 1 << 32


def wrap_int32(values):
    """Wrap integers to INT32 two's complement.

    Parameters
    ----------
    values : array_like of int
        Any integer values (int64 or Python ints).

    Returns
    -------
    numpy.ndarray of int32
        ``values`` modulo 2**32, read as signed 32-bit.
    """
    wide = np.asarray(values, dtype=np.int64)
    return ((wide + (1 << 31)) % _INT32_MOD - (1 << 31)).astype(np.int32)


_DTYPES = {np.dtype(np.int8): "int8", BF16: "bfloat16"}
_PSUM_DTYPE = {np.dtype(np.int8): np.dtype(np.int32), BF16: FP32}


def _check_matrix(name, array, dtype):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(array).__name__}")
    if array.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, not {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, not {array.ndim}-D with shape {array.shape}")


def _operand_dtype(name, array):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(array).__name__}")
    if array.dtype not in _DTYPES:
        raise TypeError(f"{name} must have dtype int8 or bfloat16 (ml_dtypes.bfloat16), "
                        f"not {array.dtype}")
    return array.dtype


def _check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def nc_matmul(stationary, moving, *, psum=None, accumulate=False, ftz=False):
    """Compute ``stationary.T @ moving`` as the tensor engine does, into PSUM.

    The data type is the operands' dtype, which must be the same for both.

    Parameters
    ----------
    stationary : numpy.ndarray, int8 or bfloat16, shape [K, M]
        Stationary (weight) matrix; K is the partition (contraction) dimension.
    moving : numpy.ndarray, same dtype as ``stationary``, shape [K, N]
        Moving matrix.
    psum : numpy.ndarray, shape [M, N], optional
        PSUM contents before the matmul: int32 for int8 operands, float32 for bfloat16.
        Required when ``accumulate`` is true; never read when it is false.
    accumulate : bool
        ``False`` overwrites PSUM (``psum`` is not read); ``True`` adds into ``psum``.
    ftz : bool
        bfloat16 only: ``True`` flushes subnormal operands (BF16 inputs, PSUM) and subnormal
        products and sums to zero of the same sign; ``False`` (default) is IEEE mode with
        gradual underflow.

    Returns
    -------
    numpy.ndarray, shape [M, N]
        The new PSUM contents.
        int8: int32, exact sums wrapped modulo 2**32 (two's complement).
        bfloat16: float32; per column, ``acc = p[0]``, then ``acc = acc + p[k]`` for k = 1 ..
        K-1 (k ascending), each product and add rounded once to FP32 (RNE), then
        ``psum + acc`` with one more rounding when accumulating; NaN is 0x7FC00000.
        See :mod:`systolica.golden.bf16` and ``docs/numerics.md``.

    Raises
    ------
    TypeError
        If an operand is not a numpy array of an allowed dtype, the two operands' dtypes
        differ, ``psum`` has the wrong dtype, or ``accumulate``/``ftz`` is not a bool.
    ValueError
        If an operand is not 2-D, the K dimensions differ, K is 0 for bfloat16, ``psum`` has
        the wrong shape, ``accumulate`` is true without ``psum``, or ``ftz`` is true for int8.
    RuntimeError
        bfloat16 only: the CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    dtype = _operand_dtype("stationary", stationary)
    moving_dtype = _operand_dtype("moving", moving)
    if moving_dtype != dtype:
        raise TypeError(
            f"stationary and moving must have the same dtype (both int8 or both bfloat16); "
            f"got stationary {_DTYPES[dtype]} and moving {_DTYPES[moving_dtype]}")
    _check_matrix("stationary", stationary, dtype)
    _check_matrix("moving", moving, dtype)
    if stationary.shape[0] != moving.shape[0]:
        raise ValueError(
            f"stationary [K, M] and moving [K, N] must share K; got stationary "
            f"{stationary.shape} and moving {moving.shape}")
    _check_bool("accumulate", accumulate)
    _check_bool("ftz", ftz)
    if ftz and dtype != BF16:
        raise ValueError("ftz applies to bfloat16 matmuls only; int8 matmuls are exact "
                         "(use ftz=False)")
    psum_dtype = _PSUM_DTYPE[dtype]
    out_shape = (stationary.shape[1], moving.shape[1])
    if accumulate and psum is None:
        raise ValueError(f"accumulate=True needs psum, the [M, N] {psum_dtype.name} PSUM "
                         f"contents to add to")
    if psum is not None:
        _check_matrix("psum", psum, psum_dtype)
        if psum.shape != out_shape:
            raise ValueError(f"psum must have shape [M, N] = {out_shape}, not {psum.shape}")

    if dtype == BF16:
        if stationary.shape[0] == 0:
            raise ValueError("a bfloat16 matmul needs K >= 1: the accumulation chain starts "
                             "with the first product, and there is none for K = 0")
        return bf16_matmul(stationary, moving, psum, accumulate, ftz)

    # Exact: |sum| <= K * 2**14, so int64 never overflows for any K below 2**49.
    wide = stationary.astype(np.int64).T @ moving.astype(np.int64)
    if accumulate:
        wide = wide + psum.astype(np.int64)
    return wrap_int32(wide)


def nc_matmul_batch(stationary, moving, *, ftz=False):
    """``nc_matmul(stationary[b], moving[b], ftz=ftz)`` for every ``b`` of a batch at once
    (overwriting: no PSUM), bit for bit the same.

    The testbench computes a whole program's matmuls of one shape with it; accumulating into
    PSUM is one more :func:`~systolica.golden.fp32_add` (BF16) or :func:`wrap_int32` (INT8)
    of the stored value and this result, which is what ``nc_matmul(..., accumulate=True)``
    computes.

    Parameters
    ----------
    stationary : numpy.ndarray, int8 or bfloat16, shape [B, K, M]
    moving : numpy.ndarray, same dtype, shape [B, K, N]
    ftz : bool
        As :func:`nc_matmul` (bfloat16 only).

    Returns
    -------
    numpy.ndarray, int32 or float32, shape [B, M, N]

    Raises
    ------
    TypeError, ValueError
        As :func:`nc_matmul`, for the stacks (which must be 3-D with equal B and K).
    RuntimeError
        bfloat16 only: the CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    dtype = _operand_dtype("stationary", stationary)
    if _operand_dtype("moving", moving) != dtype:
        raise TypeError(f"stationary and moving must have the same dtype (both int8 or both "
                        f"bfloat16); got {stationary.dtype} and {moving.dtype}")
    if stationary.ndim != 3 or moving.ndim != 3 or stationary.shape[:2] != moving.shape[:2]:
        raise ValueError(f"stationary [B, K, M] and moving [B, K, N] must be 3-D with the same "
                         f"B and K; got {stationary.shape} and {moving.shape}")
    _check_bool("ftz", ftz)
    if ftz and dtype != BF16:
        raise ValueError("ftz applies to bfloat16 matmuls only")
    if dtype == BF16:
        if stationary.shape[1] == 0:
            raise ValueError("a bfloat16 matmul needs K >= 1")
        return bf16_matmul_batch(stationary, moving, ftz)
    wide = np.einsum("bkm,bkn->bmn", stationary.astype(np.int64), moving.astype(np.int64))
    return wrap_int32(wide)
