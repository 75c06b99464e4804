"""Report on the SVHN stand-in: images/s, and whether it is learnable (two NumPy linear classifiers).

``python -m tools.svhn_standin_report [--n 20000] [--seed 0] [--preview PNG]``. The stand-in itself is
:mod:`course_utils.svhn_standin`; this is how its docstring's figures (images/s, 20-24 % for a ridge
classifier on gray pixels) are measured.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from course_utils.svhn_standin import NUM_CLASSES, _check, generate, glyph_atlas


def _linear_probe(train: tuple, test: tuple, ridge: float = 100.0) -> dict[str, float]:
    """Test accuracies of two NumPy classifiers on grayscale pixels: nearest class mean and
    ridge regression onto one-hot labels. A learnability check, no deep learning."""
    def gray(images):
        return images.astype(np.float32).mean(-1).reshape(len(images), -1) / 255.0
    (xtr, ytr), (xte, yte) = (gray(train[0]), train[1]), (gray(test[0]), test[1])
    means = np.stack([xtr[ytr == c].mean(0) for c in range(NUM_CLASSES)])
    ncm = (((xte[:, None, :] - means) ** 2).sum(-1).argmin(1) == yte).mean()
    mu = xtr.mean(0)
    a, b = np.c_[xtr - mu, np.ones(len(xtr))], np.c_[xte - mu, np.ones(len(xte))]
    w = np.linalg.solve(a.T @ a + ridge * np.eye(a.shape[1]), a.T @ np.eye(NUM_CLASSES)[ytr])
    return {"nearest_class_mean": float(ncm), "ridge": float(((b @ w).argmax(1) == yte).mean())}


def _save_preview(path: str | os.PathLike, images: np.ndarray, labels: np.ndarray) -> None:
    """A grid of up to 64 images titled with their labels, as a PNG."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(8, 8, figsize=(8, 9))
    for ax, image, label in zip(axes.flat, images, labels):
        ax.imshow(image, interpolation="nearest")
        ax.set_title(str(label), fontsize=9)
    for ax in axes.flat:
        ax.axis("off")
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.svhn_standin_report",
        description="Time the SVHN stand-in (synthetic house-number crops, NOT real SVHN) in "
                    "images/s, and check it is learnable with two NumPy linear classifiers.")
    parser.add_argument("--n", type=int, default=20_000, help="images to time (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--preview", metavar="PNG", help="also save a grid of 64 images here")
    args = parser.parse_args(argv)
    try:
        _check(args.n, "train", args.seed)
    except ValueError as err:
        parser.error(str(err))
    glyph_atlas()  # render the fonts once, outside the timing
    start, cpu = time.perf_counter(), time.process_time()
    images, labels = generate(args.n, seed=args.seed)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{args.n} images in {seconds:.2f} s: {args.n / seconds:,.0f} images/s "
          f"({args.n / cpu:,.0f} per CPU second; {len(glyph_atlas()[2])} fonts)")
    train = (images[:5000], labels[:5000]) if args.n >= 5000 else generate(5000, seed=args.seed)
    accuracy = _linear_probe(train, generate(2000, split="test", seed=args.seed))
    print("gray-pixel classifiers, trained on 5000, tested on 2000 test images (chance 10%): "
          + ", ".join(f"{k.replace('_', ' ')} {v:.1%}" for k, v in accuracy.items()))
    if args.preview:
        _save_preview(args.preview, images, labels)
        print(f"preview: {args.preview}")


if __name__ == "__main__":
    main()
