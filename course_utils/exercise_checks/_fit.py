"""Checks of the ``fit`` exercises: the global batch, the model built in the strategy's scope, the
weights saved during and after training."""

from __future__ import annotations

import os
from pathlib import Path

from ._answers import CheckFailed
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
