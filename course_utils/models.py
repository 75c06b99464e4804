"""The course's CNN builders (Keras 3). Build them inside ``strategy.scope()``."""

from __future__ import annotations


def _regularizer(l2: float | None):
    import keras  # noqa: PLC0415

    if l2 is None or l2 == 0:
        return None
    if l2 < 0:
        raise ValueError(f"l2 must be >= 0, got {l2}")
    return keras.regularizers.L2(l2)


def _check(input_shape, num_classes):
    if len(tuple(input_shape)) != 3 or any(int(d) < 1 for d in input_shape):
        raise ValueError(f"input_shape must be (height, width, channels), got {input_shape!r}")
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")


def build_cnn(input_shape=(28, 28, 1), num_classes: int = 10, *, l2: float | None = None):
    """The seeds' CNN: Conv2D 32 -> Conv2D 64 -> Flatten -> Dense 64 -> Dense ``num_classes``.

    3x3 convolutions with ReLU and no pooling; the last layer outputs logits. The layers have
    fixed names (``conv1``, ``conv2``, ``flatten``, ``dense``, ``logits``), so variable paths such as
    ``cnn/conv1/kernel`` are the same however many models a notebook builds.
    ``l2`` adds an L2 kernel regularizer of that strength to every layer
    (its losses appear in ``model.losses``).
    """
    import keras  # noqa: PLC0415

    _check(input_shape, num_classes)
    reg = _regularizer(l2)
    return keras.Sequential(
        [
            keras.Input(shape=tuple(input_shape)),
            keras.layers.Conv2D(32, 3, activation="relu", kernel_regularizer=reg, name="conv1"),
            keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=reg, name="conv2"),
            keras.layers.Flatten(name="flatten"),
            keras.layers.Dense(64, activation="relu", kernel_regularizer=reg, name="dense"),
            keras.layers.Dense(num_classes, kernel_regularizer=reg, name="logits"),
        ],
        name="cnn",
    )
