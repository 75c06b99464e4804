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
MISTAKES = {
    "global batch per replica": Mistake(
        "global_batch", "GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync",
        "GLOBAL_BATCH = PER_REPLICA_BATCH", "check_global_batch", "examples per replica"),
    "model built outside the scope": Mistake(
        "build_in_scope",
        "with strategy.scope():\n    keras.utils.set_random_seed(0)\n    model = build_and_compile()",
        "keras.utils.set_random_seed(0)\nmodel = build_and_compile()", "check_build_in_scope",
        "Build (and compile) model inside `with strategy.scope():`"),
    "whole model under a weights name": Mistake(
        "fit", '"ckpt_{epoch:02d}.weights.h5"),\n' + " " * 48 + "save_weights_only=True)",
        '"ckpt_{epoch:02d}.weights.h5"))', "check_fit_saved", "legacy HDF5 format",
        ("check_restore_fit",)),  # exercise 10 restores that file
    "one-device model in the Mirrored scope": Mistake(
        "one_device", "with single.scope():", "with strategy.scope():", "check_one_device",
        "inside `with single.scope():`"),
    "loss averaged per replica": Mistake(
        "compute_loss", RIGHT_LOSS,
        "return tf.reduce_mean(per_example_loss(labels, logits))", "check_compute_loss", "tf.reduce_mean",
        ("check_train_step",)),  # the step calls compute_loss
    "loss per example": Mistake(
        "compute_loss", RIGHT_LOSS,
        "return per_example_loss(labels, logits)", "check_compute_loss", "not one number"),
    "losses averaged with MEAN": Mistake(
        "train_step", "tf.distribute.ReduceOp.SUM, per_replica_losses",
        "tf.distribute.ReduceOp.MEAN, per_replica_losses",
        "check_train_step", "Reduce with tf.distribute.ReduceOp.SUM"),
    "batch wrapped in a tuple": Mistake(
        "train_step", "strategy.run(replica_step, args=batch)", "strategy.run(replica_step, args=(batch,))",
        "check_train_step", "args=batch"),
    "per-replica losses returned": Mistake(
        "train_step", "return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)",
        "return per_replica_losses", "check_train_step", "per-replica values"),
    "no checkpoint saved": Mistake(
        "epoch_loop", "saved = manager.save()", "saved = None", "check_epoch_loop", "call manager.save()"),
    "test loss scaled like the training loss": Mistake(
        "evaluate", "test_loss.update_state(per_example_loss(labels, logits))",
        "test_loss.update_state(compute_loss(labels, logits))", "check_evaluate", "keras.metrics.Mean"),
    "restored from memory": Mistake(
        "restore_fit", "from_weights.load_weights(checkpoints.latest_checkpoint(WORK / \"fit\"))",
        "from_weights.set_weights(model.get_weights())", "check_restore_fit", "not in the checkpoint"),
    "loop model restored before it was built": Mistake(
        "restore_loop", "from_loop = models.build_cnn(train.image_shape, train.num_classes)",
        "from_loop = keras.Sequential([keras.layers.Conv2D(32, 3, activation='relu', name='conv1'), "
        "keras.layers.Conv2D(64, 3, activation='relu', name='conv2'), keras.layers.Flatten(), "
        "keras.layers.Dense(64, activation='relu', name='dense'), keras.layers.Dense(10, name='logits')])",
        "check_restore_loop", "has no weights yet"),
    "optimizer not built before the restore": Mistake(
        "resume",
        "    resumed_optimizer.build(resumed_model.trainable_variables)  # its variables exist before the restore\n",
        "", "check_resume", "was not built before the restore"),
}

# Mistakes in answers that do not feed each other: each group is graded as one notebook.
TOGETHER = [
    ["model built outside the scope", "loss averaged per replica", "restored from memory",
     "loop model restored before it was built", "optimizer not built before the restore"],
    ["whole model under a weights name", "one-device model in the Mirrored scope", "losses averaged with MEAN",
     "test loss scaled like the training loss"],
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
