"""``dashraker cosim``: run a trace layer's passes on a design's RTL and compare with the golden model and the mapper."""

import json

from dashraker.cli import CliError

__all__ = ["register"]

_DESIGN_OPTIONS = ("lanes", "lookahead", "pattern", "guard_bits", "zero_block_cycles")


def register(subparsers):
    parser = subparsers.add_parser(
        "cosim", help="co-simulate a trace layer's passes on the RTL (pyverilator)",
        description="Take K passes of one layer operation exactly as the mapper forms them, run them on the "
                    "design's generated tile (pyverilator, Debian Verilator), compare outputs with the golden "
                    "model and cycles with the mapper. Exit status 1 on any mismatch.")
    parser.add_argument("trace", help="trace folder (dashraker trace record)")
    parser.add_argument("--layer", required=True, help="layer name, as in the trace manifest")
    parser.add_argument("--op", required=True, choices=["fwd", "bwd-input", "bwd-weight"], help="training operation")
    parser.add_argument("--design", required=True, choices=["baseline", "tensordash", "fpraker"])
    parser.add_argument("--passes", type=int, default=16, help="passes K to run (default 16)")
    parser.add_argument("--start", type=int, default=0, help="index of the first pass, in mapper order (default 0)")
    parser.add_argument("--step", type=int, default=None, help="recorded step (default: the last)")
    parser.add_argument("--rows", type=int, default=2, help="PE rows R (default 2)")
    parser.add_argument("--cols", type=int, default=2, help="PE columns C (default 2)")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="operand format")
    parser.add_argument("--rounding", choices=["nearest", "truncate"], default="nearest",
                        help="fp32 -> bf16 conversion of the trace (default nearest)")
    group = parser.add_argument_group("design parameters (default: the design's, as `dashraker verilog DESIGN`)")
    group.add_argument("--lanes", type=int, help="lanes N per PE (baseline/TensorDash 16, FPRaker 8)")
    group.add_argument("--lookahead", type=int, help="TensorDash lookahead H")
    group.add_argument("--pattern", help="TensorDash interconnect pattern")
    group.add_argument("--guard-bits", type=int, help="FPRaker guard bits G")
    group.add_argument("--zero-block-cycles", type=int, choices=[0, 1], help="FPRaker cost of an all-zero block")
    parser.add_argument("--build", default="build/cosim", help="folder of cached RTL builds (default build/cosim)")
    parser.add_argument("--opt-level", type=int, choices=range(4), default=2,
                        help="C++ optimisation level of the model (default 2; 0 compiles fastest)")
    parser.add_argument("--json", default=None, help="also write the summary to this JSON file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_run)


def _layer(trace, name, op):
    names = [layer.name for layer in trace.layers]
    if name not in names:
        raise CliError(f"{trace.path}: no layer {name!r}; layers are {', '.join(names)}")
    index = names.index(name)
    if op == "bwd_input" and index == 0:
        raise CliError(f"{trace.path}: layer {name!r} is the first layer: the mapper forms no bwd-input passes "
                       "for it (SPEC section 5)")
    return trace.layers[index]


def summary_lines(report, cosim):
    """The printed summary of a ``CosimReport``."""
    tile = cosim.tile
    lines = [
        f"{report.design} {tile.rows}x{tile.cols} tile, {tile.lanes} lanes: layer {report.layer} {report.op}",
        f"  passes {report.passes} ({report.dense_steps} dense steps)",
        f"  output mismatches {report.output_mismatches} passes ({report.value_mismatches} PE outputs)",
        f"  cycle mismatches {report.cycle_mismatches} passes (RTL {report.rtl_cycles} cycles, "
        f"mapper {report.mapper_cycles}), timing mismatches {report.timing_mismatches}",
        f"  simulated {report.sim_cycles} cycles in {report.rtl_seconds:.2f} s: {report.cycles_per_second:,.0f} cycles/s",
    ]
    lines += [f"  mismatch: {text}" for text in report.problems]
    lines.append("  AGREE" if report.ok else "  DISAGREE")
    return lines


def _run(args):
    from tqdm import tqdm

    from dashraker.sim.cosim import Cosim, CosimBuildError, design_params
    from dashraker.sim.cosim_check import OPS, cosimulate
    from dashraker.trace import TraceError, open_trace

    if args.passes < 1 or args.start < 0:
        raise CliError(f"--passes must be positive and --start non-negative, not {args.passes} and {args.start}")
    try:
        trace = open_trace(args.trace)
    except TraceError as error:
        raise CliError(str(error)) from None
    op = OPS[args.op]
    layer = _layer(trace, args.layer, op)
    step = trace.steps[-1] if args.step is None else args.step
    if step not in trace.steps:
        raise CliError(f"{trace.path}: step {step} is not recorded; recorded steps are {trace.steps}")
    given = {name: getattr(args, name) for name in _DESIGN_OPTIONS if getattr(args, name) is not None}
    for name in sorted(set(given) - set(design_params(args.design))):
        raise CliError(f"--{name.replace('_', '-')} does not apply to design {args.design}")
    try:
        cosim = Cosim(args.design, {"rows": args.rows, "cols": args.cols, "dtype": args.dtype, **given},
                      build_root=args.build, optimize=f"-O{args.opt_level}")
    except ValueError as error:
        raise CliError(str(error)) from None
    except CosimBuildError as error:
        raise CliError(str(error)) from None
    tensors = trace.load(layer.name, step)
    with tqdm(total=args.passes, desc="cosim", unit="pass", disable=args.no_progress) as bar:
        report = cosimulate(cosim, layer, tensors, op, args.passes, args.start, args.rounding, progress=bar)
    if report.passes == 0:
        raise CliError(f"layer {layer.name!r} {args.op}: no pass at index {args.start} or later")
    print("\n".join(summary_lines(report, cosim)))
    if args.json:
        _write_json(args.json, {**{k: v for k, v in vars(report).items() if k != "problems"},
                                "problems": report.problems, "ok": report.ok, "params": cosim.params,
                                "cycles_per_second": report.cycles_per_second, "step": step})
    return 0 if report.ok else 1


def _write_json(path, data):
    import os
    import tempfile
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        json.dump(data, tmp, indent=1)
    os.replace(tmp.name, path)
