"""Triangular delay lines: skew a vector into the array, de-skew results out of it."""

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


class SkewBuffer(wiring.Component):
    """Delay lane ``i`` of a vector by ``delays[i]`` enabled clock cycles.

    With ``delays = [0, 1, ..., n-1]`` this skews an unskewed vector into a systolic
    wavefront (lane ``i`` of beat ``t`` leaves at advance ``t + i``); with
    ``delays = [n-1, ..., 1, 0]`` it de-skews a wavefront back into one vector. A lane with
    delay 0 is a wire. All registers advance together when ``en`` is high. ``o_next`` is
    each lane's value after the next advance (what its last register loads; ``i_next``, the
    input's own next value, for a lane without delay), for a consumer that keeps a
    registered copy of ``o`` (:class:`~.array.SystolicArray`'s sub-arrays).

    Parameters
    ----------
    shape : shape-castable
        Shape of one lane (for example ``signed(8)``).
    delays : sequence of int
        Delay of each lane in cycles; each must be a non-negative integer.

    Members
    -------
    en : In(1)
        Advance.
    i : In(ArrayLayout(shape, len(delays)))
        Input vector.
    i_next : In(ArrayLayout(shape, len(delays)))
        The value ``i`` holds after the next advance (read only for lanes of delay 0).
    o : Out(ArrayLayout(shape, len(delays)))
        Output vector, lane ``i`` delayed by ``delays[i]``.
    o_next : Out(ArrayLayout(shape, len(delays)))
        The value ``o`` holds after the next advance.

    Raises
    ------
    ValueError
        If ``delays`` is empty or holds anything but non-negative integers.
    """

    def __init__(self, shape, delays):
        delays = list(delays)
        if not delays:
            raise ValueError("delays must name at least one lane, not an empty sequence")
        for d in delays:
            if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                raise ValueError(f"every delay must be a non-negative integer, not {d!r}")
        self._shape = shape
        self._delays = tuple(delays)
        layout = data.ArrayLayout(shape, len(delays))
        super().__init__({"en": In(1), "i": In(layout), "i_next": In(layout),
                          "o": Out(layout), "o_next": Out(layout)})

    @property
    def delays(self):
        """Per-lane delay in cycles (tuple of int, read-only)."""
        return self._delays

    def elaborate(self, platform):
        # Stage d is one register holding every lane delayed by at least d (in lane order),
        # loaded from stage d - 1: a triangle of max(delays) wide registers rather than one
        # register per lane and cycle, so that Verilog generation and simulation of a
        # 128-lane skew handle 128 signals, not 8,128. Lanes that sit side by side in the
        # previous stage move as one slice.
        m = Module()
        width = data.ArrayLayout(self._shape, 1).size
        source = Value.cast(self.i)
        where = {lane: lane * width for lane in range(len(self._delays))}   # offset in source
        for lane, delay in enumerate(self._delays):
            if delay == 0:
                m.d.comb += [Value.cast(self.o[lane]).eq(source[where[lane]:where[lane] + width]),
                             self.o_next[lane].eq(self.i_next[lane])]
        for d in range(1, max(self._delays) + 1):
            lanes = [lane for lane, delay in enumerate(self._delays) if delay >= d]
            runs = []                           # [start offset, length] in source
            for lane in lanes:
                if runs and runs[-1][0] + runs[-1][1] == where[lane]:
                    runs[-1][1] += width
                else:
                    runs.append([where[lane], width])
            stage = Signal(width * len(lanes), name=f"stage{d}")
            with m.If(self.en):
                m.d.sync += stage.eq(Cat(source[start:start + length] for start, length in runs))
            for lane in lanes:      # what the lane's last stage loads on the advance
                if self._delays[lane] == d:
                    m.d.comb += Value.cast(self.o_next[lane]).eq(
                        source[where[lane]:where[lane] + width])
            source, where = stage, {lane: i * width for i, lane in enumerate(lanes)}
            for lane in lanes:
                if self._delays[lane] == d:
                    m.d.comb += Value.cast(self.o[lane]).eq(
                        source[where[lane]:where[lane] + width])
        return m
