"""``dashraker area DESIGN``: the ASIC area of a design's tile from its own RTL (``fpga.area``), as generated and as
an ASIC designer would build it (its queues as register files of the mapper configuration's energy table), and, at chip
scope, with the SRAM of that configuration (``mapping.silicon``), which is why the command lives above the mapper."""

import dataclasses
from pathlib import Path

from dashraker.errors import CliError
from dashraker.fpga.area import AreaError, describe, design_area
from dashraker.outputs import path_argument

__all__ = ["register", "table", "memory_table"]


def table(record):
    """The area of one configuration as a Markdown table: the tile, then each part."""
    total = record["transistors"]
    lines = ["| part | instances | transistors | NAND2 GE | share of tile | flip-flops |", "|---|---|---|---|---|---|",
             f"| tile | 1 | {total:,} | {record['gates']:,.0f} | 100.0% | {record['flip_flops']:,} |"]
    for name, part in record["parts"].items():
        count = part.get("instances", "-")
        lines.append(f"| {name} | {count} | {part['transistors']:,} | {part['gates']:,.0f} "
                     f"| {part['transistors'] / total:.1%} | {part['flip_flops']:,} |")
    return "\n".join(lines)


def memory_table(record, asic):
    """The tile's memories as a Markdown table: each holding instance, its memories' shape and bits, what they map to
    as generated and what the ASIC estimate (``asic``, ``fpga.area.asic_estimate``'s) holds them in."""
    lines = ["| memory | instances | width x depth | bits | as generated: transistors | flip-flops | ASIC estimate |",
             "|---|---|---|---|---|---|---|"]
    for held in record["memories"]:
        shape = ", ".join(f"{m['width']} x {m['depth']}" for m in held["memories"])
        kind = ("register file" if all(m["bits"] >= asic["min_bits"] for m in held["memories"]) else
                "flip-flops" if all(m["bits"] < asic["min_bits"] for m in held["memories"]) else "both")
        name = held["instance"] or "tile"
        lines.append(f"| {name} | {held['count']} | {shape} | {held['bits']:,} | {held['transistors']:,} "
                     f"| {held['flip_flops']:,} | {kind} |")
    return "\n".join(lines)


def _config(args):
    """The configuration of ``--config`` (default: the packaged one) with ``--area-estimate``, or a ``CliError``."""
    from dashraker.mapping.config import ConfigError, load_config

    try:
        config = load_config(args.config, args.design.name)
    except ConfigError as error:
        raise CliError(str(error)) from None
    return dataclasses.replace(config, area_estimate=args.area_estimate or config.area_estimate)


def _estimates(config, record):
    """Both estimates of ``record``'s tile with ``config``'s energy table, printed and returned."""
    from dashraker.mapping import silicon

    both = silicon.estimates(record, config.energy)
    asic = both["asic"]
    print(f"ASIC estimate: {asic['transistors']:,} transistors, {asic['gates']:,.0f} NAND2 gate equivalents: "
          f"{asic['register_files']:,} {'memory' if asic['register_files'] == 1 else 'memories'} of at least "
          f"{asic['min_bits']:,} bits "
          f"({asic['register_file_bits']:,} bits) as register files of {asic['bit_transistors']:.3f} transistors per "
          f"bit ({config.energy.name}), in place of {asic['replaced_transistors']:,} transistors "
          f"({asic['replaced_flip_flops']:,} flip-flops); the configuration's area estimate: {config.area_estimate}")
    return both


def _chip(config, transistors):
    """The chip-scope figures of a tile of ``transistors`` with the memory of ``config``, printed and returned."""
    from dashraker.mapping import silicon

    config = dataclasses.replace(config, area_scope="chip")
    one = silicon.chip_parts(config, transistors, tiles=1)
    chip = silicon.chip_parts(config, transistors)
    table_source = config.energy
    print(f"\nchip scope ({config.area_estimate} area estimate): SRAM at "
          f"{table_source.silicon['sram_bit_cell_um2']} um2 per bit cell / array efficiency "
          f"{table_source.silicon['sram_array_efficiency']}, logic at {table_source.silicon['transistor_um2']} um2 per "
          f"transistor ({table_source.name}, {table_source.path}); memory of {config.path}")
    print("| part | transistors (SRAM: of equal area) | um2 | share |\n|---|---|---|---|")
    rows = [("tile logic", one["tile_logic"]),
            (f"tile buffers (2 x {config.memory.tile_buffer_kib:g} KiB)", one["tile_buffers"]),
            ("tile with its buffers", {k: one["tile_logic"][k] + one["tile_buffers"][k] for k in ("transistors", "um2")}),
            (f"global buffer ({config.memory.global_buffer_kib:g} KiB)", chip["global_buffer"]),
            (f"chip of {config.tiles} tiles", chip["chip"])]
    for name, part in rows:
        print(f"| {name} | {part['transistors']:,.0f} | {part['um2']:,.0f} | "
              f"{part['transistors'] / chip['chip']['transistors']:.1%} |")
    return {"config": config.path, "area_estimate": config.area_estimate, "tiles": config.tiles, "one_tile": one,
            "chip": chip}


def register(subparsers):
    from dashraker.designs.cli import add_design_parsers
    from dashraker.mapping.config import AREA_ESTIMATES

    parser = subparsers.add_parser(
        "area", help="ASIC area of a design's tile: CMOS transistors and NAND2 gate equivalents",
        description="Synthesise a design's generated Verilog with Yosys's generic gates (synth -noabc, hierarchy "
        "kept) and report CMOS transistors (stat -tech cmos) and NAND2 gate equivalents of the tile, of every "
        "instance and of the design's parts, as generated, and the ASIC estimate: the tile with its memories of "
        "at least the energy table's register_file_min_bits as register files. Figures are cached per "
        "configuration and generator sources.")

    def options(sub):
        sub.add_argument("--out", type=path_argument, default=Path("build/area"),
                         help="folder of the cached configurations (default build/area)")
        sub.add_argument("--json", type=path_argument, help="also write the area record to this JSON file")
        sub.add_argument("--max-minutes", type=float, default=60,
                         help="refuse a configuration whose estimated synthesis takes longer, unless --force-size "
                              "(default 60)")
        sub.add_argument("--no-progress", action="store_true", help="no progress display")
        sub.add_argument("--area-scope", choices=("compute", "chip"), default="compute",
                         help="compute: the tile's logic; chip: also its two tile buffers, and a chip of the "
                              "configuration's tiles with the global buffer (SRAM from the energy table's per-bit "
                              "area; default compute)")
        sub.add_argument("--config", type=path_argument, help="mapper configuration whose energy table (register files, "
                                                     "SRAM), memory sizes, tile count and area estimate the ASIC "
                                                     "estimate and the chip scope take (default: the packaged one)")
        sub.add_argument("--area-estimate", choices=AREA_ESTIMATES, help="the estimate the chip scope counts: asic "
                         "(queues as register files) or generated (default: the configuration's)")

    add_design_parsers(parser, _run, options)


def _run(args):
    from dashraker.designs.cli import design_params
    from dashraker.outputs import check_output_file, check_output_folder
    from dashraker.trace.store import save_json

    params = design_params(args)
    if not args.max_minutes > 0:
        raise CliError(f"--max-minutes must be positive, not {args.max_minutes:g}")
    check_output_folder(args.out, "--out")  # before minutes of synthesis
    if args.json:
        check_output_file(args.json, "--json")
    config = _config(args)  # a bad configuration before minutes of synthesis
    try:
        limit = None if args.force_size else args.max_minutes * 60
        record = design_area(args.design, params, args.out, not args.no_progress, limit)
    except (AreaError, ValueError) as error:
        raise CliError(str(error)) from None
    print(f"{args.design.name} {describe(params)}: {record['transistors']:,} transistors, "
          f"{record['gates']:,.0f} NAND2 gate equivalents as generated (synthesis {record['seconds']:.0f} s; "
          f"{record['folder']})")
    record["estimates"] = _estimates(config, record)
    print(table(record))
    if record["memories"]:
        print(memory_table(record, record["estimates"]["asic"]))
    if args.area_scope == "chip":
        record["chip"] = _chip(config, record["estimates"][config.area_estimate]["transistors"])
    if args.json:
        save_json(args.json, record)
        print(f"wrote {args.json}")
