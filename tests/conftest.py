"""Shared pytest settings: the regression seed and the build folder."""

import os

import pytest

#: Seed of every cocotb run in the regression; replay a failure with SEED=<value> make test.
#: (make passes SEED on even when it is unset, as an empty string.)
_SEED_TEXT = os.environ.get("SEED") or "20261130"
if not _SEED_TEXT.isdigit():
    raise pytest.UsageError(f"SEED must be a non-negative integer, not {_SEED_TEXT!r}")
SEED = int(_SEED_TEXT)


def pytest_report_header(config):
    return f"systolica regression seed: {SEED} (set SEED=... to change or replay)"


@pytest.fixture(scope="session")
def seed():
    return SEED
