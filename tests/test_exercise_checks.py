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


def make_evaluate(data, *, scaled=False, compile_it=False, distributed=True):
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

        for batch in strategy.experimental_distribute_dataset(data) if distributed else data:
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


def test_a_test_set_not_distributed_is_caught_though_its_numbers_are_right(strategy, loop):
    model, _, _, data = loop  # every replica evaluates every example: the same mean, twice the work
    with pytest.raises(checks.CheckFailed, match=r"128 predictions for the 64 test examples.*experimental_distribute"):
        checks.check_evaluate(make_evaluate(data, distributed=False), model, strategy, data)
    single = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert "right" in checks.check_evaluate(make_evaluate(data, distributed=False), model, single, data)


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
    manager.save()  # once, after training: the epochs before it are not saved
    with pytest.raises(checks.CheckFailed, match=r"saved 1 time\(s\) in 2 epochs: call manager.save\(\) once"):
        checks.check_loop_trained(model, optimizer, manager, [1.0, 1.0], 2, 4)
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
    left_out = keras.optimizers.Adam()  # built, but not in the checkpoint object: nothing restores it
    left_out.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh).restore(prefix).expect_partial()
    with pytest.raises(checks.CheckFailed, match=r"at step 0: the restore did not reach it.*optimizer=resumed_opt"):
        checks.check_resumed(left_out, prefix, 1)


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



# ---- the tf.data chain (exercise 1) and what each replica trains on (exercise 7)


@pytest.fixture(scope="module")
def stored():
    """A split as datasets.load gives it: uint8 images, labels in stored order (balanced, so runs repeat)."""
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (96, *SHAPE), dtype=np.uint8)
    labels = rng.permutation(np.arange(96) % 10)
    return type("Split", (), {"dataset": tf.data.Dataset.from_tensor_slices((images, labels)), "num_examples": 96})()


def scale(image, label):
    return tf.cast(image, tf.float32) / 255.0, label


def make_dataset_variant(*, batch=GLOBAL_BATCH, scaled=True, drop=True, shuffle=True, shuffle_batches=False,
                         seed=0, test_drop=False):
    """The exercise's make_dataset, or one of the classic wrong ones."""
    def make_dataset(data, training):
        ds = data.dataset.map(scale) if scaled else data.dataset
        if training and shuffle and not shuffle_batches:
            ds = ds.shuffle(1000, seed=seed)
        ds = ds.batch(batch, drop_remainder=drop if training else test_drop)
        return ds.shuffle(100, seed=seed) if training and shuffle_batches else ds
    return make_dataset


def test_the_right_pipeline_passes_and_the_stored_labels_are_read(stored):
    assert "right" in checks.check_pipeline(make_dataset_variant(), stored, stored, GLOBAL_BATCH)
    assert len(checks.stored_labels(stored)) == 96


def test_batches_shuffled_instead_of_examples_are_named_wherever_they_start():
    stored_order = np.arange(64) % 10
    assert "not shuffled" in checks.shuffle_problem(stored_order[:16], stored_order, 16)
    later = checks.shuffle_problem(stored_order[32:48], stored_order, 16)
    assert "from example 32): the batches were shuffled" in later
    assert checks.shuffle_problem(np.random.default_rng(0).permutation(stored_order)[:16], stored_order, 16) is None


@pytest.mark.parametrize("mistake, words", [
    ({"batch": 8}, r"batches of 8 examples, not the global batch of 16: batch by GLOBAL_BATCH"),
    ({"scaled": False}, r"uint8 .*not floats in \[0, 1\]: map pipeline.scale_image"),
    ({"drop": False}, r"drop_remainder=True for training"),
    ({"shuffle": False}, r"not shuffled\. Shuffle before batching"),
    ({"shuffle_batches": True}, r"Shuffle before batching"),  # "not shuffled" when batch 0 comes first
    ({"seed": None}, r"different orders: give the shuffle a seed"),
    ({"test_drop": True}, r"drop_remainder=True dropped the test set's last examples"),
])
def test_each_wrong_pipeline_is_named(stored, mistake, words):
    with pytest.raises(checks.CheckFailed, match=words):
        checks.check_pipeline(make_dataset_variant(**mistake), stored, stored, GLOBAL_BATCH)


def _feed(strategy, stored, how):
    """dist_train as the exercise makes it, or as the classic wrong answers do."""
    make = make_dataset_variant(shuffle=how != "unshuffled")
    if how in ("right", "unshuffled"):
        return strategy.experimental_distribute_dataset(make(stored, True))
    if how == "not distributed":
        return make(stored, True)
    if how == "per-replica batch":
        return strategy.experimental_distribute_dataset(make_dataset_variant(batch=GLOBAL_BATCH // 2)(stored, True))
    if how == "global batch per replica":  # a dataset function that batches by the global batch
        return strategy.distribute_datasets_from_function(lambda ctx: make(stored, True))
    if how == "unscaled":
        return strategy.experimental_distribute_dataset(make_dataset_variant(scaled=False)(stored, True))
    if how == "same data":  # every replica handed the same half of each batch
        batches = list(make(stored, True))
        half = GLOBAL_BATCH // 2
        return [strategy.experimental_distribute_values_from_function(lambda ctx, b=b: (b[0][:half], b[1][:half]))
                for b in batches]
    raise ValueError(how)


def _namespace(feed, step=None):
    """The notebook's globals: train_epoch calls whatever train_step names at call time, as a notebook does."""
    ns = {"train_step": step or (lambda batch: tf.constant(1.0))}

    def train_epoch():
        total, steps = tf.constant(0.0), 0
        for batch in feed:
            total += ns["train_step"](batch)
            steps += 1
        return float(total) / steps, 0.0
    ns["train_epoch"] = train_epoch
    return ns


def test_the_right_feed_passes_and_train_step_is_put_back(strategy, stored):
    ns = _namespace(_feed(strategy, stored, "right"))
    real = ns["train_step"]
    message = checks.check_replicas_fed(ns, strategy, GLOBAL_BATCH, 96 // GLOBAL_BATCH, checks.stored_labels(stored))
    assert "split 2 ways" in message and ns["train_step"] is real


@pytest.mark.parametrize("how, words", [
    ("not distributed", r"not distributed: strategy.run then hands EVERY replica the whole batch.*2 times too large"),
    ("per-replica batch", r"split one global batch of 16 .*batched by PER_REPLICA_BATCH, not by GLOBAL_BATCH"),
    ("global batch per replica", r"each of the 2 replicas got a whole global batch of 16 .*get_per_replica_batch_size"),
    ("same data", r"Every replica got the same 8 examples"),
    ("unscaled", r"not scaled to \[0, 1\]"),
    ("unshuffled", r"not shuffled.*experimental_distribute_dataset"),
])
def test_each_wrong_feed_is_named(strategy, stored, how, words):
    ns = _namespace(_feed(strategy, stored, how))
    with pytest.raises(checks.CheckFailed, match=words):
        checks.check_replicas_fed(ns, strategy, GLOBAL_BATCH, 96 // GLOBAL_BATCH, checks.stored_labels(stored))


def test_a_feed_check_names_an_epoch_that_never_calls_train_step_or_raises(strategy, stored):
    ns = _namespace([])
    ns["train_epoch"] = lambda: (0.0, 0.0)  # an epoch that never calls train_step
    with pytest.raises(checks.CheckFailed, match="never called train_step"):
        checks.check_replicas_fed(ns, strategy, GLOBAL_BATCH, 6)
    ns["train_epoch"] = lambda: undefined_name  # noqa: F821
    with pytest.raises(checks.CheckFailed, match=r"train_epoch\(\), run with a stand-in .* raised NameError"):
        checks.check_replicas_fed(ns, strategy, GLOBAL_BATCH, 6)


def test_a_never_reset_accuracy_is_named_before_the_feed_is_looked_at(strategy, stored, loop):
    model, optimizer, accuracy, data = loop
    step = make_train_step(strategy, model, optimizer, accuracy)
    for _ in range(2):
        for batch in strategy.experimental_distribute_dataset(data):
            step(batch)
    ns = _namespace(_feed(strategy, stored, "right"))
    with pytest.raises(checks.CheckFailed, match=r"counted 128 examples, more than one epoch's 64: reset it"):
        checks.check_replicas_fed(ns, strategy, GLOBAL_BATCH, 6, None, accuracy, 64)


def test_a_step_without_strategy_run_gets_the_fix(strategy, loop):
    model, optimizer, accuracy, data = loop

    @tf.function
    def train_step(batch):  # the replica step called directly on per-replica values
        images, labels = batch
        return tf.reduce_mean(model(images))
    with pytest.raises(checks.CheckFailed, match=r"raised ValueError: it was called on per-replica values .*"
                                                 r"strategy.run\(replica_step, args=batch\)"):
        checks.check_train_step(train_step, model, optimizer, strategy, data, accuracy)
