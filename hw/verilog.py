"""Verilog conversion of generated components, written atomically."""

import contextlib
import re

from dashraker.outputs import atomic_write

__all__ = ["to_verilog", "write_verilog", "shared_verilog", "place"]


def to_verilog(component, name):
    """Verilog text of ``component`` with top module ``name`` (ports from its signature)."""
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, path, name):
    """Write ``component`` as Verilog to ``path`` atomically; returns the path."""
    text = to_verilog(component, name)
    atomic_write(path, lambda file: file.write(text.encode()))
    return path


def place(path):
    """An instance path up to its indices (``pe0_0.mul3`` and ``pe1_2.mul0`` are one place): only copies in one
    place are written once, since area sums its parts by instance path (a row's mux and a PE's stay apart)."""
    return re.sub(r"\d+", "#", path)


def _ports(component):
    """A component's ports as Amaranth's ``convert`` names them: signature paths joined by ``__``."""
    from amaranth.hdl import ValueCastable
    from amaranth.lib import wiring

    ports = {}
    for path, member, value in component.signature.flatten(component):
        value = value.as_value() if isinstance(value, ValueCastable) else value
        ports["__".join(map(str, path))] = (value, "i" if member.flow == wiring.In else "o")
    return ports


def _sameness(component):
    """What makes two sub-components the same hardware: class, signature and public parameters, or None for an
    object that is not a ``wiring.Component`` (it is converted in place)."""
    from amaranth.hdl import Elaboratable, Value, ValueCastable
    from amaranth.lib import wiring

    if not isinstance(component, wiring.Component):
        return None
    parameters = tuple((name, repr(value)) for name, value in sorted(vars(component).items())
                       if not name.startswith("_") and not isinstance(value, (Value, ValueCastable, Elaboratable)))
    return type(component).__module__, type(component).__qualname__, repr(component.signature.members), parameters


def _read_signals(fragment, skip):
    """The signals that ``fragment`` and its sub-fragments (but those in ``skip``) read."""
    from amaranth.hdl import Instance
    from amaranth.hdl._ast import SignalSet
    from amaranth.hdl._mem import MemoryInstance

    signals = SignalSet()
    for statements in fragment.statements.values():
        for statement in statements:
            signals |= statement._rhs_signals()
    if isinstance(fragment, Instance):
        for value, kind in fragment.ports.values():
            signals |= value._rhs_signals() if kind == "i" else SignalSet()
    if isinstance(fragment, MemoryInstance):
        for port in fragment._read_ports:
            signals |= port._addr._rhs_signals() | port._en._rhs_signals()
        for port in fragment._write_ports:
            signals |= port._addr._rhs_signals() | port._data._rhs_signals() | port._en._rhs_signals()
    for sub, _, _ in fragment.subfragments:
        if sub not in skip:
            signals |= _read_signals(sub, skip)
    return signals


@contextlib.contextmanager
def _first_copies_elaborated():
    """Within this context Amaranth's elaboration (``Fragment.get``, which a ``Module`` calls on each submodule)
    builds only the first sub-component of each sameness (``_sameness``); a later copy becomes an empty fragment
    whose origin is the copy, which ``shared_verilog`` replaces by an instance of the kept module (a copy seen twice
    is always shared, and the logic inside a shared copy is never read). Elaborating the sixteen PEs of a 4x4 tile
    took most of its conversion. Not thread-safe: ``Fragment.get`` is patched for the whole process meanwhile."""
    from amaranth.hdl._ir import Fragment

    original, seen = Fragment.__dict__["get"], set()

    def get(obj, platform):
        key = _sameness(obj)
        if key is not None and key in seen:
            _mark_used(obj)
            copy = Fragment()
            copy.origins = (obj,)
            return copy
        fragment = original.__func__(obj, platform)
        # a copy may be left out only where the elaborated first one is a module of its own with the same sameness
        if key is not None and type(fragment) is Fragment and fragment.origins and fragment.origins[0] is obj \
                and _sameness(obj) == key:
            seen.add(key)
        return fragment

    Fragment.get = staticmethod(get)
    try:
        yield
    finally:
        Fragment.get = original


def _mark_used(obj, depth=0):
    """Mark a copy left unelaborated, and the elaboratables it holds, as used (Amaranth warns of unused ones)."""
    from amaranth.hdl import Elaboratable

    if isinstance(obj, Elaboratable):
        obj._MustUse__used = True
        values = vars(obj).values()
    elif isinstance(obj, (list, tuple)):
        values = obj
    elif isinstance(obj, dict):
        values = obj.values()
    else:
        return
    if depth < 8:
        for value in values:
            if isinstance(value, (Elaboratable, list, tuple, dict)):
                _mark_used(value, depth + 1)


def shared_verilog(component, name):
    """Verilog of ``component`` (top module ``name``) where every sub-component that occurs more than once with
    the same class, signature, parameters and used outputs, in the same place up to indices (``pe0_0.mul3`` and
    ``pe1_2.mul0``), is converted once, as a module its copies instantiate.

    Amaranth builds every copy's netlist on its own, so a 4x4 tile's sixteen PEs take sixteen times one PE's
    minutes; area (``fpga.area``) needs each distinct module once. A kept module has the ports its copies'
    parent uses (logic behind an unused output is dropped, as Amaranth drops it from the whole design) and is
    named by its first copy's instance path (``name.pe0_0``), as Amaranth names modules. The logic is
    ``to_verilog``'s up to names, except that a constant a parent ties to a copy's input is not folded into it.
    Only the first copy is elaborated (``_first_copies_elaborated``): the others become the instances of the kept
    module without their logic ever being built.
    """
    from amaranth.back import verilog
    from amaranth.hdl import ClockSignal, Instance, ResetSignal
    from amaranth.hdl._ir import Fragment, PortDirection

    kept, texts = {}, []  # sameness and used outputs -> (module name, its ports); module texts, children first
    directions = {"i": PortDirection.Input, "o": PortDirection.Output}

    def sameness(fragment):  # only a module of its own (a memory or an instance is its parent's cell)
        return _sameness(fragment.origins[0]) if type(fragment) is Fragment and fragment.origins else None

    def copies(fragment, found):
        for sub, _, _ in fragment.subfragments:
            key = sameness(sub)
            if key is not None:
                found.setdefault(key, []).append(sub)
            copies(sub, found)
        return found

    def convert(component, module, ports):
        with _first_copies_elaborated():
            fragment = Fragment.get(component, None)
        shared = {sub for subs in copies(fragment, {}).values() if len(subs) > 1 for sub in subs}
        read = _read_signals(fragment, shared)

        def instantiate(fragment, path):
            for i, (sub, sub_name, src_loc) in enumerate(fragment.subfragments):
                if sub not in shared:
                    instantiate(sub, f"{path}.{sub_name}")
                    continue
                origin = sub.origins[0]
                used = {port: (value, kind) for port, (value, kind) in _ports(origin).items()
                        if kind == "i" or any(signal in read for signal in value._rhs_signals())}
                key = (sameness(sub), tuple(used), place(f"{path}.{sub_name}"))
                if key not in kept:
                    kept[key] = (f"{path}.{sub_name}", convert(origin, f"{path}.{sub_name}", used))
                kept_name, kept_ports = kept[key]
                args = [(kind, port, value) for port, (value, kind) in used.items()]
                args += [("i", port, signal("sync")) for port, signal in (("clk", ClockSignal), ("rst", ResetSignal))
                         if port in kept_ports]
                fragment.subfragments[i] = (Instance(kept_name, *args), sub_name, src_loc)

        instantiate(fragment, module)
        text, _ = verilog.convert_fragment(fragment, {port: (value, directions[kind]) for port, (value, kind)
                                                      in ports.items()}, module, emit_src=False)
        texts.append(text)
        header = re.search(r"^module (?:\\" + re.escape(module) + " |" + re.escape(module) + r")\((.*?)\);", text,
                           re.S | re.M)
        return {port.strip() for port in header.group(1).split(",")}

    convert(component, name, _ports(component))
    return "\n".join(reversed(texts))
