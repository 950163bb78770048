"""The silicon a configuration has: its tiles and, at chip scope, its SRAM; their area, leakage and the clock a
tile's timing allows (SPEC sections 7, 7b, 7c).

A tile is measured under the configuration's ``silicon`` model:

* ``transistors``: its own RTL's CMOS transistors (``dashraker area``: Yosys's generic synthesis), under the
  configuration's ``area_estimate``: ``asic`` holds each memory of at least the table's ``register_file_min_bits`` in
  a register file of the table's per-bit area (``fpga.area.asic_estimate``), ``generated`` takes the RTL as it is.
  It leaks the energy table's static power per transistor.
* ``liberty``: its cells on the configuration's standard-cell ``library`` (``asic.tile.characterise``, mapped for
  ``AcceleratorConfig.target_ns``), in um2, leaking the cells' Liberty leakage. Under ``area_estimate: asic`` the same
  memories are register files (``asic.tile.register_files``): their cells' area and leakage go; the library has no
  register-file cells, so the register files leak per area at the table's figure for logic (``leakage_nw`` over
  ``transistor_um2``), as the SRAM does.

SRAM (each tile's two buffers and the global buffer) has the table's area per bit, a bit cell over the array
efficiency (its periphery): in um2, or, beside transistors, in transistors of logic of the same area. It leaks per
area as the table's logic does under either model. Leakage energy is this silicon's static power times an
operation's run time.

A tile is timed (OpenSTA on its library cells, ``timing.worst``) where its clock is the timing's (``clock_mhz: sta``
or ``common``, ``clocked``), under either model.

Each tile also has its flip-flops (the same synthesis's count; under ``area_estimate: asic`` less those of the memories
held in register files), which the clock drives every cycle: ``clock_pj`` charges them the table's ``flip_flop_clock``
per cycle of an operation's run time, no clock gating (SPEC section 7).
"""

import dataclasses
import os

__all__ = ["UNITS", "SiliconError", "Tile", "estimates", "tile_estimate", "transistor_tile", "liberty_tile",
           "measure", "sram_transistors", "sram_area", "chip_parts", "silicon_area", "leakage_nw", "leakage_pj", "clock_pj",
           "reference_params", "check_tools", "unmeasured", "clocked", "resolve_all"]

UNITS = {"transistors": "CMOS transistors", "liberty": "um2"}  # a tile's area under each silicon model


class SiliconError(Exception):
    """A tile's silicon cannot be had (synthesis, library, OpenSTA, timing): one line saying why."""


@dataclasses.dataclass(frozen=True)
class Tile:
    """One tile as the configuration's silicon model measures it: its ``area`` (``UNITS``), its static power
    (``leakage_nw``), its clocked ``flip_flops`` and, where it was timed, the clock its worst register-to-register
    path allows (``fmax_mhz``) and that path (``path``: its start and end registers in the design's names)."""

    area: float
    leakage_nw: float
    flip_flops: float
    fmax_mhz: float = None
    path: str = None

    def __post_init__(self):
        if not self.area > 0:
            raise ValueError(f"a tile's area must be positive, not {self.area!r}")
        if not self.leakage_nw >= 0:
            raise ValueError(f"a tile's leakage must be at least 0 nW, not {self.leakage_nw!r}")
        if not self.flip_flops >= 0:
            raise ValueError(f"a tile's flip-flops must be at least 0, not {self.flip_flops!r}")
        if self.fmax_mhz is not None and not self.fmax_mhz > 0:
            raise ValueError(f"a tile's clock must be positive, not {self.fmax_mhz!r}")


def estimates(record, table):
    """Both area estimates of a ``dashraker area`` record with the energy ``table``'s register files:
    ``{"generated": {...}, "asic": fpga.area.asic_estimate(...)}``, each with ``transistors`` and ``gates``."""
    from dashraker.fpga.area import asic_estimate

    return {"asic": asic_estimate(record, table.register_file_bit_transistors,
                                  table.silicon["register_file_min_bits"]),
            "generated": {key: record[key] for key in ("transistors", "gates", "flip_flops")}}


def tile_estimate(config, design, params, area_root="build/area", progress=True):
    """``design``'s tile of ``params`` under ``config.area_estimate`` (``estimates``' figures: its ``transistors`` and
    ``flip_flops``; cached ``dashraker area`` figures, synthesised if missing); raises ``fpga.area.AreaError``."""
    from dashraker.fpga.area import design_area

    return estimates(design_area(design, params, area_root, progress), config.energy)[config.area_estimate]


def _logic_nw_per_um2(config):
    """The table's static power per um2 of logic: what SRAM and register files leak per area."""
    return config.energy.silicon["leakage_nw"] / config.energy.silicon["transistor_um2"]


def transistor_tile(config, transistors, flip_flops, timed=None):
    """The ``Tile`` of ``transistors`` of logic and ``flip_flops``, leaking the table's static power per transistor;
    ``timed``: the tile's ``asic.tile.characterise`` record, for its clock."""
    return Tile(transistors, transistors * config.energy.silicon["leakage_nw"], flip_flops, *_timing(timed))


def liberty_tile(config, record):
    """The ``Tile`` of an ``asic.tile.characterise`` record under ``config.area_estimate``: its cells (``generated``)
    or, with its large memories as register files (``asic``), the cells that stay and the register files."""
    from dashraker.asic.tile import register_files

    if config.area_estimate == "generated":
        return Tile(record["um2"], record["leakage_nw"], record["flip_flops"], *_timing(record))
    held = register_files(record, config.energy.silicon)
    register_file_um2 = held["bits"] * held["um2_per_bit"]
    leakage = record["leakage_nw"] - held["replaced_leakage_nw"] + register_file_um2 * _logic_nw_per_um2(config)
    return Tile(held["um2"], leakage, record["flip_flops"] - held["replaced_flip_flops"], *_timing(record))


def _timing(record):
    """(fmax_mhz, path) of a characterised tile's worst register-to-register path; (None, None) if none was timed."""
    worst = None if record is None else record["timing"]["worst"]
    if worst is None:
        return None, None
    return worst["fmax_mhz"], f"{worst['start_register']} -> {worst['end_register']}"


def measure(config, design, params, area_root="build/area", asic_root="build/asic", progress=True):
    """The ``Tile`` of ``design``'s tile of ``params`` under ``config``'s silicon model, timed where its clock is the
    timing's (cached figures, synthesised if missing); raises ``SiliconError``."""
    from dashraker.asic.libraries import LibraryError
    from dashraker.asic.synthesis import SynthesisError
    from dashraker.asic.tile import characterise
    from dashraker.asic.timing import TimingError
    from dashraker.fpga.area import AreaError

    try:
        record = None
        if config.uses_library:
            record = characterise(design, params, config.library, config.target_ns, asic_root, progress)
            if config.clock_source != "configured" and record["timing"]["worst"] is None:
                raise SiliconError(f"{design.name} {params}: no register-to-register path for the clock to come "
                                   f"from (clock_mhz: {config.clock_source}); give clock_mhz a number")
        if config.silicon == "liberty":
            return liberty_tile(config, record)
        estimate = tile_estimate(config, design, params, area_root, progress)
        return transistor_tile(config, estimate["transistors"], estimate["flip_flops"], record)
    except (AreaError, SynthesisError, TimingError, LibraryError) as error:
        raise SiliconError(str(error)) from None


def sram_transistors(config, tiles=None):
    """(tile buffers of ``tiles`` tiles, global buffer) in transistors of the same area."""
    tiles = config.tiles if tiles is None else tiles
    per_bit = config.energy.sram_bit_transistors
    memory = config.memory
    return (2 * tiles * memory.tile_buffer_kib * 8192 * per_bit, memory.global_buffer_kib * 8192 * per_bit)


def sram_area(config, tiles=None):
    """(tile buffers of ``tiles`` tiles, global buffer) in the unit of ``config.silicon``'s tiles (``UNITS``)."""
    scale = config.energy.silicon["transistor_um2"] if config.silicon == "liberty" else 1.0
    return tuple(part * scale for part in sram_transistors(config, tiles))


def chip_parts(config, tile_transistors, tiles=None):
    """The chip's silicon by part, in transistors and in um2 at the table's node: ``tiles`` (default: the
    configuration's) tiles of logic, their buffers and the global buffer."""
    tiles = config.tiles if tiles is None else tiles
    tile_buffers, global_buffer = sram_transistors(config, tiles)
    um2 = config.energy.silicon["transistor_um2"]
    parts = {"tile_logic": tiles * tile_transistors, "tile_buffers": tile_buffers, "global_buffer": global_buffer}
    parts["chip"] = sum(parts.values())
    return {name: {"transistors": value, "um2": value * um2} for name, value in parts.items()}


def _scoped(config, per_tile, sram, tiles):
    """``tiles`` tiles of ``per_tile`` each, and at chip scope the SRAM's ``sram`` (a pair)."""
    tiles = config.tiles if tiles is None else tiles
    return tiles * per_tile + (sum(sram) if config.area_scope == "chip" else 0.0)


def silicon_area(config, tile, tiles=None):
    """The area (``UNITS``) that iso-area and reports count under ``config.area_scope``: ``tiles`` (default: the
    configuration's) of ``tile`` ("compute"), and also their buffers and the global buffer ("chip")."""
    return _scoped(config, tile.area, sram_area(config, tiles), tiles)


def leakage_nw(config, tile, tiles=None):
    """The static power (nW) of the silicon ``silicon_area`` counts."""
    sram_nw = [t * config.energy.silicon["leakage_nw"] for t in sram_transistors(config, tiles)]
    return _scoped(config, tile.leakage_nw, sram_nw, tiles)


def leakage_pj(config, tile, seconds):
    """Static energy (pJ) of the configuration's silicon over ``seconds``; None while the tile is not measured."""
    if tile is None:
        return None
    return leakage_nw(config, tile) * seconds * 1e3  # nW x s = 1e-9 J = 1e3 pJ


def clock_pj(config, tile, seconds, clock_mhz):
    """Clocking energy (pJ) of the configuration's tiles over ``seconds`` at ``clock_mhz``: each tile's flip-flops
    times the cycles (stalls included: no clock gating) times the table's ``flip_flop_clock``; None while the tile is
    not measured."""
    if tile is None:
        return None
    from dashraker.mapping.components import CLOCK_ENTRY

    return config.tiles * tile.flip_flops * seconds * clock_mhz * 1e6 * config.energy.entries[CLOCK_ENTRY]


def reference_params(config):
    """The reference (dense) design's parameters on ``config``'s array: its geometry and format, and its own as the
    configuration gives them (``AcceleratorConfig.reference``: the reference design's section, SPEC section 7b)."""
    from dashraker.mapping.config import reference_on

    return reference_on(config.params, config.reference)


def _tiles(config):
    """The (design, params) of ``config``'s tile and of the reference tile on its array."""
    from dashraker.designs import reference

    return [(config.design, config.params), (reference(), reference_params(config))]


def _key(config, design, params):
    """What a tile's figures depend on besides its RTL: the silicon model, estimate, table, library and period."""
    timed = (config.library, config.target_ns) if config.uses_library else None
    return design.cache_name(params), config.silicon, config.area_estimate, config.energy.path, timed


def check_tools(configs):
    """Raise ``SiliconError`` where ``configs`` map tiles onto a library whose package or OpenSTA is missing: before
    any synthesis."""
    from dashraker.asic.libraries import LibraryError, library
    from dashraker.asic.timing import TimingError, find_sta

    try:
        for name in dict.fromkeys(config.library for config in configs if config.uses_library):
            library(name).path("liberty")
            find_sta()
    except (LibraryError, TimingError) as error:
        raise SiliconError(str(error)) from None


def unmeasured(configs, area_root="build/area", asic_root="build/asic"):
    """The distinct (design, params) of ``configs``' tiles (each one's and the reference's) that ``resolve_all``
    would synthesise: no cached area where the silicon model counts transistors, or no cached mapping where the
    tile is mapped onto the library."""
    from dashraker.asic.libraries import library
    from dashraker.asic.synthesis import is_mapped
    from dashraker.fpga.area import is_measured

    todo = {}
    for config in configs:
        for design, params in _tiles(config):
            missing = config.silicon != "liberty" and not is_measured(design, params, area_root)
            if config.uses_library:
                missing |= not is_mapped(design, params, library(config.library), config.target_ns, asic_root)
            if missing:
                todo.setdefault(design.cache_name(params), (design, params))
    return list(todo.values())


def clocked(configs):
    """``configs`` (their tiles measured) at the clocks their ``clock_source`` asks for: "configured" as they are,
    "sta" each at its own tile's, "common" at the slowest of the tiles (each design's and the reference tile on its
    array) of every "common" configuration."""
    common = [tile.fmax_mhz for c in configs if c.clock_source == "common" for tile in (c.tile, c.reference_tile)]
    clocks = {"sta": lambda c: c.tile.fmax_mhz, "common": lambda c: min(common)}
    return [c if c.clock_source == "configured" else dataclasses.replace(c, clock_mhz=clocks[c.clock_source](c))
            for c in configs]


def resolve_all(configs, area_root="build/area", progress=True, jobs=None, asic_root="build/asic"):
    """``configs`` with their ``tile`` and ``reference_tile`` measured (``measure``) and at their clocks (``clocked``);
    raises ``SiliconError``. The distinct tiles not yet measured are synthesised ``jobs`` at a time (default: one per
    CPU): each tile's conversion and Yosys run use one core, and a first ``map --design all`` of the packaged
    configuration synthesises four (each design's, and the baseline on FPRaker's lanes). A tile mapped onto a library
    counts as not yet measured (its cache is read in a moment)."""
    from dashraker.progress import bar as progress_bar

    from dashraker.fpga.area import is_measured
    from dashraker.mapping.executors import in_processes

    calls = {}
    for config in configs:
        for design, params in _tiles(config):
            calls.setdefault(_key(config, design, params), (config, design, params, area_root, asic_root))
    todo = {key: call for key, call in calls.items() if call[0].uses_library or not is_measured(*call[1:4])}
    jobs = min(len(todo), jobs or os.cpu_count() or 1)
    tiles = {}
    if jobs > 1:
        with progress_bar(total=len(todo), desc=f"silicon: measuring {len(todo)} tiles, {jobs} at a time", unit="tile",
                  disable=not progress, leave=False) as bar:
            tiles = dict(zip(todo, in_processes(measure, [(*call, False) for call in todo.values()], jobs, bar)))
    for key, call in calls.items():
        if key not in tiles:
            tiles[key] = measure(*call, progress)
    return clocked([dataclasses.replace(config, tile=tiles[_key(config, *_tiles(config)[0])],
                                        reference_tile=tiles[_key(config, *_tiles(config)[1])]) for config in configs])
