"""Checks of what is on disk: a model holds a checkpoint's weights, was rebuilt from the file rather than
copied from memory, and a resumed optimizer carries the training's steps."""

from __future__ import annotations

import os
import weakref
import zipfile
from pathlib import Path

import numpy as np

from ._answers import CheckFailed

_TRAINED: weakref.WeakSet = weakref.WeakSet()  # the models the notebook trained, seen by check_saved/restored


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


def is_legacy_full_model(path) -> bool:
    """An HDF5 file that holds a whole model (Keras' legacy ``model.save("x.h5")``), not only weights."""
    import h5py  # noqa: PLC0415

    try:
        with h5py.File(path, "r") as h5:
            return "model_config" in h5.attrs or "model_weights" in h5
    except OSError:
        return False  # not HDF5 at all: checkpoint_arrays says so


def _missing_path_message(checkpoint) -> str | None:
    if checkpoint is None:
        return ("The checkpoint path is None: tf.train.latest_checkpoint(folder) and manager.latest_checkpoint "
                "return None when nothing was saved there. Did the training loop call manager.save() (and did it "
                "run)? Then pass the folder the manager saves to.")
    if not os.path.exists(checkpoint) and not os.path.exists(f"{checkpoint}.index"):
        return f"There is no checkpoint at {checkpoint}: pass the path the training saved to."
    return None


def _not_stored(variables, checkpoint) -> list[str]:
    """The paths of the variables whose value is not one of the checkpoint's arrays."""
    by_shape: dict[tuple, list[np.ndarray]] = {}
    for array in checkpoint_arrays(checkpoint):
        by_shape.setdefault(tuple(np.shape(array)), []).append(array)
    return [v.path for v in variables
            if not any(np.array_equal(np.asarray(v), a) for a in by_shape.get(tuple(v.shape), []))]


def check_restored(model, checkpoint) -> str:
    """Every weight of ``model`` equals an array stored in ``checkpoint`` (a path, see :func:`checkpoint_arrays`)."""
    if (message := _missing_path_message(checkpoint)) is not None:
        raise CheckFailed(message)
    if not hasattr(model, "weights"):
        raise CheckFailed(f"This is a {type(model).__name__}, not a Keras model: check the model itself.")
    if not model.weights:
        raise CheckFailed(
            f"Model {model.name!r} has no weights: it was never built, so the restore is still waiting for "
            "variables to fill (tf.train.Checkpoint defers it, and status.assert_existing_objects_matched() "
            "passes with nothing to match). Build the model first (a keras.Input, or call it on one batch), "
            "then restore, then check.")
    missing = _not_stored(model.weights, checkpoint)
    if missing:
        raise CheckFailed(
            f"{len(missing)} of the model's {len(model.weights)} weights (e.g. {missing[0]}) are not in the checkpoint "
            f"{checkpoint}: the restore did not reach them. Restore into a model of the same architecture, built "
            "before restoring, under the name it was saved with (tf.train.Checkpoint(model=...) finds it by that "
            "keyword), and keep the status: status.assert_existing_objects_matched() names what was missed.")
    return f"all {len(model.weights)} weights equal the checkpoint's: restored"


def remember_trained(*models) -> None:
    """Record the models the notebook trained, so that :func:`check_from_disk` can tell them from rebuilt ones."""
    _TRAINED.update(models)


def check_from_disk(model, checkpoint, model_name: str) -> str:
    """``model`` is a new model filled from ``checkpoint``: not a model that was trained in memory, and every
    weight equal to the file's."""
    if model in _TRAINED:
        raise CheckFailed(f"{model_name} is the model that was trained, not one rebuilt from the file: build a new "
                          "model under the new strategy, then load the file into it.")
    return check_restored(model, checkpoint)


def check_resumed(optimizer, checkpoint, trained_steps: int, optimizer_name: str = "resumed_optimizer") -> str:
    """A restored optimizer holds the state the training saved: its step count and every moment."""
    if (message := _missing_path_message(checkpoint)) is not None:
        raise CheckFailed(message)
    built = [v for v in optimizer.variables if len(v.shape) > 0]
    if not built:
        raise CheckFailed(
            f"{optimizer_name} holds no moments: it was not built before the restore, so the checkpoint's optimizer "
            f"state has nothing to fill (assert_consumed() says so). Build it first ({optimizer_name}.build("
            "model.trainable_variables)), then restore, then call .assert_consumed() on the status.")
    steps = int(optimizer.iterations.numpy())
    if steps == 0 and trained_steps:
        raise CheckFailed(f"{optimizer_name} is at step 0: the restore did not reach it. Put it in the checkpoint "
                          "object under the keyword the loop saved it with: tf.train.Checkpoint(model=..., "
                          f"optimizer={optimizer_name}), then restore and call .assert_consumed() on the status.")
    if steps != trained_steps:
        raise CheckFailed(f"{optimizer_name} is at step {steps}, but the loop's last checkpoint holds step "
                          f"{trained_steps}: restore that checkpoint, and do not train before checking.")
    missing = _not_stored(built, checkpoint)
    if missing:
        raise CheckFailed(f"{len(missing)} of {optimizer_name}'s {len(built)} moments (e.g. {missing[0]}) are not the "
                          "checkpoint's: restore the model and the optimizer together, from the loop's checkpoint.")
    return f"{optimizer_name} resumes at step {steps} with its {len(built)} moments, where the loop stopped: right"
