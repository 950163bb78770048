"""The three training operations' names (SPEC section 5), in one light module that the command line reads."""

__all__ = ["OPS", "RENAMED_OPS"]

OPS = ("fwd", "bwd_input", "bwd_weight")  # forward, input gradient, weight gradient
RENAMED_OPS = {op.replace("_", "-"): op for op in OPS if "_" in op}  # `--op` spelled them with '-' until issue 50
