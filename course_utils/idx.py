"""The IDX file format of the original MNIST / Fashion-MNIST distribution: :func:`read_idx`, :func:`write_idx`."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import numpy as np


def _open(path: Path):
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_idx(path: str | os.PathLike, limit: int | None = None) -> np.ndarray:
    """Read an IDX file (optionally gzipped) of unsigned bytes into a numpy array.

    Images (magic 2051) come back as ``uint8 [n, rows, cols]``, labels (2049) as
    ``uint8 [n]``. ``limit`` reads only the first ``limit`` items.
    """
    path = Path(path)
    try:
        with _open(path) as fh:
            magic_bytes = fh.read(4)
            if len(magic_bytes) < 4 or magic_bytes[:2] != b"\x00\x00" or magic_bytes[2] != 0x08:
                raise ValueError("not an IDX file of unsigned bytes (bad magic number)")
            ndim = magic_bytes[3]
            dims = struct.unpack(f">{ndim}I", fh.read(4 * ndim))
            count = dims[0] if limit is None else min(dims[0], limit)
            item = int(np.prod(dims[1:], dtype=np.int64)) if ndim > 1 else 1
            raw = fh.read(count * item)
    except (OSError, EOFError, struct.error, ValueError) as err:
        raise ValueError(  # $COURSE_FASHION_MNIST_DIR is datasets.FASHION_MNIST_DIR_ENV
            f"{path} is not a readable IDX file ({err}). Delete it and re-fetch it, or point "
            "$COURSE_FASHION_MNIST_DIR at a directory with intact files."
        ) from err
    if len(raw) != count * item:
        raise ValueError(
            f"{path} is truncated: expected {count * item} bytes of data, got {len(raw)}. "
            "Re-download or reinstall the files."
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape((count, *dims[1:]))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write a uint8 array as a gzipped IDX file (the inverse of :func:`read_idx`)."""
    array = np.asarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.tobytes())
