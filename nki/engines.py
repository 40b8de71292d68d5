"""Engine-level schedule of a traced NKI kernel and its :class:`Profile`.

:func:`schedule` places each :class:`~systolica.nki.instructions.Instruction` on its engine
by these rules:

- each compute engine (TensorE ``tensor``, VectorE ``vector``, ScalarE ``scalar``, GpSimd
  ``gpsimd``) runs its own instructions in program order, one at a time; engines run
  concurrently. TensorE's exception is PE tiling (``tile_position`` / ``tile_size``): as in
  :func:`systolica.golden.timing.tiled_schedule`, an instruction waits only for the earlier
  TensorE instructions whose tiles share a PE row or a PE column with its tile
  (:meth:`systolica.golden.Tile.shares_lanes`; a whole-array instruction shares with every
  one), and never starts before the previous TensorE instruction started (in-order issue),
  so matmuls in disjoint diagonal tiles run at the same time. (The stationary loads of
  concurrent tiles, one port in the tile model, are inside each instruction's steady-state
  occupancy and not serialised across tiles: exact while N >= K, as for every matmul of the
  flash kernel);
- a DMA transfer runs on the ``dma_engines`` queues of the core (16), spread over as many as
  it has descriptors; transfers touching HBM also share the core's HBM bandwidth (a pipe).
  Each queue and the HBM pipe run one transfer at a time. Transfers come from two trigger
  streams, loads (from HBM) and the others (stores, on-chip copies), each started in program
  order; a transfer takes the earliest gap long enough from the time its data is ready and
  the previous transfer of its stream started (earliest fit: DMAs are triggered from several
  engines' instruction streams, so a store waiting for its data does not hold back later
  loads that are ready);
- an instruction starts once the instructions that wrote what it reads are done
  (read-after-write), and once every earlier reader and writer of what it writes is done
  (write-after-read, write-after-write), over byte ranges of SBUF/PSUM/HBM: the same
  allocation (``buffer``) with overlapping partitions and spans;
- ``sequential_range`` iterations do not overlap: every instruction of iteration ``i`` of
  such a loop waits for all instructions of earlier iterations of that loop (within the same
  iterations of the enclosing loops); ``affine_range`` and ``static_range`` iterations only
  wait for their data;
- on NeuronCore-v2, VectorE and GpSimd take turns on SBUF and VectorE and ScalarE on PSUM
  (:data:`systolica.nki.costs.SHARED_PORTS`).

Durations come from :mod:`systolica.nki.costs`. A matmul's PSUM result is readable the tile's
drain latency after its last moving beat; a DMA transfer starts moving bytes
``DMA_START_LATENCY`` (1.3 us, published) after it could be issued. The schedule sees only
shapes, types and byte ranges, never values: costing a kernel without numerics (issue 28's
shapes-only mode) is calling :func:`schedule` on its trace.

Dependencies are found through a per-allocation interval index (spans bucketed, records
covered by a later write dropped), so scheduling is about linear in the instruction count.
"""

import bisect
import json
import operator
from dataclasses import asdict, dataclass

from .costs import (
    DEPENDENT_OVERHEAD,
    DMA_START_LATENCY,
    Target,
    dma_plan,
    engine_cycles,
    load_target,
    tensor_cycles,
)
from .instructions import ENGINES, Access, Instruction

#: Compute engines, in the order tracks are drawn.
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
MEMORIES = ("sbuf", "psum", "hbm")
LOOP_KINDS = ("affine", "sequential", "static")
#: Span bytes per index bucket, by memory; an access over more than _WIDE buckets is kept in
#: one list that every query scans.
_BUCKET = {"sbuf": 2048, "psum": 2048, "hbm": 1 << 16}
_WIDE = 64
#: A bucket's list is pruned when it grows past this, then past twice its pruned length.
_PRUNE_AT = 8
#: Opcodes whose moving-free size is TensorE work (MFU counts ``nc_matmul`` that is not a
#: transpose).
_MATMUL = "nc_matmul"


class _Record:
    __slots__ = ("index", "p0", "p1", "s0", "s1", "time", "write", "tensor")

    def __init__(self, index, p0, p1, s0, s1, time, write, tensor):
        self.index, self.p0, self.p1, self.s0, self.s1 = index, p0, p1, s0, s1
        self.time, self.write, self.tensor = time, write, tensor

    def overlaps(self, p0, p1, s0, s1):
        return p0 < self.p1 and self.p0 < p1 and s0 < self.s1 and self.s0 < s1

    def within(self, other):
        return (self.p0 >= other.p0 and self.p1 <= other.p1 and self.s0 >= other.s0
                and self.s1 <= other.s1)


class _Bucket:
    """Writes and reads whose span touches one bucket; each list is pruned when it doubles."""

    __slots__ = ("writes", "reads", "write_limit", "read_limit")

    def __init__(self):
        self.writes, self.reads = [], []
        self.write_limit = self.read_limit = _PRUNE_AT


class _BufferIndex:
    """Accesses of one allocation, bucketed by span."""

    def __init__(self, bucket):
        self.bucket = bucket
        self.buckets = {}
        self.wide = _Bucket()

    def _lists(self, s0, s1, create):
        lo, hi = s0 // self.bucket, (s1 - 1) // self.bucket
        if hi - lo + 1 > _WIDE:
            return [self.wide] + [v for k, v in self.buckets.items() if lo <= k <= hi], True
        keys = range(lo, hi + 1)
        if create:
            return [self.wide] + [self.buckets.setdefault(k, _Bucket()) for k in keys], False
        return [self.wide] + [self.buckets[k] for k in keys if k in self.buckets], False

    def query(self, p0, p1, s0, s1, writes_only):
        seen = set()
        for bucket in self._lists(s0, s1, False)[0]:
            for records in (bucket.writes,) if writes_only else (bucket.writes, bucket.reads):
                for r in records:
                    if id(r) not in seen and r.overlaps(p0, p1, s0, s1):
                        seen.add(id(r))
                        yield r

    def add(self, record):
        buckets, wide = self._lists(record.s0, record.s1, True)
        for i, bucket in enumerate(buckets):
            if (i == 0) == wide:        # wide records live in the wide bucket only
                (bucket.writes if record.write else bucket.reads).append(record)
            if record.write and len(bucket.writes) > bucket.write_limit:
                bucket.writes[:] = [r for r in bucket.writes
                                    if r is record or not r.within(record)]
                bucket.write_limit = max(_PRUNE_AT, 2 * len(bucket.writes))
            if len(bucket.reads) > bucket.read_limit:
                bucket.reads[:] = [r for r in bucket.reads if r is record or not _covers(record, r)]
                bucket.read_limit = max(_PRUNE_AT, 2 * len(bucket.reads))


def _covers(record, r):
    """Whether ``record`` makes the read ``r`` redundant: a write covering it (later accesses
    wait for the write, which waited for the read), or a read covering it that finished no
    earlier. Pruning only saves time: every kept record stays correct."""
    return r.within(record) and (record.write or r.time <= record.time)


@dataclass(frozen=True)
class Placed:
    """One scheduled instruction (seconds from the kernel's start).

    Attributes
    ----------
    index : int
        Program-order index.
    engine : str
        ``tensor``, ``vector``, ``scalar``, ``gpsimd`` or ``dma``.
    opcode, source : str
    start, end : float
        Time the engine (DMA queues) began and stopped working on it.
    ready : float
        Time its outputs are readable by other instructions (>= ``end``).
    queues : tuple of int
        DMA queues it used (DMA only).
    """

    index: int
    engine: str
    opcode: str
    source: str
    start: float
    end: float
    ready: float
    queues: tuple = ()


def _integer(value):
    """``value`` as an int if it is an integer (numpy's too), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _check_range(where, name, value):
    try:
        start, stop = (_integer(v) for v in value)
        ok = start is not None and stop is not None and 0 <= start <= stop
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{where}: {name} must be a (start, stop) pair of integers with "
                         f"0 <= start <= stop, not {value!r}")


def _checked(instructions):
    out = list(instructions)
    for pos, ins in enumerate(out):
        if not isinstance(ins, Instruction):
            raise TypeError(f"instruction {pos} must be a systolica.nki.instructions.Instruction,"
                            f" not {type(ins).__name__}")
        where = f"instruction {pos} ({ins.opcode}{', ' + ins.source if ins.source else ''})"
        if ins.index != pos:
            raise ValueError(f"{where}: index is {ins.index}; indices must be 0, 1, ... in "
                             f"program order")
        if ins.engine not in ENGINES:
            raise ValueError(f"{where}: engine must be one of {', '.join(ENGINES)}, "
                             f"not {ins.engine!r}")
        elements = _integer(ins.elements)
        if elements is None or elements < 0:
            raise ValueError(f"{where}: elements must be an integer >= 0, not {ins.elements!r}")
        for access in (*ins.reads, *ins.writes):
            if not isinstance(access, Access) or access.memory not in MEMORIES:
                memory = getattr(access, "memory", access)
                raise ValueError(f"{where}: an access's memory must be one of "
                                 f"{', '.join(MEMORIES)}, not {memory!r}")
            _check_range(where, "partitions", access.partitions)
            _check_range(where, "span", access.span)
        for loop in ins.loops:
            if len(loop) != 3 or loop[2] not in LOOP_KINDS:
                raise ValueError(f"{where}: a loop must be (id, iteration, kind) with kind one "
                                 f"of {', '.join(LOOP_KINDS)}, not {loop!r}")
    return out


def _box(access):
    p0, p1 = access.partitions
    s0, s1 = access.span
    return p0, max(p1, p0 + 1), s0, max(s1, s0 + 1)


class _Timeline:
    """Busy intervals of one DMA resource (a queue, or the core's HBM pipe), sorted and
    disjoint, each with the instruction that holds it. A transfer takes the earliest gap
    long enough from the time it is ready (earliest fit): a transfer whose data is not ready
    yet does not hold back later transfers that are."""

    __slots__ = ("starts", "ends", "owners")

    def __init__(self):
        self.starts, self.ends, self.owners = [], [], []

    def fit(self, ready, duration):
        """``(start, blocker)``: the earliest start >= ``ready`` with ``duration`` free, and
        the instruction whose interval pushed it past ``ready`` (None if none did)."""
        at, blocker = ready, None
        j = bisect.bisect_right(self.ends, at)
        while j < len(self.starts) and self.starts[j] < at + duration:
            if self.ends[j] > at:
                at, blocker = self.ends[j], self.owners[j]
            j += 1
        return at, blocker

    def reserve(self, start, end, owner):
        """Mark ``[start, end)`` busy (the caller found it free with :meth:`fit`); an
        interval touching its neighbours merges with them (a busy queue stays one interval,
        so :meth:`fit` scans only the gaps), keeping the owner of its latest end."""
        if end <= start:
            return
        j = bisect.bisect_right(self.starts, start)
        if j and self.ends[j - 1] >= start:               # touches the one before
            j -= 1
            start = self.starts[j]
            if self.ends[j] > end:
                end, owner = self.ends[j], self.owners[j]
            del self.starts[j], self.ends[j], self.owners[j]
        while j < len(self.starts) and self.starts[j] <= end:     # touches the ones after
            if self.ends[j] > end:
                end, owner = self.ends[j], self.owners[j]
            del self.starts[j], self.ends[j], self.owners[j]
        self.starts.insert(j, start)
        self.ends.insert(j, end)
        self.owners.insert(j, owner)


def _dma_source(ins):
    return ins.reads[0].memory if ins.reads else None


def _fit_queues(lines, count, ready, duration):
    """``(start, queues, blocker)`` for a transfer on ``count`` DMA queues busy
    ``duration`` each from a common start: the ``count`` queues that can start it earliest,
    and the earliest start >= ``ready`` that all of them have free."""
    fits = sorted((line.fit(ready, duration) + (q,) for q, line in enumerate(lines)),
                  key=lambda f: (f[0], f[2]))[:count]
    chosen = [f[2] for f in fits]
    start = max(f[0] for f in fits)
    blocker = max(fits, key=lambda f: f[0])[1]
    while True:
        later = [(lines[q].fit(start, duration), q) for q in chosen]
        moved = [(at, b) for (at, b), _q in later if at > start]
        if not moved:
            return start, chosen, blocker
        start, blocker = max(moved)


#: How ``sequential_range`` iterations are scheduled (see :func:`schedule`).
SEQUENTIAL_MODES = ("barrier", "dependencies")


class _TensorLanes:
    """When TensorE's PE rows and columns are free, per quarter of the array (tile positions
    and sizes are multiples of a quarter on every target)."""

    def __init__(self, target):
        self.rows, self.cols = target.rows, target.cols
        self.row_free = [(0.0, None)] * 4
        self.col_free = [(0.0, None)] * 4
        self.last_start = (0.0, None)

    def _lanes(self, instruction):
        position = instruction.params.get("tile_position")
        size = instruction.params.get("tile_size")
        if not size:
            return range(4), range(4)
        qr, qc = self.rows // 4, self.cols // 4
        return (range(position[0] // qr, (position[0] + size[0]) // qr),
                range(position[1] // qc, (position[1] + size[1]) // qc))

    def free(self, instruction):
        """(time, index): when every lane of the instruction's tile is free and the previous
        TensorE instruction has started, and the instruction that set it."""
        rows, cols = self._lanes(instruction)
        return max([self.row_free[r] for r in rows] + [self.col_free[c] for c in cols]
                   + [self.last_start], key=operator.itemgetter(0))

    def take(self, instruction, start, end, index):
        rows, cols = self._lanes(instruction)
        for r in rows:
            self.row_free[r] = (end, index)
        for c in cols:
            self.col_free[c] = (end, index)
        self.last_start = (start, index)


def schedule(instructions, target="trn2", *, tile_cycles=None, sequential="barrier"):
    """Schedule a traced kernel on a NeuronCore and return its :class:`Profile`.

    Parameters
    ----------
    instructions : sequence of Instruction
        The trace in program order (``index`` 0, 1, ...).
    target : str or Target
        A hardware preset with ``[core.engines]`` (``"trn1"``: NeuronCore-v2, ``"trn2"``:
        NeuronCore-v3), or a :class:`~systolica.nki.costs.Target`.
    tile_cycles : callable or None
        ``tile_cycles(instruction) -> TensorE cycles`` for each TensorE instruction; default
        the tile's cycle model (:func:`systolica.nki.costs.golden_matmul_interval`, 4x for
        FP32). :func:`systolica.nki.costs.published_matmul_cycles` gives AWS's formula.
    sequential : str
        ``"barrier"`` (default): no instruction of a ``sequential_range`` iteration starts
        before every instruction of the earlier iterations is done. ``"dependencies"``:
        sequential iterations wait only for their data, like affine ones (AWS's docs say only
        that the compiler "respects inter-loop dependency" and optimises such loops more
        conservatively, ``nki.language.sequential_range``).

    Returns
    -------
    Profile

    Raises
    ------
    ValueError
        If the target is unknown or an instruction is malformed (the message names it).
    TypeError
        If an element is not an :class:`Instruction`.
    """
    t = target if isinstance(target, Target) else load_target(target)
    if sequential not in SEQUENTIAL_MODES:
        raise ValueError(f"sequential must be one of {', '.join(SEQUENTIAL_MODES)}, "
                         f"not {sequential!r}")
    barriers = sequential == "barrier"
    trace = _checked(instructions)
    placed = []
    why = []
    engine_free = {e: (0.0, None) for e in COMPUTE_ENGINES}
    lanes = _TensorLanes(t)
    queue_lines = [_Timeline() for _ in range(t.dma_engines)]
    stream_start = {"load": (0.0, None), "store": (0.0, None)}
    hbm_line = _Timeline()
    ports = [(0.0, None)] * len(t.shared_ports)
    index = {}
    loop_state = {}

    def buffer_index(access):
        key = (access.memory, access.buffer)
        found = index.get(key)
        if found is None:
            found = index[key] = _BufferIndex(_BUCKET[access.memory])
        return found

    for i, ins in enumerate(trace):
        t0, who, raw = 0.0, None, set()
        reads = [(buffer_index(a), _box(a)) for a in ins.reads]
        writes = [(buffer_index(a), _box(a)) for a in ins.writes]
        tensor = ins.engine == "tensor"
        for found, box in reads:
            for r in found.query(*box, True):
                raw.add(r.index)
                if r.time > t0 and not (tensor and r.tensor):
                    t0, who = r.time, r.index
        for found, box in writes:
            for r in found.query(*box, False):
                # TensorE's pipeline keeps its own PSUM writes in order (accumulating matmuls
                # issue back to back); engine order already covers them.
                if r.time > t0 and not (tensor and r.tensor):
                    t0, who = r.time, r.index
        states = []
        for pos, (lid, it, kind) in enumerate(ins.loops):
            if kind != "sequential" or not barriers:
                continue
            key = (tuple((l, j) for l, j, _ in ins.loops[:pos]), lid)
            st = loop_state.get(key)
            if st is None:
                st = loop_state[key] = [it, 0.0, None, 0.0, None]
            elif st[0] != it:
                st[0], st[1], st[2] = it, st[3], st[4]
            if st[1] > t0:
                t0, who = st[1], st[2]
            states.append(st)
        if ins.engine == "dma":
            plan = dma_plan(ins, t)
            ready = t0 + DMA_START_LATENCY
            stream = "load" if ins.params.get("src", _dma_source(ins)) == "hbm" else "store"
            floor, floor_who = stream_start[stream]
            if floor > ready:
                ready, who = floor, floor_who
            s, chosen, blocker = _fit_queues(queue_lines, plan.queues, ready, plan.queue_seconds)
            if blocker is not None and s > ready:
                who = blocker
            stream_start[stream] = (s, i)
            e = s + plan.queue_seconds
            if plan.hbm_bytes:
                h0, blocker = hbm_line.fit(s, plan.hbm_bytes / t.hbm_bandwidth)
                hbm_line.reserve(h0, h0 + plan.hbm_bytes / t.hbm_bandwidth, i)
                if h0 + plan.hbm_bytes / t.hbm_bandwidth > e:
                    e = h0 + plan.hbm_bytes / t.hbm_bandwidth
                    if blocker is not None:
                        who = blocker
            for q in chosen:
                queue_lines[q].reserve(s, s + plan.queue_seconds, i)
            rdy = e
            queues = tuple(sorted(chosen))
        else:
            clock = t.clocks_hz[ins.engine]
            free, last = lanes.free(ins) if tensor else engine_free[ins.engine]
            s = t0
            if free > s:
                s, who = free, last
            if ins.engine == "tensor":
                occupancy, drain = tensor_cycles(ins, t, tile_cycles)
            else:
                occupancy, drain = engine_cycles(ins, t), 0
                if ins.engine in ("vector", "scalar") and last is not None and last in raw:
                    occupancy += DEPENDENT_OVERHEAD
            memories = {a.memory for a in (*ins.reads, *ins.writes)}
            shared = [k for k, (memory, engines) in enumerate(t.shared_ports)
                      if ins.engine in engines and memory in memories]
            for k in shared:
                if ports[k][0] > s:
                    s, who = ports[k]
            e = s + occupancy / clock
            rdy = e + drain / clock
            for k in shared:
                ports[k] = (e, i)
            if tensor:
                lanes.take(ins, s, e, i)
            engine_free[ins.engine] = (e, i)
            queues = ()
        placed.append(Placed(i, ins.engine, ins.opcode, ins.source, s, e, rdy, queues))
        why.append(who)
        for found, box in reads:
            found.add(_Record(i, *box, e, False, tensor))
        for found, box in writes:
            found.add(_Record(i, *box, rdy, True, tensor))
        for st in states:
            if rdy > st[3]:
                st[3], st[4] = rdy, i
    return Profile(t, trace, placed, why)


class Profile:
    """Where a kernel's time goes, engine by engine (built by :func:`schedule`).

    Attributes
    ----------
    target : Target
    seconds : float
        Kernel time: the latest ``ready`` of any instruction.
    cycles : dict of str -> float
        ``seconds`` in cycles of each compute engine's clock.
    busy_cycles : dict of str -> float
        Cycles each compute engine spent on instructions (its clock); TensorE's count the
        time with at least one instruction running (concurrent tiles once).
    engine_busy : dict of str -> float
        Busy fraction 0..1 of ``tensor``, ``vector``, ``scalar``, ``gpsimd`` and ``dma`` (the
        mean over the DMA queues).
    mfu : float
        TensorE MFU: useful matmul MACs (``k * m * n`` of each non-transpose ``nc_matmul``) /
        (peak MACs/s x seconds), the peak at one MAC per PE per cycle (BF16/FP16/TF32/FP8);
        FP8 double-row matmuls (K up to 256) can take it above 1, and ``nc_matmul_mx`` (K = 4
        P, four MACs per PE per cycle) up to 4.
    hbm_bytes : int
        Bytes DMA moved from or to HBM.
    hbm_bandwidth : float
        ``hbm_bytes / seconds`` (bytes/s).
    critical_path : list of int
        Instruction indices, first to last, each the one that set the next one's start.
    instructions : list of Placed
    """

    def __init__(self, target, trace, placed, why):
        self.target = target
        self.instructions = placed
        self.seconds = max((p.ready for p in placed), default=0.0)
        self.cycles = {e: self.seconds * target.clocks_hz[e] for e in COMPUTE_ENGINES}
        busy = dict.fromkeys(ENGINES, 0.0)
        tensor_end = 0.0        # concurrent tiles: TensorE is busy while any one runs
        for p in placed:
            if p.engine == "tensor":
                busy["tensor"] += max(0.0, p.end - max(p.start, tensor_end))
                tensor_end = max(tensor_end, p.end)
            else:
                busy[p.engine] += (p.end - p.start) * (len(p.queues) or 1)
        span = self.seconds or 1.0
        self.engine_busy = {e: busy[e] / span for e in COMPUTE_ENGINES}
        self.busy_cycles = {e: busy[e] * target.clocks_hz[e] for e in COMPUTE_ENGINES}
        self.engine_busy["dma"] = busy["dma"] / (span * target.dma_engines)
        macs = sum(_macs(ins) for ins in trace)
        self.mfu = macs / (target.peak_macs_per_second * span) if placed else 0.0
        self.hbm_bytes = sum(dma_plan(ins, target).hbm_bytes for ins in trace
                             if ins.engine == "dma")
        self.hbm_bandwidth = self.hbm_bytes / span if placed else 0.0
        path = []
        if placed:
            at = max(range(len(placed)), key=lambda j: placed[j].ready)
            while at is not None:
                path.append(at)
                at = why[at]
        self.critical_path = path[::-1]

    def table(self):
        """Per-instruction totals, largest first: list of dicts with ``opcode``, ``engine``,
        ``source``, ``count`` and ``seconds`` (summed engine time)."""
        rows = {}
        for p in self.instructions:
            row = rows.setdefault((p.opcode, p.engine, p.source),
                                  {"opcode": p.opcode, "engine": p.engine, "source": p.source,
                                   "count": 0, "seconds": 0.0})
            row["count"] += 1
            row["seconds"] += p.end - p.start
        return sorted(rows.values(), key=lambda r: (-r["seconds"], r["source"], r["opcode"]))

    def to_json(self):
        """The profile as one JSON-able dict (times in seconds)."""
        return {
            "target": self.target.name, "core": self.target.core, "seconds": self.seconds,
            "cycles": self.cycles, "busy_cycles": self.busy_cycles,
            "engine_busy": self.engine_busy, "mfu": self.mfu,
            "hbm_bytes": self.hbm_bytes, "hbm_bandwidth": self.hbm_bandwidth,
            "critical_path": self.critical_path, "table": self.table(),
            "instructions": [asdict(p) | {"queues": list(p.queues)} for p in self.instructions],
        }

    def tracks(self):
        """Track names, in drawing order: the compute engines, then ``dma0``, ``dma1``, ..."""
        return list(COMPUTE_ENGINES) + [f"dma{q}" for q in range(self.target.dma_engines)]

    def spans(self):
        """``(track, start, end, placed)`` for every engine interval (a DMA transfer once per
        queue it used)."""
        for p in self.instructions:
            for track in ([f"dma{q}" for q in p.queues] if p.engine == "dma" else [p.engine]):
                yield track, p.start, p.end, p

    def write_trace(self, path):
        """Write a Chrome/Perfetto trace-event JSON file (one track per engine and DMA queue;
        ``ts``/``dur`` in microseconds). Open it in https://ui.perfetto.dev."""
        from .trace_export import trace_events

        with open(path, "w") as f:
            json.dump(trace_events(self), f)

    def plot(self, path):
        """Write a PNG timeline of the engines and DMA queues (matplotlib)."""
        from .trace_export import plot_timeline

        plot_timeline(self, path)

    def __str__(self):
        t = self.target
        lines = [f"{t.name} ({t.core}): {self.seconds * 1e6:.3f} us, "
                 f"TensorE MFU {self.mfu:.1%}, HBM {self.hbm_bytes / 2**20:.2f} MiB at "
                 f"{self.hbm_bandwidth / 1e9:.1f} GB/s",
                 "busy: " + ", ".join(f"{e} {v:.1%}" for e, v in self.engine_busy.items()),
                 f"critical path: {len(self.critical_path)} instructions",
                 f"{'opcode':<22} {'engine':<7} {'count':>6} {'time us':>10}  source"]
        for row in self.table()[:20]:
            lines.append(f"{row['opcode']:<22} {row['engine']:<7} {row['count']:>6} "
                         f"{row['seconds'] * 1e6:>10.3f}  {row['source']}")
        return "\n".join(lines)


def _macs(ins):
    if ins.opcode not in (_MATMUL, "nc_matmul_mx") or ins.params.get("is_transpose"):
        return 0
    k, m, n = (ins.params.get(x) for x in ("k", "m", "n"))
    return (k or ins.partitions) * (m or ins.partitions) * (n or ins.elements)
