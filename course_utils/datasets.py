"""Where the course's data comes from: :func:`load` takes a dataset from the best source available.

:func:`load` returns a ``tf.data.Dataset`` of ``(image uint8 [H, W, C], label int64)``
pairs -- the form of ``tfds.load(..., as_supervised=True)`` -- whatever the source.
Sources are tried in this order, and the one used is reported:

1. TFDS data already prepared in the data directory (no network needed);
2. local IDX files: the directory in ``$COURSE_FASHION_MNIST_DIR``, else Debian's
   package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``);
3. a TFDS download, when the download server answers within a few seconds and
   offline mode is off (``offline=True`` or ``$COURSE_OFFLINE=1`` turns it off);
4. for SVHN only (``svhn_cropped``, which no package registry ships): a *generated stand-in*,
   :mod:`course_utils.svhn_standin`, reported as such: it is not real SVHN.

tensorflow-datasets is optional: when it is missing or broken the IDX files are still
used, and the error raised when no source works says what went wrong with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import tempfile
from pathlib import Path

import numpy as np

from course_utils.idx import read_idx

DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_DIR_ENV = "COURSE_FASHION_MNIST_DIR"
OFFLINE_ENV = "COURSE_OFFLINE"
DATA_DIR_ENV = "COURSE_DATA_DIR"
TFDS_HOST = ("storage.googleapis.com", 443)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    name: str
    image_shape: tuple[int, int, int]
    num_classes: int
    splits: tuple[str, ...]
    idx_files: dict[str, tuple[str, str]]  # split -> (images, labels)
    generated: bool = False  # offline, a generated stand-in (course_utils.svhn_standin) replaces it
    # what to do when no source has it offline (the end of DataUnavailableError's message)
    offline_hint: str = "go online so that TFDS can download it, or pass data_dir= where TFDS has prepared it"


DATASETS = {
    "fashion_mnist": DatasetSpec(
        "fashion_mnist", (28, 28, 1), 10, ("train", "test"),
        idx_files={
            "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
            "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
        },
        offline_hint=("install Debian's package (sudo apt-get install dataset-fashion-mnist), or set "
                      f"${FASHION_MNIST_DIR_ENV} to a directory holding the four *-ubyte.gz files, "
                      "or go online so that TFDS can download it"),
    ),
    "svhn_cropped": DatasetSpec("svhn_cropped", (32, 32, 3), 10, ("train", "test"), idx_files={}, generated=True),
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
# IDX files
# ---------------------------------------------------------------------------

def _idx_dirs() -> list[Path]:
    dirs = []
    if os.environ.get(FASHION_MNIST_DIR_ENV):
        dirs.append(Path(os.environ[FASHION_MNIST_DIR_ENV]))
    dirs.append(DEBIAN_FASHION_MNIST_DIR)
    return dirs


def _load_idx(spec: DatasetSpec, split: str, limit: int | None, tried: list[str]):
    if split not in spec.idx_files:
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


def _tfds_broken(err: Exception) -> str:
    """What went wrong with an installed tensorflow-datasets, and how to repair it."""
    # e.g. tensorflow-metadata 1.21 (protobuf 6 gencode) with TF 2.18's protobuf<6
    return (
        f"tensorflow-datasets is installed but broken ({type(err).__name__}: {err}): reinstall it "
        "with compatible versions, e.g. `pip install 'tensorflow-metadata<1.21'` with protobuf<6, "
        "or uninstall it to use the offline files"
    )


@contextlib.contextmanager
def _own_tempdir():
    """tempfile's default directory set to a fresh one of ours for the block, then removed with what is in it.

    TFDS's builder looks for the dataset's metadata in its cloud bucket (``DatasetInfo.initialize_from_bucket``)
    after making a temporary directory for it, which it never removes: offline, one empty ``/tmp/tmp*tfds``
    per builder made. The setting is process-wide: another thread's temporary file made meanwhile would go
    there too, and be removed with it, so it is used around the builder alone, which the notebooks make
    before starting any thread of theirs."""
    with tempfile.TemporaryDirectory(prefix="course_tfds_", ignore_cleanup_errors=True) as ours:
        previous, tempfile.tempdir = tempfile.tempdir, ours
        try:
            yield
        finally:
            tempfile.tempdir = previous


def _tfds_builder(name: str, data_dir: str | None, offline: bool = False):
    """``(builder, None)``, or ``(None, why not)`` when TFDS is missing or broken. ``offline``: TFDS does
    not look for dataset metadata in its cloud bucket (older releases do by default, with retries)."""
    try:
        import tensorflow_datasets as tfds  # noqa: PLC0415  (slow import; only when needed)
    except ImportError as err:  # e.g. importlib_resources missing, see README
        return None, f"tensorflow-datasets not importable ({err})"
    except Exception as err:  # noqa: BLE001  (a broken optional source must not stop the others)
        return None, _tfds_broken(err)
    if offline:
        try:
            tfds.core.utils.gcs_utils._is_gcs_disabled = True  # TFDS's own switch (4.9.10 starts with it on)
        except AttributeError:  # a release without it: nothing to turn off
            pass
    with _own_tempdir():
        try:
            return tfds.builder(name, data_dir=data_dir), None
        except Exception as err:  # noqa: BLE001  (e.g. a half-imported module without `builder`)
            return None, _tfds_broken(err)


def _count(dataset) -> int:
    import tensorflow as tf  # noqa: PLC0415

    n = int(dataset.cardinality())
    if n < 0:  # unknown: count (only for small limited sets)
        n = int(dataset.reduce(tf.constant(0, tf.int64), lambda c, _: c + 1))
    return n


def _from_prepared_tfds(builder, problem, data_dir, tfds_split, tried):
    """1. TFDS data already prepared in the data directory."""
    try:
        prepared = builder is not None and builder.is_prepared()
    except Exception as err:  # noqa: BLE001  (a broken optional source must not stop the others)
        builder, problem, prepared = None, _tfds_broken(err), False
    if prepared:
        ds = builder.as_dataset(split=tfds_split, as_supervised=True)
        return ds, _count(ds), f"TFDS data prepared in {builder.data_dir}"
    tried.append(problem or f"TFDS data prepared in {builder.data_dir if builder else data_dir}: none")
    return None


def _from_idx(spec, split, limit, tried):
    """2. Local IDX files (Debian's dataset-fashion-mnist, or files in the data directory)."""
    import tensorflow as tf  # noqa: PLC0415

    found = _load_idx(spec, split, limit, tried)
    if found is None:
        return None
    images, labels, source = found
    return tf.data.Dataset.from_tensor_slices((images, labels)), len(labels), source


def _from_tfds_download(builder, offline, tfds_split, tried):
    """3. A TFDS download (not offline, and only when its host answers)."""
    if offline:
        tried.append(f"TFDS download: skipped, offline mode (offline=True or ${OFFLINE_ENV}=1)")
    elif builder is None:
        tried.append("TFDS download: tensorflow-datasets is not usable (see above)")
    elif not tfds_reachable():
        tried.append(f"TFDS download: {TFDS_HOST[0]} not reachable within 3 s")
    else:
        builder.download_and_prepare()
        ds = builder.as_dataset(split=tfds_split, as_supervised=True)
        return ds, _count(ds), f"TFDS download into {builder.data_dir}"
    return None


def _from_standin(spec, split, limit):
    """4. A generated stand-in, for the datasets that have one (SVHN)."""
    if not spec.generated:
        return None
    import tensorflow as tf  # noqa: PLC0415

    from course_utils import svhn_standin  # noqa: PLC0415

    images, labels = svhn_standin.load(split, n=limit)
    return tf.data.Dataset.from_tensor_slices((images, labels)), len(labels), svhn_standin.SOURCE


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
    offline = is_offline(offline)
    tfds_split = split if limit is None else f"{split}[:{limit}]"
    tried: list[str] = []
    builder, problem = _tfds_builder(name, data_dir, offline)
    sources = (lambda: _from_prepared_tfds(builder, problem, data_dir, tfds_split, tried),  # in this order
               lambda: _from_idx(spec, split, limit, tried),
               lambda: _from_tfds_download(builder, offline, tfds_split, tried),
               lambda: _from_standin(spec, split, limit))
    for source in sources:
        found = source()
        if found is not None:
            dataset, n, where = found
            if verbose:
                print(f"{name}/{split}: {n} examples from {where}")
            return LoadedData(dataset, name, split, n, where, spec.image_shape, spec.num_classes)
    raise DataUnavailableError(
        f"{name}/{split} is not available offline here. Tried:\n  - "
        + "\n  - ".join(tried)
        + f"\nTo fix: {spec.offline_hint}."
    )
