"""Accelerator configuration files for the mapper: loading, defaults and validation with clear errors."""

import dataclasses
import importlib.resources
import math
from pathlib import Path

import yaml

__all__ = [
    "DESIGNS",
    "ConfigError",
    "MemoryConfig",
    "EnergyTable",
    "AcceleratorConfig",
    "default_config_path",
    "load_config",
    "load_energy_table",
]

DESIGNS = ("baseline", "tensordash", "fpraker")
GEOMETRY = ("tiles", "rows", "cols", "lanes")


class ConfigError(ValueError):
    """A configuration or energy-table file is wrong; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """On-chip buffers and the DRAM channel (see the memory model in ``mapping.memory``)."""

    tile_buffer_kib: float
    global_buffer_kib: float
    dram_gbps: float


@dataclasses.dataclass(frozen=True)
class EnergyTable:
    """Energy per action in pJ (``entries``) and the SRAM size/energy points of the table file."""

    name: str
    path: str
    entries: dict
    sram_points: tuple  # ((kib, pj), ...) ascending

    def sram_pj(self, kib):
        """Energy of one 64-bit access to an SRAM of ``kib`` KiB: power law between the table's points."""
        points, i = self.sram_points, 0
        while i + 2 < len(points) and kib > points[i + 1][0]:
            i += 1
        (k0, e0), (k1, e1) = points[i], points[i + 1]
        return e0 * (kib / k0) ** (math.log(e1 / e0) / math.log(k1 / k0))


@dataclasses.dataclass(frozen=True)
class AcceleratorConfig:
    """One design on one array: what the mapper needs to count cycles, traffic and energy."""

    path: str
    design: str
    operand_format: str
    rounding: str
    tiles: int
    rows: int
    cols: int
    lanes: int
    clock_mhz: float
    pattern: object  # None (the reference model's default) or the pattern text
    lookahead: int
    guard_bits: int
    zero_block_cycles: int
    memory: MemoryConfig
    energy: EnergyTable

    def with_design(self, design):
        """The same file read for another design (its section may override the geometry)."""
        return load_config(self.path, design)

    def as_dict(self):
        data = dataclasses.asdict(self)
        data["energy"] = {"name": self.energy.name, "path": self.energy.path}
        return data


def default_config_path():
    """The packaged default configuration file."""
    return Path(str(importlib.resources.files("dashraker.mapping") / "configs" / "default.yaml"))


def _read_yaml(path, what):
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} must be a YAML mapping, not {type(data).__name__}")
    return data


class _Fields:
    """Reads fields of one mapping, raising ConfigError naming the file and the dotted field."""

    def __init__(self, path, data, prefix=""):
        self.path, self.data, self.prefix = path, data, prefix

    def error(self, key, message):
        return ConfigError(f"{self.path}: field '{self.prefix}{key}': {message}")

    def section(self, key, required=False):
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "missing")
            value = {}
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, not {value!r}")
        return _Fields(self.path, value, f"{self.prefix}{key}.")

    def number(self, key, kind=float, minimum=None, default=None):
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "missing")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            raise self.error(key, f"must be {'an integer' if kind is int else 'a number'}, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, not {value!r}")
        return kind(value)

    def choice(self, key, choices, default=None):
        value = self.data.get(key, default)
        if value not in choices:
            raise self.error(key, f"must be one of {list(choices)}, not {value!r}")
        return value

    def text(self, key, default=None):
        value = self.data.get(key, default)
        if value is None:
            raise self.error(key, "missing")
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string, not {value!r}")
        return value

    def unknown(self, known):
        extra = sorted(set(self.data) - set(known))
        if extra:
            raise self.error(extra[0], f"unknown field; expected one of {sorted(known)}")


def load_energy_table(ref, base=None):
    """Load an energy table: a packaged name (``horowitz45``) or a YAML path (relative to ``base``)."""
    packaged = importlib.resources.files("dashraker.mapping") / "energy" / f"{ref}.yaml"
    if "/" not in str(ref) and not str(ref).endswith((".yaml", ".yml")) and packaged.is_file():
        path = Path(str(packaged))
    else:
        path = Path(ref) if base is None else Path(base) / ref
    fields = _Fields(path, _read_yaml(path, "energy table"))
    sources = fields.section("sources", required=True).data
    entries, points = {}, ()
    for name, raw in fields.section("entries", required=True).data.items():
        entry = _Fields(path, raw if isinstance(raw, dict) else {}, f"entries.{name}.")
        if not isinstance(raw, dict):
            raise fields.error(f"entries.{name}", "must be a mapping with pj, per, source and node")
        if entry.text("source") not in sources:
            raise entry.error("source", f"names no entry of 'sources' ({sorted(sources)})")
        entry.text("node")
        entry.text("per")
        if "points" in raw:
            rows = raw["points"]
            if not isinstance(rows, list) or len(rows) < 2:
                raise entry.error("points", "must list at least two {kib, pj} points")
            parsed = []
            for i, row in enumerate(rows):
                point = _Fields(path, row if isinstance(row, dict) else {}, f"entries.{name}.points[{i}].")
                parsed.append((point.number("kib", minimum=1e-9), point.number("pj", minimum=1e-12)))
            if [p[0] for p in parsed] != sorted({p[0] for p in parsed}):
                raise entry.error("points", "sizes must be strictly increasing")
            if name == "sram_64b":
                points = tuple(parsed)
        else:
            entries[name] = entry.number("pj", minimum=0.0)
    required = {"mul_fp32", "mul_bf16", "add_fp32", "add_int32", "mux8_bit", "scheduler_lane", "term_encode",
                "term_shift", "exponent_lane", "block_normalize", "dram_64b"}
    missing = sorted(required - set(entries))
    if missing:
        raise fields.error(f"entries.{missing[0]}", "missing")
    if not points:
        raise fields.error("entries.sram_64b", "missing (needs 'points' of {kib, pj})")
    return EnergyTable(fields.text("name"), str(path), entries, points)


def load_config(path=None, design=None):
    """Read and validate an accelerator configuration; ``design`` overrides the file's ``design``.

    A design's section (``tensordash:``, ``fpraker:``, ``baseline:``) may override the
    geometry fields (tiles, rows, cols, lanes) for that design.
    """
    path = Path(path) if path is not None else default_config_path()
    top = _Fields(path, _read_yaml(path, "accelerator configuration"))
    top.unknown({"design", "operand_format", "rounding", *GEOMETRY, "clock_mhz", *DESIGNS, "memory", "energy_table"})
    design = design if design is not None else top.data.get("design")
    if design not in DESIGNS:
        raise top.error("design", f"must be one of {list(DESIGNS)}, not {design!r}")
    sections = {name: top.section(name) for name in DESIGNS}
    sections["baseline"].unknown(GEOMETRY)
    sections["tensordash"].unknown({*GEOMETRY, "pattern", "lookahead"})
    sections["fpraker"].unknown({*GEOMETRY, "guard_bits", "zero_block_cycles"})
    own = sections[design]
    geometry = {
        key: (own.number(key, int, 1) if key in own.data else top.number(key, int, 1)) for key in GEOMETRY
    }
    fmt = top.choice("operand_format", ("bf16", "fp32"), "bf16")
    if design == "fpraker" and fmt != "bf16":
        raise top.error("operand_format", "FPRaker processes bf16 operands only (SPEC section 4)")
    td, fp = sections["tensordash"], sections["fpraker"]
    pattern = td.data.get("pattern")
    if pattern is not None and not isinstance(pattern, (str, list)):
        raise td.error("pattern", f"must be the pattern text or a list of [step, lane] offsets, not {pattern!r}")
    memory = top.section("memory", required=True)
    memory.unknown({"tile_buffer_kib", "global_buffer_kib", "dram_gbps"})
    return AcceleratorConfig(
        path=str(path),
        design=design,
        operand_format=fmt,
        rounding=top.choice("rounding", ("nearest", "truncate"), "nearest"),
        **geometry,
        clock_mhz=top.number("clock_mhz", minimum=1e-6),
        pattern=pattern,
        lookahead=td.number("lookahead", int, 0, default=2),
        guard_bits=fp.number("guard_bits", int, 0, default=3),
        zero_block_cycles=fp.number("zero_block_cycles", int, 0, default=1),
        memory=MemoryConfig(
            tile_buffer_kib=memory.number("tile_buffer_kib", minimum=1e-6),
            global_buffer_kib=memory.number("global_buffer_kib", minimum=1e-6),
            dram_gbps=memory.number("dram_gbps", minimum=1e-9),
        ),
        energy=load_energy_table(top.text("energy_table"), path.parent),
    )
