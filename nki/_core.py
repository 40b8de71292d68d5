"""The NKI front end's runtime: targets, data types, buffers and tensor views, the loop
context, the instruction recorder and the one-line kernel errors.

Every ``nki.language`` / ``nki.isa`` call runs eagerly in numpy inside a :class:`Run` (made by
:func:`systolica.nki.simulate` and friends) and appends one
:class:`~systolica.nki.instructions.Instruction` per hardware instruction to it.

Tensors live in buffers (``sbuf``, ``psum``, ``hbm``) with the partition dimension first: a
:class:`Tensor` is a view (basic ranges, or integer index arrays from ``nl.arange`` /
``nl.mgrid`` expressions) of one :class:`Buffer`.
"""

import math
import os
import sys
import warnings
import weakref
from dataclasses import dataclass
from functools import cache

import ml_dtypes
import numpy as np

from systolica.golden import as_tfloat32
from systolica.scaling.hardware import load_hardware

from .instructions import Access, Instruction

_HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- errors

class NkiError(Exception):
    """A kernel broke a rule of the NKI model; the message is one line:
    ``file.py:LINE: instruction: rule``."""


class NkiWarning(UserWarning):
    """A kernel did something the hardware allows but that is probably wrong (one line,
    ``file.py:LINE: instruction: what``)."""


def _internal(filename):
    """Whether a frame's file is part of the front end itself (not a kernel, also not the
    project's own kernels in ``nki/kernels``)."""
    return os.path.dirname(os.path.abspath(filename)) == _HERE


def kernel_line():
    """``"file.py:LINE"`` of the innermost frame outside the front end (the kernel line that
    made the current call)."""
    frame = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "<unknown>:0"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def fail(opcode, rule, line=None):
    """An :class:`NkiError` naming the kernel line, the instruction and the rule."""
    return NkiError(f"{line or kernel_line()}: {opcode}: {rule}")


def warn(opcode, what):
    """Issue an :class:`NkiWarning` (and keep it in the current run's ``warnings``)."""
    message = f"{kernel_line()}: {opcode}: {what}"
    if _RUN is not None:
        _RUN.warnings.append(message)
    warnings.warn(message, NkiWarning, stacklevel=2)


# --------------------------------------------------------------------------- targets

KIB = 1024


@dataclass(frozen=True)
class Target:
    """On-chip memory figures of one NeuronCore generation that the checks enforce, read
    from the scaling layer's hardware preset (``scaling/presets/hw/<name>.toml``, where each
    figure carries its source): one copy of each figure.

    Attributes
    ----------
    name : str
        ``"trn1"`` (NeuronCore-v2), ``"trn2"`` (NeuronCore-v3) or ``"trn3"``
        (NeuronCore-v4).
    core : str
    nc_version : int
        2, 3 or 4 (``nki.isa.nc_version``), from the preset's core name.
    sbuf_bytes, psum_bytes : int
        Bytes per partition: ``[core.engines] sbuf_partition`` / ``psum_partition`` (SBUF
        192 KiB v2, 224 KiB v3, 256 KiB v4; PSUM 16 KiB).
    psum_bank_bytes : int
        One PSUM bank per partition: ``[tile] psum_bank_depth`` FP32 words (512: 2 KiB).
    double_row : bool
        FP8 ``perf_mode="double_row"``: NeuronCore-v3 and later (``nki.isa.nc_matmul``).
    mx : bool
        ``nc_matmul_mx`` / ``quantize_mx``: NeuronCore-v4 and later (their API reference).
    """

    name: str
    core: str
    nc_version: int
    sbuf_bytes: int
    psum_bytes: int
    psum_bank_bytes: int
    double_row: bool
    mx: bool


#: Presets the front end runs kernels on.
TARGET_NAMES = ("trn1", "trn2", "trn3")
#: Partitions of SBUF and PSUM, and the tensor engine's rows and columns.
PMAX = 128
#: Largest free size of the moving operand (one PSUM bank of FP32).
MOVING_FMAX = 512
#: Largest free size of the stationary operand (the PE columns).
STATIONARY_FMAX = 128


@cache
def target(name):
    """The :class:`Target` named ``name`` (one of :data:`TARGET_NAMES`), from its hardware
    preset."""
    if name not in TARGET_NAMES:
        raise ValueError(f"unknown target {name!r}; use one of {', '.join(TARGET_NAMES)}")
    hw = load_hardware(name)
    engines = hw.core.engines
    version = int(hw.core.name.rsplit("-v", 1)[1])
    return Target(name, hw.core.name, version, int(engines.sbuf_partition_bytes),
                  int(engines.psum_partition_bytes), hw.tile.psum_bank_depth * 4,
                  version >= 3, version >= 4)


# --------------------------------------------------------------------------- data types

class _TF32:
    """``nl.tfloat32``: FP32 storage, 10 significand bits (no numpy type of its own)."""

    name = "tfloat32"
    itemsize = 4

    def __repr__(self):
        return "tfloat32"


TFLOAT32 = _TF32()


class X4:
    """An x4-packed MX element type (``nl.float8_e4m3fn_x4``, ``float8_e5m2_x4``,
    ``float4_e2m1fn_x4``): one tile element is a word of four MX elements, lane j in bits
    8 j + 7 .. 8 j (FP8, 32-bit words) or 4 j + 3 .. 4 j (FP4, 16-bit words), first element
    lowest (NKI API reference, ``nki.isa.nc_matmul_mx`` "Data types"; the packing of
    :func:`systolica.golden.mx.pack_x4`). Stored as those unsigned words.

    Attributes
    ----------
    name : str
    element : numpy.dtype
        The MX element type (``ml_dtypes.float8_e4m3fn``...).
    storage : numpy.dtype
        uint32 (FP8) or uint16 (FP4).
    """

    def __init__(self, name, element, storage):
        self.name, self.element, self.storage = name, np.dtype(element), np.dtype(storage)
        self.itemsize = self.storage.itemsize

    def __repr__(self):
        return self.name


X4_TYPES = {x.name: x for x in (
    X4("float8_e4m3fn_x4", ml_dtypes.float8_e4m3fn, np.uint32),
    X4("float8_e5m2_x4", ml_dtypes.float8_e5m2, np.uint32),
    X4("float4_e2m1fn_x4", ml_dtypes.float4_e2m1fn, np.uint16))}


def np_dtype(dtype):
    """The numpy dtype that stores ``dtype`` (float32 for ``tfloat32``, the packed words for
    an :class:`X4` type)."""
    if dtype is TFLOAT32:
        return np.dtype(np.float32)
    if isinstance(dtype, X4):
        return dtype.storage
    if dtype is bool:
        return np.dtype(np.bool_)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise fail("dtype", f"{dtype!r} is not a data type; use nl.bfloat16, nl.float32, "
                            f"nl.float8_e4m3, nl.int8, ...") from None


def dtype_name(dtype):
    """The ml_dtypes / numpy name of a dtype (``"bfloat16"``, ``"tfloat32"``...)."""
    if dtype is TFLOAT32 or isinstance(dtype, X4):
        return repr(dtype)
    return np_dtype(dtype).name


def cast(values, dtype):
    """``values`` (float32, or integers) converted to ``dtype`` as the engines write it:
    float types round to nearest even (ml_dtypes / numpy casts; no saturation: values
    beyond the type's range become Inf, or NaN for ``float8_e4m3fn``), ``tfloat32`` keeps 10
    significand bits (RNE, :func:`systolica.golden.as_tfloat32`), integer types round to
    nearest even and saturate, ``bool_`` is ``values != 0``."""
    values = np.asarray(values)
    if dtype is TFLOAT32:
        return as_tfloat32(values.astype(np.float32)).view(np.float32)
    if isinstance(dtype, X4):
        if values.dtype != dtype.storage:
            raise fail("cast", f"{dtype.name} tiles take packed {dtype.storage.name} words "
                               f"(golden.mx.pack_x4), not {values.dtype.name} values; "
                               f"quantize with nisa.quantize_mx")
        return values
    dt = np_dtype(dtype)
    if dt == values.dtype:
        return values
    if dt == np.bool_:
        return values != 0
    if dt.kind in "iu":
        if values.dtype.kind in "iub":
            wide = values.astype(np.int64)
        else:
            with np.errstate(invalid="ignore"):
                wide = np.nan_to_num(np.rint(values.astype(np.float64)))
        info = np.iinfo(dt)
        return np.clip(wide, info.min, info.max).astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dt)


def to_f32(values):
    """Engine input conversion: every element to float32 (exact for the float types and
    for integers up to 2**24)."""
    values = np.asarray(values)
    return values if values.dtype == np.float32 else values.astype(np.float32)


# --------------------------------------------------------------------------- buffers

MEMORIES = ("sbuf", "psum", "hbm")


class Buffer:
    """One allocation.

    Attributes
    ----------
    id : int
        Identity (allocations never overlap).
    memory : str
        ``"sbuf"``, ``"psum"`` or ``"hbm"``.
    data : numpy.ndarray
        The contents (zeros when allocated).
    dtype : numpy dtype or TFLOAT32
    par_axis : int or None
        The partition axis (SBUF/PSUM; ``nl.par_dim`` marks it, else axis 0).
    name : str
    matmul_open : numpy.ndarray of bool or None
        PSUM only: words a matmul wrote that no other instruction has read since (an open
        accumulation group).
    """

    def __init__(self, run, memory, shape, dtype, par_axis=None, name=""):
        self.id = run.next_id()
        self.memory = memory
        self.dtype = dtype
        self.data = np.zeros(shape, dtype=np_dtype(dtype))
        self.par_axis = par_axis
        self.name = name
        self.matmul_open = np.zeros(shape, dtype=bool) if memory == "psum" else None
        self.written = False

    @property
    def shape(self):
        return self.data.shape

    def partition_bytes(self):
        """Bytes per partition (SBUF/PSUM) or of the whole tensor (HBM)."""
        shape = list(self.data.shape)
        if self.par_axis is not None:
            shape.pop(self.par_axis)
        return math.prod(shape) * self.data.itemsize


def _range_of(r):
    return slice(r.start, r.stop, r.step)


class Tensor:
    """A tile or tensor: a view of one :class:`Buffer` (``nl.ndarray``'s instances).

    Attributes
    ----------
    shape : tuple of int
        The view's shape; for SBUF/PSUM tiles the first dimension is the partition one.
    dtype
        The buffer's data type.
    buffer : Buffer
    """

    def __init__(self, buffer, basic=None, arrays=None, oob=None):
        self.buffer = buffer
        self._basic = basic if basic is not None or arrays is not None else tuple(
            range(n) for n in buffer.shape)
        self._arrays = arrays
        self._oob = oob
        if arrays is not None:
            self._basic = None
            self.shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
        else:
            self.shape = tuple(len(c) for c in self._basic if isinstance(c, range))
        self.pending = None        # index of the instruction that produced this fresh tile

    # ----- properties NKI code reads
    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def buffer_name(self):
        return self.buffer.memory

    @property
    def memory(self):
        return self.buffer.memory

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (f"<nki tensor {self.buffer.name or self.buffer.id} {self.buffer.memory} "
                f"{list(self.shape)} {dtype_name(self.dtype)}>")

    # ----- indexing
    def __getitem__(self, key):
        key = _expand_key(key, len(self.shape))
        if self._basic is not None and not any(isinstance(k, np.ndarray) for k in key):
            return Tensor(self.buffer, basic=self._compose_basic(key))
        return self._compose_arrays(key)

    def _compose_basic(self, key):
        out, it = [], iter(key)
        for dim, comp in zip(range(len(self._basic)), self._basic, strict=True):
            del dim
            if isinstance(comp, int):
                out.append(comp)
                continue
            k = next(it)
            n = len(comp)
            if isinstance(k, slice):
                start, stop, step = _check_slice(k, n)
                out.append(comp[start:stop:step])
            else:
                if not 0 <= k < n:
                    raise fail("index", f"index {k} is out of bounds for a dimension of "
                                        f"size {n}")
                out.append(comp[k])
        return tuple(out)

    def _positions(self):
        """Per buffer dimension, the positions this view touches as arrays broadcastable to
        ``self.shape``."""
        if self._arrays is not None:
            return self._arrays
        rank, axis, out = len(self.shape), 0, []
        for comp in self._basic:
            if isinstance(comp, int):
                out.append(np.array(comp))
            else:
                shape = [1] * rank
                shape[axis] = len(comp)
                out.append(np.arange(comp.start, comp.stop, comp.step).reshape(shape))
                axis += 1
        return tuple(out)

    def _compose_arrays(self, key):
        key = _orient(key)
        rank = max([k.ndim for k in key if isinstance(k, np.ndarray)] +
                   [sum(not isinstance(k, int | np.integer) for k in key)])
        comps, axis = [], 0
        for k, n in zip(key, self.shape, strict=True):
            if isinstance(k, slice):
                start, stop, step = _check_slice(k, n)
                shape = [1] * rank
                shape[axis] = len(range(start, stop, step))
                comps.append(np.arange(start, stop, step).reshape(shape))
                axis += 1
            elif isinstance(k, np.ndarray):
                if k.dtype.kind not in "iu":
                    raise fail("index", f"index arrays must be integers, not {k.dtype}")
                comps.append(k.astype(np.int64))
                axis += 1
            else:
                comps.append(np.array(int(k)))
        oob = None
        clipped = []
        for c, n in zip(comps, self.shape, strict=True):
            bad = (c < 0) | (c >= n)
            if bad.any():
                oob = bad if oob is None else oob | bad
            clipped.append(np.clip(c, 0, max(n - 1, 0)))
        out_shape = np.broadcast_shapes(*(c.shape for c in clipped))
        positions = [np.broadcast_to(p, self.shape)[tuple(clipped)] for p in self._positions()]
        if self._oob is not None:
            old = np.broadcast_to(self._oob, self.shape)[tuple(clipped)]
            oob = old if oob is None else oob | old
        if oob is not None:
            oob = np.broadcast_to(oob, out_shape)
        return Tensor(self.buffer, arrays=tuple(positions), oob=oob)

    def _np_index(self):
        if self._arrays is not None:
            return self._arrays
        return tuple(c if isinstance(c, int) else _range_of(c) for c in self._basic)

    # ----- data access
    def _check_oob(self, mask, opcode):
        if self._oob is None:
            return
        bad = self._oob if mask is None else \
            self._oob & np.broadcast_to(fit_mask(mask, self.shape), self.shape)
        if bad.any():
            where = tuple(int(i[0]) for i in np.nonzero(bad))
            raise fail(opcode, f"out-of-bounds access of {self.buffer.memory} tensor "
                               f"{self.buffer.name or self.buffer.id} of shape "
                               f"{list(self.buffer.shape)} at tile element {list(where)} "
                               f"(index expression beyond the tensor; mask it or shrink it)")

    def read(self, mask=None, opcode="read"):
        """The view's values (a numpy copy of ``self.shape``); masked-off elements read 0."""
        self._check_oob(mask, opcode)
        values = np.array(self.buffer.data[self._np_index()]).reshape(self.shape)
        if mask is not None:
            values = np.where(np.broadcast_to(fit_mask(mask, self.shape), self.shape), values,
                              np.zeros((), values.dtype))
        return values

    def write(self, values, mask=None, opcode="write"):
        """Store ``values`` (already of the buffer's dtype, broadcast to ``self.shape``)."""
        self._check_oob(mask, opcode)
        values = np.broadcast_to(values, self.shape)
        self.buffer.written = True
        if mask is None:
            self.buffer.data[self._np_index()] = values
            return
        m = np.broadcast_to(fit_mask(mask, self.shape), self.shape)
        idx = tuple(np.broadcast_to(p, self.shape)[m] for p in self._positions())
        self.buffer.data[idx] = values[m]

    def _bounds(self):
        """Per buffer dimension ``(lo, hi)`` inclusive positions touched."""
        if self._arrays is None:
            return [(c, c) if isinstance(c, int) else (c[0], c[-1]) if len(c) else (0, -1)
                    for c in self._basic]
        return [(int(a.min()), int(a.max())) if a.size else (0, -1) for a in self._arrays]

    def access(self):
        """The :class:`~systolica.nki.instructions.Access` hull of this view."""
        buf = self.buffer
        bounds = self._bounds()
        item = buf.data.itemsize
        dims = list(buf.shape)
        if buf.par_axis is None:
            parts, free, fdims = (0, 1), bounds, dims
        else:
            lo, hi = bounds[buf.par_axis]
            parts = (lo, hi + 1)
            free = bounds[:buf.par_axis] + bounds[buf.par_axis + 1:]
            fdims = dims[:buf.par_axis] + dims[buf.par_axis + 1:]
        strides = [math.prod(fdims[i + 1:]) for i in range(len(fdims))]
        lo = sum(b[0] * s for b, s in zip(free, strides, strict=True))
        hi = sum(b[1] * s for b, s in zip(free, strides, strict=True))
        return Access(buf.memory, buf.id, parts, (lo * item, (hi + 1) * item))

    def contiguous_elements(self):
        """Elements of the longest contiguous run of this view in its buffer (a DMA
        chunk; in SBUF/PSUM a run never crosses a partition)."""
        if self._arrays is not None:
            last = np.broadcast_to(self._arrays[-1], self.shape)
            if self.shape and self.shape[-1] > 1 and np.all(np.diff(last, axis=-1) == 1):
                return self.shape[-1]
            return 1
        run = 1
        comps, dims = self._basic, self.buffer.shape
        if self.buffer.par_axis is not None:      # a descriptor stays in one partition
            comps, dims = comps[self.buffer.par_axis + 1:], dims[self.buffer.par_axis + 1:]
        for comp, n in zip(reversed(comps), reversed(dims), strict=True):
            if isinstance(comp, int):
                continue
            if comp.step != 1:
                return run
            run *= len(comp)
            if len(comp) != n:
                return run
        return run

    def reshape(self, shape):
        """The same elements in another shape (a whole, unsliced tensor only): a view
        sharing the buffer's data and identity."""
        shape = tuple(int(d) for d in (shape if isinstance(shape, tuple | list) else (shape,)))
        if self._basic is None or tuple(len(c) for c in self._basic) != self.buffer.shape:
            raise fail("reshape", "only a whole tensor (not a slice of one) can be reshaped")
        if math.prod(shape) != self.size:
            raise fail("reshape", f"cannot reshape {list(self.shape)} into {list(shape)}")
        if self.buffer.par_axis is not None and shape[0] != self.shape[0]:
            raise fail("reshape", f"an SBUF/PSUM tile keeps its partition dimension "
                                  f"{self.shape[0]}; {list(shape)} changes it")
        other = Buffer.__new__(Buffer)
        other.__dict__.update(self.buffer.__dict__)
        other.data = self.buffer.data.reshape(shape)
        if self.buffer.matmul_open is not None:
            other.matmul_open = self.buffer.matmul_open.reshape(shape)
        other.par_axis = None if self.buffer.par_axis is None else 0
        return Tensor(other)

    def ap(self, pattern, offset=0, **_kwargs):
        """An access-pattern view (NKI 0.6 ``tensor.ap``): ``pattern`` is ``[[stride, num],
        ...]``, partition first, strides in elements of this (whole) tensor laid out in
        row-major order from its first element plus ``offset``."""
        if self._basic is None or tuple(len(c) for c in self._basic) != self.buffer.shape:
            raise fail("ap", "an access pattern is modelled on a whole tensor only")
        rank = len(pattern)
        flat = np.full((1,) * rank, int(offset), dtype=np.int64)
        for axis, (stride, num) in enumerate(pattern):
            shape = [1] * rank
            shape[axis] = int(num)
            flat = flat + np.arange(int(num), dtype=np.int64).reshape(shape) * int(stride)
        if flat.min() < 0 or flat.max() >= self.buffer.data.size:
            raise fail("ap", f"access pattern {pattern} (offset {offset}) reaches beyond the "
                             f"{self.buffer.data.size} elements of the tensor")
        return Tensor(self.buffer, arrays=np.unravel_index(flat, self.buffer.shape))

    def broadcast_to(self, shape):
        """A [1, F...] tensor read as [P, F...] (every partition the same row): an index
        view, no copy."""
        shape = tuple(int(d) for d in shape)
        if len(shape) != len(self.shape) or self.shape[0] != 1 or \
                tuple(shape[1:]) != tuple(self.shape[1:]):
            raise fail("broadcast_to", f"only [1, ...] -> [P, ...] is modelled, not "
                                       f"{list(self.shape)} -> {list(shape)}")
        key = [np.zeros(shape[0], np.int64).reshape((-1,) + (1,) * (len(shape) - 1))]
        for axis, n in enumerate(shape[1:], start=1):
            k = [1] * len(shape)
            k[axis] = n
            key.append(np.arange(n).reshape(k))
        return self[tuple(key)]

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return self.size * self.buffer.data.itemsize

    # ----- operators (old-style NKI code): defined in language.py, attached there


class DynSlice:
    """``nl.ds(start, size)``: ``size`` elements from ``start`` (a slice)."""

    def __init__(self, start, size, step=1):
        self.start, self.size, self.step = int(start), int(size), int(step)

    def as_slice(self):
        return slice(self.start, self.start + self.size * self.step, self.step)


def _expand_key(key, rank):
    """The index ``key`` as one component per view dimension (ints, slices, int arrays)."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, DynSlice):
            k = k.as_slice()
        elif isinstance(k, Tensor):
            raise fail("index", "indexing with a tensor's values (dynamic indexing) is not "
                                "modelled; index with ints, slices, nl.ds or nl.arange")
        elif isinstance(k, np.ndarray) and k.ndim == 0:
            k = int(k)
        elif isinstance(k, list):
            k = np.asarray(k)
        elif isinstance(k, np.integer):
            k = int(k)
        out.append(k)
    if any(k is Ellipsis for k in out):
        at = out.index(Ellipsis)
        out[at:at + 1] = [slice(None)] * (rank - len(out) + 1)
    if len(out) > rank:
        raise fail("index", f"{len(out)} indices for a tensor of {rank} dimensions")
    out += [slice(None)] * (rank - len(out))
    for k in out:
        if not isinstance(k, int | slice | np.ndarray):
            raise fail("index", f"cannot index a tensor with {type(k).__name__}; use ints, "
                                f"slices, nl.ds or nl.arange expressions")
    return out


def _orient(key):
    """NKI index expressions name their tile axis by their position in the index: an
    expression that varies along one axis only (``nl.arange(n)``, an ``nl.mgrid`` row or
    column, or arithmetic on one) is laid along the axis of its position (the first
    non-integer index is the partition axis, the next ones the free axes). When one
    expression varies along several grid axes (``i_f1 * n + i_f2`` of a 3-axis
    ``nl.mgrid``), all are used as numpy broadcasts them."""
    arrays = [k for k in key if isinstance(k, np.ndarray)]
    if any(sum(d > 1 for d in k.shape) > 1 for k in arrays):
        return key          # an expression of several grid axes: numpy broadcasting
    rank = sum(not isinstance(k, int | np.integer) for k in key)
    out, axis = [], 0
    for k in key:
        if isinstance(k, np.ndarray) and sum(d > 1 for d in k.shape) <= 1:
            shape = [1] * rank
            shape[axis] = k.size
            out.append(k.reshape(shape))
        else:
            out.append(k)
        if not isinstance(k, int | np.integer):
            axis += 1
    return out


def fit_mask(mask, shape):
    """A ``mask=`` expression as a bool array broadcastable to the tile ``shape`` (an
    expression varying along one axis is laid along the tile axis of its length, the
    partition axis first)."""
    mask = np.asarray(mask, dtype=bool)
    try:
        np.broadcast_shapes(mask.shape, tuple(shape))
        if mask.ndim <= len(shape):
            return mask
    except ValueError:
        pass
    if sum(d > 1 for d in mask.shape) <= 1:
        for axis, n in enumerate(shape):
            if n == mask.size:
                out = [1] * len(shape)
                out[axis] = n
                return mask.reshape(out)
        if mask.size == 1:
            return mask.reshape(())
    raise fail("mask", f"mask of shape {list(mask.shape)} does not fit the tile "
                       f"{list(shape)}")


def _check_slice(k, n):
    """``(start, stop, step)`` of slice ``k`` on a dimension of size ``n``; a slice reaching
    beyond the dimension is an error (NKI does not clip)."""
    step = 1 if k.step is None else int(k.step)
    start = 0 if k.start is None else int(k.start)
    stop = n if k.stop is None else int(k.stop)
    if step <= 0 or start < 0 or stop > n or start > stop:
        raise fail("index", f"slice [{start}:{stop}{':' + str(step) if step != 1 else ''}] "
                            f"is out of bounds for a dimension of size {n}")
    return start, stop, step


# --------------------------------------------------------------------------- the run

class Run:
    """One kernel execution: the target, the instructions recorded so far, the loop
    context, the live allocations and the SPMD program ids.

    Attributes
    ----------
    target : Target
    instructions : list of Instruction
    warnings : list of str
    matmuls : list of dict
        Per ``nc_matmul``: the instruction index, its operands and golden sums, for the RTL
        check (``tensor_engine="rtl"``).
    """

    def __init__(self, target_name="trn2", tensor_engine="golden"):
        self.target = target(target_name)
        if tensor_engine not in ("golden", "rtl", "none"):
            raise ValueError(f"tensor_engine must be 'golden', 'rtl' or 'none' (shapes only), "
                             f"not {tensor_engine!r}")
        self.tensor_engine = tensor_engine
        self.instructions = []
        self.warnings = []
        self.matmuls = []
        self.transposes = []     # TensorE transposes: operands and words, for the RTL check
        self.mx_records = []     # nc_matmul_mx: elements, scale bits, result (the RTL check)
        self.rtl_rows = 128      # rows of the RTL check's tile (tensor_engine="rtl")
        self.loops = []
        self.program_ids = ()
        self.grid = ()
        self._ids = 0
        self._loop_ids = 0
        self.live = {"sbuf": [], "psum": []}     # (weak reference to a Buffer, line)
        self.shared = {}
        self.golden_seconds = 0.0       # wall time inside the golden tensor-engine model
        self.golden_cpu_seconds = 0.0   # and the CPU time of this process there

    def next_id(self):
        self._ids += 1
        return self._ids

    def next_loop_id(self):
        self._loop_ids += 1
        return self._loop_ids


_RUN = None


def current(what="this call"):
    """The active :class:`Run`; outside a kernel run, a one-line error."""
    if _RUN is None:
        raise NkiError(f"{kernel_line()}: {what}: called outside a kernel run; run the "
                       f"kernel with systolica.nki.simulate(kernel)(*arrays)")
    return _RUN


def active():
    """The active :class:`Run` or None."""
    return _RUN


def set_run(run):
    """Make ``run`` the active run (None to end it); returns the previous one."""
    global _RUN
    previous, _RUN = _RUN, run
    return previous


class LoopRange:
    """``nl.affine_range`` / ``sequential_range`` / ``static_range``: iterates like
    ``range`` and, inside a run, pushes ``(loop id, iteration, kind)`` on the loop
    context that every instruction records."""

    def __init__(self, kind, *args):
        self.kind = kind
        self.range = range(*(int(a) for a in args))

    def __len__(self):
        return len(self.range)

    def __iter__(self):
        run = _RUN
        if run is None:
            yield from self.range
            return
        entry = [run.next_loop_id(), 0, self.kind]
        run.loops.append(entry)
        try:
            for i in self.range:
                entry[1] = i
                yield i
        finally:
            run.loops.remove(entry)


def record(engine, opcode, reads, writes, *, partitions, elements, in_dtype, out_dtype,
           params=None, nbytes=None):
    """Append one :class:`Instruction` to the active run and return its index.

    ``reads`` and ``writes`` are tensors (views); ``nbytes`` defaults to the bytes written.
    """
    run = current(opcode)
    writes = [w for w in writes if w is not None]
    reads = [r for r in reads if r is not None]
    if nbytes is None:
        nbytes = sum(w.nbytes for w in writes)
    index = len(run.instructions)
    run.instructions.append(Instruction(
        index=index, engine=engine, opcode=opcode,
        reads=tuple(r.access() for r in reads), writes=tuple(w.access() for w in writes),
        partitions=int(partitions), elements=int(elements), in_dtype=dtype_name(in_dtype),
        out_dtype=dtype_name(out_dtype), nbytes=int(nbytes), params=dict(params or {}),
        loops=tuple(tuple(e) for e in run.loops), source=kernel_line()))
    for r in reads:
        if r.buffer.matmul_open is not None and engine != "tensor":
            r.buffer.matmul_open[r._np_index()] = False
    return index


def retarget(index, dst):
    """Make instruction ``index`` write ``dst`` instead of its fresh result tile (an NKI
    assignment ``dst[...] = expression`` writes the expression's result in place)."""
    run = current()
    ins = run.instructions[index]
    run.instructions[index] = Instruction(
        index=ins.index, engine=ins.engine, opcode=ins.opcode, reads=ins.reads,
        writes=(dst.access(),) + ins.writes[1:], partitions=ins.partitions,
        elements=ins.elements, in_dtype=ins.in_dtype, out_dtype=ins.out_dtype,
        nbytes=ins.nbytes, params=ins.params, loops=ins.loops, source=ins.source)


def allocate(shape, dtype, memory, name="", opcode="nl.ndarray"):
    """A new :class:`Tensor` over a fresh buffer, after the allocation checks: partition
    dimension at most 128, a PSUM tile within one 2 KiB bank, and SBUF/PSUM capacity per
    partition of the target. A buffer is live while the kernel holds a reference to it (a
    variable, a list, a view); a new allocation on the line of the newest live one replaces
    it (a loop's next iteration reuses the space)."""
    run = current(opcode)
    if memory not in MEMORIES:
        raise fail(opcode, f"unknown buffer {memory!r}; use nl.sbuf, nl.psum or nl.hbm")
    par_axis, dims = None, []
    for i, d in enumerate(shape):
        if isinstance(d, ParDim):
            par_axis = i
            d = d.size
        if not isinstance(d, int | np.integer) or d < 1:
            raise fail(opcode, f"shape {list(shape)} must hold positive ints")
        dims.append(int(d))
    if memory == "hbm":
        return Tensor(Buffer(run, memory, tuple(dims), dtype, None, name))
    if not dims:
        raise fail(opcode, "an SBUF/PSUM tile needs a partition dimension")
    par_axis = 0 if par_axis is None else par_axis
    if dims[par_axis] > PMAX:
        raise fail(opcode, f"partition dimension {dims[par_axis]} exceeds the {PMAX} "
                           f"partitions of {memory.upper()}")
    buf = Buffer(run, memory, tuple(dims), dtype, par_axis, name)
    t = run.target
    if memory == "psum":
        inner = dims[-1] * buf.data.itemsize if par_axis != len(dims) - 1 else 0
        if inner > t.psum_bank_bytes:
            raise fail(opcode, f"a PSUM tile must fit one {t.psum_bank_bytes // KIB} KiB bank "
                               f"per partition; [{', '.join(map(str, dims))}] "
                               f"{dtype_name(dtype)} needs {inner} bytes per partition")
    capacity = t.sbuf_bytes if memory == "sbuf" else t.psum_bytes
    site = kernel_line()
    live = [(ref, where) for ref, where in run.live[memory] if ref() is not None]
    # The newest buffer of this line is about to be replaced (a loop's next iteration
    # rebinding its variable): its space is reused. Older ones still referenced (kept in a
    # list, say) stay counted.
    newest = next((i for i in range(len(live) - 1, -1, -1) if live[i][1] == site), None)
    used = buf.partition_bytes() + sum(ref().partition_bytes() for i, (ref, _w) in
                                       enumerate(live) if i != newest)
    if used > capacity:
        raise fail(opcode, f"{memory.upper()} capacity exceeded on {t.name} ({t.core}): "
                           f"{capacity // KIB} KiB per partition, the live allocations need "
                           f"{used / KIB:g} KiB")
    live.append((weakref.ref(buf), site))
    run.live[memory] = live
    return Tensor(buf)


class ParDim:
    """``nl.par_dim(n)``: marks the partition dimension of an allocation's shape."""

    def __init__(self, size):
        self.size = int(size)

    def __index__(self):
        return self.size

    def __repr__(self):
        return f"par_dim({self.size})"


def hbm_tensor(array, name=""):
    """An HBM :class:`Tensor` holding a copy of the numpy ``array`` (a kernel argument)."""
    run = current("kernel argument")
    array = np.asarray(array)
    buf = Buffer(run, "hbm", array.shape, array.dtype, None, name)
    buf.data[...] = array
    return Tensor(buf)
