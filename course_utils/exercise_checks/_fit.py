"""Checks of the ``fit`` exercises: the global batch, the model built in the strategy's scope, the
weights saved during and after training."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._answers import CheckFailed, student_error
from ._disk import check_restored, is_legacy_full_model, remember_trained


def check_global_batch(global_batch: int, per_replica_batch: int, strategy, dataset=None) -> str:
    """``global_batch == per_replica_batch * strategy.num_replicas_in_sync``, and ``dataset`` (if given,
    before distribution) yields batches of ``global_batch`` examples."""
    replicas = strategy.num_replicas_in_sync
    if not isinstance(global_batch, int) or isinstance(global_batch, bool):
        raise CheckFailed(f"GLOBAL_BATCH is {global_batch!r} ({type(global_batch).__name__}): it must be a whole "
                          "number of examples, PER_REPLICA_BATCH * strategy.num_replicas_in_sync.")
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


def _tf_variable(weight):
    return getattr(weight, "value", weight)  # a Keras 3 Variable holds the tf.Variable in .value


def _strategy_of(weight) -> str:
    """The strategy a variable was created under, in words."""
    made_by = getattr(_tf_variable(weight), "_distribute_strategy", None)
    if made_by is None:
        return "no strategy's scope (the default strategy)"
    return f"the scope of another strategy, a {type(made_by).__name__} with {made_by.num_replicas_in_sync} replica(s)"


def check_built_in_scope(model, strategy, model_name: str = "model", strategy_name: str = "strategy") -> str:
    """Every weight of ``model`` was created under ``strategy.scope()``. The names are the notebook's, for
    the message: "build ``model_name`` inside ``with strategy_name.scope():``"."""
    kind = type(strategy).__name__
    if not hasattr(model, "weights"):
        raise CheckFailed(f"{model_name} is a {type(model).__name__}, not a Keras model: build it with "
                          f"build_and_compile() (or models.build_cnn) inside `with {strategy_name}.scope():`.")
    if not model.weights:
        raise CheckFailed(f"{model_name} has no weights yet: build it inside `with {strategy_name}.scope():` "
                          "(give it a keras.Input, or call it on a batch there).")
    outside = [w for w in model.weights if not strategy.extended.variable_created_in_scope(_tf_variable(w))]
    if outside:
        raise CheckFailed(
            f"{len(outside)} of {model_name}'s {len(model.weights)} weights (e.g. {outside[0].path}) were created in "
            f"{_strategy_of(outside[0])}, not in {strategy_name}'s ({kind}, {strategy.num_replicas_in_sync} "
            f"replica(s)), so {strategy_name} does not place or combine them. Build (and compile) {model_name} "
            f"inside `with {strategy_name}.scope():`.")
    return f"all {len(model.weights)} weights of {model_name} created in {strategy_name}'s scope ({kind}): right"


def check_saved(model, path, how: str) -> str:
    """The training saved ``model``'s weights at ``path``. ``how`` says how to save them (the exercise's
    own instruction), for the message when nothing is there."""
    path = Path(path)
    if not path.exists():
        folder = path.parent
        found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
        listing = (f"{folder} holds {', '.join(found)}" if found else
                   f"{folder} is empty" if found is not None else f"{folder} does not exist")
        raise CheckFailed(f"Nothing was saved at {path} ({listing}). {how}")
    if str(path).endswith(".weights.h5") and is_legacy_full_model(path):
        raise CheckFailed(
            f"{path} holds a whole model in the legacy HDF5 format (what model.save or ModelCheckpoint without "
            "save_weights_only=True write), under a weights-file name. Save the weights only: "
            "ModelCheckpoint(..., save_weights_only=True), or model.save_weights(...).")
    if os.path.getsize(path) == 0:
        raise CheckFailed(f"{path} is empty: the save did not finish. {how}")
    message = check_restored(model, path).replace("restored", "saved")
    remember_trained(model)
    return message


def stored_labels(data) -> np.ndarray:
    """The labels of a loaded split (``datasets.load``'s ``LoadedData`` or a ``tf.data`` dataset of (image, label)
    pairs) in the order they are stored: what an unshuffled pipeline would yield."""
    dataset = getattr(data, "dataset", data)
    return np.concatenate([labels.numpy() for labels in dataset.map(lambda _, y: y).batch(8192)])


def shuffle_problem(first_labels, stored, global_batch: int) -> str | None:
    """What is wrong with the order of a training pipeline's first batch, or None: ``first_labels`` are its
    labels, ``stored`` the split's labels in stored order. A batch equal to a run of ``global_batch`` stored
    examples was never shuffled (the first run) or was batched before shuffling (any run at a multiple)."""
    first = np.asarray(first_labels)
    n = len(first)
    for start in range(0, len(stored) - n + 1, n if n else 1):
        if np.array_equal(stored[start:start + n], first):
            if start == 0:
                return ("The first training batch holds the first examples in stored order: the training set is not "
                        "shuffled. Shuffle before batching: .shuffle(10_000, seed=0).batch(GLOBAL_BATCH, ...).")
            return (f"The first training batch is a run of {n} consecutive stored examples (from example {start}): "
                    "the batches were shuffled, not the examples. Shuffle before batching: "
                    ".shuffle(10_000, seed=0).batch(GLOBAL_BATCH, ...).")
    return None


def check_pipeline(make_dataset, train, test, global_batch: int) -> str:
    """``make_dataset(data, training)`` gives what the exercise's runs need: training batches all of
    ``global_batch`` scaled images (``drop_remainder``), shuffled example by example with a fixed seed (every
    run sees the same order), and a test set that keeps every example."""
    try:
        train_ds, test_ds = make_dataset(train, training=True), make_dataset(test, training=False)
        first, again = next(iter(train_ds)), next(iter(make_dataset(train, training=True)))
    except Exception as err:
        raise student_error(err, "make_dataset(train, training=True)") from err
    if not isinstance(first, (tuple, list)) or len(first) != 2:
        raise CheckFailed("make_dataset must yield (images, labels) pairs: keep the pairs of data.dataset, and "
                          "map pipeline.scale_image over them.")
    images = first[0]
    size = int(images.shape[0])
    if size != global_batch:
        raise CheckFailed(f"make_dataset(train, training=True) yields batches of {size} examples, not the global batch "
                          f"of {global_batch}: batch by GLOBAL_BATCH. The strategy splits each global batch across "
                          "the replicas.")
    if images.dtype.is_integer or float(images.numpy().max()) > 1.0:
        raise CheckFailed(f"The training images are {images.dtype.name} up to {float(images.numpy().max()):g}, not "
                          "floats in [0, 1]: map pipeline.scale_image over the dataset first.")
    if train_ds.element_spec[0].shape[0] != global_batch:
        raise CheckFailed("The training batches may end with a smaller one (their size is not fixed): batch with "
                          "drop_remainder=True for training, so that every step divides by the same global batch.")
    problem = shuffle_problem(first[1].numpy(), stored_labels(train), global_batch)
    if problem:
        raise CheckFailed(problem)
    if not (first[1].numpy() == again[1].numpy()).all():
        raise CheckFailed("Two training pipelines made the same way give their examples in different orders: give "
                          "the shuffle a seed (.shuffle(10_000, seed=0)), so that every run trains on the same order "
                          "and the runs can be compared.")
    if test_ds.element_spec[0].shape[0] is not None:
        raise CheckFailed("The test batches all have a fixed size: drop_remainder=True dropped the test set's last "
                          "examples. Keep them (drop_remainder only for training): a test accuracy counts every "
                          "example.")
    return (f"make_dataset: shuffled (seeded) training batches of {global_batch} scaled images, every test "
            "example kept: right")
