"""Unit tier: the testbench's tile model (shadow PSUM with banks, READs, rejections)."""

import numpy as np
import pytest

from systolica.golden import TFLOAT32, Command
from systolica.hdl.config import TileConfig
from systolica.hdl.layouts import DType, Op
from systolica.tb.model import TileModel
from systolica.tb.scoreboard import Scoreboard


def model(**kwargs):
    return TileModel(2, 2, Scoreboard(), **kwargs)


def test_read_expects_the_shadow_region_of_its_bank():
    tm = model()
    ones = np.ones((2, 2), np.int8)
    *_, moving_bits = tm.submit(ones, ones * 3, bank=4, offset=10)
    record, beat = tm.read(bank=4, offset=9, n=3)
    assert beat["op"] == Op.READ and (beat["bank"], beat["offset"], beat["n"]) == (4, 9, 3)
    np.testing.assert_array_equal(record.expected, [[0, 6, 6], [0, 6, 6]])
    tm.plan({0: moving_bits})
    assert tm.result_owner == [(0,), (0,), (1,), (1,), (1,)]


def test_matmul_beat_carries_the_command_fields():
    tm = model()
    s = np.ones((1, 2), np.int8)
    record, beat, s_beats, m_beats = tm.submit(s, np.ones((1, 3), np.int8), bank=1, offset=5,
                                               accumulate=False)
    assert beat == {"op": Op.MATMUL, "dtype": DType.INT8.value, "moving_dtype": 0,
                    "dtype_hi": 0, "moving_dtype_hi": 0, "double_row": 0, "ftz": 0,
                    "accumulate": 0, "transpose": 0,
                    "bank": 1, "offset": 5, "k": 1, "m": 2, "n": 3, "tiled": 0, "tile_row": 0,
                    "tile_col": 0, "tile_rows": 0, "tile_cols": 0, "mx": 0, "fp4": 0,
                    "bf16_out": 0, "stochastic": 0, "seed": 0}
    assert len(s_beats) == 1 and len(m_beats) == 3 and record.error is None


def test_fp32_splits_its_type_code_over_the_low_field_and_the_hi_bit():
    tm = TileModel(4, 4, Scoreboard(), dtypes=("tf32", "fp32"))
    words = np.ones((2, 2), np.float32)
    _, beat, s_bits, m_bits = tm.submit(words, words.view(TFLOAT32))
    assert (beat["dtype"], beat["dtype_hi"]) == (DType.FP32.value & 7, 1)
    assert (beat["moving_dtype"], beat["moving_dtype_hi"]) == (DType.TF32.value, 0)
    assert s_bits.dtype == m_bits.dtype == np.uint32 and m_bits[0, 0] == 0x3F800000


def test_illegal_command_is_predicted_rejected_without_results():
    tm = model()
    record, _ = tm.submit_command(Command("read", n=1, bank=8))
    tm.plan({})
    assert record.error == "BANK_RANGE" and tm.result_owner == [] and tm.rejected == [record]
    assert model().expected_status() == (0, 0)                 # NONE after reset
    tm.submit_command(Command("matmul", k=3, m=1, n=1))
    assert tm.expected_status() == (2, 2)                      # two rejected, last K_RANGE
    with pytest.raises(ValueError, match="use submit"):
        tm.submit_command(Command("matmul", k=1, m=1, n=1))
    with pytest.raises(ValueError, match="N_RANGE"):
        tm.submit(np.ones((1, 1), np.int8), np.ones((1, 3), np.int8), offset=510)


def test_unknown_psum_is_refused_when_earlier_tests_may_have_written_it():
    tm = model(psum_zeroed=False)
    ones = np.ones((2, 2), np.int8)
    with pytest.raises(ValueError, match=r"cannot read PSUM bank 0 entries \[0, 1\]"):
        tm.read(n=2)
    tm.submit(ones, ones)                     # overwrites entries 0 and 1
    with pytest.raises(ValueError, match=r"cannot accumulate into PSUM bank 0 entries \[2\]"):
        tm.submit(ones, np.ones((2, 3), np.int8), accumulate=True)
    tm.read(n=2)                              # entries 0 and 1 are known now


@pytest.mark.parametrize("seed", range(6))
def test_submit_many_leaves_what_one_submit_at_a_time_leaves(seed):
    # Chains of accumulating matmuls into the same region, into PSUM written before the
    # batch, into regions of another data type, and (odd seeds) regions that overlap an
    # earlier one's only in part: the batched adds must give every expectation and the final
    # PSUM bit for bit as the one-at-a-time path does.
    import ml_dtypes

    rng = np.random.default_rng(seed)
    rows, cols = 3, 2

    floats = {"bf16": (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
              "fp16 x e5m2": (np.float16, ml_dtypes.float8_e5m2),
              "e4m3": (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3)}

    def operands(dtype, k, m, n):
        if dtype == "int8":
            return (rng.integers(-128, 128, (k, m), dtype=np.int8),
                    rng.integers(-128, 128, (k, n), dtype=np.int8))
        scale = 2.0 ** rng.integers(-60, 60) if dtype == "bf16" else 2.0 ** rng.integers(-6, 6)
        stype, mtype = floats[dtype]
        return ((rng.standard_normal((k, m)) * scale).astype(stype),
                (rng.standard_normal((k, n)) * scale).astype(mtype))

    before = [(*operands("int8", 2, 2, 6), False, False, 0, 0),
              (*operands("bf16", 3, 1, 4), False, False, 1, 2)]
    batch = []
    for _ in range(40):
        dtype = rng.choice(["int8", "bf16", "bf16", "fp16 x e5m2", "e4m3"])
        perf_mode = "double_row" if dtype == "e4m3" and rng.random() < 0.5 else None
        bank = int(rng.integers(0, 2))
        offset, n = (0, 6) if bank == 0 else (2, 4)
        if seed % 2 and rng.random() < 0.2:
            offset, n = int(rng.integers(0, 4)), int(rng.integers(1, 4))
        ftz = bool(dtype != "int8" and rng.random() < 0.3)
        k = int(rng.integers(1, (2 if perf_mode else 1) * rows + 1))
        batch.append((*operands(dtype, k, int(rng.integers(1, cols + 1)), n),
                      bool(rng.random() < 0.7), ftz, bank, offset, perf_mode))
    one, many = TileModel(rows, cols, Scoreboard()), TileModel(rows, cols, Scoreboard())
    for tm in (one, many):
        tm.submit_many(before)
    for matmul in batch:
        stationary, moving, accumulate, ftz, bank, offset, perf_mode = matmul
        one.submit(stationary, moving, accumulate=accumulate, ftz=ftz, bank=bank,
                   offset=offset, perf_mode=perf_mode)
    many.submit_many(batch)
    np.testing.assert_array_equal(many.psum, one.psum)
    assert len(many.records) == len(one.records)
    for a, b in zip(many.records, one.records, strict=True):
        np.testing.assert_array_equal(np.asarray(a.expected), np.asarray(b.expected))


@pytest.mark.parametrize("n", [1, 2])
def test_a_read_expects_the_psum_of_its_time_not_what_later_matmuls_write(n):
    # n = 1: a one-entry region of PSUM transposed is contiguous as it is, so a careless
    # copy keeps a view of PSUM (found by the command-stream fuzzer).
    tm = model()
    ones = np.ones((2, n), np.int8)
    tm.submit(ones[:, :2] if n == 2 else np.ones((2, 2), np.int8), ones * 3, bank=1)  # 6
    tm.read(bank=1, offset=0, n=n)
    tm.submit(np.ones((2, 2), np.int8), ones * 5, bank=1)         # PSUM 10, after the READ
    board = tm.scoreboard
    for value in (6, 6, 10):   # the first matmul, the READ, the second matmul
        board.observe_block([[value, value]] * n, [False] * (n - 1) + [True])
    board.check_complete()


def test_mixed_and_double_row_beats():
    import ml_dtypes

    tm = model()                        # a 2 x 2 tile: K = 3 fills rows 0 and 1
    rows = tm.rows
    k = 2 * rows - 1
    s = np.arange(k * 2).reshape(k, 2).astype(np.uint8).view(ml_dtypes.float8_e4m3)
    mv = np.arange(k * 3).reshape(k, 3).astype(np.uint8).view(ml_dtypes.float8_e5m2)
    record, beat, s_beats, m_beats = tm.submit(s, mv, perf_mode="double_row")
    assert (beat["dtype"], beat["moving_dtype"], beat["double_row"]) == (DType.E4M3.value,
                                                                         DType.E5M2.value, 1)
    # Row r carries k = r in bits [7:0] and k = r + rows in bits [15:8] (none past K).
    bits = s.view(np.uint8).astype(np.uint16)
    assert len(s_beats) == rows
    assert s_beats[0, 0] == bits[0, 0] | bits[rows, 0] << 8
    assert s_beats[rows - 1, 1] == bits[rows - 1, 1]
    mbits = mv.view(np.uint8).astype(np.uint16)
    assert m_beats[2, 0] == mbits[0, 2] | mbits[rows, 2] << 8


def test_program_beats_are_the_golden_packing_and_share_result_beats():
    """TileModel.program_beats: its moving beats are golden.timing.moving_beats' (one
    schedule serves both), and matmuls in flight together share result beats too."""
    from systolica.golden.timing import moving_beats

    tm = TileModel(4, 4, Scoreboard())
    commands = [Command("matmul", k=2, m=2, n=3, tile_position=(2 * q, 2 * q),
                        tile_size=(2, 2)) for q in range(2)] + [Command("read", n=2)]
    moving, results = tm.program_beats(commands)
    assert moving == moving_beats(4, 4, commands)
    assert any(len(beat) == 2 for beat in moving) and any(len(beat) == 2 for beat in results)
    assert results[-2:] == [(2,), (2,)]            # the READ's two beats, alone, last


def test_plan_packs_the_moving_scales_on_the_beats_of_their_words():
    # Two MX matmuls in the two 8-row tiles of a 16-row tile (whole columns: they follow
    # each other): each beat's scale lanes are the group scales of the column whose words
    # it carries, in its matmul's rows, zero elsewhere.
    import ml_dtypes

    tm = TileModel(16, 2, Scoreboard(), dtypes=TileConfig(16, 2, "int8+mx").dtypes, mx=True)
    rng = np.random.default_rng(5)
    bits, scales, given = {}, {}, {}
    for row, n in ((0, 3), (8, 5)):
        elements = rng.integers(0, 0x78, (8, n + 2, 4), dtype=np.uint8).view(
            ml_dtypes.float8_e4m3fn)
        s_scale = rng.integers(0, 256, (1, 2), dtype=np.uint8)
        m_scale = rng.integers(0, 256, (1, n), dtype=np.uint8)
        item = tm.prepare_mx(elements[:, :2], elements[:, 2:], s_scale, m_scale, bank=row // 8,
                             tile_position=(row, 0), tile_size=(8, 2))
        record = tm.commit_mx(item)
        bits[record.index] = tm.stimulus(item)[2]
        scales[record.index] = tm.scales(item)[1]
        given[record.index] = (row, m_scale[0])
    data, groups, lanes = tm.plan(bits, scales)
    assert data.shape == lanes.shape == (8, 16)
    column = dict.fromkeys(given, 0)
    for beat, owners in enumerate(tm.moving_owners):
        want = np.zeros(16, np.uint32)
        for j in owners:
            row, m_scale = given[j]
            want[row:row + 8] = m_scale[column[j]]
            column[j] += 1
        np.testing.assert_array_equal(lanes[beat], want)
    assert column == {0: 3, 1: 5}
    assert tm.plan({}, {})[2].shape == (0, 16)


@pytest.mark.parametrize("k", [8, 13, 16])
def test_a_double_row_matmul_on_an_mx_tile_gets_a_zero_scale_per_stationary_beat(k):
    """On a tile with ``mx`` every stationary beat carries scale lanes: an FP8 double-row
    matmul sends ``min(K, rows)`` beats (two K rows per beat), so its zero scales are that
    many too (sized by K they could not be packed beside its words)."""
    import ml_dtypes

    tm = TileModel(8, 4, Scoreboard(), mx=True)
    rng = np.random.default_rng(k)
    s = rng.integers(0, 0x70, (k, 4)).astype(np.uint8).view(ml_dtypes.float8_e4m3)
    v = rng.integers(0, 0x70, (k, 3)).astype(np.uint8).view(ml_dtypes.float8_e5m2)
    (item,) = tm.prepare_many([(s, v, False, False, 0, 0, "double_row")])
    _beat, s_bits, m_bits = tm.stimulus(item)
    s_scales, m_scales = tm.scales(item)
    assert s_scales.shape == s_bits.shape == (min(k, 8), 4)
    assert m_scales.shape == m_bits.shape and not s_scales.any() and not m_scales.any()
