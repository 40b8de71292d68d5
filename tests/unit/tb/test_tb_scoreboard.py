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


def test_blocks_observed_in_one_call_are_checked_word_by_word_across_commands():
    sb = Scoreboard()
    sb.expect_block(0, [[1, 2], [3, 4]], dtype="int8", macs=4)
    sb.expect_block(1, [[5], [6], [7]], dtype="bf16", macs=2, n0=10,
                    describe=lambda m, n: f"lane {m} column {n}")
    observed = [[1, 2, 0], [3, 4, 0], [5, 9, 9], [66, 0, 0], [7, 0, 0]]
    sb.observe_block(observed, [False, True, False, False, True])
    assert sb.observed_count == 5 and sb.outstanding == 0 and sb.matched_count == 4
    assert [(x.matmul, x.m, x.n, x.expected, x.actual, x.context) for x in sb.mismatches] == [
        (1, 0, 11, 6, 66, "lane 0 column 11")]
    assert {name: n for name, n in sb.macs_checked.items() if n} == {"int8": 8, "bf16": 4}


def test_beats_past_the_expected_ones_are_unexpected_and_last_flags_are_checked():
    sb = Scoreboard()
    sb.expect_block(0, [[1], [2]])
    sb.observe_block([[1], [2], [3]], [True, True, True])   # last on beat 0 is wrong
    assert sb.unexpected == 1
    assert [(x.m, x.n, x.expected, x.actual) for x in sb.mismatches] == [(-1, 0, 0, 1)]
    with pytest.raises(AssertionError, match="1 unexpected"):
        sb.check_complete()


@pytest.mark.parametrize("wrong", [None, (3, 1), (5, 0)])
def test_many_blocks_of_one_width_in_one_call_keep_every_count(wrong):
    sb = Scoreboard()
    sb.expect_block(0, [[1, 2], [3, 4]], dtype="int8", macs=4)
    sb.expect_block(1, [[5, 6], [7, 8]], dtype="bf16", macs=2, n0=2)
    sb.expect_block(2, [[9, 10], [11, 12]], dtype="bf16", macs=3)
    observed = [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]]
    if wrong is not None:
        beat, lane = wrong
        observed[beat][lane] += 100
    sb.observe_block(observed, [False, True] * 3)
    assert sb.observed_count == 6 and sb.outstanding == 0
    if wrong is None:
        sb.check_complete()
        assert sb.matched_count == 6
        assert {name: n for name, n in sb.macs_checked.items() if n} == {"int8": 8, "bf16": 4 + 6}
    else:
        beat, lane = wrong
        command, n = {3: (1, 3), 5: (2, 1)}[beat]
        assert [(x.matmul, x.m, x.n) for x in sb.mismatches] == [(command, lane, n)]
        assert sb.matched_count == 5
        with pytest.raises(AssertionError, match="1 wrong words"):
            sb.check_complete()
