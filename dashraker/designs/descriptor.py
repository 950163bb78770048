"""What the project knows about a design, stated once: parameters, generator, models, costs, payloads.

A ``Design`` is the single descriptor of a design (SPEC section 1). The command line
(``verilog``, ``fpga``, ``cosim``, ``map``), the mapper's configuration files,
co-simulation and the tests build their options, checks and behaviour from it.
Descriptors import their generators at the top (the hardware never imports the
registry) and their PyTorch models only when called, so listing the designs
(``dashraker --help``) does not import PyTorch.
"""

import dataclasses
import enum
import hashlib
import importlib.util
import re
from pathlib import Path
from typing import Callable

__all__ = ["Parameter", "Operands", "Cost", "Claim", "Design", "tile_parameters"]


def _require(owner, field, ok, what):
    """``ValueError`` naming ``owner``'s ``field``, what it must be and its value, unless ``ok``: a descriptor is
    checked where it is made, so a wrong field never becomes a silently different figure."""
    if not ok:
        value = getattr(owner, field)
        raise ValueError(f"{type(owner).__name__}.{field} must be {what}, not {value!r}")


def _text(value):
    return isinstance(value, str) and bool(value.strip())


def _text_tuple(value):
    return isinstance(value, tuple) and all(map(_text, value))


def _optional_callable(value):
    return value is None or callable(value)


def _integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _text_dict(value):
    return isinstance(value, dict) and all(_text(key) and _text(entry) for key, entry in value.items())


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One generator parameter with its one default and one range check.

    ``name`` is the Python name (``guard_bits``); ``flag`` the command-line flag
    (default ``--guard-bits``); ``kind`` ``int`` or ``str``; ``minimum``/``maximum``
    bound integers, ``choices`` lists the allowed values; ``validate`` (optional) checks
    a value beyond its type and range (raising ``ValueError``), e.g. parses a pattern.
    """

    name: str
    default: object
    help: str
    kind: type = int
    minimum: int = None
    maximum: int = None
    choices: tuple = None
    flag: str = None
    validate: Callable = None

    def __post_init__(self):
        _require(self, "name", _text(self.name) and self.name.isidentifier(), "a Python name")
        _require(self, "help", _text(self.help), "a non-empty string")
        _require(self, "kind", self.kind in (int, str), "int or str")
        for bound in ("minimum", "maximum"):
            _require(self, bound, getattr(self, bound) is None or _integer(getattr(self, bound)), "an integer or None")
        _require(self, "choices", self.choices is None or (isinstance(self.choices, tuple) and len(self.choices) > 0),
                 "a non-empty tuple or None")
        _require(self, "flag", self.flag is None or (_text(self.flag) and self.flag.startswith("--")),
                 "a flag starting with -- or None")
        _require(self, "validate", _optional_callable(self.validate), "a callable or None")
        try:
            self.check(self.default)
        except ValueError as error:
            raise ValueError(f"Parameter.default of {self.name!r} {error}") from None

    @property
    def option(self):
        """The command-line flag."""
        return self.flag or "--" + self.name.replace("_", "-")

    def describe(self):
        """The allowed values, in words."""
        if self.choices is not None:
            return str(self.choices[0]) if len(self.choices) == 1 else "one of " + ", ".join(map(str, self.choices))
        if self.kind is int:
            if self.maximum is not None:
                return f"an integer in {self.minimum}..{self.maximum}"
            return f"an integer >= {self.minimum}" if self.minimum is not None else "an integer"
        return "a non-empty string"

    def check(self, value):
        """``value`` if allowed, else ``ValueError`` saying what is allowed (callers name the parameter: by its
        Python name, flag or file field)."""
        problem = None
        if self.choices is not None:
            problem = isinstance(value, bool) or value not in self.choices
        elif self.kind is int:
            problem = (isinstance(value, bool) or not isinstance(value, int)
                       or (self.minimum is not None and value < self.minimum)
                       or (self.maximum is not None and value > self.maximum))
        elif self.kind is str:
            # a validated text parameter may also come as a list from a file (a pattern as [step, lane] pairs)
            problem = not ((isinstance(value, str) and value.strip()) or (self.validate and isinstance(value, (list, tuple))))
        if problem:
            raise ValueError(f"must be {self.describe()}, not {value!r}")
        if self.validate is not None:
            try:
                self.validate(value)
            except (TypeError, ValueError) as error:
                raise ValueError(str(error)) from None
        return value

    @property
    def key(self):
        """The field name in configuration files: the flag without dashes (``guard_bits``, ``dtype``)."""
        return self.option[2:].replace("-", "_")

    def add_argument(self, parser):
        """Add the flag to an argparse parser; the value is checked later by ``check``, so that every refusal
        (flag, file field, Python call) reads alike."""
        kind = self.kind if self.choices is None else type(self.choices[0])
        parser.add_argument(self.option, dest=self.name, type=kind, metavar=self.key.upper(), default=self.default,
                            help=f"{self.help}: {self.describe()} (default {self.default})")


def tile_parameters(formats):
    """The parameters every tile has: its PE rows and columns and its operand format."""
    return (
        Parameter("rows", 1, "PE rows R of the tile", minimum=1),
        Parameter("cols", 1, "PE columns C of the tile", minimum=1),
        Parameter("fmt", formats[0], "operand format", kind=str, choices=tuple(formats), flag="--dtype"),
    )


@dataclasses.dataclass(frozen=True)
class Claim:
    """A headline figure of a design's paper: ``claim`` in words, the paper's ``figure`` as it states it and where
    it states it (``source``: the paper, and its abstract, section or figure), the ``target`` our value must reach
    (``above``: the claim is "at least", or "more than" where ``strict``; else "under"), and where ours is read in
    ``dashraker study``: the accounting ``scenario`` and its ``metric``."""

    claim: str
    figure: str
    source: str
    target: float
    scenario: str
    metric: str
    above: bool = True
    strict: bool = False

    def holds(self, value):
        """Whether ``value`` reaches the claim."""
        if self.above:
            return value > self.target if self.strict else value >= self.target
        return value < self.target

    def verdict(self, low, high):
        """The claim judged against an interval [low, high] of our value: "holds" where all of it reaches the
        claim, "does not hold" where none of it does, else "undecided"."""
        if self.holds(low) and self.holds(high):
            return "holds"
        if not self.holds(low) and not self.holds(high):
            return "does not hold"
        return "undecided"

    def __post_init__(self):
        for field in ("claim", "figure", "scenario", "metric"):
            _require(self, field, _text(getattr(self, field)), "a non-empty string")
        _require(self, "holds", callable(self.holds), "a callable")


@dataclasses.dataclass(frozen=True)
class Design:
    """The descriptor of one design.

    Fields
    ------
    name : str
        The design's name on the command line, in files and reports.
    summary : str
        One line for ``--help``.
    parameters : tuple of Parameter
        Every generator parameter, the tile's ``rows``, ``cols`` and ``fmt`` first.
    packages : tuple of str
        Modules and packages the generated RTL is made of besides the shared ones
        (co-simulation builds are cached per hash of their sources).
    build : callable(params) -> amaranth Component
        The tile generator.
    golden : callable(params, scheduled_bits, partner_bits) -> (outputs, cycles or None)
        The golden model over passes: operand bit patterns ``[P, R, S, N]`` and
        ``[P, C, S, N]`` in; fp32 output bit patterns uint32 ``[P, R, C]`` and, where the
        golden model counts them, its cycles int64 ``[P]`` out.
    cost : Cost
        The cycle and action-count functions the mapper and co-simulation both call.
    fill : callable(params) -> int
        Clock edges a stream of passes takes beyond the passes' cycles, from its first
        step's transfer to its last result's (the tile's pipeline fill and drain). The
        mapper adds it once per operation (the tiles' streams overlap).
    constraint : callable(params) or None
        Checks that involve several parameters (raises ``ValueError``).
    area_parts : dict
        Area hook: part name -> regular expression of the instance paths (below the
        tile) that make up that part, for the per-part FPGA and ASIC breakdowns.
    energy_parts : dict
        Part of ``area_parts`` -> the mapper's energy component (shared or the cost model's ``components``) whose actions
        that part performs: what ``dashraker energy --calibrate`` fits the energy table's entries to.
    reference : bool
        The dense design every other one is compared against.
    dataflow_params : dict
        Parameters a mapper dataflow preset fixes whatever the configuration says:
        dataflow name -> {parameter name: value}.
    published : tuple of Claim
        The design's paper's headline figures, which ``dashraker study`` sets beside ours.
    """

    name: str
    summary: str
    parameters: tuple
    packages: tuple
    build: Callable
    golden: Callable
    cost: object
    fill: Callable = lambda params: 0
    constraint: Callable = None
    area_parts: dict = dataclasses.field(default_factory=dict)
    energy_parts: dict = dataclasses.field(default_factory=dict)
    reference: bool = False
    dataflow_params: dict = dataclasses.field(default_factory=dict)
    published: tuple = ()

    def __post_init__(self):
        _require(self, "name", _text(self.name) and re.fullmatch(r"[a-z][a-z0-9_]*", self.name) is not None,
                 "a lower-case name (letters, digits, _)")
        _require(self, "summary", _text(self.summary), "a non-empty string")
        _require(self, "parameters", isinstance(self.parameters, tuple)
                 and all(isinstance(parameter, Parameter) for parameter in self.parameters)
                 and [parameter.name for parameter in self.parameters][:3] == ["rows", "cols", "fmt"]
                 and len({parameter.name for parameter in self.parameters}) == len(self.parameters),
                 "a tuple of Parameters with distinct names, tile_parameters(...) first")
        _require(self, "packages", _text_tuple(self.packages), "a tuple of module names")
        for field in ("build", "golden", "fill"):
            _require(self, field, callable(getattr(self, field)), "a callable")
        _require(self, "constraint", _optional_callable(self.constraint), "a callable or None")
        _require(self, "cost", isinstance(self.cost, Cost), "a Cost")
        _require(self, "area_parts", _text_dict(self.area_parts) and all(map(_compiles, self.area_parts.values())),
                 "a dict of part name -> regular expression")
        _require(self, "energy_parts", _text_dict(self.energy_parts) and self.energy_parts.keys() <= self.area_parts.keys(),
                 "a dict of area part -> energy component")
        _require(self, "reference", isinstance(self.reference, bool), "True or False")
        _require(self, "dataflow_params", isinstance(self.dataflow_params, dict) and all(
                 _text(name) and isinstance(fixed, dict) for name, fixed in self.dataflow_params.items()),
                 "a dict of dataflow name -> {parameter name: value}")
        _require(self, "published", isinstance(self.published, tuple)
                 and all(isinstance(claim, Claim) for claim in self.published), "a tuple of Claims")
        names = {parameter.name for parameter in self.parameters}
        for dataflow, fixed in self.dataflow_params.items():
            for name, value in fixed.items():
                _require(self, "dataflow_params", name in names, f"parameters of the design (no {name!r})")

    def __reduce__(self):
        """Pickled by name (worker processes look the descriptor up in their own registry)."""
        from dashraker.designs import design

        return design, (self.name,)

    @property
    def formats(self):
        """The operand formats the design takes."""
        return self.parameter("fmt").choices

    def parameter(self, name):
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise ValueError(f"design {self.name!r} has no parameter {name!r}; its parameters are "
                         f"{', '.join(p.name for p in self.parameters)}")

    def params(self, **overrides):
        """Every parameter with its default, ``overrides`` checked and applied (``ValueError`` otherwise)."""
        names = [parameter.name for parameter in self.parameters]
        for name in overrides:
            self.parameter(name)
        params = {name: self.parameter(name).default for name in names}
        for name, value in overrides.items():
            try:
                params[name] = self.parameter(name).check(value)
            except ValueError as error:
                raise ValueError(f"{name} {error}") from None
        if self.constraint is not None:
            self.constraint(params)
        return params

    def tile(self, params):
        """The Amaranth tile of full ``params``; a generator refusal is a ``ValueError`` naming the design."""
        try:
            return self.build(params)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{self.name}: {error}") from None

    def add_arguments(self, parser):
        """The design's parameters as command-line flags."""
        for parameter in self.parameters:
            parameter.add_argument(parser)

    def source_hash(self, salt=""):
        """Hash of the sources the design's tile is made of (its own packages and descriptor, the shared hardware
        and formats) and of ``salt`` (a tool's own version), so that builds cached under it (co-simulation models,
        area figures) follow the generators and other designs' edits leave them alone."""
        import dashraker.hw

        hw = Path(dashraker.hw.__file__).parent
        paths = [*hw.glob("*.py"), *(hw / "numerics").rglob("*.py"), *_source_paths("dashraker.formats"),
                 *_source_paths(type(self).__module__), *_source_paths(self.build.__module__),
                 *(path for package in self.packages for path in _source_paths(package))]
        digest = hashlib.sha256(str(salt).encode())
        for path in sorted(set(paths)):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    def cache_name(self, params, salt="", **extra):
        """A folder name for a build of ``params`` (and the tool's ``extra`` options): the design, every value and
        ``source_hash(salt)``."""
        label = "-".join(f"{key}{value}" for key, value in sorted({**params, **extra}.items()))
        return f"{self.name}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}-{self.source_hash(salt)}"


def _compiles(pattern):
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _source_paths(name):
    """The Python files of a module, or of a package and its subpackages (found, not imported: a golden model's
    package would load PyTorch)."""
    path = Path(importlib.util.find_spec(name).origin)
    return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]


class Operands(enum.Enum):
    """What a pass's cycles depend on."""

    NONE = "none"  # nothing: a pass costs its dense steps
    SCHEDULED = "scheduled"  # the scheduled side only: evaluated once per row set, shared by its column sets
    BOTH = "both"  # both sides


@dataclasses.dataclass(frozen=True)
class Cost:
    """A design's cycle and action-count model over the passes of a layer operation (SPEC sections 3-5, 7).

    Fields
    ------
    operands : Operands
        What a pass's cycles depend on.
    evaluate : callable(params, scheduled, partner, device="cpu") -> dict of int64 arrays
        Per pass (per row set when ``operands`` is ``SCHEDULED``, ``partner`` then None):
        ``cycles`` and per-pass action counters named as the mapper's energy
        components (the shared ones or ``components``). Operands are fp32 values already in the operand format,
        ``[P, R, S, N]`` and ``[P, C, S, N]``: NumPy arrays, or with ``device`` a torch
        GPU device, the reference models run there and ``BOTH`` operands come as torch
        tensors already on it; the results are the same. A per-row-set counter counts
        once per partner operand (column) of the problem.
    evaluate_sets : callable(params, scheduled_sets, row_pick, partner_sets, col_pick) -> dict, or None
        ``evaluate``'s dict on the CPU for the passes ``scheduled_sets[row_pick]`` against
        ``partner_sets[col_pick]`` (``BOTH`` operands): the mapper then hands over the stream sets, each read once
        however many passes repeat it, instead of gathering the passes. None: it gathers them for ``evaluate``.
    pass_counts : callable(params, arrays, value_bits) -> dict
        The action counts that follow from the per-pass arrays ``cycles``, ``steps``,
        ``rows`` and ``cols`` (PEs used) of an operation.
    max_values : int
        Values per ``evaluate`` call on the CPU (bounds its memory); a GPU takes ``GPU_BATCH`` times more.
    stream : callable(params, cycles) -> int64 array, or None
        The cycles of each tile's stream of passes: ``cycles`` int64 ``[passes, tiles]``, each column one
        tile's passes' own cycles in order, in; one figure per tile out. None: their sum (one pass after another).
    pass_ends : callable(params, cycles) -> int64 array, or None
        The cycle each pass of one tile's stream ends on, from the stream's first: ``cycles`` int64 ``[passes]``,
        the passes' own cycles in order, in; one per pass out, the stream's length one more than the last. None:
        one pass after another (the running sums less one). Co-simulation checks the results' spacing against it.
    components : dict
        The actions the cost model counts beyond those every design shares (``mapping.components``: the
        multipliers, the adders, the memory system's), each -> the energy-table entry it is charged at. With
        the shared ones they are the mapper's energy components and the report's energy columns.
    """

    operands: Operands
    pass_counts: Callable
    evaluate: Callable = None
    evaluate_sets: Callable = None
    max_values: int = 1 << 22
    stream: Callable = None
    pass_ends: Callable = None
    components: dict = dataclasses.field(default_factory=dict)

    GPU_BATCH = 16  # a GPU's calls are this many times larger: fewer, fuller kernels

    def __post_init__(self):
        _require(self, "operands", isinstance(self.operands, Operands),
                 "an Operands member (" + ", ".join(f"Operands.{member.name}" for member in Operands) + ")")
        _require(self, "pass_counts", callable(self.pass_counts), "a callable")
        _require(self, "evaluate", callable(self.evaluate) if self.operands is not Operands.NONE
                 else _optional_callable(self.evaluate),
                 "a callable (operands other than Operands.NONE are evaluated)")
        _require(self, "evaluate_sets", _optional_callable(self.evaluate_sets) and (
            self.evaluate_sets is None or self.operands is Operands.BOTH), "None, or a callable with Operands.BOTH")
        _require(self, "max_values", _integer(self.max_values) and self.max_values > 0, "a positive integer")
        for field in ("stream", "pass_ends"):
            _require(self, field, _optional_callable(getattr(self, field)), "a callable or None")
        _require(self, "components", _text_dict(self.components), "a dict of action -> energy-table entry")

    def batch_values(self, device="cpu"):
        """Values per ``evaluate`` call on ``device``."""
        return self.max_values * (1 if str(device) == "cpu" else self.GPU_BATCH)

    def cycles(self, params, scheduled, partner):
        """The cycles each pass costs, int64 ``[P]``: what the mapper charges and the RTL must take."""
        import numpy as np

        if self.operands is Operands.NONE:
            return np.full(len(scheduled), np.shape(scheduled)[2], np.int64)
        return np.asarray(self.evaluate(params, scheduled, partner if self.operands is Operands.BOTH else None)["cycles"])

    def ends(self, params, cycles):
        """The cycle each pass of one tile's stream ends on, from the stream's first (``pass_ends``), int64
        ``[passes]``: ``cycles`` the passes' own, in order."""
        import numpy as np

        cycles = np.asarray(cycles, np.int64)
        return np.cumsum(cycles) - 1 if self.pass_ends is None else np.asarray(self.pass_ends(params, cycles))
