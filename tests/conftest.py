"""Shared fixtures: the simulators to run on, and a per-session cache of hardware builds."""

import pytest

from dashraker.sim.runner import selected_simulators


def pytest_generate_tests(metafunc):
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", selected_simulators())


def pytest_collection_modifyitems(items):
    """Tests marked ``early`` first: pytest-xdist hands tests out in order (``make test``'s worksteal: each worker a
    consecutive half, an idle one takes the other's last pending tests), and a test of minutes started last would keep
    one worker busy after the other has finished."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory, worker_id):
    """A folder per session where each hardware configuration is built once: under pytest-xdist one for all workers
    (in the run's common temporary folder), so that a model one worker built serves the tests the other took (a
    co-simulation's Verilator model: about a minute; worksteal may split a file's tests between the workers). A
    co-simulation build is swapped in whole (``sim.cosim.compile_model``); a cocotb test builds into its own
    configuration's and simulator's folder."""
    if worker_id == "master":
        return tmp_path_factory.mktemp("hw_builds")
    shared = tmp_path_factory.getbasetemp().parent / "hw_builds"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(autouse=True)
def tile_areas_unmeasured(request, monkeypatch):
    """``map`` charges leakage on the tile's area, which it synthesises (minutes for the default 4x4 tiles): tests
    of other things map without it (their reports say "leakage not modelled"); tests marked ``real_area``
    synthesise their (small) tiles."""
    if request.node.get_closest_marker("real_area") is None:
        monkeypatch.setattr("dashraker.mapping.silicon.resolve_all", lambda configs, *args, **kwargs: list(configs))
