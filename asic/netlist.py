"""A flattened gate-level netlist (Yosys's JSON of the mapped cells) as a circuit to simulate and to charge.

``Netlist`` reads ``flat.json`` (``asic.synthesis``): every cell with its instance path and library cell,
every net bit with its driver and the input pins it loads. ``simulation_verilog`` writes the same
circuit as one Verilog module of single-bit nets ``n<bit>`` (Yosys's bit numbers): a continuous
assignment per output pin of a logic cell from the library's own function, a register per flip-flop
from its ``ff`` group, clocked by the tile's clock port. The cells' own Verilog models are not
used: their user-defined primitives and specify blocks are not Verilator's, and one module with
one variable per net gives toggle counting (``sim.toggles``) exactly one count per cell output.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from dashraker.asic.liberty import verilog_expression

__all__ = ["NetlistError", "Cell", "Netlist", "net_name"]

CLOCK, RESET = "clk", "rst"


class NetlistError(Exception):
    """A netlist that cannot be simulated or charged as it is: the message names the cell or net."""


def net_name(bit):
    """The simulation Verilog's name of net bit ``bit`` (what toggle counting reports)."""
    return f"n{bit}"


@dataclass(frozen=True)
class Cell:
    """One placed library cell: its instance path (``pe0_0.mul0._123_``), library cell and pin -> net bit (an int,
    or "0"/"1" for a constant)."""

    name: str
    type: str
    pins: dict

    @property
    def instance(self):
        """The module instance holding it (``pe0_0.mul0``; "" for the top)."""
        return self.name.rpartition(".")[0]


class Netlist:
    """The flattened tile ``top`` of ``flat.json`` on the ``liberty`` it was mapped to (``asic.liberty.Liberty``).

    Attributes: ``cells`` (list of ``Cell``), ``ports`` ({name: (direction, [bits])}), ``clock`` (the clock port's
    bit), ``drivers`` ({bit: (cell, pin)}), ``loads`` ({bit: input capacitance driven, in the library's unit}),
    ``fanout`` ({bit: [(cell, pin)]}).
    """

    def __init__(self, path, top, liberty):
        try:
            module = json.loads(Path(path).read_text())["modules"][top]
        except (OSError, json.JSONDecodeError, KeyError) as error:
            raise NetlistError(f"{path}: no flattened module {top!r} ({error})") from None
        self.top, self.liberty = top, liberty
        self.ports = {name: (port["direction"], port["bits"]) for name, port in module["ports"].items()}
        if CLOCK not in self.ports or len(self.ports[CLOCK][1]) != 1:
            raise NetlistError(f"{path}: {top} has no one-bit clock port {CLOCK!r}")
        self.clock = self.ports[CLOCK][1][0]
        self.cells = []
        for name, raw in module["cells"].items():
            if raw["type"] not in liberty.cells:
                raise NetlistError(f"{path}: cell {name} is a {raw['type']}, not a cell of {liberty.name}")
            pins = {pin: bits[0] for pin, bits in raw["connections"].items() if bits}
            self.cells.append(Cell(name.lstrip("\\"), raw["type"], pins))
        self.drivers, self.fanout, self.loads = {}, {}, {}
        for cell in self.cells:
            library_cell = liberty.cells[cell.type]
            for pin, bit in cell.pins.items():
                if isinstance(bit, str):
                    continue
                if pin in library_cell.outputs:
                    if bit in self.drivers:
                        raise NetlistError(f"{path}: net {bit} has two drivers, {self.drivers[bit][0].name} and "
                                           f"{cell.name}")
                    self.drivers[bit] = (cell, pin)
                else:
                    self.fanout.setdefault(bit, []).append((cell, pin))
                    self.loads[bit] = self.loads.get(bit, 0.0) + library_cell.pins[pin].capacitance
        inputs = {bit for direction, bits in self.ports.values() if direction == "input" for bit in bits}
        undriven = sorted(bit for bit in self.fanout if bit not in self.drivers and bit not in inputs)
        if undriven:
            cell, pin = self.fanout[undriven[0]][0]
            raise NetlistError(f"{path}: {len(undriven)} nets are driven by nothing (first: {cell.name}.{pin})")

    def simulation_verilog(self):
        """The circuit as one Verilog module named ``top`` with the tile's ports (see the module docstring)."""
        liberty = self.liberty
        lines, body, state = [], [], 0
        declared = set()

        def net(bit):
            return {"0": "1'b0", "1": "1'b1"}[bit] if isinstance(bit, str) else net_name(bit)

        def wire(bit, kind="wire"):
            if not isinstance(bit, str) and bit not in declared:
                declared.add(bit)
                lines.append(f"  {kind} {net_name(bit)};")

        for name, (direction, bits) in self.ports.items():
            width = f" [{len(bits) - 1}:0]" if len(bits) > 1 else ""
            lines.append(f"  {direction}{width} {name};")
            for index, bit in enumerate(bits):
                port_bit = f"{name}[{index}]" if len(bits) > 1 else name
                if direction == "input" and not isinstance(bit, str):
                    wire(bit)
                    body.append(f"  assign {net_name(bit)} = {port_bit};")
                elif direction == "output":
                    body.append(f"  assign {port_bit} = {net(bit)};")
        for cell in self.cells:
            library_cell = liberty.cells[cell.type]
            rename = lambda pin, cell=cell: net(cell.pins.get(pin, "0"))  # noqa: E731 (an unconnected input: 0)
            sequential = library_cell.sequential
            if library_cell.statetable or (sequential is not None and sequential.kind != "ff"):
                raise NetlistError(f"cell {cell.name}: {cell.type} is not a flip-flop or logic: not simulated")
            if sequential is not None:
                clock = sequential.clocked_on
                if clock not in cell.pins or cell.pins[clock] != self.clock:
                    raise NetlistError(f"cell {cell.name}: {cell.type} is not clocked by {CLOCK} (only one rising "
                                       "clock is simulated)")
                for kind in ("clear", "preset"):
                    condition = getattr(sequential, kind)
                    if condition is not None and _constant(condition, cell, library_cell) != 0:
                        raise NetlistError(f"cell {cell.name}: {cell.type}'s asynchronous {kind} is used: not "
                                           "simulated")
                outputs = {library_cell.pins[pin].function: bit for pin, bit in cell.pins.items()
                           if pin in library_cell.outputs and not isinstance(bit, str)}
                true_state = sequential.states[0]
                if true_state in outputs:
                    register = net_name(outputs[true_state])
                    declared.add(outputs[true_state])
                else:
                    register = f"s{state}"
                    state += 1
                lines.append(f"  reg {register};")
                body.append(f"  always @(posedge {CLOCK}) {register} <= "
                            f"{verilog_expression(sequential.next_state, rename)};")
                states = {true_state: register, sequential.states[1]: f"~{register}"}
                for function, bit in outputs.items():
                    if net_name(bit) != register:
                        wire(bit)
                        if function not in states:
                            raise NetlistError(f"cell {cell.name}: output function {function!r} of {cell.type} is "
                                               "not its state")
                        body.append(f"  assign {net_name(bit)} = {states[function]};")
                continue
            for pin, bit in cell.pins.items():
                if pin in library_cell.outputs and not isinstance(bit, str):
                    function = library_cell.pins[pin].function
                    if function is None or library_cell.pins[pin].three_state:
                        raise NetlistError(f"cell {cell.name}: output {pin} of {cell.type} has no logic function")
                    wire(bit)
                    body.append(f"  assign {net_name(bit)} = {verilog_expression(function, rename)};")
        for bit in self.fanout:
            wire(bit)
        header = f"module {self.top}({', '.join(self.ports)});"
        # nothing traced: pyverilator builds every model with --trace, and a packaged tile's tracing code took
        # longer to compile than the rest of its model; toggles are counted without it
        return "\n".join([f"// {self.top} mapped onto {liberty.name}, flattened for gate-level simulation", header,
                          "  /*verilator tracing_off*/", *lines, *body, "endmodule"]) + "\n"


def _constant(condition, cell, library_cell):
    """The value of a cell's ``condition`` over its pins when it is the same for every value of the pins tied to a
    net (the others at their constants); None where it depends on a net."""
    import itertools

    from dashraker.asic.liberty import evaluate

    fixed = {pin: int(cell.pins.get(pin, "0")) for pin in library_cell.inputs
             if isinstance(cell.pins.get(pin, "0"), str)}
    free = [pin for pin in library_cell.inputs if pin not in fixed]
    values = {evaluate(condition, {**fixed, **dict(zip(free, bits))})
              for bits in itertools.product((0, 1), repeat=len(free))}
    return values.pop() if len(values) == 1 else None
