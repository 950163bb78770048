"""The data sets: bundled digits and stdlib text, and the loaders of local CIFAR-10 batches and .npy/.npz folders."""

import pickle
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from dashraker.trace import RecordError, open_trace, record
from dashraker.trace.data import load_data


def test_digits():
    data = load_data("digits")
    assert data.x.shape == (1797, 3, 32, 32) and data.y.shape == (1797,) and data.num_classes == 10
    assert data.kind == "tensors"
    assert torch.equal(data.x[:, 0], data.x[:, 2])  # grey repeated over 3 channels
    assert abs(float(data.x.mean())) < 1e-4 and abs(float(data.x.std()) - 1) < 1e-3


def test_stdlib_text_is_next_byte_prediction():
    data = load_data("pystdlib", seq_len=32)
    assert data.kind == "tokens" and data.num_classes == 256 and data.x.shape[1] == 32
    assert torch.equal(data.x[:, 1:], data.y[:, :-1]) and torch.equal(data.x[1:, 0], data.y[:-1, -1])
    first = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[0].read_bytes()
    assert bytes(data.x[0].tolist()) == first[:32]


def _cifar_batch(path, n, seed):
    rng = np.random.default_rng(seed)
    batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, n).tolist()}
    path.write_bytes(pickle.dumps(batch))
    return batch


def test_masked_text_is_berts_objective():
    plain, masked = load_data("pystdlib", seq_len=32), load_data("pystdlib-mlm", seq_len=32)
    assert (masked.kind, masked.num_classes, masked.x.shape) == ("masked", 257, plain.x.shape)
    hidden = masked.x == 256
    assert 0.14 < hidden.float().mean() < 0.16  # 15% of the positions
    assert torch.equal(masked.x[~hidden], plain.x[~hidden])  # the rest kept
    assert torch.equal(masked.y[hidden], plain.x[hidden])  # the targets: the hidden bytes themselves
    assert torch.all(masked.y[~hidden] == -100)  # ignored by cross-entropy


def test_cifar10_batches(tmp_path):
    batches = [_cifar_batch(tmp_path / f"data_batch_{i}", 12, i) for i in (1, 2)]
    data = load_data(f"cifar10:{tmp_path}")
    assert data.x.shape == (24, 3, 32, 32) and data.num_classes == max(max(b[b"labels"]) for b in batches) + 1
    assert data.y.tolist() == batches[0][b"labels"] + batches[1][b"labels"]
    # Channel 0 of the first image, standardized the way the loader documents it.
    raw = np.concatenate([b[b"data"] for b in batches]).reshape(-1, 3, 32, 32).astype(np.float32) / 255
    red = raw[:, 0]
    np.testing.assert_allclose(data.x[0, 0].numpy(), (red[0] - red.mean()) / red.std(ddof=1), rtol=1e-4, atol=1e-4)


def test_cifar10_errors(tmp_path):
    with pytest.raises(RecordError, match="no data_batch_"):
        load_data(f"cifar10:{tmp_path}")
    (tmp_path / "data_batch_1").write_bytes(pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(RecordError, match=r"data_batch_1: b'data' must be uint8 \[N, 3072\]"):
        load_data(f"cifar10:{tmp_path}")
    (tmp_path / "data_batch_1").write_bytes(b"not a pickle")
    with pytest.raises(RecordError, match="data_batch_1: not a readable CIFAR-10 batch"):
        load_data(f"cifar10:{tmp_path}")


def test_npy_pair_and_npz_files(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(20, 12, 12)).astype(np.float32), rng.integers(0, 3, 20)
    (tmp_path / "pair").mkdir()
    np.save(tmp_path / "pair" / "x.npy", x)
    np.save(tmp_path / "pair" / "y.npy", y)
    (tmp_path / "npz").mkdir()
    np.savez(tmp_path / "npz" / "a.npz", x=x[:8], y=y[:8])
    np.savez(tmp_path / "npz" / "b.npz", x=x[8:], y=y[8:])
    pair, npz = load_data(f"npy:{tmp_path / 'pair'}"), load_data(f"npy:{tmp_path / 'npz'}")
    assert pair.x.shape == (20, 1, 12, 12) and pair.num_classes == y.max() + 1
    assert torch.equal(pair.x, npz.x) and torch.equal(pair.y, npz.y)


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"x.npy": np.zeros((4, 5)), "y.npy": np.zeros(3, np.int64)}, "one non-negative integer label per sample"),
        ({"x.npy": np.zeros((4, 5)), "y.npy": np.zeros(4)}, "integer label"),
        ({"x.npy": np.zeros((4, 5))}, "expected x.npy and y.npy"),
        ({"a.npz": {"x": np.zeros((4, 5))}}, r"a.npz: missing array\(s\) \['y'\]"),
        ({"x.npy": np.full((4, 5), np.nan), "y.npy": np.zeros(4, np.int64)}, "NaN"),
        ({"x.npy": np.zeros(4), "y.npy": np.zeros(4, np.int64)}, r"x must be \[N, C, H, W\]"),
    ],
)
def test_npy_errors(tmp_path, arrays, message):
    for name, value in arrays.items():
        if isinstance(value, dict):
            np.savez(tmp_path / name, **value)
        else:
            np.save(tmp_path / name, value)
    with pytest.raises(RecordError, match=message):
        load_data(f"npy:{tmp_path}")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("imagenet", "unknown data set 'imagenet'"),
        ("npy", "write it as 'npy:FOLDER'"),
        ("digits:/x", "write it as 'digits'"),
    ],
)
def test_bad_data_names(spec, message):
    with pytest.raises(RecordError, match=message):
        load_data(spec)


def test_record_from_npy_folder(tmp_path):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "x.npy", rng.integers(0, 256, (24, 3, 8, 8), dtype=np.uint8))
    np.save(tmp_path / "y.npy", rng.integers(0, 4, 24))
    out = record("vgg", f"npy:{tmp_path}", [2], 2, tmp_path / "trace", batch_size=8, progress=False, threads=1)
    trace = open_trace(out)
    assert trace.steps == [2] and trace.manifest["batches_per_epoch"] == 3
    assert trace.layer("features.0").input_shape == (2, 3, 8, 8)
    assert trace.layers[-1].out_channels == 4
