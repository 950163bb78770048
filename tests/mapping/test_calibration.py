"""The energy table fitted jointly to measured tile energy (``mapping.calibration``, ``dashraker asic --calibrate``):
synthetic runs of known entries, their energy computed here, recovered by the fit; and the clocking in the reports."""

import numpy as np
import pytest

from dashraker.mapping.calibration import Run, fit_table, table_energy_pj

# the entries the synthetic runs are made of (pJ): a dense tile's and a zero-skipping tile's actions and the clocking
KNOWN = {"mul_bf16": 0.9, "add_fp32": 2.5, "mux8_bit": 0.004, "scheduler_lane": 0.02, "flip_flop_clock": 0.0085}
FLIP_FLOPS = {"baseline": 9735, "tensordash": 16372}


def _runs(seed=0, count=12):
    """Runs of the baseline (multiplies = adds = MAC slots, a cycle per step) and of TensorDash (fewer cycles than
    steps, multiplies below adds), each charged KNOWN's energy by hand."""
    rng = np.random.default_rng(seed)
    runs = []
    for index in range(count):
        steps = int(rng.integers(100, 2000))
        macs = 8 * steps
        base = {"mul": macs, "add_fp32": macs}
        runs.append(Run("baseline", f"l{index}", "fwd", macs * (KNOWN["mul_bf16"] + KNOWN["add_fp32"])
                        + FLIP_FLOPS["baseline"] * steps * KNOWN["flip_flop_clock"], base, steps,
                        FLIP_FLOPS["baseline"], macs))
        cycles = int(steps * rng.uniform(0.4, 0.95))
        useful, adds = int(macs * rng.uniform(0.3, 0.8)), int(8 * cycles * rng.uniform(0.7, 1.0))
        muxed = int(adds * rng.uniform(20, 40))
        td = {"mul": useful, "add_fp32": adds, "mux_bits": muxed, "scheduler_lanes": 8 * cycles}
        energy = (useful * KNOWN["mul_bf16"] + adds * KNOWN["add_fp32"] + muxed * KNOWN["mux8_bit"]
                  + 8 * cycles * KNOWN["scheduler_lane"] + FLIP_FLOPS["tensordash"] * cycles * KNOWN["flip_flop_clock"])
        runs.append(Run("tensordash", f"l{index}", "fwd", energy, td, cycles, FLIP_FLOPS["tensordash"], macs))
    return runs


def test_a_fit_recovers_the_entries_and_the_clock_of_synthetic_runs():
    runs = _runs()
    fit = fit_table(runs, "bf16")
    assert set(fit.entries) == set(KNOWN) and fit.identified == len(KNOWN)
    for name, pj in KNOWN.items():
        assert fit.entries[name] == pytest.approx(pj, rel=1e-6), name
    assert all(abs(fit.residual(run)) < 1e-6 for run in runs)


def test_collinear_actions_give_non_negative_entries_that_still_charge_the_runs():
    """The baseline alone: its multiplies, adds and clocked cycles are in one proportion in every run (a cycle a
    step, a multiply and an add a MAC slot), so only one sum is measured; the fit splits it without a negative
    entry, and charges every run its energy."""
    runs = [run for run in _runs(seed=1) if run.design == "baseline"]
    fit = fit_table(runs, "bf16")
    assert fit.identified == 1 and min(fit.entries.values()) >= 0
    assert all(table_energy_pj(run, fit.entries, "bf16") == pytest.approx(run.energy_pj) for run in runs)
    with pytest.raises(ValueError, match="no measured run"):
        fit_table([], "bf16")


def test_asic_calibrate_writes_the_fitted_clock_into_a_table_the_mapper_reads(tmp_path):
    """``dashraker asic --calibrate``'s fit from two ``asic.json`` records (their energy with leakage, which the fit
    leaves out): the table it writes holds the known clock entry, cited."""
    from dashraker.mapping.config import load_energy_table
    from dashraker.sim.asic_cli import _calibrate

    runs = _runs(seed=2)
    records = []
    for design in FLIP_FLOPS:
        own = [run for run in runs if run.design == design]
        records.append({"design": design, "params": {"fmt": "bf16"}, "library": {"title": "Test library 45 nm"},
                        "area": {"flip_flops": FLIP_FLOPS[design]},
                        "energy": {"trace": "traces/x", "runs": [
                            {"layer": r.layer, "op": r.op, "fj": 1e3 * r.energy_pj + 500.0, "total": {"leakage": 500.0},
                             "counts": r.counts, "cycles": r.cycles, "macs": r.macs} for r in own]}})
    path = tmp_path / "fitted.yaml"
    fit = _calibrate(path, records, load_energy_table("horowitz45"))
    table = load_energy_table(str(path))
    assert table.entries["flip_flop_clock"] == pytest.approx(KNOWN["flip_flop_clock"], rel=1e-5)
    assert table.entries["add_fp32"] == pytest.approx(KNOWN["add_fp32"], rel=1e-5)
    assert fit.entries["flip_flop_clock"] == pytest.approx(KNOWN["flip_flop_clock"], rel=1e-6)
    text = path.read_text()
    assert "non-negative least squares over 24 runs of baseline, tensordash" in text
    assert "gate-level switching on Test library 45 nm, traces/x" in text


def test_the_clocking_is_a_component_of_every_report(tmp_path):
    """A mapped operation with a measured tile: its clocking in the row, the totals, the CSV and the printed table."""
    import dataclasses

    from test_map_cycles import config_file, linear

    from dashraker.mapping import silicon
    from dashraker.mapping.engine import map_op
    from dashraker.mapping.report import summary_table, write_csv
    from dashraker.mapping.runner import totals

    layer, tensors = linear(np.ones((4, 64)), np.ones((3, 64)))
    config = config_file(tmp_path, "baseline", tiles=1)
    tile = silicon.transistor_tile(config, 1000, 400)
    row = {**map_op(dataclasses.replace(config, tile=tile, reference_tile=tile), layer, tensors, "fwd"), "step": 0}
    assert row["clock_pj"] > 0 and row["energy_breakdown_pj"]["clock"] == row["clock_pj"]
    sums = totals([row])
    assert sums["baseline", "all"]["energy_breakdown_pj"]["clock"] == row["clock_pj"]
    write_csv(tmp_path / "map.csv", [row])
    header, line = (tmp_path / "map.csv").read_text().splitlines()[:2]
    values = dict(zip(header.split(","), line.split(",")))
    assert float(values["clock_pj"]) == float(values["energy_clock_pj"]) == pytest.approx(row["clock_pj"])
    text = summary_table([row], sums)
    assert "clock uJ" in text and f"{row['clock_pj'] / 1e6:>8.2f}" in text
