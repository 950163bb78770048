"""A small layer over ``cocotb_tools.runner``: build a component once per configuration, run a cocotb module.

Typical use in a pytest test::

    run_cocotb(Tile(4, 4, 16, "bf16", 0, "tree"), toplevel="tile_4x4",
               test_module=Path(__file__).with_name("cocotb_baseline_tile.py"),
               build_dir=cache / "tile_4x4", simulator="icarus",
               config={"rows": 4, "cols": 4, "seed": 1})

``run_tile`` does this for a design of the registry, whose cocotb module drives it
with ``sim.tile_tb.TileTB``.

The Verilog is written to ``build_dir`` once and each simulator builds into its own
sub-folder once (later calls with the same folder reuse both). ``config`` reaches
the cocotb module as ``tb_config()``. ``WAVES=1`` in the environment dumps waves.
A failing or empty cocotb run raises ``AssertionError``.
"""

import contextlib
import json
import os
import sys
from pathlib import Path

from dashraker.hw.verilog import write_verilog
from dashraker.sim.toolchain import LINT_WAIVERS, cocotb_verilator_env, require

__all__ = ["SIMULATORS", "selected_simulators", "configuration_cases", "run_cocotb", "run_tile", "tb_config"]

SIMULATORS = ("icarus", "verilator")
_CONFIG_VARIABLE = "DASHRAKER_TB_CONFIG"
_REWRITE_VARIABLE = "COCOTB_REWRITE_ASSERTION_FILES"
_TIMESCALE = ("1ns", "1ps")


def selected_simulators():
    """Simulators named by ``SIM`` (comma-separated), default both."""
    names = [name.strip() for name in os.environ.get("SIM", ",".join(SIMULATORS)).split(",") if name.strip()]
    unknown = sorted(set(names) - set(SIMULATORS))
    if unknown:
        raise ValueError(f"SIM names unknown simulator(s) {unknown}; expected some of {list(SIMULATORS)}")
    return names


def configuration_cases(names, quick):
    """pytest parameters ``(name, simulator)`` for every configuration on every selected simulator.

    Pairs not in ``quick`` are marked slow, so the quick suite builds only the few
    configurations each simulator handles fastest.
    """
    import pytest

    return [
        pytest.param(name, simulator, marks=[] if (name, simulator) in quick else [pytest.mark.slow],
                     id=f"{simulator}-{name}")
        for name in names
        for simulator in selected_simulators()
    ]


def tb_config():
    """The ``config`` dict given to ``run_cocotb``, inside the cocotb test module."""
    return json.loads(os.environ.get(_CONFIG_VARIABLE, "{}"))


def _rewritten(test_module):
    """The files whose asserts pytest rewrites in the simulator: the test module's folder and ``dashraker.sim``.

    cocotb's default rewrites every module imported, without caching the result, so
    importing torch and scikit-learn there took some 20 s of recompiling each run.
    """
    return os.environ.get(_REWRITE_VARIABLE, f"{test_module.parent}/*.py {Path(__file__).parent}/*.py")


@contextlib.contextmanager
def _environment(env):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cocotb(component, *, toplevel, test_module, build_dir, simulator, config=None, testcase=None,
               optimize=False):
    """Build ``component`` (Verilog, then ``simulator``) once in ``build_dir`` and run ``test_module``.

    ``component`` may be a callable returning the component, so that a cached build
    need not elaborate it again. Verilator models are compiled without C++ optimisation
    unless ``optimize`` (large tiles compile several times faster; benchmarks optimise),
    and only the top level's ports are public to cocotb (the testbenches use nothing
    else). Returns the number of cocotb tests that passed.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {simulator!r}")
    build_dir = Path(build_dir)
    source = build_dir / f"{toplevel}.v"
    if not source.exists():
        write_verilog(component() if callable(component) else component, source, toplevel)
    test_module = Path(test_module).resolve()
    if str(test_module.parent) not in sys.path:
        sys.path.insert(0, str(test_module.parent))

    if simulator == "verilator":
        env = cocotb_verilator_env(optimize=optimize)
        sources = [LINT_WAIVERS, source]
        build_args = ["--public-depth", "1", "--x-assign", "fast", "--x-initial", "fast"]
    else:
        require("iverilog")
        env = dict(os.environ)
        sources = [source]
        build_args = []
    waves = os.environ.get("WAVES", "0") not in ("", "0")
    sim_dir = build_dir / simulator
    with _environment(env):
        runner = _top_ports_public(get_runner(simulator))
        runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=sim_dir, build_args=build_args,
                     timescale=_TIMESCALE, waves=waves, always=False)
        results = runner.test(
            test_module=test_module.stem, hdl_toplevel=toplevel, build_dir=sim_dir, test_dir=sim_dir,
            extra_env={_CONFIG_VARIABLE: json.dumps(config or {}), _REWRITE_VARIABLE: _rewritten(test_module)},
            testcase=testcase, waves=waves, timescale=_TIMESCALE,
        )
    total, failed = get_results(results)
    assert total > 0, f"{test_module.name} ran no cocotb test on {simulator}"
    assert failed == 0, f"{failed} of {total} cocotb tests failed in {test_module.name} on {simulator} (see {results})"
    return total


def _top_ports_public(runner):
    """``runner``, whose Verilator build makes only the top level's ports public (``--public-depth 1``, in the build
    arguments): cocotb 2.1's Verilator runner also passes ``--public-flat-rw``, which makes every signal of the design
    public: a model slower to build and run (the quick tiles' three Verilator cases took 99 s of CPU against 64
    without it, TensorDash's 1x2x8 fp32 tile 37-54 s against 24). The testbenches read only the top level's ports.
    Other runners as they are."""
    from cocotb_tools.runner import Verilator

    if isinstance(runner, Verilator):
        build_command = runner._build_command

        def without_flat_public():
            commands = build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

        runner._build_command = without_flat_public
    return runner


def run_tile(design, params, *, toplevel, test_module, build_dir, simulator, testcase=None, optimize=False,
             **config):
    """``run_cocotb`` on the tile of ``design`` (a registry descriptor) with full ``params``.

    The cocotb module's ``TileTB`` finds the design and ``params`` in ``tb_config()``,
    beside the other ``config`` entries (``seed``, pass counts).
    """
    return run_cocotb(lambda: design.tile(params), toplevel=toplevel, test_module=test_module, build_dir=build_dir,
                      simulator=simulator, config={"design": design.name, "params": params, **config},
                      testcase=testcase, optimize=optimize)
