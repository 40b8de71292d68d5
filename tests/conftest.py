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


#: Tests that build the full-size tile (minutes): run first, so that the build overlaps the
#: rest of the regression on the other workers instead of ending it.
_LONG_FIRST = ("test_full_size_tile.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.nodeid.split("::")[0].rsplit("/", 1)[-1]
               not in _LONG_FIRST)
