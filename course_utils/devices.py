"""Device set-up for the notebooks: real GPUs when present, else logical CPU devices.

TensorFlow fixes its logical devices the first time it runs an op, so
:func:`simulate_devices` must run in the first code cell of a notebook, before
anything else touches TensorFlow.
"""

from __future__ import annotations

import os
import sys
import warnings

_configured: int | None = None  # replicas configured by this module in this process


class DeviceConfigError(RuntimeError):
    """The requested device layout cannot be set up in this process."""


def _import_tensorflow_without_startup_lines():
    """Import TensorFlow with file descriptor 2 pointed at /dev/null.

    TensorFlow's C++ runtime writes start-up lines (oneDNN, CUDA probing, with
    timestamps) to stderr before its log level can apply. They differ on every
    run, which makes notebook outputs differ too. Python exceptions still
    propagate normally.
    """
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401, PLC0415
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def quiet_tensorflow() -> None:
    """Silence TensorFlow's C++ and Python log lines (they vary from run to run).

    Call before importing TensorFlow for full effect; calling later still
    quiets the Python logger.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _import_tensorflow_without_startup_lines()
    import tensorflow as tf  # noqa: PLC0415

    tf.get_logger().setLevel("ERROR")
    # Keras warns on every fit() with a tf.data.Dataset that its (default) shuffle=True is
    # ignored; the course's pipelines shuffle in tf.data, so the warning is only noise.
    warnings.filterwarnings("ignore", message="`shuffle=True` was passed", category=UserWarning)
    try:
        import absl.logging  # noqa: PLC0415

        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:  # pragma: no cover - absl ships with TensorFlow
        pass


def simulate_devices(n: int = 2, *, verbose: bool = True) -> list[str]:
    """Make ``n`` devices available to ``tf.distribute`` and return their names.

    - With GPUs present, the real GPUs are used as they are (all of them;
      ``n`` is ignored) so that a notebook runs unchanged on a GPU node.
    - Without GPUs, the one physical CPU is split into ``n`` logical CPU
      devices, which ``tf.distribute.MirroredStrategy()`` then uses as replicas.

    Safe to call twice in one kernel with the same ``n`` (a no-op). Asking for
    a different ``n`` after TensorFlow has started raises
    :class:`DeviceConfigError` telling the user to restart the kernel.
    """
    global _configured
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"simulate_devices(n): n must be a positive integer, got {n!r}")

    quiet_tensorflow()
    import tensorflow as tf  # noqa: PLC0415

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = [d.name for d in tf.config.list_logical_devices("GPU")]
        if verbose:
            print(f"Using {len(names)} real GPU(s): {', '.join(names)}")
        _configured = len(names)
        return names

    if _configured == n:
        names = [d.name for d in tf.config.list_logical_devices("CPU")]
        if verbose:
            print(f"Already set up: {len(names)} logical CPU devices (no change).")
        return names

    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    except RuntimeError as err:
        current = len(tf.config.list_logical_devices("CPU"))
        if current == n:  # TensorFlow already started with the layout we want
            _configured = n
            names = [d.name for d in tf.config.list_logical_devices("CPU")]
            if verbose:
                print(f"Already set up: {n} logical CPU devices (no change).")
            return names
        raise DeviceConfigError(
            f"Cannot switch to {n} logical CPU device(s): TensorFlow has already started "
            f"with {current}. Restart the kernel (Kernel > Restart) and run the notebook "
            f"from the top, with simulate_devices({n}) in the first code cell."
        ) from err
    _configured = n
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if verbose:
        print(f"No GPU found: simulating {len(names)} devices with logical CPU devices: "
              f"{', '.join(names)}")
    return names


def recommended_cross_device_ops():
    """How ``MirroredStrategy`` should combine gradients on the devices ``simulate_devices`` set up.

    On logical CPU devices TensorFlow's default is collective all-reduce, which (TF 2.21,
    Keras 3.15, measured here) fails inside loops compiled into one ``tf.function``
    (``Model.fit`` with ``steps_per_execution`` > 1, or a custom multi-step loop) with
    "You must feed a value for placeholder tensor". Reducing through one device works
    there at about the same speed (``benchmarks/cross_device_ops.py``), so on a CPU-only
    machine this returns ``tf.distribute.ReductionToOneDevice()``. With GPUs it returns ``None``:
    TensorFlow's own choice (NCCL) is the right one there.
    """
    import tensorflow as tf  # noqa: PLC0415

    if tf.config.list_physical_devices("GPU"):
        return None
    return tf.distribute.ReductionToOneDevice()
