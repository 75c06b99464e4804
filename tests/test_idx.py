import gzip

import numpy as np
import pytest

from course_utils.idx import read_idx, write_idx


def test_idx_round_trip_and_limit(tmp_path):
    images = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)
    write_idx(tmp_path / "x.gz", images)
    np.testing.assert_array_equal(read_idx(tmp_path / "x.gz"), images)
    np.testing.assert_array_equal(read_idx(tmp_path / "x.gz", limit=2), images[:2])
    labels = np.array([3, 1, 4], dtype=np.uint8)
    write_idx(tmp_path / "y.gz", labels)
    np.testing.assert_array_equal(read_idx(tmp_path / "y.gz"), labels)


def test_reads_uncompressed_idx(tmp_path):
    labels = np.array([9, 8, 7], dtype=np.uint8)
    write_idx(tmp_path / "y.gz", labels)
    (tmp_path / "y.raw").write_bytes(gzip.decompress((tmp_path / "y.gz").read_bytes()))
    np.testing.assert_array_equal(read_idx(tmp_path / "y.raw"), labels)


def test_corrupt_idx_file_says_what_to_do(tmp_path):
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"this is not an idx file")
    with pytest.raises(ValueError, match="not a readable IDX file.*re-fetch"):
        read_idx(bad)


def test_truncated_idx_file_is_reported(tmp_path):
    write_idx(tmp_path / "x.gz", np.zeros((10, 28, 28), np.uint8))
    raw = gzip.decompress((tmp_path / "x.gz").read_bytes())
    (tmp_path / "short").write_bytes(raw[:-100])
    with pytest.raises(ValueError, match="truncated"):
        read_idx(tmp_path / "short")
