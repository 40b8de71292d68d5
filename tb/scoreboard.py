"""Scoreboard: compare every result beat with the golden model, account for every beat."""

import struct
from collections import deque
from dataclasses import dataclass


def format_word(bits, dtype):
    """``0x3f800000 (1.0)`` for FP32, ``0xffffffff (-1)`` for INT32 (str)."""
    bits &= 0xFFFFFFFF
    if dtype == "bf16":
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


class Scoreboard:
    """In-order checker of PSUM result beats, bit for bit.

    The TB calls :meth:`expect` once per moving beat sent (with the golden model's PSUM
    column as 32-bit patterns) and :meth:`observe` once per result beat received. Every
    expected beat must be matched by exactly one observed beat: :meth:`check_complete`
    reports beats still missing, and an observed beat with nothing expected is itself an
    error. NaNs are compared by bit pattern (the canonical NaN is specified), never by
    NaN-ness.
    """

    def __init__(self, log=None, max_reports=20):
        self._expected = deque()
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
        self.macs_checked = {"int8": 0, "bf16": 0}

    def expect(self, matmul, n, column, last, *, dtype="int8", macs=0, describe=None):
        """Expect the result beat for matmul ``matmul``, moving column ``n``.

        ``column``: the golden PSUM column (ints, 32-bit patterns; every lane is compared).
        ``last``: the expected ``last`` flag. ``dtype``: ``"int8"`` or ``"bf16"`` (for
        reports). ``macs``: multiply-accumulates behind this beat (for the count of checked
        MACs). ``describe(m)``: returns the operands of lane ``m`` as text, for reports.
        """
        self._expected.append((matmul, n, [int(v) & 0xFFFFFFFF for v in column], bool(last),
                               dtype, macs, describe))
        self.expected_count += 1

    @property
    def outstanding(self):
        """Expected beats not yet observed (int)."""
        return len(self._expected)

    def observe(self, lanes, last):
        """Check one received result beat (``lanes``: sequence of int, ``last``: bool)."""
        self.observed_count += 1
        if not self._expected:
            self.unexpected += 1
            self._report(f"unexpected result beat #{self.observed_count} with nothing "
                         f"outstanding: {[hex(int(v)) for v in lanes]}")
            return
        matmul, n, column, want_last, dtype, macs, describe = self._expected.popleft()
        ok = True
        for m, want in enumerate(column):
            got = int(lanes[m]) & 0xFFFFFFFF
            if got != want:
                ok = False
                context = describe(m) if describe is not None else ""
                self.mismatches.append(Mismatch(matmul, m, n, want, got, dtype, context))
                self._report(str(self.mismatches[-1]))
        if bool(last) != want_last:
            ok = False
            self.mismatches.append(Mismatch(matmul, -1, n, int(want_last), int(bool(last))))
            self._report(str(self.mismatches[-1]))
        if ok:
            self.matched_count += 1
            self.macs_checked[dtype] += macs

    def _report(self, text):
        if self._log is not None and len(self.mismatches) + self.unexpected <= self._max_reports:
            self._log.error("scoreboard: %s", text)

    def summary(self):
        """One line: beats expected, observed, matched; wrong words; missing; MACs checked."""
        return (f"{self.expected_count} result beats expected, {self.observed_count} observed, "
                f"{self.matched_count} matched; {len(self.mismatches)} wrong words, "
                f"{self.outstanding} missing, {self.unexpected} unexpected; MACs checked: "
                f"{self.macs_checked['int8']:,} INT8, {self.macs_checked['bf16']:,} BF16")

    def check_complete(self):
        """Raise ``AssertionError`` unless every expected beat arrived and matched."""
        if self.mismatches or self.outstanding or self.unexpected:
            first = f"; first: {self.mismatches[0]}" if self.mismatches else ""
            raise AssertionError(f"scoreboard failed: {self.summary()}{first}")
