"""The check of what each replica trains on: ``train_epoch`` run once with a stand-in ``train_step`` that records
the batches it is given (:func:`check_replicas_fed`)."""

from __future__ import annotations

import numpy as np

from ._answers import CheckFailed, student_error
from ._fit import shuffle_problem
from ._loop import _check_reset


def _replica_arrays(value) -> list | None:
    """The per-replica parts of a distributed value, as NumPy arrays; None for a value that is not distributed."""
    import tensorflow as tf  # noqa: PLC0415

    if not isinstance(value, tf.distribute.DistributedValues):
        return None
    return [np.asarray(part) for part in value.values]


DISTRIBUTE_FIX = ("Distribute the training set: dist_train = strategy.experimental_distribute_dataset("
                  "make_dataset(train, training=True)), and loop over dist_train.")


def _feed_verdict(batches: list, replicas: int, global_batch: int, steps_per_epoch: int, stored) -> None:
    if not batches:
        raise CheckFailed("train_epoch() never called train_step: loop over dist_train and call train_step(batch) on "
                          "every batch (the check replaces train_step for one pass, to see what each replica gets).")
    images, labels = batches[0]
    if images is None or any(imgs is None for imgs, _ in batches):
        raise CheckFailed(
            f"train_epoch gives train_step batches that are not distributed: strategy.run then hands EVERY replica "
            f"the whole batch, so the {replicas} replicas train on the same examples and the summed gradient is "
            f"{replicas} times too large. {DISTRIBUTE_FIX}")
    shares = [len(part) for part in images]
    if sum(shares) != global_batch:
        if all(share == global_batch for share in shares):
            why = (f"each of the {replicas} replicas got a whole global batch of {global_batch} (a dataset function "
                   "must batch by ctx.get_per_replica_batch_size(GLOBAL_BATCH))")
        elif sum(shares) * replicas == global_batch:
            why = (f"each step's {sum(shares)} examples are one replica's share: the distributed dataset was batched "
                   "by PER_REPLICA_BATCH, not by GLOBAL_BATCH")
        else:
            why = f"each step's replicas got {shares} examples"
        raise CheckFailed(f"A step must split one global batch of {global_batch} across the {replicas} replicas, but "
                          f"{why}. {DISTRIBUTE_FIX}")
    if replicas > 1 and all(np.array_equal(images[0], part) for part in images[1:]):
        raise CheckFailed(f"Every replica got the same {shares[0]} examples: the replicas must split the global batch "
                          f"between them. {DISTRIBUTE_FIX}")
    if float(max(part.max() for part in images)) > 1.0:
        raise CheckFailed(f"The images train_step gets are not scaled to [0, 1]. {DISTRIBUTE_FIX}")
    short = [i for i, (imgs, _) in enumerate(batches) if imgs is not None and sum(len(p) for p in imgs) != global_batch]
    if short:
        raise CheckFailed(f"Batch {short[0] + 1} of the epoch is not a whole global batch: distribute a dataset "
                          f"batched with drop_remainder=True. {DISTRIBUTE_FIX}")
    if len(batches) != steps_per_epoch:
        raise CheckFailed(f"train_epoch() called train_step {len(batches)} times; an epoch has {steps_per_epoch} "
                          f"global batches. Call it once per batch of dist_train. {DISTRIBUTE_FIX}")
    if stored is not None and labels and (problem := shuffle_problem(np.concatenate(labels), stored, global_batch)):
        raise CheckFailed(problem + " " + DISTRIBUTE_FIX)


def check_replicas_fed(namespace: dict, strategy, global_batch: int, steps_per_epoch: int, stored_labels=None,
                       accuracy=None, examples_per_epoch: int | None = None) -> str:
    """What each replica trains on: ``train_epoch()`` (from ``namespace``, the notebook's ``globals()``) is run
    for one pass with ``train_step`` replaced by a stand-in that records its batches and trains nothing. Every
    call must get a distributed batch whose replicas split one global batch of different, scaled examples,
    shuffled (``stored_labels``: the split's labels in stored order), once per batch of an epoch.
    ``accuracy`` (the training metric), if given, is checked first to hold at most one epoch's examples
    (reset every epoch)."""
    import tensorflow as tf  # noqa: PLC0415

    _check_reset(accuracy, examples_per_epoch)
    train_epoch, real = namespace["train_epoch"], namespace.get("train_step")
    batches: list = []

    def stand_in(*args):
        batch = args[0] if len(args) == 1 else args
        images, labels = (batch[0], batch[1]) if isinstance(batch, (tuple, list)) and len(batch) == 2 else (batch, None)
        parts = _replica_arrays(images)
        if len(batches) == 0 or parts is None:
            batches.append((parts, _replica_arrays(labels) if labels is not None else None))
        else:  # after the first batch only the sizes count: keep the shapes, not the images
            batches.append(([np.empty((len(p),)) for p in parts], None))
        return tf.constant(0.0)

    namespace["train_step"] = stand_in
    try:
        train_epoch()
    except Exception as err:
        raise student_error(err, "train_epoch(), run with a stand-in train_step that records its batches") from err
    finally:
        namespace["train_step"] = real
    _feed_verdict(batches, strategy.num_replicas_in_sync, global_batch, steps_per_epoch, stored_labels)
    return (f"every step's {global_batch} examples split {strategy.num_replicas_in_sync} ways, different on every "
            f"replica, shuffled, {steps_per_epoch} steps an epoch: right")
