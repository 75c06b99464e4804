"""Finding and loading checkpoints, with errors that say what to do."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not fit the model."""


def _epoch_key(path: Path):
    numbers = re.findall(r"\d+", path.name.split(".")[0])  # "ckpt_10.weights.h5" -> 10, not 5
    return (int(numbers[-1]) if numbers else -1, path.stat().st_mtime)


def latest_checkpoint(directory: str | os.PathLike, pattern: str = "*.weights.h5") -> Path:
    """The checkpoint in ``directory`` matching ``pattern`` with the highest epoch number.

    Keras 3's ``ModelCheckpoint`` writes one file per epoch (``ckpt_{epoch:02d}.weights.h5``);
    the number in the name orders them (file time breaks ties).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"No checkpoint directory {directory}. Run the training cell (the ModelCheckpoint "
            "callback creates it) before restoring."
        )
    found = [p for p in directory.glob(pattern) if p.is_file()]
    if not found:
        raise CheckpointError(
            f"No checkpoint matching {pattern!r} in {directory}. Run the training cell first, "
            "or check that ModelCheckpoint's filepath ends in '.weights.h5'."
        )
    return max(found, key=_epoch_key)


def load_weights(model, path: str | os.PathLike) -> Path:
    """``model.load_weights(path)`` with a clear error for a missing, corrupt or mismatched file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"Checkpoint {path} does not exist. Train first, or pass an existing file.")
    try:
        model.load_weights(path)
    except (OSError, ValueError, KeyError) as err:
        raise CheckpointError(
            f"Could not load {path} into model {model.name!r}: {err}. The file is corrupt or "
            "truncated, or it was saved from a model with other layers. Delete it and train "
            "again, or restore an earlier checkpoint."
        ) from err
    return path


def latest_tf_checkpoint(directory: str | os.PathLike) -> str:
    """The newest ``tf.train.Checkpoint`` prefix in ``directory`` (what ``CheckpointManager`` wrote).

    Raises :class:`CheckpointError` saying what to do when there is none.
    """
    import tensorflow as tf  # noqa: PLC0415

    directory = Path(directory)
    prefix = tf.train.latest_checkpoint(str(directory)) if directory.is_dir() else None
    if prefix is None:
        raise CheckpointError(
            f"No tf.train checkpoint in {directory}. Run the training loop (its CheckpointManager "
            "saves one per epoch) before restoring, or pass the directory it saved to."
        )
    return prefix


def weight_arrays(path: str | os.PathLike) -> dict:
    """Every array of a weights file (``.weights.h5`` of Keras 3 or tf_keras), by its path inside the file."""
    import h5py  # noqa: PLC0415 (Keras' own dependency)

    if not Path(path).is_file():
        raise CheckpointError(f"No weights file {path}. Did the run that writes it finish that epoch?")
    arrays: dict = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None)
    return arrays


def fingerprint(arrays) -> str:
    """12 hex digits of the SHA-256 of the arrays' bytes, in order: equal arrays give equal fingerprints, so two
    processes can show that they started from the same weights (or data) by printing a line each."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:12]


def same_arrays(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two weights files hold the same arrays under the same names, bit for bit (the files' bytes
    can differ: HDF5 stores creation times)."""
    a, b = weight_arrays(first), weight_arrays(second)
    return a.keys() == b.keys() and all(np.array_equal(a[name], b[name]) for name in a)
