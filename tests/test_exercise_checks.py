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
    with pytest.raises(checks.CheckFailed,
                       match=r"in no strategy's scope.*not in strategy's \(MirroredStrategy.*with strategy.scope"):
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
    by_hand = lambda y, z: tf.reduce_sum(per_example(y, z)) / GLOBAL_BATCH  # noqa: E731
    assert "right" in checks.check_loss_scaling(by_hand, strategy, GLOBAL_BATCH)


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


# ---- the answers the exercise's check cells meet: unanswered, other strategies, the student's own errors


def test_an_unanswered_exercise_says_so_and_renders_as_its_message_alone():
    with pytest.raises(checks.CheckFailed, match=r"Exercise 3 is not answered yet: `model`, `fit_metrics` are") as err:
        checks.require({"x": 1}, 3, "x", "model", "fit_metrics")
    assert err.value._render_traceback_()[0].startswith("CheckFailed: Exercise 3 is not answered yet")
    checks.require({"model": 1}, 2, "model")  # defined: nothing to say


def test_an_error_in_the_students_code_becomes_a_message_with_a_hint():
    def replica_step(images, labels):
        return images

    try:
        replica_step((1, 2))
    except TypeError as err:
        message = str(checks.student_error(err, "train_step(batch)"))
    assert "train_step(batch) raised TypeError" in message and "args=batch" in message and "args=(batch,)" in message


def test_the_scope_message_names_the_exercises_strategy_and_where_the_weights_were_made(strategy):
    single = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        in_mirrored = models.build_cnn()
    with pytest.raises(checks.CheckFailed, match=r"in the scope of another strategy, a MirroredStrategy with 2.*"
                                                 r"inside `with single.scope\(\):`"):
        checks.check_built_in_scope(in_mirrored, single, "single_model", "single")
    with single.scope():
        assert "single_model created in single's scope (OneDeviceStrategy)" in checks.check_built_in_scope(
            models.build_cnn(), single, "single_model", "single")


def test_a_saved_file_is_checked_as_saved_with_saving_advice(tmp_path, trained):
    model, folder, _ = trained
    assert "saved" in checks.check_saved(model, folder / "fit.weights.h5", "Use ModelCheckpoint.")
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "ckpt_01.weights.h5").write_bytes(b"x")
    with pytest.raises(checks.CheckFailed, match=r"Nothing was saved at .*ckpt_02.* holds ckpt_01.weights.h5\)\. Use"):
        checks.check_saved(model, tmp_path / "fit" / "ckpt_02.weights.h5", "Use ModelCheckpoint.")
    with pytest.raises(checks.CheckFailed, match="does not exist"):
        checks.check_saved(model, tmp_path / "nowhere" / "a.weights.h5", "Use ModelCheckpoint.")
    keras.callbacks.ModelCheckpoint(str(tmp_path / "whole.weights.h5"))  # Keras accepts the name without weights_only
    model.save(tmp_path / "whole.weights.h5")  # ... and writes a whole model in legacy HDF5
    with pytest.raises(checks.CheckFailed, match=r"whole model in the legacy HDF5 format.*save_weights_only=True"):
        checks.check_saved(model, tmp_path / "whole.weights.h5", "Use ModelCheckpoint.")


def test_a_loss_returned_per_example_is_named(strategy):
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    with pytest.raises(checks.CheckFailed, match=r"shape \(8,\) on each replica \(one per example\?\), not one"):
        checks.check_loss_scaling(lambda y, z: per_example(y, z), strategy, GLOBAL_BATCH)
    with pytest.raises(checks.CheckFailed, match=r"compute_loss\(labels, logits\) on each replica raised NameError"):
        checks.check_loss_scaling(lambda y, z: undefined_name, strategy, GLOBAL_BATCH)  # noqa: F821


# ---- the custom loop: the distributed step, the test step, the epoch loop

SHAPE = (8, 8, 1)


@pytest.fixture
def loop(strategy):
    """The exercise's loop pieces, small: a model, Adam, a training accuracy, a dataset of global batches."""
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = models.build_cnn(SHAPE, 10)
        optimizer = keras.optimizers.Adam()
        accuracy = keras.metrics.SparseCategoricalAccuracy()
    rng = np.random.default_rng(0)
    data = tf.data.Dataset.from_tensor_slices((rng.random((64, *SHAPE), np.float32), rng.integers(0, 10, 64)))
    return model, optimizer, accuracy, data.batch(GLOBAL_BATCH, drop_remainder=True)


def make_train_step(strategy, model, optimizer, accuracy, *, reduce_op="SUM", args_tuple=False, reduce=True,
                    apply=True, count=True, per_replica_mean=False, one_argument=False):
    """The solution's train_step, or one of the classic wrong ones."""
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            losses = per_example(labels, logits)
            loss = tf.reduce_mean(losses) if per_replica_mean else tf.nn.compute_average_loss(
                losses, global_batch_size=GLOBAL_BATCH)
        if apply:
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        if count:
            accuracy.update_state(labels, logits)
        return loss

    @tf.function
    def train_step(batch):
        if one_argument:  # notebook 03's way: the replica step takes the batch, args=(batch,)
            return strategy.reduce(reduce_op, strategy.run(lambda b: replica_step(*b), args=(batch,)), axis=None)
        per_replica = strategy.run(replica_step, args=(batch,) if args_tuple else batch)
        return strategy.reduce(reduce_op, per_replica, axis=None) if reduce else per_replica
    return train_step


def test_the_right_train_step_passes_and_is_undone(strategy, loop):
    model, optimizer, accuracy, data = loop
    assert "right" in checks.check_train_step(make_train_step(strategy, model, optimizer, accuracy, one_argument=True),
                                              model, optimizer, strategy, data, accuracy)
    before = [np.array(w) for w in model.weights]
    message = checks.check_train_step(make_train_step(strategy, model, optimizer, accuracy), model, optimizer,
                                      strategy, data, accuracy)
    assert "right (the step was undone)" in message
    assert all(np.array_equal(np.array(w), b) for w, b in zip(model.weights, before))
    assert int(optimizer.iterations.numpy()) == 0 and all(not np.any(np.array(v)) for v in optimizer.variables[2:])
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(0.001), "the learning rate is not zeroed"
    assert float(accuracy.result()) == 0


@pytest.mark.parametrize("mistake, words", [
    ({"reduce_op": "MEAN"}, r"1/2 of the batch's loss .*Reduce with tf.distribute.ReduceOp.SUM"),
    ({"reduce": False}, r"per-replica values .*strategy.reduce"),
    ({"args_tuple": True}, r"raised TypeError.*args=batch"),
    ({"apply": False}, r"did not change the weights.*apply_gradients"),
    ({"count": False}, r"training accuracy counted 0 examples in one step of 16"),
    ({"per_replica_mean": True}, r"about 2 times the batch.s loss .*divided by its own share"),
])
def test_each_wrong_train_step_is_named_and_undone(strategy, loop, mistake, words):
    model, optimizer, accuracy, data = loop
    before = [np.array(w) for w in model.weights]
    with pytest.raises(checks.CheckFailed, match=words):
        checks.check_train_step(make_train_step(strategy, model, optimizer, accuracy, **mistake), model, optimizer,
                                strategy, data, accuracy)
    assert all(np.array_equal(np.array(w), b) for w, b in zip(model.weights, before))


def make_evaluate(data, *, scaled=False, compile_it=False):
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def evaluate(model, strategy):
        if compile_it:
            with strategy.scope():
                model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
            return model.evaluate(data, verbose=0, return_dict=True)
        with strategy.scope():
            loss, accuracy = keras.metrics.Mean(), keras.metrics.SparseCategoricalAccuracy()

        def replica_step(images, labels):
            logits = model(images, training=False)
            losses = per_example(labels, logits)
            loss.update_state(tf.nn.compute_average_loss(losses, global_batch_size=GLOBAL_BATCH) if scaled else losses)
            accuracy.update_state(labels, logits)

        for batch in strategy.experimental_distribute_dataset(data):
            strategy.run(replica_step, args=batch)
        return {"loss": float(loss.result()), "accuracy": float(accuracy.result())}
    return evaluate


def test_evaluate_right_and_wrong(strategy, loop):
    model, _, _, data = loop
    uneven = data.unbatch().take(61).batch(GLOBAL_BATCH)  # a last batch of 13: the replicas get 7 and 6
    assert "right" in checks.check_evaluate(make_evaluate(uneven), model, strategy, uneven)
    with pytest.raises(checks.CheckFailed, match=r"about 2 times yours.*keras.metrics.Mean"):
        checks.check_evaluate(make_evaluate(data, scaled=True), model, strategy, data)
    with pytest.raises(checks.CheckFailed, match=r"returned .*return a dict"):
        checks.check_evaluate(lambda m, s: 0.5, model, strategy, data)
    with pytest.raises(checks.CheckFailed, match="evaluate compiled the model"):
        checks.check_evaluate(make_evaluate(data, compile_it=True), model, strategy, data)


def test_the_epoch_loop_ran_every_step_and_saved_the_end(tmp_path, strategy, loop):
    model, optimizer, accuracy, data = loop
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2)
    with pytest.raises(checks.CheckFailed, match=r"took 0 steps; 2 epochs x 4 steps = 8"):
        checks.check_loop_trained(model, optimizer, manager, [], epochs=2, steps_per_epoch=4)
    step = make_train_step(strategy, model, optimizer, accuracy)
    for _ in range(2):
        for batch in strategy.experimental_distribute_dataset(data):
            step(batch)
    with pytest.raises(checks.CheckFailed, match="The manager saved nothing"):
        checks.check_loop_trained(model, optimizer, manager, [1.0, 1.0], epochs=2, steps_per_epoch=4)
    manager.save()
    assert "2 epochs of 4 steps" in checks.check_loop_trained(model, optimizer, manager, [1.0, 1.0], 2, 4)
    with pytest.raises(checks.CheckFailed, match="from_loop is the model that was trained"):
        checks.check_from_disk(model, manager.latest_checkpoint, "from_loop")


def test_a_resumed_optimizer_holds_the_step_and_the_moments(trained):
    model, folder, prefix = trained
    with pytest.raises(checks.CheckFailed, match="The checkpoint path is None.*manager.save"):
        checks.check_resumed(keras.optimizers.Adam(), None, 1)
    unbuilt = keras.optimizers.Adam()
    tf.train.Checkpoint(model=models.build_cnn((32, 32, 3), 10), optimizer=unbuilt).restore(prefix)
    with pytest.raises(checks.CheckFailed, match="was not built before the restore"):
        checks.check_resumed(unbuilt, prefix, 1)
    fresh = models.build_cnn((32, 32, 3), 10)
    resumed = keras.optimizers.Adam()
    resumed.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=resumed).restore(prefix).assert_consumed()
    assert "resumes at step 1 with its 16 moments" in checks.check_resumed(resumed, prefix, 1)
    with pytest.raises(checks.CheckFailed, match="is at step 1, but the loop's last checkpoint holds step 5"):
        checks.check_resumed(resumed, prefix, 5)


def test_a_training_accuracy_never_reset_is_named(strategy, loop, tmp_path):
    model, optimizer, accuracy, data = loop
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=optimizer), str(tmp_path), 1)
    step = make_train_step(strategy, model, optimizer, accuracy)
    for _ in range(2):  # two epochs, the metric never reset
        for batch in strategy.experimental_distribute_dataset(data):
            step(batch)
    manager.save()
    with pytest.raises(checks.CheckFailed, match=r"counted 128 examples, more than one epoch's 64: reset it"):
        checks.check_loop_trained(model, optimizer, manager, [1.0, 1.0], 2, 4, accuracy, 64)
    accuracy.reset_state()
    assert "right" in checks.check_loop_trained(model, optimizer, manager, [1.0, 1.0], 2, 4, accuracy, 64)
