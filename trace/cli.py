"""``dashraker trace record|check|export``: record a training trace, check it, export it for other simulators."""

import sys

from dashraker.errors import CliError

__all__ = ["register"]

MODEL_NAMES = "resnet18, vgg, mobilenet, mlp, transformer (small); resnet50, mobilenetv2, gpt, bert"


def step_list(flag, texts):
    """Step numbers from one or more comma-separated values of ``flag`` (``1,7`` or repeated); None if not given."""
    if texts is None:
        return None
    try:
        return [int(part) for text in texts for part in text.split(",") if part.strip()]
    except ValueError:
        raise CliError(f"{flag} takes step numbers separated by commas (e.g. 1,50,200), not {','.join(texts)!r}") from None


def _record(args):
    import warnings

    from dashraker.trace.errors import RecordError
    from dashraker.trace.factory import parse_args
    from dashraker.trace.recorder import UnrecordedWarning
    from dashraker.trace.training import parse_steps, record

    with warnings.catch_warnings():
        warnings.simplefilter("always", UnrecordedWarning)
        warnings.showwarning = lambda message, *rest: print(f"warning: {message}", file=sys.stderr)
        out = _recorded(args, record, parse_args, parse_steps, RecordError)
    print(f"trace written to {out}")


def _recorded(args, record, parse_args, parse_steps, RecordError):
    try:
        return record(
            args.model,
            args.data,
            parse_steps(args.steps),
            args.samples,
            args.out,
            batch_size=args.batch_size,
            seed=args.seed,
            lr=args.lr,
            prune=args.prune,
            progress=not args.no_progress,
            input_grad=args.input_grad,
            seq_len=args.seq_len,
            overwrite=args.force,
            threads=args.threads,
            model_args=parse_args(args.model_arg, "--model-arg"),
            data_args=parse_args(args.data_arg, "--data-arg"),
            strict=args.strict,
            device=args.device,
            autocast=args.autocast,
            image_size=args.image_size,
        )
    except RecordError as error:
        raise CliError(str(error)) from None


def _check(args):
    from dashraker.trace.check import check_trace, format_sparsity, format_summary

    result = check_trace(args.trace, progress=not (args.quiet or args.no_progress), strict=args.strict)
    if result.stats and not args.quiet:
        print(format_sparsity(result.stats))
        print()
        print(format_summary(result.stats))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for problem in result.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if result.problems:
        raise CliError(f"{len(result.problems)} problem(s) in trace {args.trace}; first: {result.problems[0]}")
    trace = result.trace
    skipped = f", {len(result.warnings)} warning(s) above" if result.warnings else ""
    print(f"{args.trace}: ok, {len(trace.layers)} layers x {len(trace.steps)} steps, {len(result.stats)} tensors"
          f"{skipped}")


def _export(args):
    from dashraker.trace.errors import TraceError
    from dashraker.trace.export import export_dnnsim

    if (args.out is None) == (args.out_flag is None):
        raise CliError("give the output folder once: as OUT after the trace, or as --out OUT, as the other commands "
                       "take it")
    try:
        root = export_dnnsim(args.trace, args.out or args.out_flag, net=args.net, progress=not args.no_progress, overwrite=args.force)
    except TraceError as error:
        raise CliError(str(error)) from None
    print(f"dnnsim layout written to {root}; {root / 'DNNSIM.txt'} says how to run DNNsim on it")


def register(subparsers):
    parser = subparsers.add_parser(
        "trace",
        help="record, check and export training traces",
        description="Record a training trace from real PyTorch training, check it, export it for other simulators.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    from dashraker.trace.store import RECORDED_NAMES

    rec = actions.add_parser(
        "record", help="train a network and record a trace on chosen optimizer steps",
        description="Train a network and record, on chosen optimizer steps, the input, weight and output gradient "
        f"of every {RECORDED_NAMES} layer.")
    rec.add_argument("--model", required=True,
                     help=f"network: {MODEL_NAMES}, or PACKAGE.MODULE:FACTORY, a callable returning an nn.Module")
    rec.add_argument("--model-arg", action="append", metavar="K=V",
                     help="keyword argument of the network (layers=12, dim=768, heads=12 ...) or of the model factory "
                     "(repeatable; V a Python literal, else a string)")
    rec.add_argument(
        "--data",
        default="digits",
        help="digits, pystdlib (for transformer and gpt), pystdlib-mlm (masked, for bert), imagefolder:FOLDER "
        "(class folders of JPEG/PNG images), cifar10:FOLDER, npy:FOLDER, or PACKAGE.MODULE:FACTORY, a callable "
        "returning a map-style data set of (sample, target) pairs (default digits)",
    )
    rec.add_argument("--image-size", type=int, metavar="N", help="resize digits and imagefolder images to NxN "
                     "(default: 32 for digits, 224 for imagefolder)")
    rec.add_argument("--data-arg", action="append", metavar="K=V", help="keyword argument of the data factory")
    rec.add_argument("--steps", required=True, help="optimizer steps to record, increasing: N or FIRST:LAST:EVERY, "
                     "comma-separated, e.g. 1,50,200 or 1,1000:5000:1000 (trains to the last)")
    rec.add_argument("--device", default="cpu", help="where training runs: cpu or cuda[:N] (default cpu)")
    rec.add_argument("--autocast", metavar="DTYPE", help="run the forward pass under torch.autocast in DTYPE (bf16, "
                     "the papers' setting); inputs and weights are recorded as the products consumed them")
    rec.add_argument("--samples", type=int, default=4, help="samples of each recorded batch to save (default 4)")
    rec.add_argument("--batch-size", type=int, default=16, help="training batch size (default 16)")
    rec.add_argument("--lr", type=float, help="learning rate (default 0.05 with SGD, 1e-3 with AdamW for pystdlib)")
    rec.add_argument("--seed", type=int, default=0, help="seed of initialization and batch order (default 0)")
    rec.add_argument("--prune", type=float, metavar="S", help="gradual magnitude pruning to weight sparsity S")
    rec.add_argument("--input-grad", action="store_true", help="also record input gradients")
    rec.add_argument("--seq-len", type=int, default=64, help="sequence length for pystdlib (default 64)")
    rec.add_argument("--threads", type=int, help="PyTorch threads (default: PyTorch's choice)")
    rec.add_argument("--out", required=True, help="trace folder to create")
    rec.add_argument("--force", action="store_true", help="replace an existing trace in --out")
    rec.add_argument("--strict", action="store_true",
                     help="refuse a model with modules whose parameters are not recorded (ConvTranspose1d, LSTM, ...: "
                     f"anything but normalisations, embeddings and the recorded {RECORDED_NAMES}) instead of warning")
    rec.add_argument("--no-progress", action="store_true", help="no progress bar")
    rec.set_defaults(func=_record)

    check = actions.add_parser("check", help="check every file of a trace and print the sparsity of every tensor")
    check.add_argument("trace", help="trace folder")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.add_argument("--quiet", action="store_true", help="print problems only, no table or progress bar")
    check.add_argument("--strict", action="store_true",
                       help="a problem (exit 2), not a warning: modules with parameters the recording left out")
    check.set_defaults(func=_check)

    from dashraker.trace.export import REFUSED

    export = actions.add_parser(
        "export", help="export a trace to another simulator's layout",
        description="Write the trace in DNNsim's per-layer .npy layout with trace_params.csv, a DNNsim batch file "
        "(tensordash.prototxt) and DNNSIM.txt, the steps to run DNNsim on it. Layers are renamed "
        "fc<i> (Linear) and conv<i> (convolution), i the layer's index in the trace, so that DNNsim types them "
        f"right; layer_names.csv keeps the mapping. Refused (exit 2, every such layer named at once): {REFUSED}. "
        "One network per output folder: a folder holding another network's export is refused, with --force too.")
    export.add_argument("--format", choices=["dnnsim"], default="dnnsim", help="output layout (default dnnsim)")
    export.add_argument("--net", help="network folder name in the output (default: the trace's model name)")
    export.add_argument("trace", help="trace folder")
    export.add_argument("out", nargs="?", help="output folder (or --out)")
    export.add_argument("--out", dest="out_flag", metavar="OUT", help="output folder, as every other command takes it")
    export.add_argument("--force", action="store_true", help="replace an earlier export in the output folder")
    export.add_argument("--no-progress", action="store_true", help="no progress bar")
    export.set_defaults(func=_export)
