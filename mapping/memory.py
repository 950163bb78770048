"""The mapper's memory model: on-chip reuse, buffer and DRAM traffic, and whether an operation is memory-bound.

Values move in the operand format (2 bytes for bf16, 4 for fp32), dense, or with
``memory: {compression: zvc}`` zero-value compressed: a stream set (in the buffers) or a
tensor (in DRAM) is stored as a bit mask of its values, one bit each, and its non-zero values,
packed, so ``v`` values of which ``z`` are non-zero take ``ceil(v / 8) + z * value`` bytes,
counted from the real values. Results
(the PEs' fp32 sums, and the result tensor, whose values the trace does not hold) stay dense.
Operands arrive compressed from DRAM and stay so in the global and tile buffers; each value the
PEs read from a tile buffer is decoded (zeros re-expanded), each result the PEs write is encoded
(``zvc_decodes``, ``zvc_encodes``).

* Tile buffers. Each tile has a scheduled-operand buffer and a partner buffer of
  ``tile_buffer_kib`` each. A pass reads each of its row streams once (the value is
  broadcast along the row of PEs) and each column stream once (broadcast along the
  column). A tile keeps its row set (column set) for its next pass when that pass uses
  the same set and the set fits in the buffer; otherwise the set is loaded from the
  global buffer (a write into the tile buffer). The global buffer multicasts: a set
  that several tiles load in the same round of passes (passes k*T .. k*T+T-1, one per
  tile) is read from it once.
* Global buffer (``global_buffer_kib``). Each operation reads its two operand tensors
  from DRAM and writes its result tensor back. If the smaller operand fits in half the
  buffer it stays resident and the larger streams through once; otherwise the larger is
  re-read once per half-buffer chunk of the smaller. Every DRAM byte is also written
  into (read) or read out of (written) the global buffer. PE results (fp32 accumulators)
  are written into the global buffer once per pass.
* Time. Compute time is cycles / clock; DRAM time is DRAM bytes / bandwidth. An
  operation whose DRAM time exceeds its compute time is memory-bound and takes the DRAM
  time (transfers overlap computation through double buffering).
"""

import dataclasses

import numpy as np

__all__ = ["Traffic", "traffic", "dram_bytes", "zvc_bytes", "timing"]


@dataclasses.dataclass
class Traffic:
    """64-bit word counts per memory level (``counts``) and the DRAM bytes of one operation."""

    counts: dict
    dram_bytes: int


def zvc_bytes(values, nonzero, value_bytes):
    """Bytes of ``values`` values (``nonzero`` of them non-zero) zero-value compressed: a mask of one bit per value,
    in whole bytes, and the non-zero values. NumPy arrays or ints, element-wise."""
    return -(-values // 8) + nonzero * value_bytes


def dram_bytes(operand_bytes, result_bytes, buffer_bytes):
    """DRAM bytes of an operation: operands in (re-read if the smaller cannot stay resident), result out."""
    small, large = sorted(operand_bytes)
    half = buffer_bytes / 2
    rereads = 1 if small <= half else -(-small // half)
    return int(small + large * rereads + result_bytes)


def _loads(keys, set_bytes, tiles, capacity):
    """(bytes written into tile buffers, bytes read from the global buffer) for one side's sets.

    A tile keeps a set only for its own next pass, and only if it fits; the global buffer
    multicasts a set once to all the tiles that load it in the same round of passes.
    """
    kept = np.zeros(keys.size, bool)
    kept[tiles:] = (keys[tiles:] == keys[:-tiles]) & (set_bytes[tiles:] <= capacity)
    loaded = np.flatnonzero(~kept)
    rounds = loaded // tiles
    _, first = np.unique(rounds * (int(keys.max(initial=0)) + 1) + keys[loaded], return_index=True)
    return int(set_bytes[loaded].sum()), int(set_bytes[loaded[first]].sum())


WEIGHTS = ("W", "dW")  # the tensors of an operation that a batch's samples share: read or written once per batch


def traffic(config, op_plan, arrays, compressed=None, weight_share=1.0):
    """Traffic of one operation: ``arrays`` holds per-pass ``steps``, ``rows``, ``cols``, ``row_key``, ``col_key``.

    ``compressed`` (with zero-value compression): per pass the bytes of its row set and column set
    (``row_bytes``, ``col_bytes``) and the bytes of the scheduled and partner tensors (``operand_bytes``).
    ``weight_share``: the share of the weights' (``WEIGHTS``) DRAM bytes this operation is charged, where it maps one
    group of a batch's samples and the batch reads the weights once.
    """
    value = 2 if config.fmt == "bf16" else 4
    stream = arrays["steps"] * config.lanes * value
    row_bytes, col_bytes = arrays["rows"] * stream, arrays["cols"] * stream
    values_read = int((row_bytes.sum() + col_bytes.sum()) // value)
    if compressed is not None:
        row_bytes, col_bytes = compressed["row_bytes"], compressed["col_bytes"]
    capacity = config.memory.tile_buffer_kib * 1024
    (row_fills, row_reads), (col_fills, col_reads) = (
        _loads(arrays[key], size, config.tiles, capacity) for key, size in (("row_key", row_bytes), ("col_key", col_bytes))
    )
    fills, global_reads = row_fills + col_fills, row_reads + col_reads
    tile_reads = int(row_bytes.sum() + col_bytes.sum())
    results = int((arrays["rows"] * arrays["cols"]).sum()) * 4
    operands = [op_plan.elements[op_plan.scheduled] * value, op_plan.elements[op_plan.partner] * value]
    if compressed is not None:
        operands = list(compressed["operand_bytes"])
    result_name = next(name for name in op_plan.elements if name not in (op_plan.scheduled, op_plan.partner))
    share = {name: weight_share if name in WEIGHTS else 1.0 for name in op_plan.elements}
    operands = [size * share[name] for name, size in zip((op_plan.scheduled, op_plan.partner), operands)]
    result_bytes = op_plan.elements[result_name] * value * share[result_name]
    dram = dram_bytes(operands, result_bytes, config.memory.global_buffer_kib * 1024)
    return Traffic(
        counts={
            "tile_sram_words": -(-(tile_reads + fills) // 8),
            "global_sram_words": -(-(global_reads + results + dram) // 8),
            "dram_words": -(-dram // 8),
            "zvc_decodes": values_read if compressed is not None else 0,
            "zvc_encodes": results // 4 if compressed is not None else 0,
        },
        dram_bytes=dram,
    )


def timing(config, cycles, dram):
    """Compute and DRAM time (s) of an operation and whether it is memory-bound."""
    compute = cycles / (config.clock_mhz * 1e6)
    transfer = dram / (config.memory.dram_gbps * 1e9)
    return {"compute_s": compute, "dram_s": transfer, "time_s": max(compute, transfer), "memory_bound": transfer > compute}
