import keras
import numpy as np
import pytest

from course_utils import checkpoints


def _model(units=2):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(units)], name="tiny")
    return model


def test_latest_checkpoint_orders_by_epoch_number(tmp_path):
    for name in ["ckpt_02.weights.h5", "ckpt_10.weights.h5", "ckpt_09.weights.h5", "notes.txt"]:
        (tmp_path / name).write_bytes(b"x")
    assert checkpoints.latest_checkpoint(tmp_path).name == "ckpt_10.weights.h5"


def test_missing_directory_and_empty_directory(tmp_path):
    with pytest.raises(checkpoints.CheckpointError, match="No checkpoint directory .*Run the training cell"):
        checkpoints.latest_checkpoint(tmp_path / "nope")
    with pytest.raises(checkpoints.CheckpointError, match="No checkpoint matching"):
        checkpoints.latest_checkpoint(tmp_path)


def test_load_round_trip(tmp_path):
    model = _model()
    model.save_weights(tmp_path / "ckpt_01.weights.h5")
    fresh = _model()
    checkpoints.load_weights(fresh, checkpoints.latest_checkpoint(tmp_path))
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_corrupt_missing_and_mismatched_files(tmp_path):
    corrupt = tmp_path / "corrupt.weights.h5"
    corrupt.write_bytes(b"garbage")
    with pytest.raises(checkpoints.CheckpointError, match="corrupt or truncated"):
        checkpoints.load_weights(_model(), corrupt)
    with pytest.raises(checkpoints.CheckpointError, match="does not exist"):
        checkpoints.load_weights(_model(), tmp_path / "missing.weights.h5")
    _model(units=2).save_weights(tmp_path / "two.weights.h5")
    with pytest.raises(checkpoints.CheckpointError, match="other layers"):
        checkpoints.load_weights(_model(units=5), tmp_path / "two.weights.h5")


def test_latest_tf_checkpoint(tmp_path):
    import tensorflow as tf

    with pytest.raises(checkpoints.CheckpointError, match="No tf.train checkpoint"):
        checkpoints.latest_tf_checkpoint(tmp_path)
    step = tf.Variable(0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path), max_to_keep=3)
    manager.save(checkpoint_number=1)
    step.assign(5)
    manager.save(checkpoint_number=2)
    prefix = checkpoints.latest_tf_checkpoint(tmp_path)
    assert prefix.endswith("ckpt-2")
    restored = tf.Variable(0)
    tf.train.Checkpoint(step=restored).restore(prefix).assert_consumed()
    assert int(restored) == 5


def test_same_arrays_compares_the_weights_not_the_files(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.save_weights(tmp_path / "a.weights.h5")
    model.save_weights(tmp_path / "b.weights.h5")  # the same arrays, written again
    assert checkpoints.same_arrays(tmp_path / "a.weights.h5", tmp_path / "b.weights.h5")
    model.layers[0].kernel.assign(model.layers[0].kernel + 1e-7)
    model.save_weights(tmp_path / "c.weights.h5")
    assert not checkpoints.same_arrays(tmp_path / "a.weights.h5", tmp_path / "c.weights.h5")
    with pytest.raises(checkpoints.CheckpointError, match="No weights file"):
        checkpoints.same_arrays(tmp_path / "a.weights.h5", tmp_path / "missing.weights.h5")


def test_fingerprint_tells_equal_weights_from_different_ones():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    first = checkpoints.fingerprint(v.numpy() for v in model.weights)
    assert first == checkpoints.fingerprint([np.array(v.numpy()) for v in model.weights])  # copies: same bytes
    assert len(first) == 12 and int(first, 16) >= 0
    changed = [v.numpy() for v in model.weights]
    changed[1] = changed[1] + np.float32(1e-7)                # one bias moved a little
    assert checkpoints.fingerprint(changed) != first
    assert checkpoints.fingerprint(reversed([v.numpy() for v in model.weights])) != first  # order counts
    # a transposed (non-contiguous) view hashes its values in C order, like its contiguous copy
    kernel = model.weights[0].numpy()
    assert checkpoints.fingerprint([kernel.T]) == checkpoints.fingerprint([np.ascontiguousarray(kernel.T)])
