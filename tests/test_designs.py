"""The design registry: parameters and their checks, descriptors, and that nothing else lists or names designs."""

import dataclasses
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import dashraker
from dashraker.designs import BASELINE, DESIGNS, Cost, Operands, Parameter, design, reference


def test_every_design_builds_with_its_defaults():
    for descriptor in DESIGNS.values():
        params = descriptor.params()
        assert [p.name for p in descriptor.parameters][:3] == ["rows", "cols", "fmt"]
        tile = descriptor.tile(params)
        tile._MustUse__silence = True  # built for its attributes only
        assert tile.lanes == params["lanes"]
        assert isinstance(descriptor.cost.operands, Operands)
    assert reference().name == "baseline" and sum(d.reference for d in DESIGNS.values()) == 1


@pytest.mark.parametrize("name, overrides, message", [
    ("fpraker", {"guard_bits": 8}, "guard_bits must be an integer in 0..7, not 8"),
    ("fpraker", {"fmt": "fp32"}, "fmt must be bf16, not 'fp32'"),
    ("fpraker", {"zero_block_cycles": 2}, "zero_block_cycles must be 1, not 2"),
    ("baseline", {"lanes": 0}, "lanes must be an integer >= 1, not 0"),
    ("baseline", {"rows": True}, "rows must be an integer >= 1, not True"),
    ("baseline", {"lookahead": 1}, "design 'baseline' has no parameter 'lookahead'"),
    ("tensordash", {"pattern": "(0,0),(1,x)"}, "cannot read offset"),
    ("tensordash", {"lookahead": 1}, "beyond lookahead 1"),  # T<2,5> reaches step 2
    ("tensordash", {"lanes": 4}, "names one slot twice with 4 lanes"),
    ("baseline", {"dot": "exact"}, "dot must be one of tree, fused, fma, not 'exact'"),
    ("tensordash", {"dot": "fma"}, "dot must be one of tree, fused, not 'fma'"),  # its lanes move products
    ("baseline", {"dot": "fused", "accumulators": 6}, "dot 'fused' adds into the fixed-point accumulator"),
    ("tensordash", {"dot": "fused", "accumulators": 1}, "accumulators must be 0, not 1"),
    ("tensordash", {"threads": 3}, "threads must be one of 1, 2, not 3"),
])
def test_parameters_are_checked_once_for_every_caller(name, overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DESIGNS[name].params(**overrides)


def _counts(params, arrays, value_bits):
    return {}


@pytest.mark.parametrize("make, message", [
    (lambda: Cost(operands="scheduled", evaluate=_counts, pass_counts=_counts),
     "Cost.operands must be an Operands member (Operands.NONE, Operands.SCHEDULED, Operands.BOTH), not 'scheduled'"),
    (lambda: Cost(operands=Operands.SCHEDULED, pass_counts=_counts), "Cost.evaluate must be a callable"),
    (lambda: Cost(operands=Operands.NONE, pass_counts="counts"), "Cost.pass_counts must be a callable, not 'counts'"),
    (lambda: Cost(operands=Operands.SCHEDULED, evaluate=_counts, evaluate_sets=_counts, pass_counts=_counts),
     "Cost.evaluate_sets must be None, or a callable with Operands.BOTH"),
    (lambda: Cost(operands=Operands.BOTH, evaluate=_counts, evaluate_sets="sets", pass_counts=_counts),
     "Cost.evaluate_sets must be None, or a callable with Operands.BOTH, not 'sets'"),
    (lambda: Cost(operands=Operands.NONE, pass_counts=_counts, max_values=0),
     "Cost.max_values must be a positive integer, not 0"),
    (lambda: Cost(operands=Operands.NONE, pass_counts=_counts, components={"mux_bits": 8}),
     "Cost.components must be a dict of action -> energy-table entry, not {'mux_bits': 8}"),
    (lambda: Parameter("lanes", 0, "lanes", minimum=1), "Parameter.default of 'lanes' must be an integer >= 1, not 0"),
    (lambda: Parameter("lanes", 1, "lanes", kind=float), "Parameter.kind must be int or str, not <class 'float'>"),
    (lambda: dataclasses.replace(BASELINE, cost="dense"), "Design.cost must be a Cost, not 'dense'"),
    (lambda: dataclasses.replace(BASELINE, reference=1), "Design.reference must be True or False, not 1"),
    (lambda: dataclasses.replace(BASELINE, golden=None), "Design.golden must be a callable, not None"),
    (lambda: dataclasses.replace(BASELINE, energy_parts={"lanes": "mul"}), "Design.energy_parts must be"),
    (lambda: dataclasses.replace(BASELINE, dataflow_params={"dnnsim": {"scheduler": "greedy"}}),
     "no 'scheduler'"),
    (lambda: dataclasses.replace(BASELINE, parameters=BASELINE.parameters[1:]), "tile_parameters(...) first"),
])
def test_a_wrong_descriptor_field_is_refused_where_it_is_made(make, message):
    """A wrong field is one ValueError naming it and its value when the descriptor is made, not a different figure
    at the end of a run (docs/adding-a-design.md once wrote ``operands="scheduled"``: a 4x energy undercount)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_tile_constructors_refuse_what_the_registry_refuses():
    from dashraker.hw.fpraker import Tile

    with pytest.raises(ValueError, match="guard_bits must be an integer in 0..7"):
        Tile(1, 1, 8, 8, 1)


def test_parameter_flags_and_file_keys():
    fmt = DESIGNS["baseline"].parameter("fmt")
    assert (fmt.option, fmt.key) == ("--dtype", "dtype")
    guard = DESIGNS["fpraker"].parameter("guard_bits")
    assert (guard.option, guard.key) == ("--guard-bits", "guard_bits")
    assert Parameter("x", 1, "x", minimum=0, maximum=3).describe() == "an integer in 0..3"


def test_design_pages_show_the_tiles_signatures():
    """A ``Tile(...)`` on a design's page is its generator's signature, without defaults (the registry holds them)."""
    import importlib
    import inspect

    docs = Path(__file__).resolve().parents[1] / "docs" / "designs"
    for name, descriptor in DESIGNS.items():
        tile = importlib.import_module(descriptor.packages[0]).Tile
        want = "Tile" + str(inspect.signature(tile))
        shown = [" ".join(found.split()) for found in re.findall(r"`(Tile\([^)`]*\))`", (docs / f"{name}.md").read_text())]
        assert shown and set(shown) == {want}, (name, shown, want)


def test_lookup_and_pickling_by_name():
    assert design("tensordash") is DESIGNS["tensordash"]
    with pytest.raises(ValueError, match="unknown design 'eyeriss'; choose from baseline, tensordash, fpraker"):
        design("eyeriss")
    assert pickle.loads(pickle.dumps(DESIGNS["fpraker"])) is DESIGNS["fpraker"]


def test_fused_dot_counts_its_own_actions():
    """With ``dot: fused`` a PE-cycle is N fused lanes and one frame add instead of N fp32 adds; a design without
    ``dot`` (FPRaker) is compared with the tree."""
    arrays = {name: np.array(value) for name, value in
              {"cycles": [3, 4], "steps": [3, 4], "rows": [2, 2], "cols": [1, 1]}.items()}
    baseline, tensordash = DESIGNS["baseline"], DESIGNS["tensordash"]
    assert baseline.cost.pass_counts(baseline.params(lanes=8, dot="fused"), arrays, 16) == {
        "mul": 112, "fused_lanes": 112, "frame_adds": 14}
    assert baseline.cost.pass_counts(baseline.params(lanes=8), arrays, 16) == {"mul": 112, "add_fp32": 112}
    counts = tensordash.cost.pass_counts(tensordash.params(dot="fused"), arrays, 16)
    assert (counts["fused_lanes"], counts["frame_adds"]) == (224, 14) and "add_fp32" not in counts
    assert "add_fp32" in baseline.cost.pass_counts(DESIGNS["fpraker"].params(), arrays, 16)


def test_fma_lanes_count_their_registers_and_the_pass_end_sums():
    """With ``dot: fma`` a PE-cycle is N multiplies, N fp32 adds and N register writes, and each PE's pass ends in
    N (L - 1) adds of the lanes' partials and the N - 1 of the lanes' tree: 2 passes x 2 PEs here."""
    arrays = {name: np.array(value) for name, value in
              {"cycles": [3, 4], "steps": [3, 4], "rows": [2, 2], "cols": [1, 1]}.items()}
    baseline = DESIGNS["baseline"]
    assert baseline.cost.pass_counts(baseline.params(lanes=8, dot="fma", accumulators=1), arrays, 16) == {
        "mul": 112, "add_fp32": 112 + 4 * 7, "lane_registers": 112}
    assert baseline.cost.pass_counts(baseline.params(lanes=8, dot="fma", accumulators=3), arrays, 16) == {
        "mul": 112, "add_fp32": 112 + 4 * (8 * 2 + 7), "lane_registers": 112}


def test_fma_takes_bf16_into_fp32_accumulators():
    baseline = DESIGNS["baseline"]
    with pytest.raises(ValueError, match="dot 'fma' accumulates each lane in fp32: accumulators must be at least 1"):
        baseline.params(dot="fma")
    with pytest.raises(ValueError, match="dot 'fma' multiplies bf16 operands exactly: fmt must be bf16, not fp32"):
        baseline.params(dot="fma", accumulators=1, fmt="fp32")


def test_every_counted_action_is_a_component():
    """A cost model counts the shared actions and those its ``Cost.components`` declares, its energy parts name
    them, and the registry's components keep the report's column order; two designs charging one action at
    different entries are refused."""
    import dataclasses

    from dashraker.mapping.components import MEMORY, SHARED, components

    arrays = {name: np.array([3]) for name in ("cycles", "steps", "rows", "cols")}
    for descriptor in DESIGNS.values():
        charged = {**SHARED, **descriptor.cost.components}
        dots = descriptor.parameter("dot").choices if "dot" in descriptor.params() else ()
        for overrides in [{"dot": dot, "accumulators": int(dot == "fma")} for dot in dots] or [{}]:
            counted = descriptor.cost.pass_counts(descriptor.params(**overrides), arrays, 16)
            assert set(counted) <= charged.keys(), (descriptor.name, overrides)
        assert set(descriptor.energy_parts.values()) <= charged.keys(), descriptor.name
    assert list(components()) == ["mul", "add_fp32", "add_int32", "fused_lanes", "frame_adds", "lane_registers",
                                  "mux_bits",
                                  "scheduler_lanes", "term_encodes", "terms", "exponent_lanes", "step_ends", *MEMORY]
    other = dataclasses.replace(DESIGNS["tensordash"].cost, components={"mux_bits": "mux2_bit"})
    with pytest.raises(ValueError, match="charges 'mux_bits' at 'mux2_bit', already charged at 'mux8_bit'"):
        components([*DESIGNS.values(), dataclasses.replace(DESIGNS["tensordash"], name="other", cost=other)])


def test_dense_cost_is_the_steps():
    values = np.ones((3, 1, 5, 16), np.float32)
    assert reference().cost.cycles(reference().params(), values, values).tolist() == [5, 5, 5]


def test_no_code_outside_a_design_names_it():
    """Only the registry, a design's own packages, tests, benchmarks and docs may name a design in quotes."""
    root = Path(dashraker.__file__).parent.parent
    own = {f"{folder}/{name}" for name in DESIGNS for folder in ("hw", "models")}
    quoted = re.compile(r"""["'](%s)["']""" % "|".join(DESIGNS))
    offenders = []
    for path in root.glob("*/**/*.py"):
        relative = path.relative_to(root).as_posix()
        if relative.split("/")[0] in ("tests", "bench", ".venv", "build") or relative.startswith("dashraker/designs/"):
            continue
        if any(relative == f"{package}.py" or relative.startswith(f"{package}/") for package in own):
            continue
        offenders += [f"{relative}:{number}" for number, line in enumerate(path.read_text().splitlines(), 1)
                      if quoted.search(line)]
    assert not offenders, f"design names outside the registry: {offenders}"
