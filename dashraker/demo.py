"""``dashraker demo``: the main job end to end on a small real trace.

Records a few steps of a VGG-style CNN learning scikit-learn's digits, generates and
lints the Verilog of the three designs, maps the trace onto them and writes the
tables and plots, then studies it as the seed papers' comparison points ask (``study``).
Each stage is the same subcommand a user would run by hand.
"""

from pathlib import Path

from dashraker.outputs import path_argument

__all__ = ["register", "run"]

# The demo's tiles: their Verilog is generated and linted, and the trace is mapped onto 16 of them (so that the
# leakage the mapper charges needs the area of these small tiles, not of the packaged configuration's 4x4 ones).
TILE = {"rows": 1, "cols": 1}
DESIGN_ARGS = tuple(arg for key, value in TILE.items() for arg in (f"--{key}", str(value)))


def register(subparsers):
    parser = subparsers.add_parser("demo", help="record a small real trace, generate Verilog, map, print and plot",
                                   description=__doc__)
    parser.add_argument("--out", type=path_argument, default=Path("build/demo"),
                        help="output folder (default build/demo)")
    parser.add_argument("--model", default="vgg", help="network to record (default vgg)")
    parser.add_argument("--steps", default="1,60", help="optimizer steps to record (default 1,60)")
    parser.add_argument("--samples", default="2", help="samples per recorded batch (default 2)")
    parser.set_defaults(func=run)


def _stage(title, argv):
    from dashraker.cli import main

    print(f"\n== {title}: dashraker {' '.join(argv)}", flush=True)
    status = main(argv)
    if status:
        raise SystemExit(status)


def _write_config(path):
    """The packaged accelerator configuration with the demo's tiles, written to ``path``."""
    import yaml

    from dashraker.mapping.config import default_config_path
    from dashraker.outputs import atomic_write

    config = {**yaml.safe_load(default_config_path().read_text()), **TILE}
    atomic_write(path, lambda file: file.write(yaml.safe_dump(config, sort_keys=False).encode()))
    return path


def run(args):
    from dashraker.designs import DESIGNS
    from dashraker.errors import CliError
    from dashraker.sim.toolchain import LintError, lint

    out = args.out
    trace = out / "trace"
    _stage("record a real training trace", ["trace", "record", "--model", args.model, "--data", "digits",
                                            "--steps", args.steps, "--samples", args.samples,
                                            "--out", str(trace), "--force"])
    _stage("check it", ["trace", "check", str(trace)])
    for design in DESIGNS:
        verilog = out / "verilog" / f"{design}.v"
        _stage(f"generate the {design} tile", ["verilog", design, *DESIGN_ARGS, "--out", str(verilog)])
        try:
            lint(verilog)
        except LintError as error:
            raise CliError(str(error)) from None
        print(f"{verilog}: Verilator -Wall lint clean")
    config = _write_config(out / "accelerator.yaml")
    _stage("map the trace onto every design", ["map", str(trace), "--design", "all", "--config", str(config),
                                               "--out", str(out / "map")])
    _stage("study the papers' comparison points on it", ["study", str(trace), "--config", str(config),
                                                          "--out", str(out / "study")])
    print(f"\ndemo done: everything is under {out}/")
