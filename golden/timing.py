"""Cycle model of the tile: when each command is accepted, loads, issues and drains.

The model follows the RTL's rules (``systolica.hdl.tile``), with L = ``rows + cols``:

- commands are taken one per cycle into a queue of three (:data:`COMMAND_QUEUE_DEPTH`); a
  rejected command (see :func:`~systolica.golden.command.command_error`) takes one cycle and
  nothing else; a queued command leaves the queue when it issues its first beat;
- stationary loads run in command order, ``K`` beats one per cycle (``min(K, rows)`` in FP8
  double-row mode, each beat carrying partition rows r and r + rows), from the cycle after
  their command was taken, once the previous load is done and once a buffer is free in
  every PE of the matmul's tile (every PE has two; a matmul uses the same one in all PEs of
  its tile, buffer 0 when both are free): a buffer frees the cycle after the matmul loaded
  into it has sent its last moving beat (the load is skewed like the moving data, so it
  trails that beat through the array);
- a command issues its beats one per cycle (moving beats of a matmul, PSUM reads of a READ)
  once the previous command has issued all of its beats and, for a matmul, the cycle after
  its load completed;
- a beat issued in cycle ``t`` has its result offered in cycle ``t + L``; the whole
  pipeline (issue and stationary loads included) stalls in a cycle where a result is
  offered and not taken.

So back-to-back matmuls take ``max(K, N)`` cycles each once the pipeline runs, plus one
cycle to take the first command, the first load and the ``L``-cycle drain.

:func:`command_schedule` computes the stamps by the recurrence above when no result is
refused, and by stepping the same rules cycle by cycle when a ``result_ready`` pattern is
given (random backpressure). Stream drivers offer every beat as soon as the previous one is
taken (no idle cycles on the input streams) unless an ``offer`` pattern says in which cycles
they do (random idle; stepped too).

Cycle 0 is the first cycle in which the streams may transfer after reset. All figures are in
clock cycles.

A matmul with a tile (``Command.tile_position``) runs alone, as the RTL runs it: its stamps
follow the rules above, except that a load into a row tile starting at PE row r also waits
r cycles after its buffer's last moving beat (that beat's operands reach row r r cycles
after row 0; :func:`tiled_schedule` has the same rule). A matmul with a float32 operand
issues each moving beat on four consecutive cycles (a 32-bit transpose on two): its moving
beat is taken on the first, its result offered ``L`` cycles after the last
(:func:`matmul_passes`). The tensor-engine instruction's features beyond the RTL
(concurrent tiles) have their own functions beside these:
:func:`matmul_passes` (moving beats per moving column), :func:`nc_matmul_cost` (AWS's
published per-instruction cost) and :func:`tiled_schedule` (several matmuls in flight in
tiles that share no PE row or column, one LoadStationary port, per-PE weight buffers). On a
program of BF16/FP8/INT8 matmuls and READs in which every matmul's tile shares a PE row or
column with the previous command's (all in one tile, the whole array or any other, for
one), :func:`tiled_schedule` gives exactly :func:`command_schedule`'s stamps.
"""

from collections import defaultdict
from dataclasses import dataclass

from .command import (
    DTYPES,
    MX_GROUP_ROWS,
    PSUM_BANKS,
    PSUM_ENTRIES,
    Command,
    check_bool,
    check_positive,
    command_error,
)
from .formats import DOUBLE_ROW, check_transpose, format_of, max_k, operand_formats
from .tiles import TILE_SPLITS, Tile, check_tile, check_tile_operands, tile_sizes

#: Commands accepted and not yet started that the tile holds.
COMMAND_QUEUE_DEPTH = 3


def tile_latency(rows, cols):
    """Cycles from a moving beat's acceptance to its result being offered.

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs (partition rows x stationary columns), each >= 1.

    Returns
    -------
    int
        ``rows + cols`` cycles.

    Raises
    ------
    ValueError
        If ``rows`` or ``cols`` is not a positive integer.
    """
    check_positive("rows", rows)
    check_positive("cols", cols)
    return rows + cols


def matmul_cycles(rows, cols, n):
    """Cycles for one isolated matmul of ``n`` moving beats, first beat to last result.

    Counts from the cycle the first moving beat is accepted to the cycle the last result is
    taken, inclusive, with the stationary already loaded and no stall: ``n + rows + cols``.

    Raises
    ------
    ValueError
        If an argument is not a positive integer.
    """
    check_positive("n", n)
    return n + tile_latency(rows, cols)


@dataclass(frozen=True)
class CommandTiming:
    """Cycle stamps of one command in a program (cycles from cycle 0).

    Attributes
    ----------
    accept : int
        Cycle the command beat is taken.
    error : str or None
        Why the tile rejected the command (then every other stamp is empty).
    loads : tuple of int
        Cycle each stationary beat is taken, in order (``K`` of them; matmul only).
    issues : tuple of int
        Cycle each beat enters the pipeline, in order (``N`` of them): a matmul's moving
        beats are accepted, a READ's beats are issued.
    results : tuple of int
        Cycle each result beat is taken, in order (``N`` of them).
    """

    accept: int
    error: str | None = None
    loads: tuple = ()
    issues: tuple = ()
    results: tuple = ()

    @property
    def load_start(self):
        """Cycle the first stationary beat is taken (int, or None for a READ)."""
        return self.loads[0] if self.loads else None

    @property
    def load_end(self):
        """Cycle the last stationary beat is taken (int, or None for a READ)."""
        return self.loads[-1] if self.loads else None

    @property
    def first_issue(self):
        """Cycle the first beat enters the pipeline (int or None)."""
        return self.issues[0] if self.issues else None

    @property
    def last_issue(self):
        """Cycle the last beat enters the pipeline (int or None)."""
        return self.issues[-1] if self.issues else None

    @property
    def last_result(self):
        """Cycle the last result is taken (int or None)."""
        return self.results[-1] if self.results else None


def _grain(rows, cols, splits=4):
    """The finest tile of a ``rows x cols`` array, ``(rows, cols)``: the cells in which the
    weight buffers are tracked."""
    return min(tile_sizes(rows, splits)), min(tile_sizes(cols, splits))


def _cells(tile, grain):
    """The (row, column) grain cells a tile covers."""
    return [(r, c) for r in range(tile.row // grain[0], (tile.row + tile.rows) // grain[0])
            for c in range(tile.col // grain[1], (tile.col + tile.cols) // grain[1])]


def command_tile(command, rows, cols):
    """The :class:`~systolica.golden.Tile` a :class:`Command` occupies on a ``rows x cols``
    array: a matmul's ``tile_position`` / ``tile_size``, else the whole array (a READ
    shares every lane)."""
    if command.op == "matmul" and command.tile_position is not None:
        return Tile(*command.tile_position, *command.tile_size)
    return Tile(0, 0, rows, cols)


class _WeightBuffers:
    """The two weight buffers of every PE, tracked per grain cell, for the closed
    recurrences (``docs/numerics.md``, tiles choice 11).

    A matmul uses one buffer in every PE of its tile (its select travels with the moving
    operand along the PE row). Its load takes buffer 0 from the first cycle buffer 0 is
    free in every cell of the tile, or buffer 1 if that comes first: a buffer is free the
    cycle after the matmul loaded into it last has issued its last beat, plus ``r`` cycles
    for a tile starting at PE row ``r`` (that beat reaches row ``r`` ``r`` cycles after
    row 0); a buffer no matmul has used is free at once.
    """

    def __init__(self):
        self._last = defaultdict(lambda: [None, None])     # cell -> last issue per buffer

    def load(self, cells, row, earliest):
        """The cycle a load into ``cells`` of a tile starting at PE row ``row`` starts (int)
        and the buffer it writes (0 or 1), given that it cannot start before ``earliest``."""
        free = [max((self._last[cell][b] + 1 + row for cell in cells
                     if self._last[cell][b] is not None), default=earliest)
                for b in (0, 1)]
        start = max(earliest, min(free))
        return start, (0 if free[0] <= start else 1)

    def hold(self, cells, buf, last_issue):
        """A matmul loaded into buffer ``buf`` of ``cells`` issues its last beat in cycle
        ``last_issue``."""
        for cell in cells:
            self._last[cell][buf] = last_issue


def _checked(commands, rows, cols, banks, entries, dtypes=DTYPES, double_row=True, mx=False):
    commands = list(commands)
    for j, command in enumerate(commands):
        if not isinstance(command, Command):
            raise TypeError(f"command {j} must be a systolica.golden.Command, "
                            f"not {type(command).__name__}")
    return commands, [command_error(c, rows=rows, cols=cols, banks=banks, entries=entries,
                                    dtypes=dtypes, double_row=double_row, mx=mx)
                      for c in commands]


@dataclass(frozen=True)
class _Step:
    """One command as the schedules see it: ``error`` (rejected: nothing else matters),
    ``read``, its ``tile`` and the grain ``cells`` it covers, its LoadStationary ``beats``,
    ``n`` columns of ``passes`` cycles each."""

    error: str | None
    read: bool = False
    tile: Tile | None = None
    cells: tuple = ()
    beats: int = 0
    n: int = 0
    passes: int = 1

    @property
    def alone(self):
        """It shares every lane: a READ, or several passes per column."""
        return self.read or self.passes > 1

    def waits_for(self, other):
        """Whether it must start after ``other``, an earlier command, has issued its last
        beat (``docs/numerics.md``, tiles choice 9)."""
        return self.alone or other.alone or self.tile.shares_lanes(other.tile)


def _command_steps(commands, errors, rows, cols):
    """The :class:`_Step` of each command (rejected ones included)."""
    grain = _grain(rows, cols)
    steps = []
    for command, error in zip(commands, errors, strict=True):
        if error is not None:
            steps.append(_Step(error))
            continue
        tile = command_tile(command, rows, cols)
        read = command.op == "read"
        steps.append(_Step(None, read, tile, () if read else tuple(_cells(tile, grain)),
                           0 if read else command.load_beats(rows), command.n,
                           _command_passes(command)))
    return steps


def _concurrent(steps):
    """The closed recurrence of :func:`tiled_schedule` (no stalls) over :class:`_Step` s:
    per step ``(accept, loads, first, last)``, ``first`` and ``last`` the cycles of its
    first and last beat (every pass counted); ``None`` for the last three of a rejected
    one."""
    out, started, history = [], [], []      # history: (step, last beat) of each command
    buffers = _WeightBuffers()
    accept = prev_load_end = prev_first = -1
    for step in steps:
        accept += 1
        if len(started) >= COMMAND_QUEUE_DEPTH:
            accept = max(accept, started[-COMMAND_QUEUE_DEPTH] + 1)
        if step.error is not None:
            out.append((accept, None, None, None))
            continue
        first = max([accept + 1, prev_first + 1] + [last + 1 for other, last in history
                                                    if step.waits_for(other)])
        loads = ()
        if not step.read:
            start, buf = buffers.load(step.cells, step.tile.row,
                                      max(accept + 1, prev_load_end + 1))
            prev_load_end = start + step.beats - 1
            loads = tuple(range(start, prev_load_end + 1))
            first = max(first, prev_load_end + 1)
        last = first + step.n * step.passes - 1
        if not step.read:
            buffers.hold(step.cells, buf, last)
        # A command whose last beat is before this start cannot hold back a later one (it
        # starts after this one): only those still in flight are kept, so a program costs
        # time linear in its length.
        history = [(other, end) for other, end in history if end >= first]
        history.append((step, last))
        started.append(first)
        prev_first = first
        out.append((accept, loads, first, last))
    return out


def _recurrence(commands, errors, latency, rows, cols):
    steps = _command_steps(commands, errors, rows, cols)
    out = []
    for step, (accept, loads, first, last) in zip(steps, _concurrent(steps), strict=True):
        if step.error is not None:
            out.append(CommandTiming(accept, step.error))
            continue
        issues = tuple(range(first, last + 1, step.passes))
        results = tuple(t + step.passes - 1 + latency for t in issues)
        out.append(CommandTiming(accept, None, loads, issues, results))
    return out


def program_beats(rows, cols, commands, *, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                  dtypes=DTYPES, double_row=True, mx=False):
    """The stream beats of a program as the host packs them: ``(moving, results)``, per
    MultiplyMoving beat the commands whose next moving column it carries, and per result
    beat the commands it carries results of (lists of tuples of command indices, in
    stream order).

    A beat carries the column of every matmul that takes one in the same cycle of the
    no-stall schedule (:func:`command_schedule`): matmuls in flight in tiles that share no
    PE row or column share beats, each in its own lanes, and so their result beats (every
    tile's results take ``rows + cols``); stalls then delay every beat alike. Rejected
    commands have none, a READ only result beats.

    Raises
    ------
    TypeError, ValueError
        As :func:`command_schedule`.
    """
    commands, errors = _checked(commands, rows, cols, banks, entries, dtypes, double_row, mx)
    steps = _command_steps(commands, errors, rows, cols)
    return _beats(steps, _concurrent(steps), tile_latency(rows, cols))


def moving_beats(rows, cols, commands, **kwargs):
    """The MultiplyMoving beats of :func:`program_beats` (same arguments and errors)."""
    return program_beats(rows, cols, commands, **kwargs)[0]


def _beats(steps, spans, latency):
    """:func:`program_beats` from the :class:`_Step` s and their :func:`_concurrent`
    spans."""
    moving, results = defaultdict(list), defaultdict(list)
    for j, (step, (_, _, first, last)) in enumerate(zip(steps, spans, strict=True)):
        if step.error is not None:
            continue
        for cycle in range(first, last + 1, step.passes):
            if not step.read:
                moving[cycle].append(j)
            results[cycle + step.passes - 1 + latency].append(j)
    return ([tuple(moving[c]) for c in sorted(moving)],
            [tuple(results[c]) for c in sorted(results)])


def _command_passes(command):
    """Cycles a command spends on each beat (int): :func:`matmul_passes` of a matmul, 1 for
    a READ."""
    if command.op == "read":
        return 1
    return matmul_passes(command.dtype, command.mtype, is_transpose=command.is_transpose)


def _stepped(commands, errors, latency, rows, cols, result_ready, max_cycles, offer=None):
    stamps = [dict(accept=None, error=e, loads=[], issues=[], results=[]) for e in errors]
    steps = _command_steps(commands, errors, rows, cols)
    beats = _beats(steps, _concurrent(steps), latency)[0]   # as the host packs them
    drivers = {"command": _Driver(len(commands)),
               "stationary": _Driver(sum(s.beats for s in steps if s.error is None)),
               "moving": _Driver(len(beats))}
    for name, driver in drivers.items():
        driver.step(False, offer is None or offer(name, 0))
    queue = []                  # [command index, loaded, buffer loaded]
    offered = 0                 # next command the driver offers
    load_buf = 0                # the buffer the load under way writes (from its first beat)
    load_row = 0
    # Per grain cell and buffer (tiles choice 11): held by a matmul loaded and not done
    # sending moving beats; advances since its last matmul's last beat, up to rows.
    held = defaultdict(lambda: [False, False])
    since = defaultdict(lambda: [rows, rows])
    flight = {}                 # command index -> [beats left after the current, sel, pass]
    tokens = [None] * latency   # commands of each beat in flight; [-1] is offered
    remaining = sum(s.n for s in steps if s.error is None)
    cycle = 0
    while remaining:
        if cycle >= max_cycles:
            raise RuntimeError(f"timing model made no progress in {max_cycles} cycles")
        out = tokens[-1]
        ready = result_ready is None or bool(result_ready(cycle))
        advance = not out or ready
        # Combinational decisions from the current state.
        take_command = drivers["command"].valid and len(queue) < COMMAND_QUEUE_DEPTH
        target = next((i for i, (_, done, _) in enumerate(queue) if not done), None)
        buf = loading = None    # the target's load: command, the buffer it can write
        if target is not None:
            loading = queue[target][0]
            buf = load_buf if load_row else next(
                (b for b in (0, 1) if all(not held[cell][b]
                                          and since[cell][b] >= steps[loading].tile.row
                                          for cell in steps[loading].cells)), None)
        load = advance and buf is not None and drivers["stationary"].valid
        load_done = load and load_row == steps[loading].beats - 1
        head = queue[0] if queue and queue[0][1] else None     # loaded: it may start
        clear = head is not None and not any(steps[head[0]].waits_for(steps[j])
                                             for j in flight)
        issued, start, beat = [], None, None
        if advance:
            # A READ's next beat, a matmul's later passes: no moving beat needed.
            issued = [j for j, (_, _, step) in flight.items() if step or steps[j].read]
            if drivers["moving"].valid:
                names = beats[drivers["moving"].sent]
                new = [j for j in names if j not in flight]
                if (all(flight[j][2] == 0 for j in names if j in flight)
                        and (not new or (clear and new == [head[0]]))):
                    beat = names
                    issued += list(names)
                    start = new[0] if new else None
            if clear and steps[head[0]].read:
                start = head[0]
                issued.append(start)
        # Sequential update.
        if out and ready:
            for j in out:
                stamps[j]["results"].append(cycle)
            remaining -= len(out)
        if advance:
            token = []
            for counts in since.values():
                counts[:] = [min(x + 1, rows) for x in counts]
            if start is not None:
                queue.pop(0)
                if target is not None:
                    target -= 1
                flight[start] = [steps[start].n - 1, head[2], 0]
            for j in issued:
                left, sel, step = flight[j]
                done = step == steps[j].passes - 1     # the column's last pass
                if step == 0:
                    stamps[j]["issues"].append(cycle)
                if done:
                    token.append(j)
                if left == 0 and done:
                    del flight[j]
                    for cell in steps[j].cells:
                        held[cell][sel] = False
                        since[cell][sel] = 0
                else:
                    flight[j] = [left - (1 if done else 0), sel, 0 if done else step + 1]
            tokens = [token] + tokens[:-1]
        if load:
            stamps[loading]["loads"].append(cycle)
            load_row += 1
            load_buf = buf
            if load_done:
                queue[target][1:] = [True, buf]
                for cell in steps[loading].cells:
                    held[cell][buf] = True
                load_row = 0
        if take_command:
            stamps[offered]["accept"] = cycle
            if errors[offered] is None:
                queue.append([offered, commands[offered].op == "read", None])
            offered += 1
        for name, taken in (("command", take_command), ("stationary", load),
                            ("moving", beat is not None)):
            drivers[name].step(taken, offer is None or offer(name, cycle + 1))
        cycle += 1
    while offered < len(commands):      # rejected commands after the last result
        taken = drivers["command"].valid
        if taken:
            stamps[offered]["accept"] = cycle
            offered += 1
        drivers["command"].step(taken, offer is None or offer("command", cycle + 1))
        cycle += 1
    return [CommandTiming(**{**s, **{key: tuple(s[key]) for key in ("loads", "issues", "results")}})
            for s in stamps]


class _Driver:
    """A stream driver as the testbenches build them: it holds ``valid`` until its beat is
    taken, and raises it for the next beat in a cycle it offers (``offer``) while beats
    are left."""

    def __init__(self, count):
        self.count, self.sent, self.valid = count, 0, False

    def step(self, taken, offer):
        """Update at the end of a cycle: ``taken`` (a beat transferred), ``offer`` (whether
        the driver would offer a beat in the next cycle)."""
        if self.valid and taken:
            self.sent += 1
            self.valid = False
        if not self.valid:
            self.valid = self.sent < self.count and bool(offer)


def command_schedule(rows, cols, commands, *, banks=PSUM_BANKS, entries=PSUM_ENTRIES,
                     result_ready=None, offer=None, max_cycles=10_000_000, dtypes=DTYPES,
                     double_row=True, mx=False):
    """Predict every command's cycle stamps (see the module docstring for the rules).

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    commands : sequence of Command
        The program, in order.
    banks, entries : int
        PSUM geometry (decides which commands are rejected).
    dtypes, double_row, mx
        The tile's type set, as :func:`~.command.command_error` takes it (default every
        type and double-row, no MX datapath): a command outside it is rejected. An MX
        matmul is timed like any other (``K`` load beats, one pass per moving column).
    result_ready : callable or None
        ``result_ready(cycle) -> bool``: whether the result stream's consumer is ready in
        that cycle. ``None`` means always ready (the closed recurrence is used, unless
        ``offer`` is given).
    offer : callable or None
        ``offer(stream, cycle) -> bool``, stream ``"command"``, ``"stationary"`` or
        ``"moving"``: whether that input stream's driver, holding no beat, offers its next
        one in that cycle (random idle cycles); a driver holds an offered beat until it is
        taken. ``None``: every beat is offered at once (no idle cycles). The stepped model
        is used when it is given.
    max_cycles : int
        Give up (``RuntimeError``) after this many stepped cycles.

    Returns
    -------
    list of CommandTiming

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    TypeError
        If an element of ``commands`` is not a :class:`Command`.
    """
    latency = tile_latency(rows, cols)
    check_positive("banks", banks)
    check_positive("entries", entries)
    commands, errors = _checked(commands, rows, cols, banks, entries, dtypes, double_row, mx)
    if result_ready is None and offer is None:
        return _recurrence(commands, errors, latency, rows, cols)
    return _stepped(commands, errors, latency, rows, cols, result_ready, max_cycles, offer)


def program_schedule(rows, cols, shapes, *, perf_mode=None, mx=False):
    """Predict the stamps of back-to-back matmuls of the given ``(K, N)`` shapes, no stalls.

    Each matmul overwrites PSUM bank 0 from entry 0 with ``M = cols``; bank and M do not
    affect timing. ``perf_mode="double_row"`` makes them FP8 double-row matmuls (K up to
    ``2 * rows``, ``min(K, rows)`` load beats). ``mx=True`` makes them MXFP8 matmuls
    (``Command.mx``): K counts partition rows of x4 words (a contraction of 4 K, so 4 MACs
    per PE per cycle), a multiple of 8 up to ``rows``, K load beats. Returns a list of
    :class:`CommandTiming`.

    Raises
    ------
    ValueError
        If a size is not a positive integer or K exceeds ``rows`` (``2 * rows`` in
        double-row mode), or an MX K is not a multiple of 8, or ``mx`` with a
        ``perf_mode``.
    """
    check_bool("mx", mx)
    if mx and perf_mode is not None:
        raise ValueError(f"an MX matmul takes no perf_mode (got {perf_mode!r})")
    dtype = "e4m3fn" if mx else "e4m3" if perf_mode is not None else "int8"
    latency = tile_latency(rows, cols)
    commands = []
    for j, (k, n) in enumerate(shapes):
        check_positive(f"K of matmul {j}", k)
        check_positive(f"N of matmul {j}", n)
        if k > max_k(rows, perf_mode):
            mode = f", 2 x rows = {2 * rows} in double_row" if perf_mode else ""
            raise ValueError(f"K of matmul {j} is {k}, more than rows = {rows}{mode}")
        if mx and k % MX_GROUP_ROWS:
            raise ValueError(f"K of MX matmul {j} is {k} partition rows, not a multiple of "
                             f"{MX_GROUP_ROWS} (whole E8M0 scale groups)")
        commands.append(Command("matmul", k=k, m=cols, n=n, dtype=dtype, perf_mode=perf_mode,
                                mx=mx))
    return _recurrence(commands, [None] * len(commands), latency, rows, cols)


def program_cycles(rows, cols, shapes, *, perf_mode=None, mx=False):
    """Cycles a back-to-back program takes, from cycle 0 to its last result inclusive (int).

    See :func:`program_schedule` for the arguments and errors.
    """
    schedule = program_schedule(rows, cols, shapes, perf_mode=perf_mode, mx=mx)
    if not schedule:
        raise ValueError("shapes must hold at least one (K, N) pair")
    return schedule[-1].last_result + 1


# ---------------------------------------------------------------------------------------------
# The tensor-engine instruction: FP32 passes, transpose rate, AWS's cost, concurrent tiles

#: Floor of a MultiplyMoving's initiation interval in TensorE cycles (``MM_INIT_LATENCY``,
#: 64 on NeuronCore-v2: Trainium/Inferentia2 architecture guide, Tensor Engine, "Cost
#: Model"); the ``64`` of AWS's ``nc_matmul`` cost formula.
MM_INIT_LATENCY = 64
#: Moving beats per moving column of a matmul with a float32 operand (AWS's cost model:
#: 4 x the BF16/FP16/TF32/FP8 cost; NKI API reference, ``nki.isa.nc_matmul``, "Estimated
#: instruction cost").
FP32_PASSES = 4
#: Moving beats per moving column of a transpose of 32-bit elements: transpose mode is 2x
#: faster than an FP32 transpose by matmul (Trainium2 architecture guide, "Built-in
#: Transpose Support").
WIDE_TRANSPOSE_PASSES = 2


def matmul_passes(stationary_dtype, moving_dtype=None, *, is_transpose=False):
    """Moving beats the tile spends on each moving column (int).

    Parameters
    ----------
    stationary_dtype, moving_dtype : str or dtype
        Operand types (short names such as ``"fp32"`` or dtypes); ``moving_dtype`` None
        means the same as ``stationary_dtype``.
    is_transpose : bool
        Transpose mode.

    Returns
    -------
    int
        :data:`FP32_PASSES` (4) for a matmul with a float32 operand;
        :data:`WIDE_TRANSPOSE_PASSES` (2) for a transpose of tfloat32/float32 elements; 1
        otherwise (TF32 matmuls run at the BF16 rate: Trainium/Inferentia2 architecture
        guide, "Cost Model").

    Raises
    ------
    TypeError
        If a type is not an operand type or the pair is not allowed.
    """
    pair = operand_formats(stationary_dtype,
                           stationary_dtype if moving_dtype is None else moving_dtype)
    check_bool("is_transpose", is_transpose)
    if is_transpose:
        return WIDE_TRANSPOSE_PASSES if pair[0].is_wide else 1
    return FP32_PASSES if "fp32" in (pair[0].name, pair[1].name) else 1


def nc_matmul_cost(n_stationary, n_moving, *, stationary_dtype="bf16", moving_dtype=None,
                   is_transpose=False):
    """AWS's published cost of one ``nc_matmul`` among many of the same shape back to back,
    in TensorE cycles: ``passes x max(min(64, n_stationary), n_moving)``.

    ``passes`` is :func:`matmul_passes` (NKI API reference, ``nki.isa.nc_matmul``,
    "Estimated instruction cost": ``max(min(64, N_stationary), N_moving)``, 4x for
    float32). A transpose of ``data[P, F]`` is ``n_stationary = F``, ``n_moving = P``,
    which is the ``nki.isa.nc_transpose`` formula ``max(P, min(64, F))`` on TensorE (same
    reference, ``nc_transpose``), x 2 for 32-bit elements (this model's reading of the
    Trainium2 guide's "2x speedup in FP32 transpose").

    Parameters
    ----------
    n_stationary, n_moving : int
        Elements per partition of the stationary (M) and moving (N) tiles, each >= 1.

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    TypeError
        As :func:`matmul_passes`.
    """
    check_positive("n_stationary", n_stationary)
    check_positive("n_moving", n_moving)
    passes = matmul_passes(stationary_dtype, moving_dtype, is_transpose=is_transpose)
    return passes * max(min(MM_INIT_LATENCY, n_stationary), n_moving)


@dataclass(frozen=True)
class TileOp:
    """One command of a tiled program for :func:`tiled_schedule` (fields the command word
    does not carry yet beside the ones it does).

    Attributes
    ----------
    op : str
        ``"matmul"`` or ``"read"`` (a READ of ``n`` PSUM entries: it uses every column's
        result lane).
    k, n : int
        Stationary partition rows (matmul) and moving columns / entries read, each >= 1.
    tile_position, tile_size : (int, int) or None
        The matmul's tile (:func:`~systolica.golden.tiles.check_tile`); both None for the
        whole array.
    dtype, moving_dtype : str
        Operand types (short names: ``"bf16"``, ``"fp32"``, ``"tf32"``...); ``moving_dtype``
        None means ``dtype``.
    perf_mode : None or "double_row"
    is_transpose : bool
    """

    op: str = "matmul"
    k: int = 1
    n: int = 1
    tile_position: tuple | None = None
    tile_size: tuple | None = None
    dtype: str = "bf16"
    moving_dtype: str | None = None
    perf_mode: str | None = None
    is_transpose: bool = False

    def __post_init__(self):
        if self.op not in ("matmul", "read"):
            raise ValueError(f"op must be 'matmul' or 'read', not {self.op!r}")
        check_positive("k", self.k)
        check_positive("n", self.n)
        check_transpose(self.is_transpose, perf_mode=self.perf_mode)
        operand_formats(format_of(self.dtype).dtype,
                        format_of(self.moving_dtype or self.dtype).dtype,
                        perf_mode=self.perf_mode)

    @property
    def passes(self):
        """Moving beats per moving column (:func:`matmul_passes`; 1 for a READ)."""
        if self.op == "read":
            return 1
        return matmul_passes(self.dtype, self.moving_dtype, is_transpose=self.is_transpose)



def tiled_schedule(rows, cols, ops, *, target=None):
    """Stamps of a tiled program on a ``rows x cols`` tile, no stalls (closed recurrence).

    The rules of :func:`command_schedule` (queue of three, one command taken per cycle,
    loads in order through one stationary port, one beat per cycle, ``L = rows + cols``
    from a beat to its result), generalised to tiles:

    - a command starts issuing at least one cycle after the previous command started (in
      order, at most one start per cycle) and after every earlier command whose tile shares
      a PE row or a PE column with its tile (:meth:`~systolica.golden.Tile.shares_lanes`)
      has issued its last beat; a READ, and a matmul with several passes per column (a
      float32 operand, a 32-bit transpose), share every lane: they start after every
      earlier command's last beat, and every later command after theirs;
    - LoadStationary is per tile: every PE has two weight buffers and a matmul uses one of
      them in every PE of its tile, so a load into a tile waits until one of the two is
      free in every PE of the tile: the cycle after the matmul loaded into it last has
      issued its last beat, and ``r`` cycles more for a tile starting at PE row ``r`` (the
      skew brings that beat to row ``r`` ``r`` cycles after row 0); buffer 0 when both are
      (:func:`command_schedule`'s rule, so a program whose matmuls share lanes gets its
      stamps);
    - a matmul issues ``n x passes`` beats (:func:`matmul_passes`: 4 per column with a
      float32 operand, 2 for a 32-bit transpose), and column c's result is offered ``L``
      cycles after that column's last beat, whatever the tile (every tile's results take
      the whole array's latency, so results on a shared column never collide).

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    ops : sequence of TileOp
    target : str or None
        Tile sizes allowed (:data:`~systolica.golden.TILE_SPLITS`; None: quarters allowed).

    Returns
    -------
    list of CommandTiming
        ``issues`` holds every beat (``n x passes`` of them), ``results`` one per column.

    Raises
    ------
    TypeError
        If an element of ``ops`` is not a :class:`TileOp`.
    ValueError
        If a size is not a positive integer, or a tile or K breaks the tile rules.
    """
    latency = tile_latency(rows, cols)
    check_tile(None, None, rows=rows, cols=cols, target=target)     # checks the target
    splits = TILE_SPLITS.get(target, 4)
    grain = _grain(rows, cols, splits)
    steps = []
    for j, op in enumerate(ops):
        if not isinstance(op, TileOp):
            raise TypeError(f"op {j} must be a systolica.golden.timing.TileOp, not "
                            f"{type(op).__name__}")
        matmul = op.op == "matmul"
        tile = check_tile(op.tile_position if matmul else None,
                          op.tile_size if matmul else None, rows=rows, cols=cols, target=target)
        if not matmul:
            steps.append(_Step(None, True, tile, n=op.n))
            continue
        check_tile_operands(tile, op.k, 1, cols=cols, perf_mode=op.perf_mode)
        beats = min(op.k, tile.rows) if op.perf_mode == DOUBLE_ROW else op.k
        steps.append(_Step(None, False, tile, tuple(_cells(tile, grain)), beats, op.n,
                           op.passes))
    out = []
    for step, (accept, loads, first, last) in zip(steps, _concurrent(steps), strict=True):
        results = tuple(first + step.passes * (c + 1) - 1 + latency for c in range(step.n))
        out.append(CommandTiming(accept, None, loads, tuple(range(first, last + 1)), results))
    return out


def tiled_program_cycles(rows, cols, ops, *, target=None):
    """Cycles a tiled program takes, from cycle 0 to its last result inclusive (int); see
    :func:`tiled_schedule`.

    Raises
    ------
    ValueError
        If ``ops`` is empty, or as :func:`tiled_schedule`.
    """
    schedule = tiled_schedule(rows, cols, ops, target=target)
    if not schedule:
        raise ValueError("ops must hold at least one TileOp")
    return max(t.last_result for t in schedule) + 1
