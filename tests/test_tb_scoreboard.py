"""Unit tier: the scoreboard flags wrong, missing and unexpected result beats."""

import pytest

from systolica.tb.scoreboard import Scoreboard


def test_matching_beats_pass():
    sb = Scoreboard()
    sb.expect(0, 0, [1, 2], last=False)
    sb.expect(0, 1, [3, 4], last=True)
    sb.observe([1, 2, 99], last=False)   # lanes beyond M are not compared
    sb.observe([3, 4], last=True)
    sb.check_complete()
    assert sb.matched_count == 2


def test_wrong_word_is_reported_with_its_position():
    sb = Scoreboard()
    sb.expect(3, 5, [10, 20], last=True)
    sb.observe([10, 21], last=True)
    assert [(x.matmul, x.m, x.n, x.expected, x.actual) for x in sb.mismatches] == [
        (3, 1, 5, 20, 21)]
    with pytest.raises(AssertionError, match=r"command 3 \(int8\): psum\[m=1, n=5\]"):
        sb.check_complete()


def test_missing_beat_fails():
    sb = Scoreboard()
    sb.expect(0, 0, [1], last=True)
    with pytest.raises(AssertionError, match="1 missing"):
        sb.check_complete()


def test_unexpected_beat_fails():
    sb = Scoreboard()
    sb.observe([1], last=True)
    with pytest.raises(AssertionError, match="1 unexpected"):
        sb.check_complete()


def test_wrong_last_flag_fails():
    sb = Scoreboard()
    sb.expect(0, 0, [1], last=True)
    sb.observe([1], last=False)
    with pytest.raises(AssertionError):
        sb.check_complete()
