import gzip

import numpy as np
import pytest
import tensorflow as tf

from course_utils import data


@pytest.fixture
def only_fake_idx(monkeypatch, fake_idx_dir, tmp_path):
    """Make the fake IDX files the only local source; TFDS sees an empty data dir."""
    monkeypatch.setenv(data.FASHION_MNIST_DIR_ENV, str(fake_idx_dir))
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian-package")
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "tfds"))
    return fake_idx_dir


@pytest.fixture
def nothing_local(monkeypatch, tmp_path):
    monkeypatch.setenv(data.FASHION_MNIST_DIR_ENV, str(tmp_path / "empty"))
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian-package")
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "tfds"))


# --- IDX files --------------------------------------------------------------

def test_idx_round_trip_and_limit(tmp_path):
    images = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)
    data.write_idx(tmp_path / "x.gz", images)
    np.testing.assert_array_equal(data.read_idx(tmp_path / "x.gz"), images)
    np.testing.assert_array_equal(data.read_idx(tmp_path / "x.gz", limit=2), images[:2])
    labels = np.array([3, 1, 4], dtype=np.uint8)
    data.write_idx(tmp_path / "y.gz", labels)
    np.testing.assert_array_equal(data.read_idx(tmp_path / "y.gz"), labels)


def test_reads_uncompressed_idx(tmp_path):
    labels = np.array([9, 8, 7], dtype=np.uint8)
    data.write_idx(tmp_path / "y.gz", labels)
    (tmp_path / "y.raw").write_bytes(gzip.decompress((tmp_path / "y.gz").read_bytes()))
    np.testing.assert_array_equal(data.read_idx(tmp_path / "y.raw"), labels)


def test_corrupt_idx_file_says_what_to_do(tmp_path):
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"this is not an idx file")
    with pytest.raises(ValueError, match="not a readable IDX file.*re-fetch"):
        data.read_idx(bad)


def test_truncated_idx_file_is_reported(tmp_path):
    data.write_idx(tmp_path / "x.gz", np.zeros((10, 28, 28), np.uint8))
    raw = gzip.decompress((tmp_path / "x.gz").read_bytes())
    (tmp_path / "short").write_bytes(raw[:-100])
    with pytest.raises(ValueError, match="truncated"):
        data.read_idx(tmp_path / "short")


# --- load -------------------------------------------------------------------

def test_load_from_idx_files_in_tfds_form(only_fake_idx, capsys):
    ds, info = data.load("fashion_mnist", "train")
    assert info.num_examples == 1200 and info.source == f"IDX files in {only_fake_idx}"
    assert info.image_shape == (28, 28, 1) and info.num_classes == 10
    assert f"1200 examples from IDX files in {only_fake_idx}" in capsys.readouterr().out
    image, label = next(iter(ds))
    assert image.dtype == tf.uint8 and image.shape == (28, 28, 1)
    assert label.dtype == tf.int64 and 0 <= int(label) < 10


def test_load_limit_and_test_split(only_fake_idx):
    info = data.load("fashion_mnist", "test", limit=50, verbose=False)
    assert info.num_examples == 50
    assert sum(1 for _ in info.dataset) == 50


def test_debian_package_is_named_as_source(monkeypatch, fake_idx_dir, tmp_path):
    monkeypatch.delenv(data.FASHION_MNIST_DIR_ENV, raising=False)
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST_DIR", fake_idx_dir)
    info = data.load("fashion_mnist", "test", limit=3, data_dir=tmp_path, verbose=False)
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

    monkeypatch.setattr(data, "_tfds_builder", lambda name, data_dir: (PreparedBuilder(), None))
    info = data.load("fashion_mnist", "train", limit=7, verbose=False)
    assert info.source == "TFDS data prepared in /somewhere/tfds"
    assert calls == {"split": "train[:7]", "as_supervised": True}
    assert info.num_examples == 7


def test_unknown_dataset_lists_available():
    with pytest.raises(ValueError, match="Unknown dataset 'mnist'. Available: fashion_mnist, svhn_cropped"):
        data.load("mnist")


def test_missing_split_lists_splits():
    with pytest.raises(ValueError, match="no split 'validation'. Available splits: train, test"):
        data.load("fashion_mnist", "validation")


@pytest.mark.parametrize("limit", [0, -5, 2.5, True])
def test_bad_limit(limit):
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        data.load("fashion_mnist", limit=limit)


def test_nothing_available_lists_what_was_tried(nothing_local, monkeypatch, tmp_path):
    monkeypatch.setattr(data, "tfds_reachable", lambda timeout=3.0: pytest.fail("offline: no network check"))
    with pytest.raises(data.DataUnavailableError) as err:
        data.load("fashion_mnist", "train", offline=True)
    message = str(err.value)
    assert "not available offline" in message
    assert f"IDX files in {tmp_path / 'empty'}: not found" in message
    assert "TFDS download: skipped, offline mode" in message
    assert "apt-get install dataset-fashion-mnist" in message


def test_unreachable_download_server_is_reported(nothing_local, monkeypatch):
    monkeypatch.setattr(data, "tfds_reachable", lambda timeout=3.0: False)
    with pytest.raises(data.DataUnavailableError, match="storage.googleapis.com not reachable"):
        data.load("fashion_mnist", "test", offline=False)


def test_svhn_offline_is_a_clear_error(nothing_local):
    with pytest.raises(data.DataUnavailableError, match="svhn_cropped/train is not available offline") as err:
        data.load("svhn_cropped", "train")
    assert "not distributed as IDX files" in str(err.value)


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_offline_from_environment(monkeypatch, value, expected):
    monkeypatch.setenv(data.OFFLINE_ENV, value)
    assert data.is_offline() is expected
    assert data.is_offline(False) is False and data.is_offline(True) is True


def test_tfds_reachable_times_out_fast(monkeypatch):
    import time

    monkeypatch.setattr(data, "TFDS_HOST", ("127.0.0.1", 1))  # nothing listens on port 1
    start = time.perf_counter()
    assert data.tfds_reachable(timeout=1.0) is False
    assert time.perf_counter() - start < 2.0


# --- pipeline ---------------------------------------------------------------

def test_check_global_batch():
    assert data.check_global_batch(128, 2) == 64
    with pytest.raises(ValueError, match="101 does not divide across 2 replicas.*e.g. 100 or 102"):
        data.check_global_batch(101, 2)
    with pytest.raises(ValueError, match="2 does not divide across 3 replicas.*e.g. 3"):
        data.check_global_batch(2, 3)
    with pytest.raises(ValueError, match="positive integer"):
        data.check_global_batch(0, 2)


def _toy(n=10):
    images = np.stack([np.full((28, 28, 1), (i * 20) % 256, np.uint8) for i in range(n)])
    return tf.data.Dataset.from_tensor_slices((images, np.arange(n, dtype=np.int64)))


def test_pipeline_scales_batches_and_keeps_partial_batch():
    batches = list(data.make_pipeline(_toy(), 4, training=False))
    assert [int(b[0].shape[0]) for b in batches] == [4, 4, 2]
    images, labels = batches[0]
    assert images.dtype == tf.float32
    np.testing.assert_allclose(images[:, 0, 0, 0].numpy(), np.arange(4) * 20 / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(labels.numpy(), [0, 1, 2, 3])


def test_pipeline_drop_remainder():
    batches = list(data.make_pipeline(_toy(), 4, training=False, drop_remainder=True))
    assert [int(b[0].shape[0]) for b in batches] == [4, 4]


def test_training_pipeline_shuffles_each_epoch_without_losing_examples():
    ds = data.make_pipeline(_toy(50), 50, training=True, seed=1)
    first, second = (next(iter(ds))[1].numpy() for _ in range(2))
    assert sorted(first) == list(range(50)) == sorted(second)
    assert list(first) != list(range(50)) and list(first) != list(second)


def test_pipeline_rejects_batch_that_does_not_divide():
    with pytest.raises(ValueError, match="does not divide across 3 replicas"):
        data.make_pipeline(_toy(), 10, training=True, num_replicas=3)
    with pytest.raises(ValueError, match="positive integer"):
        data.make_pipeline(_toy(), 0, training=True)


@pytest.mark.parametrize("n, batch, replicas, split", [
    (10, 5, 1, []), (101, 48, 3, [2, 2, 1]), (100, 48, 3, [2, 2, 0]), (5, 48, 4, [2, 2, 1, 0]), (98, 48, 2, [1, 1])])
def test_last_batch_split(n, batch, replicas, split):
    assert data.last_batch_split(n, batch, replicas) == split


def test_last_batch_split_matches_tf_distribute():
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()  # the 2 logical CPU devices of conftest
    batches = list(strategy.experimental_distribute_dataset(tf.data.Dataset.range(11).batch(4)))
    last = [int(tf.size(t)) for t in strategy.experimental_local_results(batches[-1])]
    assert last == data.last_batch_split(11, 4, 2) == [2, 1]


def test_pipeline_refuses_a_last_batch_that_leaves_a_replica_empty():
    with pytest.raises(ValueError, match=r"splits as \[1, 1, 0\] over 3 replicas.*drop_remainder=True"):
        data.make_pipeline(_toy(50), 24, training=False, num_replicas=3)
    # dropping the remainder, or a batch size that leaves every replica something, is fine
    assert len(list(data.make_pipeline(_toy(50), 24, training=True, num_replicas=3, drop_remainder=True))) == 2
    assert len(list(data.make_pipeline(_toy(50), 15, training=False, num_replicas=3))) == 4  # last: [2, 2, 1]


def test_pipeline_rejects_zero_replicas():
    with pytest.raises(ValueError, match="num_replicas must be a positive integer"):
        data.make_pipeline(_toy(), 4, training=False, num_replicas=0)
