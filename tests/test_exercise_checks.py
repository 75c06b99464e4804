"""The exercise's checks pass right answers and catch each classic wrong answer with a helpful message."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from course_utils import exercise_checks as checks
from course_utils import models

GLOBAL_BATCH = 16


@pytest.fixture(scope="module")
def strategy():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())


def test_global_batch_right_and_wrong(strategy):
    data = tf.data.Dataset.range(64).batch(GLOBAL_BATCH)
    assert "right" in checks.check_global_batch(GLOBAL_BATCH, 8, strategy, data)
    with pytest.raises(checks.CheckFailed, match=r"2 replicas x 8 examples per replica = 16.*num_replicas_in_sync"):
        checks.check_global_batch(8, 8, strategy)  # the per-replica batch used as the global one
    with pytest.raises(checks.CheckFailed, match="first batch has 8 examples, not the global batch of 16"):
        checks.check_global_batch(GLOBAL_BATCH, 8, strategy, tf.data.Dataset.range(64).batch(8))


def test_model_built_outside_the_scope_is_caught(strategy):
    with strategy.scope():
        inside = models.build_cnn()
    assert "right" in checks.check_built_in_scope(inside, strategy)
    with pytest.raises(checks.CheckFailed, match=r"not created in this strategy's scope.*with strategy.scope"):
        checks.check_built_in_scope(models.build_cnn(), strategy)
    with pytest.raises(checks.CheckFailed, match="no weights yet"):
        checks.check_built_in_scope(keras.Sequential([keras.layers.Dense(3)]), strategy)


def test_loss_scaling_right_answers_pass(strategy):
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def right(labels, logits):
        return tf.nn.compute_average_loss(per_example(labels, logits), global_batch_size=GLOBAL_BATCH)

    assert "right" in checks.check_loss_scaling(right, strategy, GLOBAL_BATCH)
    keras_default = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # divides by the replicas itself
    assert "right" in checks.check_loss_scaling(lambda y, z: keras_default(y, z), strategy, GLOBAL_BATCH)


def test_loss_averaged_per_replica_is_caught(strategy):
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    with pytest.raises(checks.CheckFailed, match=r"2 times the mean.*tf.reduce_mean.*compute_average_loss"):
        checks.check_loss_scaling(lambda y, z: tf.reduce_mean(per_example(y, z)), strategy, GLOBAL_BATCH)
    with pytest.raises(checks.CheckFailed, match="the sum over the global batch"):
        checks.check_loss_scaling(lambda y, z: tf.reduce_sum(per_example(y, z)), strategy, GLOBAL_BATCH)
    with pytest.raises(checks.CheckFailed, match="mean over the global batch is"):  # divided by the wrong batch
        checks.check_loss_scaling(lambda y, z: tf.nn.compute_average_loss(per_example(y, z), global_batch_size=64),
                                  strategy, GLOBAL_BATCH)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A CNN after one step, saved three ways."""
    folder = tmp_path_factory.mktemp("ckpt")
    model = models.build_cnn((32, 32, 3), 10)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(np.random.rand(8, 32, 32, 3), np.arange(8) % 10, verbose=0)
    model.save_weights(folder / "fit.weights.h5")
    model.save(folder / "fit.keras")
    prefix = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(folder / "loop" / "ckpt"))
    return model, folder, prefix


def _unbuilt():
    return keras.Sequential([keras.layers.Conv2D(32, 3, activation="relu"),
                             keras.layers.Conv2D(64, 3, activation="relu"),
                             keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])


def test_restored_models_pass_for_every_format(trained):
    model, folder, prefix = trained
    for path in (folder / "fit.weights.h5", folder / "fit.keras", prefix, folder / "loop"):
        assert "restored" in checks.check_restored(model, path)
    fresh = models.build_cnn((32, 32, 3), 10)
    tf.train.Checkpoint(model=fresh).restore(prefix).expect_partial()
    assert "restored" in checks.check_restored(fresh, prefix)


def test_restore_into_an_unbuilt_model_is_caught(trained):
    _, _, prefix = trained
    unbuilt = _unbuilt()
    status = tf.train.Checkpoint(model=unbuilt).restore(prefix).expect_partial()
    status.assert_existing_objects_matched()  # the trap: passes, with nothing to match
    with pytest.raises(checks.CheckFailed, match=r"never built.*Build the model first"):
        checks.check_restored(unbuilt, prefix)


def test_a_model_that_was_not_restored_is_caught(trained):
    _, _, prefix = trained
    with pytest.raises(checks.CheckFailed, match=r"8 of the model.s 8 weights .* are not in the checkpoint"):
        checks.check_restored(models.build_cnn((32, 32, 3), 10), prefix)


def test_missing_empty_and_corrupt_checkpoints_get_a_clear_message(tmp_path, trained):
    model = trained[0]
    with pytest.raises(checks.CheckFailed, match="no checkpoint at"):
        checks.check_restored(model, tmp_path / "nothing.weights.h5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(checks.CheckFailed, match="Cannot read a checkpoint"):
        checks.check_restored(model, tmp_path / "empty")
    (tmp_path / "bad.keras").write_bytes(b"not a zip file")
    with pytest.raises(checks.CheckFailed, match="Cannot read a checkpoint.*BadZipFile"):
        checks.check_restored(model, tmp_path / "bad.keras")
