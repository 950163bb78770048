"""Accelerator configuration files for the mapper: loading, defaults and validation with clear errors."""

import dataclasses
import importlib.resources
import math
from pathlib import Path

import yaml

from dashraker.asic import TARGET_NS
from dashraker.asic.libraries import LIBRARIES
from dashraker.mapping.components import required_entries

__all__ = [
    "ConfigError",
    "MemoryConfig",
    "EnergyTable",
    "AcceleratorConfig",
    "AREA_SCOPES",
    "AREA_ESTIMATES",
    "COMPRESSIONS",
    "SILICON_MODELS",
    "CLOCK_SOURCES",
    "default_config_path",
    "PRESETS",
    "config_path",
    "reference_on",
    "load_config",
    "apply_overrides",
    "file_data",
    "field_value",
    "load_energy_table",
    "check_device",
]

GEOMETRY = ("tiles", "rows", "cols", "lanes")  # the array; a design's section may override them
# pass formation (mapping.dataflow): SPEC section 5's order, or that of the TensorDash authors' DNNsim
DATAFLOWS = ("default", "dnnsim")
COMPARISONS = ("lanes", "iso-area")  # equal lanes (the configured tiles), or as many tiles as fit the reference's area
AREA_MEASURES = ("asic", "fpga")
# what the area counts (SPEC section 7b): the tiles' logic, or the tiles, their buffers and the global buffer
AREA_SCOPES = ("compute", "chip")
# the tile's ASIC area (SPEC section 7b, fpga.area.ESTIMATES): its queues as register files, or as generated
AREA_ESTIMATES = ("asic", "generated")
COMPRESSIONS = ("none", "zvc")  # memory traffic dense, or zero-value compressed (SPEC section 7)
# what a tile's area and leakage are (mapping.silicon): its CMOS transistors, or its cells on a standard-cell library
SILICON_MODELS = ("transistors", "liberty")
# where the clock a design runs at comes from (``clock_mhz``), as reports say it: the file's number; the design's own
# tile's static timing; the slowest of the run's tiles' (mapping.silicon.clocked)
CLOCK_SOURCES = {"configured": "configured", "sta": "its tile's static timing",
                 "common": "the slowest static timing of the run's tiles"}
# the packaged configurations a ``--config`` or a file's ``preset`` may name (mapping/configs/NAME.yaml, each figure
# with where it comes from): the default, and the seed papers' own
PRESETS = ("default", "tensordash-paper", "fpraker-paper")
# the table's silicon figures
SILICON = ("transistor_um2", "leakage_nw", "sram_bit_cell_um2", "sram_array_efficiency", "register_file_bit_cell_um2",
           "register_file_min_bits")


class ConfigError(ValueError):
    """A configuration or energy-table file is wrong; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """On-chip buffers and the DRAM channel (see the memory model in ``mapping.memory``)."""

    tile_buffer_kib: float
    global_buffer_kib: float
    dram_gbps: float
    compression: str = COMPRESSIONS[0]  # "zvc": buffers and DRAM hold a bit mask per group and the non-zeros

    def sram_bits(self, tiles):
        """Bits of on-chip SRAM of ``tiles`` tiles: two tile buffers each and the global buffer."""
        return round((2 * tiles * self.tile_buffer_kib + self.global_buffer_kib) * 8192)


@dataclasses.dataclass(frozen=True)
class EnergyTable:
    """Energy per action in pJ (``entries``), the SRAM size/energy points and the ``silicon`` figures of the table
    file (``SILICON``: area and leakage of a transistor, SRAM bit cell area and array efficiency, register-file
    bit cell area and the smallest memory held in a register file)."""

    name: str
    path: str
    entries: dict
    sram_points: tuple  # ((kib, pj), ...) ascending
    silicon: dict = dataclasses.field(default_factory=dict)

    @property
    def sram_bit_transistors(self):
        """The area of one SRAM bit, with its share of the periphery, in transistors of logic."""
        s = self.silicon
        return s["sram_bit_cell_um2"] / s["sram_array_efficiency"] / s["transistor_um2"]

    @property
    def register_file_bit_transistors(self):
        """The area of one register-file bit, with its share of the periphery (the SRAM's array efficiency), in
        transistors of logic."""
        s = self.silicon
        return s["register_file_bit_cell_um2"] / s["sram_array_efficiency"] / s["transistor_um2"]

    def sram_pj(self, kib):
        """Energy of one 64-bit access to an SRAM of ``kib`` KiB: power law between the table's points."""
        points, i = self.sram_points, 0
        while i + 2 < len(points) and kib > points[i + 1][0]:
            i += 1
        (k0, e0), (k1, e1) = points[i], points[i + 1]
        return e0 * (kib / k0) ** (math.log(e1 / e0) / math.log(k1 / k0))


@dataclasses.dataclass(frozen=True)
class AcceleratorConfig:
    """One design on one array: what the mapper needs to count cycles, traffic and energy.

    ``design`` is the descriptor (``dashraker.designs``) and ``params`` its generator
    parameters, checked by it: the tile's ``rows``, ``cols``, ``fmt``, ``lanes`` and the
    design's own.

    ``clock_mhz`` is the clock the design runs at: the file's number (``clock_source``
    "configured"), or, for "sta" and "common", None until ``mapping.silicon.resolve_all`` sets it
    from the tiles' static timing.
    """

    path: str
    design: object
    params: dict
    rounding: str
    tiles: int
    clock_mhz: float
    memory: MemoryConfig
    energy: EnergyTable
    compare: str = COMPARISONS[0]
    area: str = AREA_MEASURES[0]
    dataflow: str = "default"  # mapping.dataflow.DATAFLOWS: pass formation (SPEC section 5, or DNNsim's)
    device: str = "cpu"  # where the cost models run: "cpu" (fused kernels) or a torch GPU device, e.g. "cuda"
    area_scope: str = AREA_SCOPES[0]  # the silicon that area and leakage count: tiles, or tiles and SRAM
    area_estimate: str = AREA_ESTIMATES[0]  # the tiles' area: queues as register files, or as generated
    clock_source: str = "configured"  # CLOCK_SOURCES: the file's number, or the tiles' static timing
    silicon: str = SILICON_MODELS[0]  # a tile's area and leakage: its CMOS transistors, or its library cells
    library: str = next(iter(LIBRARIES))  # the standard-cell library of ``silicon: liberty`` and of static timing
    # ``mapping.silicon.Tile`` of this design's tile and of the reference design's on the same array (area, leakage,
    # clock its timing allows); None until resolved (then the mapper charges no leakage and says so).
    tile: object = None
    reference_tile: object = None
    configured_params: dict = None  # ``params`` as the file gave them, before the dataflow preset's
    # the reference (dense) design's own parameters (its section's: SPEC section 7b), which every design is compared
    # with on its own array (``mapping.silicon.reference_params``); None: the registry's defaults
    reference: dict = None
    preset: str = PRESETS[0]  # the packaged configuration (``PRESETS``) the file is, or builds on

    def __post_init__(self):
        """The silicon model, clock source and library are checked; a dataflow preset fixes some design parameters
        whatever the file says (``Design.dataflow_params``:
        DNNsim's always schedules TensorDash greedily); ``dataclasses.replace`` with another dataflow applies
        that one's to the file's parameters."""
        if self.silicon not in SILICON_MODELS:
            raise ValueError(f"silicon must be one of {list(SILICON_MODELS)}, not {self.silicon!r}")
        if self.clock_source not in CLOCK_SOURCES:
            raise ValueError(f"clock source must be one of {list(CLOCK_SOURCES)}, not {self.clock_source!r}")
        if self.library not in LIBRARIES:
            raise ValueError(f"library must be one of {list(LIBRARIES)}, not {self.library!r}")
        configured = self.params if self.configured_params is None else self.configured_params
        object.__setattr__(self, "configured_params", configured)
        object.__setattr__(self, "params", {**configured, **self.design.dataflow_params.get(self.dataflow, {})})

    rows = property(lambda self: self.params["rows"])
    cols = property(lambda self: self.params["cols"])
    lanes = property(lambda self: self.params["lanes"])
    fmt = property(lambda self: self.params["fmt"])

    @property
    def uses_library(self):
        """Whether the tiles are mapped onto ``library``: for their area and leakage, or for their clocks."""
        return self.silicon == "liberty" or self.clock_source != "configured"

    @property
    def target_ns(self):
        """The clock period the tiles are mapped for: the configured clock's, or ``asic.TARGET_NS`` where the clock
        is the timing's."""
        return 1e3 / self.clock_mhz if self.clock_source == "configured" else TARGET_NS

    @property
    def reference_clock_mhz(self):
        """The clock of the reference tile on this array (the dense comparison's): its own timing's under "sta",
        else this design's; None until resolved."""
        if self.clock_source == "sta":
            return None if self.reference_tile is None else self.reference_tile.fmax_mhz
        return self.clock_mhz

    def as_dict(self):
        tiles = {key: None if getattr(self, key) is None else dataclasses.asdict(getattr(self, key))
                 for key in ("tile", "reference_tile")}
        return {"path": self.path, "preset": self.preset, "design": self.design.name, **self.params,
                "reference": self.reference or {}, "rounding": self.rounding,
                "tiles": self.tiles, "clock_mhz": self.clock_mhz, "clock_source": self.clock_source,
                "reference_clock_mhz": self.reference_clock_mhz,
                "memory": dataclasses.asdict(self.memory),
                "energy": {"name": self.energy.name, "path": self.energy.path}, "compare": self.compare,
                "area": self.area, "dataflow": self.dataflow, "area_scope": self.area_scope,
                "area_estimate": self.area_estimate, "silicon": self.silicon,
                "library": self.library if self.uses_library else None,
                "target_ns": self.target_ns if self.uses_library else None, **tiles}


def default_config_path(preset=PRESETS[0]):
    """The packaged configuration file of ``preset`` (default: the default one)."""
    return Path(str(importlib.resources.files("dashraker.mapping") / "configs" / f"{preset}.yaml"))


def config_path(ref):
    """The file of ``--config REF``: a packaged preset's where ``ref`` is a bare name of ``PRESETS`` (no folder, no
    .yaml), else the path; None: the default. A bare name that is neither a file nor a preset is a ConfigError."""
    if ref is None:
        return default_config_path()
    path = Path(ref)
    if len(path.parts) == 1 and path.suffix not in (".yaml", ".yml"):
        if path.name in PRESETS:
            return default_config_path(path.name)
        if not path.is_file():
            raise ConfigError(f"{ref}: no such configuration file nor preset; presets: {', '.join(PRESETS)}")
    return path


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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or (kind is int and value != int(value)):
            raise self.error(key, f"must be {'an integer' if kind is int else 'a number'}, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, not {value!r}")
        return kind(value)

    def choice(self, key, choices, default=None):
        value = self.data.get(key, default)
        if value not in choices:
            raise self.error(key, f"must be one of {list(choices)}, not {value!r}")
        return value

    def clock(self, key):
        """(MHz, source) of a clock: a positive number, or one of the sources the tiles' timing gives."""
        value = self.data.get(key)
        timed = [source for source in CLOCK_SOURCES if source != "configured"]
        if value in timed:
            return None, value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise self.error(key, f"must be a positive number (MHz) or one of {timed}, not {value!r}")
        return float(value), "configured"

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


# Energy-table entries renamed: old name -> new name (a table of one's own that still uses the old one is refused).
RENAMED_ENTRIES = {"block_normalize": "step_accumulate"}


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
    for old, new in RENAMED_ENTRIES.items():
        if old in fields.section("entries").data:
            raise fields.error(f"entries.{old}", f"renamed '{new}': rename the entry")
    missing = sorted(required_entries() - set(entries))
    if missing:
        raise fields.error(f"entries.{missing[0]}", "missing")
    if not points:
        raise fields.error("entries.sram_64b", "missing (needs 'points' of {kib, pj})")
    silicon = fields.section("silicon", required=True)
    silicon.unknown(SILICON)
    figures = {}
    for name in SILICON:
        entry = silicon.section(name, required=True)
        if entry.text("source") not in sources:
            raise entry.error("source", f"names no entry of 'sources' ({sorted(sources)})")
        entry.text("node")
        entry.text("per")
        figures[name] = entry.number("value", int if name == "register_file_min_bits" else float, minimum=1e-12)
    if figures["sram_array_efficiency"] > 1:
        raise silicon.error("sram_array_efficiency.value", f"must be at most 1, not {figures['sram_array_efficiency']}")
    return EnergyTable(fields.text("name"), str(path), entries, points, figures)


def _design_params(design, top, section):
    """The design's parameters from the file: geometry from the top level or the design's section, the operand
    format from the top level, the design's own from its section; each checked by the descriptor."""
    values = {}
    for parameter in design.parameters:
        fields = section if parameter.key in section.data else top
        if fields.data.get(parameter.key) is not None and (fields is section or parameter.key in {*GEOMETRY, "dtype"}):
            values[parameter.name] = _checked(fields, parameter)
    try:
        return design.params(**values)
    except ValueError as error:
        raise top.error(design.name, str(error)) from None


def _checked(fields, parameter):
    """``parameter``'s value in ``fields``, checked by the descriptor; a refusal names the field."""
    try:
        return parameter.check(fields.data[parameter.key])
    except ValueError as error:
        raise fields.error(parameter.key, str(error)) from None


def _merged(defaults, given):
    """``given`` over ``defaults``, mapping by mapping: a file states only what differs from the packaged one."""
    merged = dict(defaults)
    for key, value in given.items():
        both = isinstance(value, dict) and isinstance(defaults.get(key), dict)
        merged[key] = _merged(defaults[key], value) if both else value
    return merged


def check_device(device):
    """``device`` as the cost models take it: "cpu", or a CUDA GPU that PyTorch reaches ("cuda", "cuda:1")."""
    if device == "cpu":
        return "cpu"  # without PyTorch's import: the CPU cost models run without it
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {device!r}: not a device; use cpu or cuda[:N]") from None
    if parsed.type == "cpu":
        return "cpu"
    if parsed.type != "cuda":
        raise ConfigError(f"device {device!r}: the cost models run on cpu or cuda[:N] only")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {device!r}: PyTorch sees no CUDA GPU on this machine")
    if (parsed.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return str(parsed)


def load_config(path=None, design=None, device="cpu"):
    """Read and validate an accelerator configuration; ``design`` (a name) overrides the file's ``design``.

    ``device`` (see ``check_device``) is where the mapper runs the designs' cost models;
    it changes the speed of a mapping, never its figures.

    The file is merged over the packaged default (``default_config_path``), section by
    section, so it need only give the fields it changes; errors name the file and the field.

    A design's section (named as the design) may override the geometry fields (tiles,
    rows, cols, lanes) and sets the design's own parameters, by their command-line
    names (``guard_bits`` for ``--guard-bits``); ``dtype`` is the operand format.

    ``path`` may name a packaged preset (``config_path``); a file's ``preset`` field merges it over that preset
    instead of the default (which the preset itself is merged over).
    """
    path = config_path(path)
    defaults = _read_yaml(default_config_path(), "accelerator configuration")
    given = _read_yaml(path, "accelerator configuration")
    packaged = path.resolve().parent == default_config_path().resolve().parent and path.stem in PRESETS
    preset = given.get("preset", path.stem if packaged else PRESETS[0])
    if preset not in PRESETS or packaged and "preset" in given:
        raise _Fields(path, given).error("preset", f"must be one of {list(PRESETS)}, not {preset!r}" if not packaged
                                         else "a packaged preset builds on the default alone")
    if not packaged and preset != PRESETS[0]:
        defaults = _merged(defaults, _read_yaml(default_config_path(preset), "accelerator configuration"))
    return _parse(path, {**_merged(defaults, given), "preset": preset}, design, device, given.keys())


def apply_overrides(config, overrides):
    """``config`` with ``overrides`` (dotted field -> value, as the file would spell them: ``memory.dram_gbps``,
    ``tensordash.lookahead``, ``clock_mhz``, ``energy_table``) applied through ``load_config``'s checks:
    an unknown field or a value its check refuses is the same ``ConfigError``, naming the field.

    The configuration is written back as a file holding its own values (the geometry and format at the top level,
    the design's own parameters in its section), the overrides set in it, and that read again: a top-level
    ``lanes`` gives the design that many lanes, a design's section (``fpraker.lanes``) that design alone. The tiles'
    silicon is not carried over (``mapping.silicon.resolve_all`` measures the new configuration's); an energy table
    named by a relative path is read relative to the working folder."""
    data = file_data(config)
    if "design" in overrides:
        raise ConfigError(f"{config.path}: field 'design': load the other design's configuration (load_config's "
                          "design) rather than override it: its section holds its own parameters")
    for key, value in overrides.items():
        *sections, field = key.split(".")
        target = data
        for name in sections:
            if not isinstance(target.get(name), dict):
                if name in target:
                    raise ConfigError(f"{config.path}: field {key!r}: {name!r} is not a section")
                target[name] = {}
            target = target[name]
        if key == "energy_table" and not Path(str(value)).is_absolute() and ("/" in str(value)
                                                                             or str(value).endswith((".yaml", ".yml"))):
            value = str(Path(value).resolve())
        target[field] = value
    changed = _parse(Path(config.path), data, None, config.device, data.keys())
    return changed if "energy_table" in overrides else dataclasses.replace(changed, energy=config.energy)


def file_data(config):
    """The configuration file that ``_parse`` reads back as ``config`` (its silicon, device and path apart)."""
    from dashraker.designs import reference

    packaged = Path(str(importlib.resources.files("dashraker.mapping") / "energy"))
    table = Path(config.energy.path).resolve()
    own = {p.name: p.key for p in config.design.parameters if p.key not in {*GEOMETRY, "dtype"}}
    ref = reference()
    keys = {p.name: p.key for p in ref.parameters}
    return {
        "preset": config.preset,
        ref.name: {keys[name]: value for name, value in (config.reference or {}).items()},
        "design": config.design.name, "dtype": config.configured_params["fmt"], "rounding": config.rounding,
        "tiles": config.tiles, **{key: config.configured_params[key] for key in GEOMETRY if key != "tiles"},
        "clock_mhz": config.clock_mhz if config.clock_source == "configured" else config.clock_source,
        config.design.name: {key: config.configured_params[name] for name, key in own.items()},
        "memory": dataclasses.asdict(config.memory),
        "energy_table": table.stem if table.parent == packaged.resolve() else str(table),
        **{key: getattr(config, key) for key in ("compare", "area", "dataflow", "area_scope", "area_estimate",
                                                 "silicon", "library")},
    }


def field_value(config, key):
    """The value of the dotted field ``key`` in ``config`` as its file would spell it (``file_data``); None where it
    has no such field."""
    value = file_data(config)
    for name in key.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _reference(top, sections, params):
    """The reference design's own parameters from its section (SPEC section 7b), checked on the array and format of
    the mapped design's ``params`` (``mapping.silicon.reference_params``) with the registry's checks."""
    from dashraker.designs import reference

    ref, section = reference(), sections[reference().name]
    own = {p.name: p for p in ref.parameters if p.key not in {*GEOMETRY, "dtype"}}
    values = {}
    for name, parameter in own.items():
        if section.data.get(parameter.key) is not None:
            values[name] = _checked(section, parameter)
    try:
        full = reference_on(params, values)
    except ValueError as error:
        raise top.error(ref.name, f"the reference on this array: {error}") from None
    return {name: full[name] for name in own}


def reference_on(params, own):
    """The reference design's parameters on the array and format of a design's ``params``, its own ``own`` (name ->
    value; the rest its defaults), checked by the registry (``ValueError``)."""
    from dashraker.designs import reference

    ref = reference()
    names = {parameter.name for parameter in ref.parameters}
    return ref.params(**{key: params[key] for key in ("rows", "cols", "lanes", "fmt") if key in names}, **(own or {}))


def _parse(path, data, design, device, given):
    """The configuration of the file ``path`` whose (merged) mapping is ``data``; ``design`` overrides its own. The
    sections of the designs in ``given`` (the fields the file itself gives) are checked even where not mapped."""
    from dashraker.designs import DESIGNS

    top = _Fields(path, data)
    if "operand_format" in top.data:
        raise top.error("operand_format", "renamed to 'dtype'")
    top.unknown({"preset", "design", "dtype", "rounding", *GEOMETRY, "clock_mhz", *DESIGNS, "memory", "energy_table",
                 "compare", "area", "dataflow", "area_scope", "area_estimate", "silicon", "library"})
    name = design if design is not None else top.data.get("design")
    if name not in DESIGNS:
        raise top.error("design", f"must be one of {list(DESIGNS)}, not {name!r}")
    sections = {key: top.section(key) for key in DESIGNS}
    for key, section in sections.items():
        own = {parameter.key for parameter in DESIGNS[key].parameters} - {"dtype"}
        section.unknown({*GEOMETRY, *own})
    chosen, section = DESIGNS[name], sections[name]
    # a design not mapped now: its section's values still checked, at the file's geometry (its operand format is the
    # mapped design's: a format another design lacks is no error of this one's section)
    unformatted = _Fields(path, {key: value for key, value in top.data.items() if key != "dtype"})
    for key in sorted(DESIGNS.keys() & given - {name}):
        _design_params(DESIGNS[key], unformatted, sections[key])
    geometry = {key: (section if key in section.data else top).number(key, int, 1)
                for key in GEOMETRY if key in section.data or key in top.data}
    if "tiles" not in geometry:
        raise top.error("tiles", "missing")
    memory = top.section("memory", required=True)
    memory.unknown({"tile_buffer_kib", "global_buffer_kib", "dram_gbps", "compression"})
    clock_mhz, clock_source = top.clock("clock_mhz")
    params = _design_params(chosen, top, section)
    return AcceleratorConfig(
        path=str(path),
        preset=top.choice("preset", PRESETS, PRESETS[0]),
        design=chosen,
        params=params,
        reference=_reference(top, sections, params),
        rounding=top.choice("rounding", ("nearest", "truncate"), "nearest"),
        tiles=geometry["tiles"],
        clock_mhz=clock_mhz,
        clock_source=clock_source,
        memory=MemoryConfig(
            tile_buffer_kib=memory.number("tile_buffer_kib", minimum=1e-6),
            global_buffer_kib=memory.number("global_buffer_kib", minimum=1e-6),
            dram_gbps=memory.number("dram_gbps", minimum=1e-9),
            compression=memory.choice("compression", COMPRESSIONS, COMPRESSIONS[0]),
        ),
        energy=load_energy_table(top.text("energy_table"), path.parent),
        compare=top.choice("compare", COMPARISONS, COMPARISONS[0]),
        area=top.choice("area", AREA_MEASURES, AREA_MEASURES[0]),
        dataflow=top.choice("dataflow", DATAFLOWS, DATAFLOWS[0]),
        device=check_device(device),
        area_scope=top.choice("area_scope", AREA_SCOPES, AREA_SCOPES[0]),
        area_estimate=top.choice("area_estimate", AREA_ESTIMATES, AREA_ESTIMATES[0]),
        silicon=top.choice("silicon", SILICON_MODELS, SILICON_MODELS[0]),
        library=top.choice("library", LIBRARIES, next(iter(LIBRARIES))),
    )
