"""Image folders (``imagefolder:FOLDER``): the layout, resizing and cropping, standardization, and what is refused."""

import numpy as np
import pytest
import torch
from PIL import Image

from dashraker.cli import main
from dashraker.trace import RecordError, open_trace, record
from dashraker.trace.data import load_data
from dashraker.trace.images import ImageFolder


def _save(path, array, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, dtype=np.uint8), mode).save(path)


def make_folder(root, per_class=3, classes=("cat", "dog")):
    """A tiny ImageNet-layout folder: JPEG and PNG, RGB, greyscale and RGBA, of different sizes and aspects."""
    rng = np.random.default_rng(0)
    for c, name in enumerate(classes):
        for i in range(per_class):
            height, width = 12 + 4 * i, 16 + 2 * c
            suffix = (".jpg", ".png", ".PNG")[i % 3]
            shape = {0: (height, width, 3), 1: (height, width), 2: (height, width, 4)}[i % 3]
            _save(root / name / f"{i}{suffix}", rng.integers(0, 256, shape))
    (root / "dog" / "notes.txt").write_text("not an image: passed over")
    return root


def test_layout_sizes_and_labels(tmp_path):
    data = load_data(f"imagefolder:{make_folder(tmp_path / 'f')}", image_size=8)
    assert data.kind == "tensors" and data.num_classes == 2 and len(data) == 6
    assert data.sample_shape == (3, 8, 8)
    assert data.y.tolist() == [0, 0, 0, 1, 1, 1]  # classes in name order, images in name order
    batch = data.x[torch.tensor([0, 5])]
    assert batch.shape == (2, 3, 8, 8) and batch.dtype == torch.float32
    everything = data.x[range(6)]  # standardized by the statistics of (here all) the images
    assert torch.allclose(everything.mean((0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(everything.std((0, 2, 3)), torch.ones(3), atol=1e-4)


def test_shorter_side_scaled_and_centre_square_cut(tmp_path):
    # A 24x12 image: black left and right quarters, white middle half; at 12 the centre square is the white half.
    image = np.zeros((12, 24, 3), np.uint8)
    image[:, 6:18] = 255
    _save(tmp_path / "f" / "a" / "x.png", image)
    folder = ImageFolder(tmp_path / "f", image_size=12)
    assert torch.equal(folder._pixels(folder.files[0]), torch.ones(3, 12, 12))
    half = ImageFolder(tmp_path / "f", image_size=6)._pixels(folder.files[0])  # scaled by 1/2 first
    assert half.shape == (3, 6, 6) and torch.all(half[:, :, 1:-1] == 1) and half.min() > 0.5  # edges blend


def test_only_the_needed_images_are_taken(tmp_path):
    folder = ImageFolder(make_folder(tmp_path / "f", per_class=5), image_size=8, needed=4, seed=3)
    assert len(folder) == 4 and folder.files == sorted(folder.files)
    assert len(ImageFolder(tmp_path / "f", image_size=8, needed=100)) == 10


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root: (root / "x.jpg").write_text("loose"), r"no class folders; expected FOLDER/<class>/<image>"),
        (lambda root: (root / "a").mkdir(), r"class folder 'a' holds no JPEG or PNG image"),
        (lambda root: _text(root / "a" / "broken.jpg"), r"a/broken.jpg: not a readable JPEG or PNG image"),
        (lambda root: _gif(root / "a" / "x.png"), r"a/x.png: a GIF image; only JPEG and PNG are read"),
    ],
)
def test_bad_folders_are_one_line_exit_2_nothing_written(tmp_path, capsys, make, message):
    root = tmp_path / "f"
    root.mkdir()
    make(root)
    with pytest.raises(RecordError, match=message):
        load_data(f"imagefolder:{root}", image_size=8)
    out = tmp_path / "t"
    code = main(["trace", "record", "--model", "mlp", "--data", f"imagefolder:{root}", "--image-size", "8",
                 "--steps", "1", "--samples", "1", "--batch-size", "1", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["f"]


def _text(path):
    path.parent.mkdir(parents=True)
    path.write_text("not a JPEG")


def _gif(path):
    path.parent.mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(path, format="GIF")


def test_data_broken_past_its_header_is_refused_when_read(tmp_path):
    root = make_folder(tmp_path / "f")
    good = (root / "cat" / "0.jpg").read_bytes()
    (root / "cat" / "0.jpg").write_bytes(good[: len(good) // 3])  # the header survives, the data does not
    with pytest.raises(RecordError, match=r"cat/0.jpg: not a readable JPEG or PNG image"):
        load_data(f"imagefolder:{root}", image_size=8)


@pytest.mark.parametrize(
    "spec, size, message",
    [
        ("imagefolder", None, "write it as 'imagefolder:FOLDER'"),
        ("pystdlib", 8, "data set 'pystdlib' takes no image size; only digits and imagefolder do"),
        ("digits", 0, "image size must be a positive integer, not 0"),
    ],
)
def test_bad_image_requests(spec, size, message):
    with pytest.raises(RecordError, match=message):
        load_data(spec, image_size=size)


def test_digits_at_another_size_are_resized_a_batch_at_a_time():
    """Against the readable reference: the whole set resized, then standardized over all of it."""
    from sklearn.datasets import load_digits
    from torch.nn import functional as F

    data = load_data("digits", image_size=40)
    assert data.sample_shape == (3, 40, 40) and len(data) == 1797 and data.num_classes == 10
    images = torch.from_numpy(load_digits().images.astype(np.float32) / 16.0)[:, None]
    whole = F.interpolate(images, size=(40, 40), mode="bilinear", align_corners=False)
    whole = (whole - whole.mean()) / whole.std()
    index = torch.tensor([0, 5, 1796])
    torch.testing.assert_close(data.x[index], whole[index].repeat(1, 3, 1, 1), rtol=1e-5, atol=1e-5)


def test_record_resnet50_from_an_image_folder(tmp_path):
    root = make_folder(tmp_path / "f")
    out = record("resnet50", f"imagefolder:{root}", [1, 2], 1, tmp_path / "t", batch_size=2, progress=False,
                 threads=1, image_size=32)
    trace = open_trace(out)
    assert trace.manifest["image_size"] == 32 and trace.layers[0].input_shape == (1, 3, 32, 32)
    assert trace.layer("fc").out_channels == 2 and len(trace.layers) == 54
    assert trace.layer("layer4.2.conv3").output_grad_shape == (1, 2048, 1, 1)
