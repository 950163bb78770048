"""Exports a trace to the per-layer ``.npy`` layout of earlier academic simulators (DNNsim; SPEC section 6).

``<out>/<net>/weights/<layer>-<epoch>-<batch>-w.npy``, ``<out>/<net>/input/<layer>-<epoch>-<batch>-in.npy``,
``<out>/<net>/outGrad/<layer>-<epoch>-<batch>-outGrad.npy`` and ``<out>/<net>/trace_params.csv``
with one line per layer, no header: ``name,out_channels,Kx,Ky,stride,padding``. Epoch and
batch are zero-based and come from the optimizer step: step n is batch (n - 1) mod B of epoch
(n - 1) div B, with B the manifest's ``batches_per_epoch``.

Layer names: DNNsim (``interface/src/NetReader.cpp``, ``read_network_trace_params``) types a
layer by substrings of its name -- ``decoder``, ``encoder``, then ``fc`` or ``Linear`` (fully
connected), then ``lstm``, else a convolution -- so PyTorch names would mistype layers (VGG's
``classifier.0`` read as a convolution, a transformer's ``encoder.*.linear1`` as an encoder).
Layer i of the trace (0-based, trace order) is therefore exported as ``fc<i>`` when it is a
Linear and ``conv<i>`` when it is a convolution, and ``layer_names.csv`` (``dnnsim_name,trace_name``,
with a header) records the mapping. The csv has no groups or dilation column: a grouped,
depthwise or dilated layer is refused, naming the layer, before anything is written.

The folder ``<out>`` appears whole: it is written into a temporary sibling and swapped in at the
end (``dashraker.outputs.OutputFolder``); an earlier export there is replaced only with ``--force``.
"""

from pathlib import Path

from dashraker.outputs import OutputFolder
from dashraker.trace.errors import TraceError
from dashraker.trace.reader import open_trace
from dashraker.trace.store import atomic_write, save_npy

__all__ = ["export_dnnsim", "dnnsim_name", "is_export", "DNNSIM_FILES"]

# Trace tensor -> (DNNsim folder, file suffix).
DNNSIM_FILES = {"weight": ("weights", "w"), "input": ("input", "in"), "output_grad": ("outGrad", "outGrad")}
CSV_COLUMNS = "name,out_channels,Kx,Ky,stride,padding"


def dnnsim_name(index, layer):
    """The name DNNsim reads as the layer's type: ``fc<index>`` for a Linear, ``conv<index>`` for a convolution."""
    return f"{'fc' if layer.type == 'linear' else 'conv'}{index}"


def _square(layer, field):
    first, second = getattr(layer, field)
    if first != second:
        raise TraceError(
            f"layer {layer.name!r}: {field} {[first, second]} differs between axes; trace_params.csv holds one value"
        )
    return first


def _expressible(layer):
    """Refuse what trace_params.csv cannot say: DNNsim would read the layer as a plain convolution."""
    if layer.type == "matmul":
        raise TraceError(f"layer {layer.name!r}: a matmul (a product of two activations, one weight per sample) "
                         "cannot be exported to dnnsim: DNNsim's layers have one weight tensor")
    lost = []
    if layer.groups != 1:
        kind = "depthwise" if layer.groups == layer.in_channels == layer.out_channels else "grouped"
        lost.append(f"groups {layer.groups} ({kind})")
    if tuple(layer.dilation) != (1, 1):
        lost.append(f"dilation {list(layer.dilation)} (dilated)")
    if lost:
        raise TraceError(f"layer {layer.name!r}: {' and '.join(lost)} cannot be exported to dnnsim: trace_params.csv "
                         f"({CSV_COLUMNS}) has no groups or dilation column, DNNsim would read a plain convolution")


def _params_line(index, layer):
    _expressible(layer)
    return (f"{dnnsim_name(index, layer)},{layer.out_channels},{layer.kernel[0]},{layer.kernel[1]},"
            f"{_square(layer, 'stride')},{_square(layer, 'padding')}\n")


def is_export(path):
    """Whether the folder ``path`` is recognisably a DNNsim export (what ``--force`` may replace)."""
    expected = {"trace_params.csv", "layer_names.csv", *(folder for folder, _ in DNNSIM_FILES.values())}
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
    if trace.unsupported:
        raise TraceError(f"layer {trace.unsupported[0].name!r}: {trace.unsupported[0].reason}; not exportable either")
    net = net or trace.manifest["model"]
    params = [_params_line(index, layer) for index, layer in enumerate(trace.layers)]
    names = {layer.name: dnnsim_name(index, layer) for index, layer in enumerate(trace.layers)}
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
            if layer.type == "linear":
                array = array.reshape(-1, array.shape[-1])  # DNNsim's fc rows: samples times tokens
            save_npy(staging / net / sub / f"{names[layer.name]}-{epoch}-{batch}-{suffix}.npy", array)
        atomic_write(staging / net / "trace_params.csv", lambda file: file.write("".join(params).encode()))
        mapping = "dnnsim_name,trace_name\n" + "".join(f"{new},{old}\n" for old, new in names.items())
        atomic_write(staging / net / "layer_names.csv", lambda file: file.write(mapping.encode()))
    return folder.path / net
