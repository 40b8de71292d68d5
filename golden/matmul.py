"""Bit-exact golden model of the tensor engine's ``nc_matmul``.

INT8 numerics: products are exact, sums are formed exactly in int64 and then wrapped to
INT32 two's complement (modulo 2**32), which is what an INT32 accumulator that wraps on
overflow produces whatever the order of the adds. numpy's ``int8 @ int8`` returns int8 and
is not used.
"""

import numpy as np

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


def _check_matrix(name, array, dtype):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(array).__name__}")
    if array.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, not {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, not {array.ndim}-D with shape {array.shape}")


def nc_matmul(stationary, moving, *, psum=None, accumulate=False):
    """Compute ``stationary.T @ moving`` as the tensor engine does, into PSUM.

    Parameters
    ----------
    stationary : numpy.ndarray, int8, shape [K, M]
        Stationary (weight) matrix; K is the partition (contraction) dimension.
    moving : numpy.ndarray, int8, shape [K, N]
        Moving matrix.
    psum : numpy.ndarray, int32, shape [M, N], optional
        PSUM contents before the matmul; required when ``accumulate`` is true.
    accumulate : bool
        ``False`` overwrites PSUM (``psum`` is not read); ``True`` adds into ``psum``.

    Returns
    -------
    numpy.ndarray, int32, shape [M, N]
        The new PSUM contents, wrapped modulo 2**32 (two's complement).

    Raises
    ------
    TypeError
        If an operand is not a numpy array of the dtype above.
    ValueError
        If an operand is not 2-D, the K dimensions differ, ``psum`` has the wrong shape,
        or ``accumulate`` is true without ``psum``.
    """
    _check_matrix("stationary", stationary, np.int8)
    _check_matrix("moving", moving, np.int8)
    if stationary.shape[0] != moving.shape[0]:
        raise ValueError(
            f"stationary [K, M] and moving [K, N] must share K; got stationary "
            f"{stationary.shape} and moving {moving.shape}")
    if not isinstance(accumulate, (bool, np.bool_)):
        raise TypeError(f"accumulate must be a bool, not {type(accumulate).__name__}")
    out_shape = (stationary.shape[1], moving.shape[1])
    if accumulate and psum is None:
        raise ValueError("accumulate=True needs psum, the [M, N] int32 PSUM contents to add to")
    if psum is not None:
        _check_matrix("psum", psum, np.int32)
        if psum.shape != out_shape:
            raise ValueError(f"psum must have shape [M, N] = {out_shape}, not {psum.shape}")

    # Exact: |sum| <= K * 2**14, so int64 never overflows for any K below 2**49.
    wide = stationary.astype(np.int64).T @ moving.astype(np.int64)
    if accumulate:
        wide = wide + psum.astype(np.int64)
    return wrap_int32(wide)
