"""Checks a student runs on an exercise's answers: each passes on a right answer and fails on the classic
wrong ones with a message that names the mistake and the fix, never a traceback from inside the checks.

- :func:`require`: the names an exercise defines exist ("not answered yet" otherwise);
- :func:`check_global_batch`: the global batch is the per-replica batch times the replicas, and the
  dataset is batched by it;
- :func:`check_pipeline`: the ``tf.data`` chain's training batches are whole global batches of scaled
  images, shuffled example by example with a seed, and its test set keeps every example;
- :func:`check_built_in_scope`: the model's variables were created in the named strategy's scope;
- :func:`check_saved`: training saved the model's weights (a weights file, not a whole model);
- :func:`check_loss_scaling`: a per-replica loss, summed over the replicas, is the mean over the
  *global* batch (not the mean of each replica's own batch, as ``tf.reduce_mean`` gives);
- :func:`check_train_step`: the distributed step returns the batch's loss (``reduce`` with ``SUM``) and
  trains; the check undoes its step;
- :func:`check_evaluate`: the distributed test step's loss and accuracy are the model's on the test set;
- :func:`check_replicas_fed`: what each replica trains on: ``train_epoch`` run once with a stand-in
  ``train_step`` that records its batches (distributed, one global batch split between the replicas,
  different examples on each, shuffled, every batch of the epoch);
- :func:`check_loop_trained`: the epoch loop ran every step, saved after every epoch and the final weights;
- :func:`check_restored`, :func:`check_from_disk`, :func:`check_resumed`: a model holds a checkpoint's
  weights (``tf.train.Checkpoint``, ``.weights.h5`` or ``.keras``), was rebuilt rather than trained in
  memory, and an optimizer resumed at the saved step.

A failed check raises :class:`CheckFailed` (an ``AssertionError``, as nbgrader expects); an error raised
by the student's code while a check runs it becomes a :class:`CheckFailed` naming that error.
"""

from ._answers import CheckFailed, require, student_error
from ._disk import check_from_disk, check_restored, check_resumed, checkpoint_arrays, remember_trained
from ._feeding import check_replicas_fed
from ._fit import (
    check_built_in_scope,
    check_global_batch,
    check_pipeline,
    check_saved,
    shuffle_problem,
    stored_labels,
)
from ._loop import (
    check_evaluate,
    check_loop_trained,
    check_loss_scaling,
    check_train_step,
    cross_entropy,
)

__all__ = ["CheckFailed", "check_built_in_scope", "check_evaluate", "check_from_disk", "check_global_batch",
           "check_loop_trained", "check_loss_scaling", "check_pipeline", "check_replicas_fed", "check_restored",
           "check_resumed", "check_saved", "check_train_step", "checkpoint_arrays", "cross_entropy",
           "remember_trained", "require", "shuffle_problem", "stored_labels", "student_error"]
