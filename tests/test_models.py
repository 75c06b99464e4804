import keras
import numpy as np
import pytest

from course_utils import models


def test_cnn_layers_and_parameter_count():
    model = models.build_cnn()
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds == ["Conv2D", "Conv2D", "Flatten", "Dense", "Dense"]
    conv1 = 32 * (3 * 3 * 1 + 1)
    conv2 = 64 * (3 * 3 * 32 + 1)
    dense = (24 * 24 * 64 + 1) * 64
    logits = (64 + 1) * 10
    assert model.count_params() == conv1 + conv2 + dense + logits == 2_378_826


def test_cnn_outputs_logits_for_other_shapes():
    model = models.build_cnn((32, 32, 3), 7)
    out = model(np.zeros((2, 32, 32, 3), np.float32))
    assert out.shape == (2, 7)
    assert model.layers[-1].activation is keras.activations.linear


def test_variable_paths_are_stable_across_models():
    first, second = models.build_cnn(), models.build_cnn(l2=1e-4)
    paths = [v.path for v in first.trainable_variables]
    assert paths == [v.path for v in second.trainable_variables]
    assert paths[:2] == ["cnn/conv1/kernel", "cnn/conv1/bias"] and paths[-1] == "cnn/logits/bias"


def test_l2_regularizer_adds_one_loss_per_layer():
    model = models.build_cnn(l2=1e-3)
    model(np.zeros((1, 28, 28, 1), np.float32))
    assert len(model.losses) == 4
    assert all(float(loss) > 0 for loss in model.losses)
    assert models.build_cnn().losses == []


@pytest.mark.parametrize("kwargs, message", [
    ({"input_shape": (28, 28)}, "input_shape"),
    ({"input_shape": (28, 0, 1)}, "input_shape"),
    ({"num_classes": 1}, "num_classes"),
    ({"l2": -1.0}, "l2 must be"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        models.build_cnn(**kwargs)


def test_the_cnns_gradients_in_1_mb_packs_make_two_all_reduces():
    """Notebook 05b teaches it: TensorFlow packs whole gradients and never splits one, and the Dense
    kernel alone is 9.4 MB, so 1 MB and 4 MB packs both make two all-reduces (fails if TensorFlow changes)."""
    import tensorflow as tf
    from tensorflow.python.distribute import cross_device_utils

    grads = [tf.zeros(v.shape) for v in models.build_cnn().trainable_variables]
    assert [len(cross_device_utils.group_by_size(grads, int(mb * 1e6))) for mb in (0, 1, 4)] == [1, 2, 2]
