"""The bring-your-own-model example runs: its own loop records a trace that maps on the designs."""

import importlib.util
from pathlib import Path

import torch

from dashraker.trace import open_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "byo_model.py"


def test_byo_model_example_core(tmp_path):
    spec = importlib.util.spec_from_file_location("byo_model", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        losses = example.train_and_record(tmp_path / "t", steps=3, record=(1, 3), batch_size=8, samples=1)
        sums = example.speedups(tmp_path / "t", designs=("baseline", "tensordash"))
    finally:
        torch.set_num_threads(threads)
    trace = open_trace(tmp_path / "t")
    assert len(losses) == 6 and trace.steps == [1, 3]
    names = [layer.name for layer in trace.layers]
    assert names[:4] == ["embed", "embed#1", "conv", "conv#1"] and "ffn#3" in names  # 2 micro-batches x 2 calls
    assert sums["baseline", "all"]["speedup"] == 1.0
    assert sums["tensordash", "all"]["cycles"] < sums["baseline", "all"]["cycles"]  # ReLU and causal-mask zeros
