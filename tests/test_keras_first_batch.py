"""Keras 3 under MirroredStrategy averages the *first* batch of ``fit``/``evaluate`` over the replicas.

``keras/src/backend/tensorflow/trainer.py`` ``_maybe_symbolic_build`` calls ``strategy.reduce("MEAN", ...)``
on the first distributed batch to build the model (since keras-team/keras#20051); replicas' pieces of
different sizes make that sum fail ("Inputs to operation AddN ... must have the same size and shape").
The notebooks therefore give ``evaluate`` a first batch that is a multiple of the replica count, and their
``check-parameters`` cells refuse test sets whose first batch cannot split (``course_utils.parameters``).

Each case runs in a fresh process: it needs 3 logical devices, and devices are fixed once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.notebook  # TensorFlow processes of their own

SETUP = textwrap.dedent("""
    import json, os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
    import keras

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    rng = np.random.default_rng(0)
    x, y = rng.random((500, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 500)

    def build():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        return model

    with strategy.scope():
        mirrored = build()
    one_device = build()
    one_device.set_weights(mirrored.get_weights())
    """)


def run(body: str, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SETUP + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_uneven_first_batch_still_fails_in_keras():
    """When this fails, Keras has fixed it: drop the multiple-of-replicas test batch in notebook 04, the
    first-batch part of ``parameters.batches_split``, and this test."""
    out = run("""
        try:
            mirrored.evaluate(tf.data.Dataset.from_tensor_slices((x, y)).batch(500), verbose=0)  # 167/167/166
            print(json.dumps({"failed": False}))
        except tf.errors.InvalidArgumentError as error:
            print(json.dumps({"failed": True, "message": str(error)}))
        """)
    assert out["failed"], "Keras 3 evaluates an uneven first batch under MirroredStrategy now: remove the workaround"
    assert "AddN" in out["message"] and "must have the same size and shape" in out["message"]


def test_a_first_batch_that_is_a_multiple_of_the_replicas_gives_the_one_device_accuracy():
    out = run("""
        batch = 3 * (500 // 3)  # 498, then 2 examples: only the first batch must split evenly
        _, accuracy = mirrored.evaluate(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), verbose=0)
        _, reference = one_device.evaluate(x, y, batch_size=500, verbose=0)
        print(json.dumps({"accuracy": accuracy, "reference": reference}))
        """)
    assert out["accuracy"] == out["reference"]


@pytest.mark.parametrize("onednn", ["1", "0"])
def test_a_later_batch_that_leaves_a_replica_empty_fails_in_onednn_s_convolution(onednn):
    """498 + 2 examples of a CNN: the last batch gives the third replica nothing. With oneDNN's kernels
    (TensorFlow's default on x86 CPUs with AVX-512 VNNI/BF16 or AMX, forced here by
    ``TF_ENABLE_ONEDNN_OPTS=1``) the empty piece fails in the convolution; Eigen's kernels (the default on
    other CPUs, forced by ``=0``) take it. The check guards the failing case, so that a notebook runs on
    both. When the oneDNN case stops failing, TensorFlow has fixed it: drop the last-batch part of
    ``parameters.batches_split`` and this test."""
    out = run("""
        with strategy.scope():
            keras.utils.set_random_seed(1)
            cnn = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
                                    keras.layers.Conv2D(8, 3), keras.layers.Flatten(), keras.layers.Dense(10)])
            cnn.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        try:
            cnn.evaluate(tf.data.Dataset.from_tensor_slices((x, y)).batch(498), verbose=0)
            print(json.dumps({"failed": False}))
        except tf.errors.InvalidArgumentError as error:
            print(json.dumps({"failed": True, "message": str(error)}))
        """, TF_ENABLE_ONEDNN_OPTS=onednn)
    if onednn == "1":
        assert out["failed"], "an empty replica piece works in oneDNN's convolution now: remove the last-batch check"
        assert "input depth must be evenly divisible by filter depth" in out["message"]
    else:
        assert not out["failed"], f"Eigen's convolution fails on an empty replica piece too now: {out}"
