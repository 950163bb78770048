"""Trains a network on a data set and records a trace on the chosen optimizer steps (``record``)."""

import contextlib
import math

import torch
from torch.nn import functional as F
from torch.nn.utils import prune as torch_prune
from dashraker.progress import bar as progress_bar

from dashraker.trace import factory
from dashraker.trace.data import load_data
from dashraker.trace.errors import RecordError
from dashraker.trace.networks import build_model
from dashraker.trace.recorder import Recorder, recordable_layers
from dashraker.outputs import OutputFolder
from dashraker.trace.store import is_trace

__all__ = ["record", "train", "MagnitudePruner", "OPTIMIZERS", "optimizer_settings", "make_optimizer", "parse_steps",
           "check_device", "AUTOCAST"]

# Data kind -> optimizer and its settings: SGD for the classifiers, AdamW for the language models.
OPTIMIZERS = {
    "tensors": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}),
    "tokens": (torch.optim.AdamW, {"lr": 1e-3}),
    "masked": (torch.optim.AdamW, {"lr": 1e-3}),
}
# --autocast name -> the dtype the forward pass computes its products in (torch.autocast).
AUTOCAST = {"bf16": torch.bfloat16}


def optimizer_settings(kind, lr=None):
    """(optimizer class, its keyword arguments) for data of ``kind``, with ``lr`` replacing the default if given."""
    cls, settings = OPTIMIZERS[kind]
    return cls, {**settings, **({} if lr is None else {"lr": lr})}


def make_optimizer(net, kind, lr=None):
    """The optimizer of ``OPTIMIZERS`` for data of ``kind`` over the parameters of ``net``."""
    cls, settings = optimizer_settings(kind, lr)
    return cls(net.parameters(), **settings)


class MagnitudePruner:
    """Gradual magnitude pruning of every recorded layer's weight (a MatMul has none) to ``target`` sparsity, per layer.

    Uses ``torch.nn.utils.prune`` masks (the layer computes ``weight = weight_orig * weight_mask``
    before each forward pass, so traces record the pruned weights). Sparsity follows the cubic
    schedule of Zhu and Gupta (2017), s(t) = target * (1 - (1 - t / T)^3) over the first half of
    training (T = total_steps // 2), then stays at ``target``. As in their method the masks are
    updated every T // 10 steps (and at step 1), masking the smallest-magnitude surviving weights,
    so pruned weights stay pruned.
    """

    def __init__(self, net, target, total_steps):
        self.target = self.check(target)
        self.ramp = max(1, total_steps // 2)
        self.every = max(1, self.ramp // 10)
        self.modules = [module for _, module in recordable_layers(net) if hasattr(module, "weight")]  # not MatMul
        for module in self.modules:
            torch_prune.identity(module, "weight")

    @staticmethod
    def check(target):
        """``target`` if it is a sparsity in [0, 1), else a ``RecordError``."""
        if not isinstance(target, (int, float)) or not 0.0 <= target < 1.0:
            raise RecordError(f"prune sparsity must be in [0, 1), not {target!r}")
        return target

    def sparsity(self, step):
        return self.target * (1.0 - (1.0 - min(step, self.ramp) / self.ramp) ** 3)

    @torch.no_grad()
    def update(self, step):
        """Set every mask for optimizer step ``step`` (before its forward pass), on the steps that update them."""
        if (step - 1) % self.every or step > self.ramp + self.every:
            return
        for module in self.modules:
            mask = module.weight_mask
            pruned = round(self.sparsity(step) * mask.numel())
            magnitude = (module.weight_orig * mask).abs().flatten()
            new = torch.ones_like(magnitude)
            new[torch.topk(magnitude, pruned, largest=False).indices] = 0.0
            mask.copy_(new.view_as(mask))


def _batches(dataset, batch_size, generator, device):
    """Endless shuffled batches on ``device``, a new permutation each epoch; the last partial batch is dropped."""
    while True:
        order = torch.randperm(len(dataset), generator=generator)
        for start in range(0, len(dataset) - batch_size + 1, batch_size):
            index = order[start : start + batch_size]
            yield dataset.x[index].to(device), dataset.y[index].to(device)


def _loss(net, x, y, step):
    """Cross-entropy of ``net``'s logits [..., classes] against targets [...]; a model or data set that do not fit
    (the user's own) is one ``RecordError``."""
    try:
        logits = net(x)
        if not isinstance(logits, torch.Tensor):
            raise RecordError(f"step {step}: the model returned a {type(logits).__name__}, not a tensor of class logits "
                              "[..., classes] (return the logits alone, e.g. out[0] of a tuple)")
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    except RecordError:
        raise
    except (RuntimeError, ValueError, TypeError, IndexError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RecordError(f"step {step}: the model failed on a batch x {list(x.shape)} {x.dtype}, targets "
                          f"{list(y.shape)} (it must map x to class logits [..., classes] for targets [...]): "
                          f"{first}") from None


def train(
    net, dataset, total_steps, *, batch_size, seed, lr=None, prune=None, step_context=None, losses=None, progress=False,
    autocast=None
):
    """Run ``total_steps`` optimizer steps on the device ``net`` is on; ``step_context(step)`` may return a context
    wrapping a step's passes; ``autocast``: a name of ``AUTOCAST`` (the forward pass under ``torch.autocast``).

    Returns the loss of every step (appended to ``losses`` when given, so a caller can watch it).
    """
    net.train()
    if not any(parameter.requires_grad for parameter in net.parameters()):
        raise RecordError(f"the model {type(net).__name__} has no trainable parameter (all frozen: requires_grad "
                          "False, or none at all); training needs at least one")
    pruner = MagnitudePruner(net, prune, total_steps) if prune else None
    optimizer = make_optimizer(net, dataset.kind, lr)
    device = next(net.parameters()).device
    batches = _batches(dataset, batch_size, torch.Generator().manual_seed(seed), device)
    losses = [] if losses is None else losses
    bar = progress_bar(range(1, total_steps + 1), desc=f"training {type(net).__name__}", unit="step",
                       disable=not progress)
    for step in bar:
        x, y = next(batches)
        if pruner:
            pruner.update(step)
        context = step_context(step) if step_context else None
        with context or contextlib.nullcontext():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, AUTOCAST[autocast]) if autocast else contextlib.nullcontext():
                loss = _loss(net, x, y, step)
            if not math.isfinite(loss.item()):
                raise RecordError(f"training diverged: the loss is {loss.item()} at step {step} "
                                  f"(learning rate {optimizer.defaults['lr']}); no trace written")
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
    return losses


MAX_STEP = 999_999  # step folders are named with 6 digits


def _check_targets(net, dataset):
    """A ``RecordError`` naming the first sample whose target is past the classes of the model's logits, which the
    loss would report as the model's failure: found from one sample's forward pass, before training. A model that
    fails on the data is left to ``_loss``, which says how on the first batch."""
    was_training = net.training
    try:
        with torch.no_grad():
            logits = net.eval()(dataset.x[:1])
    except Exception:
        return
    finally:
        net.train(was_training)
    if not isinstance(logits, torch.Tensor) or logits.dim() == 0:
        return
    classes = logits.shape[-1]
    past = (dataset.y.reshape(len(dataset), -1) >= classes).any(1).nonzero()
    if len(past):
        sample = int(past[0])
        raise RecordError(f"data set {dataset.name!r}: {dataset.item(sample)}'s target holds "
                          f"{int(dataset.y[sample].max())}, past the model's {classes} class logits "
                          f"(0..{classes - 1})")


def _check_steps(steps):
    """``steps`` as a list, if it is a schedule: step numbers in 1..MAX_STEP, increasing."""
    steps = list(steps)
    if not steps or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= MAX_STEP for s in steps):
        raise RecordError(f"steps must be a non-empty list of optimizer step numbers in 1..{MAX_STEP:,}, not {steps!r}")
    for before, after in zip(steps, steps[1:]):
        if after <= before:
            raise RecordError(f"steps must increase: step {after} comes after step {before} in {steps}")
    return steps


def parse_steps(text):
    """The step schedule ``text``: comma-separated items, each a step ``N`` or ``FIRST:LAST:EVERY`` (every ``EVERY``
    steps from ``FIRST`` up to ``LAST``), increasing (``_check_steps``): ``1,1000:5000:1000`` is 1, 1000, ..., 5000."""
    steps = []
    for item in str(text).split(","):
        parts = item.strip().split(":")
        try:
            numbers = [int(part) for part in parts]
        except ValueError:
            numbers = []
        if len(numbers) == 3 and numbers[2] >= 1 and numbers[0] <= numbers[1]:
            steps += range(numbers[0], numbers[1] + 1, numbers[2])
        elif len(numbers) == 1:
            steps += numbers
        else:
            raise RecordError(f"--steps takes step numbers N and ranges FIRST:LAST:EVERY (FIRST <= LAST, EVERY >= 1) "
                              f"separated by commas, e.g. 1,1000:5000:1000; not {item.strip()!r} in {text!r}")
    return _check_steps(steps)


def check_device(device):
    """``device`` as a ``torch.device`` it can train on: "cpu", or "cuda"/"cuda:N" where that GPU exists."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise RecordError(f"device {str(device)!r}: recording runs on cpu or cuda[:N]")
    device = parsed
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RecordError(f"device {str(device)!r}: no CUDA GPU is available here (torch {torch.__version__})")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise RecordError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def _check_settings(lr, threads, seq_len):
    """Refuse the numeric settings no training can use, before any data is loaded."""
    if lr is not None and not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise RecordError(f"learning rate must be a finite number > 0, not {lr!r}")
    for name, value in (("threads", threads), ("seq_len", seq_len)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise RecordError(f"{name} must be a positive integer, not {value!r}")


def _data_and_model(model, data, model_args, data_args, seq_len, image_size, needed, batch_size, seed):
    """The data set (at least one batch of it) and the network, built right after seeding as training uses them; a
    factory's network is checked against the data's targets."""
    dataset = load_data(data, seq_len, data_args, needed=needed, seed=seed, image_size=image_size)
    if len(dataset) < batch_size:
        raise RecordError(f"data set {data!r} has {len(dataset)} samples, fewer than one batch of {batch_size}")
    torch.manual_seed(seed)
    if not factory.is_factory(model):
        return dataset, build_model(model, dataset.sample_shape, dataset.num_classes, dataset.kind, model_args)
    net = factory.build_model(model, model_args or {})
    _check_targets(net, dataset)
    return dataset, net


@contextlib.contextmanager
def _threads(count):
    """Run with ``count`` PyTorch threads (None: unchanged), restoring the setting afterwards."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def record(model, data, steps, samples, out, batch_size=16, seed=0, lr=None, prune=None, progress=True,
           input_grad=False, seq_len=64, overwrite=False, threads=None, model_args=None, data_args=None, strict=False,
           device="cpu", autocast=None, image_size=None):
    """Train ``model`` on ``data`` for ``max(steps)`` optimizer steps and record ``steps`` into the folder ``out``.

    ``model``: a name in ``networks.MODELS`` (built with the keyword arguments ``model_args``) or a
    factory ``PACKAGE.MODULE:FACTORY`` called with ``model_args`` (``trace.factory``); ``data``: a data
    set spec (``data.load_data``, a factory called with ``data_args``; ``image_size`` resizes digits and
    image folders); ``steps``: increasing 1-based optimizer step numbers (step n is the n-th batch's
    forward/backward pass, recorded before its update; ``parse_steps`` reads a schedule);
    ``device``: "cpu", "cuda" or "cuda:N" (``check_device``); ``autocast``: None or a name of
    ``AUTOCAST``, the forward pass under ``torch.autocast``; ``samples``: how many samples of each recorded batch
    are saved; ``lr``: learning rate (default 0.05 SGD, 1e-3 AdamW for tokens); ``prune``:
    target weight sparsity in [0, 1) for gradual magnitude pruning; ``input_grad``: also
    save input gradients; ``seq_len``: sequence length for token data; ``threads``: PyTorch
    threads while recording (None keeps the current setting; 1 is fastest for tiny traces on a
    busy machine). Returns the trace path.

    The trace is recorded into a temporary sibling of ``out`` that replaces it at the end, so
    an interruption leaves ``out`` as it was; ``overwrite`` replaces only a trace (``is_trace``).
    Modules with parameters that are not recorded are named in an ``UnrecordedWarning``, or refused
    (``RecordError``) with ``strict``, before training.
    """
    steps = _check_steps(steps)
    _check_settings(lr, threads, seq_len)
    device = check_device(device)
    if autocast is not None and autocast not in AUTOCAST:
        raise RecordError(f"autocast must be one of {sorted(AUTOCAST)}, not {autocast!r}")
    if prune is not None:
        MagnitudePruner.check(prune)
    folder = OutputFolder(out, "trace folder", is_trace if overwrite else None,
                          "--force replaces only a trace" if overwrite else "use --force to replace a trace")
    if not isinstance(batch_size, int) or not 1 <= samples <= batch_size:
        raise RecordError(f"need 1 <= samples <= batch_size, got samples={samples!r}, batch_size={batch_size!r}")
    dataset, net = _data_and_model(model, data, model_args, data_args, seq_len, image_size, steps[-1] * batch_size,
                                   batch_size, seed)
    net.to(device)
    optimizer, settings = optimizer_settings(dataset.kind, lr)
    meta = {"model": model, "model_args": model_args or {}, "data": str(data), "data_args": data_args or {},
            "image_size": image_size, "seq_len": seq_len, "batch_size": batch_size,
            "batches_per_epoch": len(dataset) // batch_size, "seed": seed,
            "optimizer": {"name": optimizer.__name__, **settings}, "prune": prune, "device": device.type,
            "autocast": autocast, "planned_steps": steps, "losses": []}
    with folder, folder.staging() as staging:
        recorder = Recorder(net, staging, samples, input_grad=input_grad, meta=meta, strict=strict)
        with _threads(threads):
            train(
                net,
                dataset,
                steps[-1],
                batch_size=batch_size,
                seed=seed,
                lr=lr,
                prune=prune,
                step_context=lambda step: recorder.step(step) if step in steps else None,
                losses=recorder.meta["losses"],
                progress=progress,
                autocast=autocast,
            )
        recorder.write_manifest()
    return folder.path
