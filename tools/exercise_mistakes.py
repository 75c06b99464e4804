"""The classic wrong answers to the SVHN exercise, as edits of its solution, and the message each must get.

    python -m tools.exercise_mistakes OUT [NAME ...]   # one notebook per mistake (default: all) in OUT

Each :data:`MISTAKES` entry edits one answer of ``solutions/07_svhn.ipynb`` the way a student might get
it wrong, and names the check cell that must catch it and the words its message must contain. The
tests grade notebooks made from them (``tasks.py grade``); :data:`TOGETHER` groups mistakes whose
answers do not depend on each other, so that one notebook can carry several.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.notebook_params import ROOT

SOLUTION = ROOT / "solutions" / "07_svhn.ipynb"


@dataclass(frozen=True)
class Mistake:
    answer: str      # the grade_id of the answer cell it edits
    old: str         # text of the solution's answer ...
    new: str         # ... replaced by the wrong answer
    check: str       # the grade_id of the check cell that must fail
    message: str     # words its message must contain
    also: tuple[str, ...] = ()  # later checks that fail because they use this answer (theirs is right)


RIGHT_LOSS = "return tf.nn.compute_average_loss(per_example_loss(labels, logits), global_batch_size=GLOBAL_BATCH)"
SHUFFLE = "    if training:  # shuffle the examples, then batch them\n        ds = ds.shuffle(10_000, seed=0)\n"
BATCH = "    return ds.batch(GLOBAL_BATCH, drop_remainder=training).prefetch(tf.data.AUTOTUNE)"
DIST_TRAIN = "dist_train = strategy.experimental_distribute_dataset(make_dataset(train, training=True))"
LOOP_ONWARD = ("check_epoch_loop", "check_restore_loop", "check_resume")  # a loop that fails leaves no checkpoint
MISTAKES = {
    # exercise 1: the global batch and the tf.data chain
    "global batch per replica": Mistake(
        "global_batch", "GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync",
        "GLOBAL_BATCH = PER_REPLICA_BATCH", "check_global_batch", "examples per replica"),
    "dataset batched per replica": Mistake(
        "global_batch", "ds.batch(GLOBAL_BATCH, drop_remainder=training)",
        "ds.batch(PER_REPLICA_BATCH, drop_remainder=training)", "check_global_batch",
        "Batch the dataset with GLOBAL_BATCH", ("check_train_step", "check_epoch_loop", "check_resume")),
    "training set not shuffled": Mistake(
        "global_batch", SHUFFLE, "", "check_global_batch", "the training set is not shuffled",
        ("check_epoch_loop",)),  # exercise 7 distributes the same pipeline
    "batches shuffled, not examples": Mistake(
        "global_batch", SHUFFLE + BATCH,
        "    ds = ds.batch(GLOBAL_BATCH, drop_remainder=training)\n    if training:\n"
        "        ds = ds.shuffle(10_000, seed=0)\n    return ds.prefetch(tf.data.AUTOTUNE)",
        "check_global_batch", "Shuffle before batching", ("check_epoch_loop",)),  # (or "not shuffled": batch 0 first)
    "shuffle without a seed": Mistake(
        "global_batch", "ds.shuffle(10_000, seed=0)", "ds.shuffle(10_000)", "check_global_batch",
        "give the shuffle a seed"),
    "last training batch kept": Mistake(
        "global_batch", ", drop_remainder=training)", ")", "check_global_batch", "drop_remainder=True for training",
        ("check_epoch_loop", "check_resume")),  # at the default LIMIT the last batch is short
    "test examples dropped": Mistake(
        "global_batch", "drop_remainder=training)", "drop_remainder=True)", "check_global_batch",
        "dropped the test set's last examples"),
    # exercise 2-4: fit
    "model built outside the scope": Mistake(
        "build_in_scope",
        "with strategy.scope():\n    keras.utils.set_random_seed(0)\n    model = build_and_compile()",
        "keras.utils.set_random_seed(0)\nmodel = build_and_compile()", "check_build_in_scope",
        "Build (and compile) model inside `with strategy.scope():`"),
    "whole model under a weights name": Mistake(
        "fit", '"ckpt_{epoch:02d}.weights.h5"),\n' + " " * 48 + "save_weights_only=True)",
        '"ckpt_{epoch:02d}.weights.h5"))', "check_fit_saved", "legacy HDF5 format",
        ("check_restore_fit",)),  # exercise 10 restores that file
    "whole model not saved": Mistake(
        "fit", 'model.save(WORK / "fit" / "model.keras")\n', "", "check_fit_saved", "Nothing was saved at",
        ("check_restore_fit",)),
    "one-device model in the Mirrored scope": Mistake(
        "one_device", "with single.scope():", "with strategy.scope():", "check_one_device",
        "inside `with single.scope():`"),
    # exercise 5: the loss
    "loss averaged per replica": Mistake(
        "compute_loss", RIGHT_LOSS,
        "return tf.reduce_mean(per_example_loss(labels, logits))", "check_compute_loss", "tf.reduce_mean",
        ("check_train_step",)),  # the step calls compute_loss
    "loss per example": Mistake(
        "compute_loss", RIGHT_LOSS,
        "return per_example_loss(labels, logits)", "check_compute_loss", "not one number",
        ("check_train_step", *LOOP_ONWARD)),
    "loss summed, not divided": Mistake(
        "compute_loss", RIGHT_LOSS, "return tf.reduce_sum(per_example_loss(labels, logits))", "check_compute_loss",
        "the sum over the global batch", ("check_train_step",)),
    "loss divided by the per-replica batch": Mistake(
        "compute_loss", RIGHT_LOSS, RIGHT_LOSS.replace("=GLOBAL_BATCH", "=PER_REPLICA_BATCH"),
        "check_compute_loss", "global_batch_size=PER_REPLICA_BATCH", ("check_train_step",)),
    # exercise 6: the training step
    "losses averaged with MEAN": Mistake(
        "train_step", "tf.distribute.ReduceOp.SUM, per_replica_losses",
        "tf.distribute.ReduceOp.MEAN, per_replica_losses",
        "check_train_step", "Reduce with tf.distribute.ReduceOp.SUM"),
    "batch wrapped in a tuple": Mistake(
        "train_step", "strategy.run(replica_step, args=batch)", "strategy.run(replica_step, args=(batch,))",
        "check_train_step", "args=batch", LOOP_ONWARD),
    "per-replica losses returned": Mistake(
        "train_step", "return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)",
        "return per_replica_losses", "check_train_step", "per-replica values", LOOP_ONWARD),
    "gradients not applied": Mistake(
        "train_step", "    optimizer.apply_gradients(zip(gradients, loop_model.trainable_variables))\n", "",
        "check_train_step", "did not change the weights", ("check_epoch_loop", "check_resume")),
    "training accuracy not updated": Mistake(
        "train_step", "    train_accuracy.update_state(labels, logits)\n", "", "check_train_step",
        "counted 0 examples"),
    "strategy.run not used": Mistake(
        "train_step", "strategy.run(replica_step, args=batch)", "replica_step(*batch)", "check_train_step",
        "strategy.run(replica_step, args=batch)", LOOP_ONWARD),
    # exercise 7: what each replica trains on, and the epoch loop
    "no checkpoint saved": Mistake(
        "epoch_loop", "saved = manager.save()", "saved = None", "check_epoch_loop", "call manager.save()",
        ("check_restore_loop", "check_resume")),
    "checkpoint saved only after the last epoch": Mistake(
        "epoch_loop", "saved = manager.save()", "saved = manager.save() if epoch == EPOCHS else None",
        "check_epoch_loop", "once at the end of every epoch"),
    "dataset not distributed": Mistake(
        "epoch_loop", DIST_TRAIN, "dist_train = make_dataset(train, training=True)", "check_epoch_loop",
        "hands EVERY replica the whole batch"),
    "distributed dataset batched per replica": Mistake(
        "epoch_loop", DIST_TRAIN,
        "dist_train = strategy.experimental_distribute_dataset(\n    train.dataset.map(pipeline.scale_image)"
        ".shuffle(10_000, seed=0).batch(PER_REPLICA_BATCH, drop_remainder=True))",
        "check_epoch_loop", "batched by PER_REPLICA_BATCH, not by GLOBAL_BATCH", ("check_resume",)),
    "dataset function batching the global batch": Mistake(
        "epoch_loop", DIST_TRAIN,
        "dist_train = strategy.distribute_datasets_from_function(lambda ctx: make_dataset(train, training=True))",
        "check_epoch_loop", "got a whole global batch", ("check_resume",)),
    "training accuracy never reset": Mistake(
        "epoch_loop", "    train_accuracy.reset_state()\n", "", "check_epoch_loop", "reset it every epoch"),
    # exercise 8: the test step
    "test loss scaled like the training loss": Mistake(
        "evaluate", "test_loss.update_state(per_example_loss(labels, logits))",
        "test_loss.update_state(compute_loss(labels, logits))", "check_evaluate", "keras.metrics.Mean"),
    "test set not distributed": Mistake(
        "evaluate", "for batch in strategy.experimental_distribute_dataset(test_ds):", "for batch in test_ds:",
        "check_evaluate", "the test set was not distributed"),
    # exercises 10-12: restored under another strategy
    "restored from memory": Mistake(
        "restore_fit", "from_weights.load_weights(checkpoints.latest_checkpoint(WORK / \"fit\"))",
        "from_weights.set_weights(model.get_weights())", "check_restore_fit", "not in the checkpoint"),
    "fit model restored under the training strategy": Mistake(
        "restore_fit", "with one_device.scope(), warnings", "with strategy.scope(), warnings", "check_restore_fit",
        "inside `with one_device.scope():`"),
    "first fit checkpoint restored": Mistake(
        "restore_fit", "checkpoints.latest_checkpoint(WORK / \"fit\")", "WORK / \"fit\" / \"ckpt_01.weights.h5\"",
        "check_restore_fit", "not in the checkpoint"),
    "loop model restored before it was built": Mistake(
        "restore_loop", "from_loop = models.build_cnn(train.image_shape, train.num_classes)",
        "from_loop = keras.Sequential([keras.layers.Conv2D(32, 3, activation='relu', name='conv1'), "
        "keras.layers.Conv2D(64, 3, activation='relu', name='conv2'), keras.layers.Flatten(), "
        "keras.layers.Dense(64, activation='relu', name='dense'), keras.layers.Dense(10, name='logits')])",
        "check_restore_loop", "has no weights yet"),
    "loop checkpoint restored under another keyword": Mistake(
        "restore_loop", "tf.train.Checkpoint(model=from_loop)", "tf.train.Checkpoint(net=from_loop)",
        "check_restore_loop", "under the name it was saved with"),
    "optimizer not built before the restore": Mistake(
        "resume",
        "    resumed_optimizer.build(resumed_model.trainable_variables)  # its variables exist before the restore\n",
        "", "check_resume", "was not built before the restore"),
    "optimizer left out of the restore": Mistake(
        "resume", "tf.train.Checkpoint(model=resumed_model, optimizer=resumed_optimizer)",
        "tf.train.Checkpoint(model=resumed_model)", "check_resume", "the restore did not reach it"),
}

# Mistakes graded together, one notebook per group: at most one per answer, and none whose check another's
# mistake also fails (its `also`). Every mistake is in one group (tests/test_grade.py checks both).
TOGETHER = [
    ["global batch per replica", "model built outside the scope", "one-device model in the Mirrored scope",
     "loss averaged per replica", "dataset not distributed", "restored from memory",
     "loop model restored before it was built", "optimizer not built before the restore"],
    ["dataset batched per replica", "whole model under a weights name", "loss per example", "test set not distributed"],
    # a test loss scaled as compute_loss scales it is right when compute_loss averages per replica: not with that
    ["training set not shuffled", "whole model not saved", "batch wrapped in a tuple",
     "test loss scaled like the training loss"],
    ["batches shuffled, not examples", "per-replica losses returned", "fit model restored under the training strategy"],
    ["shuffle without a seed", "losses averaged with MEAN", "no checkpoint saved", "first fit checkpoint restored"],
    ["last training batch kept", "strategy.run not used"],
    ["test examples dropped", "gradients not applied", "loop checkpoint restored under another keyword"],
    ["loss summed, not divided", "distributed dataset batched per replica"],
    ["loss divided by the per-replica batch", "dataset function batching the global batch"],
    ["training accuracy never reset", "optimizer left out of the restore"],
    # apart from "never reset": a metric never updated cannot show that it was never reset
    ["training accuracy not updated", "checkpoint saved only after the last epoch"],
]


def with_mistakes(names: list[str]) -> nbformat.NotebookNode:
    """The solution notebook with these mistakes made (each must apply exactly once)."""
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    for name in names:
        mistake = MISTAKES[name]
        cell = cells[mistake.answer]
        if cell.source.count(mistake.old) != 1:
            raise ValueError(f"mistake {name!r}: its text is not once in answer {mistake.answer}; update MISTAKES")
        cell.source = cell.source.replace(mistake.old, mistake.new)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or MISTAKES:
        path = out / (name.replace(" ", "_").replace("-", "_") + ".ipynb")
        nbformat.write(with_mistakes([name]), path)
        print(f"{path}: {name} (check {MISTAKES[name].check} must say {MISTAKES[name].message!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
