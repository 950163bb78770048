"""``dashraker suite SUITE --out DIR``: record (or reuse) a trace of every workload of a suite and map each on the
designs; one row per workload, as the papers' per-model figures.

A suite is a YAML file (or the name of a packaged one, ``mapping/suites/<name>.yaml``) holding
``workloads:``, a list of entries, each a ``name`` (its trace folder's name) and the settings of
``trace.record`` (``WORKLOAD_KEYS``). A workload's trace is reused when the traces folder already
holds one recorded with the same settings (its manifest says so), on whatever device; otherwise it
is recorded, replacing an earlier trace of that name.
"""

import csv
import io
import json
import re
import time
from pathlib import Path

from dashraker.errors import CliError
from dashraker.outputs import path_argument

__all__ = ["register", "run", "load_suite", "SUITES", "WORKLOAD_KEYS"]

SUITES = Path(__file__).parent / "suites"
# Keys of a workload entry beside its name: ``trace.record``'s settings and the types they take.
WORKLOAD_KEYS = {"model": str, "data": str, "steps": (str, int), "samples": int, "batch_size": int, "seed": int,
                 "lr": (int, float), "prune": (int, float), "seq_len": int, "image_size": int, "model_args": dict,
                 "data_args": dict, "autocast": str, "input_grad": bool}  # fmt: skip
REQUIRED = ("name", "model", "steps")
REPORTS = ("suite.csv", "suite.json")


def _suite_path(spec):
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    packaged = SUITES / f"{spec}.yaml"
    if not packaged.is_file():
        names = ", ".join(sorted(p.stem for p in SUITES.glob("*.yaml")))
        raise CliError(f"suite {spec!r}: neither a YAML file nor a packaged suite ({names})")
    return packaged


def load_suite(spec):
    """The workloads of the suite ``spec`` (a path or a packaged name): ``[(name, record settings)]``, each checked
    (keys, types, model and data names, step schedule) so that a bad entry is refused before any recording."""
    import yaml

    path = _suite_path(spec)
    try:
        suite = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise CliError(f"{path}: not a readable YAML file ({str(error).splitlines()[0]})") from None
    if not isinstance(suite, dict) or not isinstance(suite.get("workloads"), list) or not suite["workloads"]:
        raise CliError(f"{path}: a suite is a mapping with 'workloads:', a non-empty list of entries")
    workloads, names = [], set()
    for index, entry in enumerate(suite["workloads"]):
        where = f"{path}: workload {index + 1}"
        if not isinstance(entry, dict) or any(key not in entry for key in REQUIRED):
            raise CliError(f"{where}: an entry is a mapping with at least {', '.join(REQUIRED)}")
        name = entry["name"]
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or name in names:
            raise CliError(f"{where}: name {name!r} must be a unique folder name (letters, digits, _ . -)")
        names.add(name)
        settings = {key: value for key, value in entry.items() if key != "name"}
        _check_entry(f"{path}: workload {name!r}", settings)
        workloads.append((name, settings))
    return workloads


def _check_entry(where, settings):
    """A ``CliError`` naming ``where`` for a key, type, model, data set or step schedule no recording takes."""
    from dashraker.trace import RecordError
    from dashraker.trace.data import DATASETS
    from dashraker.trace.factory import is_factory
    from dashraker.trace.networks import MODELS
    from dashraker.trace.training import AUTOCAST, parse_steps

    for key, value in settings.items():
        if key not in WORKLOAD_KEYS:
            raise CliError(f"{where}: unknown key {key!r}; a workload takes name, {', '.join(WORKLOAD_KEYS)}")
        if not isinstance(value, WORKLOAD_KEYS[key]) or (isinstance(value, bool) and WORKLOAD_KEYS[key] is not bool):
            raise CliError(f"{where}: {key} must be {_type_name(WORKLOAD_KEYS[key])}, not {value!r}")
    model, data = settings["model"], settings.get("data", "digits")
    if model not in MODELS and not is_factory(model):
        raise CliError(f"{where}: unknown model {model!r}; choose one of {sorted(MODELS)} or PACKAGE.MODULE:FACTORY")
    if data.partition(":")[0] not in DATASETS and not is_factory(data):
        raise CliError(f"{where}: unknown data set {data!r}; choose one of {sorted(DATASETS)}")
    if settings.get("autocast") not in (None, *AUTOCAST):
        raise CliError(f"{where}: autocast must be one of {sorted(AUTOCAST)}, not {settings['autocast']!r}")
    try:
        settings["steps"] = parse_steps(settings["steps"])
    except RecordError as error:
        raise CliError(f"{where}: {error}") from None


def _type_name(kind):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "a string", int: "an integer", float: "a number", dict: "a mapping",
                        bool: "true or false"}[k] for k in kinds)  # fmt: skip


# Manifest field -> the record setting it holds and that setting's default (``trace.record``'s).
_RECORDED_AS = {"model": ("model", None), "data": ("data", "digits"), "model_args": ("model_args", {}),
                "data_args": ("data_args", {}), "planned_steps": ("steps", None), "samples": ("samples", 4),
                "batch_size": ("batch_size", 16), "seed": ("seed", 0), "prune": ("prune", None),
                "autocast": ("autocast", None), "image_size": ("image_size", None),
                "seq_len": ("seq_len", 64)}  # fmt: skip


def reusable(folder, settings):
    """Whether ``folder`` holds a trace recorded with ``settings`` (``trace.record``'s; the device aside)."""
    from dashraker.trace.store import MANIFEST, is_trace

    if not is_trace(folder):
        return False
    manifest = json.loads((Path(folder) / MANIFEST).read_text())
    wanted = {field: settings.get(key, default) for field, (key, default) in _RECORDED_AS.items()}
    same = all(manifest.get(field) == value for field, value in wanted.items())
    lr = settings.get("lr")
    input_grad = any(layer["has_input_grad"] for layer in manifest["layers"])
    return (same and (lr is None or manifest["optimizer"].get("lr") == lr) and manifest["steps"] == settings["steps"]
            and input_grad == settings.get("input_grad", False))


def _trace(name, settings, traces, device, progress):
    """The trace of workload ``name``: reused, or recorded on ``device``; (path, recording wall seconds or None)."""
    from dashraker.trace import RecordError
    from dashraker.trace.training import record

    folder = Path(traces) / name
    if reusable(folder, settings):
        return folder, None
    options = {"samples": _RECORDED_AS["samples"][1], "data": _RECORDED_AS["data"][1], **settings}
    start = time.perf_counter()
    try:
        path = record(out=folder, overwrite=True, device=device, progress=progress, **options)
    except RecordError as error:
        raise CliError(f"workload {name!r}: {error}") from None
    return path, time.perf_counter() - start


def _row(name, settings, trace_path, recorded_s, rows, map_s):
    """A workload's figures: its trace, and per design the whole step's speedup and energy efficiency."""
    from dashraker.mapping.runner import totals
    from dashraker.trace import open_trace

    trace = open_trace(trace_path)
    sums = totals(rows)
    row = {"workload": name, "model": trace.manifest["model"], "data": trace.manifest["data"],
           "device": trace.manifest.get("device", "cpu"), "autocast": trace.manifest.get("autocast"),
           "steps": trace.steps, "samples": trace.manifest["samples"], "layers": len(trace.layers),
           "record_s": recorded_s, "map_s": map_s}  # fmt: skip
    for design in dict.fromkeys(r["design"] for r in rows):
        total = sums[design, "all"]
        row[f"{design}_speedup"] = total["speedup"]
        row[f"{design}_energy_efficiency"] = total["energy_efficiency"]
    return row


def table(rows):
    """The per-workload table: speedup and energy efficiency (over the dense reference) of each design."""
    designs = [key[: -len("_speedup")] for key in rows[0] if key.endswith("_speedup")]
    head = f"{'workload':<16} {'model':<12} {'data':<14} {'layers':>6} {'record s':>9} {'map s':>7}" + "".join(
        f" {design[:10] + ' x':>13} {'eff':>6}" for design in designs)
    lines = [head, "-" * len(head)]
    for row in rows:
        recorded = "reused" if row["record_s"] is None else f"{row['record_s']:.1f}"
        lines.append(f"{row['workload'][:16]:<16} {row['model'][:12]:<12} {row['data'][:14]:<14} {row['layers']:>6} "
                     f"{recorded:>9} {row['map_s']:>7.1f}" + "".join(
                         f" {row[f'{d}_speedup']:>12.2f}x {row[f'{d}_energy_efficiency']:>5.2f}x" for d in designs))
    return "\n".join(lines)


def _write(folder, rows, meta):
    from dashraker.outputs import atomic_write

    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({**row, "steps": " ".join(map(str, row["steps"]))} for row in rows)
    atomic_write(folder / "suite.csv", lambda file: file.write(text.getvalue().encode()))
    document = json.dumps({**meta, "workloads": rows}, indent=1) + "\n"
    atomic_write(folder / "suite.json", lambda file: file.write(document.encode()))


def run(args):
    from dashraker.mapping.cli import design_configs, with_silicon
    from dashraker.mapping.runner import map_trace
    from dashraker.outputs import OutputFolder, check_output_folder

    from dashraker.trace import RecordError
    from dashraker.trace.training import check_device

    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    try:
        check_device(args.record_device)
    except RecordError as error:
        raise CliError(f"--record-device: {error}") from None
    workloads = load_suite(args.suite)
    configs = design_configs(args)
    traces = args.traces or Path("build/suite") / _suite_path(args.suite).stem
    check_output_folder(traces, "--traces")
    out = OutputFolder(args.out, "--out", lambda path: {p.name for p in Path(path).iterdir()} <= set(REPORTS),
                       "give a new folder or one of an earlier suite's reports")
    with out:
        configs = with_silicon(configs, args.area_cache, not args.no_progress, args.jobs, args.asic_cache)
        rows = []
        for name, settings in workloads:
            trace_path, recorded_s = _trace(name, settings, traces, args.record_device, not args.no_progress)
            start = time.perf_counter()
            try:
                mapped = map_trace(trace_path, configs, jobs=args.jobs, progress=not args.no_progress)
            except ValueError as error:
                raise CliError(f"workload {name!r}: {error}") from None
            rows.append(_row(name, settings, trace_path, recorded_s, mapped, time.perf_counter() - start))
            print(f"{name}: mapped", flush=True)
        print(table(rows))
        with out.staging() as staging:
            _write(staging, rows, {"suite": str(_suite_path(args.suite)), "traces": str(traces),
                                   "configs": [config.as_dict() for config in configs]})
    print("\nwrote " + ", ".join(str(out.path / name) for name in REPORTS))


def register(subparsers):
    from dashraker.designs import DESIGNS
    from dashraker.mapping.cli import add_config_option, add_silicon_options
    from dashraker.mapping.config import SILICON_MODELS

    packaged = ", ".join(sorted(p.stem for p in SUITES.glob("*.yaml")))
    parser = subparsers.add_parser(
        "suite", help="record or reuse a trace of every workload of a suite and map each: one row per workload",
        description="Record (or reuse, when recorded with the same settings) the trace of every workload of a suite "
        "file and map each on the designs; print and write (suite.csv, suite.json) per workload the speedup and "
        "energy efficiency of each design over the dense reference.")
    parser.add_argument("suite", help=f"suite YAML file, or a packaged suite: {packaged}")
    parser.add_argument("--out", required=True, help="folder for suite.csv and suite.json")
    parser.add_argument("--traces", type=path_argument, help="folder of the workloads' traces, reused when their settings "
                        "match (default build/suite/<suite name>)")
    parser.add_argument("--record-device", default="cpu", help="where traces are recorded: cpu or cuda[:N] "
                        "(default cpu)")
    add_config_option(parser)
    parser.add_argument("--design", action="append", help=f"design(s) to map, comma-separated or 'all' "
                        f"({', '.join(DESIGNS)}); default: the configuration's")
    parser.add_argument("--device", default="cpu", help="where the designs' cost models run: cpu or cuda[:N]")
    parser.add_argument("--jobs", type=int, help="local worker processes of the mapping (default: the mapper's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_silicon_options(parser, SILICON_MODELS)
    parser.set_defaults(func=run)
