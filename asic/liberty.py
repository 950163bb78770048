"""Reading Liberty (.lib) standard-cell libraries: units, cells, pins, logic functions and power tables.

The reader is our own (no dependency) and reads what the mapper, the timing and the power models need of a library
such as the Nangate FreePDK45 Open Cell Library: ``parse_groups`` gives the generic tree of groups and attributes,
``read_liberty`` the typed ``Liberty`` (cached per file, its modification time and size, in the process). Logic
functions are kept as written; ``verilog_expression`` and ``evaluate`` read them with Liberty's operator
precedence, which is inversion, then XOR, then AND, then OR (the Liberty Reference Manual, and OpenSTA's
``LibExprParse.yy``): ``A ^ B & C`` is ``(A ^ B) & C``.
"""

import bisect
import functools
import os
import re
from dataclasses import dataclass

__all__ = ["LibertyError", "Group", "Table", "PowerArc", "Pin", "Sequential", "Cell", "Liberty", "read_liberty",
           "parse_groups", "verilog_expression", "evaluate"]


class LibertyError(Exception):
    """A Liberty file that cannot be read: the message names the file, and the line where it applies."""


# --- the generic tree ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """One ``kind (args) { ... }`` group: ``attributes`` are ``(name, value, line)`` in file order, ``value`` a
    string for a simple attribute (``name : value ;``) and a tuple of strings for a complex one
    (``name (v1, v2) ;``), which may repeat; ``groups`` the groups inside, in file order."""
    kind: str
    args: tuple
    line: int
    attributes: tuple
    groups: tuple

    def get(self, name, default=None):
        """The value of the first attribute ``name``, else ``default``."""
        for attribute, value, _ in self.attributes:
            if attribute == name:
                return value
        return default

    def line_of(self, name):
        """The line of the first attribute ``name`` (the group's own line where it has none)."""
        for attribute, _, line in self.attributes:
            if attribute == name:
                return line
        return self.line

    def children(self, kind):
        """The groups of ``kind`` inside this one, in file order."""
        return tuple(group for group in self.groups if group.kind == kind)


# Blanks (whitespace, `\` line continuations, /* */ comments; possessive, so that a comment is never read as
# tokens) before each token, then the token: a quoted string (in which `\` escapes the next character, a newline
# included), a word (names, numbers, unquoted values), a punctuation mark, anything else (a stray character, an
# unterminated string or comment), or the end of the text. Each match so starts where the last one ended.
_TOKEN = re.compile(r"""(?:\s|\\[ \t]*\r?\n|/\*.*?\*/)*+
    (?: "(?P<string>(?:[^"\\]|\\.)*)"
      | (?P<word>(?:[^\s"(){}:;,\\/]|/(?!\*))+)
      | (?P<punct>[(){}:;,])
      | (?P<bad>\S)
      | (?P<end>\Z) )""", re.S | re.X)
_CONTINUATION = re.compile(r"\\[ \t]*\r?\n")
_VALUE = ("string", "word")


def parse_groups(text, path="<text>"):
    """The groups at the top of Liberty ``text`` (a file holds one, ``library``), as ``Group`` trees; raises
    ``LibertyError`` naming ``path`` and the line of a syntax error."""
    newlines = [match.start() for match in re.finditer("\n", text)]
    tokens = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        position = match.start(kind)
        if kind == "bad":
            what = {'"': "an unterminated string", "/": "an unterminated comment",
                    "\\": "a '\\' that does not end the line"}.get(match["bad"], f"the character {match['bad']!r}")
            raise LibertyError(f"{path}:{bisect.bisect(newlines, position) + 1}: {what}")
        value = match[kind]
        if kind == "string":
            value = _CONTINUATION.sub("", value)
        elif kind == "punct":
            kind = value
        tokens.append((kind, value, position))
    reader = _Reader(tokens, newlines, path)
    attributes, groups = reader.statements(None)
    if attributes:
        raise LibertyError(f"{path}:{attributes[0][2]}: attribute {attributes[0][0]} outside any group")
    return groups


class _Reader:
    """The recursive reader of a token list (``parse_groups``)."""

    def __init__(self, tokens, newlines, path):
        self.tokens, self.newlines, self.path, self.at = tokens, newlines, path, 0

    def line(self, position):
        return bisect.bisect(self.newlines, position) + 1

    def fail(self, token, expected):
        kind, value, position = token
        found = "the end of the file" if kind == "end" else f"{value!r}"
        raise LibertyError(f"{self.path}:{self.line(position)}: expected {expected}, found {found}")

    def take(self, *kinds, expected):
        token = self.tokens[self.at]
        if token[0] not in kinds:
            self.fail(token, expected)
        self.at += 1
        return token

    def statements(self, opened):
        """Attributes and groups up to the ``}`` closing the group ``opened`` (its header's token; None: the end of
        the text)."""
        attributes, groups = [], []
        tokens = self.tokens
        while True:
            kind, name, position = tokens[self.at]
            if kind == "}" and opened is not None or kind == "end" and opened is None:
                self.at += 1
                return tuple(attributes), tuple(groups)
            if kind == "end":
                raise LibertyError(f"{self.path}:{self.line(opened[2])}: group {opened[1]} is never closed")
            self.take("word", expected="an attribute or a group")
            line = self.line(position)
            separator = self.take(":", "(", expected=f"':' or '(' after {name}")
            if separator[0] == ":":
                value = self.take(*_VALUE, expected=f"the value of {name}")[1]
                if tokens[self.at][0] == ";":  # optional, as in OpenSTA
                    self.at += 1
                attributes.append((name, value, line))
                continue
            args = []
            while tokens[self.at][0] != ")":
                args.append(self.take(*_VALUE, expected=f"a value or ')' in {name} (...)")[1])
                if tokens[self.at][0] == ",":
                    self.at += 1
            self.at += 1
            if tokens[self.at][0] != "{":
                if tokens[self.at][0] == ";":  # optional too
                    self.at += 1
                attributes.append((name, tuple(args), line))
                continue
            self.at += 1
            inner, children = self.statements((kind, name, position))
            groups.append(Group(name, tuple(args), line, inner, children))


# --- logic functions ----------------------------------------------------------------------------------------------

_FUNCTION_TOKEN = re.compile(r"\s*(?:([A-Za-z_][\w.\[\]]*)|([01])|([!'&*|+^()])|(\S))")


@functools.lru_cache(maxsize=4096)
def _function_tree(function):
    """The parse tree of a Liberty boolean ``function``: ``("var", name)``, ``("const", 0|1)``, ``("not", x)``,
    ``("and"|"xor"|"or", a, b)``; raises ValueError naming the function and what is wrong."""
    tokens = []
    for match in _FUNCTION_TOKEN.finditer(function):
        name, constant, operator, bad = match.groups()
        if bad is not None:
            raise ValueError(f"function {function!r}: unexpected {bad!r} at {match.start(4)}")
        tokens.append(("var", name) if name else ("const", int(constant)) if constant else (operator, operator))
    tokens.append(("end", None))
    at = 0

    def peek():
        return tokens[at][0]

    def advance():
        nonlocal at
        at += 1
        return tokens[at - 1]

    def binary(operators, operand, node, juxtaposed=False):
        left = operand()
        # juxtaposition (a space) is AND: an operand starting right after one ends
        while peek() in operators or juxtaposed and peek() in ("var", "const", "(", "!"):
            if peek() in operators:
                advance()
            left = (node, left, operand())
        return left

    def disjunction():
        return binary(("|", "+"), conjunction, "or")

    def conjunction():
        return binary(("&", "*"), exclusive, "and", juxtaposed=True)

    def exclusive():
        return binary(("^",), inversion, "xor")

    def inversion():
        if peek() == "!":
            advance()
            return ("not", inversion())
        kind, value = advance()
        if kind in ("var", "const"):
            node = (kind, value)
        elif kind == "(":
            node = disjunction()
            if advance()[0] != ")":
                raise ValueError(f"function {function!r}: a '(' is not closed")
        else:
            raise ValueError(f"function {function!r}: expected a pin, 0, 1, '!' or '(', found "
                             f"{'the end' if kind == 'end' else repr(value)}")
        while peek() == "'":
            advance()
            node = ("not", node)
        return node

    tree = disjunction()
    if peek() != "end":
        raise ValueError(f"function {function!r}: unexpected {tokens[at][1]!r} after a complete expression")
    return tree


def verilog_expression(function, rename=lambda pin: pin):
    """The Liberty boolean ``function`` as a fully parenthesised Verilog expression (``~ & | ^``, constants
    ``1'b0``/``1'b1``) over ``rename(pin)`` for each pin it names; raises ValueError for a malformed function."""
    def write(node):
        kind = node[0]
        if kind == "var":
            return rename(node[1])
        if kind == "const":
            return f"1'b{node[1]}"
        if kind == "not":
            return f"(~{write(node[1])})"
        return f"({write(node[1])} {_VERILOG_OPERATOR[kind]} {write(node[2])})"

    return write(_function_tree(function))


_VERILOG_OPERATOR = {"and": "&", "or": "|", "xor": "^"}


def evaluate(function, values):
    """The value (0 or 1) of the Liberty boolean ``function`` where each pin it names has the 0/1 value given in
    ``values`` (pin -> value); raises ValueError for a malformed function or a pin without a value."""
    def value(node):
        kind = node[0]
        if kind == "var":
            if node[1] not in values:
                raise ValueError(f"function {function!r}: no value for {node[1]!r} (given {sorted(values)})")
            return 1 if values[node[1]] else 0
        if kind == "const":
            return node[1]
        if kind == "not":
            return 1 - value(node[1])
        left, right = value(node[1]), value(node[2])
        return left & right if kind == "and" else left | right if kind == "or" else left ^ right

    return value(_function_tree(function))


# --- the typed library --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    """A lookup table with its template resolved: ``values[i][j]`` at ``index_1[i]``, ``index_2[j]`` (a 1-D table
    has one row, along ``index_1``; a scalar, no variables and one value)."""
    variables: tuple
    index_1: tuple
    index_2: tuple
    values: tuple

    def __post_init__(self):
        dimensions = len(self.variables)
        indexes = (self.index_1, self.index_2)
        if dimensions > 2:
            raise ValueError(f"table over {self.variables}: more than two variables")
        if not all(indexes[:dimensions]) or any(indexes[dimensions:]):
            raise ValueError(f"table over {self.variables}: indexes {self.index_1}, {self.index_2} do not match")
        for axis in indexes[:dimensions]:
            if any(low >= high for low, high in zip(axis, axis[1:])):
                raise ValueError(f"table over {self.variables}: index {axis} does not increase")
        shape = (len(self.index_1), len(self.index_2)) if dimensions == 2 else (1, len(self.index_1) or 1)
        if len(self.values) != shape[0] or any(len(row) != shape[1] for row in self.values):
            raise ValueError(f"table over {self.variables}: values {self.values} are not {shape[0]} rows of "
                             f"{shape[1]}")

    def lookup(self, **by_variable):
        """The value at the given variables (others ignored): bilinear interpolation between the grid points, linear
        extrapolation from the two nearest beyond them (as OpenSTA does)."""
        missing = [variable for variable in self.variables if variable not in by_variable]
        if missing:
            raise ValueError(f"lookup of a table over {self.variables}: no value for {missing}")
        if not self.variables:
            return self.values[0][0]
        i, i1, t = _bracket(self.index_1, by_variable[self.variables[0]])
        if len(self.variables) == 1:
            row = self.values[0]
            return (1 - t) * row[i] + t * row[i1]
        j, j1, u = _bracket(self.index_2, by_variable[self.variables[1]])
        v = self.values
        return (1 - t) * (1 - u) * v[i][j] + t * (1 - u) * v[i1][j] + (1 - t) * u * v[i][j1] + t * u * v[i1][j1]


def _bracket(axis, x):
    """The grid points either side of ``x`` on ``axis`` (the two at the end beyond it) and ``x``'s fraction of the
    way from the first to the second."""
    if len(axis) == 1:
        return 0, 0, 0.0
    i = min(max(bisect.bisect_right(axis, x) - 1, 0), len(axis) - 2)
    return i, i + 1, (x - axis[i]) / (axis[i + 1] - axis[i])


@dataclass(frozen=True)
class PowerArc:
    """One ``internal_power`` group of a pin: energy per transition (in ``Liberty.internal_energy_fj`` units) under
    the state ``when`` (Liberty boolean syntax, None: any)."""
    related_pin: str | None
    when: str | None
    rise: Table | None
    fall: Table | None


_DIRECTIONS = ("input", "output", "inout", "internal")


@dataclass(frozen=True)
class Pin:
    """A cell's pin: capacitance in the library's ``capacitive_load_unit`` (0.0 where not stated), its function
    and three-state condition as written."""
    name: str
    direction: str
    capacitance: float
    function: str | None
    three_state: str | None
    clock: bool
    internal_power: tuple
    max_capacitance: float | None

    def __post_init__(self):
        if self.direction not in _DIRECTIONS:
            raise ValueError(f"pin {self.name}: direction {self.direction!r} is not one of {_DIRECTIONS}")


@dataclass(frozen=True)
class Sequential:
    """A cell's ``ff`` or ``latch`` group: for a latch ``next_state`` is its ``data_in`` and ``clocked_on`` its
    ``enable``; ``states`` the group's two names (the state and its inverse)."""
    kind: str
    states: tuple
    next_state: str | None
    clocked_on: str | None
    clear: str | None
    preset: str | None
    clear_preset_var1: str | None
    clear_preset_var2: str | None

    def __post_init__(self):
        if self.kind not in ("ff", "latch") or len(self.states) != 2:
            raise ValueError(f"{self.kind} {self.states}: not an ff or latch group of two state names")


@dataclass(frozen=True)
class Cell:
    """A library cell: area in the library's area unit (um^2 here), leakage in its ``leakage_power_unit``; pins in
    file order; ``sequential`` its ff/latch group (None for logic and for a ``statetable`` cell)."""
    name: str
    area: float
    leakage: float
    pins: dict
    sequential: Sequential | None
    statetable: bool
    dont_use: bool

    @property
    def inputs(self):
        return tuple(name for name, pin in self.pins.items() if pin.direction == "input")

    @property
    def outputs(self):
        return tuple(name for name, pin in self.pins.items() if pin.direction == "output")


@dataclass(frozen=True)
class Liberty:
    """A library's units (as multiples of ns, fF, nW, fJ), nominal voltage and cells (name -> Cell, file order)."""
    path: str
    name: str
    time_unit_ns: float
    capacitance_ff: float
    leakage_nw: float
    voltage: float
    internal_energy_fj: float
    default_input_transition: float | None
    cells: dict


def read_liberty(path):
    """The ``Liberty`` in the file at ``path`` (parsed once per content: the process caches it by path, modification
    time and size); raises ``LibertyError``."""
    path = os.path.abspath(os.fspath(path))
    try:
        stat = os.stat(path)
    except OSError as error:
        raise LibertyError(f"{path}: {error.strerror}") from None
    return _read_cached(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _read_cached(path, mtime_ns, size):
    """``read_liberty``'s reading, cached: the modification time and size are part of the key, so an edited file is
    read again."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError as error:
        raise LibertyError(f"{path}: {error.strerror}") from None
    libraries = [group for group in parse_groups(text, path) if group.kind == "library"]
    if len(libraries) != 1:
        raise LibertyError(f"{path}:1: {len(libraries)} library groups, not one")
    return _Library(libraries[0], path).liberty()


# Units as multiples of the ones the fields are in.
_TIME_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}
_POWER_NW = {"w": 1e9, "mw": 1e6, "uw": 1e3, "nw": 1.0, "pw": 1e-3, "fw": 1e-6}
_VOLTAGE_V = {"v": 1.0, "mv": 1e-3}
_CAPACITANCE_FF = {"ff": 1.0, "pf": 1e3, "nf": 1e6}
_QUANTITY = re.compile(r"\s*([-+0-9.eE]+)\s*([A-Za-z]+)\s*$")


class _Library:
    """The typed reading of one ``library`` group (``read_liberty``)."""

    def __init__(self, group, path):
        self.group, self.path = group, path
        self.templates = {template.args[0]: template for kind in ("lu_table_template", "power_lut_template")
                          for template in group.children(kind) if template.args}

    def fail(self, line, message):
        raise LibertyError(f"{self.path}:{line}: {message}")

    def number(self, group, name, default):
        value = group.get(name)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            self.fail(group.line_of(name), f"{name} {value!r} is not a number")

    def unit(self, name, scales, default):
        """The library's unit ``name`` (e.g. ``time_unit : "1ns"``) in the multiples ``scales`` gives."""
        value = self.group.get(name, default)
        if value is None:
            self.fail(self.group.line, f"library {self.group.args[0]} states no {name}")
        match = _QUANTITY.match(value)
        if match is None or match[2].lower() not in scales:
            self.fail(self.group.line_of(name), f"{name} {value!r} is not a number and one of {sorted(scales)}")
        return float(match[1]) * scales[match[2].lower()]

    def function(self, group, name):
        """Attribute ``name``, a boolean function, checked to parse."""
        value = group.get(name)
        if value is not None:
            try:
                _function_tree(value)
            except ValueError as error:
                self.fail(group.line_of(name), str(error))
        return value

    def liberty(self):
        group = self.group
        load = group.get("capacitive_load_unit")
        if load is None:
            self.fail(group.line, f"library {group.args[0]} states no capacitive_load_unit")
        if len(load) != 2 or load[1].lower() not in _CAPACITANCE_FF:
            self.fail(group.line_of("capacitive_load_unit"), f"capacitive_load_unit {load} is not (number, ff|pf|nf)")
        try:
            capacitance_ff = float(load[0]) * _CAPACITANCE_FF[load[1].lower()]
        except ValueError:
            self.fail(group.line_of("capacitive_load_unit"), f"capacitive_load_unit {load} is not (number, unit)")
        voltage_v = self.unit("voltage_unit", _VOLTAGE_V, "1V")
        voltage = self.number(group, "nom_voltage", None)
        if voltage is None:
            self.fail(group.line, f"library {group.args[0]} states no nom_voltage")
        default_leakage = self.number(group, "default_cell_leakage_power", 0.0)
        cells = {}
        for cell in group.children("cell"):
            if not cell.args:
                self.fail(cell.line, "a cell without a name")
            cells[cell.args[0]] = self.cell(cell, default_leakage)
        return Liberty(path=self.path, name=group.args[0] if group.args else "",
                       time_unit_ns=self.unit("time_unit", _TIME_NS, "1ns"), capacitance_ff=capacitance_ff,
                       leakage_nw=self.unit("leakage_power_unit", _POWER_NW, None), voltage=voltage,
                       internal_energy_fj=voltage_v * capacitance_ff,
                       default_input_transition=self.number(group, "default_input_transition", None), cells=cells)

    def cell(self, cell, default_leakage):
        pins = {}
        for pin in cell.children("pin"):
            for name in pin.args:
                pins[name] = self.pin(pin, name)
        sequential = cell.children("ff") + cell.children("latch")
        if len(sequential) > 1:
            self.fail(sequential[1].line, f"cell {cell.args[0]} has {len(sequential)} ff/latch groups")
        return Cell(name=cell.args[0], area=self.number(cell, "area", 0.0),
                    leakage=self.number(cell, "cell_leakage_power", default_leakage), pins=pins,
                    sequential=self.sequential(sequential[0]) if sequential else None,
                    statetable=bool(cell.children("statetable")), dont_use=cell.get("dont_use") == "true")

    def pin(self, pin, name):
        try:
            return Pin(name=name, direction=pin.get("direction"), capacitance=self.number(pin, "capacitance", 0.0),
                       function=self.function(pin, "function"), three_state=self.function(pin, "three_state"),
                       clock=pin.get("clock") == "true",
                       internal_power=tuple(self.power_arc(arc) for arc in pin.children("internal_power")),
                       max_capacitance=self.number(pin, "max_capacitance", None))
        except ValueError as error:
            self.fail(pin.line_of("direction"), str(error))

    def power_arc(self, arc):
        rise, fall = arc.children("rise_power"), arc.children("fall_power")
        return PowerArc(related_pin=arc.get("related_pin"), when=self.function(arc, "when"),
                        rise=self.table(rise[0]) if rise else None, fall=self.table(fall[0]) if fall else None)

    def sequential(self, group):
        latch = group.kind == "latch"
        fields = {"next_state": "data_in" if latch else "next_state", "clocked_on": "enable" if latch else "clocked_on",
                  "clear": "clear", "preset": "preset"}
        try:
            return Sequential(kind=group.kind, states=group.args,
                              **{field: self.function(group, name) for field, name in fields.items()},
                              clear_preset_var1=group.get("clear_preset_var1"),
                              clear_preset_var2=group.get("clear_preset_var2"))
        except ValueError as error:
            self.fail(group.line, str(error))

    def table(self, group):
        name = group.args[0] if group.args else "scalar"
        if name == "scalar":
            variables, template = (), None
        elif name in self.templates:
            template = self.templates[name]
            variables = tuple(template.get(f"variable_{k}") for k in (1, 2, 3) if template.get(f"variable_{k}"))
        else:
            self.fail(group.line, f"{group.kind} uses the unknown template {name!r}")

        def numbers(attribute):
            strings = group.get(attribute) or (template.get(attribute, ()) if template else ())
            try:
                return tuple(tuple(float(number) for number in string.replace(",", " ").split())
                             for string in strings)
            except ValueError:
                self.fail(group.line_of(attribute), f"{attribute} {strings} are not numbers")

        index_1, index_2 = (sum(numbers(axis), ()) for axis in ("index_1", "index_2"))
        try:
            return Table(variables, index_1, index_2, numbers("values"))
        except ValueError as error:
            self.fail(group.line, f"{group.kind} ({name}): {error}")
