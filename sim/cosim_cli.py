"""``dashraker cosim``: run a trace layer's passes on a design's RTL and compare with the golden model and the mapper."""

from dashraker.errors import CliError, renamed_choices
from dashraker.mapping.ops import OPS, RENAMED_OPS

__all__ = ["register"]

def register(subparsers):
    from dashraker.designs import DESIGNS

    parser = subparsers.add_parser(
        "cosim", help="co-simulate a trace layer's passes on the RTL (pyverilator)",
        description="Take K passes of one layer operation exactly as the mapper forms them, run them on the "
                    "design's generated tile (pyverilator, Debian Verilator), compare outputs with the golden "
                    "model and cycles with the mapper. Exit status 1 on any mismatch.")
    parser.add_argument("trace", help="trace folder (dashraker trace record)")
    parser.add_argument("--layer", required=True, help="layer name, as in the trace manifest")
    renamed_choices(parser, "--op", OPS, RENAMED_OPS, required=True, help="training operation")
    parser.add_argument("--design", required=True, choices=list(DESIGNS))
    parser.add_argument("--passes", type=int, default=16, help="passes K to run (default 16)")
    parser.add_argument("--start", type=int, default=0, help="index of the first pass, in mapper order (default 0)")
    parser.add_argument("--step", type=int, default=None, help="recorded step (default: the last)")
    parser.add_argument("--rounding", choices=["nearest", "truncate"], default="nearest",
                        help="fp32 -> bf16 conversion of the trace (default nearest)")
    add_design_flags(parser)
    parser.add_argument("--force-size", action="store_true",
                        help="go ahead with a tile past the size guard of `dashraker verilog` (512 lanes)")
    parser.add_argument("--build", default="build/cosim", help="folder of cached RTL builds (default build/cosim)")
    parser.add_argument("--opt-level", type=int, choices=range(4), default=2,
                        help="C++ optimisation level of the model (default 2; 0 compiles fastest)")
    parser.add_argument("--json", default=None, help="also write the summary to this JSON file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_run)


def add_design_flags(parser):
    """Every design's parameters as flags (each once, saying which designs have it); unset ones are None, the
    registry's default (its 1x1 tile, as every command's: SPEC section 1)."""
    from dashraker.designs import DESIGNS

    group = parser.add_argument_group(
        "design parameters (default: the design's, as `dashraker verilog DESIGN`); each applies to the designs that "
        "have it")
    flags = {}
    for design in DESIGNS.values():
        for parameter in design.parameters:
            flags.setdefault(parameter.option, (parameter, []))[1].append(design.name)
    for parameter, owners in flags.values():
        help_text = parameter.help + ("" if len(owners) == len(DESIGNS) else f" ({', '.join(owners)})")
        group.add_argument(parameter.option, dest=parameter.name, metavar=parameter.key.upper(),
                           type=parameter.kind if parameter.choices is None else type(parameter.choices[0]),
                           help=help_text)


def given_params(args, design, strict=True):
    """The parameters of ``design`` given as flags, checked (``CliError``); with ``strict`` a flag of another
    design's parameter is refused, else ignored."""
    from dashraker.designs import DESIGNS
    from dashraker.designs.cli import check_flag

    known = {parameter.name: parameter for parameter in design.parameters}
    options = {parameter.name: parameter.option for d in DESIGNS.values() for parameter in d.parameters}
    given = {name: getattr(args, name) for name in options if getattr(args, name, None) is not None}
    for name in sorted(set(given) - set(known)):
        if strict:
            raise CliError(f"{options[name]} does not apply to design {design.name}")
        del given[name]
    for name, value in given.items():
        check_flag(known[name], value)
    return given


def _layer(trace, name, op):
    from dashraker.mapping.runner import layer_ops
    from dashraker.trace import TraceError

    names = [layer.name for layer in trace.layers]
    if name not in names:
        try:
            trace.layer(name)  # a layer of a type this version does not take says why
        except TraceError as error:
            raise CliError(f"{error}; layers are {', '.join(names)}") from None
    index = names.index(name)
    if op not in layer_ops(index, trace.layers[index]):
        raise CliError(f"{trace.path}: layer {name!r} needs no input gradient (the first layer, or its input is the "
                       "network's data): the mapper forms no bwd_input passes for it (SPEC section 5)")
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
    from dashraker.progress import bar as progress_bar

    from dashraker.designs import design as find_design
    from dashraker.designs.cli import check_size
    from dashraker.outputs import check_output_file
    from dashraker.sim.cosim import Cosim, CosimBuildError
    from dashraker.sim.cosim_check import cosimulate
    from dashraker.trace import TraceError, open_trace
    from dashraker.trace.store import save_json

    if args.passes < 1 or args.start < 0:
        raise CliError(f"--passes must be positive and --start non-negative, not {args.passes} and {args.start}")
    try:
        trace = open_trace(args.trace)
    except TraceError as error:
        raise CliError(str(error)) from None
    op = args.op
    layer = _layer(trace, args.layer, op)
    step = trace.steps[-1] if args.step is None else args.step
    if step not in trace.steps:
        raise CliError(f"{trace.path}: step {step} is not recorded; recorded steps are {trace.steps}")
    design = find_design(args.design)
    given = given_params(args, design)
    try:  # minutes of building and simulating, or worse, before a tile too large would fail
        check_size(design, design.params(**given), args.force_size)
    except ValueError as error:
        raise CliError(f"{design.name}: {error}") from None
    try:  # a broken tensor file is found here, before minutes of building the RTL
        tensors = trace.load(layer.name, step)
    except TraceError as error:
        raise CliError(str(error)) from None
    if args.json:
        check_output_file(args.json, "--json")
    try:
        cosim = Cosim(design, given, build_root=args.build, optimize=f"-O{args.opt_level}")
    except ValueError as error:
        raise CliError(str(error)) from None
    except CosimBuildError as error:
        raise CliError(str(error)) from None
    with progress_bar(total=args.passes, desc="cosim", unit="pass", disable=args.no_progress) as bar:
        report = cosimulate(cosim, layer, tensors, op, args.passes, args.start, args.rounding, progress=bar)
    if report.passes == 0:
        raise CliError(f"layer {layer.name!r} {args.op}: no pass at index {args.start} or later")
    print("\n".join(summary_lines(report, cosim)))
    if args.json:
        save_json(args.json, {**{k: v for k, v in vars(report).items() if k != "problems"},
                              "problems": report.problems, "ok": report.ok, "params": cosim.params,
                              "cycles_per_second": report.cycles_per_second, "step": step})
    return 0 if report.ok else 1

