"""Reading Yosys's ``stat -json`` and nextpnr's ``--report`` JSON: counts by hand, errors that name the field."""

import json

import pytest

from dashraker.fpga.compare import breakdown, read_map, speedup_sources, throughput
from dashraker.fpga.devices import DEVICES, FAMILIES, device
from dashraker.fpga.flow import median_seed
from dashraker.fpga.report import (ReportError, fit_problems, hierarchy_breakdown, markdown, parse_nextpnr_report,
                                   synthesis_resources)
from dashraker.errors import CliError

ECP5 = FAMILIES["ecp5"]
ICE40 = FAMILIES["ice40"]


def stat(modules):
    return json.dumps({"modules": {f"\\{name}": {"num_cells_by_type": cells} for name, cells in modules.items()}})


ECP5_STAT = stat({
    "top": {"LUT4": 10, "TRELLIS_FF": 5, "\\top.design": 1},
    "top.design": {"LUT4": 100, "CCU2C": 4, "$scopeinfo": 3, "\\top.design.pe0_0": 1, "\\top.design.pe0_1": 1,
                   "\\shared": 2},
    "top.design.pe0_0": {"LUT4": 50, "MULT18X18D": 2, "TRELLIS_FF": 20, "PFUMX": 6, "\\top.design.pe0_0.mac": 1},
    "top.design.pe0_0.mac": {"LUT4": 7, "L6MUX21": 3, "TRELLIS_FF": 2},
    "top.design.pe0_1": {"LUT4": 40, "DP16KD": 1},
    "shared": {"LUT4": 3, "TRELLIS_DPR16X4": 1},
})


def test_synthesis_resources_sum_every_instance():
    resources = synthesis_resources(ECP5_STAT, ECP5, "top")
    # LUT4s 10 + 100 + 50 + 7 + 40 + 2*3, and a CCU2C is two LUT4s
    assert resources["lut"] == 10 + 100 + 2 * 4 + 50 + 7 + 40 + 2 * 3
    assert resources["ff"] == 5 + 20 + 2
    assert resources["dsp"] == 2 and resources["bram"] == 1 and resources["lutram"] == 2
    assert resources["cells"]["LUT4"] == 10 + 100 + 50 + 7 + 40 + 6
    assert resources["cells"]["PFUMX"] == 6 and "top.design" not in resources["cells"]


def test_hierarchy_breakdown_rows_per_instance():
    rows = {row["instance"]: row for row in hierarchy_breakdown(ECP5_STAT, ECP5, "top")}
    assert set(rows) == {"design", "design.pe0_0", "design.pe0_0.mac", "design.pe0_1", "shared"}
    assert rows["design"]["lut"] == 100 + 8 + 57 + 40 + 6 and rows["design"]["own_lut"] == 108
    assert rows["design.pe0_0"]["lut"] == 57 and rows["design.pe0_0"]["own_lut"] == 50
    assert rows["design.pe0_0"]["ff"] == 22 and rows["design.pe0_0"]["dsp"] == 2


def test_ice40_flip_flops_are_every_sb_dff_variant():
    text = stat({"top": {"SB_LUT4": 9, "SB_CARRY": 4, "SB_DFF": 2, "SB_DFFE": 3, "SB_DFFSR": 1, "SB_MAC16": 1,
                         "SB_RAM40_4K": 2}})
    resources = synthesis_resources(text, ICE40, "top")
    assert (resources["lut"], resources["ff"], resources["dsp"], resources["bram"]) == (9, 6, 1, 2)


def test_statistics_errors_name_what_is_missing():
    with pytest.raises(ReportError, match="Yosys statistics: not JSON"):
        synthesis_resources("{", ECP5, "top")
    with pytest.raises(ReportError, match="no field 'modules'"):
        synthesis_resources("{}", ECP5, "top")
    with pytest.raises(ReportError, match="no module 'other'"):
        synthesis_resources(ECP5_STAT, ECP5, "other")


def nextpnr_report(paths):
    bels = {"TRELLIS_COMB": (1200, 83640), "TRELLIS_FF": (300, 83640), "MULT18X18D": (4, 156), "DP16KD": (0, 208),
            "TRELLIS_IO": (38, 365), "DCCA": (1, 56)}
    return json.dumps({
        "utilization": {bel: {"used": used, "available": available} for bel, (used, available) in bels.items()},
        "fmax": {"$glbnet$clk": {"achieved": 41.5, "constraint": 100.0}},
        "critical_paths": paths,
    })


def step(kind, delay, cell, net=None):
    entry = {"type": kind, "delay": delay, "from": {"cell": cell, "port": "Q"}, "to": {"cell": cell, "port": "D"}}
    if net:
        entry["net"] = net
    return entry


CLOCKED = {"from": "posedge $glbnet$clk", "to": "posedge $glbnet$clk", "path": [
    step("clk-to-q", 0.5, "design.pe0_0.acc_FF"),
    step("routing", 2.0, "x", "design.pe0_0.accumulator.frac[0]"),
    step("logic", 0.4, "y"),
    step("routing", 1.5, "y", "design.pe0_0.accumulate.sum[3]"),
    step("logic", 0.4, "z"),
    step("routing", 1.0, "z", "design.pe0_0.accumulate.$abc$12"),
    step("logic", 0.4, "w"),
    step("routing", 0.7, "w", "result$5"),
    step("setup", 0.1, "out_FF"),
]}
ASYNC = {"from": "<async>", "to": "posedge $glbnet$clk", "path": [step("routing", 20.0, "pin", "rx__payload[0]")]}


def test_nextpnr_report_utilisation_fmax_and_critical_path():
    instances = ["design", "design.pe0_0", "design.pe0_0.accumulate"]
    routed = parse_nextpnr_report(nextpnr_report([ASYNC, CLOCKED]), ECP5, instances)
    assert routed["utilisation"]["lut"] == {"used": 1200, "available": 83640}
    assert routed["utilisation"]["dsp"] == {"used": 4, "available": 156}
    assert routed["fmax_mhz"] == 41.5
    path = routed["critical_path"]
    # the longer pin-to-register path is not the clock's critical path
    assert path["delay_ns"] == pytest.approx(7.0)
    assert path["routing_ns"] == pytest.approx(5.2) and path["logic_ns"] == pytest.approx(1.8)
    assert path["logic_levels"] == 3
    assert path["instances"] == ["design.pe0_0", "design.pe0_0.accumulate", "(top)"]
    assert path["from"] == "design.pe0_0.acc_FF.Q" and path["to"] == "out_FF.D"


def test_nextpnr_report_errors_name_the_field():
    report = json.loads(nextpnr_report([CLOCKED]))
    del report["utilization"]["MULT18X18D"]["used"]
    with pytest.raises(ReportError, match="nextpnr report MULT18X18D: no field 'used'"):
        parse_nextpnr_report(json.dumps(report), ECP5)
    del report["utilization"]["MULT18X18D"]  # a part without DSP blocks: nextpnr leaves the type out
    assert parse_nextpnr_report(json.dumps(report), ECP5)["utilisation"]["dsp"] == {"used": 0, "available": 0}
    del report["fmax"]
    with pytest.raises(ReportError, match="nextpnr report: no field 'fmax'"):
        parse_nextpnr_report(json.dumps(report), ECP5)
    with pytest.raises(ReportError, match="nextpnr report: no field 'utilization'"):
        parse_nextpnr_report("{}", ECP5)


def test_fit_problems_name_every_resource_over():
    capacity = device("ice40-up5k").capacity
    assert fit_problems({"lut": 5280, "ff": 10, "dsp": 8, "bram": 0, "io": 39}, capacity) == []
    problems = fit_problems({"lut": 6000, "ff": 10, "dsp": 9, "bram": 0, "io": 40}, capacity)
    assert problems == ["6,000 LUTs needed, 5,280 available", "9 DSP blocks needed, 8 available",
                        "40 pins needed, 39 available"]


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown device 'ecp5-99k'; choose from ecp5-25k"):
        device("ecp5-99k")
    assert set(DEVICES) >= {"ecp5-85k", "ice40-hx8k"}


def test_markdown_and_comparison_read_a_report():
    hierarchy = hierarchy_breakdown(stat({
        "top": {"LUT4": 10, "\\top.design": 1},
        "top.design": {"LUT4": 20, "\\top.design.pe0_0": 1, "\\top.design.window": 1},
        "top.design.pe0_0": {"LUT4": 30, "\\top.design.pe0_0.mac": 1},
        "top.design.pe0_0.mac": {"LUT4": 270},
        "top.design.window": {"LUT4": 80, "\\top.design.window.scheduler0": 1},
        "top.design.window.scheduler0": {"LUT4": 40},
    }), ECP5, "top")
    routed = parse_nextpnr_report(nextpnr_report([CLOCKED]), ECP5, ["design.pe0_0"])
    report = {"design": "tensordash", "params": {"lanes": 8}, "device": "ecp5-85k", "clock_mhz": 100,
              "router": "router1", "timing_weight": None, "timing_ripup": False,
              "wrapper": {"word_bits": 16, "pins": 38, "step_bits": 100, "step_words": 7, "result_bits": 64,
                          "result_words": 4},
              "synthesis": {"lut": 440}, "utilisation": routed["utilisation"], "fmax_mhz": routed["fmax_mhz"],
              "timing_met": False, "critical_path": routed["critical_path"], "hierarchy": hierarchy,
              "stages_s": {"synthesis": 1.0}, "seed": 1,
              "seeds": [{"seed": 1, "fmax_mhz": routed["fmax_mhz"], "utilisation": routed["utilisation"],
                         "critical_path": routed["critical_path"], "place_route_s": 2.0}]}
    text = markdown(report)
    assert "| `design.pe0_0` | 300 |" in text and "Fmax 41.50 MHz** against" in text and "not met" in text
    assert "placement seed" not in text and "median" not in text
    assert "Placed and routed by nextpnr with router1.\n" in text
    slower = {**report["seeds"][0], "seed": 2, "fmax_mhz": 38.25, "critical_path": None}
    several = {**report, "seeds": [report["seeds"][0], slower], "seed": 2, "fmax_mhz": 38.25,
               "fmax_min_mhz": 38.25, "fmax_max_mhz": 41.5, "router": "router2", "timing_weight": 60,
               "timing_ripup": True}
    text = markdown(several)
    assert "Placed and routed by nextpnr with router2, placer timing weight 60, timing-driven rip-up.\n" in text
    assert "Fmax 38.25 MHz** (seed 2: the median of 2 seeds, 38.2 to 41.5 MHz) against" in text
    assert "| 1 | 41.50 | 1,200 | 300 | 7.0 | 2.0 |" in text and "| 2 | 38.25 | 1,200 | 300 | - | 2.0 |" in text
    parts = breakdown(report)
    assert parts["tile_lut"] == 20 + 300 + 120 and parts["pe_lut"] == 300 and parts["mac_lut"] == 270
    assert parts["muxes_lut"] == 30 and parts["muxes_of_pe"] == pytest.approx(0.1)
    assert parts["sparsity_of_tile"] == pytest.approx((30 + 120) / 440)
    assert throughput(16, 50.0, 2000) == (pytest.approx(8.0), pytest.approx(0.4))


def test_the_median_seed_is_a_real_run():
    runs = [{"seed": seed, "fmax_mhz": fmax} for seed, fmax in ((1, 45.0), (2, 41.0), (3, 43.0), (4, None))]
    assert median_seed(runs[:1])["seed"] == 1
    assert median_seed(runs[:3])["seed"] == 3
    assert median_seed(runs[:2])["seed"] == 2  # an even count: the lower middle one
    assert median_seed(runs)["seed"] == 2  # no clocked path counts as the slowest
    assert median_seed([{"seed": 5, "fmax_mhz": 40.0}, {"seed": 2, "fmax_mhz": 40.0}])["seed"] == 2


def test_speedup_sources_side_by_side(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"totals": [{"design": "tensordash", "op": "all", "speedup": 1.34},
                                           {"design": "fpraker", "op": "all", "speedup": 0.22}]}))
    assert speedup_sources([], None) == {"dense": {"baseline": 1.0}}
    assert speedup_sources([read_map(path)], None) == {"map": {"baseline": 1.0, "tensordash": 1.34, "fpraker": 0.22}}
    assert speedup_sources([read_map(path)], ["tensordash=2"]) == {
        "map": {"baseline": 1.0, "tensordash": 1.34, "fpraker": 0.22},
        "--speedup": {"baseline": 1.0, "tensordash": 2.0, "fpraker": 0.22}}
    assert speedup_sources([], ["tensordash=2"]) == {"--speedup": {"baseline": 1.0, "tensordash": 2.0}}
    with pytest.raises(CliError, match="expected DESIGN=NUMBER"):
        speedup_sources([], ["tensordash=two"])


def test_each_row_takes_the_speedup_of_a_map_with_its_parameters(tmp_path):
    """Two maps of TensorDash, greedy and separable1: a row takes the first whose parameters match those --set gives
    it; a row of parameters no map has gets none; the dense baseline 1.0 whatever its own."""
    from dashraker.designs import DESIGNS
    from dashraker.fpga.compare import _map_speedup

    paths = []
    for scheduler, speedup in (("greedy", 1.40), ("separable1", 1.25)):
        path = tmp_path / f"{scheduler}.json"
        path.write_text(json.dumps({
            "configs": [{"design": "tensordash", "lanes": 16, "scheduler": scheduler}, {"design": "baseline"}],
            "totals": [{"design": "tensordash", "op": "all", "speedup": speedup}]}))
        paths.append(path)
    tensordash, baseline = DESIGNS["tensordash"], DESIGNS["baseline"]

    def speedup(design, paths, **chosen):
        maps = [read_map(path) for path in paths]
        return _map_speedup(maps, design, design.params(lanes=8, **chosen), chosen)

    assert speedup(tensordash, paths) == 1.40  # no --set: the first map of the design
    assert speedup(tensordash, paths, scheduler="greedy") == 1.40
    assert speedup(tensordash, paths, scheduler="separable1") == 1.25
    assert speedup(tensordash, paths[::-1], scheduler="greedy") == 1.40
    assert speedup(tensordash, paths, scheduler="separable2") is None
    assert speedup(tensordash, paths, dot="fused") is None  # mapped with the default dot only
    assert speedup(baseline, paths, dot="fused") == 1.0


def test_speedups_from_a_mapper_json(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"rows": [], "totals": [
        {"design": "tensordash", "op": "forward", "speedup": 3.0},
        {"design": "tensordash", "op": "all", "speedup": 1.75},
        {"design": "fpraker", "op": "all", "speedup": 0.5},
    ]}))
    assert read_map(path) == ({"tensordash": 1.75, "fpraker": 0.5}, {})
    path.write_text(json.dumps({"rows": []}))
    with pytest.raises(CliError, match="no 'totals' list"):
        read_map(path)
    with pytest.raises(CliError, match="cannot read"):
        read_map(tmp_path / "missing.json")
