"""Toggle counts per instance during co-simulation (SPEC section 7, amended 2026-11-27): counters generated into the
model's C++, or Verilator's toggle coverage.

A toggle is one change of a net bit's value, 0 to 1 or 1 to 0, so an n-bit counter's bit i
(bit 0 the least significant) toggles 2^(n-i) times over 2^n cycles. Every bit of every net
the Verilog declares is counted, per instance; the clock and reset nets are left out (clocking
is charged per flip-flop instead). Two ways to count, both built by Debian's Verilator 5.006
(as every pyverilator build, SPEC section 8) into a model of their own:

``counters`` (the default, several times cheaper)
    Verilator keeps every net as a variable of the model (``--public-flat-rw``), and C++
    generated from the model's header (``instrument``) compares, after every ``eval``, each
    net's words with their values after the previous ``eval`` and adds the population count
    of the difference to the net's counter. The counters live in the model's own library
    (one set per loaded model) and are read from memory. ``per_bit`` counts every bit apart
    instead (small circuits whose toggles are known by hand).
``coverage``
    Verilator's toggle coverage (``--coverage-toggle``): a counter per net bit updated inside
    its evaluation, read through its coverage API as a coverage ``.dat`` file. Its coverage
    context is one per process, shared by every model loaded in it (points told apart by
    module name): count one model at a time.

Both count the same nets: Amaranth writes every instance as a module of its own named by its
instance path (``baseline_tile.pe0_0.mul0``), which is the Verilator variable's scope
(``baseline_tile__DOT__pe0_0__DOT__mul0__DOT__<net>``) too.

The simulation loop evaluates the model twice per cycle (new inputs, then the clock edge): a
net that combines a register with the tile's input payload may change twice in a cycle where
hardware switches once. Those nets are the input stage's alone.
"""

import ctypes
import functools
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["METHODS", "VERSIONS", "EXCLUDED", "NETS_FILE", "Toggles", "verilator_args", "instrument", "counted_nets",
           "counter_code", "read_dat", "per_instance", "read_counts", "zero_counts", "net_bits", "net_counts"]

METHODS = ("counters", "coverage")
VERSIONS = {"counters": 4, "coverage": 2}  # bump a method's when its instrumentation changes (rebuilds its models)
EXCLUDED = ("clk", "rst")  # charged as clocking, or never toggling during a run
NETS_FILE = "toggle_nets.json"  # the counters' nets, written into the build folder
_CHUNK = 400  # nets per generated count function: one function of every net takes g++ -O2 many times longer

# coverage: every bit of every net, however wide (Verilator's default skips vectors wider than 256 bits: the payloads)
_COVERAGE_ARGS = ("--coverage-toggle", "--coverage-max-width", str(1 << 20))
_COUNTER_ARGS = ("--public-flat-rw",)  # every net kept as a variable of the model, under its scope's name

_COVERAGE_EXTENSION = """
// dashraker toggle counting (Verilator toggle coverage, read through its coverage API)
#include "verilated_cov.h"
extern "C" {
void cosim_toggles_zero(void*) { Verilated::threadContextp()->coveragep()->zero(); }
void cosim_toggles_write(const char* path) { Verilated::threadContextp()->coveragep()->write(path); }
}
"""

_POINT = re.compile(r"^C '(.*)' (\d+)$")
# a variable of the model's root class: CData/SData/IData/QData or VlWide<words>, maybe in a VlUnpacked<..., elements>
_VARIABLE = re.compile(r"^\s*(VlUnpacked<)?(CData|SData|IData|QData|VlWide<(\d+)>)/\*(\d+):(\d+)\*/(?:, (\d+)>)? (\w+);",
                       re.M)


def _check(method):
    if method not in METHODS:
        raise ValueError(f"toggle counting method must be one of {', '.join(METHODS)}, not {method!r}")
    return method


def verilator_args(method):
    """Extra Verilator options of a model that counts toggles by ``method``."""
    return _COUNTER_ARGS if _check(method) == "counters" else _COVERAGE_ARGS


@dataclass
class Toggles:
    """Toggles of one instance's own nets: ``toggles`` bit changes in all over ``bits`` net bits."""

    toggles: int = 0
    bits: int = 0


@dataclass
class _Net:
    """A counted variable: ``instance`` (Verilog scope path), ``name`` (Verilator's), ``bits`` per element, ``words``
    per element (1 for up to 64 bits, else 32-bit words), ``elements`` (1, or an unpacked array's), ``kind`` (its C
    type: ``CData``, ``SData``, ``IData``, ``QData``, or ``VlWide``)."""

    instance: str
    name: str
    bits: int
    words: int
    elements: int
    kind: str

    @property
    def wide(self):
        return self.words > 1 or self.bits > 64

    @property
    def scalar(self):
        """One word of one element: counted from a table of its offset in the model (``counter_code``)."""
        return self.elements == 1 and not self.wide


def counted_nets(root_header, top):
    """The nets of the model's root class header (``V<top>___024root.h`` of a ``--public-flat-rw`` build) below the
    top module ``top``, clock, reset and Verilator's own variables left out, in declaration order."""
    nets = []
    for match in _VARIABLE.finditer(root_header):
        unpacked, kind, words, high, low, elements, name = match.groups()
        scope = name.split("__DOT__")
        if scope[0] != top or len(scope) < 2:
            continue  # a port of the model itself (counted as the top module's net) or Verilator's own
        net = scope[-1]
        if net in EXCLUDED or net.startswith("__V") or re.fullmatch(r"_\d+_", net):
            continue
        nets.append(_Net(".".join(scope[:-1]), name, int(high) - int(low) + 1, int(words) if words else 1,
                         int(elements) if unpacked else 1, kind.partition("<")[0]))
    return nets


def counter_code(nets, model_class, root_class, per_bit=False):
    """C++ that counts the toggles of ``nets`` after every evaluation: ``cosim_toggles_count(top)`` (called by the
    instrumented wrapper), and the C functions ``cosim_toggles_zero(top)``, ``cosim_toggles_read(out)`` and
    ``cosim_toggles_enable(on)`` (off: no counting, to time the model without it). One counter per net, or per net
    bit with ``per_bit``; counters in the order of ``nets``.

    Scalar nets (one word, one element: every net of a flat gate-level netlist) are counted by one loop per C type
    over a constant table of their offsets in the model; the others by a statement each, in functions of
    ``_CHUNK``. A statement per net took gcc 7.4 GB on a packaged FPRaker tile's 0.5 M gate-level nets."""
    counters = sum(n.bits * n.elements for n in nets) if per_bit else len(nets)
    slots = sum(n.words * n.elements for n in nets)
    lines = [f"// dashraker toggle counting (counters generated from {root_class}.h)",
             f'#include "{root_class}.h"', "#include <cstddef>",
             '#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // the model class is not standard-layout; no '
             "virtual bases",
             f"static uint64_t cosim_toggle_counts[{max(counters, 1)}];",
             f"static uint64_t cosim_toggle_last[{max(slots, 1)}];",
             "static int cosim_toggles_on = 1;",
             "struct cosim_toggle_net { uint32_t at, counter, bits, slot; };  // offset in the model, first counter"]
    counter = slot = 0
    statements, tables = [], {}
    for net in nets:
        if net.scalar:
            tables.setdefault(net.kind, []).append(
                f"{{offsetof({root_class}, {net.name}), {counter}, {net.bits}, {slot}}}")
            counter += net.bits if per_bit else 1
            slot += 1
            continue
        arrayed = net.elements > 1
        loops = (f"for (int e = 0; e < {net.elements}; ++e) " if arrayed else "") + \
                (f"for (int w = 0; w < {net.words}; ++w) " if net.wide else "")
        value = f"r->{net.name}{'[e]' if arrayed else ''}{'[w]' if net.wide else ''}"
        last = f"p[{slot}{f' + e * {net.words}' if arrayed else ''}{' + w' if net.wide else ''}]"
        if per_bit:
            first = f"{counter}{f' + e * {net.bits}' if arrayed else ''}{' + w * 32' if net.wide else ''}"
            limit = f"({net.bits} - w * 32 < 32 ? {net.bits} - w * 32 : 32)" if net.wide else net.bits
            step = f"for (int b = 0; b < {limit}; ++b) c[{first} + b] += (v >> b) & 1;"
            counter += net.bits * net.elements
        else:
            step = f"c[{counter}] += __builtin_popcountll(v);"
            counter += 1
        statements.append(f"    {loops}{{ v = (uint64_t){value} ^ {last}; {last} = (uint64_t){value}; {step} }}")
        slot += net.words * net.elements
    add = ("for (uint32_t b = 0; b < n.bits; ++b) c[n.counter + b] += (v >> b) & 1;" if per_bit
           else "c[n.counter] += __builtin_popcountll(v);")
    lines += ["template <typename T, std::size_t N> static void cosim_toggles_table(const char* const r, "
              "const cosim_toggle_net (&nets)[N], uint64_t* const c, uint64_t* const p) {",
              "    for (const cosim_toggle_net& n : nets) {",
              "        const uint64_t now = *reinterpret_cast<const T*>(r + n.at), v = now ^ p[n.slot];",
              f"        p[n.slot] = now; {add}", "    }", "}"]
    for kind, entries in tables.items():
        lines += [f"static const cosim_toggle_net cosim_toggle_{kind}[{len(entries)}] = {{",
                  *(f"    {entry}," for entry in entries), "};"]
    chunks = [statements[at:at + _CHUNK] for at in range(0, len(statements), _CHUNK)]
    for index, chunk in enumerate(chunks):
        lines += [f"static void __attribute__((noinline)) cosim_toggles_count{index}({root_class}* const r, "
                  "uint64_t* const c, uint64_t* const p) {", "    uint64_t v;", *chunk, "}"]
    lines += [f"static void cosim_toggles_count({model_class}* top) {{",
              "    if (!cosim_toggles_on) return;",
              *(f"    cosim_toggles_table<{kind}>(reinterpret_cast<const char*>(top->rootp), cosim_toggle_{kind}, "
                "cosim_toggle_counts, cosim_toggle_last);" for kind in tables),
              *(f"    cosim_toggles_count{index}(top->rootp, cosim_toggle_counts, cosim_toggle_last);"
                for index in range(len(chunks))),
              "}", 'extern "C" {',
              f"void cosim_toggles_zero({model_class}* top) {{",
              "    cosim_toggles_count(top);  // the nets' present values are the reference",
              "    for (uint64_t& count : cosim_toggle_counts) count = 0;", "}",
              "void cosim_toggles_enable(int on) { cosim_toggles_on = on; }  // off: the model's cost alone",
              "void cosim_toggles_read(uint64_t* out) {",
              f"    for (long i = 0; i < {counters}; ++i) out[i] = cosim_toggle_counts[i];", "}", "}"]
    return "\n".join(lines) + "\n"


def instrument(wrapper_text, work, top, method, per_bit=False):
    """pyverilator's C++ wrapper (this project's loop appended) made to count toggles by ``method``, the model
    generated in ``work`` (Verilator run with ``verilator_args(method)``). Counters: every ``top->eval()`` is
    followed by a count, and the counted nets are written to ``work / NETS_FILE``."""
    if _check(method) == "coverage":
        return wrapper_text + _COVERAGE_EXTENSION
    model_class, root_class = f"V{top}", f"V{top}___024root"
    nets = counted_nets((Path(work) / f"{root_class}.h").read_text(), top)
    (Path(work) / NETS_FILE).write_text(json.dumps({
        "top": top, "per_bit": per_bit,
        "nets": [[n.instance, n.name.split("__DOT__")[-1], n.bits, n.elements] for n in nets]}))
    include = f'#include "{model_class}.h"\n'
    if include not in wrapper_text:
        raise ValueError(f"pyverilator's wrapper does not include {model_class}.h: cannot instrument it")
    head, tail = wrapper_text.split(include, 1)
    tail = tail.replace("top->eval();", "top->eval(); cosim_toggles_count(top);")
    return head + include + counter_code(nets, model_class, root_class, per_bit) + tail


def read_dat(path):
    """The toggle points of a coverage ``.dat`` file: a list of (module, net bit, count)."""
    points = []
    for line in Path(path).read_text().splitlines():
        match = _POINT.match(line)
        if not match:
            continue
        keys = dict(item.split("\x02", 1) for item in match[1].split("\x01") if "\x02" in item)
        page = keys.get("page", "")
        if page.startswith("v_toggle/"):
            points.append((page.removeprefix("v_toggle/"), keys.get("o", ""), int(match[2])))
    return points


def _net(bit_name):
    """A net's name without its bit index (``q[3]`` -> ``q``)."""
    return re.sub(r"\s*\[\d+\]$", "", bit_name).strip()


def _in_top(module, top):
    return module == top or module.startswith(top + ".")


def per_instance(points, top):
    """``{instance path below ``top`` (its own nets under ""): Toggles}`` of ``read_dat``'s points, clock and
    reset left out."""
    counts = {}
    for module, bit, count in points:
        if _net(bit).lstrip("\\") in EXCLUDED or not _in_top(module, top):
            continue
        name = "" if module == top else module.removeprefix(top + ".")
        entry = counts.setdefault(name, Toggles())
        entry.toggles += count
        entry.bits += 1
    return counts


def zero_counts(lib, model):
    """Restart the counts of a loaded model (``model``: pyverilator's model pointer)."""
    lib.cosim_toggles_zero.argtypes = [ctypes.c_void_p]
    lib.cosim_toggles_zero(model)


@functools.lru_cache(maxsize=16)
def _layout(path):
    """The counted nets written beside a counters model (read once per process)."""
    return json.loads(Path(path).read_text())


def _counter_points(lib, build_dir):
    """(module, net, bits, counts) per counted net of a counters model: counts an array of one per net, or per bit."""
    layout = _layout(str(Path(build_dir).resolve() / NETS_FILE))
    nets = layout["nets"]
    size = sum(bits * elements for *_, bits, elements in nets) if layout["per_bit"] else len(nets)
    counts = np.zeros(max(size, 1), np.uint64)
    lib.cosim_toggles_read.argtypes = [np.ctypeslib.ndpointer(np.uint64, flags="C")]
    lib.cosim_toggles_read(counts)
    points, at = [], 0
    for module, name, bits, elements in nets:
        width = bits * elements if layout["per_bit"] else 1
        points.append((module, name, bits * elements, counts[at:at + width]))
        at += width
    return layout["per_bit"], points


def net_bits(lib, build_dir, method, module):
    """Toggles per bit of each net of ``module`` (a model built with ``per_bit`` counters, or coverage): {net:
    [toggles of bit 0, 1, ...]}; an unpacked array's elements are nets ``name[i]``, as coverage names them."""
    if method == "coverage":
        with tempfile.TemporaryDirectory(prefix="dashraker-toggles-") as folder:
            path = os.path.join(folder, "coverage.dat")
            lib.cosim_toggles_write(ctypes.c_char_p(path.encode()))
            points = read_dat(path)
        nets = {}
        for owner, bit, count in points:
            if owner == module:
                index = re.search(r"\[(\d+)\]$", bit)
                bits = nets.setdefault(_net(bit).lstrip("\\"), {})
                bits[int(index[1]) if index else 0] = count
        return {name: [bits[i] for i in sorted(bits)] for name, bits in nets.items()}
    per_bit, points = _counter_points(lib, build_dir)
    if not per_bit:
        raise ValueError("per-bit toggles need a model built with per_bit counters")
    layout = {(m, n): e for m, n, _, e in _layout(str(Path(build_dir).resolve() / NETS_FILE))["nets"]}
    nets = {}
    for owner, name, bits, counts in points:
        if owner != module:
            continue
        elements = layout[(owner, name)]
        width = bits // elements
        for element in range(elements):
            key = name if elements == 1 else f"{name}[{element}]"
            nets[key] = [int(x) for x in counts[element * width:(element + 1) * width]]
    return nets


def read_counts(lib, top, method="coverage", build_dir=None):
    """The toggles counted by a loaded model ``lib`` (pyverilator's library, instrumented by ``method``; a counters
    model's build folder ``build_dir``) per instance."""
    if method == "coverage":
        with tempfile.TemporaryDirectory(prefix="dashraker-toggles-") as folder:
            path = os.path.join(folder, "coverage.dat")
            lib.cosim_toggles_write(ctypes.c_char_p(path.encode()))
            return per_instance(read_dat(path), top)
    _, points = _counter_points(lib, build_dir)
    counts = {}
    for module, _, bits, values in points:
        if not _in_top(module, top):
            continue
        entry = counts.setdefault("" if module == top else module.removeprefix(top + "."), Toggles())
        entry.toggles += int(values.sum())
        entry.bits += bits
    return counts


def net_counts(lib, top, method, build_dir):
    """{net: toggles} of the nets of the top module ``top`` itself (a counters model): one count per net, all its
    bits together."""
    if method != "counters":
        raise ValueError("toggles per net need a model built with counters")
    _, points = _counter_points(lib, build_dir)
    return {name: int(values.sum()) for module, name, _, values in points if module == top}
