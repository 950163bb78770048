"""Co-simulation of generated tiles on pyverilator: build once, stream whole passes, read results and cycles back.

A ``Cosim`` compiles a design's tile with the ``pyverilator-mm`` distribution and
Debian's Verilator 5.006 (SPEC section 8), resolved by explicit path. pyverilator
generates the C++ wrapper and loads the model; its per-signal accessors cost one
ctypes call per 32-bit word of a payload plus an ``eval`` per write, so this module
appends to that wrapper one C function, ``cosim_stream``, that clocks a whole
array of stream transfers (each a row of 32-bit words, as Verilator stores a wide
port) into the ``steps`` port (each thread's into its own, a two-thread TensorDash
tile's) and collects every ``results`` transfer, with the clock cycle of each. One
call runs any number of passes.

Builds are cached in ``build_root/<design>-<params>-<hash>``, the hash covering
the design's generator sources, so a changed generator is rebuilt and an unchanged
one is reused across sessions.
"""

import contextlib
import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dashraker.designs import design as find_design
from dashraker.hw.tile_stream import payload_layout
from dashraker.sim import codec
from dashraker.sim import toggles as toggles_module
from dashraker.processes import run_group
from dashraker.sim.toolchain import DEBIAN_VERILATOR, LINT_WAIVERS

__all__ = ["Cosim", "TileRun", "CosimBuildError"]

_EXTENSION_VERSION = 2  # bump when the appended C++ changes, to rebuild cached models
# A gate-level model's C++ files hold up to 500,000 statements and its functions 20,000, as by default: at the
# default file split (20,000) a packaged 4x4 tile's 0.5 M cells made 551 files, each parsing the 37 MB header of every
# net, about 25 s apiece at -O0 on 2 cores; functions of 500,000 (tracing ones, in a first trial) took gcc over 18
# minutes each
NETLIST_SPLIT = ("--output-split", "500000", "--output-split-cfuncs", "20000", "--output-split-ctrace", "20000")
# Every C++ file of a model includes its root header, which declares every net: 85 MB for the tree baseline's 4x4x16
# netlist (1.2 M cells), about a minute of g++ per file at -O0 on 2 cores. A gate-level model's files take that header
# precompiled once (``_precompile``).
PRECOMPILED = "dashraker_pch.h"


class CosimBuildError(Exception):
    """Verilator or the C++ compiler failed on a generated tile."""


@dataclass
class TileRun:
    """What the RTL did with a batch of passes, in the order of the passes (a two-thread tile's results come as the
    passes end).

    ``outputs``: fp32 bit patterns uint32 [passes, rows, cols]; ``cycles``: int64
    [passes], the tile's own count where its result carries one, else the cycles
    between accepting the pass's first and last step, plus one; ``arrivals``: int64
    [passes], clock cycle of each result (from the call's first cycle);
    ``sim_cycles``: clock cycles the call simulated.
    """

    outputs: np.ndarray
    cycles: np.ndarray
    arrivals: np.ndarray
    sim_cycles: int


# The loop appended to pyverilator's wrapper. {set_payload}/{get_payload} move whole words; {drive}, {take} and {rest}
# set each thread's `steps` valid, read its ready and clear its valid, {align} starts the stream on thread 0's cycle
# (``_thread_code``).
_EXTENSION = """
// dashraker co-simulation loop (appended to pyverilator's generated wrapper)
static void cosim_set_payload({top}* top, int t, const uint32_t* w) {{ {set_payload} }}
static void cosim_get_payload({top}* top, uint32_t* w) {{ {get_payload} }}
extern "C" {{
void cosim_reset({top}* top, int cycles) {{
    top->rst = 1;
    for (int i = 0; i < cycles; ++i) {{ top->clk = 0; top->eval(); top->clk = 1; top->eval(); }}
    top->rst = 0; top->clk = 0; top->eval();
}}
// Offers each thread's transfers (thread t's counts[t], after the earlier threads') on its `steps` port (valid
// while any is left), keeps `results` ready, and stops after `expected` results or `max_cycles` cycles. Returns
// the cycles run; accepted_at[i] / arrived_at[j] get the cycle of each step transfer and result.
long cosim_stream({top}* top, const uint32_t* transfers, const int64_t* counts, long in_words,
                  uint32_t* results, long expected, long out_words,
                  int64_t* accepted_at, int64_t* arrived_at, long max_cycles) {{
    long sent[{threads}], loaded[{threads}], first[{threads}], got = 0, cycle = 0;
    int valid[{threads}], accepted[{threads}];
    for (int t = 0; t < {threads}; ++t) {{ sent[t] = 0; loaded[t] = -1; first[t] = t ? first[t - 1] + counts[t - 1] : 0; }}
    top->{out_ready} = 1;
    {align}
    while (got < expected && cycle < max_cycles) {{
        for (int t = 0; t < {threads}; ++t) {{
            valid[t] = sent[t] < counts[t];
            if (valid[t] && loaded[t] != sent[t]) {{
                cosim_set_payload(top, t, transfers + (first[t] + sent[t]) * in_words);
                loaded[t] = sent[t];
            }}
        }}
        {drive}
        top->eval();
        {take}
        for (int t = 0; t < {threads}; ++t) if (accepted[t]) accepted_at[first[t] + sent[t]] = cycle;
        if (top->{out_valid}) {{ cosim_get_payload(top, results + got * out_words); arrived_at[got++] = cycle; }}
        top->clk = 1; top->eval(); top->clk = 0;
        for (int t = 0; t < {threads}; ++t) sent[t] += accepted[t];
        ++cycle;
    }}
    {rest}
    top->eval();
    return cycle;
}}
}}
"""


def _thread_code(ports, threads):
    """The C++ of each thread's ``steps`` port (``steps``, or ``steps__t`` with threads): the payload setter's body
    and the loop's statements that set its valid, read its ready and clear its valid; with threads, the idle cycles
    that start a stream on thread 0's cycle, where its port is ready (the tile is idle between calls), as the model
    counts a stream (``models.threads.interleave``: thread 0 first)."""
    prefixes = ["steps"] if threads == 1 else [f"steps__{t}" for t in range(threads)]
    setters = " else ".join(f"if (t == {t}) {{ {_port_code(*ports[f'{prefix}__payload'], setter=True)} }}"
                            for t, prefix in enumerate(prefixes))
    valid = [ports[f"{prefix}__valid"][0] for prefix in prefixes]
    ready = [ports[f"{prefix}__ready"][0] for prefix in prefixes]
    return {"set_payload": setters, "threads": threads,
            "drive": " ".join(f"top->{name} = valid[{t}];" for t, name in enumerate(valid)),
            "take": " ".join(f"accepted[{t}] = valid[{t}] && top->{name};" for t, name in enumerate(ready)),
            "rest": " ".join(f"top->{name} = 0;" for name in valid),
            "align": "" if threads == 1 else (
                f"top->eval(); while (!top->{ready[0]} && cycle < max_cycles) "
                "{ top->clk = 1; top->eval(); top->clk = 0; top->eval(); ++cycle; }")}


def _port_code(name, width, setter):
    """C++ moving the words ``w`` into (or out of) port ``name`` of ``width`` bits, as Verilator stores it."""
    if width > 64:
        words = (width + 31) // 32
        body = f"top->{name}[i] = w[i];" if setter else f"w[i] = top->{name}[i];"
        return f"for (int i = 0; i < {words}; ++i) {body}"
    if setter:
        return f"top->{name} = (uint64_t)w[0]{' | ((uint64_t)w[1] << 32)' if width > 32 else ''};"
    return f"w[0] = (uint32_t)top->{name};" + (f" w[1] = (uint32_t)(top->{name} >> 32);" if width > 32 else "")


def _wrapper_ports(wrapper_text, kind):
    """{verilog name: (verilator name, width)} of pyverilator's ``_pyverilator_{kind}`` tables."""
    names = re.search(rf"_pyverilator_{kind}\[\] = {{(.*)}};", wrapper_text)[1]
    widths = re.search(rf"_pyverilator_{kind[:-1]}_widths\[\] = {{(.*)}};", wrapper_text)[1]
    from pyverilator.pyverilator import verilator_name_to_standard_modular_name as decode

    ports = {}
    for name, width in zip(re.findall(r'"([^"]*)"', names), widths.split(",")):
        ports[decode(name)[-1]] = (name, int(width))
    return ports


@contextlib.contextmanager
def _debian_verilator():
    """Environment in which pyverilator (which runs ``verilator`` from PATH) finds Debian's 5.006."""
    if not DEBIAN_VERILATOR.exists():
        raise CosimBuildError(f"{DEBIAN_VERILATOR} not found: run `make setup` (Debian package verilator)")
    saved = dict(os.environ)
    os.environ.pop("VERILATOR_ROOT", None)
    os.environ["PATH"] = os.pathsep.join([str(DEBIAN_VERILATOR.parent), saved.get("PATH", "")])
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _output_to(path):
    """Send this process's stdout/stderr file descriptors (subprocesses' output too) to ``path``."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


@contextlib.contextmanager
def _verilator_in_a_group():
    """pyverilator's Verilator run (its ``call_process``: perl's ``verilator`` and the ``verilator_bin`` it starts)
    through ``run_group`` while the block runs: it ends whole with this process, as the C++ build does."""
    import pyverilator.pyverilator as module

    def call_process(args, quiet=False):
        done = run_group(args, capture_output=quiet)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)

    saved, module.call_process = module.call_process, call_process
    try:
        yield
    finally:
        module.call_process = saved


def _run(command, what):
    done = run_group(command, capture_output=True, text=True)  # make's compilers end with it, and with this process
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise CosimBuildError(f"{what} failed ({' '.join(map(str, command[:3]))} ...):\n{tail}")


_WORK = re.compile(r"\..+\.(\d+)\.[a-z0-9_]{8}")  # a build's work folder: .<build>.<pid of its builder>.<random>


def _remove_stale_builds(root):
    """Remove the work folders in ``root`` whose builder process is gone (killed at once, so its ``finally`` never
    ran); a live builder's, this machine's other runs' included, are left to it."""
    for entry in root.iterdir():
        match = _WORK.fullmatch(entry.name)
        if match is None or not entry.is_dir() or entry.is_symlink():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


def _precompile(work, top, optimize, what):
    """Precompile the model's headers in ``work`` with the model's own compile flags (its makefile's), and return the
    make variables that have the model's files take them first (``-include``; g++ uses the ``.gch`` beside the header
    when the flags agree, and the header's text otherwise). Verilator's own runtime files keep their flags: some
    define macros before their first include."""
    header = work / PRECOMPILED
    header.write_text("".join(f'#include "{name}"\n' for name in
                              ("verilated.h", "verilated_dpi.h", f"V{top}___024root.h")))
    rule = work / "dashraker_pch.mk"
    rule.write_text(f"{PRECOMPILED}.gch: {PRECOMPILED}\n\t$(CXX) $(CXXFLAGS) $(CPPFLAGS) {optimize} "
                    "-x c++-header -o $@ $<\n")
    _run(["make", "-C", str(work), "-f", f"V{top}.mk", "-f", rule.name, f"{PRECOMPILED}.gch"],
         f"{what}: precompiled header")
    return [f"OPT_FAST={optimize} -include {PRECOMPILED}", f"OPT_SLOW={optimize} -include {PRECOMPILED}"]


def compile_model(write, top, build_dir, extend, optimize="-O2", jobs=2, args=(), what=None, params=None,
                  precompile=False):
    """Compile Verilog into a pyverilator model cached at ``build_dir`` (a folder swapped in whole when done).

    ``write(work)`` writes the Verilog into the work folder and returns its path; ``extend(wrapper_text, work)``
    returns pyverilator's C++ wrapper with this project's C functions appended (Verilator's model generated in
    ``work``); ``args`` are extra Verilator options; ``precompile``: the model's files take its headers precompiled
    (``_precompile``: worth it where the header is large, a gate-level netlist's).
    The model's shared library is ``build_dir / f"V{top}"``.
    """
    from pyverilator import PyVerilator

    from dashraker.progress import stage

    what = what or top
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(build_dir.parent)
    work = Path(tempfile.mkdtemp(prefix=f".{build_dir.name}.{os.getpid()}.", dir=build_dir.parent))
    try:
        source = write(work)
        with _debian_verilator():
            try:
                with _output_to(work / "verilator.log"), _verilator_in_a_group():
                    PyVerilator.build(str(source), preceding_files=str(LINT_WAIVERS), build_dir=str(work),
                                      gen_only=True, quiet=True,
                                      args=["--prefix", f"V{top}", "--top-module", top,
                                            "--x-assign", "fast", "--x-initial", "fast", "-O3", *args])
            except subprocess.CalledProcessError as error:  # its work folder goes: the log's last lines say why
                log = (work / "verilator.log").read_text(errors="replace").strip().splitlines()
                raise CosimBuildError(f"{what}: Verilator failed on {source.name}:\n" + "\n".join(log[-30:])) \
                    from error
            generated = sum(path.stat().st_size for path in work.glob("*.cpp"))
            took = ("the C++ of a packaged tile's gate-level model took 20-40 min" if precompile else
                    "a first build took 78-145 s at -O0")
            stage(f"{what}: compiling Verilator's {generated / 1e3:,.0f} kB of C++ ({optimize}; {took} on 2 cores; "
                  f"then cached in {build_dir})")
            wrapper = work / "pyverilator_wrapper.cpp"
            wrapper.write_text(extend(wrapper.read_text(), work))
            flags = _precompile(work, top, optimize, what) if precompile else [f"OPT_FAST={optimize}"]
            _run(["make", "-C", str(work), "-j", str(jobs), "-f", f"V{top}.mk",
                  "LDFLAGS=-fPIC -shared", *flags, f"OPT_GLOBAL={optimize}"], f"{what}: C++ build")
            (work / f"{PRECOMPILED}.gch").unlink(missing_ok=True)  # as large as the header's parse: not kept
        (work / "params.json").write_text(json.dumps(params or {"top": top}, indent=1))
        try:
            os.replace(work, build_dir)
        except OSError:
            if not (build_dir / f"V{top}").exists():  # not another process's finished build
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


class Cosim:
    """A design's tile compiled with pyverilator, driven a whole batch of passes per call.

    Parameters
    ----------
    design : Design or str
        The design's descriptor (``dashraker.designs``) or its name.
    params : dict
        Generator parameters (the descriptor's defaults fill in the rest).
    build_root : path
        Folder holding the cached builds (default ``build/cosim``).
    jobs : int
        Parallel C++ compile jobs of a build (default 2).
    optimize : str
        C++ optimisation flag of the model (default ``-O2``; ``-O0`` compiles several times faster,
        for short runs).
    toggles : bool or str
        Build the model with toggle counting (``dashraker.sim.toggles``), so that ``toggle_counts`` gives every
        instance's net toggles since ``zero_toggles``: True or ``"counters"`` (counters generated into the model's
        C++), ``"coverage"`` (Verilator's toggle coverage). Default False: a separate build, and the model without
        it runs as before.
    netlist : object or None
        A gate-level netlist of the same tile to simulate instead of the generated RTL (``sim.gates``): its
        ``key`` names the build, its ``write(path)`` writes the Verilog (top module ``<design>_tile``, the RTL's
        ports). Default None: the RTL.

    Attributes
    ----------
    tile : the Amaranth component built, ``latency``/``rows``/``cols``/``lanes`` as it says.
    build_dir : Path of the cached build.
    built : bool, whether this instance compiled the model (False: reused a cached one).
    """

    def __init__(self, design, params=None, build_root="build/cosim", jobs=2, optimize="-O2", toggles=False,
                 netlist=None):
        self.design = find_design(design) if isinstance(design, str) else design
        self.params = self.design.params(**(params or {}))
        self.tile = self.design.tile(self.params)
        dimensions = self.tile.signature.members["steps"].dimensions
        self.threads = dimensions[0] if dimensions else 1  # a steps port per thread
        self.in_layout = payload_layout(self.tile, "steps")
        self.out_layout = payload_layout(self.tile, "results")
        self.optimize = optimize
        self.toggles = "counters" if toggles is True else toggles or None  # the counting method
        if self.toggles:
            toggles_module.verilator_args(self.toggles)  # refuses an unknown method
        counting = {"toggles": f"{self.toggles}{toggles_module.VERSIONS[self.toggles]}"} if self.toggles else {}
        extra = {"opt": optimize, **counting, **({"gates": netlist.key} if netlist is not None else {})}
        self.netlist = netlist
        # absolute: the C++ build runs make in its own folder, where a relative path would name nothing
        self.build_dir = Path(build_root).resolve() / self.design.cache_name(self.params, _EXTENSION_VERSION, **extra)
        self.top = f"{self.design.name}_tile"
        self.built = False
        so_file = self.build_dir / f"V{self.top}"
        if not so_file.exists():
            self._build(jobs)
            self.built = True
        else:  # only its interface is needed: no "created but never used" warning
            self.tile._MustUse__silence = True
        self._load(so_file)

    def _build(self, jobs):
        from dashraker.hw.verilog import write_verilog

        def extend(text, work):
            ports = {**_wrapper_ports(text, "inputs"), **_wrapper_ports(text, "outputs")}
            code = _EXTENSION.format(
                top=f"V{self.top}", **_thread_code(ports, self.threads),
                get_payload=_port_code(*ports["results__payload"], setter=False),
                out_valid=ports["results__valid"][0], out_ready=ports["results__ready"][0],
            )
            if not self.toggles:
                return text + code
            return toggles_module.instrument(text + code, work, self.top, self.toggles)

        def write(work):
            if self.netlist is not None:
                self.tile._MustUse__silence = True  # only its interface is used
                return self.netlist.write(work / f"{self.top}.v")
            return write_verilog(self.tile, work / f"{self.top}.v", self.top)

        args = toggles_module.verilator_args(self.toggles) if self.toggles else ()
        if self.netlist is not None:
            args = (*args, *NETLIST_SPLIT)
        compile_model(write, self.top, self.build_dir, extend, self.optimize, jobs, args=args, what=self.design.name,
                      params={"design": self.design.name, **self.params}, precompile=self.netlist is not None)

    def _load(self, so_file):
        from pyverilator import PyVerilator

        self.sim = PyVerilator(str(so_file))
        self.in_words = (self.in_layout.size + 31) // 32
        self.out_words = (self.out_layout.size + 31) // 32
        pointer = np.ctypeslib.ndpointer
        stream = self.sim.lib.cosim_stream
        stream.argtypes = [ctypes.c_void_p, pointer(np.uint32, flags="C"), pointer(np.int64, flags="C"), ctypes.c_long,
                           pointer(np.uint32, flags="C"), ctypes.c_long, ctypes.c_long,
                           pointer(np.int64, flags="C"), pointer(np.int64, flags="C"), ctypes.c_long]
        stream.restype = ctypes.c_long
        self._stream = stream
        self.sim.lib.cosim_reset.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.sim.lib.cosim_reset(self.sim.model, 2)

    def zero_toggles(self):
        """Start counting toggles afresh (a model built with ``toggles``)."""
        self._require_toggles()
        toggles_module.zero_counts(self.sim.lib, self.sim.model)

    def toggle_counts(self):
        """Net toggles per instance since ``zero_toggles``: ``{instance path below the tile: Toggles}`` (the
        tile's own nets under ""), clock and reset excluded; see ``dashraker.sim.toggles``."""
        self._require_toggles()
        return toggles_module.read_counts(self.sim.lib, self.top, self.toggles, self.build_dir)

    def net_toggles(self):
        """Toggles per net of the top module since ``zero_toggles`` (``toggles.net_counts``): a flat netlist's."""
        self._require_toggles()
        return toggles_module.net_counts(self.sim.lib, self.top, self.toggles, self.build_dir)

    def _require_toggles(self):
        if not self.toggles:
            raise ValueError(f"{self.design.name}: this model was built without toggle counting (Cosim(..., toggles=True))")

    def bits(self, values):
        """Operand bit patterns (uint32) of fp32 values already in the operand format."""
        raw = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        if self.params["fmt"] == "fp32":
            return raw
        if (raw & 0xFFFF).any():
            raise ValueError("operands are not bf16 values: convert them first (models.numerics.quantize)")
        return raw >> 16

    def run(self, scheduled, partner):
        """Run passes: ``scheduled`` [P, rows, steps, lanes] (row side) and ``partner`` [P, cols, steps, lanes]
        fp32 values in the operand format, one tile's stream. With T threads pass k goes to thread k mod T's
        ``steps`` port and each result is that of its thread's next pass. Returns a ``TileRun``, in stream order."""
        scheduled, partner = np.asarray(scheduled), np.asarray(partner)
        passes, rows, steps, lanes = scheduled.shape
        expect = (self.tile.rows, self.tile.cols, self.tile.lanes)
        if (rows, partner.shape[1], lanes) != expect or partner.shape != (passes, partner.shape[1], steps, lanes):
            raise ValueError(f"{self.design.name} tile is rows x cols x lanes {expect}; passes have scheduled "
                             f"{scheduled.shape} and partner {partner.shape} ([passes, rows|cols, steps, lanes])")
        if steps < 1:
            raise ValueError("every pass needs at least one step")
        threads = [self.transfers(scheduled[t::self.threads], partner[t::self.threads]) for t in range(self.threads)]
        transfers = np.concatenate(threads)
        results = np.zeros((passes, self.out_words), np.uint32)
        accepted = np.full(len(transfers), -1, np.int64)
        arrived = np.full(passes, -1, np.int64)
        limit = 64 * passes * steps + 4 * (self.tile.latency + 8) * passes + 1000
        cycles = self._stream(self.sim.model, transfers, np.array([len(words) for words in threads], np.int64),
                              self.in_words, results, passes, self.out_words, accepted, arrived, limit)
        if arrived[-1] < 0:
            got = int((arrived >= 0).sum())
            raise RuntimeError(f"{self.design.name} tile returned {got} of {passes} results in {cycles} cycles "
                               f"({int((accepted >= 0).sum())} of {len(transfers)} transfers accepted)")
        result = self.decode(results)
        order = self._passes_of(result.get("thread", np.zeros(passes, np.int64)), passes)
        if "cycles" in result:
            pass_cycles = result["cycles"]
        else:  # one thread, one step per transfer: the span of the pass's accepted steps
            per_pass = accepted.reshape(passes, steps)
            pass_cycles = per_pass[:, -1] - per_pass[:, 0] + 1
        outputs, in_order, arrivals = (np.empty_like(x) for x in (result["outputs"], pass_cycles, arrived))
        outputs[order], in_order[order], arrivals[order] = result["outputs"], pass_cycles, arrived
        return TileRun(outputs.astype(np.uint32), in_order, arrivals, int(cycles))

    def _passes_of(self, threads, passes):
        """The stream's pass of each result, in arrival order: the next pass of the result's thread."""
        waiting = [list(range(t, passes, self.threads)) for t in range(self.threads)]
        order = []
        for thread in threads:
            if not waiting[thread]:
                raise RuntimeError(f"{self.design.name} tile returned a result of thread {thread} beyond its passes")
            order.append(waiting[thread].pop(0))
        return np.array(order, np.int64)

    def transfers(self, scheduled, partner):
        """The transfers of passes (fp32 values in the operand format) on one ``steps`` port as uint32 words [T, W]
        (none for no pass)."""
        if len(scheduled) == 0:
            return np.zeros((0, self.in_words), np.uint32)
        return codec.to_words(codec.step_transfers(self.in_layout, self.bits(scheduled), self.bits(partner)))

    def decode(self, results):
        """Result transfers uint32 words [P, W] -> ``{"outputs": [P, rows, cols], "cycles": [P], "thread": [P]}``
        (cycles and thread where the tile reports them)."""
        return codec.decode(self.out_layout, codec.from_words(results, self.out_layout.size))
