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
with a header) records the mapping (``trace_names`` reads it back).

Refused (``REFUSED``), every such layer named in one message before anything is written: what
trace_params.csv cannot say (groups: grouped and depthwise convolutions; dilation; a stride or
padding that differs between the axes), transposed convolutions (``conv_transpose2d``: DNNsim has
none, and would read one as a convolution), products of two activations (``matmul`` layers: the
attention of the bundled transformer), and layers of a type this version does not know.

Beside the tensors the export writes ``tensordash.prototxt``, a DNNsim batch file that simulates
the recorded steps on TensorDash (one ``simulate`` block per recorded step DNNsim can read: it
loads epochs 0 to E - 1 of one batch number), and ``DNNSIM.txt``, the steps to run it: DNNsim
reads ``models/<net>/trace_params.csv`` and ``net_traces/<net>/{weights,input,outGrad}`` below
the folder it runs in.

The folder ``<out>`` appears whole: it is written into a temporary sibling and swapped in at the
end (``dashraker.outputs.OutputFolder``); an earlier export of the same network there is replaced
only with ``--force``, and a folder holding another network's export never.
"""

from pathlib import Path

from dashraker.outputs import OutputFolder
from dashraker.trace.errors import TraceError
from dashraker.trace.reader import open_trace
from dashraker.trace.store import atomic_write, save_npy

__all__ = ["export_dnnsim", "dnnsim_name", "is_export", "exported_networks", "trace_names", "DNNSIM_FILES",
           "REFUSED"]

# Trace tensor -> (DNNsim folder, file suffix).
DNNSIM_FILES = {"weight": ("weights", "w"), "input": ("input", "in"), "output_grad": ("outGrad", "outGrad")}
CSV_COLUMNS = "name,out_channels,Kx,Ky,stride,padding"
EXTRA_FILES = ("trace_params.csv", "layer_names.csv", "tensordash.prototxt", "DNNSIM.txt")
REFUSED = ("grouped and depthwise convolutions (groups > 1), dilated convolutions, a stride or padding that differs "
           "between the axes (trace_params.csv has one groups-free, dilation-free line per layer); transposed "
           "convolutions (DNNsim has none); matmul layers, "
           "products of two activations such as the transformer's attention (DNNsim's layers have one weight "
           "tensor); layers of a type this version does not know")


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
    if layer.type == "conv_transpose2d":
        raise TraceError(f"layer {layer.name!r}: a transposed convolution cannot be exported to dnnsim: DNNsim has "
                         "none and would read it as a convolution")
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


def _params_lines(trace):
    """trace_params.csv's lines, or one ``TraceError`` naming every layer refused and why."""
    lines, refused = [], [f"layer {layer.name!r}: {layer.reason}" for layer in trace.unsupported]
    for index, layer in enumerate(trace.layers):
        try:
            lines.append(_params_line(index, layer))
        except TraceError as error:
            refused.append(str(error))
    if refused:
        raise TraceError(f"{trace.path}: {len(refused)} layer(s) cannot be exported to dnnsim: " + "; ".join(refused))
    return lines


def exported_networks(path):
    """The networks exported in the folder ``path`` (their folder names), or None if it holds anything else."""
    expected = {*EXTRA_FILES, *(folder for folder, _ in DNNSIM_FILES.values())}
    nets = list(Path(path).iterdir())
    if all(net.is_dir() and {entry.name for entry in net.iterdir()} <= expected for net in nets):
        return sorted(net.name for net in nets)
    return None


def is_export(path):
    """Whether the folder ``path`` is recognisably a DNNsim export (what ``--force`` may replace)."""
    return exported_networks(path) is not None


def trace_names(export):
    """DNNsim's layer names (``conv<i>``/``fc<i>``) -> the trace's, from an export's ``layer_names.csv`` (``export``:
    the network's folder), to read DNNsim's per-layer results against the trace."""
    lines = (Path(export) / "layer_names.csv").read_text().splitlines()[1:]
    return dict(line.split(",", 1) for line in lines if line)


def _prototxt(net, steps, per_epoch):
    """A DNNsim batch file simulating ``steps`` on TensorDash: a block per recorded step whose earlier epochs of the
    same batch are recorded too (DNNsim reads epochs 0..E-1 of one batch)."""
    places = {divmod(step - 1, per_epoch) if per_epoch else (0, step - 1) for step in steps}
    blocks, skipped = [], []
    for epoch, batch in sorted(places, key=lambda place: place[::-1]):
        if all((e, batch) in places for e in range(epoch)) and not any(b == batch and e > epoch for e, b in places):
            blocks.append(f"""simulate {{
  network: "{net}"
  model: "Trace"
  data_type: "BFloat16"
  training: true
  epochs: {epoch + 1}
  batch: {batch}
  experiment {{
    architecture: "TensorDash"
    task: "Cycles"
    n_lanes: 16
    n_columns: 16
    n_rows: 4
    n_tiles: 1
    banks: 16
    lookahead_h: 2
    lookaside_d: 5
    search_shape: 'T'
  }}
}}
""")
        elif not any(b == batch and e > epoch for e, b in places):
            skipped.append(f"epoch {epoch} batch {batch}")
    note = (f"# not simulated: {', '.join(skipped)} (DNNsim reads epochs 0 to E - 1 of a batch; record them too)\n"
            if skipped else "")
    return (f"# DNNsim batch file for {net}: TensorDash, 16 lanes, one tile of 4 rows (filters) x 16 columns "
            "(windows), H=2, T<2,5>\n" + note + "".join(blocks))


def _steps_text(net):
    return f"""How to run DNNsim (github.com/isakedo/DNNsim, its training version, e.g. commit 3b0ecaf) on this export:

  cmake -H. -Bcmake-build-release -DCMAKE_BUILD_TYPE=Release && cmake --build cmake-build-release --target all
  # in the folder DNNsim runs in (it reads models/ and net_traces/ below it):
  mkdir -p models/{net} net_traces
  cp EXPORT/{net}/trace_params.csv models/{net}/
  cp -r EXPORT/{net} net_traces/{net}
  ./DNNsim EXPORT/{net}/tensordash.prototxt      # results/ gets one csv per simulation

DNNsim names the layers conv<i> and fc<i> (i: the layer's index in the trace); layer_names.csv maps
them back to the trace's names (dashraker.trace.export.trace_names).
"""


def export_dnnsim(path, out, net=None, progress=False, overwrite=False):
    """Write the DNNsim layout of the trace at ``path`` under ``out/<net>`` (``net`` defaults to the model name).

    ``out`` is written whole into a temporary sibling and put in place at the end; an existing
    non-empty ``out`` is refused unless ``overwrite`` and it is an export (``is_export``).
    """
    trace = open_trace(path)
    net = net or trace.manifest["model"]
    if Path(out).is_dir() and any(Path(out).iterdir()):
        others = [name for name in exported_networks(out) or () if name != net]
        if others:
            raise TraceError(f"export folder {out}: holds the export of another network ({', '.join(others)}); export "
                             f"{net} into a folder of its own (--force replaces only an export of {net})")
    folder = OutputFolder(out, "export folder", is_export if overwrite else None,
                          "--force replaces only an export" if overwrite else "use --force to replace an export")
    params = _params_lines(trace)
    names = {layer.name: dnnsim_name(index, layer) for index, layer in enumerate(trace.layers)}
    per_epoch = trace.manifest.get("batches_per_epoch")
    jobs = [(step, layer, tensor) for step in trace.steps for layer in trace.layers for tensor in DNNSIM_FILES]
    if progress:
        from dashraker.progress import bar as progress_bar

        jobs = progress_bar(jobs, desc="exporting", unit="file")
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
        batch_file = _prototxt(net, trace.steps, per_epoch)
        atomic_write(staging / net / "tensordash.prototxt", lambda file: file.write(batch_file.encode()))
        atomic_write(staging / net / "DNNSIM.txt", lambda file: file.write(_steps_text(net).encode()))
    return folder.path / net
