"""Activity-based energy (``mapping.activity``) and ``dashraker energy``: the model by hand, the calibrated table
read back by the mapper, and the command end to end on a small tile."""

import numpy as np
import pytest
import yaml

from dashraker.cli import main
from dashraker.mapping.activity import (Sample, calibrated_entries, instance_energy, macs, part_energy,
                                        stream_cycles, table_counts)
from dashraker.mapping.config import load_config, load_energy_table
from dashraker.sim.toggles import Toggles

TABLE = load_energy_table("horowitz45")
E_TOGGLE, E_CLOCK = TABLE.entries["transistor_toggle"], TABLE.entries["flip_flop_clock"]


def _area():
    """A tile of 100 own transistors and 2 flip-flops, a PE (40, no flip-flop) holding a multiplier (300, 4)."""
    def own(transistors, flip_flops):
        return {"transistors": transistors, "flip_flops": flip_flops}

    return {"own": own(100, 2), "instances": [{"instance": "pe0_0", "count": 1, "own": own(40, 0)},
                                              {"instance": "pe0_0.mul0", "count": 1, "own": own(300, 4)}]}


def test_identical_instances_share_their_class_figures():
    """``dashraker area`` lists identical modules once with their count: every copy in the RTL gets the figures
    (its toggles its own), and a copy the record does not count is refused."""
    area = _area()
    area["instances"][1]["count"] = 3  # pe0_0.mul0, mul1 and mul2 are one class
    toggles = {"pe0_0.mul0": Toggles(30, 60), "pe0_0.mul1": Toggles(60, 60), "pe0_0.mul2": Toggles(0, 60)}
    energies = instance_energy(area, toggles, cycles=7, table=TABLE)
    assert [energies[f"pe0_0.mul{i}"]["transistors"] for i in range(3)] == [300, 300, 300]
    assert energies["pe0_0.mul1"]["dynamic_pj"] == pytest.approx(2 * energies["pe0_0.mul0"]["dynamic_pj"])
    parts = part_energy(energies, {"multipliers": r"pe\d+_\d+\.mul\d+"})
    assert parts["multipliers"]["instances"] == 3 and parts["multipliers"]["flip_flops"] == 12
    with pytest.raises(ValueError, match="counts 2 more instances at pe#_#.mul#, the RTL has 3"):
        instance_energy(area, {**toggles, "pe0_0.mul3": Toggles(1, 60)}, cycles=7, table=TABLE)


def test_energy_by_hand():
    toggles = {"": Toggles(10, 20), "pe0_0": Toggles(0, 8), "pe0_0.mul0": Toggles(30, 60)}
    energies = instance_energy(_area(), toggles, cycles=7, table=TABLE)
    # toggles x (own transistors / own net bits) x E_toggle; flip-flops x cycles x E_clock
    assert energies[""]["dynamic_pj"] == pytest.approx(10 * 100 / 20 * E_TOGGLE)
    assert energies["pe0_0.mul0"]["dynamic_pj"] == pytest.approx(30 * 300 / 60 * E_TOGGLE)
    assert energies["pe0_0"]["dynamic_pj"] == 0 and energies["pe0_0"]["clock_pj"] == 0
    assert energies["pe0_0.mul0"]["clock_pj"] == pytest.approx(4 * 7 * E_CLOCK)
    parts = part_energy(energies, {"pe": r"pe\d+_\d+", "multipliers": r"pe\d+_\d+\.mul\d+"})
    mul = 30 * 5 * E_TOGGLE + 28 * E_CLOCK
    assert parts["multipliers"]["energy_pj"] == pytest.approx(mul)
    assert parts["pe"]["energy_pj"] == pytest.approx(mul)  # a part holds its submodules
    assert parts["tile"]["energy_pj"] == pytest.approx(mul + 50 * E_TOGGLE + 14 * E_CLOCK)
    assert parts["tile_own"]["toggles"] == 10 and parts["pe"]["instances"] == 1


def test_activity_entry_is_the_tables_transistor_figure():
    """E_toggle is the table's 0.134 fJ per transistor per operation at an adder's activity of 0.5 (its rule)."""
    assert E_TOGGLE == pytest.approx(2 * 0.03 / 224, rel=0.01)
    assert E_CLOCK == pytest.approx(2 * 10 * E_TOGGLE)


def test_macs_and_table_counts():
    a = np.zeros((2, 2, 3, 8), np.float32)
    b = np.ones((2, 1, 3, 8), np.float32)
    a[0, 0, 0, :2] = 1.0  # two non-zero products in pass 0; pass 1 all zero
    assert macs(a, b, [2, 1], [1, 1]) == ((2 + 1) * 3 * 8, 2)
    from dashraker.designs import design

    td = design("tensordash")
    params = td.params(rows=2, cols=1, lanes=8)
    counts, cycles = table_counts(td, params, a, b, np.array([2, 1]), np.array([1, 1]))
    assert counts["mul"] == 2  # the non-zero scheduled values, once per used partner column
    assert cycles.tolist() == td.cost.cycles(params, a, b).tolist()


@pytest.mark.parametrize("name, params, expected", [
    ("baseline", {}, 3 + 4 + 5),
    ("tensordash", {}, 3 + 4 + 5),
    # two threads: passes 0 and 2 on thread 0 (8 decisions, ending on cycle 2 x 8 - 2), pass 1 on thread 1 (4, ending
    # on cycle 2 x 4 - 1): the loop lasts max(2 x 8 - 1, 2 x 4) = 15 cycles, not the passes' 12
    ("tensordash", {"threads": 2}, 15),
])
def test_clocking_is_over_the_stream(name, params, expected):
    """A tile is clocked for its stream of passes, as the mapper charges it: with two threads, their interleaving."""
    from dashraker.designs import design

    found = design(name)
    assert stream_cycles(found, found.params(**params), np.array([3, 4, 5])) == expected


def test_calibrated_table_is_read_by_the_mapper(tmp_path):
    from dashraker.designs import design
    from dashraker.sim.energy_cli import write_calibrated

    base = design("baseline")
    sample = Sample("baseline", "fc", "fwd", counts={"mul": 100, "add_fp32": 100},
                    parts={"multipliers": {"energy_pj": 50.0}, "adder_tree": {"energy_pj": 80.0},
                           "accumulator": {"energy_pj": 20.0}})
    fitted = calibrated_entries([sample], {"baseline": base.energy_parts}, "bf16")
    assert fitted["mul_bf16"][0] == pytest.approx(0.5) and fitted["add_fp32"][0] == pytest.approx(1.0)
    path = tmp_path / "fitted.yaml"
    write_calibrated(path, TABLE, [sample], [(base, base.params())], "traces/x", "abc1234")
    table = load_energy_table(str(path))
    assert table.entries["mul_bf16"] == pytest.approx(0.5) and table.entries["add_fp32"] == pytest.approx(1.0)
    assert table.entries["dram_64b"] == TABLE.entries["dram_64b"]  # what was not fitted stays
    data = yaml.safe_load(path.read_text())
    assert data["sources"]["rtl_activity"] == "measured from RTL activity, traces/x, abc1234"
    assert data["entries"]["mul_bf16"]["source"] == "rtl_activity"
    config = tmp_path / "map.yaml"
    config.write_text(f"energy_table: {path}\n")
    assert load_config(config).energy.entries["mul_bf16"] == pytest.approx(0.5)


def test_cli_errors_before_building(small_trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("dashraker.sim.cosim.Cosim", lambda *a, **k: pytest.fail("built the RTL first"))
    assert main(["energy", str(small_trace), "--design", "baseline", "--layer", "nope", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "no layer 'nope'" in err
    assert main(["energy", str(small_trace), "--design", "baseline", "--lookahead", "1", "--no-progress"]) == 2
    assert "--lookahead does not apply to design baseline" in capsys.readouterr().err
    assert main(["energy", str(small_trace), "--design", "baseline", "--passes", "0", "--no-progress"]) == 2
    assert "--passes must be positive" in capsys.readouterr().err
    monkeypatch.setattr("dashraker.fpga.area.design_area", lambda *a, **k: pytest.fail("synthesised first"))
    assert main(["energy", str(small_trace), "--design", "baseline", "--lanes", "1024", "--no-progress"]) == 2
    assert "counts as 1,024 lanes" in capsys.readouterr().err
    from dashraker.outputs import OutputFolder

    with OutputFolder(tmp_path / "out", "--out"):  # another run writes there: refused before the work, not after it
        assert main(["energy", str(small_trace), "--design", "baseline", "--out", str(tmp_path / "out"),
                     "--no-progress"]) == 2
    assert "in use by pid" in capsys.readouterr().err
    bad = tmp_path / "c.yaml"
    bad.write_text("tensordash: {scheduler: fastest}\n")
    assert main(["energy", str(small_trace), "--design", "baseline", "--iso-area", "--config", str(bad),
                 "--no-progress"]) == 2
    assert "field 'tensordash.scheduler': must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_status:  # an argument error, as argparse gives every one
        main(["energy", str(small_trace), "--design", "baseline", "--calibrate", "", "--no-progress"])
    assert exit_status.value.code == 2
    assert "argument --calibrate: an empty name is not a file or folder" in capsys.readouterr().err
    assert main(["energy", str(small_trace), "--no-progress"]) == 2
    assert "give --design, or the reports to use" in capsys.readouterr().err
    import json

    folder = tmp_path / "td"
    folder.mkdir()
    (folder / "energy.json").write_text(json.dumps({"trace": str(small_trace), "step": 1, "samples": [
        _sample("tensordash", "fwd", 2.0, 1.0).as_dict()]}))
    assert main(["energy", str(small_trace), "--add-report", str(folder), "--no-progress"]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert main(["energy", str(small_trace), "--add-report", str(folder), "--iso-area", "--no-progress"]) == 2
    assert "no sample of the reference design baseline" in capsys.readouterr().err


@pytest.mark.slow  # a toggle-counting Verilator build and a synthesis: minutes
def test_cli_end_to_end(small_trace, build_cache, tmp_path, capsys):
    """Baseline 1x1 tile of 2 lanes on an MLP's layer: a report, its files, a calibrated table; a zero pass switches
    no multiplier (its operands stay zero) but still clocks every flip-flop."""
    import json

    out, fitted = tmp_path / "report", tmp_path / "fitted.yaml"
    args = ["energy", str(small_trace), "--design", "baseline", "--lanes", "2", "--layer", "fcs.0", "--passes", "3",
            "--synthetic", "--build", str(build_cache / "cosim"), "--area-cache", str(build_cache / "area"),
            "--out", str(out), "--calibrate", str(fitted), "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| baseline | fwd |" in printed and "| baseline | zeros |" in printed
    report = json.loads((out / "energy.json").read_text())
    by_op = {(s["layer"], s["op"]): s for s in report["samples"]}
    zeros, random = by_op[("zeros", "synthetic")], by_op[("random", "synthetic")]
    assert zeros["parts"]["multipliers"]["toggles"] == 0 < random["parts"]["multipliers"]["toggles"]
    assert zeros["parts"]["tile"]["clock_pj"] > 0 and zeros["activity_pj"] < random["activity_pj"]
    fwd = by_op[("fcs.0", "fwd")]
    assert fwd["passes"] == 3 and fwd["activity_pj"] > 0 and fwd["table_core_pj"] > 0
    # the table's clocking is the mapper's (the tile's flip-flops over the passes' cycles): the activity's own
    assert fwd["table_pj"]["clock"] > 0 and fwd["table_pj"]["clock"] == pytest.approx(fwd["parts"]["tile"]["clock_pj"])
    assert load_energy_table(str(fitted)).entries["mul_bf16"] > 0
    assert main(args) == 0  # an earlier report is replaced


def test_earlier_reports_join_the_fit(tmp_path):
    """``--add-report``'s samples: read back from an ``energy.json`` of the same trace and step, refused otherwise."""
    import json

    from dashraker.errors import CliError
    from dashraker.designs import design
    from dashraker.sim.energy_cli import read_report

    sample = Sample("fpraker", "fc", "fwd", passes=2, counts={"terms": 10},
                    parts={"lanes": {"energy_pj": 5.0}, "encoder": {"energy_pj": 1.0}, "tile": {"energy_pj": 9.0},
                           "exponent_unit": {"energy_pj": 1.0}, "rounder": {"energy_pj": 1.0}})
    folder = tmp_path / "earlier"
    folder.mkdir()
    (folder / "energy.json").write_text(json.dumps({"trace": str(tmp_path / "t"), "step": 3,
                                                    "samples": [sample.as_dict() for sample in [sample]]}))
    base = design("baseline")
    (read,) = read_report(folder, tmp_path / "t", 3, [(base, base.params())])
    assert read == sample
    with pytest.raises(CliError, match="not of"):
        read_report(folder, tmp_path / "t", 4, [(base, base.params())])
    with pytest.raises(CliError, match="holds designs this run measures too"):
        read_report(folder, tmp_path / "t", 3, [(design("fpraker"), {})])
    fitted = calibrated_entries([read], {"fpraker": design("fpraker").energy_parts}, "bf16")
    assert fitted["term_shift"][0] == pytest.approx(0.5)


def _sample(design, op, activity, table, layer="fc"):
    """A sample whose activity energy (its tile part) and table core energy are given, in pJ."""
    return Sample(design, layer, op, passes=1, parts={"tile": {"energy_pj": activity, "clock_pj": 0.0}},
                  table_pj={"mul_bf16": table, "dram_words": 1000.0})  # memory: not core energy


def test_iso_area_verdicts_by_hand():
    """Both energy models' verdicts from a small synthetic report: the activity model scales each operation's core
    energy by its activity/table ratio and keeps memory and leakage; efficiency is against the reference in the same
    model, at the configured tiles and at iso-area."""
    from dashraker.mapping.activity import activity_energy_pj, activity_ratios, energy_verdicts

    samples = [_sample("baseline", "fwd", 40.0, 10.0), _sample("baseline", "fwd", 20.0, 10.0, "conv"),
               _sample("baseline", "bwd_weight", 30.0, 10.0), _sample("tensordash", "fwd", 50.0, 5.0),
               _sample("tensordash", "bwd_weight", 20.0, 10.0), _sample("tensordash", "synthetic", 1.0, 1.0, "zeros")]
    ratios = activity_ratios(samples)
    assert ratios == {("baseline", "fwd"): 3.0, ("baseline", "bwd_weight"): 3.0, ("tensordash", "fwd"): 10.0,
                      ("tensordash", "bwd_weight"): 2.0}

    def sums(base_core, td_core, other):  # per operation: energy = core + other (memory and leakage)
        out = {}
        for design, core in (("baseline", base_core), ("tensordash", td_core)):
            for op in ("fwd", "bwd_weight"):
                out[design, op] = {"core_energy_pj": core[op], "energy_pj": core[op] + other}
            out[design, "all"] = {key: sum(out[design, op][key] for op in ("fwd", "bwd_weight"))
                                  for key in ("core_energy_pj", "energy_pj")}
        return out

    equal = sums({"fwd": 100.0, "bwd_weight": 100.0}, {"fwd": 50.0, "bwd_weight": 80.0}, 100.0)
    # at iso-area TensorDash has fewer tiles: the same actions, more leakage over a longer run
    iso = {**equal, **{key: value for key, value in sums({"fwd": 100.0, "bwd_weight": 100.0},
                                                         {"fwd": 50.0, "bwd_weight": 80.0}, 150.0).items()
                       if key[0] == "tensordash"}}
    assert activity_energy_pj(equal, "tensordash", ratios) == pytest.approx(10 * 50 + 2 * 80 + 200)
    assert activity_energy_pj(equal, "tensordash", ratios, core_only=True) == pytest.approx(660)
    verdict = energy_verdicts(equal, iso, ratios, "baseline")["tensordash"]
    assert verdict["table_equal"] == pytest.approx(400 / 330)
    assert verdict["table_core_iso"] == pytest.approx(200 / 130) and verdict["table_iso"] == pytest.approx(400 / 430)
    assert verdict["activity_iso"] == pytest.approx(800 / (660 + 300))
    assert verdict["activity_equal"] == pytest.approx((3 * 200 + 200) / 860)
    assert verdict["activity_core_iso"] == pytest.approx(600 / 660)  # the table favours it; the activity does not
    with pytest.raises(KeyError, match="tensordash bwd_input"):
        energy_verdicts({**equal, ("tensordash", "bwd_input"): {"core_energy_pj": 1.0, "energy_pj": 1.0}}, equal,
                        ratios, "baseline")


def test_report_compares_multiplier_toggles_by_layer():
    """The report's multiplier table: per layer and operation, each design's multiplier toggles per MAC slot and per
    useful MAC, beside the scheduled zeros; designs without multipliers are left out."""
    from dashraker.designs import design
    from dashraker.sim.energy_cli import report

    def sample(name, toggles):
        parts = {"tile": {"energy_pj": 1.0, "clock_pj": 0.5, "dynamic_pj": 0.5, "toggles": toggles}}
        if toggles:
            parts["multipliers"] = {"energy_pj": 0.5, "clock_pj": 0.25, "dynamic_pj": 0.25, "toggles": toggles}
        return Sample(name, "conv1", "fwd", passes=1, macs=100, useful_macs=40, scheduled_values=10,
                      scheduled_zeros=4, parts=parts)

    text = report([sample("baseline", 300), sample("tensordash", 200), sample("fpraker", 0)], "t", 1,
                  [(design(name), None) for name in ("baseline", "tensordash", "fpraker")])
    assert "| layer | operation | zeros (scheduled) | useful MACs | baseline | tensordash |" in text
    assert "| conv1 | fwd | 40.0% | 40.0% | 3 / 8 | 2 / 5 |" in text


def test_reports_alone_are_fitted(small_trace, tmp_path, capsys):
    """Without --design, --calibrate fits the --add-report reports' samples, the operand format from their
    parameters; nothing is co-simulated."""
    import json

    from dashraker.designs import design

    sample = Sample("baseline", "fcs.0", "fwd", passes=1, macs=10, counts={"mul": 4, "add_fp32": 8},
                    parts={"tile": {"energy_pj": 9.0, "clock_pj": 1.0, "dynamic_pj": 8.0, "toggles": 5},
                           "multipliers": {"energy_pj": 2.0, "clock_pj": 0.0, "dynamic_pj": 2.0, "toggles": 5}})
    folder, fitted = tmp_path / "base", tmp_path / "fitted.yaml"
    folder.mkdir()
    (folder / "energy.json").write_text(json.dumps({
        "trace": str(small_trace), "step": 1, "designs": {"baseline": design("baseline").params()},
        "samples": [sample.as_dict()]}))
    args = ["energy", str(small_trace), "--add-report", str(folder), "--calibrate", str(fitted), "--no-progress"]
    assert main(args) == 0
    assert load_energy_table(str(fitted)).entries["mul_bf16"] == pytest.approx(0.5)  # 2 pJ over 4 multiplications
