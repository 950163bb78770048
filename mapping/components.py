"""The mapper's energy components: the hardware actions it charges, each at an energy-table entry.

Every design shares the multipliers (by operand format), the adders and the memory
system's actions; a design's cost model declares its own (``Cost.components``). The
components are the shared compute actions, the registered designs' own in registry
order, then the memory system's: the order of the report's energy columns.
"""

__all__ = ["SHARED", "MEMORY_ACTIONS", "MEMORY", "CLOCK", "CLOCK_ENTRY", "STATIC", "components", "table_entry", "required_entries"]

# Compute actions of every design -> energy-table entry (None: the multiplier of the operand format, mul_bf16 or
# mul_fp32).
SHARED = {"mul": None, "add_fp32": "add_fp32", "add_int32": "add_int32"}
# The memory system's actions -> entry (None: the SRAM of the configured buffer's size).
MEMORY_ACTIONS = {"tile_sram_words": None, "global_sram_words": None, "dram_words": "dram_64b",
                  "zvc_encodes": "zvc_encode", "zvc_decodes": "zvc_decode"}
# Components of the memory system; the others but STATIC make up the core (PEs, schedulers, encoders,
# their clocking).
MEMORY = tuple(MEMORY_ACTIONS)
# The tiles' clocking (not a count of actions, part of the core): every flip-flop of every tile over every cycle of
# the operation's run time, at the table's ``flip_flop_clock`` (``mapping.silicon.clock_pj``).
CLOCK = ("clock",)
CLOCK_ENTRY = "flip_flop_clock"
# Static energy (not a count of actions): the configured silicon's leakage over the operation's run time.
STATIC = ("leakage",)


def _designs(designs):
    if designs is not None:
        return designs
    from dashraker.designs import DESIGNS

    return DESIGNS.values()


def components(designs=None):
    """Every energy component -> its energy-table entry: the shared compute actions, the own actions of ``designs``
    (default: the registered ones, in registry order), the memory system's. ``ValueError`` if a design charges an
    action at another entry than the shared components or an earlier design do."""
    own = {}
    for design in _designs(designs):
        for action, entry in design.cost.components.items():
            known = {**SHARED, **MEMORY_ACTIONS, **own}
            if known.get(action, entry) != entry:
                raise ValueError(f"design {design.name!r} charges {action!r} at {entry!r}, already charged at "
                                 f"{known[action]!r}")
            if action not in known:
                own[action] = entry
    return {**SHARED, **own, **MEMORY_ACTIONS}


def table_entry(component, fmt):
    """The energy table's entry of a mapper component (the multiplier's by operand format ``fmt``)."""
    return components()[component] or f"mul_{fmt}"


def required_entries(designs=None):
    """The energy-table entries the components need (the SRAM's sized entry apart): a multiplier per operand format
    of ``designs``, every named entry and the clocking's."""
    designs = list(_designs(designs))
    multipliers = {f"mul_{fmt}" for design in designs for fmt in design.formats}
    return multipliers | {CLOCK_ENTRY} | {entry for entry in components(designs).values() if entry is not None}
