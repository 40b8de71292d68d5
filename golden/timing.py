"""Cycle model of the tile: when each command is accepted, loads, issues and drains.

The model follows the RTL's rules (``systolica.hdl.tile``), with L = ``rows + cols``:

- commands are taken one per cycle into a queue of three (:data:`COMMAND_QUEUE_DEPTH`); a
  rejected command (see :func:`~systolica.golden.command.command_error`) takes one cycle and
  nothing else; a queued command leaves the queue when it issues its first beat;
- stationary loads run in command order, ``K`` beats one per cycle (``min(K, rows)`` in FP8
  double-row mode, each beat carrying partition rows r and r + rows), from the cycle after
  their command was taken, once the previous load is done and once their buffer is free:
  buffers alternate, and a buffer frees the cycle after the matmul two loads back has sent
  its last moving beat (the load is skewed like the moving data, so it trails that beat
  through the array);
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
"""

from dataclasses import dataclass

from .command import PSUM_BANKS, PSUM_ENTRIES, Command, check_positive, command_error
from .formats import max_k

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


def _checked(commands, rows, cols, banks, entries):
    commands = list(commands)
    for j, command in enumerate(commands):
        if not isinstance(command, Command):
            raise TypeError(f"command {j} must be a systolica.golden.Command, "
                            f"not {type(command).__name__}")
    return commands, [command_error(c, rows=rows, cols=cols, banks=banks, entries=entries)
                      for c in commands]


def _recurrence(commands, errors, latency, rows):
    out = []
    accept = -1
    started = []           # first_issue of each accepted legal command, in order
    prev_load_end = -1     # last load's end
    matmul_issues = []     # last_issue of each legal matmul, in order
    prev_issue = -1        # last_issue of the previous legal command
    for command, error in zip(commands, errors, strict=True):
        accept += 1
        if len(started) >= COMMAND_QUEUE_DEPTH:
            accept = max(accept, started[-COMMAND_QUEUE_DEPTH] + 1)
        if error is not None:
            out.append(CommandTiming(accept, error))
            continue
        loads = ()
        first = max(accept + 1, prev_issue + 1)
        if command.op == "matmul":
            load_start = max(accept + 1, prev_load_end + 1)
            if len(matmul_issues) >= 2:
                load_start = max(load_start, matmul_issues[-2] + 1)
            prev_load_end = load_start + command.load_beats(rows) - 1
            loads = tuple(range(load_start, prev_load_end + 1))
            first = max(first, prev_load_end + 1)
        last = prev_issue = first + command.n - 1
        results = tuple(range(first + latency, last + latency + 1))
        if command.op == "matmul":
            matmul_issues.append(last)
        started.append(first)
        out.append(CommandTiming(accept, None, loads, tuple(range(first, last + 1)), results))
    return out


def _stepped(commands, errors, latency, rows, result_ready, max_cycles, offer=None):
    stamps = [dict(accept=None, error=e, loads=[], issues=[], results=[]) for e in errors]
    legal = [c for c, e in zip(commands, errors, strict=True) if e is None and c.op == "matmul"]
    drivers = {"command": _Driver(len(commands)),
               "stationary": _Driver(sum(c.load_beats(rows) for c in legal)),
               "moving": _Driver(sum(c.n for c in legal))}
    for name, driver in drivers.items():
        driver.step(False, offer is None or offer(name, 0))
    queue = []                  # [command index, loaded]
    offered = 0                 # next command the driver offers
    load_buf = use_buf = 0
    load_row = 0
    full = [False, False]       # buffer loaded for a matmul that has not started
    busy = [False, False]       # buffer used by a matmul still sending moving beats
    running = None              # [command index, beats left after the current one, sel]
    tokens = [None] * latency   # command index of each beat in flight; [-1] is offered
    remaining = sum(c.n for c, e in zip(commands, errors, strict=True) if e is None)
    cycle = 0
    while remaining:
        if cycle >= max_cycles:
            raise RuntimeError(f"timing model made no progress in {max_cycles} cycles")
        out = tokens[-1]
        ready = result_ready is None or bool(result_ready(cycle))
        advance = out is None or ready
        # Combinational decisions from the current state.
        take_command = drivers["command"].valid and len(queue) < COMMAND_QUEUE_DEPTH
        target = next((i for i, (j, done) in enumerate(queue) if not done), None)
        load = (advance and target is not None and not busy[load_buf]
                and not full[load_buf] and drivers["stationary"].valid)
        load_done = load and load_row == commands[queue[target][0]].load_beats(rows) - 1
        head = queue[0] if queue else None
        issue = None
        if advance:
            if running is not None:
                issue = running
            elif head is not None and head[1]:
                j = head[0]
                issue = [j, commands[j].n - 1, use_buf]
            if (issue is not None and commands[issue[0]].op == "matmul"
                    and not drivers["moving"].valid):
                issue = None        # the moving stream idles: a bubble
        # Sequential update.
        if out is not None and ready:
            stamps[out]["results"].append(cycle)
            remaining -= 1
        if advance:
            token = None
            if issue is not None:
                j, left, sel = issue
                read = commands[j].op == "read"
                token = j
                if not stamps[j]["issues"]:
                    queue.pop(0)
                    if target is not None:
                        target -= 1
                    if not read:
                        full[use_buf] = False
                        busy[use_buf] = True
                        use_buf ^= 1
                if left == 0 and not read:
                    busy[sel] = False
                stamps[j]["issues"].append(cycle)
                running = None if left == 0 else [j, left - 1, sel]
            tokens = [token] + tokens[:-1]
        if load:
            j = queue[target][0]
            stamps[j]["loads"].append(cycle)
            load_row += 1
            if load_done:
                queue[target][1] = True
                full[load_buf] = True
                load_row = 0
                load_buf ^= 1
        if take_command:
            stamps[offered]["accept"] = cycle
            if errors[offered] is None:
                queue.append([offered, commands[offered].op == "read"])
            offered += 1
        moved = issue is not None and commands[issue[0]].op == "matmul"
        for name, taken in (("command", take_command), ("stationary", load), ("moving", moved)):
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
                     result_ready=None, offer=None, max_cycles=10_000_000):
    """Predict every command's cycle stamps (see the module docstring for the rules).

    Parameters
    ----------
    rows, cols : int
        Tile size in PEs.
    commands : sequence of Command
        The program, in order.
    banks, entries : int
        PSUM geometry (decides which commands are rejected).
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
    commands, errors = _checked(commands, rows, cols, banks, entries)
    if result_ready is None and offer is None:
        return _recurrence(commands, errors, latency, rows)
    return _stepped(commands, errors, latency, rows, result_ready, max_cycles, offer)


def program_schedule(rows, cols, shapes, *, perf_mode=None):
    """Predict the stamps of back-to-back matmuls of the given ``(K, N)`` shapes, no stalls.

    Each matmul overwrites PSUM bank 0 from entry 0 with ``M = cols``; bank and M do not
    affect timing. ``perf_mode="double_row"`` makes them FP8 double-row matmuls (K up to
    ``2 * rows``, ``min(K, rows)`` load beats). Returns a list of :class:`CommandTiming`.

    Raises
    ------
    ValueError
        If a size is not a positive integer or K exceeds ``rows`` (``2 * rows`` in
        double-row mode).
    """
    dtype = "e4m3" if perf_mode is not None else "int8"
    latency = tile_latency(rows, cols)
    commands = []
    for j, (k, n) in enumerate(shapes):
        check_positive(f"K of matmul {j}", k)
        check_positive(f"N of matmul {j}", n)
        if k > max_k(rows, perf_mode):
            mode = f", 2 x rows = {2 * rows} in double_row" if perf_mode else ""
            raise ValueError(f"K of matmul {j} is {k}, more than rows = {rows}{mode}")
        commands.append(Command("matmul", k=k, m=cols, n=n, dtype=dtype, perf_mode=perf_mode))
    return _recurrence(commands, [None] * len(commands), latency, rows)


def program_cycles(rows, cols, shapes, *, perf_mode=None):
    """Cycles a back-to-back program takes, from cycle 0 to its last result inclusive (int).

    See :func:`program_schedule` for the arguments and errors.
    """
    schedule = program_schedule(rows, cols, shapes, perf_mode=perf_mode)
    if not schedule:
        raise ValueError("shapes must hold at least one (K, N) pair")
    return schedule[-1].last_result + 1
