"""The generated SVHN stand-in: form, determinism, variety, the disk cache, learnability (NumPy only)."""

import numpy as np
import pytest

from course_utils import svhn_standin
from course_utils.datasets import DATA_DIR_ENV
from course_utils.svhn_standin import generate, load


@pytest.fixture(scope="module")
def train():
    return generate(3000, seed=0)


def test_form_of_tfds_svhn_cropped(train):
    images, labels = train
    assert images.shape == (3000, *svhn_standin.IMAGE_SHAPE) == (3000, 32, 32, 3)
    assert images.dtype == np.uint8 and labels.dtype == np.int64 and labels.shape == (3000,)
    assert labels.min() == 0 and labels.max() == svhn_standin.NUM_CLASSES - 1 == 9
    assert "NOT real SVHN" in svhn_standin.SOURCE and "stand-in" in svhn_standin.SOURCE


def test_deterministic_and_smaller_n_is_a_prefix(train):
    images, labels = train
    for n in (1, 100, 129, 1000):  # within the first stream, and across streams
        small_images, small_labels = generate(n, seed=0)
        np.testing.assert_array_equal(small_images, images[:n])
        np.testing.assert_array_equal(small_labels, labels[:n])
    other_images, _ = generate(200, seed=1)
    assert not np.array_equal(other_images, images[:200])


def test_train_and_test_splits_differ(train):
    test_images, test_labels = generate(200, split="test")
    assert not np.array_equal(test_images, train[0][:200])
    assert (test_images == train[0][:200]).mean() < 0.1
    assert not np.array_equal(test_labels, train[1][:200])


def test_labels_are_roughly_uniform(train):
    counts = np.bincount(train[1], minlength=10)
    assert counts.min() > 0.7 * 300 and counts.max() < 1.3 * 300, counts


def test_many_fonts_in_the_glyph_atlas():
    alpha, widths, fonts = svhn_standin.glyph_atlas()
    assert len(fonts) >= 6 and alpha.shape[0] == 10 * len(fonts) + 1
    assert alpha.dtype == np.float32 and 0 <= alpha.min() and alpha.max() <= 1
    ink = alpha[:-1].reshape(len(fonts), 10, -1)
    assert (ink.sum(-1) > 50).all()  # every digit of every font has ink
    assert alpha[-1].max() == 0 and widths[-1] == 0  # the blank "no neighbour" glyph
    # the fonts really differ: no two render "8" the same
    eights = ink[:, 8]
    distances = np.abs(eights[:, None] - eights[None]).mean(-1)
    assert distances[~np.eye(len(fonts), dtype=bool)].min() > 0.005


def test_images_vary_in_colour_contrast_and_polarity(train):
    images = train[0].astype(np.float32)
    assert (images.reshape(len(images), -1).std(1) > 3).mean() > 0.98  # not constant
    means = images.mean((1, 2))  # mean colour per image
    assert means.std(0).min() > 20  # each of R, G, B varies across images
    assert (np.ptp(means, axis=1) > 30).mean() > 0.1  # and some are clearly coloured
    gray = images.mean(-1).reshape(len(images), -1)
    median = np.median(gray, 1)
    dark_ink = (median - gray.min(1)) > (gray.max(1) - median)  # the digit is the outlier
    assert 0.3 < dark_ink.mean() < 0.8, dark_ink.mean()  # both polarities, dark ink a bit more


def test_edges_show_parts_of_neighbouring_digits(train):
    gray = train[0][:500].astype(np.float32).mean(-1)
    centre_std = gray[:, :, 12:20].std((1, 2))
    edge_std = np.minimum(gray[:, :, :4].std((1, 2)), gray[:, :, -4:].std((1, 2)))
    # Where both edge strips vary as much as half the centre's, digits are cut off at both sides.
    assert (edge_std > 0.5 * centre_std).mean() > 0.3


def test_load_writes_the_cache_then_reuses_it(tmp_path, monkeypatch):
    images, labels = load("test", n=150, seed=2, cache_dir=tmp_path)
    path = svhn_standin.cache_path("test", n=150, seed=2, cache_dir=tmp_path)
    assert path.exists() and f"v{svhn_standin.VERSION}" in path.name
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    np.testing.assert_array_equal(images, generate(150, split="test", seed=2)[0])

    def no_generating(*args, **kwargs):
        raise AssertionError("generate() called although the cache is there")

    monkeypatch.setattr(svhn_standin, "generate", no_generating)
    again_images, again_labels = load("test", n=150, seed=2, cache_dir=tmp_path)
    np.testing.assert_array_equal(again_images, images)
    np.testing.assert_array_equal(again_labels, labels)


def test_corrupt_or_wrong_cache_file_is_regenerated(tmp_path):
    path = svhn_standin.cache_path("train", n=40, cache_dir=tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    expected = generate(40)
    for junk in (b"not an npz file", None):
        if junk is None:  # a readable file of the wrong shape
            np.savez(path, images=np.zeros((3, 32, 32, 3), np.uint8), labels=np.zeros(3, np.int64))
        else:
            path.write_bytes(junk)
        images, labels = load("train", n=40, cache_dir=tmp_path)
        np.testing.assert_array_equal(images, expected[0])
        with np.load(path) as data:
            np.testing.assert_array_equal(data["labels"], expected[1])


def test_default_cache_dir_follows_course_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    path = svhn_standin.cache_path("train", n=10, seed=3)
    assert path.parent == tmp_path / "svhn_standin" and "train" in path.name and "seed3" in path.name
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert svhn_standin.cache_path("test").parent == tmp_path / "home/.cache/course_utils/svhn_standin"
    assert svhn_standin.cache_path("test").name.endswith(f"n{svhn_standin.DEFAULT_SIZES['test']}.npz")


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=0), "n must be an int >= 1, got 0: pass e.g. n=1000"),
    (dict(n=-5), "n must be an int >= 1"),
    (dict(n=2.5), "n must be an int"),
    (dict(n=10, split="validation"), "Unknown split 'validation': use one of 'train', 'test'"),
    (dict(n=10, seed=1.5), "seed must be an int >= 0, got 1.5: pass e.g. seed=0"),
    (dict(n=10, seed="0"), "seed must be an int"),
    (dict(n=10, seed=-1), "seed must be an int >= 0"),
    (dict(n=10, seed=True), "seed must be an int"),
])
def test_bad_input_says_what_to_do(kwargs, message, tmp_path):
    n = kwargs.pop("n")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        generate(n, **kwargs)
    with pytest.raises(ValueError, match="must be|Unknown split"):
        load(n=n, cache_dir=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())


def test_its_cache_follows_the_course_data_dir_without_importing_datasets():
    """svhn_standin names the variable itself (datasets imports svhn_standin: no cycle); they must agree."""
    import ast
    import inspect

    assert svhn_standin.CACHE_DIR_ENV == DATA_DIR_ENV
    imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(svhn_standin)))
                if isinstance(node, ast.ImportFrom)}
    assert "course_utils.datasets" not in imported
