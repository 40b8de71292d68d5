"""``nki.language`` (``nl``): tensors, buffers, loops, index expressions, data types and the
tile-level functions of NKI, each mapped to the instruction the Neuron compiler would issue
(``docs/nki.md``, "Supported names").

- allocation: ``ndarray``, ``zeros``, ``ones``, ``full``, ``empty_like``, ``zeros_like``,
  ``shared_constant``; buffers ``sbuf``, ``psum``, ``hbm``, ``shared_hbm``, ``private_hbm``;
  ``par_dim``;
- loops: ``affine_range``, ``sequential_range``, ``static_range``; SPMD ``program_id``,
  ``num_programs``, ``program_ndim``;
- index expressions: ``arange``, ``mgrid``, ``ds``;
- data movement: ``load``, ``store`` (DMA), ``copy`` (VectorE);
- activation-type functions (ScalarE ``activation``): ``exp``, ``log``, ``tanh``,
  ``sigmoid``, ``relu``, ``gelu``, ``silu``, ``sqrt``, ``rsqrt``, ``sin``, ``erf``...;
- arithmetic (VectorE ``tensor_tensor`` / ``tensor_scalar``): ``add``, ``subtract``,
  ``multiply``, ``divide``, ``maximum``, ``minimum``, comparisons, bit operators,
  ``negative``, ``reciprocal``; ``where`` (VectorE ``select``);
- reductions (VectorE ``tensor_reduce``): ``max``, ``min``, ``sum``, ``prod``, ``mean``;
- TensorE: ``matmul`` (``nc_matmul``, with ``nc_transpose`` of ``x`` unless
  ``transpose_x=True``), ``transpose`` (``nc_transpose``).

Every function taking tiles runs eagerly inside a kernel run (:func:`systolica.nki.simulate`)
and returns a new SBUF tile (PSUM for ``matmul`` / ``transpose``).
"""

import builtins

import ml_dtypes
import numpy as np

from . import _core
from . import isa as nisa
from ._core import TFLOAT32, DynSlice, LoopRange, ParDim, Tensor, fail, np_dtype
from ._ops import ACTIVATIONS, ALU

# --------------------------------------------------------------------------- data types
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
tfloat32 = TFLOAT32
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
#: NeuronCore-v4 MX types: x4-packed elements (words of four) and the E8M0 scale type.
float8_e4m3fn_x4 = _core.X4_TYPES["float8_e4m3fn_x4"]
float8_e5m2_x4 = _core.X4_TYPES["float8_e5m2_x4"]
float4_e2m1fn_x4 = _core.X4_TYPES["float4_e2m1fn_x4"]
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)


class fp32:  # noqa: N801 (NKI's name)
    """``nl.fp32``: float32 limits."""

    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


# --------------------------------------------------------------------------- buffers
sbuf = "sbuf"
psum = "psum"
hbm = "hbm"
shared_hbm = "shared_hbm"
private_hbm = "private_hbm"
NkiTensor = Tensor
tensor = Tensor


def par_dim(size):
    """Mark the partition dimension in an allocation's shape (``(n, par_dim(128), f)``)."""
    return ParDim(size)


class tile_size:  # noqa: N801
    """``nl.tile_size``: hardware tile limits (AWS ``nki.language.tile_size``; the same on
    NeuronCore-v2 and -v3)."""

    pmax = _core.PMAX
    gemm_stationary_fmax = _core.STATIONARY_FMAX
    gemm_moving_fmax = _core.MOVING_FMAX
    psum_fmax = 512
    psum_fmax_bytes = 2048
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1


def ndarray(shape, dtype, buffer=None, name="", **_kwargs):
    """Allocate a tensor of ``shape`` (partition dimension first, or marked by
    ``par_dim``) and ``dtype`` in ``buffer`` (default ``sbuf``). Contents start as zeros
    (the hardware's are undefined). ``shared_hbm`` tensors of an SPMD launch are shared by
    all its programs (one per allocation line)."""
    buffer = buffer or sbuf
    if isinstance(shape, int | np.integer | ParDim):
        shape = (shape,)
    np_dtype(dtype)
    memory = "hbm" if buffer in (hbm, shared_hbm, private_hbm) else buffer
    run = _core.current("nl.ndarray")
    if buffer == shared_hbm and run.grid:
        key = (_core.kernel_line(), tuple(shape), str(dtype))
        if key not in run.shared:
            run.shared[key] = _core.allocate(tuple(shape), dtype, memory, name)
        return run.shared[key]
    return _core.allocate(tuple(shape), dtype, memory, name)


def full(shape, fill_value, dtype, buffer=None, name="", **_kwargs):
    """A new tensor filled with ``fill_value`` (one ``memset`` on VectorE for SBUF/PSUM)."""
    t = ndarray(shape, dtype, buffer, name)
    if t.memory == "hbm":
        t.buffer.data[...] = _core.cast(np.float32(fill_value), t.dtype)
        return t
    nisa.memset(dst=t, value=fill_value)
    return t


def zeros(shape, dtype, buffer=None, name="", **kwargs):
    """:func:`full` with 0."""
    return full(shape, 0, dtype, buffer, name, **kwargs)


def ones(shape, dtype, buffer=None, name="", **kwargs):
    """:func:`full` with 1."""
    return full(shape, 1, dtype, buffer, name, **kwargs)


def empty_like(a, dtype=None, buffer=None, name="", **_kwargs):
    """A new tensor of ``a``'s shape (contents zero)."""
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer_name, name)


def zeros_like(a, dtype=None, buffer=None, name="", **_kwargs):
    """:func:`zeros` of ``a``'s shape."""
    return zeros(a.shape, dtype or a.dtype, buffer or a.buffer_name, name)


def shared_constant(constant, dtype=None, **_kwargs):
    """An HBM tensor holding ``constant`` (a numpy array), converted to ``dtype``."""
    array = np.asarray(constant)
    return _core.hbm_tensor(_core.cast(array, dtype) if dtype is not None else array,
                            "constant")


# --------------------------------------------------------------------------- loops, SPMD

def affine_range(*args, **_kwargs):
    """``range`` whose iterations carry no dependence: they may overlap in time."""
    return LoopRange("affine", *args)


def sequential_range(*args, **_kwargs):
    """``range`` whose iterations run one after another (a loop-carried dependence)."""
    return LoopRange("sequential", *args)


def static_range(*args, **_kwargs):
    """``range`` unrolled by the compiler (iterations may overlap)."""
    return LoopRange("static", *args)


def program_id(axis=0):
    """This SPMD program's index along ``axis`` of the launch grid (0 outside a grid)."""
    run = _core.current("program_id")
    if not run.grid:
        return 0
    if not 0 <= axis < len(run.grid):
        raise fail("program_id", f"axis {axis} is outside the launch grid {list(run.grid)}")
    return run.program_ids[axis]


def num_programs(axes=None):
    """Programs of the SPMD launch along ``axes`` (all axes: their product; 1 outside a
    grid)."""
    run = _core.current("num_programs")
    grid = run.grid or (1,)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, int):
        return grid[axes] if axes < len(grid) else 1
    return int(np.prod([grid[a] for a in axes]))


def program_ndim():
    """Dimensions of the SPMD launch grid."""
    return len(_core.current("program_ndim").grid)


# --------------------------------------------------------------------------- index expressions

def arange(*args):
    """An index expression: ``numpy.arange`` of ints (use ``[:, None]`` / ``[None, :]`` to
    place it on the partition or free axis)."""
    return np.arange(*args)


class _Grid(tuple):
    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: index expressions (numpy open grids, one axis each),
    unpackable (``i_p, i_f = ...``) or read as ``.p`` / ``.x``. Where an expression of one
    grid axis is used in an index decides its tile axis (see ``Tensor.__getitem__``)."""

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        return _Grid(np.ogrid[key])


mgrid = _MGrid()


def ds(start, size, step=1):
    """A dynamic slice: ``size`` elements from ``start``."""
    return DynSlice(start, size, step)


# --------------------------------------------------------------------------- data movement

def load(src, mask=None, dtype=None, **_kwargs):
    """Load ``src`` (an HBM tensor view) into a new SBUF tile (one ``dma_copy``)."""
    if not isinstance(src, Tensor):
        raise fail("load", f"src must be a tensor, not {type(src).__name__}")
    tile = _core.allocate(src.shape, dtype or src.dtype, "sbuf", opcode="load")
    tile.pending = nisa._dma("dma_copy", tile, src, None if mask is None else
                             np.asarray(mask, dtype=bool))
    return tile


def store(dst, value, mask=None, **_kwargs):
    """Store ``value`` (a tile) into ``dst`` (an HBM tensor view) with one ``dma_copy``."""
    if not isinstance(value, Tensor):
        tile = full((dst.shape[0], int(np.prod(dst.shape[1:]))) if dst.ndim > 1 else
                    dst.shape, value, dst.dtype)
        value = tile[...]
    nisa._dma("dma_copy", dst, value, None if mask is None else np.asarray(mask, dtype=bool))


def copy(x, dtype=None, mask=None, **_kwargs):
    """A copy of tile ``x`` (VectorE ``tensor_copy``)."""
    return nisa.tensor_copy(src=x, dtype=dtype, mask=mask)


copy._nki_op = "copy"


# --------------------------------------------------------------------------- elementwise

def _result_dtype(*values):
    dts = [v.dtype for v in values if isinstance(v, Tensor)]
    if any(d is TFLOAT32 or np_dtype(d) == np.float32 for d in dts):
        return float32
    return dts[0]


def _activation_function(name):
    def function(x, dtype=None, mask=None, **_kwargs):
        if not isinstance(x, Tensor):
            return ACTIVATIONS[name](np.float32(x))
        return nisa.activation(op=name, data=x, dtype=dtype, mask=mask)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``{name}(x)`` of every element (ScalarE ``activation``, float32)."
    function._nki_op = name
    return function


def _binary(name):
    def function(x, y, dtype=None, mask=None, **_kwargs):
        xt, yt = isinstance(x, Tensor), isinstance(y, Tensor)
        if not xt and not yt:
            return ALU[name](np.float32(x), np.float32(y))
        dtype = dtype or _result_dtype(x, y)
        if xt and yt and list(x.shape) == list(y.shape):
            return nisa.tensor_tensor(data1=x, data2=y, op=name, dtype=dtype, mask=mask)
        if xt and (not yt or _is_vector(y, x)):
            return nisa.tensor_scalar(data=x, op0=name, operand0=y, dtype=dtype, mask=mask)
        if yt and (not xt or _is_vector(x, y)):
            return nisa.tensor_scalar(data=y, op0=name, operand0=x, reverse0=True,
                                      dtype=dtype, mask=mask)
        raise fail(name, f"shape mismatch: {list(x.shape)} and {list(y.shape)} (equal shapes, "
                         f"or one a [P, 1] vector, are allowed)")
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"``{name}(x, y)`` elementwise (VectorE ``tensor_tensor``, or "
                        f"``tensor_scalar`` for a scalar or a [P, 1] vector), float32.")
    function._nki_op = name
    return function


def _is_vector(v, t):
    return (isinstance(v, Tensor) and v.shape[0] == t.shape[0]
            and int(np.prod(v.shape[1:])) == 1)


for _name in ACTIVATIONS:
    if _name not in ("negative", "reciprocal", "copy"):
        globals()[_name] = _activation_function(_name)
for _name in ALU:
    if _name not in ("max", "min"):
        globals()[_name] = _binary(_name)
identity = globals()["identity"]
add, subtract, multiply, divide = (globals()[n] for n in ("add", "subtract", "multiply",
                                                          "divide"))
maximum, minimum, exp = globals()["maximum"], globals()["minimum"], globals()["exp"]


def negative(x, dtype=None, mask=None, **_kwargs):
    """``-x`` (VectorE ``tensor_scalar`` multiply by -1)."""
    return multiply(x, -1.0, dtype=dtype, mask=mask)


negative._nki_op = "negative"


def reciprocal(x, dtype=None, mask=None, **_kwargs):
    """``1 / x`` (VectorE ``reciprocal``)."""
    return nisa.reciprocal(data=x, dtype=dtype, mask=mask)


reciprocal._nki_op = "reciprocal"


def _reduction(name, op):
    def function(x, axis, dtype=None, mask=None, keepdims=False, **_kwargs):
        return nisa.tensor_reduce(op=op, data=x, axis=axis, dtype=dtype, mask=mask,
                                  keepdims=keepdims)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Reduce free axes with {op} (VectorE ``tensor_reduce``, float32)."
    function._nki_op = op
    return function


max = _reduction("max", "maximum")  # noqa: A001 (NKI's names)
min = _reduction("min", "minimum")  # noqa: A001
sum = _reduction("sum", "add")  # noqa: A001
prod = _reduction("prod", "multiply")


def mean(x, axis, dtype=None, mask=None, keepdims=False, **_kwargs):
    """Mean over free axes: ``tensor_reduce`` add, then ``tensor_scalar`` multiply by
    1 / n (two VectorE instructions), float32."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = int(np.prod([x.shape[a] for a in axes]))
    total = nisa.tensor_reduce(op="add", data=x, axis=axis, dtype=float32, mask=mask,
                               keepdims=keepdims)
    return nisa.tensor_scalar(data=total, op0="multiply", operand0=1.0 / n,
                              dtype=dtype or x.dtype)


def where(condition, x, y, dtype=None, mask=None, **_kwargs):
    """``x`` where ``condition`` is non-zero, else ``y`` (VectorE ``select``)."""
    return nisa.select(predicate=condition, on_true=x, on_false=y, dtype=dtype)


def softmax(x, axis=1, dtype=None, **_kwargs):
    """Softmax along the free axis of a 2-D tile: VectorE max, ScalarE exp(x - max) with a
    summing reduce, VectorE reciprocal and multiply."""
    if axis not in (1, -1) or x.ndim != 2:
        raise fail("softmax", "softmax is modelled along the free axis of a 2-D tile")
    neg_max = nisa.tensor_reduce(op="maximum", data=x, axis=1, negate=True, keepdims=True,
                                 dtype=float32)
    sums = ndarray((x.shape[0], 1), float32)
    e = nisa.activation(op="exp", data=x, bias=neg_max, reduce_op="add", reduce_res=sums,
                        dtype=float32)
    inv = nisa.reciprocal(data=sums, dtype=float32)
    return nisa.tensor_scalar(data=e, op0="multiply", operand0=inv, dtype=dtype or x.dtype)


# --------------------------------------------------------------------------- TensorE

def transpose(x, dtype=None, mask=None, **_kwargs):
    """``x.T`` of a [P <= 128, F <= 128] tile into PSUM (TensorE ``nc_transpose``)."""
    return nisa.nc_transpose(data=x, dtype=dtype, mask=mask)


def matmul(x, y, transpose_x=False, mask=None, **_kwargs):
    """``x @ y`` into a new PSUM tile (float32).

    ``transpose_x=True``: ``x`` is already [K, M] (the stationary operand) and this is one
    ``nc_matmul``. Otherwise ``x`` is [M, K]: it is transposed on TensorE (``nc_transpose``
    into PSUM), copied back to SBUF (VectorE ``tensor_copy``), then multiplied.
    """
    if not transpose_x:
        xt = nisa.nc_transpose(data=x)
        x = nisa.tensor_copy(src=xt, dtype=x.dtype)
    return nisa.nc_matmul(stationary=x, moving=y)


def broadcast_to(x, shape):
    """``x`` [1, F...] read as ``shape`` [P, F...] (an index view: every partition reads the
    same row; no instruction of its own)."""
    return x.broadcast_to(shape)


def device_print(prefix, x, **_kwargs):
    """Print ``prefix`` and the tile's values (numpy), as the simulator does."""
    values = x.read() if isinstance(x, Tensor) else x
    builtins.print(prefix, values)


# --------------------------------------------------------------------------- operators

def _setitem(self, key, value):
    dst = self[key]
    if isinstance(value, Tensor) and value._inplace:
        value._inplace = False
        return
    if isinstance(value, Tensor) and value.pending is not None and _may_adopt(dst, value):
        _adopt(dst, value)
        return
    if isinstance(value, Tensor):
        if dst.memory == "hbm" or value.memory == "hbm":
            nisa._dma("dma_copy", dst, value)
        else:
            nisa.tensor_copy(dst=dst, src=value)
        return
    nisa.memset(dst=dst, value=value)


def _may_adopt(dst, value):
    """Whether the instruction that produced the fresh tile ``value`` can write ``dst``
    itself: the same memory, or SBUF/PSUM for the engines that write both (TensorE writes
    PSUM only)."""
    if value.memory == dst.memory:
        return True
    run = _core.current()
    engine = run.instructions[value.pending].engine
    return engine in ("vector", "scalar", "gpsimd") and dst.memory in ("sbuf", "psum")


def _adopt(dst, value):
    """``dst[...] = value`` where ``value`` is the fresh result of one instruction: that
    instruction writes ``dst`` instead (no copy is issued)."""
    if list(value.shape) != list(dst.shape) and value.size != dst.size:
        raise fail("assignment", f"shape mismatch: {list(dst.shape)} = {list(value.shape)}")
    src = value.read().astype(np.float32) if np_dtype(value.dtype).kind == "f" else \
        value.read()
    dst.write(_core.cast(src.reshape(dst.shape), dst.dtype), opcode="assignment")
    run = _core.current()
    _core.retarget(value.pending, dst)
    if dst.buffer.matmul_open is not None and value.buffer.matmul_open is not None:
        dst.buffer.matmul_open[dst._np_index()] = True
    for m in run.matmuls:
        if m["index"] == value.pending:
            m["region"] = dst.access()
    value.pending = None


def _iadd(self, other):
    run = _core.current("+=")
    if isinstance(other, Tensor) and other.pending is not None and self.memory == "psum" and \
            run.instructions[other.pending].opcode == "nc_matmul":
        index = other.pending
        if list(other.shape) != list(self.shape):
            raise fail("nc_matmul", f"shape mismatch: PSUM tile {list(self.shape)} += "
                                    f"matmul result {list(other.shape)}")
        from systolica.golden import psum_accumulate
        prev = self.read().astype(np.float32)
        self.write(psum_accumulate(prev, other.read().astype(np.float32)), opcode="+=")
        _core.retarget(index, self)
        ins = run.instructions[index]
        run.instructions[index] = _core.Instruction(
            **{**ins.__dict__, "reads": ins.reads + (self.access(),),
               "params": dict(ins.params, accumulate=True)})
        self.buffer.matmul_open[self._np_index()] = True
        for m in run.matmuls:
            if m["index"] == index:
                m["region"] = self.access()
        other.pending = None
    else:
        result = add(self, other, dtype=self.dtype)
        _adopt(self, result)
    self._inplace = True
    return self


def _binop(name, reverse=False):
    def method(self, other):
        return globals()[name](other, self) if reverse else globals()[name](self, other)
    return method


Tensor._inplace = False
Tensor.__setitem__ = _setitem
Tensor.__iadd__ = _iadd
Tensor.__add__ = _binop("add")
Tensor.__radd__ = _binop("add", True)
Tensor.__sub__ = _binop("subtract")
Tensor.__rsub__ = _binop("subtract", True)
Tensor.__mul__ = _binop("multiply")
Tensor.__rmul__ = _binop("multiply", True)
Tensor.__truediv__ = _binop("divide")
Tensor.__rtruediv__ = _binop("divide", True)
Tensor.__pow__ = _binop("power")
Tensor.__neg__ = lambda self: negative(self)


def _isub(self, other):
    _adopt(self, subtract(self, other, dtype=self.dtype))
    self._inplace = True
    return self


def _imul(self, other):
    _adopt(self, multiply(self, other, dtype=self.dtype))
    self._inplace = True
    return self


Tensor.__isub__ = _isub
Tensor.__imul__ = _imul


#: The NKI names this module provides (docs/nki.md lists each with its engine).
__all__ = sorted(
    ["bfloat16", "float16", "float32", "tfloat32", "float8_e4m3", "float8_e5m2",
     "float8_e4m3fn", "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4",
     "float8_e8m0fnu", "int8", "int16", "int32", "uint8", "uint16", "uint32", "bool_", "fp32",
     "sbuf", "psum", "hbm", "shared_hbm", "private_hbm", "NkiTensor", "tensor", "par_dim",
     "tile_size", "ndarray", "full", "zeros", "ones", "empty_like", "zeros_like",
     "shared_constant", "affine_range", "sequential_range", "static_range", "program_id",
     "num_programs", "program_ndim", "arange", "mgrid", "ds", "load", "store", "copy",
     "negative", "reciprocal", "max", "min", "sum", "prod", "mean", "where", "softmax",
     "transpose", "matmul", "device_print", "broadcast_to"]
    + [n for n in ACTIVATIONS if n not in ("negative", "reciprocal", "copy")]
    + [n for n in ALU if n not in ("max", "min")])
