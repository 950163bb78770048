"""Constructor checks: each component checks the arguments it is given, as Amaranth's own library does, so that it
refuses what it cannot build whoever calls it. The design registry (``dashraker/designs``) holds the defaults and
checks a user's values first, naming the flag or file field; the bounds that are the hardware's are stated here, in
``hw/``, and the registry reads them from the component."""

__all__ = ["check_count"]


def check_count(name, value, minimum=1, maximum=None):
    """``value`` if it is an integer in ``minimum..maximum``, else ``ValueError`` naming ``name`` and ``value``."""
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        bound = f"in {minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be an integer {bound}, not {value!r}")
    return value
