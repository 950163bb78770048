"""ASIC area: transistor counts of hand-checkable circuits, parts of a hand-made record, command-line refusals."""

import json
import re

import pytest

from dashraker.cli import main
from dashraker.designs import DESIGNS
from dashraker.fpga.area import CMOS_TRANSISTORS, AreaError, measure, parts, read_stat
from dashraker.hw.verilog import shared_verilog, to_verilog

# Three inverters, each its own module: a chain whose inversions synthesis cannot cancel across the boundaries.
INVERTER_CHAIN = """
module inv(input a, output y); assign y = ~a; endmodule
module chain(input a, output y); wire b, c; inv i0(.a(a), .y(b)); inv i1(.a(b), .y(c)); inv i2(.a(c), .y(y)); endmodule
"""
MUX2 = "module mux2(input a, input b, input s, output y); assign y = s ? b : a; endmodule\n"
ADDER4 = "module add4(input [3:0] a, input [3:0] b, output [4:0] y); assign y = a + b; endmodule\n"
REGISTER_WITH_ENABLE = """
module hold(input clk, input e, input [1:0] d, output reg [1:0] q); always @(posedge clk) if (e) q <= d; endmodule
"""
T = CMOS_TRANSISTORS


def test_inverter_chain_counts_two_transistors_per_inverter_and_per_instance(tmp_path):
    area = measure(INVERTER_CHAIN, "chain", tmp_path, progress=False)
    assert area["transistors"] == 3 * 2 and area["cells"] == {"$_NOT_": 3}
    assert area["gates"] == 6 / 4
    (row,) = area["instances"]
    assert row["instance"] == "inv" and row["count"] == 3 and row["transistors"] == 2


def test_two_to_one_mux_is_one_mux_cell(tmp_path):
    assert measure(MUX2, "mux2", tmp_path, progress=False)["transistors"] == 12


def test_four_bit_adder_matches_the_hand_count(tmp_path):
    # Yosys maps $add through $alu and $lcu, a Brent-Kung carry network: 4 propagate XORs a^b and 3 sum XORs
    # (bit 0's sum is its propagate); 4 generate ANDs a&b; prefix nodes G = g_hi | p_hi & G_lo for carries
    # 1:0, 3:2, 2:0 and 3:0 (4 ORs, 4 ANDs) and the group propagate p3&p2 (1 AND).
    area = measure(ADDER4, "add4", tmp_path, progress=False)
    assert area["cells"] == {"$_XOR_": 7, "$_AND_": 9, "$_OR_": 4}
    assert area["transistors"] == 7 * T["$_XOR_"] + 9 * T["$_AND_"] + 4 * T["$_OR_"] == 162


def test_enabled_register_is_a_flip_flop_and_a_mux_per_bit(tmp_path):
    area = measure(REGISTER_WITH_ENABLE, "hold", tmp_path, progress=False)
    assert area["cells"] == {"$_DFF_P_": 2, "$_MUX_": 2}
    assert area["transistors"] == 2 * (16 + 12) and area["flip_flops"] == 2 and area["register_transistors"] == 32


def _stat(modules, total):
    return json.dumps({"modules": modules, "design": {"estimated_num_transistors": str(total)}})


def test_parts_sum_their_instances_and_a_mac_pe_gives_operand_muxes():
    stat = _stat({
        "\\t": {"num_cells_by_type": {"t.pe0_0": 1, "t.pe1_0": 1, "$_NOT_": 1}},
        "\\t.pe0_0": {"num_cells_by_type": {"t.pe0_0.mac": 1, "$_MUX_": 2}},
        "\\t.pe0_0.mac": {"num_cells_by_type": {"$_DFF_P_": 1}},
        "\\t.pe1_0": {"num_cells_by_type": {"t.pe1_0.mac": 1, "$_MUX_": 1}},
        "\\t.pe1_0.mac": {"num_cells_by_type": {"$_XOR_": 1}},
    }, 2 + 24 + 16 + 12 + 12)
    area = read_stat(stat, "t")
    split = parts(area, {"pe": r"pe\d+_\d+", "mac": r"pe\d+_\d+\.mac"})
    assert split["pe"]["transistors"] == 64 and split["pe"]["instances"] == 2
    assert split["mac"]["transistors"] == 28 and split["mac"]["flip_flops"] == 1
    assert split["operand_muxes"]["transistors"] == 36
    assert split["tile_own"]["transistors"] == 2


def test_cells_without_a_cost_and_a_disagreeing_total_are_refused():
    with pytest.raises(AreaError, match=r"\$_SDFF_PP0_"):
        read_stat(_stat({"\\t": {"num_cells_by_type": {"$_SDFF_PP0_": 1}}}, "0+"), "t")
    with pytest.raises(AreaError, match="differs from Yosys"):
        read_stat(_stat({"\\t": {"num_cells_by_type": {"$_NOT_": 1}}}, 3), "t")


@pytest.mark.parametrize("args,message", [
    (["baseline", "--lanes", "0"], "--lanes must be an integer >= 1"),
    (["fpraker", "--guard-bits", "9"], "--guard-bits must be an integer in 0..7"),
    (["fpraker", "--max-minutes", "0"], "--max-minutes must be positive"),
    (["fpraker", "--max-minutes", "1e-6"], "synthesis estimated at"),
    (["fpraker", "--max-minutes", "0.0001"], "over the limit of 0.0001;"),  # not "of 0"
])
def test_bad_parameters_are_one_line_errors(args, message, tmp_path, capsys):
    assert main(["area", *args, "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("name", [name for name, design in DESIGNS.items() if design.area_parts])
def test_every_area_part_names_instances_of_the_design(name):
    """Each part's pattern matches some instance of the design's 1x1 tile, with every step sum where the design
    has a choice (a renamed submodule would otherwise leave its part at zero area), in the Verilog that area
    synthesises (repeated sub-components written once)."""
    design = DESIGNS[name]
    dot = design.parameter("dot") if "dot" in design.params() else None
    variants = [{}] + [{"dot": choice, "accumulators": int(choice == "fma")} for choice in (dot.choices if dot else ())
                       if choice != dot.default]
    instances = []
    for variant in variants:
        text = shared_verilog(design.tile(design.params(rows=1, cols=1, **variant)), "top")
        instances += [module.removeprefix("top.") for module in re.findall(r"^module \\?(\S+)", text, flags=re.M)]
    for part, pattern in design.area_parts.items():
        assert any(re.fullmatch(pattern, instance) for instance in instances), (part, pattern, instances)


# Amaranth's style: a module per instance path, numbered names that differ between copies, connections sorted.
COPIES = r"""module top(a, y, z, w);
  input [3:0] a;
  output [3:0] y;
  output [3:0] z;
  output [3:0] w;
  \top.u0  u0 (
    .\x$12 (a),
    .y(y)
  );
  \top.u1  u1 (
    .\x$40 (a),
    .y(z)
  );
  \top.u2  u2 (
    .\x$7 (a),
    .y(w)
  );
endmodule

module \top.u0 (\x$12 , y);
  wire [3:0] \$5 ;
  wire [3:0] \$6 ;
  input [3:0] \x$12 ;
  output [3:0] y;
  assign \$6  = \x$12  + 4'h3;
  assign \$5  = \$6  ^ \x$12 ;
  assign y = \$5 ;
endmodule

module \top.u1 (\x$40 , y);
  wire [3:0] \$10 ;
  wire [3:0] \$9 ;
  input [3:0] \x$40 ;
  output [3:0] y;
  assign \$9  = \x$40  + 4'h3;
  assign \$10  = \$9  ^ \x$40 ;
  assign y = \$10 ;
endmodule

module \top.u2 (\x$7 , y);
  wire [3:0] \$1 ;
  wire [3:0] \$2 ;
  input [3:0] \x$7 ;
  output [3:0] y;
  assign \$1  = \x$7  + 4'h5;
  assign \$2  = \$1  ^ \x$7 ;
  assign y = \$2 ;
endmodule
"""


def test_identical_modules_are_synthesised_once_and_counted_as_instances(tmp_path):
    from dashraker.fpga.area import unique_modules

    text, before, after = unique_modules(COPIES, "top")
    assert (before, after) == (4, 3)  # u1 is u0 up to its numbered names; u2 adds 5, not 3
    assert "module \\top.u1 " not in text and text.count("\\top.u0  u") == 2 and ".\\x$12 (a)" in text
    whole = measure(COPIES, "top", tmp_path / "whole", progress=False)
    once = measure(text, "top", tmp_path / "once", progress=False)
    assert once["transistors"] == whole["transistors"] and once["cells"] == whole["cells"]
    rows = {row["instance"]: row for row in once["instances"]}
    assert rows["u0"]["count"] == 2 and rows["u2"]["count"] == 1
    assert rows["u0"]["transistors"] * 2 + rows["u2"]["transistors"] == whole["transistors"]


def test_identical_modules_in_different_places_stay_apart():
    """A row's mux and a PE's mux may be the same text; area sums parts by instance path, so both are kept."""
    from dashraker.fpga.area import unique_modules

    _, before, after = unique_modules(COPIES.replace("top.u1", "top.v1"), "top")
    assert (before, after) == (4, 4)


@pytest.mark.slow  # a minute or more each; the quick parts test reads the shared conversion's module names
@pytest.mark.parametrize("name, params", [
    ("baseline", dict(rows=2, cols=1, lanes=2)),
    ("tensordash", dict(rows=2, cols=2, lanes=8)),
    ("fpraker", dict(rows=2, cols=2, lanes=2)),
])
def test_a_tile_converted_and_synthesised_once_per_module_matches_the_whole_tile(name, params, tmp_path):
    """The PEs (and their multipliers) converted once (``shared_verilog``) and identical modules written once
    (``unique_modules``): the same parts, instances and flip-flops as the whole tile's Verilog; Yosys's result for
    one module varies by a few transistors with the names around it (6 of a multiplier's 7,362 at 2x2), so the
    transistors within 0.1%."""
    from dashraker.fpga.area import unique_modules

    design, top = DESIGNS[name], f"dashraker_{name}"
    params = design.params(**params)
    verilog = to_verilog(design.tile(params), top)
    text, before, after = unique_modules(shared_verilog(design.tile(params), top), top)
    assert len(text) < 0.6 * len(verilog) and after <= before  # two PEs or more written once
    whole = parts(measure(verilog, top, tmp_path / "whole", progress=False), design.area_parts)
    once = parts(measure(text, top, tmp_path / "once", progress=False), design.area_parts)
    assert once.keys() == whole.keys()
    for part in whole:
        assert once[part]["flip_flops"] == whole[part]["flip_flops"], part
        assert once[part].get("instances") == whole[part].get("instances"), part
        assert once[part]["transistors"] == pytest.approx(whole[part]["transistors"], rel=1e-3), part


# A queue of eight 8-bit words with an asynchronous read (Amaranth's SyncFIFO keeps such a memory), around it a
# register of no memory.
QUEUE = """
module queue(input clk, input we, input [2:0] wa, input [7:0] wd, input [2:0] ra, output [7:0] rd, output reg [1:0] q);
  reg [7:0] words [7:0];
  always @(posedge clk) begin if (we) words[wa] <= wd; q <= wa[1:0]; end
  assign rd = words[ra];
endmodule
"""
# Two copies of one register marked keep (as the FPRaker front end's operands, per PE, for the FPGA's routing).
KEPT_COPIES = """
module copies(input clk, input [3:0] d, output [3:0] x, output [3:0] y);
  (* keep = 1 *) reg [3:0] first;
  (* keep = 1 *) reg [3:0] second;
  always @(posedge clk) begin first <= d; second <= d; end
  assign x = first; assign y = second;
endmodule
"""


def test_a_memory_is_listed_with_what_it_maps_to_and_an_asic_estimate_holds_it_in_a_register_file(tmp_path):
    """By hand: 64 bits are 64 flip-flops, each with its write-enable multiplexer (dffunmap), and a read tree of 7
    2:1 multiplexers per bit (8 words), 120 multiplexers in all; the row decoder's gates are the rest. The ASIC
    estimate takes the memory's figures out and 64 bits of the register file in."""
    from dashraker.fpga.area import asic_estimate

    area = measure(QUEUE, "queue", tmp_path, progress=False)
    (held,) = area["memories"]
    assert held["instance"] == "" and held["count"] == 1 and held["bits"] == 64
    assert held["memories"] == [{"name": "words", "width": 8, "depth": 8, "bits": 64, "read_ports": 1,
                                 "write_ports": 1, "sync_read": False}]
    assert held["flip_flops"] == 64 and area["flip_flops"] == 66  # the memory's, then q's two
    assert area["cells"]["$_MUX_"] == 64 + 8 * 7
    decoder = held["transistors"] - 64 * (T["$_DFF_P_"] + T["$_MUX_"]) - 56 * T["$_MUX_"]
    assert 0 < decoder < 8 * 4 * T["$_AND_"]  # a few gates per word line
    logic = area["transistors"] - held["transistors"]
    assert logic == 2 * T["$_DFF_P_"]  # q
    asic = asic_estimate(area, 6.5, 64)
    assert asic["transistors"] == round(logic + 64 * 6.5) == 448
    assert asic["register_files"] == 1 and asic["register_file_bits"] == 64 and asic["flip_flops"] == 2
    assert asic["replaced_transistors"] == held["transistors"] and asic["replaced_flip_flops"] == 64
    generated = asic_estimate(area, 6.5, 65)  # under the threshold: as generated
    assert generated["transistors"] == area["transistors"] and generated["register_files"] == 0


def test_copies_of_a_register_marked_keep_are_merged_in_the_area_synthesis(tmp_path):
    """``keep`` on a signal keeps the wire, not a second flip-flop: the copies the FPGA flow keeps apart (it marks
    the flip-flops) are one register in the area's figures."""
    area = measure(KEPT_COPIES, "copies", tmp_path, progress=False)
    assert area["flip_flops"] == 4 and area["cells"] == {"$_DFF_P_": 4}
