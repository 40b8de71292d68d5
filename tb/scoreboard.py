"""Scoreboard: compare every result beat with the golden model, account for every beat."""

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Mismatch:
    """One wrong PSUM word: matmul index, PSUM row ``m`` and column ``n``, values."""

    matmul: int
    m: int
    n: int
    expected: int
    actual: int

    def __str__(self):
        return (f"matmul {self.matmul}: psum[m={self.m}, n={self.n}] expected "
                f"{self.expected} (0x{self.expected & 0xFFFFFFFF:08x}), got {self.actual} "
                f"(0x{self.actual & 0xFFFFFFFF:08x})")


class Scoreboard:
    """In-order checker of PSUM result beats.

    The TB calls :meth:`expect` once per moving beat sent (with the golden model's column
    ``psum[:, n]``) and :meth:`observe` once per result beat received. Every expected beat
    must be matched by exactly one observed beat: :meth:`check_complete` reports beats still
    missing, and an observed beat with nothing expected is itself an error.
    """

    def __init__(self, log=None, max_reports=20):
        self._expected = deque()
        self._log = log
        self._max_reports = max_reports
        #: Every wrong word seen, in order.
        self.mismatches = []
        #: Observed beats with nothing expected.
        self.unexpected = 0
        #: Beats expected / observed / matched exactly.
        self.expected_count = 0
        self.observed_count = 0
        self.matched_count = 0

    def expect(self, matmul, n, column, last):
        """Expect the result beat for matmul ``matmul``, moving column ``n``.

        ``column`` is the golden ``psum[:, n]`` (length M, ints); lanes beyond M are not
        compared. ``last`` is the expected ``last`` flag.
        """
        self._expected.append((matmul, n, [int(v) for v in column], bool(last)))
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
                         f"outstanding: {list(lanes)}")
            return
        matmul, n, column, want_last = self._expected.popleft()
        ok = True
        for m, want in enumerate(column):
            got = int(lanes[m])
            if got != want:
                ok = False
                self.mismatches.append(Mismatch(matmul, m, n, want, got))
                self._report(str(self.mismatches[-1]))
        if bool(last) != want_last:
            ok = False
            self.mismatches.append(Mismatch(matmul, -1, n, int(want_last), int(bool(last))))
            self._report(f"matmul {matmul}: column n={n} has last={int(bool(last))}, "
                         f"expected {int(want_last)}")
        if ok:
            self.matched_count += 1

    def _report(self, text):
        if self._log is not None and len(self.mismatches) + self.unexpected <= self._max_reports:
            self._log.error("scoreboard: %s", text)

    def summary(self):
        """One line: beats expected, observed, matched; mismatching words; missing beats."""
        return (f"{self.expected_count} result beats expected, {self.observed_count} observed, "
                f"{self.matched_count} matched; {len(self.mismatches)} wrong words, "
                f"{self.outstanding} missing, {self.unexpected} unexpected")

    def check_complete(self):
        """Raise ``AssertionError`` unless every expected beat arrived and matched."""
        if self.mismatches or self.outstanding or self.unexpected:
            first = f"; first: {self.mismatches[0]}" if self.mismatches else ""
            raise AssertionError(f"scoreboard failed: {self.summary()}{first}")
