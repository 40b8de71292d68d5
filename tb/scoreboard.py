"""Scoreboard: compare every result beat with the golden model, account for every beat.

Expectations and observations are arrays: a command's whole result (``[beats, lanes]`` 32-bit
patterns) is one expected block, and a whole program's captured results can be observed in
one call, so checking costs numpy operations per command, not Python per word. The
per-cycle testbench uses the same class one beat at a time.
"""

import struct
from collections import deque
from dataclasses import dataclass

import numpy as np

from systolica.golden.command import DTYPES

#: Data types the scoreboard counts MACs for (names used in reports): the stationary
#: operand's type of each matmul.
DTYPE_NAMES = tuple(DTYPES)
#: ``dtype`` of the PSUM words a transpose writes (raw bits, no value to show).
TRANSPOSED = "transposed"


def format_word(bits, dtype):
    """``0x3f800000 (1.0)`` for FP32 (any float ``dtype``), ``0xffffffff (-1)`` for INT32
    (``dtype`` ``"int8"``), ``0x00003f80 (transposed bits)`` for a transpose's word (``dtype``
    :data:`TRANSPOSED`) (str)."""
    bits = int(bits) & 0xFFFFFFFF
    if dtype == TRANSPOSED:
        return f"0x{bits:08x} (transposed bits)"
    if dtype != "int8":
        value = struct.unpack("<f", struct.pack("<I", bits))[0]
        return f"0x{bits:08x} ({value!r})"
    signed = bits - (1 << 32) if bits >> 31 else bits
    return f"0x{bits:08x} ({signed})"


@dataclass(frozen=True)
class Mismatch:
    """One wrong PSUM word: command index, PSUM row ``m`` and column ``n``, bit patterns.

    ``m == -1`` marks a wrong ``last`` flag. ``context`` names the operands (hex).
    """

    matmul: int
    m: int
    n: int
    expected: int
    actual: int
    dtype: str = "int8"
    context: str = ""

    def __str__(self):
        if self.m < 0:
            return (f"command {self.matmul}: column n={self.n} has last={self.actual}, "
                    f"expected {self.expected}")
        text = (f"command {self.matmul} ({self.dtype}): psum[m={self.m}, n={self.n}] expected "
                f"{format_word(self.expected, self.dtype)}, got "
                f"{format_word(self.actual, self.dtype)}")
        return f"{text}; {self.context}" if self.context else text


@dataclass
class _Block:
    """Expected result beats of one command, consumed front to back."""

    matmul: int
    n0: int                 # moving column of the first beat
    words: np.ndarray       # uint32 [beats, lanes]
    last: np.ndarray        # bool [beats]
    dtypes: np.ndarray      # str [beats], or one str (0-d) for every beat
    macs: int               # per beat
    describe: object        # describe(m, n) -> str, or None
    taken: int = 0

    @property
    def left(self):
        return self.words.shape[0] - self.taken

    def dtypes_at(self, start, stop):
        """Data type names of beats ``start:stop`` (str array)."""
        if self.dtypes.ndim:
            return self.dtypes[start:stop]
        return np.broadcast_to(self.dtypes, (stop - start,))


class Scoreboard:
    """In-order checker of PSUM result beats, bit for bit.

    The TB calls :meth:`expect_block` once per command (or :meth:`expect` once per moving
    beat) with the golden model's PSUM columns as 32-bit patterns, and :meth:`observe_block`
    (or :meth:`observe`) with the result beats received. Every expected beat must be matched
    by exactly one observed beat: :meth:`check_complete` reports beats still missing, and an
    observed beat with nothing expected is itself an error. NaNs are compared by bit pattern
    (the canonical NaN is specified), never by NaN-ness. Lanes beyond an expectation's width
    are not compared.
    """

    def __init__(self, log=None, max_reports=20):
        self._expected = deque()
        self._outstanding = 0
        self._log = log
        self._max_reports = max_reports
        #: Every wrong word seen, in order.
        self.mismatches = []
        #: Observed beats with nothing expected.
        self.unexpected = 0
        #: Beats expected / observed / matched exactly; MACs behind the matched beats.
        self.expected_count = 0
        self.observed_count = 0
        self.matched_count = 0
        self.macs_checked = dict.fromkeys(DTYPE_NAMES, 0)

    def expect_block(self, matmul, words, last=None, *, dtype="int8", macs=0, describe=None,
                     n0=0):
        """Expect a command's result beats.

        Parameters
        ----------
        matmul : int
            Command index (for reports).
        words : array_like of int, shape [beats, lanes]
            32-bit patterns; beat ``i`` is the result for moving column ``n0 + i``.
        last : array_like of bool, shape [beats], optional
            Expected ``last`` flags (default: only on the final beat).
        dtype : str or sequence of str
            ``"int8"`` or ``"bf16"``, for all beats or per beat (reports and MAC counts).
        macs : int
            Multiply-accumulates behind each beat.
        describe : callable, optional
            ``describe(m, n)`` returns the operands of lane ``m``, column ``n`` as text.
        """
        if isinstance(words, np.ndarray) and words.dtype == np.uint32:
            words = words.copy()   # the caller's array (a view of its PSUM) may change
        else:
            words = np.asarray(words, dtype=np.uint64).astype(np.uint32)
        beats = words.shape[0]
        if last is None:
            last = np.zeros(beats, bool)
            if beats:
                last[-1] = True
        dtypes = np.asarray(dtype)
        if dtypes.ndim:
            dtypes = np.broadcast_to(dtypes, (beats,))
        self._expected.append(_Block(matmul, n0, words, np.asarray(last, bool), dtypes,
                                     int(macs), describe))
        self.expected_count += beats
        self._outstanding += beats

    def expect(self, matmul, n, column, last, *, dtype="int8", macs=0, describe=None):
        """Expect one result beat (matmul ``matmul``, moving column ``n``); ``describe(m)``
        names lane ``m``'s operands. See :meth:`expect_block`."""
        wrapped = None if describe is None else (lambda m, _n: describe(m))
        self.expect_block(matmul, [list(column)], [bool(last)], dtype=dtype, macs=macs,
                          describe=wrapped, n0=n)

    @property
    def outstanding(self):
        """Expected beats not yet observed (int)."""
        return self._outstanding

    def observe(self, lanes, last):
        """Check one received result beat (``lanes``: sequence of int, ``last``: bool)."""
        self.observe_block([list(lanes)], [bool(last)])

    def observe_block(self, lanes, last):
        """Check received result beats in order: ``lanes`` ``[beats, cols]`` (ints, 32-bit
        patterns), ``last`` ``[beats]`` (bools)."""
        lanes = np.asarray(lanes, dtype=np.uint64).astype(np.uint32)
        if lanes.ndim == 1:
            lanes = lanes[None, :]
        last = np.asarray(last, dtype=bool)
        total = lanes.shape[0]
        self.observed_count += total
        position = self._observe_whole_blocks(lanes, last)
        while position < total:
            if not self._expected:
                extra = total - position
                self.unexpected += extra
                self._report(f"unexpected result beat #{self.observed_count - extra + 1} with "
                             f"nothing outstanding: {[hex(int(v)) for v in lanes[position]]}")
                return
            block = self._expected[0]
            count = min(block.left, total - position)
            self._compare(block, lanes[position:position + count],
                          last[position:position + count])
            block.taken += count
            self._outstanding -= count
            position += count
            if not block.left:
                self._expected.popleft()

    def _observe_whole_blocks(self, lanes, last):
        """Fast path of :meth:`observe_block`: the untouched expected blocks of one width
        that the observed beats cover completely are compared in one array operation; when
        every word and ``last`` flag matches they are retired together and the number of
        beats consumed is returned. Otherwise nothing is consumed (0) and the per-block path
        finds and reports what differs."""
        blocks, beats = [], 0
        for block in self._expected:
            if (block.taken or beats + block.words.shape[0] > lanes.shape[0]
                    or block.words.shape[1] > lanes.shape[1]
                    or (blocks and block.words.shape[1] != blocks[0].words.shape[1])):
                break
            blocks.append(block)
            beats += block.words.shape[0]
        if len(blocks) < 2:
            return 0
        width = blocks[0].words.shape[1]
        want = np.concatenate([block.words for block in blocks])
        want_last = np.concatenate([block.last for block in blocks])
        if not (np.array_equal(lanes[:beats, :width], want)
                and np.array_equal(last[:beats], want_last)):
            return 0
        for block in blocks:
            self._expected.popleft()
            self._count_macs(block, 0, np.ones(block.words.shape[0], bool))
        self.matched_count += beats
        self._outstanding -= beats
        return beats

    def _compare(self, block, got, got_last):
        start = block.taken
        want = block.words[start:start + len(got)]
        width = want.shape[1]
        if got.shape[1] < width:
            got = np.pad(got, ((0, 0), (0, width - got.shape[1])))
        wrong = got[:, :width] != want
        wrong_last = got_last != block.last[start:start + len(got)]
        bad_beat = wrong.any(axis=1) | wrong_last
        dtypes = block.dtypes_at(start, start + len(got))
        for beat, m in zip(*np.nonzero(wrong), strict=True):
            n = block.n0 + start + int(beat)
            context = block.describe(int(m), n) if block.describe is not None else ""
            self.mismatches.append(Mismatch(block.matmul, int(m), n, int(want[beat, m]),
                                            int(got[beat, m]), str(dtypes[beat]), context))
            self._report(str(self.mismatches[-1]))
        for beat in np.flatnonzero(wrong_last):
            n = block.n0 + start + int(beat)
            self.mismatches.append(Mismatch(block.matmul, -1, n,
                                            int(block.last[start + beat]), int(got_last[beat])))
            self._report(str(self.mismatches[-1]))
        good = ~bad_beat
        self.matched_count += int(good.sum())
        self._count_macs(block, start, good)

    def _count_macs(self, block, start, good):
        """Add the MACs behind the matched beats ``good`` (bool, from beat ``start``) of
        ``block`` to :attr:`macs_checked`, per data type."""
        if not block.macs:
            return
        if not block.dtypes.ndim:   # one type for the whole block
            self.macs_checked[str(block.dtypes)] += block.macs * int(good.sum())
            return
        dtypes = block.dtypes_at(start, start + len(good))
        for name in DTYPE_NAMES:
            self.macs_checked[name] += block.macs * int((good & (dtypes == name)).sum())

    def _report(self, text):
        if self._log is not None and len(self.mismatches) + self.unexpected <= self._max_reports:
            self._log.error("scoreboard: %s", text)

    def summary(self):
        """One line: beats expected, observed, matched; wrong words; missing; MACs checked."""
        return (f"{self.expected_count} result beats expected, {self.observed_count} observed, "
                f"{self.matched_count} matched; {len(self.mismatches)} wrong words, "
                f"{self.outstanding} missing, {self.unexpected} unexpected; MACs checked: "
                f"{self.macs_checked['int8']:,} INT8, {self.macs_checked['bf16']:,} BF16"
                + "".join(f", {count:,} {name.upper()}" for name, count in
                          self.macs_checked.items() if count and name not in ("int8", "bf16")))

    def check_complete(self):
        """Raise ``AssertionError`` unless every expected beat arrived and matched."""
        if self.mismatches or self.outstanding or self.unexpected:
            first = f"; first: {self.mismatches[0]}" if self.mismatches else ""
            raise AssertionError(f"scoreboard failed: {self.summary()}{first}")
