import gc
import time

import keras
import numpy as np
import pytest

from course_utils import callbacks


def _tiny_model(*layers):
    model = keras.Sequential([keras.Input((3,)), *layers, keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _data(n=40):
    x = np.random.default_rng(0).normal(size=(n, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int64")


class _CountTraces(keras.layers.Layer):
    """Passes its input on; its Python ``call`` runs only while Keras traces a function, never in a
    compiled step, so :attr:`traces` counts tracings."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.traces = 0

    def call(self, x):
        self.traces += 1
        return x


class _TracesInFirstBatch(keras.callbacks.Callback):
    """For each epoch, how many tracings happened during its first training batch."""

    def __init__(self, layer):
        super().__init__()
        self.layer, self.per_epoch = layer, []

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self._before = self.layer.traces

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            self.per_epoch.append(self.layer.traces - self._before)


class _SlowEpochEnd(keras.callbacks.Callback):
    """Stands in for validation or a checkpoint save: work after the last training batch."""

    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.3)


class _SlowEpochBegin(keras.callbacks.Callback):
    """Work at the start of an epoch, before its first training batch."""

    def on_epoch_begin(self, epoch, logs=None):
        time.sleep(0.2)


def test_throughput_reports_time_before_the_first_batch():
    meter = callbacks.Throughput(examples_per_epoch=40)
    x, y = _data()
    _tiny_model().fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[meter, _SlowEpochBegin()])
    assert min(meter.before_training_seconds) >= 0.2
    assert min(meter.outside_steps_seconds) >= 0.2  # the time before the first batch is outside the steps too
    # the wall time splits exactly into before / steps / after: the 0.2 s is counted once, before the steps
    for parts in zip(meter.before_training_seconds, meter.epoch_seconds, meter.after_training_seconds,
                     meter.epoch_wall_seconds):
        assert min(parts) >= 0 and sum(parts[:3]) == pytest.approx(parts[3])


def test_throughput_times_training_steps_only():
    lines = []
    meter = callbacks.Throughput(examples_per_epoch=40, print_fn=lines.append)
    x, y = _data()
    # validation data and a slow epoch-end callback: neither may count as training time,
    # and the slow callback (listed before the meter) shows in the time after training
    _tiny_model().fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(x, y),
                      callbacks=[_SlowEpochEnd(), meter])
    assert len(meter.epoch_seconds) == len(meter.images_per_sec) == len(meter.first_step_seconds) == 3
    assert len(meter.after_training_seconds) == 3 and min(meter.after_training_seconds) >= 0.3
    for parts in zip(meter.before_training_seconds, meter.epoch_seconds, meter.after_training_seconds,
                     meter.epoch_wall_seconds):
        assert min(parts) >= 0 and sum(parts[:3]) == pytest.approx(parts[3])
    # each epoch's time outside its steps: the epoch's wall time less its steps, the slow callback in it
    assert meter.outside_steps_seconds == pytest.approx([w - s for w, s in zip(meter.epoch_wall_seconds,
                                                                              meter.epoch_seconds)])
    assert min(meter.outside_steps_seconds) >= 0.3
    for seconds, rate, first in zip(meter.epoch_seconds, meter.images_per_sec, meter.first_step_seconds):
        assert 0 < first <= seconds
        assert rate == pytest.approx(40 / seconds)
    assert lines[0].startswith("Epoch 1: training steps ") and lines[0].endswith(" images/s")
    assert len(lines) == 3


def test_first_step_of_first_epoch_includes_tracing():
    meter = callbacks.Throughput(examples_per_epoch=40)
    layer = _CountTraces()
    traces = _TracesInFirstBatch(layer)
    x, y = _data()
    gc.disable()  # no collection pause in a later epoch's first step
    try:
        # Keras calls the callbacks' batch hooks in list order around each step: the tracing that
        # `traces` sees in a first batch happened between the meter's start and end of that step
        _tiny_model(layer).fit(x, y, batch_size=8, epochs=4, verbose=0, callbacks=[meter, traces])
    finally:
        gc.enable()
    # without a clock: epoch 1's first step traced the training function, the later epochs' did not
    assert traces.per_epoch[0] >= 1 and traces.per_epoch[1:] == [0, 0, 0], traces.per_epoch
    assert len(meter.first_step_seconds) == 4
    assert all(0 < first <= seconds for first, seconds in zip(meter.first_step_seconds, meter.epoch_seconds))
    # and with one: tracing (a large part of a second) takes longer than the quickest of three later
    # first steps (a millisecond each, unless every one of them stalls)
    assert meter.first_step_seconds[0] > min(meter.first_step_seconds[1:]), meter.first_step_seconds


def test_throughput_rejects_bad_input():
    with pytest.raises(ValueError, match="examples_per_epoch"):
        callbacks.Throughput(0)
    with pytest.raises(RuntimeError, match="no training batch"):
        callbacks.Throughput(10).on_epoch_end(0)


def test_throughput_fingerprints_the_weights_training_started_from():
    from course_utils import checkpoints

    x, y = _data()
    keras.utils.set_random_seed(0)
    first = _tiny_model()
    keras.utils.set_random_seed(0)
    second = _tiny_model()
    before = checkpoints.fingerprint(first.get_weights())
    meters = [callbacks.Throughput(40), callbacks.Throughput(40)]
    first.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[meters[0]])
    assert meters[0].initial_weights_fingerprint == before != checkpoints.fingerprint(first.get_weights())
    first.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[meters[0]])  # a second fit keeps the first start
    assert meters[0].initial_weights_fingerprint == before
    second.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[meters[1]])
    assert meters[1].initial_weights_fingerprint == before  # the same seed: the same start


class _SlowTrainEnd(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        self.began = time.perf_counter()
        time.sleep(0.3)


def _slow_to_delete(deleted, n=40, seconds=0.5):
    """An endless dataset whose iterator, when deleted, closes its generator, which then notes the time in
    ``deleted`` and sleeps ``seconds``."""
    import tensorflow as tf  # noqa: PLC0415

    x, y = _data(n)

    def generate():
        try:
            while True:
                yield from zip(x, y)
        finally:
            deleted.append(time.perf_counter())
            time.sleep(seconds)

    spec = (tf.TensorSpec((3,), tf.float32), tf.TensorSpec((), tf.int64))
    return tf.data.Dataset.from_generator(generate, output_signature=spec).batch(8)


def test_throughput_marks_the_end_of_training_so_that_fit_s_last_deletion_can_be_timed():
    meter, slow = callbacks.Throughput(examples_per_epoch=40), _SlowTrainEnd()
    x, y = _data()
    model = _tiny_model()
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[slow, meter])
    assert meter.train_end_time - meter.last_epoch_end_time >= 0.3  # the on_train_end of the callbacks listed before it
    assert slow.began < meter.train_end_time
    mark, slow = callbacks.TrainEndMark(), _SlowTrainEnd()  # the mark, listed first, comes before them
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[mark, slow, meter])
    assert meter.last_epoch_end_time <= mark.time < slow.began < meter.train_end_time
    # the same meter in a fit that trains no epoch (resuming at its last): nothing of the first fit's is kept
    model.fit(x, y, batch_size=8, epochs=2, initial_epoch=2, verbose=0, callbacks=[meter])
    assert meter.last_epoch_end_time is None and meter.train_end_time is not None
    meter, deleted = callbacks.Throughput(examples_per_epoch=40), []
    # steps_per_epoch: Keras 3 keeps one iterator for the whole fit and deletes it as fit returns
    _tiny_model().fit(_slow_to_delete(deleted), epochs=2, steps_per_epoch=5, verbose=0, callbacks=[meter])
    assert len(deleted) == 1 and meter.train_end_time <= deleted[0]  # deleted after on_train_end
    assert time.perf_counter() - meter.train_end_time >= 0.5  # so fit's last 0.5 s are timed from it


class _TrainBegin(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.time = time.perf_counter()


def test_fit_s_last_wait_holds_its_final_deletions_under_mirrored_strategy_with_gc_off():
    """As notebook 04 times its runs: collection off, ``MirroredStrategy`` over the two logical devices, a
    dataset of known length and no ``steps_per_epoch`` (Keras 3 makes iterators each epoch). A used iterator
    is deleted when its references go, not by a later collection: epoch 1's as epoch 2 begins (in the
    epoch-start wait), the last epoch's after ``on_train_end``, before ``fit`` returns: in the last wait."""
    import tensorflow as tf  # noqa: PLC0415

    deleted, epochs = [], 3
    # 5 batches an epoch of an endless generator (not take(5): take drops its input, and so closes the
    # generator, as it reaches its count): its `finally` runs when Keras deletes the iterator
    data = _slow_to_delete(deleted, seconds=0.4).apply(tf.data.experimental.assert_cardinality(5))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        model = _tiny_model()
    meter, mark, began = callbacks.Throughput(examples_per_epoch=40), callbacks.TrainEndMark(), _TrainBegin()
    gc.collect()
    gc.disable()
    try:
        model.fit(data, epochs=epochs, verbose=0, callbacks=[began, mark, meter])
        returned = time.perf_counter()
    finally:
        gc.enable()
    # (fit's symbolic build under the scope pulls a batch from an iterator of its own, deleted before training)
    during = [t for t in deleted if began.time <= t <= returned]
    assert len(during) == epochs, (deleted, began.time)  # every epoch's used iterator, with no collection
    later = [t for t in during if t >= meter.train_end_time]
    assert len(later) == 1, (deleted, meter.train_end_time, returned)  # the last epoch's, as fit returns
    last_wait = (mark.time - meter.last_epoch_end_time) + (returned - meter.train_end_time)
    assert last_wait >= 0.4  # its sleep is in the last wait
    # and each later epoch's start waited for the deletion of the iterator its predecessor used
    assert all(wait >= 0.4 for wait in meter.before_training_seconds[1:]), meter.before_training_seconds
