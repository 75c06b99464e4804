"""Keras callbacks and the learning-rate schedule shared by the notebooks (Keras 3 forms)."""

from __future__ import annotations

import keras

from .timing import Stopwatch, throughput


def decay(epoch: int) -> float:
    """The seeds' step decay: 1e-3 for epochs 0-2, 1e-4 for epochs 3-6, 1e-5 after."""
    if epoch < 3:
        return 1e-3
    if epoch < 7:
        return 1e-4
    return 1e-5


class PrintLR(keras.callbacks.Callback):
    """Print the optimizer's learning rate at the end of each epoch.

    Keras 3 form: ``model.optimizer.learning_rate`` (Keras 2 code used ``.lr``).
    """

    def __init__(self, print_fn=print):
        super().__init__()
        self.print_fn = print_fn
        self.learning_rates: list[float] = []

    def on_epoch_end(self, epoch, logs=None):
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        self.learning_rates.append(lr)
        self.print_fn(f"Learning rate for epoch {epoch + 1} is {lr:.6g}")


class Throughput(keras.callbacks.Callback):
    """Record each training epoch's wall time and images/s.

    ``examples_per_epoch`` is the number of training examples one epoch sees
    (counting examples rather than batches stays right with ``steps_per_execution``
    and a partial last batch). The first epoch includes tracing and compilation;
    :attr:`steady_images_per_sec` averages the later ones when there are any.
    """

    def __init__(self, examples_per_epoch: int, print_fn=None):
        super().__init__()
        if examples_per_epoch < 1:
            raise ValueError(f"examples_per_epoch must be >= 1, got {examples_per_epoch}")
        self.examples_per_epoch = examples_per_epoch
        self.print_fn = print_fn
        self.epoch_seconds: list[float] = []
        self.images_per_sec: list[float] = []
        self._watch = Stopwatch()

    def on_epoch_begin(self, epoch, logs=None):
        self._watch.start()

    def on_epoch_end(self, epoch, logs=None):
        seconds = self._watch.stop()
        self.epoch_seconds.append(seconds)
        self.images_per_sec.append(throughput(self.examples_per_epoch, seconds))
        if self.print_fn:
            self.print_fn(f"Epoch {epoch + 1}: {seconds:.1f} s, {self.images_per_sec[-1]:.0f} images/s")

    @property
    def steady_images_per_sec(self) -> float:
        if not self.images_per_sec:
            raise RuntimeError("no epoch has finished yet")
        later = self.images_per_sec[1:] or self.images_per_sec
        return sum(later) / len(later)
