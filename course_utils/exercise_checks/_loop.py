"""Checks of the custom-loop exercises: the per-replica loss, the distributed training step (run on one
batch and undone), the distributed test step against the model's own numbers, and the epoch loop."""

from __future__ import annotations

import numpy as np

from ._answers import CheckFailed, student_error
from ._disk import check_restored, remember_trained

SCALE_FIX = ("Divide the sum of the per-example losses by the GLOBAL batch: tf.nn.compute_average_loss("
             "per_example_loss(labels, logits), global_batch_size=GLOBAL_BATCH), with a loss built with "
             "reduction=None.")


def cross_entropy(labels, logits) -> np.ndarray:
    """Per-example sparse cross-entropy of logits, in NumPy (the checks' own reference)."""
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels).astype(int)
    top = logits.max(1)
    return top + np.log(np.exp(logits - top[:, None]).sum(1)) - logits[np.arange(len(labels)), labels]


def _close(a: float, b: float, rtol: float = 1e-4) -> bool:
    return bool(np.isclose(a, b, rtol=rtol, atol=1e-7))


def check_loss_scaling(compute_loss, strategy, global_batch: int, num_classes: int = 10, seed: int = 0) -> str:
    """``compute_loss(labels, logits)``, run on each replica with its share of a global batch and summed
    over the replicas, must equal the mean sparse cross-entropy over the whole global batch."""
    import tensorflow as tf  # noqa: PLC0415

    replicas = strategy.num_replicas_in_sync
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(global_batch, num_classes)).astype(np.float32)
    labels = rng.integers(0, num_classes, global_batch)
    labels[: global_batch // 2] = 0  # replicas get different losses, so per-replica means differ from the mean
    per_example = cross_entropy(labels, logits)
    want = float(per_example.mean())
    share = global_batch // replicas

    def shard(context):
        i = context.replica_id_in_sync_group
        return tf.constant(labels[i * share:(i + 1) * share]), tf.constant(logits[i * share:(i + 1) * share])

    shards = strategy.experimental_distribute_values_from_function(shard)
    try:
        results = strategy.experimental_local_results(strategy.run(lambda y, z: compute_loss(y, z), args=shards))
    except Exception as err:
        raise student_error(err, "compute_loss(labels, logits) on each replica") from err
    shapes = {tuple(np.shape(r)) for r in results}
    if shapes != {()}:
        raise CheckFailed(f"compute_loss returns values of shape {sorted(shapes)[0]} on each replica (one per "
                          f"example?), not one number. {SCALE_FIX}")
    got = float(sum(float(r) for r in results))
    if _close(got, want):
        return f"summed over {replicas} replicas the loss is {got:.5f}, the global-batch mean: right"
    means = [per_example[i * share:(i + 1) * share].mean() for i in range(replicas)]
    if replicas > 1 and _close(got, float(np.sum(means))):
        raise CheckFailed(
            f"Summed over the {replicas} replicas your loss is {got:.4f}, {replicas} times the mean over the global "
            f"batch ({want:.4f}): each replica divided by its own {share} examples (tf.reduce_mean, or "
            f"global_batch_size=PER_REPLICA_BATCH). {SCALE_FIX}")
    if _close(got, float(per_example.sum())):
        raise CheckFailed(f"Your loss is the sum over the global batch ({got:.4f}), not its mean ({want:.4f}): "
                          "divide by GLOBAL_BATCH (tf.nn.compute_average_loss does).")
    raise CheckFailed(f"Summed over the replicas your loss is {got:.4f}, but the mean over the global batch is "
                      f"{want:.4f}. Use the per-example sparse cross-entropy (from_logits=True). {SCALE_FIX}")


def _step_loss_verdict(got, want: float, replicas: int) -> None:
    import tensorflow as tf  # noqa: PLC0415

    if got is None:
        raise CheckFailed("train_step returned None: return the loss summed over the replicas, "
                          "strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None).")
    if isinstance(got, tf.distribute.DistributedValues):
        raise CheckFailed("train_step returns per-replica values (what strategy.run gives): combine them into one "
                          "number with strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None).")
    if np.shape(got) != ():
        raise CheckFailed(f"train_step returns values of shape {np.shape(got)}, not one number: reduce the "
                          "per-replica losses with axis=None.")
    got = float(got)
    if _close(got, want, 1e-3):
        return
    if replicas > 1 and _close(got, want / replicas, 1e-3):
        raise CheckFailed(
            f"train_step returned {got:.4f}, 1/{replicas} of the batch's loss ({want:.4f}): strategy.reduce with MEAN "
            "averages the replicas' losses, each already divided by the global batch. Reduce with "
            "tf.distribute.ReduceOp.SUM.")
    if replicas > 1 and _close(got, want * replicas, 2e-2):
        raise CheckFailed(
            f"train_step returned {got:.4f}, about {replicas} times the batch's loss ({want:.4f}): each replica's loss "
            "was divided by its own share of the batch, not by the global batch (exercise 5's check names the fix).")
    raise CheckFailed(f"train_step returned {got:.4f}, but the loss of the batch it trained on is {want:.4f} (mean "
                      "cross-entropy over the global batch). Return strategy.reduce(SUM, ...) of compute_loss's "
                      "per-replica values, computed from the model's logits on that batch.")


def check_train_step(train_step, model, optimizer, strategy, dataset, accuracy=None) -> str:
    """``train_step(distributed_batch)`` trains ``model`` on one global batch of ``dataset`` and returns its
    loss (the mean cross-entropy over the global batch); ``accuracy``, if given, counts the batch's examples.
    The step is undone afterwards: weights, optimizer state and the metric are put back."""
    import tensorflow as tf  # noqa: PLC0415

    images, labels = next(iter(dataset))
    want = float(cross_entropy(labels.numpy(), model(images, training=True).numpy()).mean())
    weights = [np.array(w) for w in model.weights]
    before = {id(v): np.array(v) for v in optimizer.variables}
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors((images, labels)))))
    try:
        try:
            got = train_step(batch)
        except Exception as err:
            raise student_error(err, "train_step(batch), run on one distributed batch") from err
        _step_loss_verdict(got, want, strategy.num_replicas_in_sync)
        if all(np.array_equal(np.array(w), b) for w, b in zip(model.weights, weights)):
            raise CheckFailed("train_step did not change the weights: in the replica step, compute the gradients "
                              "with a GradientTape and apply them with optimizer.apply_gradients.")
        counted = _count(accuracy) if accuracy is not None else len(labels)
        if counted != len(labels):
            raise CheckFailed(f"The training accuracy counted {counted} examples in one step of {len(labels)}: "
                              "update it in the replica step, with that replica's labels and logits "
                              "(train_accuracy.update_state(labels, logits)).")
    finally:  # undo the step: the loop starts from where it would have
        for w, b in zip(model.weights, weights):
            w.assign(b)
        for v in optimizer.variables:
            v.assign(before.get(id(v), np.zeros(v.shape, v.dtype)))
        if accuracy is not None:
            accuracy.reset_state()
    return (f"train_step returns the batch's loss ({want:.4f}), summed over {strategy.num_replicas_in_sync} "
            "replicas, and updates the weights: right (the step was undone)")


def _count(metric) -> int:
    """The examples a Keras mean metric has counted, summed over the replicas (a metric made in a
    strategy's scope keeps a per-replica count that reading aggregates)."""
    count = getattr(metric.count, "value", metric.count)
    return int(float(count.read_value()))


def _reference(model, dataset) -> tuple[float, float, int]:
    losses, correct = [], []
    for images, labels in dataset:
        logits = model(images, training=False).numpy()
        losses.append(cross_entropy(labels.numpy(), logits))
        correct.append(logits.argmax(1) == labels.numpy())
    losses, correct = np.concatenate(losses), np.concatenate(correct)
    return float(losses.mean()), float(correct.mean()), len(losses)


class _Counting:
    """A model as ``evaluate`` calls it, counting the examples it is called on, summed over the replicas (a
    sync-on-read variable made in the strategy's scope); anything else is the model's own."""

    def __init__(self, model, strategy):
        import tensorflow as tf  # noqa: PLC0415

        self._model = model
        with strategy.scope():
            self._seen = tf.Variable(0.0, trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                                     aggregation=tf.VariableAggregation.SUM)

    def __call__(self, images, *args, **kwargs):
        import tensorflow as tf  # noqa: PLC0415

        self._seen.assign_add(tf.cast(tf.shape(images)[0], tf.float32))
        return self._model(images, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)

    @property
    def seen(self) -> int:
        return int(float(self._seen.read_value()))


def check_evaluate(evaluate, model, strategy, dataset) -> str:
    """``evaluate(model, strategy)`` returns ``{"loss": ..., "accuracy": ...}`` equal to the mean test
    cross-entropy and accuracy of ``model`` on ``dataset``, computed here without any strategy, and its
    replicas together saw each test example once (a test set not distributed gives every replica all of it)."""
    want_loss, want_accuracy, n = _reference(model, dataset)
    compiled = getattr(model, "compiled", False)
    counting = _Counting(model, strategy)
    try:
        result = evaluate(counting, strategy)
    except Exception as err:
        raise student_error(err, "evaluate(model, strategy)") from err
    replicas = strategy.num_replicas_in_sync
    if replicas > 1 and counting.seen == replicas * n:
        raise CheckFailed(
            f"evaluate's replicas computed {counting.seen} predictions for the {n} test examples: every replica got "
            "every test batch, so each example was evaluated once per replica (the test set was not distributed). "
            "Loop over strategy.experimental_distribute_dataset(test_ds) and run the replica step with strategy.run.")
    if getattr(model, "compiled", False) and not compiled:
        raise CheckFailed("evaluate compiled the model (Keras' evaluate): write the test step yourself, as the "
                          "loop trains: metrics created in strategy.scope(), a step run with strategy.run.")
    try:
        loss, accuracy = float(result["loss"]), float(result["accuracy"])
    except (TypeError, KeyError, ValueError):
        raise CheckFailed(f"evaluate returned {result!r}: return a dict {{'loss': ..., 'accuracy': ...}} of "
                          "numbers, e.g. float(test_loss.result()).") from None
    if abs(accuracy - want_accuracy) > 1.5 / n:
        raise CheckFailed(
            f"evaluate's accuracy is {accuracy:.4f}, the model's on the {n} test examples is {want_accuracy:.4f}: "
            "update a SparseCategoricalAccuracy (created in the strategy's scope) with every replica's labels and "
            "logits, over every batch, and return its result().")
    if not _close(loss, want_loss, 1e-3):
        scaled = replicas > 1 and _close(loss * replicas, want_loss, 2e-2)
        raise CheckFailed(
            f"evaluate's loss is {loss:.4f}, the mean cross-entropy of the model on the test set is {want_loss:.4f}"
            + (f", about {replicas} times yours: the per-replica losses were divided by the global batch "
               "(compute_loss) and then averaged." if scaled else ".")
            + " A test loss is the mean of the per-example losses: feed per_example_loss(labels, logits) to a "
              "keras.metrics.Mean in the replica's test step.")
    return f"evaluate: loss {loss:.4f}, accuracy {accuracy:.4f}, those of the model on the {n} test examples: right"


def check_loop_trained(model, optimizer, manager, loop_rates, epochs: int, steps_per_epoch: int,
                       accuracy=None, examples_per_epoch: int | None = None) -> str:
    """The epoch loop ran every step of ``epochs`` epochs, recorded one rate per epoch, and its latest
    checkpoint holds the final weights; ``accuracy`` (the training metric), if given, was reset every
    epoch (it holds at most ``examples_per_epoch`` examples)."""
    steps = int(optimizer.iterations.numpy())
    if steps != epochs * steps_per_epoch:
        raise CheckFailed(f"The optimizer took {steps} steps; {epochs} epochs x {steps_per_epoch} steps = "
                          f"{epochs * steps_per_epoch}. Run train_step on every batch of the distributed dataset, "
                          "once per epoch, and run the loop cell once (re-running it trains further).")
    if len(loop_rates) != epochs:
        raise CheckFailed(f"loop_rates holds {len(loop_rates)} values: append one (images/s of that epoch) per epoch.")
    _check_reset(accuracy, examples_per_epoch)
    if manager.latest_checkpoint is None:
        raise CheckFailed("The manager saved nothing: call manager.save() at the end of every epoch.")
    saves = manager.latest_checkpoint.rsplit("-", 1)[-1]
    if saves.isdigit() and int(saves) != epochs:
        raise CheckFailed(f"The manager saved {int(saves)} time(s) in {epochs} epochs: call manager.save() once at the "
                          "end of every epoch, inside the epoch loop.")
    try:
        check_restored(model, manager.latest_checkpoint)
    except CheckFailed:
        raise CheckFailed(f"The latest checkpoint, {manager.latest_checkpoint}, does not hold the final weights: "
                          "call manager.save() after every epoch, the last one included.") from None
    remember_trained(model)
    return f"{epochs} epochs of {steps_per_epoch} steps, the last saved at {manager.latest_checkpoint}: right"


def _check_reset(accuracy, examples_per_epoch) -> None:
    if accuracy is not None and examples_per_epoch and (counted := _count(accuracy)) > examples_per_epoch:
        raise CheckFailed(f"The training accuracy has counted {counted} examples, more than one epoch's "
                          f"{examples_per_epoch}: reset it every epoch (train_accuracy.reset_state()), or each "
                          "epoch's accuracy includes the earlier epochs'.")
