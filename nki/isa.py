"""``nki.isa`` (``nisa``): the NeuronCore instructions, executed eagerly in numpy and recorded
for the engine timing model.

Both API generations are accepted: NKI 0.6's (``nisa.nc_matmul(dst, stationary, moving)``,
the result written into ``dst``; returns None) and the older ``neuronxcc.nki`` one
(``psum = nisa.nc_matmul(stationary, moving)``, the result returned in a new tile). A call
is taken as NKI 0.6 style when it passes ``dst=`` or one more leading tensor argument than
the older signature has.

Engines (``docs/nki.md`` lists every name): ``nc_matmul`` and ``nc_transpose`` on TensorE
(numerics: :func:`systolica.golden.nc_matmul`, bit-exact); ``activation`` on ScalarE;
``tensor_tensor``, ``tensor_scalar``, ``tensor_reduce``, ``tensor_scalar_reduce``,
``tensor_tensor_scan``, ``tensor_copy``, ``reciprocal``, ``memset`` and ``select`` on VectorE
(``engine=`` may move some to GpSimd or ScalarE); ``iota`` and ``affine_select`` on GpSimd;
``dma_copy`` on the DMA queues. Other engines compute in float32 and round their output to
the destination type (RNE).
"""

import enum
import math
import time

import ml_dtypes
import numpy as np

from systolica import golden
from systolica.golden import mx as golden_mx
from systolica.golden import psum_accumulate
from systolica.golden.command import MX_GROUP_ROWS

from . import _core
from ._core import TFLOAT32, Tensor, cast, dtype_name, fail, np_dtype, record, to_f32
from ._ops import ACTIVATIONS, ALU, BITWISE, REDUCTIONS, op_name


class engine(enum.Enum):  # noqa: N801 (NKI's name)
    """``nisa.engine``: the engine an instruction runs on."""

    unknown = "unknown"
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class matmul_perf_mode(enum.Enum):  # noqa: N801
    """``nisa.matmul_perf_mode``: ``none`` or ``double_row`` (FP8, NeuronCore-v3+)."""

    none = None
    double_row = "double_row"


class reduce_cmd(enum.Enum):  # noqa: N801
    """``nisa.reduce_cmd``: how ScalarE's per-partition reduce registers are used."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):  # noqa: N801
    """``nisa.dge_mode`` (descriptor generation; no effect on the model)."""

    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.Enum):  # noqa: N801
    """``nisa.oob_mode`` (no effect on the model: out-of-bounds accesses are errors)."""

    error = 0
    skip = 1


class nc_version(enum.IntEnum):  # noqa: N801
    """``nisa.nc_version``: the NeuronCore generation."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version():
    """The NeuronCore generation of the run's target (``nc_version.gen2`` for trn1,
    ``gen3`` for trn2)."""
    return nc_version(_core.current("get_nc_version").target.nc_version)


# --------------------------------------------------------------------------- helpers

def _bind(opcode, args, kwargs, names, n_old):
    """The arguments of a call as a dict with ``dst`` (None in the older style, where the
    result is returned). ``names``: NKI 0.6's positional parameter names, ``dst`` first;
    ``n_old``: leading tensor arguments of the older signature."""
    leading = 0
    for a in args:
        if not isinstance(a, Tensor):
            break
        leading += 1
    new = "dst" in kwargs or leading > n_old
    names = names if new else names[1:]
    if len(args) > len(names):
        raise fail(opcode, f"takes at most {len(names)} positional arguments "
                           f"({', '.join(names)}), got {len(args)}")
    bound = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key in bound:
            raise fail(opcode, f"got argument {key!r} twice")
        bound[key] = value
    bound.setdefault("dst", None)
    return bound


def _engine_name(value, default, allowed, opcode):
    if value is None or value is engine.unknown or value == "unknown":
        return default
    name = value.value if isinstance(value, engine) else str(value)
    if name not in allowed:
        raise fail(opcode, f"engine {name!r} cannot run {opcode}; allowed: "
                           f"{', '.join(allowed)}")
    return name


def _tile(t, opcode, role, memories=("sbuf", "psum")):
    """Check that ``t`` is an on-chip tile with at most 128 partitions."""
    if not isinstance(t, Tensor):
        raise fail(opcode, f"{role} must be a tile (nl.ndarray), not {type(t).__name__}")
    if t.memory not in memories:
        raise fail(opcode, f"{role} must be in {' or '.join(m.upper() for m in memories)}, "
                           f"not {t.memory.upper()}")
    if not t.shape:
        raise fail(opcode, f"{role} must have a partition dimension")
    if t.shape[0] > _core.PMAX:
        raise fail(opcode, f"{role} has partition dimension {t.shape[0]}; at most "
                           f"{_core.PMAX}")
    return t


def _strip(shape):
    shape = list(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape.pop()
    return shape


def _check_shape(opcode, role, shape, expected):
    if _strip(shape) != _strip(expected):
        raise fail(opcode, f"shape mismatch: {role} is {list(shape)} but the result is "
                           f"{list(expected)}")


def _free(t):
    return math.prod(t.shape[1:]) if len(t.shape) > 1 else 1


def _out(opcode, dst, shape, dtype, memory="sbuf"):
    """The destination tile: ``dst`` after the shape check, or a new tile (older style)."""
    if dst is None:
        return _core.allocate(tuple(shape), dtype, memory, opcode=opcode), True
    _tile(dst, opcode, "dst")
    _check_shape(opcode, "dst", dst.shape, shape)
    return dst, False


def _finish(index, tile, fresh):
    """Return value of an instruction: the new tile in the older style (remembering which
    instruction produced it), None in NKI 0.6 style."""
    if fresh:
        tile.pending = index
        return tile
    return None


def _scalar_or_vector(opcode, value, rows, role, mask=None):
    """An operand that is a scalar or a [P, 1] vector tile -> float32 broadcastable to
    [P, free...] (as a [P, 1] array), plus the tile (for the reads list)."""
    if isinstance(value, Tensor):
        _tile(value, opcode, role)
        if value.shape[0] != rows or _free(value) != 1:
            raise fail(opcode, f"shape mismatch: {role} must be a scalar or a [{rows}, 1] "
                               f"vector, not {list(value.shape)}")
        return to_f32(value.read(opcode=opcode)).reshape(rows, 1), value
    if isinstance(value, np.ndarray) and value.size > 1:
        raise fail(opcode, f"{role} must be a scalar or a tile, not a numpy array")
    if value is None:
        raise fail(opcode, f"{role} is missing")
    return np.float32(value), None


def _op(opcode, op, table, what):
    name = op_name(op)
    if name not in table:
        raise fail(opcode, f"{what} {getattr(op, '__name__', op)!r} is not supported; "
                           f"supported: {', '.join(sorted(table))}")
    return name


def _alu(opcode, op, a, b):
    name = _op(opcode, op, ALU, "operator")
    with np.errstate(all="ignore"):
        result = ALU[name](a, b)
    return result if name in BITWISE else np.asarray(result, dtype=np.float32)


def _mask(kw):
    mask = kw.get("mask")
    return None if mask is None else np.asarray(mask, dtype=bool)


def _dtype(kw, default):
    return kw.get("dtype") or default


# --------------------------------------------------------------------------- TensorE

def _golden_operand(values, dtype):
    """An SBUF tile's values as the golden model's operand array: ``tfloat32`` tiles (stored
    as float32 words here) are viewed as :data:`systolica.golden.TFLOAT32`."""
    if dtype is TFLOAT32:
        return np.ascontiguousarray(values, dtype=np.float32).view(golden.TFLOAT32)
    return values


def _from_transpose(words, dtype):
    """A golden transpose's PSUM elements back in the tile type ``dtype``: 8-bit types come
    as uint16 with the upper byte zero (``OperandFormat.transpose_dtype``), ``tfloat32`` as
    ``golden.TFLOAT32`` words."""
    if dtype is TFLOAT32:
        return words.view(np.float32)
    dt = np_dtype(dtype)
    if dt.itemsize == 1:
        return words.astype(np.uint8).view(dt)
    return words


def _golden(opcode, run, call, *args, **kwargs):
    """Run a golden-model function, timing it; its TypeError/ValueError (a broken operand,
    tile or mode rule, the golden model's own message) becomes the one-line kernel error."""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        return call(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise fail(opcode, str(error)) from None
    finally:
        run.golden_seconds += time.perf_counter() - start
        run.golden_cpu_seconds += time.process_time() - cpu


def _matmul_operand(opcode, t, role, double_row):
    _tile(t, opcode, role, memories=("sbuf",))
    if len(t.shape) == 3 and double_row and t.shape[1] == 2:
        values = t.read(opcode=opcode)
        values = np.concatenate([values[:, 0, :], values[:, 1, :]], axis=0)
    elif len(t.shape) != 2:
        raise fail(opcode, f"{role} must be a 2-D tile [partitions, free], not "
                           f"{list(t.shape)}")
    else:
        values = t.read(opcode=opcode)
    return _golden_operand(values, t.dtype)


def _check_integer_operands(opcode, s_dtype, m_dtype):
    """NKI's own rule (the golden model, being the tile's, takes int8): no integer matmul."""
    if any(np_dtype(d).kind in "iub" for d in (s_dtype, m_dtype)):
        raise fail(opcode, f"the tensor engine has no integer matmul (operands "
                           f"{dtype_name(s_dtype)} and {dtype_name(m_dtype)}); AWS's compiler "
                           f"converts integer matmuls to FP32: cast the operands to a float type")


def _tiling(opcode, run, tile_position, tile_size):
    """``(tile_position, tile_size)`` for the golden model (None, None for the whole array),
    after :func:`systolica.golden.check_tile` for the run's target (halves only on trn1)."""
    position = tuple(tile_position) if tile_position else None
    size = tuple(tile_size) if tile_size else None
    _golden(opcode, run, golden.check_tile, position, size, rows=_core.PMAX, cols=_core.PMAX,
            target=run.target.name)
    if position is None:
        return None, None
    return tuple(int(v) for v in position), tuple(int(v) for v in size)


def nc_matmul(*args, **kwargs):
    """``dst = stationary.T @ moving`` on TensorE, into PSUM (golden model, bit-exact).

    Parameters (NKI 0.6 order; the older style omits ``dst`` and returns a new PSUM tile)
    ----------
    dst : PSUM tile [M, N], float32
    stationary : SBUF tile [K, M]; K <= 128 partitions, M <= 128
    moving : SBUF tile [K, N]; N <= 512
        bfloat16, float16, float8_e4m3/e5m2/e4m3fn, or tfloat32/float32 with each other
        only (no integer types; the pair rules are the golden model's,
        :func:`systolica.golden.operand_formats`). ``perf_mode="double_row"`` (trn2) also
        takes [128, 2, M] / [128, 2, N] tiles: element [p, j] is k = p + 128 j (the golden
        model's double-row pairing).
    accumulate : bool or None
        True adds into ``dst`` (a warning if no matmul wrote those PSUM words: AWS calls a
        matmul accumulating onto PSUM a non-matmul initialised undefined); False overwrites;
        None (default) accumulates into words an earlier matmul wrote and no other engine
        has read since (an open accumulation group), else overwrites.
    is_transpose : bool
        Transpose mode (golden ``nc_matmul(is_transpose=True)``): ``moving`` selects one
        partition per column (an identity for a full transpose) and ``dst`` [M, N], of the
        stationary type, receives ``stationary``'s bits unchanged (``stationary.T`` for an
        identity moving). No ``accumulate`` or ``perf_mode``.
    is_stationary_onezero, is_moving_onezero : bool
        Performance hints (recorded; numerics unchanged; an FP32 matmul costs 2x instead
        of 4x with one).
    tile_position, tile_size : (row, column)
        Row/column tiling of the PE array (:func:`systolica.golden.check_tile` for the
        target: sizes 64/128 on trn1, 32/64/128 from trn2); the stationary tile must fit.
    perf_mode : None, "double_row" or ``matmul_perf_mode``

    Raises
    ------
    NkiError
        One line naming the kernel line and the rule broken.
    """
    opcode = "nc_matmul"
    kw = _bind(opcode, args, kwargs, ["dst", "stationary", "moving"], 2)
    run = _core.current(opcode)
    perf_mode = kw.get("perf_mode")
    if isinstance(perf_mode, matmul_perf_mode):
        perf_mode = perf_mode.value
    if perf_mode not in (None, "none", "double_row"):
        raise fail(opcode, f"perf_mode must be None or 'double_row', not {perf_mode!r}")
    perf_mode = None if perf_mode == "none" else perf_mode
    double_row = perf_mode == "double_row"
    if double_row and not run.target.double_row:
        raise fail(opcode, f"perf_mode='double_row' needs NeuronCore-v3 or later; target "
                           f"{run.target.name} is {run.target.core}")
    stationary, moving = kw.get("stationary"), kw.get("moving")
    s = _matmul_operand(opcode, stationary, "stationary", double_row)
    m = _matmul_operand(opcode, moving, "moving", double_row)
    if stationary.shape[0] != moving.shape[0]:
        raise fail(opcode, f"shape mismatch: stationary {list(stationary.shape)} and moving "
                           f"{list(moving.shape)} must have the same partition (K) size")
    k, mm, n = s.shape[0], s.shape[1], m.shape[1]
    if n > _core.MOVING_FMAX:
        raise fail(opcode, f"moving free size {n} exceeds {_core.MOVING_FMAX} (one PSUM bank "
                           f"of FP32)")
    if mm > _core.STATIONARY_FMAX:
        raise fail(opcode, f"stationary free size {mm} exceeds {_core.STATIONARY_FMAX} (the "
                           f"PE columns)")
    position, size = _tiling(opcode, run, kw.get("tile_position"), kw.get("tile_size"))
    is_transpose = kw.get("is_transpose", False)
    params = {"k": int(k), "m": int(mm), "n": int(n), "dtype": dtype_name(moving.dtype),
              "stationary_dtype": dtype_name(stationary.dtype), "perf_mode": perf_mode,
              "is_transpose": bool(is_transpose), "tile_position": position, "tile_size": size,
              "is_stationary_onezero": bool(kw.get("is_stationary_onezero", False)),
              "is_moving_onezero": bool(kw.get("is_moving_onezero", False))}
    if is_transpose:
        return _transpose_on_pe(opcode, run, kw, stationary, moving, s, m, params)
    _check_integer_operands(opcode, stationary.dtype, moving.dtype)
    if run.tensor_engine == "none":       # shapes only: the rules still checked, no sums
        _golden(opcode, run, golden.operand_formats, s.dtype, m.dtype, perf_mode=perf_mode)
        sums = np.zeros((mm, n), np.float32)
    else:
        sums = _golden(opcode, run, golden.nc_matmul, s, m, perf_mode=perf_mode,
                       rows=_core.PMAX, tile_position=position, tile_size=size)
    dst, fresh = _out(opcode, kw["dst"], (mm, n), np.float32, "psum")
    if dst.memory != "psum":
        raise fail(opcode, f"dst must be in PSUM, not {dst.memory.upper()}")
    if np_dtype(dst.dtype) != np.float32 or dst.dtype is TFLOAT32:
        raise fail(opcode, f"dst must be a float32 PSUM tile, not {dtype_name(dst.dtype)}")
    span = dst.access().span
    bank = run.target.psum_bank_bytes
    if span[0] // bank != (span[1] - 1) // bank:
        raise fail(opcode, f"the PSUM tile written (bytes {span[0]}..{span[1]} of each "
                           f"partition) crosses a {bank // 1024} KiB bank boundary")
    return _psum_write(opcode, run, dst, fresh, sums, kw.get("accumulate"), stationary, moving,
                       params, (s, m))


def _accumulate_mask(opcode, dst, accumulate):
    """Which PSUM words of ``dst`` an accumulating matmul adds into (bool [dst.shape]):
    ``accumulate=True`` all (a warning where no matmul wrote), False none, None the words of
    an open accumulation group."""
    opened = np.array(dst.buffer.matmul_open[dst._np_index()]).reshape(dst.shape)
    if accumulate is True and not opened.all():
        _core.warn(opcode, "accumulate=True onto PSUM that no matmul wrote (AWS: the first "
                           "matmul into a PSUM location must overwrite)")
    return opened if accumulate is None else np.full(dst.shape, bool(accumulate))


def _psum_write(opcode, run, dst, fresh, sums, accumulate, stationary, moving, params,
                operands, accumulated=None, mx=None):
    """Write a matmul's result into PSUM (overwrite or accumulate) and record it.
    ``accumulated(prev)``: the result added into the stored words (default
    ``golden.psum_accumulate(prev, sums)``); ``mx``: an ``nc_matmul_mx``'s elements, scale
    bits and destination type, kept for the RTL check (:mod:`systolica.nki.rtl`)."""
    add = _accumulate_mask(opcode, dst, accumulate)
    if add.any():
        prev = dst.read(opcode=opcode)
        summed = accumulated(prev) if accumulated else psum_accumulate(
            prev.astype(np.float32), sums)
        values = np.where(add, summed, sums)
    else:
        values = sums
    dst.write(values, opcode=opcode)
    dst.buffer.matmul_open[dst._np_index()] = True
    reads = [stationary, moving] + list(operands[2:]) + ([dst] if add.any() else [])
    params = dict(params, accumulate=bool(add.any()))
    index = record("tensor", opcode, reads, [dst], partitions=stationary.shape[0],
                   elements=params["n"], in_dtype=moving.dtype, out_dtype=dst.dtype,
                   params=params)
    if opcode == "nc_matmul":
        run.matmuls.append({"index": index, "stationary": operands[0], "moving": operands[1],
                            "perf_mode": params["perf_mode"], "sums": sums,
                            "region": dst.access()})
    elif opcode == "nc_matmul_mx" and run.tensor_engine == "rtl":
        if mx["dst_dtype"] == np.float32 and run.rtl_rows % MX_GROUP_ROWS:
            raise fail(opcode, f"the RTL check runs it on a tile generated with mx, whose rows "
                               f"must be a multiple of {MX_GROUP_ROWS} (whole scale "
                               f"groups), not {run.rtl_rows}; allowed: e.g. --rows 8 or 128, "
                               f"or --tensor-engine golden")
        run.mx_records.append({"index": index, **mx, "sums": sums, "region": dst.access()})
    return _finish(index, dst, fresh)


def _check_mx_target(opcode, run):
    if not run.target.mx:
        raise fail(opcode, f"MX instructions need NeuronCore-v4 (trn3); target "
                           f"{run.target.name} is {run.target.core}")


def _x4_operand(opcode, t, role):
    """An x4 SBUF tile [P, F] -> the golden model's [P, F, 4] MX elements."""
    _tile(t, opcode, role, memories=("sbuf",))
    if not isinstance(t.dtype, _core.X4) or len(t.shape) != 2:
        raise fail(opcode, f"{role} must be a 2-D tile of an x4 MX type "
                           f"({', '.join(_core.X4_TYPES)}), not {list(t.shape)} "
                           f"{dtype_name(t.dtype)}")
    return golden_mx.unpack_x4(t.read(opcode=opcode), t.dtype.element)


def _scale_operand(opcode, t, role, p, f):
    """A scale tile [>= rows, F] in the quadrant layout -> [P // 8, F] E8M0 bits."""
    _tile(t, opcode, role, memories=("sbuf",))
    rows = golden_mx.quadrant_rows(p // golden_mx.GROUP_PARTITIONS)
    if np_dtype(t.dtype) not in (np.dtype(np.uint8), np.dtype(ml_dtypes.float8_e8m0fnu)) \
            or len(t.shape) != 2 or t.shape[1] != f or t.shape[0] <= rows[-1]:
        raise fail(opcode, f"{role} must be a uint8/float8_e8m0fnu tile [{rows[-1] + 1}.., {f}] "
                           f"(one scale per 8 partitions x 4 lanes, group i at partition "
                           f"32 (i // 4) + i % 4), not {list(t.shape)} {dtype_name(t.dtype)}")
    return np.ascontiguousarray(t.read(opcode=opcode)[rows]).view(np.uint8)


def nc_matmul_mx(*args, **kwargs):
    """MX matmul on the NeuronCore-v4 TensorE (trn3), through :func:`golden.nc_matmul_mx`:
    the block scales applied in the instruction, ``dst[M, N] = (stationary * X_s).T @ (moving *
    X_m)`` over K = 4 P, FP32 accumulation, RNE to a BF16 ``dst``.

    Parameters (NKI 0.6 order: ``dst, stationary, moving, stationary_scale, moving_scale``)
    ----------
    dst : PSUM tile [M, N], float32 (N <= 512) or bfloat16 (N <= 1024)
    stationary : SBUF tile [P, M] of ``float8_e4m3fn_x4``, ``float8_e5m2_x4`` or
        ``float4_e2m1fn_x4`` (P a multiple of 32 up to 128, M <= 128); lane j of word [p, m]
        is row ``j * P + p`` of the logical [4 P, M] matrix
    moving : SBUF tile [P, N] of an x4 MX type
    stationary_scale, moving_scale : SBUF uint8 / ``float8_e8m0fnu`` tiles [P, M] and [P, N]
        in the quadrant layout (scale group i, data partitions 8 i .. 8 i + 7, at partition
        ``32 (i // 4) + i % 4``), as :func:`quantize_mx` writes them
    accumulate : bool or None
        As :func:`nc_matmul` (a BF16 PSUM word is upcast, added in FP32 and rounded back).

    Cost: the interval of a BF16 matmul of K = P (four MACs per PE per cycle: "Trainium3
    Architecture Guide for NKI", "Quad-MXFP8/MXFP4 Matmul Performance").
    """
    opcode = "nc_matmul_mx"
    kw = _bind(opcode, args, kwargs, ["dst", "stationary", "moving", "stationary_scale",
                                       "moving_scale"], 4)
    run = _core.current(opcode)
    _check_mx_target(opcode, run)
    stationary, moving = kw.get("stationary"), kw.get("moving")
    s = _x4_operand(opcode, stationary, "stationary")
    m = _x4_operand(opcode, moving, "moving")
    p, mm, n = s.shape[0], s.shape[1], m.shape[1]
    if p % 32 or moving.shape[0] != p:
        raise fail(opcode, f"stationary and moving need the same partition size, a multiple "
                           f"of 32 up to 128; got {list(stationary.shape)} and "
                           f"{list(moving.shape)}")
    s_scale = _scale_operand(opcode, kw.get("stationary_scale"), "stationary_scale", p, mm)
    m_scale = _scale_operand(opcode, kw.get("moving_scale"), "moving_scale", p, n)
    if kw.get("tile_position") or kw.get("tile_size"):
        raise fail(opcode, "row tiling of nc_matmul_mx is not modelled; leave tile_position "
                           "and tile_size out")
    dst, fresh = _out(opcode, kw["dst"], (mm, n), np.float32, "psum")
    if dst.memory != "psum" or np_dtype(dst.dtype) not in (np.dtype(np.float32),
                                                          np.dtype(ml_dtypes.bfloat16)):
        raise fail(opcode, f"dst must be a float32 or bfloat16 PSUM tile, not "
                           f"{dst.memory.upper()} {dtype_name(dst.dtype)}")
    dst_dtype = np_dtype(dst.dtype)
    mx = (s, m, s_scale.view(ml_dtypes.float8_e8m0fnu), m_scale.view(ml_dtypes.float8_e8m0fnu))
    if run.tensor_engine == "none":
        sums = np.zeros((mm, n), dst_dtype)
    else:
        sums = _golden(opcode, run, golden.nc_matmul_mx, *mx, dst_dtype=dst_dtype,
                       rows=_core.PMAX)

    def accumulated(prev):
        if run.tensor_engine == "none":
            return sums
        return _golden(opcode, run, golden.nc_matmul_mx, *mx, psum=prev.astype(dst_dtype),
                       accumulate=True, dst_dtype=dst_dtype, rows=_core.PMAX)
    params = {"k": 4 * int(p), "m": int(mm), "n": int(n), "dtype": dtype_name(moving.dtype),
              "stationary_dtype": dtype_name(stationary.dtype), "perf_mode": "mx",
              "is_transpose": False, "tile_position": None, "tile_size": None}
    return _psum_write(opcode, run, dst, fresh, sums, kw.get("accumulate"), stationary, moving,
                       params, (s, m, kw["stationary_scale"], kw["moving_scale"]), accumulated,
                       mx={"stationary": s, "moving": m, "stationary_scale": s_scale,
                           "moving_scale": m_scale, "dst_dtype": dst_dtype})


def quantize_mx(*args, **kwargs):
    """Quantise BF16/FP16 data to MXFP8 on the NeuronCore-v4 VectorE (trn3), through
    :func:`golden.quantize_mx` (AWS's scale rule: ``X = 2^(floor(log2 amax) - (Emax - 1))``
    per group of 8 partitions x 4 elements).

    Parameters (``dst, src, dst_scale``)
    ----------
    dst : SBUF tile [P, F] of ``float8_e4m3fn_x4`` or ``float8_e5m2_x4``
    src : SBUF tile [P, 4 F], bfloat16 or float16 (P a multiple of 32 up to 128): elements
        ``4 f .. 4 f + 3`` of a partition become the lanes of word [p, f]
    dst_scale : SBUF uint8 / ``float8_e8m0fnu`` tile [P, F]: the scale of group i is written
        at partition ``32 (i // 4) + i % 4`` (the quadrant layout :func:`nc_matmul_mx` reads);
        the other partitions are left as they are

    Cost: ``4 F`` elements at four per partition per cycle ("Trainium3 Architecture Guide
    for NKI", "MX data-type Quantization"), at least ``MIN_II``.
    """
    opcode = "quantize_mx"
    kw = _bind(opcode, args, kwargs, ["dst", "src", "dst_scale"], 2)
    run = _core.current(opcode)
    _check_mx_target(opcode, run)
    src = _tile(kw.get("src"), opcode, "src", memories=("sbuf",))
    dst = _tile(kw.get("dst"), opcode, "dst", memories=("sbuf",))
    if not isinstance(dst.dtype, _core.X4) or dst.dtype.storage.itemsize != 4:
        raise fail(opcode, f"dst must be float8_e4m3fn_x4 or float8_e5m2_x4, not "
                           f"{dtype_name(dst.dtype)}")
    p = src.shape[0]
    if len(src.shape) != 2 or src.shape[1] % 4 or p % 32 or \
            list(dst.shape) != [p, src.shape[1] // 4]:
        raise fail(opcode, f"src must be [P, 4 F] with P a multiple of 32 and dst [P, F]; got "
                           f"src {list(src.shape)} and dst {list(dst.shape)}")
    f = dst.shape[1]
    values = src.read(opcode=opcode).reshape(p, f, 4)
    data, scale = _golden(opcode, run, golden.quantize_mx, values, dst.dtype.element)
    scale_tile = kw.get("dst_scale")
    _scale_operand(opcode, scale_tile, "dst_scale", p, f)
    dst.write(golden_mx.pack_x4(data), opcode=opcode)
    rows = golden_mx.quadrant_rows(p // golden_mx.GROUP_PARTITIONS)
    for g, row in enumerate(rows):
        scale_tile[row:row + 1, :].write(scale[g:g + 1].view(np.uint8).view(
            np_dtype(scale_tile.dtype)), opcode=opcode)
    record("vector", opcode, [src], [dst, scale_tile], partitions=p, elements=4 * f,
           in_dtype=src.dtype, out_dtype=dst.dtype)


def _transpose_on_pe(opcode, run, kw, stationary, moving, s, m, params):
    """``nc_matmul(is_transpose=True)``: the golden model's transpose mode
    (:func:`systolica.golden.nc_matmul`, ``is_transpose=True``): ``dst[M, N] =
    stationary[k_n, M]`` where ``moving[k_n, n] = 1`` (an identity moving gives
    ``stationary.T``), the bits moved unchanged, ``dst`` of the stationary type."""
    accumulate = kw.get("accumulate")
    words = _golden(opcode, run, golden.nc_matmul, s, m, rows=_core.PMAX,
                    tile_position=params["tile_position"], tile_size=params["tile_size"],
                    is_transpose=True, accumulate=bool(accumulate),
                    perf_mode=params["perf_mode"])
    dst, fresh = _out(opcode, kw["dst"], words.shape, stationary.dtype, "psum")
    if dst.memory != "psum":
        raise fail(opcode, f"dst must be in PSUM, not {dst.memory.upper()}")
    if dtype_name(dst.dtype) != dtype_name(stationary.dtype):
        raise fail(opcode, f"is_transpose=True writes the stationary type "
                           f"{dtype_name(stationary.dtype)}; dst is {dtype_name(dst.dtype)}")
    dst.write(_from_transpose(words, dst.dtype), opcode=opcode)
    index = record("tensor", opcode, [stationary, moving], [dst],
                   partitions=stationary.shape[0], elements=params["n"],
                   in_dtype=stationary.dtype, out_dtype=dst.dtype,
                   params=dict(params, dtype=dtype_name(stationary.dtype)))
    _record_transpose(run, index, s, m, words, dst)
    return _finish(index, dst, fresh)


def _record_transpose(run, index, stationary, moving, words, dst):
    """Keep a TensorE transpose's operands and golden PSUM words for the RTL check
    (:mod:`systolica.nki.rtl`; only in a run that has one). ``moving`` may be a callable
    that makes the moving operand."""
    if run.tensor_engine != "rtl":
        return
    run.transposes.append({"index": index, "stationary": stationary,
                           "moving": moving() if callable(moving) else moving,
                           "words": words, "region": dst.access()})


def nc_transpose(*args, **kwargs):
    """Transpose partition and free axes: ``dst[F, P] = data[P, F]``.

    On TensorE (default): data [P <= 128, F <= 128] in SBUF -> dst in PSUM through the
    golden model's transpose (:func:`systolica.golden.nc_transpose`: a transpose-mode matmul
    with an identity moving, the bits moved unchanged; 8-bit types come back from their
    16-bit PSUM elements to the data type); a dst of another type than the data's is
    converted RNE. On VectorE (``engine=nisa.vector_engine``): P, F <= 32, SBUF or PSUM in
    and out, numpy's transpose converted to dst's type (RNE).
    """
    opcode = "nc_transpose"
    kw = _bind(opcode, args, kwargs, ["dst", "data"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    if len(data.shape) != 2:
        raise fail(opcode, f"data must be a 2-D tile, not {list(data.shape)}")
    p, f = data.shape
    eng = _engine_name(kw.get("engine"), "tensor", ("tensor", "vector"), opcode)
    limit = 128 if eng == "tensor" else 32
    if p > limit or f > limit:
        raise fail(opcode, f"a {eng}-engine transpose takes at most [{limit}, {limit}], not "
                           f"[{p}, {f}]")
    memory = "psum" if eng == "tensor" else "sbuf"
    dst, fresh = _out(opcode, kw["dst"], (f, p), _dtype(kw, data.dtype), memory)
    values = data.read(opcode=opcode)
    if eng == "tensor":
        if dst.memory != "psum":
            raise fail(opcode, "a TensorE transpose writes PSUM; dst is in SBUF")
        run = _core.current(opcode)
        operand = _golden_operand(values, data.dtype)
        words = _golden(opcode, run, golden.nc_transpose, operand, rows=_core.PMAX)
        values = _from_transpose(words, data.dtype)
    else:
        values = np.ascontiguousarray(values.T)
    if dtype_name(dst.dtype) != dtype_name(data.dtype):
        values = cast(to_f32(values), dst.dtype)
    dst.write(values, opcode=opcode)
    # data [P, F] is the stationary operand (K = P, M = F), a [P, P] identity the moving one
    params = {"k": int(p), "m": int(f), "n": int(p), "dtype": dtype_name(data.dtype),
              "perf_mode": None, "is_transpose": True, "tile_position": None,
              "tile_size": None} if eng == "tensor" else {}
    index = record(eng, opcode, [data], [dst], partitions=p, elements=f,
                   in_dtype=data.dtype, out_dtype=dst.dtype, params=params)
    if eng == "tensor":
        _record_transpose(run, index, operand, lambda: golden.identity(p, operand.dtype),
                          words, dst)
    return _finish(index, dst, fresh)


# --------------------------------------------------------------------------- DMA

def dma_copy(*args, **kwargs):
    """Copy ``src`` to ``dst`` on a DMA queue (any memories; same shape; a different
    ``dst`` type is converted RNE).

    Parameters
    ----------
    dst, src : tensors of equal shape
    dst_rmw_op : None or nl.add
        Read-modify-write: ``dst = dst + src`` (float32, then cast).
    """
    opcode = "dma_copy"
    kw = _bind(opcode, args, kwargs, ["dst", "src"], 1)
    dst, src = kw.get("dst"), kw.get("src")
    return _dma(opcode, dst, src, _mask(kw), kw.get("dst_rmw_op"))


def _dma(opcode, dst, src, mask=None, rmw=None):
    for role, t in (("dst", dst), ("src", src)):
        if not isinstance(t, Tensor):
            raise fail(opcode, f"{role} must be a tensor, not {type(t).__name__}")
    if list(dst.shape) != list(src.shape) and dst.size != src.size:
        raise fail(opcode, f"shape mismatch: dst {list(dst.shape)} and src {list(src.shape)}")
    if list(dst.shape) != list(src.shape):
        _check_shape(opcode, "dst", dst.shape, src.shape)
    for t in (dst, src):
        if t.memory != "hbm" and t.shape and t.shape[0] > _core.PMAX:
            raise fail(opcode, f"an SBUF/PSUM side has partition dimension {t.shape[0]}; at "
                               f"most {_core.PMAX}")
    values = src.read(mask, opcode).reshape(dst.shape)
    reads = [src]
    if rmw is not None:
        values = _alu(opcode, rmw, to_f32(dst.read(mask, opcode)), to_f32(values))
        reads.append(dst)
    dst.write(cast(values, dst.dtype), mask, opcode)
    chunk = min(src.contiguous_elements(), dst.contiguous_elements())
    size = src.size if mask is None else \
        int(np.broadcast_to(_core.fit_mask(mask, src.shape), src.shape).sum())
    chunk = max(1, min(chunk, size))
    partitions = src.shape[0] if src.memory != "hbm" else (dst.shape[0] if dst.shape else 1)
    return record("dma", opcode, reads, [dst], partitions=min(partitions, _core.PMAX),
                  elements=max(1, size // max(1, min(partitions, _core.PMAX))),
                  in_dtype=src.dtype, out_dtype=dst.dtype,
                  nbytes=size * src.buffer.data.itemsize,
                  params={"src": src.memory, "dst": dst.memory,
                          "descriptors": int(math.ceil(size / chunk)),
                          "chunk_bytes": int(chunk * src.buffer.data.itemsize)})


# --------------------------------------------------------------------------- VectorE etc.

def tensor_copy(*args, **kwargs):
    """Copy ``src`` into ``dst`` on VectorE (``engine=`` ScalarE or GpSimd), converting to
    ``dst``'s type RNE (a PSUM FP32 -> SBUF BF16 copy rounds as the hardware's
    output conversion does)."""
    opcode = "tensor_copy"
    kw = _bind(opcode, args, kwargs, ["dst", "src"], 1)
    src = _tile(kw.get("src"), opcode, "src")
    eng = _engine_name(kw.get("engine"), "vector", ("vector", "scalar", "gpsimd"), opcode)
    dst, fresh = _out(opcode, kw["dst"], src.shape, _dtype(kw, src.dtype))
    mask = _mask(kw)
    values = src.read(mask, opcode)
    if np_dtype(src.dtype).kind == "f":
        values = to_f32(values)
    dst.write(cast(values.reshape(dst.shape), dst.dtype), mask, opcode)
    index = record(eng, opcode, [src], [dst], partitions=src.shape[0], elements=_free(src),
                   in_dtype=src.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def activation(*args, **kwargs):
    """``dst = op(data * scale + bias)`` on ScalarE, in float32, cast to ``dst``'s type.

    Parameters
    ----------
    dst, data : tiles of one shape [P, ...]
    op : an activation function (``nl.exp``, ``nl.tanh``, ``nl.copy``, ``np.exp``...)
    bias : None, scalar or [P, 1] tile
    scale : scalar or [P, 1] tile
    reduce_op, reduce_res : ``nl.add`` and a [P, 1] tile: the sum of the activated values
        of each partition (float32) is written to ``reduce_res``.
    """
    opcode = "activation"
    kw = _bind(opcode, args, kwargs, ["dst", "op", "data", "bias", "scale", "reduce_op",
                                       "reduce_res", "reduce_cmd"], 0)
    return _activation(opcode, kw)


def _activation(opcode, kw):
    data = _tile(kw.get("data"), opcode, "data")
    name = _op(opcode, kw.get("op"), ACTIVATIONS, "activation function")
    p = data.shape[0]
    mask = _mask(kw)
    x = to_f32(data.read(mask, opcode))
    xs = x.reshape(p, -1)
    scale, scale_t = _scalar_or_vector(opcode, kw.get("scale", 1.0), p, "scale")
    bias = kw.get("bias")
    bias, bias_t = (np.float32(0), None) if bias is None else \
        _scalar_or_vector(opcode, bias, p, "bias")
    with np.errstate(all="ignore"):
        y = ACTIVATIONS[name]((xs * scale + bias).astype(np.float32)).astype(np.float32)
    dst, fresh = _out(opcode, kw["dst"], data.shape, _dtype(kw, data.dtype))
    dst.write(cast(y.reshape(dst.shape), dst.dtype), mask, opcode)
    reduce_res = kw.get("reduce_res")
    writes = [dst]
    if reduce_res is not None:
        rop = _op(opcode, kw.get("reduce_op", "add"), REDUCTIONS, "reduce_op")
        _tile(reduce_res, opcode, "reduce_res")
        if reduce_res.shape[0] != p or _free(reduce_res) != 1:
            raise fail(opcode, f"shape mismatch: reduce_res must be [{p}, 1], not "
                               f"{list(reduce_res.shape)}")
        reduced = REDUCTIONS[rop](y, axis=1).astype(np.float32)
        reduce_res.write(cast(reduced.reshape(reduce_res.shape), reduce_res.dtype),
                         opcode=opcode)
        writes.append(reduce_res)
    index = record("scalar", opcode, [data, scale_t, bias_t], writes, partitions=p,
                   elements=xs.shape[1], in_dtype=data.dtype, out_dtype=dst.dtype,
                   params={"func": name, "reduce": reduce_res is not None})
    return _finish(index, dst, fresh)


def activation_reduce(*args, **kwargs):
    """:func:`activation` with ``reduce_op``/``reduce_res`` required (the older call)."""
    opcode = "activation"
    kw = _bind(opcode, args, kwargs, ["dst", "op", "data", "reduce_op", "reduce_res",
                                       "bias", "scale"], 0)
    if kw.get("reduce_res") is None:
        raise fail("activation_reduce", "reduce_res is required")
    return _activation(opcode, kw)


def tensor_tensor(*args, **kwargs):
    """``dst = data1 <op> data2`` elementwise on VectorE (``engine=nisa.gpsimd_engine``:
    GpSimd), in float32 (bit operators on integers), cast to ``dst``'s type. ``data1`` and
    ``data2`` have one shape."""
    opcode = "tensor_tensor"
    kw = _bind(opcode, args, kwargs, ["dst", "data1", "data2", "op"], 2)
    a = _tile(kw.get("data1"), opcode, "data1")
    b = _tile(kw.get("data2"), opcode, "data2")
    if list(a.shape) != list(b.shape):
        raise fail(opcode, f"shape mismatch: data1 {list(a.shape)} and data2 "
                           f"{list(b.shape)}")
    if a.memory == "psum" and b.memory == "psum":
        raise fail(opcode, "data1 and data2 cannot both be in PSUM")
    eng = _engine_name(kw.get("engine"), "vector", ("vector", "gpsimd"), opcode)
    mask = _mask(kw)
    result = _alu(opcode, kw.get("op"), to_f32(a.read(mask, opcode)),
                  to_f32(b.read(mask, opcode)))
    dst, fresh = _out(opcode, kw["dst"], a.shape, _dtype(kw, a.dtype))
    dst.write(cast(result.reshape(dst.shape), dst.dtype), mask, opcode)
    index = record(eng, opcode, [a, b], [dst], partitions=a.shape[0], elements=_free(a),
                   in_dtype=a.dtype, out_dtype=dst.dtype,
                   params={"op": op_name(kw.get("op"))})
    return _finish(index, dst, fresh)


def _tensor_scalar_values(opcode, kw, data, mask):
    p = data.shape[0]
    x = to_f32(data.read(mask, opcode)).reshape(p, -1)
    reads = [data]
    for i in (0, 1):
        op = kw.get(f"op{i}")
        if op is None:
            continue
        operand, tile = _scalar_or_vector(opcode, kw.get(f"operand{i}"), p, f"operand{i}")
        reads.append(tile)
        x = _alu(opcode, op, operand, x) if kw.get(f"reverse{i}") else \
            _alu(opcode, op, x, operand)
    return x, reads


def tensor_scalar(*args, **kwargs):
    """``dst = (data <op0> operand0) <op1> operand1`` with scalar or [P, 1] operands, on
    VectorE (``engine=`` ScalarE or GpSimd); ``reverse0/1`` swap an operator's inputs."""
    opcode = "tensor_scalar"
    kw = _bind(opcode, args, kwargs, ["dst", "data", "op0", "operand0", "reverse0", "op1",
                                       "operand1", "reverse1"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    eng = _engine_name(kw.get("engine"), "vector", ("vector", "scalar", "gpsimd"), opcode)
    mask = _mask(kw)
    x, reads = _tensor_scalar_values(opcode, kw, data, mask)
    dst, fresh = _out(opcode, kw["dst"], data.shape, _dtype(kw, data.dtype))
    dst.write(cast(x.reshape(dst.shape), dst.dtype), mask, opcode)
    index = record(eng, opcode, reads, [dst], partitions=data.shape[0],
                   elements=_free(data), in_dtype=data.dtype, out_dtype=dst.dtype,
                   params={"op0": op_name(kw.get("op0")), "op1": op_name(kw.get("op1"))})
    return _finish(index, dst, fresh)


def _reduce_axes(opcode, axis, rank):
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    for a in axes:
        if not 1 <= a < rank:
            raise fail(opcode, f"axis {a} is not a free axis of a {rank}-D tile (the "
                               f"partition axis 0 cannot be reduced here)")
    return tuple(int(a) for a in axes)


def tensor_reduce(*args, **kwargs):
    """Reduce free axes on VectorE: ``dst = op(data, axis)`` (``nl.add``, ``nl.max``,
    ``nl.min``, ``nl.multiply``), float32; ``negate=True`` negates the result."""
    opcode = "tensor_reduce"
    kw = _bind(opcode, args, kwargs, ["dst", "op", "data", "axis", "negate", "keepdims"], 0)
    data = _tile(kw.get("data"), opcode, "data")
    name = _op(opcode, kw.get("op"), REDUCTIONS, "reduce operator")
    axes = _reduce_axes(opcode, kw.get("axis", tuple(range(1, data.ndim))), data.ndim)
    mask = _mask(kw)
    x = to_f32(data.read(mask, opcode))
    y = REDUCTIONS[name](x, axis=axes, keepdims=bool(kw.get("keepdims", False)))
    y = np.asarray(y, dtype=np.float32)
    if kw.get("negate"):
        y = -y
    dst, fresh = _out(opcode, kw["dst"], y.shape, _dtype(kw, data.dtype))
    dst.write(cast(y.reshape(dst.shape), dst.dtype), opcode=opcode)
    index = record("vector", opcode, [data], [dst], partitions=data.shape[0],
                   elements=_free(data), in_dtype=data.dtype, out_dtype=dst.dtype,
                   params={"op": name})
    return _finish(index, dst, fresh)


def tensor_scalar_reduce(*args, **kwargs):
    """``dst = data <op0> operand0`` and ``reduce_res = reduce_op(dst values)`` along the
    free axes ([P, 1]) in one VectorE instruction, float32."""
    opcode = "tensor_scalar_reduce"
    kw = _bind(opcode, args, kwargs, ["dst", "data", "op0", "operand0", "reduce_op",
                                       "reduce_res", "reverse0"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    x, reads = _tensor_scalar_values(opcode, kw, data, None)
    rop = _op(opcode, kw.get("reduce_op"), REDUCTIONS, "reduce_op")
    res = _tile(kw.get("reduce_res"), opcode, "reduce_res")
    if res.shape[0] != data.shape[0] or _free(res) != 1:
        raise fail(opcode, f"shape mismatch: reduce_res must be [{data.shape[0]}, 1], not "
                           f"{list(res.shape)}")
    dst, fresh = _out(opcode, kw["dst"], data.shape, _dtype(kw, data.dtype))
    dst.write(cast(x.reshape(dst.shape), dst.dtype), opcode=opcode)
    res.write(cast(REDUCTIONS[rop](x, axis=1).reshape(res.shape), res.dtype), opcode=opcode)
    index = record("vector", opcode, reads, [dst, res], partitions=data.shape[0],
                   elements=_free(data), in_dtype=data.dtype, out_dtype=dst.dtype,
                   params={"op0": op_name(kw.get("op0")), "reduce_op": rop})
    return _finish(index, dst, fresh)


def tensor_tensor_scan(*args, **kwargs):
    """Scan along the free axis on VectorE: ``r[:, i] = (data0[:, i] <op0> r[:, i - 1])
    <op1> data1[:, i]`` with ``r[:, -1] = initial`` (scalar or [P, 1]), float32, each step
    rounded to float32."""
    opcode = "tensor_tensor_scan"
    kw = _bind(opcode, args, kwargs, ["dst", "data0", "data1", "initial", "op0", "op1",
                                       "reverse0", "reverse1"], 2)
    d0 = _tile(kw.get("data0"), opcode, "data0")
    d1 = _tile(kw.get("data1"), opcode, "data1")
    if list(d0.shape) != list(d1.shape) or d0.ndim != 2:
        raise fail(opcode, f"shape mismatch: data0 {list(d0.shape)} and data1 "
                           f"{list(d1.shape)} must be equal 2-D tiles")
    p, f = d0.shape
    a, b = to_f32(d0.read(opcode=opcode)), to_f32(d1.read(opcode=opcode))
    prev, init_t = _scalar_or_vector(opcode, kw.get("initial"), p, "initial")
    prev = np.broadcast_to(np.asarray(prev, np.float32).reshape(-1), (p,)).copy()
    out = np.empty((p, f), np.float32)
    for i in range(f):
        x = _alu(opcode, kw.get("op0"), prev, a[:, i]) if kw.get("reverse0") else \
            _alu(opcode, kw.get("op0"), a[:, i], prev)
        prev = _alu(opcode, kw.get("op1"), b[:, i], x) if kw.get("reverse1") else \
            _alu(opcode, kw.get("op1"), x, b[:, i])
        out[:, i] = prev
    dst, fresh = _out(opcode, kw["dst"], d0.shape, _dtype(kw, d0.dtype))
    dst.write(cast(out, dst.dtype), opcode=opcode)
    index = record("vector", opcode, [d0, d1, init_t], [dst], partitions=p, elements=f,
                   in_dtype=d0.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def reciprocal(*args, **kwargs):
    """``dst = 1 / data`` on VectorE, float32 (1/0 = Inf)."""
    opcode = "reciprocal"
    kw = _bind(opcode, args, kwargs, ["dst", "data"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    mask = _mask(kw)
    with np.errstate(divide="ignore"):
        y = np.float32(1) / to_f32(data.read(mask, opcode))
    dst, fresh = _out(opcode, kw["dst"], data.shape, _dtype(kw, data.dtype))
    dst.write(cast(y.reshape(dst.shape), dst.dtype), mask, opcode)
    index = record("vector", opcode, [data], [dst], partitions=data.shape[0],
                   elements=_free(data), in_dtype=data.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def memset(*args, **kwargs):
    """Fill ``dst`` with ``value`` (VectorE; ``engine=`` GpSimd). Older style:
    ``memset(shape, value, dtype)`` returns a new SBUF tile."""
    opcode = "memset"
    if "dst" in kwargs or (args and isinstance(args[0], Tensor)):
        kw = _bind(opcode, args, kwargs, ["dst", "value"], 0)
        dst, fresh = _tile(kw["dst"], opcode, "dst"), False
    else:
        kw = dict(zip(["shape", "value", "dtype"], args, strict=False), **kwargs)
        dst, fresh = _core.allocate(tuple(kw["shape"]), kw.get("dtype"),
                                    kw.get("buffer", "sbuf"), opcode=opcode), True
    eng = _engine_name(kw.get("engine"), "vector", ("vector", "gpsimd", "scalar"), opcode)
    dst.write(cast(np.float32(kw.get("value", 0)), dst.dtype), _mask(kw), opcode)
    index = record(eng, opcode, [], [dst], partitions=dst.shape[0], elements=_free(dst),
                   in_dtype=dst.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def _pattern_values(pattern, offset, channel_multiplier, p):
    """Values ``offset + channel * channel_multiplier + sum(step * i)`` over the pattern's
    ``[[step, num], ...]`` (outermost first): int64 [P, num...]."""
    nums = [int(n) for _s, n in pattern]
    grid = np.zeros([p] + nums, dtype=np.int64) + int(offset)
    grid += (np.arange(p) * int(channel_multiplier)).reshape([p] + [1] * len(nums))
    for i, (step, n) in enumerate(pattern):
        shape = [1] * (len(nums) + 1)
        shape[i + 1] = int(n)
        grid += (np.arange(int(n)) * int(step)).reshape(shape)
    return grid


def iota(*args, **kwargs):
    """Index values into a tile on GpSimd. Older style: ``iota(expr, dtype)`` with an
    ``nl.arange`` expression (returns a new tile). NKI 0.6: ``iota(dst, pattern, offset,
    channel_multiplier=0)``."""
    opcode = "iota"
    if "dst" in kwargs or (args and isinstance(args[0], Tensor)):
        kw = _bind(opcode, args, kwargs, ["dst", "pattern", "offset", "channel_multiplier"],
                   0)
        dst = _tile(kw["dst"], opcode, "dst")
        if kw.get("pattern") is not None:
            values = _pattern_values(kw["pattern"], kw.get("offset", 0),
                                     kw.get("channel_multiplier", 0), dst.shape[0])
        else:
            values = np.asarray(kw.get("expr"))
        fresh = False
    else:
        kw = dict(zip(["expr", "dtype"], args, strict=False), **kwargs)
        values = np.asarray(kw["expr"])
        dst, fresh = _core.allocate(values.shape, kw.get("dtype") or np.int32, "sbuf",
                                    opcode=opcode), True
    if values.size != dst.size:
        raise fail(opcode, f"shape mismatch: dst {list(dst.shape)} and the index expression "
                           f"{list(values.shape)}")
    dst.write(cast(values.reshape(dst.shape), dst.dtype), _mask(kw), opcode)
    index = record("gpsimd", opcode, [], [dst], partitions=dst.shape[0], elements=_free(dst),
                   in_dtype=np.int32, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def affine_select(*args, **kwargs):
    """``dst = where(predicate, on_true_tile, on_false_value)`` on GpSimd, the predicate an
    affine expression of the indices. Older style: ``affine_select(pred, on_true_tile,
    on_false_value)`` with ``pred`` an ``nl.arange`` comparison (returns a new tile). NKI
    0.6: ``affine_select(dst, pattern, offset, channel_multiplier, on_true_tile,
    on_false_value, cmp_op=nl.equal)``: predicate ``cmp_op(affine value, 0)``."""
    opcode = "affine_select"
    if "dst" in kwargs or (args and isinstance(args[0], Tensor)):
        kw = _bind(opcode, args, kwargs, ["dst", "pattern", "offset", "channel_multiplier",
                                           "on_true_tile", "on_false_value", "cmp_op"], 0)
        on_true = _tile(kw.get("on_true_tile"), opcode, "on_true_tile")
        values = _pattern_values(kw["pattern"], kw.get("offset", 0),
                                 kw.get("channel_multiplier", 0), on_true.shape[0])
        cmp = kw.get("cmp_op") or "equal"
        pred = _alu(opcode, cmp, values.astype(np.float32), np.float32(0)) != 0
    else:
        kw = dict(zip(["pred", "on_true_tile", "on_false_value"], args, strict=False),
                  **kwargs)
        on_true = _tile(kw.get("on_true_tile"), opcode, "on_true_tile")
        pred = np.asarray(kw["pred"], dtype=bool)
        kw.setdefault("dst", None)
    if pred.size != on_true.size:
        pred = np.broadcast_to(pred, on_true.shape)
    x = to_f32(on_true.read(opcode=opcode))
    y = np.where(pred.reshape(x.shape), x, np.float32(kw.get("on_false_value")))
    dst, fresh = _out(opcode, kw["dst"], on_true.shape, _dtype(kw, on_true.dtype))
    dst.write(cast(y.reshape(dst.shape), dst.dtype), opcode=opcode)
    index = record("gpsimd", opcode, [on_true], [dst], partitions=on_true.shape[0],
                   elements=_free(on_true), in_dtype=on_true.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def select(*args, **kwargs):
    """``dst = where(predicate != 0, on_true, on_false)`` elementwise on VectorE
    (``on_false``: a tile of the same shape, a [P, 1] vector or a scalar)."""
    opcode = "select"
    kw = _bind(opcode, args, kwargs, ["dst", "predicate", "on_true", "on_false"], 3)
    pred = _tile(kw.get("predicate"), opcode, "predicate")
    on_true = _tile(kw.get("on_true"), opcode, "on_true")
    if list(pred.shape) != list(on_true.shape):
        raise fail(opcode, f"shape mismatch: predicate {list(pred.shape)} and on_true "
                           f"{list(on_true.shape)}")
    on_false = kw.get("on_false")
    reads = [pred, on_true]
    if isinstance(on_false, Tensor) and list(on_false.shape) == list(on_true.shape):
        other = to_f32(on_false.read(opcode=opcode))
        reads.append(on_false)
    else:
        other, tile = _scalar_or_vector(opcode, on_false, on_true.shape[0], "on_false")
        other = np.broadcast_to(np.asarray(other).reshape(
            (on_true.shape[0],) + (1,) * (on_true.ndim - 1)) if np.ndim(other) else other,
            on_true.shape)
        reads.append(tile)
    y = np.where(pred.read(opcode=opcode) != 0, to_f32(on_true.read(opcode=opcode)), other)
    dst, fresh = _out(opcode, kw["dst"], on_true.shape, _dtype(kw, on_true.dtype))
    dst.write(cast(y, dst.dtype), opcode=opcode)
    index = record("vector", opcode, reads, [dst], partitions=on_true.shape[0],
                   elements=_free(on_true), in_dtype=on_true.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def scalar_tensor_tensor(*args, **kwargs):
    """``dst = (data <op0> scalar) <op1> data1`` on VectorE, float32 (``scalar``: a scalar
    or a [P, 1] vector)."""
    opcode = "scalar_tensor_tensor"
    kw = _bind(opcode, args, kwargs, ["dst", "data", "op0", "operand0", "op1", "operand1"],
               1)
    data = _tile(kw.get("data"), opcode, "data")
    other = _tile(kw.get("operand1"), opcode, "operand1")
    if list(other.shape) != list(data.shape):
        raise fail(opcode, f"shape mismatch: data {list(data.shape)} and operand1 "
                           f"{list(other.shape)}")
    p = data.shape[0]
    operand, tile = _scalar_or_vector(opcode, kw.get("operand0"), p, "operand0")
    x = _alu(opcode, kw.get("op0"), to_f32(data.read(opcode=opcode)).reshape(p, -1), operand)
    y = _alu(opcode, kw.get("op1"), x, to_f32(other.read(opcode=opcode)).reshape(p, -1))
    dst, fresh = _out(opcode, kw["dst"], data.shape, _dtype(kw, data.dtype))
    dst.write(cast(y.reshape(dst.shape), dst.dtype), opcode=opcode)
    index = record("vector", opcode, [data, tile, other], [dst], partitions=p,
                   elements=_free(data), in_dtype=data.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def bn_stats(*args, **kwargs):
    """Per-partition statistics of ``data`` [P, F <= 512] on VectorE, for :func:`bn_aggr`:
    six float32 values per partition. AWS does not publish their layout; this model's is
    ``(count, mean, M2, 0, 0, 0)`` (M2: the sum of squared deviations), masked-off elements
    excluded."""
    opcode = "bn_stats"
    kw = _bind(opcode, args, kwargs, ["dst", "data"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    p = data.shape[0]
    if _free(data) > 512:
        raise fail(opcode, f"data free size {_free(data)} exceeds 512 (nl.tile_size."
                           f"bn_stats_fmax)")
    mask = _mask(kw)
    x = to_f32(data.read(mask, opcode)).reshape(p, -1)
    keep = np.ones_like(x, dtype=bool) if mask is None else np.broadcast_to(
        _core.fit_mask(mask, data.shape), data.shape).reshape(p, -1)
    count = keep.sum(axis=1).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(keep, x, 0).sum(axis=1, dtype=np.float32) / np.maximum(count, 1)
        m2 = np.where(keep, (x - mean[:, None]) ** 2, 0).sum(axis=1, dtype=np.float32)
    stats = np.zeros((p, 6), np.float32)
    stats[:, 0], stats[:, 1], stats[:, 2] = count, mean, m2
    dst, fresh = _out(opcode, kw["dst"], (p, 6), _dtype(kw, np.float32))
    dst.write(cast(stats.reshape(dst.shape), dst.dtype), opcode=opcode)
    index = record("vector", opcode, [data], [dst], partitions=p, elements=_free(data),
                   in_dtype=data.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def bn_aggr(*args, **kwargs):
    """Combine :func:`bn_stats` results [P, 6 k] into ``(mean, variance)`` [P, 2] per
    partition on VectorE (float32; the population variance, Chan et al.'s pairwise
    combination of counts, means and M2)."""
    opcode = "bn_aggr"
    kw = _bind(opcode, args, kwargs, ["dst", "data"], 1)
    data = _tile(kw.get("data"), opcode, "data")
    p = data.shape[0]
    if _free(data) % 6:
        raise fail(opcode, f"data must hold 6 values per bn_stats group, not {_free(data)}")
    stats = to_f32(data.read(opcode=opcode)).reshape(p, -1, 6)
    count, mean, m2 = stats[..., 0], stats[..., 1], stats[..., 2]
    total = count.sum(axis=1, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = (count * mean).sum(axis=1, dtype=np.float32) / total
        var = (m2 + count * (mean - avg[:, None]) ** 2).sum(axis=1, dtype=np.float32) / total
    dst, fresh = _out(opcode, kw["dst"], (p, 2), _dtype(kw, np.float32))
    dst.write(cast(np.stack([avg, var], axis=1).reshape(dst.shape), dst.dtype), opcode=opcode)
    index = record("vector", opcode, [data], [dst], partitions=p, elements=_free(data),
                   in_dtype=data.dtype, out_dtype=dst.dtype)
    return _finish(index, dst, fresh)


def _not_modelled(name):
    def call(*_args, **_kwargs):
        raise fail(name, "this instruction is not modelled by systolica.nki (docs/nki.md "
                         "lists the supported names)")
    call.__name__ = name
    return call


dma_transpose = _not_modelled("dma_transpose")
tensor_partition_reduce = _not_modelled("tensor_partition_reduce")
local_gather = _not_modelled("local_gather")
max8 = _not_modelled("max8")
nc_find_index8 = _not_modelled("nc_find_index8")
nc_match_replace8 = _not_modelled("nc_match_replace8")
nc_stream_shuffle = _not_modelled("nc_stream_shuffle")
dropout = _not_modelled("dropout")
range_select = _not_modelled("range_select")
select_reduce = _not_modelled("select_reduce")
tensor_copy_predicated = _not_modelled("tensor_copy_predicated")


#: The NKI names this module provides (docs/nki.md lists each with its engine).
__all__ = ["activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats",
           "dge_mode", "dma_copy", "dma_transpose", "dropout", "engine", "get_nc_version",
           "gpsimd_engine", "iota", "local_gather", "matmul_perf_mode", "max8", "memset",
           "nc_find_index8", "nc_match_replace8", "nc_matmul", "nc_matmul_mx",
           "nc_stream_shuffle", "nc_transpose", "nc_version", "oob_mode", "quantize_mx",
           "range_select", "reciprocal", "reduce_cmd", "scalar_engine",
           "scalar_tensor_tensor", "select", "select_reduce", "tensor_copy",
           "tensor_copy_predicated", "tensor_engine", "tensor_partition_reduce",
           "tensor_reduce", "tensor_scalar", "tensor_scalar_reduce", "tensor_tensor",
           "tensor_tensor_scan", "unknown_engine", "vector_engine"]
