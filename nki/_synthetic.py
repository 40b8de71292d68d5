"""Synthetic instruction lists, built the way the NKI tracer records kernels, for the engine
model's tests and for ``docs/nki.md``'s published-vs-predicted table (until the front end
traces real kernels).

:class:`Builder` appends :class:`~systolica.nki.instructions.Instruction` records; the
generators below build the kernels that AWS's documents give costs or examples for.
"""

from contextlib import contextmanager
from math import ceil

from .instructions import Access, Instruction

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3": 1, "float8_e5m2": 1,
               "int8": 1, "int32": 4}


class Builder:
    """Append instructions in program order with fresh allocations and loop context."""

    def __init__(self, source="synthetic.py"):
        self.instructions = []
        self.source = source
        self._buffers = 0
        self._loops = ()
        self._loop_ids = 0

    def alloc(self):
        """A new allocation id (int)."""
        self._buffers += 1
        return self._buffers

    @contextmanager
    def loop(self, kind):
        """``with b.loop("sequential") as it: for i in it(n): ...``: a loop of ``kind``."""
        self._loop_ids += 1
        lid = self._loop_ids
        outer = self._loops

        def iterations(n):
            for i in range(n):
                self._loops = outer + ((lid, i, kind),)
                yield i
            self._loops = outer

        try:
            yield iterations
        finally:
            self._loops = outer

    def add(self, engine, opcode, reads, writes, partitions, elements, in_dtype="bfloat16",
            out_dtype="bfloat16", nbytes=0, params=None, line=None):
        """Append one instruction; returns its index."""
        index = len(self.instructions)
        source = f"{self.source}:{line if line is not None else index + 1}"
        self.instructions.append(Instruction(index, engine, opcode, tuple(reads), tuple(writes),
                                             partitions, elements, in_dtype, out_dtype, nbytes,
                                             dict(params or {}), self._loops, source))
        return index

    def matmul(self, stationary, moving, psum, k, m, n, dtype="bfloat16", line=None, **params):
        """``nc_matmul``: reads ``stationary`` and ``moving`` (SBUF accesses), writes ``psum``."""
        p = {"k": k, "m": m, "n": n, "dtype": dtype, "perf_mode": None, "is_transpose": False,
             "tile_position": None, "tile_size": None} | params
        return self.add("tensor", "nc_matmul", (stationary, moving), (psum,), k, n, dtype,
                        "float32", m * n * 4, p, line)

    def dma(self, src, dst, nbytes, descriptors, line=None):
        """``dma_copy`` of ``nbytes`` in ``descriptors`` equal contiguous chunks."""
        params = {"src": src.memory, "dst": dst.memory, "descriptors": descriptors,
                  "chunk_bytes": nbytes / descriptors}
        return self.add("dma", "dma_copy", (src,), (dst,), descriptors if src.memory != "hbm"
                        else dst.partitions[1] - dst.partitions[0], 0, nbytes=nbytes,
                        params=params, line=line)


def sbuf(buffer, partitions, start, stop):
    """An SBUF access of ``partitions`` (count from 0) over bytes [start, stop)."""
    return Access("sbuf", buffer, (0, partitions), (start, stop))


def psum(buffer, partitions, start, stop):
    """A PSUM access of ``partitions`` (count from 0) over bytes [start, stop)."""
    return Access("psum", buffer, (0, partitions), (start, stop))


def hbm(buffer, start, stop):
    """An HBM access over bytes [start, stop) of a tensor."""
    return Access("hbm", buffer, (0, 1), (start, stop))


def matmul_stream(shapes, dtype="bfloat16", perf_mode=None):
    """Back-to-back independent ``nc_matmul`` of ``(k, m, n)`` shapes (inputs already in SBUF,
    outputs to rotating PSUM banks): the setting of AWS's per-instruction cost formula."""
    b = Builder("matmul_stream.py")
    size = DTYPE_BYTES[dtype]
    stationary, moving, out = b.alloc(), b.alloc(), b.alloc()
    for j, (k, m, n) in enumerate(shapes):
        bank = j % 8
        b.matmul(sbuf(stationary, k, 0, m * size), sbuf(moving, k, 0, n * size),
                 psum(out, m, bank * 2048, bank * 2048 + n * 4), k, m, n, dtype,
                 perf_mode=perf_mode)
    return b.instructions


def dma_load(partitions, free_bytes, count=1, chunk_bytes=None):
    """``count`` HBM -> SBUF loads of a ``[partitions, free_bytes]`` tile, each into its own
    SBUF allocation (independent), one descriptor per partition row (or per
    ``chunk_bytes``)."""
    b = Builder("dma_load.py")
    src = b.alloc()
    chunk = chunk_bytes or free_bytes
    for j in range(count):
        nbytes = partitions * free_bytes
        b.dma(hbm(src, j * nbytes, (j + 1) * nbytes), sbuf(b.alloc(), partitions, 0, free_bytes),
              nbytes, partitions * ceil(free_bytes / chunk))
    return b.instructions


def blocked_matmul(m, k, n, dtype="bfloat16", block_n=1024):
    """A fully blocked ``[M, K] x [K, N]`` matmul in the style of AWS's matmul tutorial's last
    step: ``lhsT [K, M]`` loaded once, ``rhs`` loaded one ``[K, block_n]`` block at a time,
    128 x 128 x 512 ``nc_matmul`` accumulating over K in PSUM, VectorE ``tensor_copy`` PSUM ->
    SBUF, and a store per ``[128, 512]`` result tile. Loops: the N blocks ``affine``, K
    accumulation ``sequential``."""
    for name, value in (("m", m), ("k", k), ("n", n)):
        if value % 128 or value < 128:
            raise ValueError(f"{name} must be a positive multiple of 128, not {value}")
    if n % block_n or block_n % 512:
        raise ValueError(f"block_n must divide n and be a multiple of 512, not {block_n}")
    b = Builder("blocked_matmul.py")
    size = DTYPE_BYTES[dtype]
    lhs_hbm, rhs_hbm, out_hbm = b.alloc(), b.alloc(), b.alloc()
    lhs = b.alloc()
    kt, mt = k // 128, m // 128
    for kk in range(kt):       # lhsT [K, M]: one [128, M] row block per K tile
        b.dma(hbm(lhs_hbm, kk * 128 * m * size, (kk + 1) * 128 * m * size),
              sbuf(lhs, 128, kk * m * size, (kk + 1) * m * size), 128 * m * size, 128, line=10)
    bank = 0
    with b.loop("affine") as blocks:
        for nb in blocks(n // block_n):
            rhs = b.alloc()
            for kk in range(kt):
                row0 = (kk * 128 * n + nb * block_n) * size
                b.dma(hbm(rhs_hbm, row0, row0 + (127 * n + block_n) * size),
                      sbuf(rhs, 128, kk * block_n * size, (kk + 1) * block_n * size),
                      128 * block_n * size, 128, line=20)
            for mm in range(mt):
                for nt in range(block_n // 512):
                    out = b.alloc()
                    with b.loop("sequential") as ks:
                        for kk in ks(kt):
                            b.matmul(sbuf(lhs, 128, (kk * m + mm * 128) * size,
                                          (kk * m + mm * 128 + 128) * size),
                                     sbuf(rhs, 128, (kk * block_n + nt * 512) * size,
                                          (kk * block_n + nt * 512 + 512) * size),
                                     psum(1, 128, bank * 2048, bank * 2048 + 2048),
                                     128, 128, 512, dtype, line=30)
                    b.add("vector", "tensor_copy", (psum(1, 128, bank * 2048, bank * 2048 + 2048),),
                          (sbuf(out, 128, 0, 512 * size),), 128, 512, "float32", dtype,
                          128 * 512 * size, line=40)
                    col = (mm * 128 * n + nb * block_n + nt * 512) * size
                    b.dma(sbuf(out, 128, 0, 512 * size),
                          hbm(out_hbm, col, col + (127 * n + 512) * size), 128 * 512 * size,
                          128, line=50)
                    bank = (bank + 1) % 8
    return b.instructions
