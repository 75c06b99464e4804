import keras
import numpy as np
import pytest

from course_utils import callbacks


@pytest.mark.parametrize("epoch, lr", [(0, 1e-3), (2, 1e-3), (3, 1e-4), (6, 1e-4), (7, 1e-5), (30, 1e-5)])
def test_decay_schedule(epoch, lr):
    assert callbacks.decay(epoch) == lr


def _tiny_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, epochs, cbs, n=40):
    x = np.random.default_rng(0).normal(size=(n, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    return model.fit(x, y, batch_size=8, epochs=epochs, verbose=0, callbacks=cbs)


def test_print_lr_reads_learning_rate_set_by_scheduler():
    lines = []
    print_lr = callbacks.PrintLR(print_fn=lines.append)
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch: 0.5 ** (epoch + 1))
    _fit(_tiny_model(), 3, [schedule, print_lr])
    assert print_lr.learning_rates == [0.5, 0.25, 0.125]
    assert lines == ["Learning rate for epoch 1 is 0.5", "Learning rate for epoch 2 is 0.25",
                     "Learning rate for epoch 3 is 0.125"]


def test_throughput_records_each_epoch():
    lines = []
    meter = callbacks.Throughput(examples_per_epoch=40, print_fn=lines.append)
    _fit(_tiny_model(), 3, [meter])
    assert len(meter.epoch_seconds) == len(meter.images_per_sec) == 3 == len(lines)
    for seconds, rate in zip(meter.epoch_seconds, meter.images_per_sec):
        assert seconds > 0 and rate == pytest.approx(40 / seconds)
    assert meter.steady_images_per_sec == pytest.approx(np.mean(meter.images_per_sec[1:]))
    assert lines[0].startswith("Epoch 1: ") and lines[0].endswith("images/s")


def test_throughput_rejects_bad_input_and_early_reads():
    with pytest.raises(ValueError, match="examples_per_epoch"):
        callbacks.Throughput(0)
    with pytest.raises(RuntimeError, match="no epoch"):
        callbacks.Throughput(10).steady_images_per_sec
