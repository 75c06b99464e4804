"""Small Fashion-MNIST-shaped IDX files for tests, so tests never need the network or Debian's package.

    python -m tools.fake_data DIR      # from the repository root: writes the four *-ubyte.gz files into DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from course_utils.datasets import DATASETS
from course_utils.idx import write_idx


def write_fake_fashion_mnist(directory: Path, train: int = 1200, test: int = 400, seed: int = 0) -> Path:
    """Write learnable stand-in IDX files: each class is a bright band at its own row, plus noise."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, count in (("train", train), ("test", test)):
        labels = rng.integers(0, 10, size=count).astype(np.uint8)
        images = rng.integers(0, 60, size=(count, 28, 28)).astype(np.uint8)
        for i, label in enumerate(labels):
            images[i, 2 + 2 * label: 4 + 2 * label, :] = 250
        image_file, label_file = DATASETS["fashion_mnist"].idx_files[split]
        write_idx(directory / image_file, images)
        write_idx(directory / label_file, labels)
    return directory


if __name__ == "__main__":
    print(write_fake_fashion_mnist(Path(sys.argv[1])))
