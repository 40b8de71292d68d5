"""Functional coverage classifiers (closure itself is checked on make test's fuzz sample,
tests/regression/verif/test_verif_fuzz.py)."""

import numpy as np

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
    assert coverage.stored_class(0x00000001, "bf16") == "fp32 subnormal"
    assert coverage.stored_class(5, "int8") == "int32"
