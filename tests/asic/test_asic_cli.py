"""``dashraker asic``: the whole flow on a one-lane tile (mapping, timing, the gate-level netlist on random and trace
passes checked against the RTL, energy), and bad input refused in one line before any synthesis."""

import json
import subprocess
import sys

import pytest

from dashraker.cli import main


def _dashraker(*args):
    return subprocess.run([sys.executable, "-m", "dashraker", *args], capture_output=True, text=True, timeout=600)


def _random_passes(root):
    """One run on random passes: the baseline's smallest tile; its record and printed report, checked."""
    done = _dashraker("asic", "baseline", "--lanes", "1", "--random", "3", "--clock-ns", "2", "--build",
                      str(root / "build"), "--out", str(root / "out"), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    record, text = json.loads((root / "out" / "asic.json").read_text()), done.stdout
    area, worst = record["area"], record["timing"]["worst"]
    assert area["um2"] > 0 and 0 < area["flip_flop_um2"] < area["um2"]
    assert set(record["area"]["parts"]) >= {"pe", "multipliers", "accumulator", "tile_own"}
    assert area["parts"]["pe"]["um2"] < area["um2"]
    assert worst["fmax_mhz"] == pytest.approx(1e3 / worst["delay_ns"])
    assert worst["start_register"] and worst["end_register"]
    (run,) = record["energy"]["runs"]
    assert run["passes"] == 3 and run["output_mismatches"] == 0 and run["cycle_mismatches"] == 0
    assert run["macs"] == 3 * 16  # 3 passes of 16 steps on one lane
    assert record["energy"]["period_ns"] == 2.0 and record["energy"]["clock"] == "given"
    assert run["fj"] == pytest.approx(sum(run["total"].values())) and run["total"]["clock"] > 0
    assert f"{area['um2']:,.0f} um2" in text and "yes" in text  # the report says what the record holds
    assert (root / "out" / "asic.md").read_text().strip() == text.split("\nwrote ")[0].strip()
    return record


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    from dashraker.trace import open_trace, record

    return open_trace(record("mlp", "digits", steps=[1], samples=1, out=tmp_path_factory.mktemp("asic_trace") / "mlp",
                             progress=False, threads=1))


@pytest.mark.early(seconds=150)
def test_the_flow_on_random_then_trace_passes_of_every_operation(small_trace, tmp_path):
    """One test, not two sharing a module fixture: each test worker would map the tile again for the fixture."""
    root = tmp_path
    first = _random_passes(root)
    layer = small_trace.layers[1].name  # a layer with all three operations
    done = _dashraker("asic", "baseline", "--lanes", "1", "--clock-ns", "2", "--trace", str(small_trace.path),
                      "--layer", layer, "--passes", "2", "--build", str(root / "build"), "--out", str(tmp_path / "o"),
                      "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "o" / "asic.json").read_text())
    assert record["area"] == first["area"]  # the mapped tile of the first run, reused
    runs = record["energy"]["runs"]
    assert [run["op"] for run in runs] == ["fwd", "bwd_input", "bwd_weight"]
    for run in runs:
        assert run["layer"] == layer and run["passes"] == 2
        assert run["output_mismatches"] == run["cycle_mismatches"] == 0
        assert 0 < run["useful_macs"] <= run["macs"]
    assert record["energy"]["step"] == small_trace.steps[-1]
    # a second design's passes, the first's joined to one table fitted to both
    done = _dashraker("asic", "fpraker", "--lanes", "1", "--clock-ns", "2", "--trace", str(small_trace.path),
                      "--layer", layer, "--passes", "2", "--build", str(root / "build"), "--add-report",
                      str(tmp_path / "o"), "--calibrate", str(tmp_path / "table.yaml"), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    from dashraker.mapping.config import load_energy_table

    import yaml

    table = load_energy_table(str(tmp_path / "table.yaml"))  # the mapper takes it as its energy_table
    data = yaml.safe_load((tmp_path / "table.yaml").read_text())
    fitted = {name: entry for name, entry in data["entries"].items() if entry.get("source") == "gate_level"}
    assert {"mul_bf16", "add_fp32", "term_shift", "term_encode", "flip_flop_clock"} <= set(fitted)
    assert all(table.entries[name] >= 0 for name in fitted) and table.entries["flip_flop_clock"] > 0
    assert all("non-negative least squares over 6 runs of fpraker, baseline" in entry["derivation"]
               for entry in fitted.values())  # three operations' passes of each design
    assert "gate-level switching on " in data["sources"]["gate_level"]
    assert f"wrote {tmp_path / 'table.yaml'}" in done.stdout
    other_step = tmp_path / "other_step"
    other_step.mkdir()
    (other_step / "asic.json").write_text(json.dumps({**record, "energy": {**record["energy"], "step": 99}}))
    calibrate = ["--calibrate", str(tmp_path / "t2.yaml")]
    for flags, message in (
            (["fpraker", "--add-report", str(tmp_path / "o")], "--add-report joins an earlier report's passes to "
                                                                 "--calibrate's fit: give --calibrate"),
            (["fpraker", "--add-report", str(other_step), *calibrate], f"step 99, not of {small_trace.path} step"),
            (["tensordash", "--lanes", "8", "--dtype", "fp32", "--add-report", str(tmp_path / "o"), *calibrate],
             "passes in bf16, this run's in fp32"),
            (["fpraker", "--add-report", str(tmp_path), *calibrate], "not a readable asic report"),
            (["baseline", "--add-report", str(tmp_path / "o"), *calibrate], "a report of baseline, the design this "
                                                                             "run measures")):
        done = _dashraker("asic", *flags, "--trace", str(small_trace.path), "--layer", layer, "--build",
                          str(tmp_path / "b2"))
        assert done.returncode == 2 and message in done.stderr, (flags, done.stderr)
    assert not (tmp_path / "b2").exists() and not (tmp_path / "t2.yaml").exists()


def test_an_operation_without_a_layer_takes_the_layers_that_have_it(small_trace, tmp_path):
    """The first layer has no input gradient (SPEC section 5): --op bwd_input alone skips it; naming it refuses."""
    from argparse import Namespace

    from dashraker.designs import DESIGNS
    from dashraker.errors import CliError
    from dashraker.sim.asic_cli import _passes

    params = DESIGNS["baseline"].params(lanes=1)
    ask = dict(random=None, trace=small_trace.path, step=None, passes=1, op="bwd_input")
    _, work = _passes(Namespace(**ask, layer=None), params)
    first = small_trace.layers[0].name
    assert work and {op for _, op, _ in work} == {"bwd_input"} and first not in {layer for layer, _, _ in work}
    with pytest.raises(CliError, match=f"layer '{first}' has no bwd_input passes"):
        _passes(Namespace(**ask, layer=[first]), params)


def test_bad_input_is_one_line_before_any_synthesis(tmp_path):
    build = tmp_path / "build"
    cases = [
        (["--clock-ns", "0"], "--clock-ns must be a positive period, not 0"),
        (["--random", "0"], "--random must be positive, not 0"),
        (["--trace", str(tmp_path / "missing")], "missing"),
        (["--layer", "fc"], "--layer, --op and --step choose passes of --trace: give it"),
        (["--random", "2", "--trace", str(tmp_path)], "give --trace or --random, not both"),
        (["--lanes", "64", "--max-minutes", "0.01"], "over the limit of 0.01"),
    ]
    for flags, message in cases:
        done = _dashraker("asic", "baseline", "--lanes", "1", "--build", str(build), "--no-progress", *flags)
        assert done.returncode == 2, (flags, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (flags, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not build.exists()  # nothing mapped, nothing half-written
    done = _dashraker("asic", "baseline", "--library", "nope")
    assert done.returncode == 2 and "invalid choice: 'nope'" in done.stderr


def test_a_missing_opensta_is_one_line(monkeypatch, tmp_path, capsys):
    from dashraker.asic import timing

    def missing():
        raise timing.TimingError("OpenSTA (sta) not found: run `make setup` (Debian package opensta)")

    monkeypatch.setattr(timing, "find_sta", missing)
    assert main(["asic", "baseline", "--lanes", "1", "--build", str(tmp_path / "build")]) == 2
    assert "OpenSTA (sta) not found" in capsys.readouterr().err
    assert not (tmp_path / "build").exists()
