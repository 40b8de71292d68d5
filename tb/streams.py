"""Cycle-level valid/ready stream driver and monitor.

Both are stepped by the TB's clock loop, once per clock cycle, in two phases:

1. ``drive(cycle)`` right after the falling clock edge: the component writes its inputs to
   the DUT for this cycle;
2. ``sample(cycle)`` in the read-only phase of the same time step, once every input is
   written and the DUT's combinational logic has settled: the component sees whether a
   beat transfers on the next rising edge (``valid`` and ``ready`` both high).

Payloads are packed and unpacked with the Amaranth layouts the RTL is built from.
"""

from collections import deque


class StreamDriver:
    """Drive beats into a DUT input stream ``<name>__payload/valid/ready``.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    name : str
        Stream name (port prefix), e.g. ``"moving"``.
    layout : amaranth.lib.data.Layout
        Payload layout; beats are dicts accepted by ``layout.const``, or raw ints.
    rng : random.Random
        Source of the idle pattern.
    idle : float
        Probability, each cycle with no beat on the bus, of leaving ``valid`` low even when a
        beat is waiting (0 <= idle < 1). Once ``valid`` is high it stays high until the beat
        is taken.
    """

    def __init__(self, dut, name, layout, rng, idle=0.0):
        if not 0.0 <= idle < 1.0:
            raise ValueError(f"idle must be a probability in [0, 1), not {idle!r}")
        self.name = name
        self._payload = getattr(dut, f"{name}__payload")
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._layout = layout
        self._rng = rng
        self._idle = idle
        self._queue = deque()
        self._presenting = False
        self._taken = False
        #: Beats sent so far (transfers completed).
        self.sent = 0
        #: Cycle of every completed transfer, in order.
        self.transfer_cycles = []

    def send(self, beat):
        """Queue one beat: a dict for ``layout.const``, or the raw payload bits (int)."""
        self._queue.append(beat if isinstance(beat, int) else
                           self._layout.const(beat).as_bits())

    @property
    def pending(self):
        """Beats queued or on the bus and not yet taken (int)."""
        return len(self._queue)

    def drive(self, cycle):
        if self._taken:
            self._queue.popleft()
            self._presenting = False
        if not self._presenting and self._queue:
            self._presenting = self._idle == 0.0 or self._rng.random() >= self._idle
            if self._presenting:
                self._payload.value = self._queue[0]
        self._valid.value = int(self._presenting)

    def sample(self, cycle):
        self._taken = self._presenting and bool(self._ready.value)
        if self._taken:
            self.sent += 1
            self.transfer_cycles.append(cycle)


class StreamMonitor:
    """Receive beats from a DUT output stream, with a random ``ready`` (backpressure) pattern.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    name : str
        Stream name (port prefix), e.g. ``"result"``.
    layout : amaranth.lib.data.Layout
        Payload layout (of the beats the callback receives as raw ints).
    rng : random.Random
        Source of the backpressure pattern.
    backpressure : float
        Probability of holding ``ready`` low in a cycle (0 <= backpressure < 1).
    callback : callable
        Called as ``callback(raw, cycle)`` for every received beat (``raw``: the payload
        bits, int).
    """

    def __init__(self, dut, name, layout, rng, backpressure=0.0, callback=None):
        if not 0.0 <= backpressure < 1.0:
            raise ValueError(
                f"backpressure must be a probability in [0, 1), not {backpressure!r}")
        self.name = name
        self._payload = getattr(dut, f"{name}__payload")
        self._valid = getattr(dut, f"{name}__valid")
        self._ready = getattr(dut, f"{name}__ready")
        self._layout = layout
        self._rng = rng
        self._backpressure = backpressure
        self._callback = callback
        self._ready_now = False
        #: Beats received so far.
        self.received = 0
        #: ``ready`` as driven in every cycle so far (list of bool, index = cycle).
        self.ready_cycles = []

    def drive(self, cycle):
        self._ready_now = self._backpressure == 0.0 or self._rng.random() >= self._backpressure
        self._ready.value = int(self._ready_now)
        self.ready_cycles.append(self._ready_now)

    def sample(self, cycle):
        if self._ready_now and self._valid.value == 1:
            raw = self._payload.value.to_unsigned()
            self.received += 1
            if self._callback is not None:
                self._callback(raw, cycle)
