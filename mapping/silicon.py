"""The silicon a configuration has: its tiles' logic and, at chip scope, its SRAM, in transistors (SPEC 7, 7b).

Tiles are measured from their own RTL (``dashraker area``: CMOS transistors of Yosys's generic
synthesis), under the configuration's ``area_estimate``: ``asic`` holds each memory of at least the
table's ``register_file_min_bits`` in a register file of the table's per-bit area
(``fpga.area.asic_estimate``), ``generated`` takes the RTL as it is. SRAM (each tile's two buffers
and the global buffer) is converted to transistors of the same area with the energy table's
``silicon`` figures: a bit cell's area over the array efficiency (its periphery), over the area of
one transistor of logic. Leakage is the table's static power per transistor times this silicon
times an operation's run time.
"""

import dataclasses
import os

__all__ = ["estimates", "tile_transistors", "sram_transistors", "chip_parts", "silicon_transistors", "leakage_pj",
           "reference_params", "resolve", "resolve_all"]


def estimates(record, table):
    """Both area estimates of a ``dashraker area`` record with the energy ``table``'s register files:
    ``{"generated": {...}, "asic": fpga.area.asic_estimate(...)}``, each with ``transistors`` and ``gates``."""
    from dashraker.fpga.area import asic_estimate

    return {"asic": asic_estimate(record, table.register_file_bit_transistors,
                                  table.silicon["register_file_min_bits"]),
            "generated": {key: record[key] for key in ("transistors", "gates", "flip_flops")}}


def tile_transistors(config, design, params, area_root="build/area", progress=True):
    """Transistors of ``design``'s tile of ``params`` under ``config.area_estimate`` (cached ``dashraker area``
    figures, synthesised if missing); raises ``fpga.area.AreaError``."""
    from dashraker.fpga.area import design_area

    return estimates(design_area(design, params, area_root, progress), config.energy)[config.area_estimate][
        "transistors"]


def sram_transistors(config, tiles=None):
    """(tile buffers of ``tiles`` tiles, global buffer) in transistors of the same area."""
    tiles = config.tiles if tiles is None else tiles
    per_bit = config.energy.sram_bit_transistors
    memory = config.memory
    return (2 * tiles * memory.tile_buffer_kib * 8192 * per_bit, memory.global_buffer_kib * 8192 * per_bit)


def chip_parts(config, tile_transistors, tiles=None):
    """The chip's silicon by part, in transistors and in um2 at the table's node: ``tiles`` (default: the
    configuration's) tiles of logic, their buffers and the global buffer."""
    tiles = config.tiles if tiles is None else tiles
    tile_buffers, global_buffer = sram_transistors(config, tiles)
    um2 = config.energy.silicon["transistor_um2"]
    parts = {"tile_logic": tiles * tile_transistors, "tile_buffers": tile_buffers, "global_buffer": global_buffer}
    parts["chip"] = sum(parts.values())
    return {name: {"transistors": value, "um2": value * um2} for name, value in parts.items()}


def silicon_transistors(config, tile_transistors, tiles=None):
    """The silicon that leaks and that area counts under ``config.area_scope``: the tiles' logic ("compute"), or
    also their buffers and the global buffer ("chip")."""
    tiles = config.tiles if tiles is None else tiles
    logic = tiles * tile_transistors
    return logic + sum(sram_transistors(config, tiles)) if config.area_scope == "chip" else logic


def leakage_pj(config, tile_transistors, seconds):
    """Static energy (pJ) of the configuration's silicon over ``seconds``; None while the tile is not measured."""
    if tile_transistors is None:
        return None
    return config.energy.leakage_pj(silicon_transistors(config, tile_transistors), seconds)


def reference_params(config):
    """The reference (dense) design's parameters on ``config``'s array: its geometry and format, the rest default."""
    from dashraker.designs import reference

    ref = reference()
    names = {parameter.name for parameter in ref.parameters}
    return ref.params(**{key: config.params[key] for key in ("rows", "cols", "lanes", "fmt") if key in names})


def _tiles(config):
    """The (design, params) of ``config``'s tile and of the reference tile on its array."""
    from dashraker.designs import reference

    return [(config.design, config.params), (reference(), reference_params(config))]


def resolve_all(configs, area_root="build/area", progress=True, jobs=None):
    """``resolve`` of each of ``configs``, the distinct tiles not yet measured synthesised ``jobs`` at a time (default:
    one per CPU): each tile's conversion and Yosys run use one core, and a first ``map --design all`` of the packaged
    configuration synthesises four (each design's, and the baseline on FPRaker's lanes)."""
    from tqdm import tqdm

    from dashraker.fpga.area import design_area, is_measured
    from dashraker.mapping.executors import in_processes

    todo = {}
    for design, params in (tile for config in configs for tile in _tiles(config)):
        if not is_measured(design, params, area_root):
            todo.setdefault(design.cache_name(params), (design, params, area_root, False))
    jobs = min(len(todo), jobs or os.cpu_count() or 1)
    if jobs > 1:
        with tqdm(total=len(todo), desc=f"area: synthesising {len(todo)} tiles, {jobs} at a time", unit="tile",
                  disable=not progress, leave=False) as bar:
            in_processes(design_area, list(todo.values()), jobs, bar)
    return [resolve(config, area_root, progress) for config in configs]


def resolve(config, area_root="build/area", progress=True):
    """``config`` with its tile's transistors and the reference's tile on the same array under its
    ``area_estimate`` (``tile_transistors``); raises ``fpga.area.AreaError``."""
    from dashraker.designs import reference

    tile = tile_transistors(config, config.design, config.params, area_root, progress)
    ref, params = reference(), reference_params(config)
    same = config.design is ref and params == config.params
    ref_tile = tile if same else tile_transistors(config, ref, params, area_root, progress)
    return dataclasses.replace(config, tile_transistors=tile, reference_tile_transistors=ref_tile)
