"""Triangular delay lines: skew a vector into the array, de-skew results out of it."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


class SkewBuffer(wiring.Component):
    """Delay lane ``i`` of a vector by ``delays[i]`` enabled clock cycles.

    With ``delays = [0, 1, ..., n-1]`` this skews an unskewed vector into a systolic
    wavefront (lane ``i`` of beat ``t`` leaves at advance ``t + i``); with
    ``delays = [n-1, ..., 1, 0]`` it de-skews a wavefront back into one vector. A lane with
    delay 0 is a wire. All registers advance together when ``en`` is high.

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
    o : Out(ArrayLayout(shape, len(delays)))
        Output vector, lane ``i`` delayed by ``delays[i]``.

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
        super().__init__({"en": In(1), "i": In(layout), "o": Out(layout)})

    @property
    def delays(self):
        """Per-lane delay in cycles (tuple of int, read-only)."""
        return self._delays

    def elaborate(self, platform):
        m = Module()
        for lane, delay in enumerate(self._delays):
            stage = self.i[lane]
            for k in range(delay):
                reg = Signal(self._shape, name=f"lane{lane}_stage{k}")
                with m.If(self.en):
                    m.d.sync += reg.eq(stage)
                stage = reg
            m.d.comb += self.o[lane].eq(stage)
        return m
