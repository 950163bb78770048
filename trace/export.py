"""Exports a trace to the per-layer ``.npy`` layout of earlier academic simulators (DNNsim; SPEC section 6).

``<out>/<net>/weights/<layer>-<epoch>-<batch>-w.npy``, ``<out>/<net>/input/<layer>-<epoch>-<batch>-in.npy``,
``<out>/<net>/outGrad/<layer>-<epoch>-<batch>-outGrad.npy`` and ``<out>/<net>/trace_params.csv``
with one line per layer, no header: ``name,out_channels,Kx,Ky,stride,padding``. Epoch and
batch are zero-based and come from the optimizer step: step n is batch (n - 1) mod B of epoch
(n - 1) div B, with B the manifest's ``batches_per_epoch``.
"""

from pathlib import Path

from dashraker.outputs import OutputFolder
from dashraker.trace.errors import TraceError
from dashraker.trace.reader import open_trace
from dashraker.trace.store import atomic_write, save_npy

__all__ = ["export_dnnsim", "is_export", "DNNSIM_FILES"]

# Trace tensor -> (DNNsim folder, file suffix).
DNNSIM_FILES = {"weight": ("weights", "w"), "input": ("input", "in"), "output_grad": ("outGrad", "outGrad")}


def _square(layer, field):
    first, second = getattr(layer, field)
    if first != second:
        raise TraceError(
            f"layer {layer.name!r}: {field} {[first, second]} differs between axes; trace_params.csv holds one value"
        )
    return first


def is_export(path):
    """Whether the folder ``path`` is recognisably a DNNsim export (what ``--force`` may replace)."""
    expected = {"trace_params.csv", *(folder for folder, _ in DNNSIM_FILES.values())}
    nets = list(Path(path).iterdir())
    return all(net.is_dir() and {entry.name for entry in net.iterdir()} <= expected for net in nets)


def export_dnnsim(path, out, net=None, progress=False, overwrite=False):
    """Write the DNNsim layout of the trace at ``path`` under ``out/<net>`` (``net`` defaults to the model name).

    ``out`` is written whole into a temporary sibling and put in place at the end; an existing
    non-empty ``out`` is refused unless ``overwrite`` and it is an export (``is_export``).
    """
    folder = OutputFolder(out, "export folder", is_export if overwrite else None,
                          "--force replaces only an export" if overwrite else "use --force to replace an export")
    trace = open_trace(path)
    net = net or trace.manifest["model"]
    params = [
        f"{layer.name},{layer.out_channels},{layer.kernel[0]},{layer.kernel[1]},"
        f"{_square(layer, 'stride')},{_square(layer, 'padding')}\n"
        for layer in trace.layers
    ]
    per_epoch = trace.manifest.get("batches_per_epoch")
    jobs = [(step, layer, tensor) for step in trace.steps for layer in trace.layers for tensor in DNNSIM_FILES]
    if progress:
        from tqdm import tqdm

        jobs = tqdm(jobs, desc="exporting", unit="file")
    with folder, folder.staging() as staging:
        for step, layer, tensor in jobs:
            epoch, batch = divmod(step - 1, per_epoch) if per_epoch else (0, step - 1)
            sub, suffix = DNNSIM_FILES[tensor]
            array = trace.load_tensor(layer.name, step, tensor)
            save_npy(staging / net / sub / f"{layer.name}-{epoch}-{batch}-{suffix}.npy", array)
        atomic_write(staging / net / "trace_params.csv", lambda file: file.write("".join(params).encode()))
    return folder.path / net
