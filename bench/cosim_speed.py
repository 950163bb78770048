"""Simulated cycles per second of one tile and one stimulus on pyverilator, cocotb + Verilator and cocotb + Icarus.

The stimulus is ``--passes`` passes of ``--steps`` steps of ReLU-like bf16 values (half
zeros), streamed back to back into the tile with an always-ready result port. The
pyverilator run is ``Cosim.run`` end to end (packing the transfers included), repeated
``--repeat`` times; the cocotb runs (Verilator's C++ optimised, as pyverilator's) time
the test coroutine from the first transfer to the last result (building and starting
the simulator excluded). Every simulator's
outputs and cycle counts must equal pyverilator's and the golden model's.

    .venv/bin/python bench/cosim_speed.py --design tensordash --rows 2 --cols 2 --lanes 8
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from dashraker.designs import DESIGNS
from dashraker.sim.cosim import Cosim
from dashraker.sim.runner import run_cocotb

__all__ = ["stimulus", "main"]

COCOTB_MODULE = Path(__file__).with_name("cosim_cocotb.py")


def stimulus(passes, rows, cols, steps, lanes, seed=0):
    """(scheduled [P, R, S, N], partner [P, C, S, N]) bf16-representable fp32 values, about half zeros."""
    rng = np.random.default_rng(seed)

    def values(count):
        x = rng.standard_normal((passes, count, steps, lanes)).astype(np.float32)
        x[rng.random(x.shape) < 0.5] = 0.0
        return torch.from_numpy(x).to(torch.bfloat16).float().numpy()

    return values(rows), values(cols)


def _cocotb(cosim, simulator, transfers, passes, build):
    folder = build / f"cocotb-{cosim.build_dir.name}"
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: folder / f"{simulator}-{name}" for name in ("stimulus.npz", "results.npy", "timing.json")}
    np.savez(files["stimulus.npz"], transfers=transfers, passes=passes, out_words=cosim.out_words)
    run_cocotb(lambda: cosim.design.tile(cosim.params), toplevel=f"{cosim.design.name}_bench",
               test_module=COCOTB_MODULE, build_dir=folder, simulator=simulator, optimize=True,
               config={"stimulus": str(files["stimulus.npz"]), "results": str(files["results.npy"]),
                       "timing": str(files["timing.json"])})
    timing = json.loads(files["timing.json"].read_text())
    return np.load(files["results.npy"]), timing["cycles"], timing["seconds"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=list(DESIGNS), default="baseline")
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--cols", type=int, default=2)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--passes", type=int, default=64)
    parser.add_argument("--steps", type=int, default=32, help="dense steps per pass")
    parser.add_argument("--repeat", type=int, default=20, help="pyverilator runs of the stimulus (default 20)")
    parser.add_argument("--simulators", default="pyverilator,verilator,icarus",
                        help="comma-separated: pyverilator, verilator (cocotb), icarus (cocotb)")
    parser.add_argument("--build", default="build/cosim", help="folder of cached builds (default build/cosim)")
    args = parser.parse_args(argv)
    build = Path(args.build)
    began = time.perf_counter()
    cosim = Cosim(args.design, {"rows": args.rows, "cols": args.cols, "lanes": args.lanes}, build_root=build)
    print(f"{args.design} {args.rows}x{args.cols} tile, {args.lanes} lanes: pyverilator model "
          f"{'built' if cosim.built else 'cached'} in {time.perf_counter() - began:.1f} s ({cosim.build_dir})")
    a, b = stimulus(args.passes, args.rows, args.cols, args.steps, args.lanes)
    want, golden_cycles = cosim.design.golden(cosim.params, cosim.bits(a), cosim.bits(b))

    first = cosim.run(a, b)  # warm-up, and the reference for the cocotb runs
    began, cycles = time.perf_counter(), 0
    for _ in range(args.repeat):
        run = cosim.run(a, b)
        assert np.array_equal(run.outputs, first.outputs) and np.array_equal(run.cycles, first.cycles)
        cycles += run.sim_cycles
    speeds = {"pyverilator": (cycles, time.perf_counter() - began)}
    assert np.array_equal(first.outputs, want), "pyverilator outputs differ from the golden model"
    if golden_cycles is not None:
        assert np.array_equal(first.cycles, golden_cycles), "pyverilator cycles differ from the golden model"

    transfers = cosim.transfers(a, b)
    for simulator in [name for name in args.simulators.split(",") if name in ("verilator", "icarus")]:
        began = time.perf_counter()
        results, sim_cycles, seconds = _cocotb(cosim, simulator, transfers, args.passes, build)
        decoded = cosim.decode(results)
        assert np.array_equal(decoded["outputs"], want), f"cocotb + {simulator} outputs differ from the golden model"
        if "cycles" in decoded:
            assert np.array_equal(decoded["cycles"], first.cycles), f"cocotb + {simulator} cycles differ from pyverilator's"
        assert abs(sim_cycles - first.sim_cycles) <= 4, (
            f"cocotb + {simulator} took {sim_cycles} cycles, pyverilator {first.sim_cycles}")
        speeds[f"cocotb + {simulator}"] = (sim_cycles, seconds)
        print(f"  cocotb + {simulator}: build (cached after the first time) and run {time.perf_counter() - began:.1f} s")

    print(f"stimulus: {args.passes} passes x {args.steps} steps, {first.sim_cycles} cycles per run; "
          "outputs and cycles agree with the golden model on every simulator")
    reference = speeds.get("cocotb + verilator")
    print(f"{'simulator':22s} {'cycles':>10s} {'seconds':>9s} {'cycles/s':>12s} {'vs cocotb+Verilator':>20s}")
    for name, (cycles, seconds) in speeds.items():
        rate = cycles / seconds
        ratio = f"{rate / (reference[0] / reference[1]):.3g}x" if reference else "-"
        print(f"{name:22s} {cycles:10d} {seconds:9.3f} {rate:12,.0f} {ratio:>20s}")


if __name__ == "__main__":
    main()
