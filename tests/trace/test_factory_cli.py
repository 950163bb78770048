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

def bare():
    return [torch.randn(2, 64) for _ in range(20)]

def negative():
    return [(torch.randn(2, 64), -1 if i == 5 else i % 4) for i in range(8)]

def past_classes():
    return [(torch.randn(2, 64), 1000 if i == 7 else i % 4) for i in range(8)]

def four_classes():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(128, 4))

class Nothing:
    pass

class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(128, 4)
    def forward(self, x):
        return self.fc(x.flatten(1)), x

def returns_tuple():
    return Pair()

def frozen():
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(128, 4)).requires_grad_(False)

class Lazy:
    """10**12 items made on demand: only those a recording uses may be read."""
    reads = []
    def __len__(self):
        return 10**12
    def __getitem__(self, i):
        Lazy.reads.append(i)
        return torch.randn(2, 64), i % 4

def lazy():
    return Lazy()

class Huge(Lazy):
    def __getitem__(self, i):
        return torch.zeros(2, 2**20), 0

def huge():
    return Huge()

class Flaky:
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if i == 3:
            raise OSError("file 3 is gone")
        return torch.randn(2, 64), 0

def flaky():
    return Flaky()

def transposed():
    return torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3, padding=1), torch.nn.ConvTranspose1d(4, 2, 3, padding=1),
                               torch.nn.Flatten(), torch.nn.Linear(128, 4))
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
        (["--model", "mlp", "--model-arg", "width=3"], r"model MLP takes no argument 'width'; it takes hidden"),
        (["--model", "byo_factories:wrong_shape", "--model-arg", "3"], r"--model-arg takes KEY=VALUE"),
        (["--model", "mlp", "--data", "byo_factories:Nothing"], r"the data set must support len\(\) and \[i\]"),
        (["--model", "mlp", "--data", "byo_factories:floats"], r"targets must be integer class labels"),
        (["--model", "mlp", "--data", "byo_factories:bare"],
         r"data factory 'byo_factories:bare': item \[0\] is a Tensor, not a pair \(sample, target\)"),
        (["--model", "mlp", "--data", "byo_factories:negative"],
         r"data factory 'byo_factories:negative': item \[5\]'s target holds -1: class labels and token ids are 0 or"),
        (["--model", "byo_factories:four_classes", "--data", "byo_factories:past_classes"],
         r"data set 'byo_factories:past_classes': item \[7\]'s target holds 1000, past the model's 4 class logits"),
        (["--model", "mlp", "--data", "digits", "--data-arg", "n=1"], r"data set 'digits' takes no arguments"),
        (["--model", "mlp", "--data", "byo_factories:huge", "--steps", "1000", "--batch-size", "16"],
         r"data factory 'byo_factories:huge': reading 16,000 items of 8,388,616 bytes needs 125.0 GiB, more than half "),
        (["--model", "mlp", "--data", "byo_factories:flaky"],
         r"data factory 'byo_factories:flaky': item \[3\] raised OSError: file 3 is gone"),
        (["--model", "byo_factories:returns_tuple"], r"step 1: the model returned a tuple, not a tensor of class logits"),
        (["--model", "byo_factories:frozen"], r"the model Sequential has no trainable parameter \(all frozen"),
        (["--model", "byo_factories:transposed", "--strict"],
         r"1 module\(s\) with parameters are not recorded .*: 1 \(ConvTranspose1d\); refused \(strict\)"),
    ],
)
def test_factory_errors_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    (tmp_path / "byo_factories.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    data = [] if "--data" in args else ["--data", "byo_factories:pairs"]
    steps = [] if "--steps" in args else ["--steps", "1", "--batch-size", "8"]  # or the case's own
    argv = ["trace", "record", *steps, "--samples", "1", "--no-progress", *data, *args]
    assert main([*argv, "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dashraker trace: error:") and len(err.splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "t").exists()


def test_unrecorded_modules_are_named_when_recorded_and_checked(tmp_path, monkeypatch, capsys):
    """A ConvTranspose1d's work is not in the trace: ``trace record`` and ``trace check`` say so by name (a warning,
    exit 0), ``trace check --strict`` refuses the trace."""
    (tmp_path / "byo_factories.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "t"
    assert main(["trace", "record", "--model", "byo_factories:transposed", "--data", "byo_factories:pairs",
                 "--steps", "1", "--samples", "1", "--batch-size", "8", "--no-progress", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.fullmatch(r"warning: 1 module\(s\) with parameters are not recorded .*: 1 \(ConvTranspose1d\)\n", err), err
    assert open_trace(out).manifest["unrecorded_layers"] == [{"name": "1", "type": "ConvTranspose1d"}]
    assert main(["trace", "check", str(out), "--quiet"]) == 0
    assert re.search(r"warning: .*1 \(ConvTranspose1d\)", capsys.readouterr().err)
    assert main(["trace", "check", str(out), "--quiet", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "dashraker trace: error: 1 problem(s)" in err and "ConvTranspose1d" in err, err


def test_a_lazy_data_set_is_read_only_as_far_as_training_needs(tmp_path, monkeypatch):
    """A data set of 10**12 items: the recording of 2 steps of 8 reads the first item (for the size estimate) and
    16 items drawn with the seed, not the whole set."""
    (tmp_path / "byo_factories.py").write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "record", "--model", "byo_factories:transposed", "--data", "byo_factories:lazy",
                 "--steps", "2", "--samples", "1", "--batch-size", "8", "--no-progress", "--out", str(tmp_path / "t")]) == 0
    import byo_factories

    reads = byo_factories.Lazy.reads
    assert reads[0] == 0 and len(set(reads[1:])) == len(reads) - 1 and 15 <= len(reads) - 1 <= 16
    assert open_trace(tmp_path / "t").manifest["batches_per_epoch"] == 2
