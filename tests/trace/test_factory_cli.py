"""``trace record --model/--data PACKAGE.MODULE:FACTORY``: the user's own network and data from the command line."""

import re
from pathlib import Path

import pytest

from dashraker.cli import main
from dashraker.trace import open_trace
from dashraker.trace.factory import parse_args

REPO = Path(__file__).resolve().parents[2]

FACTORIES = '''
import torch

def not_module():
    return 42

def broken(**kwargs):
    raise ValueError("no GPU here")

def wrong_shape():
    return torch.nn.Linear(7, 3)

class Pairs:
    def __len__(self):
        return 20
    def __getitem__(self, i):
        return torch.randn(2, 64), i % 4

def floats():
    return [(torch.randn(2, 64), 0.5)] * 20

def pairs():
    return Pairs()

class Nothing:
    pass
'''


def test_parse_args():
    pairs = ["dim=8", "name=hello", "sizes=(1, 2)", "flag=True", "path=a/b.txt", "empty="]
    assert parse_args(pairs, "--model-arg") == {
        "dim": 8, "name": "hello", "sizes": (1, 2), "flag": True, "path": "a/b.txt", "empty": ""}


def test_example_factories_from_the_command_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the example's factories import as examples.byo_model, as from a fresh clone
    out = tmp_path / "t"
    assert main(["trace", "record", "--model", "examples.byo_model:make_model", "--model-arg", "dim=16",
                 "--model-arg", "heads=4", "--data", "examples.byo_model:make_data", "--data-arg", "count=40",
                 "--steps", "2", "--samples", "1", "--batch-size", "8", "--threads", "1", "--no-progress",
                 "--out", str(out)]) == 0
    trace = open_trace(out)
    assert trace.manifest["model_args"] == {"dim": 16, "heads": 4} and trace.manifest["data_args"] == {"count": 40}
    assert trace.manifest["optimizer"]["name"] == "SGD"  # float samples: a classifier's optimizer
    assert [(layer.name, layer.type) for layer in trace.layers] == [
        ("embed", "conv1d"), ("conv", "conv1d"), ("qkv", "linear"), ("attention.scores", "matmul"),
        ("attention.mix", "matmul"),
        ("ffn", "linear"), ("ffn#1", "linear"), ("head", "linear")]
    assert trace.layer("attention.scores").input_shape == (4, 64, 4)  # 1 sample x 4 heads, 64 positions, 16 / 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "no_such_module:make"], r"model factory 'no_such_module:make': cannot import 'no_such_module' "
                                              r"\(ModuleNotFoundError"),
        (["--model", "byo_factories:missing"], r"module 'byo_factories' has no attribute 'missing'"),
        (["--model", "byo_factories:Nothing.make"], r"type 'Nothing' has no attribute 'make'"),
        (["--model", "byo_factories:broken", "--model-arg", "size=3"],
         r"model factory 'byo_factories:broken' raised ValueError: no GPU here"),
        (["--model", "byo_factories:not_module"], r"returned a int, not a torch.nn.Module"),
        (["--model", "byo_factories:wrong_shape"], r"step 1: the model failed on a batch x \[8, 2, 64\]"),
        (["--model", "mlp", "--model-arg", "width=3"], r"model 'mlp' takes no arguments; only a factory does"),
        (["--model", "byo_factories:wrong_shape", "--model-arg", "3"], r"--model-arg takes KEY=VALUE"),
        (["--model", "mlp", "--data", "byo_factories:Nothing"], r"the data set must support len\(\) and \[i\]"),
        (["--model", "mlp", "--data", "byo_factories:floats"], r"targets must be integer class labels"),
        (["--model", "mlp", "--data", "digits", "--data-arg", "n=1"], r"data set 'digits' takes no arguments"),
    ],
)
def test_factory_errors_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    (tmp_path / "byo_factories.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    data = [] if "--data" in args else ["--data", "byo_factories:pairs"]
    argv = ["trace", "record", "--steps", "1", "--samples", "1", "--batch-size", "8", "--no-progress", *data, *args]
    assert main([*argv, "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dashraker trace: error:") and len(err.splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "t").exists()
