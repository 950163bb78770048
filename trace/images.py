"""Image folders in the ImageNet / torchvision ImageFolder layout, each image read when a batch needs it."""

from pathlib import Path

import numpy as np
import torch

from dashraker.trace.errors import RecordError

__all__ = ["IMAGE_SIZE", "EXTENSIONS", "ImageFolder"]

IMAGE_SIZE = 224  # the papers' ImageNet resolution
EXTENSIONS = (".jpg", ".jpeg", ".png")
STATS_IMAGES = 64  # images, spread over the folder, whose pixels give the per-channel mean and deviation


class ImageFolder:
    """The images of ``folder``: one sub-folder per class (classes numbered in name order), each holding JPEG and PNG
    files (``EXTENSIONS``, case ignored; other files are passed over), in sub-folders of its own too.

    Parameters: ``image_size`` (the side of the square images given), ``needed`` and ``seed`` (of a
    folder holding more images than training can use, ``needed`` of them drawn with ``seed``, as
    ``factory.build_dataset`` does).

    Images of any size and mode are taken as ImageNet's evaluation transform takes them: converted to
    RGB, scaled (bilinear) so the shorter side is ``image_size``, the centre square cut out, values
    in [0, 1] standardized per channel by the mean and deviation of ``STATS_IMAGES`` images spread
    over the folder. ``images[index]`` (a tensor or list of positions) decodes those images into a
    float32 [n, 3, image_size, image_size] tensor; nothing else is held in memory but the file list.
    Every image's header is read when the folder is opened, so a file that is not a JPEG or PNG image
    is refused before training; one whose data is broken past its header is refused when read.
    """

    def __init__(self, folder, image_size=IMAGE_SIZE, needed=None, seed=0):
        self.folder, self.image_size = Path(folder), image_size
        self.classes = sorted(entry.name for entry in self.folder.iterdir() if entry.is_dir())
        if not self.classes:
            raise RecordError(f"imagefolder:{folder}: no class folders; expected FOLDER/<class>/<image>.jpg or .png "
                              "(the ImageNet train layout)")
        files, labels = [], []
        for label, name in enumerate(self.classes):
            images = sorted(f for f in (self.folder / name).rglob("*")
                            if f.suffix.lower() in EXTENSIONS and f.is_file())
            if not images:
                raise RecordError(f"imagefolder:{folder}: class folder {name!r} holds no JPEG or PNG image")
            files += images
            labels += [label] * len(images)
        chosen = range(len(files))
        if needed is not None and needed < len(files):
            chosen = np.sort(np.random.default_rng(seed).choice(len(files), needed, replace=False)).tolist()
        self.files = [files[i] for i in chosen]
        self.labels = torch.tensor([labels[i] for i in chosen], dtype=torch.int64)
        for file in self.files:
            _check_header(file)
        spread = np.linspace(0, len(self.files) - 1, min(STATS_IMAGES, len(self.files))).round().astype(int)
        pixels = torch.stack([self._pixels(self.files[i]) for i in spread])
        self.mean = pixels.mean((0, 2, 3))[:, None, None]
        self.std = pixels.std((0, 2, 3))[:, None, None].clamp_min(1e-6)

    def __len__(self):
        return len(self.files)

    @property
    def shape(self):
        return (len(self.files), 3, self.image_size, self.image_size)

    def __getitem__(self, index):
        return torch.stack([(self._pixels(self.files[int(i)]) - self.mean) / self.std for i in index])

    def _pixels(self, file):
        """The image ``file`` as RGB in [0, 1], [3, image_size, image_size]: shorter side scaled, centre square."""
        from PIL import Image

        size = self.image_size
        try:
            with Image.open(file) as image:
                width, height = image.size
                scale = size / min(width, height)
                scaled = (max(size, round(width * scale)), max(size, round(height * scale)))
                image.draft("RGB", scaled)  # a JPEG decodes at the smallest power-of-2 reduction that is large enough
                image = image.convert("RGB").resize(scaled, Image.Resampling.BILINEAR)
                left, top = (scaled[0] - size) // 2, (scaled[1] - size) // 2
                array = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
        except (OSError, ValueError, SyntaxError) as error:  # PIL raises these for broken image data
            raise RecordError(f"{file}: not a readable JPEG or PNG image ({type(error).__name__}: {error})") from None
        return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def _check_header(file):
    """A ``RecordError`` unless ``file`` opens as a JPEG or PNG image (its header alone is read)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            kind = image.format
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as error:
        raise RecordError(f"{file}: not a readable JPEG or PNG image ({type(error).__name__}: {error})") from None
    if kind not in ("JPEG", "PNG"):
        raise RecordError(f"{file}: a {kind} image; only JPEG and PNG are read")
