"""Checks a student runs on an exercise's answers: each passes on a right answer and fails on the classic
wrong ones with a message that says what is wrong and how to fix it.

- :func:`check_global_batch`: the global batch is the per-replica batch times the replicas, and the
  dataset is batched by it;
- :func:`check_built_in_scope`: the model's variables were created in ``strategy.scope()``;
- :func:`check_loss_scaling`: a per-replica loss, summed over the replicas, is the mean over the
  *global* batch (not the mean of each replica's own batch, as ``tf.reduce_mean`` gives);
- :func:`check_restored`: a model holds the weights of a checkpoint (``tf.train.Checkpoint``,
  ``.weights.h5`` or ``.keras``); an unbuilt model, whose restore is deferred, fails it.

A failed check raises :class:`CheckFailed` (an ``AssertionError``, as autograders expect).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np


class CheckFailed(AssertionError):
    """An answer is wrong; the message says why and what to do."""


def check_global_batch(global_batch: int, per_replica_batch: int, strategy, dataset=None) -> str:
    """``global_batch == per_replica_batch * strategy.num_replicas_in_sync``, and ``dataset`` (if given,
    before distribution) yields batches of ``global_batch`` examples."""
    replicas = strategy.num_replicas_in_sync
    if global_batch != per_replica_batch * replicas:
        raise CheckFailed(
            f"The global batch is {global_batch}, but {replicas} replicas x {per_replica_batch} examples per "
            f"replica = {per_replica_batch * replicas}. Set GLOBAL_BATCH = PER_REPLICA_BATCH * "
            "strategy.num_replicas_in_sync: every step, each replica takes its share of one global batch.")
    if dataset is not None:
        first = next(iter(dataset))
        size = int((first[0] if isinstance(first, (tuple, list)) else first).shape[0])
        if size != global_batch:
            raise CheckFailed(
                f"The dataset's first batch has {size} examples, not the global batch of {global_batch}. "
                "Batch the dataset with GLOBAL_BATCH before distributing it: fit and "
                "experimental_distribute_dataset split each global batch across the replicas.")
    return f"global batch {global_batch} = {replicas} replicas x {per_replica_batch}: right"


def check_built_in_scope(model, strategy) -> str:
    """Every weight of ``model`` was created under ``strategy.scope()``."""
    if not model.weights:
        raise CheckFailed(f"Model {model.name!r} has no weights yet: build it inside strategy.scope() "
                          "(give it a keras.Input, or call it on a batch there).")
    outside = [w.path for w in model.weights if not strategy.extended.variable_created_in_scope(_tf_variable(w))]
    if outside:
        raise CheckFailed(
            f"{len(outside)} of the model's {len(model.weights)} weights (e.g. {outside[0]}) were not created in "
            f"this strategy's scope, so they are not mirrored across its {strategy.num_replicas_in_sync} "
            "replicas. Build (and compile) the model inside `with strategy.scope():`.")
    return f"all {len(model.weights)} weights created in the strategy's scope: right"


def _tf_variable(weight):
    return getattr(weight, "value", weight)  # a Keras 3 Variable holds the tf.Variable in .value


def check_loss_scaling(compute_loss, strategy, global_batch: int, num_classes: int = 10, seed: int = 0) -> str:
    """``compute_loss(labels, logits)``, run on each replica with its share of a global batch and summed
    over the replicas, must equal the mean sparse cross-entropy over the whole global batch."""
    import tensorflow as tf  # noqa: PLC0415

    replicas = strategy.num_replicas_in_sync
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(global_batch, num_classes)).astype(np.float32)
    labels = rng.integers(0, num_classes, global_batch)
    labels[: global_batch // 2] = 0  # replicas get different losses, so per-replica means differ from the mean
    top = logits.max(1)  # per-example cross-entropy: log-sum-exp of the logits minus the label's logit
    per_example = top + np.log(np.exp(logits - top[:, None]).sum(1)) - logits[np.arange(global_batch), labels]
    want = float(per_example.mean())
    share = global_batch // replicas

    def shard(context):
        i = context.replica_id_in_sync_group
        return tf.constant(labels[i * share:(i + 1) * share]), tf.constant(logits[i * share:(i + 1) * share])

    shards = strategy.experimental_distribute_values_from_function(shard)
    got = float(strategy.reduce("SUM", strategy.run(lambda y, z: compute_loss(y, z), args=shards), axis=None))
    if np.isclose(got, want, rtol=1e-4):
        return f"summed over {replicas} replicas the loss is {got:.5f}, the global-batch mean: right"
    means = [per_example[i * share:(i + 1) * share].mean() for i in range(replicas)]
    if replicas > 1 and np.isclose(got, float(np.sum(means)), rtol=1e-4):
        raise CheckFailed(
            f"Summed over the {replicas} replicas your loss is {got:.4f}, {replicas} times the mean over the global "
            f"batch ({want:.4f}): each replica averaged over its own {share} examples (tf.reduce_mean). Divide the "
            "sum of the per-example losses by the GLOBAL batch instead: tf.nn.compute_average_loss(per_example, "
            "global_batch_size=GLOBAL_BATCH), with a loss built with reduction=None.")
    if np.isclose(got, float(per_example.sum()), rtol=1e-4):
        raise CheckFailed(f"Your loss is the sum over the global batch ({got:.4f}), not its mean ({want:.4f}): "
                          "divide by GLOBAL_BATCH (tf.nn.compute_average_loss does).")
    raise CheckFailed(f"Summed over the replicas your loss is {got:.4f}, but the mean over the global batch is "
                      f"{want:.4f}. Use the per-example sparse cross-entropy (from_logits=True) and "
                      "tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH).")


def checkpoint_arrays(path) -> list[np.ndarray]:
    """Every array stored in a checkpoint: a ``tf.train.Checkpoint`` (its prefix or directory), a
    ``.weights.h5`` file or a ``.keras`` archive. Raises :class:`CheckFailed` when there is none."""
    path = Path(path)
    name = str(path)
    try:
        if name.endswith(".keras"):
            with zipfile.ZipFile(path) as archive, archive.open("model.weights.h5") as f:
                return _h5_arrays(f)
        if name.endswith(".h5"):
            with open(path, "rb") as f:
                return _h5_arrays(f)
        import tensorflow as tf  # noqa: PLC0415

        reader = tf.train.load_checkpoint(name)
        return [reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
                if key.endswith("VARIABLE_VALUE")]
    except Exception as err:  # OSError, zipfile.BadZipFile, tf.errors.DataLossError, ...
        raise CheckFailed(f"Cannot read a checkpoint at {path} ({type(err).__name__}: {err}). Is the path right, "
                          "and did the training that writes it finish?") from err


def _h5_arrays(f) -> list[np.ndarray]:
    import h5py  # noqa: PLC0415  (Keras' dependency)

    found: list[np.ndarray] = []
    with h5py.File(f, "r") as h5:
        h5.visititems(lambda _, item: found.append(item[()]) if isinstance(item, h5py.Dataset) else None)
    return found


def check_restored(model, checkpoint) -> str:
    """Every weight of ``model`` equals an array stored in ``checkpoint`` (a path, see :func:`checkpoint_arrays`)."""
    if not os.path.exists(checkpoint) and not os.path.exists(f"{checkpoint}.index"):
        raise CheckFailed(f"There is no checkpoint at {checkpoint}: pass the path the training saved to.")
    if not model.weights:
        raise CheckFailed(
            f"Model {model.name!r} has no weights: it was never built, so the restore is still waiting for "
            "variables to fill (tf.train.Checkpoint defers it, and status.assert_existing_objects_matched() "
            "passes with nothing to match). Build the model first (a keras.Input, or call it on one batch), "
            "then restore, then check.")
    stored = checkpoint_arrays(checkpoint)
    by_shape: dict[tuple, list[np.ndarray]] = {}
    for array in stored:
        by_shape.setdefault(tuple(np.shape(array)), []).append(array)
    missing = [w.path for w in model.weights
               if not any(np.array_equal(np.asarray(w), a) for a in by_shape.get(tuple(w.shape), []))]
    if missing:
        raise CheckFailed(
            f"{len(missing)} of the model's {len(model.weights)} weights (e.g. {missing[0]}) are not in the checkpoint "
            f"{checkpoint}: the restore did not reach them. Restore into a model of the same architecture, built "
            "before restoring, and keep the status: status.assert_existing_objects_matched() names what was missed.")
    return f"all {len(model.weights)} weights equal the checkpoint's: restored"
