"""Trains a network on a data set and records a trace on the chosen optimizer steps (``record``)."""

import contextlib
import math

import torch
from torch.nn import functional as F
from torch.nn.utils import prune as torch_prune
from tqdm import tqdm

from dashraker.trace import factory
from dashraker.trace.data import load_data
from dashraker.trace.errors import RecordError
from dashraker.trace.networks import build_model
from dashraker.trace.recorder import Recorder, recordable_layers
from dashraker.outputs import OutputFolder
from dashraker.trace.store import is_trace

__all__ = ["record", "train", "MagnitudePruner", "OPTIMIZERS", "optimizer_settings", "make_optimizer"]

# Data kind -> optimizer and its settings: SGD for the classifiers, AdamW for the language model.
OPTIMIZERS = {
    "tensors": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}),
    "tokens": (torch.optim.AdamW, {"lr": 1e-3}),
}


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


def _batches(dataset, batch_size, generator):
    """Endless shuffled batches, a new permutation each epoch; the last partial batch is dropped."""
    while True:
        order = torch.randperm(len(dataset), generator=generator)
        for start in range(0, len(dataset) - batch_size + 1, batch_size):
            index = order[start : start + batch_size]
            yield dataset.x[index], dataset.y[index]


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
    net, dataset, total_steps, *, batch_size, seed, lr=None, prune=None, step_context=None, losses=None, progress=False
):
    """Run ``total_steps`` optimizer steps; ``step_context(step)`` may return a context wrapping a step's passes.

    Returns the loss of every step (appended to ``losses`` when given, so a caller can watch it).
    """
    net.train()
    if not any(parameter.requires_grad for parameter in net.parameters()):
        raise RecordError(f"the model {type(net).__name__} has no trainable parameter (all frozen: requires_grad "
                          "False, or none at all); training needs at least one")
    pruner = MagnitudePruner(net, prune, total_steps) if prune else None
    optimizer = make_optimizer(net, dataset.kind, lr)
    batches = _batches(dataset, batch_size, torch.Generator().manual_seed(seed))
    losses = [] if losses is None else losses
    bar = tqdm(range(1, total_steps + 1), desc=f"training {type(net).__name__}", unit="step", disable=not progress)
    for step in bar:
        x, y = next(batches)
        if pruner:
            pruner.update(step)
        context = step_context(step) if step_context else None
        with context or contextlib.nullcontext():
            optimizer.zero_grad(set_to_none=True)
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


def _check_steps(steps):
    steps = sorted(set(steps))
    if not steps or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= MAX_STEP for s in steps):
        raise RecordError(f"steps must be a non-empty list of optimizer step numbers in 1..{MAX_STEP:,}, not {steps!r}")
    return steps


def _check_settings(lr, threads, seq_len):
    """Refuse the numeric settings no training can use, before any data is loaded."""
    if lr is not None and not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise RecordError(f"learning rate must be a finite number > 0, not {lr!r}")
    for name, value in (("threads", threads), ("seq_len", seq_len)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise RecordError(f"{name} must be a positive integer, not {value!r}")


def _data_and_model(model, data, model_args, data_args, seq_len, needed, batch_size, seed):
    """The data set (at least one batch of it) and the network, built right after seeding as training uses them."""
    dataset = load_data(data, seq_len, data_args, needed=needed, seed=seed)
    if len(dataset) < batch_size:
        raise RecordError(f"data set {data!r} has {len(dataset)} samples, fewer than one batch of {batch_size}")
    torch.manual_seed(seed)
    if factory.is_factory(model):
        return dataset, factory.build_model(model, model_args or {})
    return dataset, build_model(model, dataset.sample_shape, dataset.num_classes, dataset.kind)


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
           input_grad=False, seq_len=64, overwrite=False, threads=None, model_args=None, data_args=None, strict=False):
    """Train ``model`` on ``data`` for ``max(steps)`` optimizer steps and record ``steps`` into the folder ``out``.

    ``model``: a name in ``networks.MODELS`` or a factory ``PACKAGE.MODULE:FACTORY`` called with
    ``model_args`` (``trace.factory``); ``data``: a data set spec (``data.load_data``, a factory
    called with ``data_args``);
    ``steps``: 1-based optimizer step numbers (step n is the n-th batch's forward/backward
    pass, recorded before its update); ``samples``: how many samples of each recorded batch
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
    own_model = factory.is_factory(model)
    if model_args and not own_model:
        raise RecordError(f"model {model!r} takes no arguments; only a factory does")
    if prune is not None:
        MagnitudePruner.check(prune)
    folder = OutputFolder(out, "trace folder", is_trace if overwrite else None,
                          "--force replaces only a trace" if overwrite else "use --force to replace a trace")
    if not isinstance(batch_size, int) or not 1 <= samples <= batch_size:
        raise RecordError(f"need 1 <= samples <= batch_size, got samples={samples!r}, batch_size={batch_size!r}")
    dataset, net = _data_and_model(model, data, model_args, data_args, seq_len, steps[-1] * batch_size, batch_size,
                                   seed)
    optimizer, settings = optimizer_settings(dataset.kind, lr)
    meta = {
        "model": model,
        "model_args": model_args or {},
        "data": str(data),
        "data_args": data_args or {},
        "batch_size": batch_size,
        "batches_per_epoch": len(dataset) // batch_size,
        "seed": seed,
        "optimizer": {"name": optimizer.__name__, **settings},
        "prune": prune,
        "planned_steps": steps,
        "losses": [],
    }
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
            )
        recorder.write_manifest()
    return folder.path
