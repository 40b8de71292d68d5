"""Shared pytest settings: the regression seed and the build folder."""

import os

import pytest

#: Seed of every cocotb run in the regression; replay a failure with SEED=<value> make test.
SEED = int(os.environ.get("SEED", "20261130"))


def pytest_report_header(config):
    return f"systolica regression seed: {SEED} (set SEED=... to change or replay)"


@pytest.fixture(scope="session")
def seed():
    return SEED
