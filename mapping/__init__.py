"""Traces to cycles and energy: the SPEC section 5 dataflow, per-pass cycles from the reference models, memory and energy models."""

__all__ = []
