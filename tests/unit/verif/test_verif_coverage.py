"""Functional coverage classifiers (closure itself is checked on make test's fuzz sample,
tests/regression/verif/test_verif_fuzz.py)."""

import numpy as np

from systolica.golden import Command
from systolica.verif import coverage


def test_classifiers():
    assert coverage.bf16_classes([0x8000, 0x0001, 0x3F80, 0x7F7F, 0xFF80, 0x7FC1]) == list(
        coverage.BF16_CLASSES)
    assert coverage.int8_classes(np.array([0, -128, 127, -5, 5], np.int8)) == list(
        coverage.INT8_CLASSES)
    # 1 x 1; 2^-70 x 2^-70 (exact subnormal 2^-140); (1 + 2^-7) 2^-70 x (1 + 2^-7) 2^-78
    # (2^-148 with bits below 2^-149: rounded); 2^-100 x 2^-100 (zero); max x max (overflow)
    a = np.array([0x3F80, 0x1C80, 0x1C81, 0x0D80, 0x7F7F], np.uint16)
    b = np.array([0x3F80, 0x1C80, 0x1881, 0x0D80, 0x7F7F], np.uint16)
    assert coverage.product_classes(a, b, False) == list(coverage.PRODUCT_CLASSES)
    # TF32 / FP32: 1 x 1.5 (exact); (1 + 2^-23)^2 (rounds in the normal range); 2^-65 x 2^-65
    # (exact subnormal); (1 + 2^-23) 2^-70 x 2^-70 (rounded subnormal); 2^-100 x 2^-100;
    # 2^100 x 2^100. As TF32, (1 + 2^-23) reads as 1: that product is exact.
    a = np.array([1.0, 1 + 2.0 ** -23, 2.0 ** -65, (1 + 2.0 ** -23) * 2.0 ** -70, 2.0 ** -100,
                  2.0 ** 100], np.float32).view(np.uint32)
    b = np.array([1.5, 1 + 2.0 ** -23, 2.0 ** -65, 2.0 ** -70, 2.0 ** -100, 2.0 ** 100],
                 np.float32).view(np.uint32)
    assert coverage.wide_product_classes(a, b, "fp32", "fp32", False) == list(
        coverage.WIDE_PRODUCT_CLASSES)
    assert "rounded normal" not in coverage.wide_product_classes(a[:2], b[:2], "tf32", "fp32",
                                                                 False)
    # FTZ flushes the subnormal-range operands first: 2^-65 is normal, 2^-140 is not
    tiny = np.array([2.0 ** -140], np.float32).view(np.uint32)
    assert coverage.wide_product_classes(tiny, a[:1], "fp32", "fp32", True) == []
    assert coverage.stored_class(0x00000001, "bf16") == "fp32 subnormal"
    assert coverage.stored_class(5, "int8") == "int32"


def test_fuzz_tiles_hold_their_matmul_and_fill_the_placement_bins():
    """fuzz.random_tile draws only tiles the rule accepts that hold the matmul (double-row:
    full width), and on 4 x 4 reaches every placement bin and every tile size."""
    from systolica.golden import check_tile, check_tile_operands
    from systolica.verif import fuzz
    from systolica.verif.coverage import PLACEMENTS, placement

    rng = np.random.default_rng(7)
    seen, sizes = set(), set()
    for _ in range(400):
        k, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        mode = "double_row" if rng.random() < 0.2 else None
        k = 2 * k if mode else k
        position, size = fuzz.random_tile(rng, 4, 4, k, m, mode)
        tile = check_tile(position, size, rows=4, cols=4)
        check_tile_operands(tile, k, m, cols=4, perf_mode=mode)
        command = Command("matmul", k=k, m=m, tile_position=position, tile_size=size)
        seen.add(placement(command, 4, 4))
        sizes.add(size)
    assert seen == set(PLACEMENTS) and len(sizes) == 9


def test_wide_classifiers():
    words = [0x00000000, 0x80000000, 0x00000001, 0x3F800000, 0x7F7FFFFF, 0xFF800000,
             0x7FC00000]
    assert coverage.wide_classes(words, "fp32") == list(coverage.WIDE_CLASSES)
    # TF32 reads the upper 19 bits: 0x00001FFF is +0, 0x7F801FFF Inf, 0x7F7FE000 its max
    assert coverage.wide_classes([0x00001FFF], "tf32") == ["+0"]
    assert coverage.wide_classes([0x7F801FFF], "tf32") == ["inf"]
    assert coverage.wide_classes([0x7F801FFF], "fp32") == ["nan"]
    assert coverage.wide_classes([0xFF7FE123], "tf32") == ["max finite"]
    assert coverage.wide_classes([0x7F7FE000], "fp32") == ["normal"]
    from systolica.golden.command import unpaired_command

    assert coverage.unbuilt_class(Command("matmul", dtype="tf32")) == coverage.UNBUILT[0]
    assert coverage.unbuilt_class(Command("matmul", dtype="tf32", moving_dtype="fp32")) == (
        coverage.UNBUILT[1])
    assert coverage.unbuilt_class(unpaired_command(Command("matmul", dtype="bf16"),
                                                   "fp32")) == coverage.UNBUILT[2]
    assert coverage.unbuilt_class(Command("matmul", dtype="bf16")) is None


def test_fuzz_runs_concurrent_tiles_and_the_bin_counts_them():
    """With the second generator, random programs hold runs of matmuls in the finest tiles
    (K and M cut to fit) that the cycle model runs up to four at once, and
    coverage.in_flight counts them from the stamps."""
    from types import SimpleNamespace

    from systolica.golden import command_schedule, finest_tile
    from systolica.verif import fuzz

    rng, noise = np.random.default_rng(3), np.random.default_rng(4)
    items = fuzz.random_program(rng, 8, 8, 600, noise=noise)
    placed = [item[8:10] for item in items if isinstance(item, tuple) and len(item) == 10
              and item[9] == (2, 2)]
    assert len(placed) > 20
    assert all(position in {finest_tile(8, 8, s)[0] for s in range(16)}
               for position, _ in placed)
    commands = [Command("matmul", k=k, m=m, n=n, tile_position=(2 * r, 2 * r),
                        tile_size=(2, 2)) for r, (k, m, n) in enumerate([(2, 2, 30)] * 4)]
    records = [SimpleNamespace(error=None, op="matmul") for _ in commands]
    assert coverage.in_flight(records, command_schedule(8, 8, commands)) == [1, 2, 3, 4]
