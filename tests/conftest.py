"""Shared fixtures: the simulators to run on, and a per-session cache of hardware builds."""

import pytest

from dashraker.sim.runner import selected_simulators


def pytest_generate_tests(metafunc):
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", selected_simulators())


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory):
    """A folder per session where each hardware configuration is built once."""
    return tmp_path_factory.mktemp("hw_builds")
