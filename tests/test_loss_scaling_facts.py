"""What notebooks 02 and 03 (and their deeper notebooks) teach about loss scaling, checked against the
installed Keras and TensorFlow.

When a test here fails, Keras or TensorFlow changed what the notebooks teach: update the notebook named
in the test, then the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

# Two logical CPU devices need a process of their own: devices are fixed once per process.
FIT_ON_AN_UNEVEN_BATCH = textwrap.dedent("""
    import json, os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras

    rng = np.random.default_rng(0)
    x, y = rng.random((7, 6, 6, 1), dtype=np.float32), rng.integers(0, 3, 7)  # batches of 4: 2+2, then 2+1
    keras.utils.set_random_seed(1)
    initial = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(),
                                keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.01))]).get_weights()
    LR = 0.1

    class LastStep(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.before = self.model.get_weights()
        def on_train_batch_end(self, batch, logs=None):
            self.after = self.model.get_weights()

    def fit(strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.01))])
            model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.SGD(LR),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        last = LastStep()
        loss = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=1, verbose=0,
                         callbacks=[last]).history["loss"][0]
        return [(b - a) / LR for b, a in zip(last.before, last.after)], last.before, loss

    def gradient(weights, example_weights):  # of sum(w_i * loss_i) + L2, on the last batch (x[4:])
        model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.01))])
        model.set_weights(weights)
        per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.constant(example_weights, tf.float32) * per_example(y[4:], model(x[4:])))
            loss += tf.add_n(model.losses)
        return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two, start, two_loss = fit(mirrored)
    one, one_start, one_loss = fit(tf.distribute.OneDeviceStrategy("/cpu:0"))
    flat = lambda grads: np.concatenate([g.ravel() for g in grads]).tolist()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    labels, logits = tf.constant([0, 1, 2, 0]), tf.random.stateless_normal([4, 3], seed=[0, 1])
    in_replica = mirrored.experimental_local_results(mirrored.run(lambda: loss_fn(labels, logits)))
    print(json.dumps({
        "fit_two": flat(two), "fit_one": flat(one), "loss_two": two_loss, "loss_one": one_loss,
        "replicas_equal": flat(gradient(start, [1 / 4, 1 / 4, 1 / 2])),   # (mean of 2) / 2 + (mean of 1) / 2
        "examples_equal": flat(gradient(start, [1 / 3] * 3)),
        "start_gap": float(max(np.abs(a - b).max() for a, b in zip(start, one_start))),
        "in_replica_ratio": [float(v / loss_fn(labels, logits)) for v in in_replica],
    }))
    """)


@pytest.fixture(scope="module")
def uneven() -> dict:
    done = subprocess.run([sys.executable, "-c", FIT_ON_AN_UNEVEN_BATCH], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {k: np.asarray(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def test_keras3_loss_in_a_replica_is_divided_by_the_replica_count(uneven):
    """Notebook 02: the loss object's default reduction scales by 1/num_replicas_in_sync in a replica."""
    np.testing.assert_allclose(uneven["in_replica_ratio"], [0.5, 0.5], rtol=1e-6)


def test_keras3_fit_weighs_replicas_equally_on_an_uneven_last_batch(uneven):
    """Deeper notebook 03, section 3: on a last batch split 2 + 1, fit's step is recipe (b), not one device's."""
    assert uneven["start_gap"] < 1e-5, "the even first batch gave different weights: the comparison is off"
    np.testing.assert_allclose(uneven["fit_two"], uneven["replicas_equal"], atol=1e-5)
    np.testing.assert_allclose(uneven["fit_one"], uneven["examples_equal"], atol=1e-5)
    gap = np.abs(uneven["fit_two"] - uneven["fit_one"]).max()
    assert gap > 1e-3, "fit on 2 replicas now weighs examples equally: notebook 03 says it does not"


def test_keras3_fit_logs_the_mean_loss_over_the_examples(uneven):
    """Notebooks 02/03: fit multiplies the logged loss back by the replica count (not halved on 2 replicas)."""
    assert uneven["loss_two"] == pytest.approx(uneven["loss_one"], rel=1e-5)


def first_step(optimizer, gradient: np.ndarray) -> np.ndarray:
    variable = keras.Variable(np.zeros_like(gradient))
    optimizer.apply_gradients([(keras.ops.convert_to_tensor(gradient), variable)])
    return -keras.ops.convert_to_numpy(variable)


def test_sgd_steps_scale_with_the_gradient_and_adam_steps_nearly_do_not():
    """Deeper notebook 03, section 2, bug (a): SGD takes an N-times step; Adam cancels a constant factor
    except near its epsilon.

    Keras' Adam adds epsilon after the bias correction, so at step t it acts as
    epsilon / sqrt(1 - beta_2**t): about 3.2e-6 at the first step for the defaults (1e-7, 0.999). Its first
    step is then lr * g / (|g| + that), so twice the gradient moves a weight 2 (|g| + e) / (2 |g| + e) times as far.
    """
    gradient = np.array([1e-1, 1e-3, 1e-5, 3.1623e-6, 1e-7, 1e-9], np.float32)
    sgd = first_step(keras.optimizers.SGD(0.1), 2 * gradient) / first_step(keras.optimizers.SGD(0.1), gradient)
    np.testing.assert_allclose(sgd, 2.0, rtol=1e-6)
    adam = keras.optimizers.Adam(1e-3)
    assert (adam.epsilon, adam.beta_2) == pytest.approx((1e-7, 0.999))
    ratio = first_step(keras.optimizers.Adam(1e-3), 2 * gradient) / first_step(keras.optimizers.Adam(1e-3), gradient)
    effective = adam.epsilon / np.sqrt(1 - adam.beta_2)
    np.testing.assert_allclose(ratio, 2 * (gradient + effective) / (2 * gradient + effective), rtol=1e-3)
    assert abs(ratio[0] - 1) < 1e-4 and ratio[3] == pytest.approx(4 / 3, rel=1e-3) and ratio[-1] > 1.99
