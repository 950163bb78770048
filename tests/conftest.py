"""Shared fixtures: the simulators to run on, and a per-session cache of hardware builds."""

import os

import pytest

from dashraker.sim.runner import selected_simulators


def pytest_generate_tests(metafunc):
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", selected_simulators())


@pytest.hookimpl(trylast=True)  # after ``-m``'s deselection: the blocks are of the tests that run
def pytest_collection_modifyitems(config, items):
    """Tests marked ``early`` (minutes long; ``early(seconds=S)`` where longer than a minute) start first, each worker
    its share: a test of minutes started last would keep one worker busy after the other has finished.

    pytest-xdist hands each worker a consecutive block of the tests (``make test``'s worksteal: one half each, and an
    idle worker then takes the other's last pending tests; ``load``: a first chunk each), so the early tests, longest
    first, go one at a time to the block with the fewest seconds so far, at its head, and the other tests fill the
    blocks in their own order (a file's tests stay together, on one session's fixtures). Without pytest-xdist: the
    early tests first, longest first."""
    early = sorted((item for item in items if item.get_closest_marker("early")), key=_early_seconds, reverse=True)
    rest = [item for item in items if not item.get_closest_marker("early")]
    sizes = _first_blocks(config, len(items))
    heads, seconds = [[] for _ in sizes], [0] * len(sizes)
    for item in early:
        block = min(range(len(sizes)), key=lambda k: (seconds[k] if len(heads[k]) < sizes[k] else float("inf"), k))
        heads[block].append(item)
        seconds[block] += _early_seconds(item)
    ordered = []
    for head, size in zip(heads, sizes):
        take = max(0, size - len(head))
        ordered += head + rest[:take]
        rest = rest[take:]
    items[:] = ordered + rest


def _early_seconds(item):
    return item.get_closest_marker("early").kwargs.get("seconds", 60)


def _first_blocks(config, count):
    """The sizes of the consecutive blocks pytest-xdist first sends its workers (one block without it)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    dist = config.getoption("dist", "no")
    if workers < 2 or count < 2 * workers or dist not in ("load", "worksteal"):
        return [count]
    if dist == "worksteal":  # xdist.scheduler.worksteal: the pending tests split evenly among the idle workers
        sizes = []
        for node in range(workers):
            sizes.append((count - sum(sizes)) // (workers - node))
        return sizes
    chunk = max(min(count // workers // 4, config.getoption("maxschedchunk", None) or count), 2)  # xdist...load
    return [chunk] * workers


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


@pytest.fixture
def signals_delivered():
    """SIGINT and SIGTERM raise as ``dashraker``'s handlers make them (``KeyboardInterrupt``, ``Terminated``), even
    where this run was started with them ignored (a shell's background job)."""
    import signal

    from dashraker.cli import _terminate

    previous = {number: signal.signal(number, handler) for number, handler in
                ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _terminate))}
    yield
    for number, handler in previous.items():
        signal.signal(number, handler)


@pytest.fixture
def signal_at_swap(monkeypatch, signals_delivered):
    """The hook in the output code: ``signal_at_swap(signum, target)`` sends ``signum`` to this process at the moment
    the output ``target`` (a file or folder) is swapped in, before the rename: no timing luck."""
    import signal

    from dashraker import outputs

    swap = outputs._swap

    def arm(signum, target):
        def signalled(tmp, path):
            if str(path) == str(target):
                signal.raise_signal(signum)
            swap(tmp, path)

        monkeypatch.setattr(outputs, "_swap", signalled)

    return arm
