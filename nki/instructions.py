"""The instruction record passed from the NKI front end's tracer to the engine timing model.

A kernel run under :mod:`systolica.nki` is executed eagerly (numerics) and recorded as a list
of :class:`Instruction` in program order; :func:`systolica.nki.engines.schedule` places each on
its engine and returns a :class:`systolica.nki.engines.Profile`.
"""

from dataclasses import dataclass, field

#: Engine names, as ``nki.isa``'s engine enumeration names them, plus the DMA queues.
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


@dataclass(frozen=True)
class Access:
    """A byte range of one on-chip or device memory that an instruction reads or writes.

    Attributes
    ----------
    memory : str
        ``"sbuf"``, ``"psum"`` or ``"hbm"``.
    buffer : int
        Identity of the allocation (tensors in different allocations never overlap).
    partitions : tuple of (int, int)
        ``[start, stop)`` partitions touched (HBM: ``(0, 1)``).
    span : tuple of (int, int)
        ``[start, stop)`` byte offsets within each partition (HBM: within the tensor), a
        conservative hull of the bytes touched.
    """

    memory: str
    buffer: int
    partitions: tuple
    span: tuple


@dataclass(frozen=True)
class Instruction:
    """One traced instruction.

    Attributes
    ----------
    index : int
        Position in program order (0, 1, ...).
    engine : str
        One of :data:`ENGINES`.
    opcode : str
        The ``nki.isa`` name (``"nc_matmul"``, ``"nc_transpose"``, ``"activation"``,
        ``"tensor_tensor"``, ``"tensor_scalar"``, ``"tensor_reduce"``, ``"tensor_copy"``,
        ``"dma_copy"``, ``"memset"``, ``"iota"``, ...).
    reads, writes : tuple of Access
    partitions : int
        Partitions the instruction processes in parallel (1 to 128).
    elements : int
        Elements per partition the instruction reads from its largest input (its free size),
        the quantity that engine throughput is per.
    in_dtype, out_dtype : str
        ml_dtypes/numpy names (``"bfloat16"``, ``"float32"``, ``"float8_e4m3"``...).
    nbytes : int
        Bytes moved (DMA) or written (others).
    params : dict
        Opcode-specific cost inputs. ``nc_matmul``: ``k``, ``m`` (stationary free size),
        ``n`` (moving free size), ``dtype``, ``perf_mode`` (None or ``"double_row"``),
        ``is_transpose`` (bool), ``tile_position``, ``tile_size`` (tuples or None).
        ``activation``: ``func`` (name). ``dma_copy``: ``src``, ``dst`` (memories),
        ``descriptors`` (contiguous chunks), ``chunk_bytes`` (bytes per chunk).
    loops : tuple of (int, int, str)
        Enclosing loops, outermost first: ``(loop id, iteration, kind)`` with kind
        ``"affine"``, ``"sequential"`` or ``"static"``.
    source : str
        ``"file.py:LINE"`` of the kernel line that issued it.
    """

    index: int
    engine: str
    opcode: str
    reads: tuple
    writes: tuple
    partitions: int
    elements: int
    in_dtype: str
    out_dtype: str
    nbytes: int
    params: dict = field(default_factory=dict)
    loops: tuple = ()
    source: str = ""
