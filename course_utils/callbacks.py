"""A Keras callback that measures training throughput (Keras 3).

The callbacks the course *teaches* (``LearningRateScheduler``, a ``PrintLR`` callback,
``ModelCheckpoint``, ``TensorBoard``) are written or used in the notebooks themselves.
"""

from __future__ import annotations

import time

import keras

from .checkpoints import fingerprint
from .timing import throughput


class Throughput(keras.callbacks.Callback):
    """Time the training steps of each epoch and record images/s.

    The clock runs from the start of the epoch's first training batch to the end of its
    last one, so validation, checkpoint saving and the other callbacks' end-of-epoch work
    are *not* counted. ``examples_per_epoch`` is the number of training examples one epoch
    sees (counting examples rather than batches stays right with ``steps_per_execution``
    and a partial last batch). :attr:`first_step_seconds` records each epoch's first step
    alone: in epoch 1 it includes tracing and compiling the training function.
    What the clock leaves out is recorded beside it: :attr:`before_training_seconds`, from the
    start of the epoch to its first training batch (Keras 3 deletes the input iterators it made
    before and starts the epoch's; the ``on_epoch_begin`` of callbacks listed after this one run), and
    :attr:`after_training_seconds`, from the end of the
    last training batch to this callback's ``on_epoch_end`` (Keras 3 makes the next input iterator
    there, then validation, and the end-of-epoch work
    of the callbacks listed before this one, such as ``ModelCheckpoint``). The three add up to
    :attr:`epoch_wall_seconds`. :attr:`last_epoch_end_time` (``time.perf_counter()`` at the last
    ``on_epoch_end``; Keras 3 deletes the validation iterator after it, before ``on_train_end``) and
    :attr:`train_end_time` (at this callback's ``on_train_end``) let the caller time what ``fit``
    does after it, before returning: deleting its last training iterators (two, the epoch's and the one
    made after its last batch, when no ``steps_per_epoch`` is given). Each ``fit`` starts these anew.
    :attr:`initial_weights_fingerprint` is a hash of the weights training started from
    (:func:`course_utils.checkpoints.fingerprint`), so that runs can be shown to start alike.
    """

    def __init__(self, examples_per_epoch: int, print_fn=None):
        super().__init__()
        if examples_per_epoch < 1:
            raise ValueError(f"examples_per_epoch must be >= 1, got {examples_per_epoch}")
        self.examples_per_epoch = examples_per_epoch
        self.print_fn = print_fn
        self.epoch_seconds: list[float] = []
        self.images_per_sec: list[float] = []
        self.first_step_seconds: list[float] = []
        self.after_training_seconds: list[float] = []
        self.before_training_seconds: list[float] = []
        self.epoch_wall_seconds: list[float] = []
        self.initial_weights_fingerprint: str | None = None
        self.train_end_time: float | None = None
        self.last_epoch_end_time: float | None = None  # time.perf_counter() at the latest on_epoch_end
        self._epoch_begin: float | None = None
        self._start: float | None = None
        self._last_end: float | None = None

    def on_train_begin(self, logs=None):
        self.last_epoch_end_time = self.train_end_time = None  # this fit's
        if self.initial_weights_fingerprint is None:  # the first fit this callback sees
            self.initial_weights_fingerprint = fingerprint(self.model.get_weights())

    @property
    def outside_steps_seconds(self) -> list[float]:
        """Each epoch's time outside its steps: :attr:`before_training_seconds` plus :attr:`after_training_seconds`."""
        return [b + a for b, a in zip(self.before_training_seconds, self.after_training_seconds)]

    def on_train_end(self, logs=None):
        self.train_end_time = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_begin = time.perf_counter()
        self._start = self._last_end = None

    def on_train_batch_begin(self, batch, logs=None):
        if self._start is None:
            self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._last_end is None:
            self.first_step_seconds.append(now - self._start)
        self._last_end = now

    def on_epoch_end(self, epoch, logs=None):
        if self._start is None or self._last_end is None:
            raise RuntimeError("Throughput saw no training batch in this epoch")
        now = self.last_epoch_end_time = time.perf_counter()
        seconds = self._last_end - self._start
        self.after_training_seconds.append(now - self._last_end)
        self.before_training_seconds.append(self._start - self._epoch_begin)
        self.epoch_wall_seconds.append(now - self._epoch_begin)
        self.epoch_seconds.append(seconds)
        self.images_per_sec.append(throughput(self.examples_per_epoch, seconds))
        if self.print_fn:
            self.print_fn(f"Epoch {epoch + 1}: training steps {seconds:.1f} s, "
                          f"{self.images_per_sec[-1]:.0f} images/s")


class TrainEndMark(keras.callbacks.Callback):
    """Listed first, it notes when ``on_train_end`` begins (:attr:`time`, ``time.perf_counter()``), before
    the other callbacks' ``on_train_end``. With :class:`Throughput` listed last, the time from
    ``Throughput.last_epoch_end_time`` to this mark is what ``fit`` did after its epochs before any callback's
    ``on_train_end`` (Keras 3 deletes the validation iterator there), the same whatever callbacks run."""

    def __init__(self):
        super().__init__()
        self.time: float | None = None

    def on_train_begin(self, logs=None):
        self.time = None

    def on_train_end(self, logs=None):
        self.time = time.perf_counter()
