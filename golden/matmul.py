"""Bit-exact golden model of the tensor engine's ``nc_matmul`` and ``nc_transpose``.

The data types of a matmul are taken from its operands (see
:mod:`systolica.golden.formats` for which pairs are allowed): int8 with int8 (INT8 x INT8
-> INT32), any pair of the float types ``bfloat16``, ``float16``, ``float8_e4m3``,
``float8_e5m2``, ``float8_e3m4``, ``float8_e4m3fn``, or any pair of ``tfloat32``
(:data:`~systolica.golden.TFLOAT32`) and ``float32`` (-> FP32; every input decodes exactly
into FP32, see :mod:`systolica.golden.bf16` and ``docs/numerics.md``). Row and column tiles
(``tile_position`` / ``tile_size``) follow :mod:`systolica.golden.tiles`; transpose mode
(``is_transpose``) moves bit patterns without arithmetic.

INT8 numerics: products are exact, sums are formed exactly in int64 and then wrapped to
INT32 two's complement (modulo 2**32), which is what an INT32 accumulator that wraps on
overflow produces whatever the order of the adds. numpy's ``int8 @ int8`` returns int8 and
is not used.
"""

import numpy as np

from .bf16 import fp32_add, fp32_chain, fp32_chain_batch
from .command import check_bool, check_positive
from .formats import (
    DOUBLE_ROW,
    check_k,
    check_transpose,
    decode,
    double_row_order,
    identity,
    operand_formats,
)
from .tiles import check_tile, check_tile_operands

_INT32_MOD = 1 << 32
#: Partition rows of the NeuronCore's tensor engine: the default pairing of double-row.
ENGINE_ROWS = 128


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


def psum_accumulate(psum, sums, *, ftz=False):
    """What a PSUM entry holds after an accumulating matmul adds ``sums`` to it: the PSUM
    accumulate rule, defined here once (the PE array's column sums are added to the stored
    value by one more INT32 wrap-around add for INT8, or one more FP32 RNE add,
    :func:`~systolica.golden.fp32_add`, for every float type).

    Parameters
    ----------
    psum : numpy.ndarray, int32 or float32
        The stored PSUM values.
    sums : numpy.ndarray, the same dtype and shape
        The matmul's result (``nc_matmul`` without ``accumulate``).
    ftz : bool
        Float only: flush subnormal inputs and results to zero (the matmul's FTZ mode).

    Returns
    -------
    numpy.ndarray, the same dtype and shape

    Raises
    ------
    TypeError
        If the dtypes are not both int32 or both float32.
    """
    psum, sums = np.asarray(psum), np.asarray(sums)
    if psum.dtype != sums.dtype or psum.dtype not in (np.int32, np.float32):
        raise TypeError(f"psum and sums must both be int32 (INT8 matmuls) or both float32 "
                        f"(float matmuls), not {psum.dtype} and {sums.dtype}")
    if psum.dtype == np.int32:
        return wrap_int32(psum.astype(np.int64) + sums)
    return fp32_add(psum, sums, ftz=ftz)


def _check_matrix(name, array, dtype, ndim=2):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(array).__name__}")
    if array.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, not {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, not {array.ndim}-D with shape "
                         f"{array.shape}")


def check_operands(stationary, moving, *, perf_mode=None, ndim=2):
    """The operand rule of every matmul entry point: ``stationary`` [K, M] and ``moving``
    [K, N] (``[B, K, ...]`` stacks with ``ndim=3``) are numpy arrays of a type pair the tile
    takes (:func:`~systolica.golden.operand_formats`), ``ndim``-D, sharing K (and B).

    Returns
    -------
    tuple of OperandFormat
        ``(stationary format, moving format)``.

    Raises
    ------
    TypeError
        If an operand is not a numpy array, or the types do not pair (the message lists the
        allowed types).
    ValueError
        If an operand is not ``ndim``-D or the contraction (and batch) sizes differ.
    """
    for name, array in (("stationary", stationary), ("moving", moving)):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy array of an operand type (int8, "
                            f"ml_dtypes.bfloat16, ...), not {type(array).__name__}")
    pair = operand_formats(stationary.dtype, moving.dtype, perf_mode=perf_mode)
    for name, array in (("stationary", stationary), ("moving", moving)):
        if array.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, not {array.ndim}-D with shape "
                             f"{array.shape}")
    if stationary.shape[:-1] != moving.shape[:-1]:
        shape = "[K, M] and moving [K, N] must share K" if ndim == 2 else \
            "[B, K, M] and moving [B, K, N] must share B and K"
        raise ValueError(f"stationary {shape}; got stationary {stationary.shape} and moving "
                         f"{moving.shape}")
    return pair


def check_ftz(ftz, pair):
    """The FTZ rule of every matmul entry point: ``ftz`` is a bool (Python or numpy), True
    only for a float pair (``pair``: :func:`check_operands`' result).

    Raises
    ------
    TypeError
        If ``ftz`` is not a bool.
    ValueError
        If ``ftz`` is True for an int8 pair.
    """
    check_bool("ftz", ftz)
    if ftz and not pair[0].is_float:
        raise ValueError("ftz applies to float matmuls only; int8 matmuls are exact "
                         "(use ftz=False)")


def _check_float_options(pair, k, ftz, perf_mode, rows, is_transpose=False):
    """The rules on ``ftz``, K and ``rows`` that do not depend on PSUM; returns the chain
    order (None for k ascending)."""
    check_ftz(ftz, pair)
    if (pair[0].is_float or is_transpose) and k == 0:
        raise ValueError("a float matmul needs K >= 1: the accumulation chain starts "
                         "with the first product, and there is none for K = 0")
    if perf_mode != DOUBLE_ROW:
        return None
    check_positive("rows", rows)
    check_k(k, rows, perf_mode)
    return double_row_order(k, rows)


def nc_matmul(stationary, moving, *, psum=None, accumulate=False, ftz=False, perf_mode=None,
              rows=ENGINE_ROWS, tile_position=None, tile_size=None, is_transpose=False):
    """Compute ``stationary.T @ moving`` as the tensor engine does, into PSUM.

    Parameters
    ----------
    stationary : numpy.ndarray, shape [K, M]
        Stationary (weight) matrix; K is the partition (contraction) dimension. int8, or a
        float type: ``ml_dtypes.bfloat16``, ``numpy.float16``, ``ml_dtypes.float8_e4m3``,
        ``float8_e5m2``, ``float8_e3m4``, ``float8_e4m3fn``, or a 32-bit one:
        :data:`~systolica.golden.TFLOAT32`, ``numpy.float32``.
    moving : numpy.ndarray, shape [K, N]
        Moving matrix: int8 if ``stationary`` is; ``tfloat32``/``float32`` if
        ``stationary`` is one of them; else any of the 8/16-bit float types.
    psum : numpy.ndarray, shape [M, N], optional
        PSUM contents before the matmul: int32 for int8 operands, float32 for float ones.
        Required when ``accumulate`` is true; never read when it is false.
    accumulate : bool
        ``False`` overwrites PSUM (``psum`` is not read); ``True`` adds into ``psum``.
    ftz : bool
        Float only: ``True`` flushes subnormal operands (inputs subnormal in their own type,
        PSUM) and subnormal products and sums to zero of the same sign; ``False`` (default) is
        IEEE mode with gradual underflow.
    perf_mode : None or "double_row"
        ``"double_row"``: both operands ``float8_e4m3``/``float8_e5m2``, K up to
        ``2 * rows``; partition row r holds k = r and k = r + rows and the column chain runs
        k = 0, rows, 1, rows + 1, ... (elements at or beyond K add nothing).
    rows : int
        Partition rows of the array, which the model takes as ``rows x rows`` PEs (default
        128 x 128, the NeuronCore's); double-row's pairing uses the tile's rows.
    tile_position, tile_size : (int, int) or None
        Row/column tiling (:func:`~systolica.golden.tiles.check_tile`): both None (default)
        for the whole array, or both given; then K <= the tile's rows (2 x in double-row),
        M <= its columns. Tiling does not change the numbers: the result is that of the same
        matmul on the whole array (with double-row pairs k = r and r + the tile's rows); the
        tile's PSUM partitions are ``Tile.partitions(M)``.
    is_transpose : bool
        Transpose mode (bit-accurate, NeuronCore-v3 and later): ``moving`` must select one
        partition per column (each column exactly one element equal to 1, the rest zero;
        the identity for a full transpose) and ``result[m, n] = stationary[k_n, m]``, the
        stored bits moved unchanged (NaN payloads, Inf, -0, subnormals), written as
        ``OperandFormat.transpose_dtype`` elements. No ``accumulate``, ``ftz`` or
        ``perf_mode``.

    Returns
    -------
    numpy.ndarray, shape [M, N]
        The new PSUM contents.
        int8: int32, exact sums wrapped modulo 2**32 (two's complement).
        float: float32; per column, ``acc = p[k0]``, then ``acc = acc + p[k]`` for the next k
        of the chain (k ascending, or double-row's order), each product and add rounded once
        to FP32 (RNE; a product with a float32 operand can need it, the others only outside
        the normal range), then ``psum + acc`` with one more rounding when accumulating; NaN
        is 0x7FC00000. See :mod:`systolica.golden.bf16` and ``docs/numerics.md``.
        Transpose: the stationary type for 16/32-bit types, uint16 (upper 8 bits zero) for
        8-bit types.

    Raises
    ------
    TypeError
        If an operand is not a numpy array of an operand type, int8 is paired with a float
        type, a 32-bit type with an 8/16-bit one, double-row gets another type than
        e4m3/e5m2, ``psum`` has the wrong dtype, or ``accumulate``/``ftz``/``is_transpose``
        is not a bool.
    ValueError
        If an operand is not 2-D, the K dimensions differ, K is 0 for a float matmul, K >
        2 * rows in double-row, ``perf_mode`` is unknown, ``psum`` has the wrong shape,
        ``accumulate`` is true without ``psum``, ``ftz`` is true for int8, a tile rule is
        broken, or a transpose gets a mode it does not take or a ``moving`` that does not
        select one partition per column.
    RuntimeError
        Float only: the CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    pair = check_operands(stationary, moving, perf_mode=perf_mode)
    check_bool("accumulate", accumulate)
    check_transpose(is_transpose, perf_mode=perf_mode, accumulate=accumulate, ftz=ftz)
    check_positive("rows", rows)
    tile = check_tile(tile_position, tile_size, rows=rows, cols=rows)
    if tile_size is not None or is_transpose:   # a transpose's data must fit the array too
        check_tile_operands(tile, stationary.shape[0], stationary.shape[1], cols=rows,
                            perf_mode=perf_mode)
    order = _check_float_options(pair, stationary.shape[0], ftz, perf_mode, tile.rows,
                                 is_transpose)
    psum_dtype = pair[0].transpose_dtype if is_transpose else pair[0].psum_dtype
    out_shape = (stationary.shape[1], moving.shape[1])
    if accumulate and psum is None:
        raise ValueError(f"accumulate=True needs psum, the [M, N] {psum_dtype.name} PSUM "
                         f"contents to add to")
    if psum is not None:
        _check_matrix("psum", psum, psum_dtype)
        if psum.shape != out_shape:
            raise ValueError(f"psum must have shape [M, N] = {out_shape}, not {psum.shape}")

    if is_transpose:
        return _transpose(stationary, moving, pair[0])
    if pair[0].is_float:
        return fp32_chain(decode(stationary, ftz=ftz), decode(moving, ftz=ftz), psum,
                          accumulate, ftz, order)

    # Exact: |sum| <= K * 2**14, so int64 never overflows for any K below 2**49.
    wide = stationary.astype(np.int64).T @ moving.astype(np.int64)
    return psum_accumulate(psum, wrap_int32(wide)) if accumulate else wrap_int32(wide)


def _transpose(stationary, moving, fmt):
    """Transpose mode: each moving column selects the partition whose stationary row it
    passes on, bits unchanged."""
    values = decode(moving) if fmt.is_float else moving.astype(np.float32)
    ones, zeros = values == 1, values == 0
    if not (ones | zeros).all() or (ones.sum(axis=0) != 1).any():
        raise ValueError("is_transpose=True needs a moving matrix with exactly one 1 in each "
                         "column and zeros elsewhere (the identity for a full transpose)")
    words = stationary.view(f"u{fmt.width // 8}")[ones.argmax(axis=0)].T
    return np.ascontiguousarray(words).astype(f"u{max(fmt.width, 16) // 8}").view(
        fmt.transpose_dtype)


def nc_transpose(data, *, rows=ENGINE_ROWS, tile_position=None, tile_size=None):
    """Transpose ``data`` on the tensor engine (``nki.isa.nc_transpose`` on TensorE):
    ``nc_matmul(data, identity, is_transpose=True)``, bit-accurate.

    Parameters
    ----------
    data : numpy.ndarray, an operand type, shape [P, F]
        P partitions (at most the tile's rows), F elements each (at most its columns).
    rows, tile_position, tile_size
        As :func:`nc_matmul`.

    Returns
    -------
    numpy.ndarray, shape [F, P]
        ``data.T`` bit for bit, in the PSUM element type
        (:attr:`~systolica.golden.formats.OperandFormat.transpose_dtype`): the input's type
        for 16- and 32-bit types, uint16 with the 8 bits in the low byte for 8-bit types.

    Raises
    ------
    TypeError, ValueError
        As :func:`nc_matmul`.
    """
    if not isinstance(data, np.ndarray):
        raise TypeError(f"data must be a numpy array of an operand type, not "
                        f"{type(data).__name__}")
    if data.ndim != 2:
        raise ValueError(f"data must be 2-D [P, F], not {data.ndim}-D with shape {data.shape}")
    return nc_matmul(data, identity(data.shape[0], data.dtype), rows=rows,
                     tile_position=tile_position, tile_size=tile_size, is_transpose=True)


def nc_matmul_batch(stationary, moving, *, ftz=False, perf_mode=None, rows=ENGINE_ROWS):
    """``nc_matmul(stationary[b], moving[b], ftz=ftz, perf_mode=perf_mode, rows=rows)`` for
    every ``b`` of a batch at once (overwriting: no PSUM), bit for bit the same.

    The testbench computes a whole program's matmuls of one shape with it; accumulating into
    PSUM is :func:`psum_accumulate` of the stored value and this result, which is what
    ``nc_matmul(..., accumulate=True)`` computes.

    Parameters
    ----------
    stationary : numpy.ndarray, an operand type, shape [B, K, M]
    moving : numpy.ndarray, an operand type that pairs with it, shape [B, K, N]
    ftz, perf_mode, rows
        As :func:`nc_matmul`.

    Returns
    -------
    numpy.ndarray, int32 or float32, shape [B, M, N]

    Raises
    ------
    TypeError, ValueError
        As :func:`nc_matmul`, for the stacks (which must be 3-D with equal B and K).
    RuntimeError
        Float only: the CPU's FP mode (FTZ/DAZ) would make the model inexact.
    """
    pair = check_operands(stationary, moving, perf_mode=perf_mode, ndim=3)
    order = _check_float_options(pair, stationary.shape[1], ftz, perf_mode, rows)
    if pair[0].is_float:
        return fp32_chain_batch(decode(stationary, ftz=ftz), decode(moving, ftz=ftz), ftz,
                                order)
    wide = np.einsum("bkm,bkn->bmn", stationary.astype(np.int64), moving.astype(np.int64))
    return wrap_int32(wide)
