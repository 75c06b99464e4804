"""Datasets for the course, from the best source available, and the shared input pipeline.

:func:`load` returns a ``tf.data.Dataset`` of ``(image uint8 [H, W, C], label int64)``
pairs -- the form of ``tfds.load(..., as_supervised=True)`` -- whatever the source.
Sources are tried in this order, and the one used is reported:

1. TFDS data already prepared in the data directory (no network needed);
2. local IDX files (Fashion-MNIST only): the directory in ``$COURSE_FASHION_MNIST_DIR``,
   else Debian's package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``);
3. a TFDS download, when the download server answers within a few seconds and
   offline mode is off (``offline=True`` or ``$COURSE_OFFLINE=1`` turns it off);
4. for SVHN only, a generated stand-in (not available yet).

:func:`make_pipeline` is the input pipeline the notebooks share: scale to [0, 1],
cache, shuffle, batch by the *global* batch size, prefetch.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import socket
import struct
from pathlib import Path

import numpy as np

DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_DIR_ENV = "COURSE_FASHION_MNIST_DIR"
OFFLINE_ENV = "COURSE_OFFLINE"
DATA_DIR_ENV = "COURSE_DATA_DIR"
TFDS_HOST = ("storage.googleapis.com", 443)

FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str
    image_shape: tuple[int, int, int]
    num_classes: int
    splits: tuple[str, ...]
    idx_files: dict[str, tuple[str, str]] | None = None  # split -> (images, labels)


DATASETS = {
    "fashion_mnist": DatasetSpec(
        "fashion_mnist", (28, 28, 1), 10, ("train", "test"),
        idx_files={
            "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
            "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
        },
    ),
    "svhn_cropped": DatasetSpec("svhn_cropped", (32, 32, 3), 10, ("train", "test", "extra")),
}


@dataclasses.dataclass(frozen=True)
class LoadedData:
    """What :func:`load` returns: the dataset and where it came from."""

    dataset: object  # tf.data.Dataset
    name: str
    split: str
    num_examples: int
    source: str
    image_shape: tuple[int, int, int]
    num_classes: int

    def __iter__(self):  # allows ``ds, info = load(...)``
        return iter((self.dataset, self))


class DataUnavailableError(RuntimeError):
    """No source could provide the requested dataset."""


# ---------------------------------------------------------------------------
# IDX files (the format of the original MNIST / Fashion-MNIST distribution)
# ---------------------------------------------------------------------------

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
        raise ValueError(
            f"{path} is not a readable IDX file ({err}). Delete it and re-fetch it, or point "
            f"${FASHION_MNIST_DIR_ENV} at a directory with intact files."
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


def _idx_dirs() -> list[Path]:
    dirs = []
    if os.environ.get(FASHION_MNIST_DIR_ENV):
        dirs.append(Path(os.environ[FASHION_MNIST_DIR_ENV]))
    dirs.append(DEBIAN_FASHION_MNIST_DIR)
    return dirs


def _load_idx(spec: DatasetSpec, split: str, limit: int | None, tried: list[str]):
    if not spec.idx_files:
        return None
    image_file, label_file = spec.idx_files[split]
    for directory in _idx_dirs():
        images_path, labels_path = directory / image_file, directory / label_file
        if not (images_path.is_file() and labels_path.is_file()):
            tried.append(f"IDX files in {directory}: not found")
            continue
        images = read_idx(images_path, limit)
        labels = read_idx(labels_path, limit)
        if images.shape[0] != labels.shape[0] or images.shape[1:] != spec.image_shape[:2]:
            raise ValueError(
                f"IDX files in {directory} do not match: {images.shape[0]} images of shape "
                f"{images.shape[1:]} but {labels.shape[0]} labels (expected images of shape "
                f"{spec.image_shape[:2]}). Reinstall the files."
            )
        images = images.reshape((-1, *spec.image_shape))
        source = (f"Debian package dataset-fashion-mnist ({directory})"
                  if directory == DEBIAN_FASHION_MNIST_DIR else f"IDX files in {directory}")
        return images, labels.astype(np.int64), source
    return None


# ---------------------------------------------------------------------------
# TFDS
# ---------------------------------------------------------------------------

def is_offline(offline: bool | None = None) -> bool:
    """``offline`` if given, else ``$COURSE_OFFLINE`` (1/true/yes means offline)."""
    if offline is not None:
        return bool(offline)
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def tfds_reachable(timeout: float = 3.0) -> bool:
    """Whether the TFDS download server accepts a connection within ``timeout`` seconds.

    ``tfds.load`` retries for minutes when offline; this answers in seconds.
    """
    try:
        with socket.create_connection(TFDS_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def _tfds_builder(name: str, data_dir: str | None):
    try:
        import tensorflow_datasets as tfds  # noqa: PLC0415  (slow import; only when needed)
    except ImportError as err:  # e.g. importlib_resources missing, see README
        return None, f"tensorflow-datasets not importable ({err})"
    return tfds.builder(name, data_dir=data_dir), None


def _count(dataset) -> int:
    import tensorflow as tf  # noqa: PLC0415

    n = int(dataset.cardinality())
    if n < 0:  # unknown: count (only for small limited sets)
        n = int(dataset.reduce(tf.constant(0, tf.int64), lambda c, _: c + 1))
    return n


def load(
    name: str,
    split: str = "train",
    *,
    limit: int | None = None,
    data_dir: str | os.PathLike | None = None,
    offline: bool | None = None,
    verbose: bool = True,
) -> LoadedData:
    """Load ``split`` of dataset ``name`` as ``(uint8 image, int64 label)`` pairs.

    ``limit`` keeps only the first ``limit`` examples (for fast runs).
    ``data_dir`` is the TFDS data directory (default ``$COURSE_DATA_DIR`` or TFDS' own).
    Returns a :class:`LoadedData`; unpack it as ``ds, info = load(...)``.
    Raises :class:`DataUnavailableError` listing every source tried when none works.
    """
    import tensorflow as tf  # noqa: PLC0415

    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}. Available: {', '.join(sorted(DATASETS))}.")
    spec = DATASETS[name]
    if split not in spec.splits:
        raise ValueError(
            f"Dataset {name!r} has no split {split!r}. Available splits: {', '.join(spec.splits)}."
        )
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    data_dir = os.fspath(data_dir) if data_dir else os.environ.get(DATA_DIR_ENV) or None
    tfds_split = split if limit is None else f"{split}[:{limit}]"
    tried: list[str] = []

    def done(dataset, n, source):
        info = LoadedData(dataset, name, split, n, source, spec.image_shape, spec.num_classes)
        if verbose:
            print(f"{name}/{split}: {n} examples from {source}")
        return info

    # 1. TFDS data prepared in the data directory.
    builder, problem = _tfds_builder(name, data_dir)
    if builder is not None and builder.is_prepared():
        ds = builder.as_dataset(split=tfds_split, as_supervised=True)
        return done(ds, _count(ds), f"TFDS data prepared in {builder.data_dir}")
    tried.append(problem or f"TFDS data prepared in {builder.data_dir if builder else data_dir}: none")

    # 2. Local IDX files.
    found = _load_idx(spec, split, limit, tried)
    if found is not None:
        images, labels, source = found
        return done(tf.data.Dataset.from_tensor_slices((images, labels)), len(labels), source)
    if not spec.idx_files:
        tried.append(f"local IDX files: {name} is not distributed as IDX files")

    # 3. TFDS download.
    if is_offline(offline):
        tried.append(f"TFDS download: skipped, offline mode (offline=True or ${OFFLINE_ENV}=1)")
    elif builder is None:
        tried.append("TFDS download: tensorflow-datasets is not importable")
    elif not tfds_reachable():
        tried.append(f"TFDS download: {TFDS_HOST[0]} not reachable within 3 s")
    else:
        builder.download_and_prepare()
        ds = builder.as_dataset(split=tfds_split, as_supervised=True)
        return done(ds, _count(ds), f"TFDS download into {builder.data_dir}")

    hints = {
        "fashion_mnist": (
            "install Debian's package (sudo apt-get install dataset-fashion-mnist), or set "
            f"${FASHION_MNIST_DIR_ENV} to a directory holding the four *-ubyte.gz files, "
            "or go online so that TFDS can download it"
        ),
        "svhn_cropped": (
            "go online so that TFDS can download svhn_cropped, or prepare it with TFDS "
            "on a machine that is and copy the data directory here (pass data_dir=...)"
        ),
    }
    raise DataUnavailableError(
        f"{name}/{split} is not available offline here. Tried:\n  - "
        + "\n  - ".join(tried)
        + f"\nTo fix: {hints[name]}."
    )


# ---------------------------------------------------------------------------
# Input pipeline
# ---------------------------------------------------------------------------

def check_global_batch(global_batch_size: int, num_replicas: int) -> int:
    """Return the per-replica batch, or raise if the global batch does not divide evenly."""
    if not isinstance(global_batch_size, int) or global_batch_size < 1:
        raise ValueError(f"global_batch_size must be a positive integer, got {global_batch_size!r}")
    if not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"num_replicas must be a positive integer, got {num_replicas!r}")
    per_replica, rest = divmod(global_batch_size, num_replicas)
    if rest or per_replica == 0:
        lower = max(per_replica, 1) * num_replicas
        upper = (per_replica + 1) * num_replicas
        options = f"{lower} or {upper}" if lower != upper and per_replica else f"{upper}"
        raise ValueError(
            f"Global batch size {global_batch_size} does not divide across {num_replicas} "
            f"replicas. Use per_replica_batch * num_replicas_in_sync, e.g. {options}."
        )
    return per_replica


def last_batch_split(num_examples: int, global_batch_size: int, num_replicas: int) -> list[int]:
    """How ``tf.distribute`` splits the last (partial) batch across replicas; [] if there is none.

    Each replica takes up to ``ceil(remainder / num_replicas)`` examples in turn, so a
    short last batch can leave the last replicas with none: 4 examples on 3 replicas
    become [2, 2, 0].
    """
    remainder = num_examples % global_batch_size
    if remainder == 0:
        return []
    share = -(-remainder // num_replicas)  # ceil
    sizes = []
    for _ in range(num_replicas):
        sizes.append(min(share, remainder))
        remainder -= sizes[-1]
    return sizes


def scale_image(image, label):
    """uint8 [0, 255] -> float32 [0, 1]; the label is passed through."""
    import tensorflow as tf  # noqa: PLC0415

    return tf.cast(image, tf.float32) / 255.0, label


def make_pipeline(
    dataset,
    global_batch_size: int,
    *,
    training: bool,
    num_replicas: int | None = None,
    shuffle_buffer: int = 10_000,
    seed: int | None = None,
    cache: bool = True,
    drop_remainder: bool = False,
):
    """The course's input pipeline: scale, cache, shuffle (training only), batch, prefetch.

    Batches by the **global** batch size, which ``tf.distribute`` splits across
    replicas. With ``num_replicas`` given, a global batch that does not divide
    evenly raises a ``ValueError`` that says which sizes would, and so does a last
    partial batch that would leave a replica with no examples (see :func:`last_batch_split`).
    """
    import tensorflow as tf  # noqa: PLC0415

    check_global_batch(global_batch_size, 1 if num_replicas is None else num_replicas)
    if num_replicas is not None:
        num_examples = int(dataset.cardinality())
        split = [] if drop_remainder or num_examples < 0 else last_batch_split(
            num_examples, global_batch_size, num_replicas)
        if 0 in split:
            raise ValueError(
                f"With {num_examples} examples the last batch holds {sum(split)}, which "
                f"tf.distribute splits as {split} over {num_replicas} replicas: a replica with no "
                "examples, and a Conv2D on an empty batch fails on CPU. Pass drop_remainder=True "
                "(training), or pick a global batch size that leaves at least one example per "
                "replica in the last batch."
            )
    ds = dataset.map(scale_image, num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        ds = ds.cache()
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds.batch(global_batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
