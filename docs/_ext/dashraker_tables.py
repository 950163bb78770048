"""Sphinx extension: the tables the code already knows, written as Markdown includes when the docs are built.

Each design's parameters (flag, configuration key, default, range), every subcommand's
flags, the mapper configuration's keys and the energy table's entries with their sources
are read from the registry (``dashraker.designs``), the command-line parser
(``dashraker.cli.build_parser``), the packaged configuration and the packaged energy
table, and written under ``docs/_generated/`` before Sphinx reads the pages, which
include them. So the documented tables cannot drift from the code. The API reference's
module list (``_generated/api-modules.md``) is made the same way, from the packages.
"""

import argparse
import importlib
import pkgutil
from pathlib import Path

__all__ = ["setup", "write_all", "API_PACKAGES"]

# The packages the API reference documents, and modules left out with the reason.
API_PACKAGES = ("dashraker", "dashraker.designs", "dashraker.hw", "dashraker.models", "dashraker.sim",
                "dashraker.trace", "dashraker.mapping", "dashraker.asic", "dashraker.fpga")
API_SKIP = {
    "dashraker.__main__": "runs the command line when imported",
    "dashraker.models.kernels.fpraker_cuda": "a Triton GPU kernel; Triton is not installed without a GPU",
}


def _cell(value):
    """A value as a Markdown table cell: code, with the table's bars escaped."""
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return f"`{text}`" if text else ""


def _text(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def design_parameters(design):
    """The design's parameters: Python name, flag, configuration key, default, allowed values, meaning."""
    rows = [[_cell(p.name), _cell(p.option), _cell(p.key), _cell(p.default), _text(p.describe()), _text(p.help)]
            for p in design.parameters]
    return _table(["parameter", "flag", "YAML key", "default", "allowed", "meaning"], rows)


def designs_table(designs):
    rows = [[_cell(name), _text(d.summary),
             ", ".join(d.formats), "yes" if d.reference else ""] for name, d in designs.items()]
    return _table(["design", "what", "operand formats", "reference"], rows)


def _actions(parser):
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _option_rows(parser, skip=()):
    formatter = parser._get_formatter()
    rows = []
    for action in _actions(parser):
        if action.dest in skip:
            continue
        names = ", ".join(action.option_strings) or action.metavar or action.dest
        if action.option_strings and action.nargs != 0:
            names += " " + (action.metavar if isinstance(action.metavar, str) else action.dest.upper())
        default = "" if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings \
            else _cell(action.default)
        required = "required" if action.required and action.option_strings else ""
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append([_cell(names), default or required, _text(help_text)])
    return rows


def command_options(command_parser, command, designs):
    """Markdown for one subcommand: its flags, and those of its actions (``trace record``) or designs."""
    parameter_names = {p.name for d in designs.values() for p in d.parameters}
    out = []
    header = ["flag", "default", "meaning"]
    rows = _option_rows(command_parser)
    if rows:
        out += [f"`dashraker {command}`:\n", _table(header, rows)]
    sub = _subparsers(command_parser)
    if sub is not None:
        choices = sub.choices
        if set(designs) <= set(choices):
            out += [f"`dashraker {command} DESIGN` (DESIGN: {', '.join(f'`{n}`' for n in designs)}), besides the "
                    "design's parameters (each design's page lists them):\n",
                    _table(header, _option_rows(choices[next(iter(designs))], skip=parameter_names))]
        for name, action_parser in choices.items():
            if name not in designs:
                out.append(command_options(action_parser, f"{command} {name}", designs))
    return "\n".join(out)


def _libraries():
    from dashraker.asic.libraries import LIBRARIES

    return LIBRARIES


def config_keys(defaults, designs):
    """The mapper configuration's top-level keys with the packaged default and what is allowed."""
    from dashraker.mapping import config

    allowed = {
        "preset": ", ".join(config.PRESETS) + " (the packaged configuration this file builds on)",
        "design": ", ".join(designs), "dtype": "the design's operand formats",
        "rounding": "nearest, truncate", "tiles": "an integer >= 1", "rows": "an integer >= 1",
        "cols": "an integer >= 1", "lanes": "an integer >= 1",
        "clock_mhz": "a number > 0, or " + ", ".join(key for key in config.CLOCK_SOURCES if key != "configured"),
        "silicon": ", ".join(config.SILICON_MODELS), "library": ", ".join(_libraries()),
        "dataflow": ", ".join(config.DATAFLOWS), "compare": ", ".join(config.COMPARISONS),
        "area": ", ".join(config.AREA_MEASURES), "energy_table": "a packaged table name or a YAML path",
        "memory": "a mapping (below)",
    }
    rows = []
    for key in (*defaults, *(key for key in allowed if key not in defaults)):
        if key in designs:
            continue
        value = defaults.get(key, "each design's default (its parameter table, Designs)")
        shown = "" if isinstance(value, dict) else _cell(value) if key in defaults else _text(value)
        rows.append([_cell(key), shown, _text(allowed.get(key, ""))])
    text = _table(["key", "packaged default", "allowed"], rows)
    memory = [[_cell(f"memory.{k}"), _cell(v), "a number > 0"] for k, v in defaults.get("memory", {}).items()]
    text += "\n" + _table(["key", "packaged default", "allowed"], memory)
    section_rows = []
    for name, design in designs.items():
        for p in design.parameters:
            if p.key == "dtype":
                continue
            given = defaults.get(name, {}).get(p.key, defaults.get(p.key) if p.key in config.GEOMETRY else None)
            section_rows.append([_cell(f"{name}.{p.key}"), _cell(given if given is not None else p.default),
                                 _text(p.describe()), _text(p.help)])
    text += "\n" + _table(["key", "default", "allowed", "meaning"], section_rows)
    return text


def energy_table(table_path):
    """The packaged energy table: every entry with its energy, what it is per, its source, node and derivation."""
    import yaml

    data = yaml.safe_load(Path(table_path).read_text())
    rows = []
    for name, entry in data["entries"].items():
        if "points" in entry:
            pj = "; ".join(f"{p['kib']} KiB: {p['pj']}" for p in entry["points"])
        else:
            pj = entry["pj"]
        rows.append([_cell(name), _text(pj), _text(entry["per"]), _cell(entry["source"]), _text(entry["node"]),
                     _text(entry.get("derivation", ""))])
    text = f"Table `{data['name']}` ({data['node']}):\n\n"
    text += _table(["entry", "pJ", "per", "source", "node", "derivation"], rows)
    text += "\nSources:\n\n" + "".join(f"- `{key}`: {_text(value)}\n" for key, value in data["sources"].items())
    text += "\nRules for derived entries:\n\n" + "".join(f"- `{key}`: {_text(value)}\n"
                                                         for key, value in data.get("rules", {}).items())
    return text


def api_modules():
    """An ``automodule`` directive per module of the documented packages (walked, so a new module joins)."""
    names = []
    for package in API_PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        if package == "dashraker":
            continue
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            names.append(info.name)
    text = []
    skipped = []
    for name in sorted(set(names)):
        if name in API_SKIP:
            skipped.append(f"- `{name}`: {API_SKIP[name]}\n")
            continue
        text.append(f"## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n```\n")
    return "\n".join(text) + ("\nNot documented here:\n\n" + "".join(skipped) if skipped else "")


def write_all(out):
    """Write every generated include into ``out``; files are rewritten only when their text changes."""
    import yaml

    from dashraker.cli import build_parser
    from dashraker.designs import DESIGNS
    from dashraker.mapping.config import default_config_path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"designs.md": designs_table(DESIGNS)}
    for name, design in DESIGNS.items():
        files[f"params-{name}.md"] = design_parameters(design)
    parser = build_parser()
    for command, command_parser in _subparsers(parser).choices.items():
        files[f"cli-{command}.md"] = command_options(command_parser, command, DESIGNS)
    files["commands.md"] = _table(["command", "what"], [[_cell(f"dashraker {a.dest}"), _text(a.help)]
                                                        for a in _subparsers(parser)._choices_actions])
    defaults = yaml.safe_load(default_config_path().read_text())
    files["config-keys.md"] = config_keys(defaults, DESIGNS)
    energy = default_config_path().parent.parent / "energy" / f"{defaults['energy_table']}.yaml"
    files["energy-table.md"] = energy_table(energy)
    files["api-modules.md"] = api_modules()
    for name, text in files.items():
        path = out / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return sorted(files)


def _generate(app):
    write_all(Path(app.srcdir) / "_generated")


def setup(app):
    app.connect("builder-inited", _generate)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
