import importlib.abc
import importlib.util
import re
import sys
import tempfile
import types

import pytest
import tensorflow as tf

from course_utils import datasets


@pytest.fixture
def only_fake_idx(monkeypatch, fake_idx_dir, tmp_path):
    """Make the fake IDX files the only local source; TFDS sees an empty data dir."""
    monkeypatch.setenv(datasets.FASHION_MNIST_DIR_ENV, str(fake_idx_dir))
    monkeypatch.setattr(datasets, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian-package")
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path / "tfds"))
    return fake_idx_dir


@pytest.fixture
def nothing_local(monkeypatch, tmp_path):
    monkeypatch.setenv(datasets.FASHION_MNIST_DIR_ENV, str(tmp_path / "empty"))
    monkeypatch.setattr(datasets, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian-package")
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path / "tfds"))


def test_load_from_idx_files_in_tfds_form(only_fake_idx, capsys):
    ds, info = datasets.load("fashion_mnist", "train")
    assert info.num_examples == 1200 and info.source == f"IDX files in {only_fake_idx}"
    assert info.image_shape == (28, 28, 1) and info.num_classes == 10
    assert f"1200 examples from IDX files in {only_fake_idx}" in capsys.readouterr().out
    image, label = next(iter(ds))
    assert image.dtype == tf.uint8 and image.shape == (28, 28, 1)
    assert label.dtype == tf.int64 and 0 <= int(label) < 10


def test_load_limit_and_test_split(only_fake_idx):
    info = datasets.load("fashion_mnist", "test", limit=50, verbose=False)
    assert info.num_examples == 50
    assert sum(1 for _ in info.dataset) == 50


def test_debian_package_is_named_as_source(monkeypatch, fake_idx_dir, tmp_path):
    monkeypatch.delenv(datasets.FASHION_MNIST_DIR_ENV, raising=False)
    monkeypatch.setattr(datasets, "DEBIAN_FASHION_MNIST_DIR", fake_idx_dir)
    info = datasets.load("fashion_mnist", "test", limit=3, data_dir=tmp_path, verbose=False)
    assert info.source.startswith("Debian package dataset-fashion-mnist")


def test_prepared_tfds_data_comes_first(monkeypatch, only_fake_idx):
    calls = {}

    class PreparedBuilder:
        data_dir = "/somewhere/tfds"

        def is_prepared(self):
            return True

        def as_dataset(self, split, as_supervised):
            calls["split"], calls["as_supervised"] = split, as_supervised
            return tf.data.Dataset.from_tensor_slices(
                (tf.zeros([7, 28, 28, 1], tf.uint8), tf.zeros([7], tf.int64)))

    monkeypatch.setattr(datasets, "_tfds_builder", lambda name, data_dir, offline: (PreparedBuilder(), None))
    info = datasets.load("fashion_mnist", "train", limit=7, verbose=False)
    assert info.source == "TFDS data prepared in /somewhere/tfds"
    assert calls == {"split": "train[:7]", "as_supervised": True}
    assert info.num_examples == 7


@pytest.mark.parametrize("name", ["mnist", "svhn"])
def test_unknown_dataset_lists_available(name):
    expected = f"Unknown dataset {name!r}. Available: fashion_mnist, svhn_cropped."
    with pytest.raises(ValueError, match=re.escape(expected)):
        datasets.load(name)


def test_missing_split_lists_splits():
    with pytest.raises(ValueError, match="no split 'validation'. Available splits: train, test"):
        datasets.load("fashion_mnist", "validation")


@pytest.mark.parametrize("limit", [0, -5, 2.5, True])
def test_bad_limit(limit):
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        datasets.load("fashion_mnist", limit=limit)


def test_nothing_available_lists_what_was_tried(nothing_local, monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "tfds_reachable", lambda timeout=3.0: pytest.fail("offline: no network check"))
    with pytest.raises(datasets.DataUnavailableError) as err:
        datasets.load("fashion_mnist", "train", offline=True)
    message = str(err.value)
    assert "not available offline" in message
    assert f"IDX files in {tmp_path / 'empty'}: not found" in message
    assert "TFDS download: skipped, offline mode" in message
    assert "apt-get install dataset-fashion-mnist" in message


def test_a_dataset_without_a_hint_of_its_own_gets_the_general_one(nothing_local, monkeypatch):
    """Each dataset's spec carries its offline hint; a new one without gets TFDS's (not a KeyError)."""
    spec = datasets.DatasetSpec("new_digits", (28, 28, 1), 10, ("train",), idx_files={})
    monkeypatch.setitem(datasets.DATASETS, "new_digits", spec)
    with pytest.raises(datasets.DataUnavailableError, match="To fix: go online so that TFDS can download it"):
        datasets.load("new_digits", "train", offline=True)


def test_unreachable_download_server_is_reported(nothing_local, monkeypatch):
    monkeypatch.setattr(datasets, "tfds_reachable", lambda timeout=3.0: False)
    with pytest.raises(datasets.DataUnavailableError, match="storage.googleapis.com not reachable"):
        datasets.load("fashion_mnist", "test", offline=False)


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_offline_from_environment(monkeypatch, value, expected):
    monkeypatch.setenv(datasets.OFFLINE_ENV, value)
    assert datasets.is_offline() is expected
    assert datasets.is_offline(False) is False and datasets.is_offline(True) is True


def test_tfds_reachable_times_out_fast(monkeypatch):
    import time

    monkeypatch.setattr(datasets, "TFDS_HOST", ("127.0.0.1", 1))  # nothing listens on port 1
    start = time.perf_counter()
    assert datasets.tfds_reachable(timeout=1.0) is False
    assert time.perf_counter() - start < 2.0


def test_installed_tfds_is_usable(tmp_path):
    """The versions pyproject.toml allows give a working TFDS: the offline path hides a broken one
    (tensorflow-metadata 1.21 with protobuf < 6 did), so this test checks it directly."""
    if importlib.util.find_spec("tensorflow_datasets") is None:
        pytest.skip("tensorflow-datasets is not installed (the offline path does not need it)")
    builder, problem = datasets._tfds_builder("fashion_mnist", str(tmp_path), offline=True)
    assert problem is None, problem
    import tensorflow_datasets as tfds

    assert tfds.core.utils.gcs_utils._is_gcs_disabled  # offline: no look into TFDS's bucket (4.9.3 would)
    assert builder.is_prepared() is False
    assert builder.info.features["label"].num_classes == 10


# --- a broken tensorflow-datasets must not take the other sources down --------

class HalfLoadedTfds(types.ModuleType):
    """What a failed ``import tensorflow_datasets`` can leave behind: a module without its API."""

    def __getattr__(self, attr):
        raise AttributeError(f"module 'tensorflow_datasets' has no attribute {attr!r}")


class TfdsImportRaises(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import tensorflow_datasets`` raise a TypeError, as a protobuf version clash does."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname == "tensorflow_datasets" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise TypeError("Descriptors cannot be created directly.")


@pytest.fixture
def half_loaded_tfds(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", HalfLoadedTfds("tensorflow_datasets"))


BROKEN_BUILDER = ("tensorflow-datasets is installed but broken (AttributeError: module 'tensorflow_datasets' "
                  "has no attribute 'builder'): reinstall it with compatible versions, e.g. "
                  "`pip install 'tensorflow-metadata<1.21'` with protobuf<6, or uninstall it")


def test_half_loaded_tfds_falls_back_to_idx_files(half_loaded_tfds, only_fake_idx):
    info = datasets.load("fashion_mnist", "test", limit=5, verbose=False)
    assert info.source == f"IDX files in {only_fake_idx}" and info.num_examples == 5


def test_half_loaded_tfds_is_named_with_its_fix_when_nothing_works(half_loaded_tfds, nothing_local, monkeypatch):
    with pytest.raises(datasets.DataUnavailableError) as err:
        datasets.load("fashion_mnist", "train", offline=True)
    assert BROKEN_BUILDER in str(err.value)
    assert "TFDS download: skipped, offline mode" in str(err.value)
    # online, a broken TFDS is not asked to download
    monkeypatch.setattr(datasets, "tfds_reachable", lambda timeout=3.0: pytest.fail("TFDS is broken: no download"))
    with pytest.raises(datasets.DataUnavailableError, match="TFDS download: tensorflow-datasets is not usable"):
        datasets.load("fashion_mnist", "train", offline=False)


def test_tfds_import_raising_falls_back_to_idx_files(monkeypatch, only_fake_idx, tmp_path):
    monkeypatch.delitem(sys.modules, "tensorflow_datasets", raising=False)
    monkeypatch.setattr(sys, "meta_path", [TfdsImportRaises(), *sys.meta_path])
    info = datasets.load("fashion_mnist", "test", limit=5, verbose=False)
    assert info.source == f"IDX files in {only_fake_idx}"
    monkeypatch.setenv(datasets.FASHION_MNIST_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(datasets.DataUnavailableError, match=re.escape(
            "tensorflow-datasets is installed but broken (TypeError: Descriptors cannot be created directly.)")):
        datasets.load("fashion_mnist", "test", offline=True)


def test_tfds_failing_to_check_its_data_falls_back_to_idx_files(monkeypatch, only_fake_idx, tmp_path):
    class BrokenBuilder:
        data_dir = "/somewhere/tfds"

        def is_prepared(self):
            raise RuntimeError("dataset_info.json is corrupt")

    monkeypatch.setattr(datasets, "_tfds_builder", lambda name, data_dir, offline: (BrokenBuilder(), None))
    info = datasets.load("fashion_mnist", "test", limit=5, verbose=False)
    assert info.source == f"IDX files in {only_fake_idx}"
    monkeypatch.setenv(datasets.FASHION_MNIST_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(datasets.DataUnavailableError, match=re.escape("broken (RuntimeError: dataset_info.json")):
        datasets.load("fashion_mnist", "test", offline=True)


def test_interrupting_tfds_is_not_swallowed(monkeypatch, only_fake_idx):
    class Interrupted(types.ModuleType):
        def __getattr__(self, attr):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", Interrupted("tensorflow_datasets"))
    with pytest.raises(KeyboardInterrupt):
        datasets.load("fashion_mnist", "test", limit=5, verbose=False)


def test_svhn_offline_is_the_generated_stand_in_and_says_so(nothing_local, tmp_path, capsys):
    info = datasets.load("svhn_cropped", "test", limit=40, offline=True)
    assert "generated stand-in" in info.source and "NOT real SVHN" in info.source
    assert "NOT real SVHN" in capsys.readouterr().out
    assert info.num_examples == 40 and info.image_shape == (32, 32, 3) and info.num_classes == 10
    images = [image for image, _ in info.dataset]
    assert images[0].dtype == tf.uint8 and images[0].shape == (32, 32, 3) and len(images) == 40
    assert (tmp_path / "tfds" / "svhn_standin").is_dir(), "cached in the course's data directory"


def test_svhn_online_goes_through_tfds(nothing_local, monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.setattr(datasets, "tfds_reachable", lambda timeout=3.0: True)
    with tfds.testing.mock_data(num_examples=12):  # no network: TFDS' own mock of download and data
        info = datasets.load("svhn_cropped", "train", limit=5, offline=False, verbose=False)
        image, label = next(iter(info.dataset))
    assert info.source.startswith("TFDS download into")
    assert info.num_examples == 12  # the mock ignores the split's slice ("train[:5]"); real TFDS data takes it
    assert image.shape == (32, 32, 3) and image.dtype == tf.uint8 and label.dtype == tf.int64


def test_making_a_tfds_builder_leaves_no_temporary_directory(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow_datasets")
    root = tmp_path / "tmp"  # tempfile's default directory for this test alone: what is left there is ours
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    builder, problem = datasets._tfds_builder("fashion_mnist", str(tmp_path / "data"), offline=True)
    assert problem is None and builder.name == "fashion_mnist"
    assert list(root.iterdir()) == []  # TFDS alone leaves an empty tmp*tfds here for every builder
    assert tempfile.tempdir == str(root)  # restored
