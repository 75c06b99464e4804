"""Device set-up for the notebooks: the same cells run on a CPU, on one GPU and on many GPUs.

:func:`simulate_devices` gives ``tf.distribute.MirroredStrategy()`` exactly ``n`` devices, so
the course's 2- and 3-replica comparisons have their replicas everywhere:

- no GPU: the one physical CPU is split into ``n`` logical CPU devices;
- ``n`` or more GPUs: only the first ``n`` real GPUs are made visible;
- 1 to ``n - 1`` GPUs: every GPU is split into logical GPUs, ``n`` in all, as evenly as possible
  (a one-GPU Colab: GPU:0 into ``n``; two GPUs and ``n = 3``: two on GPU:0, one on GPU:1), so that
  no GPU stays idle. Replicas sharing a GPU share its compute; ``n`` = the GPU count uses them whole.

:func:`plan_devices` decides without TensorFlow (testable without GPUs), and
:func:`recommended_cross_device_ops` picks how gradients are combined on the devices configured.
TensorFlow fixes its devices the first time it runs an op, so :func:`simulate_devices` must run
in the first code cell of a notebook, before anything else touches TensorFlow.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from dataclasses import dataclass

_LABELS = {"cpu": "logical CPU device", "gpu": "GPU", "logical_gpu": "logical GPU"}


@dataclass(frozen=True)
class DevicePlan:
    """``count`` devices of one ``kind``: ``"cpu"`` (logical CPU devices), ``"gpu"`` (real
    GPUs) or ``"logical_gpu"`` (GPUs split, ``gpu_memory_mb`` each, ``split[i]`` of them on
    physical GPU ``i``), and a ``description``."""

    kind: str
    count: int
    description: str
    gpu_memory_mb: int | None = None
    split: tuple[int, ...] = ()

    @property
    def device_type(self) -> str:
        return "CPU" if self.kind == "cpu" else "GPU"


_configured: DevicePlan | None = None  # the layout this module set up in this process


class DeviceConfigError(RuntimeError):
    """The requested device layout cannot be set up in this process."""


def _import_tensorflow_without_startup_lines():
    """Import TensorFlow with file descriptor 2 pointed at /dev/null.

    TensorFlow's C++ runtime writes start-up lines (oneDNN, CUDA probing, with
    timestamps) to stderr before its log level can apply. They differ on every
    run, which makes notebook outputs differ too. Python exceptions still
    propagate normally.

    The import runs with the garbage collector paused. Collecting while it made its ~300,000 objects cost
    about 0.5 of its ~3.3 CPU-seconds on the course's 2-core machine, in every process (a cluster's workers
    each import TensorFlow). Afterwards ``gc.freeze()`` moves every object the collector tracks, TensorFlow's
    and the caller's, out of later collections, so that each full one stops going through them.
    Unreferenced objects are still freed; cycles among the frozen ones never are (the import leaves few).
    """
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    collecting = gc.isenabled()
    try:
        gc.disable()
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401, PLC0415

        gc.freeze()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
        if collecting:
            gc.enable()


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


def _plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def plan_devices(n: int, num_physical_gpus: int, gpu_memory_mb: int = 1024) -> DevicePlan:
    """Decide how to give ``MirroredStrategy`` ``n`` devices on a machine with that many GPUs.

    Real GPUs are preferred: GPUs are split only when there are too few, since logical GPUs
    share one card's compute (they demonstrate tf.distribute, not a speed-up). Then every GPU
    is split, the first ones taking one more when ``n`` does not divide evenly, so none is idle.
    """
    _check_positive_int("n", n)
    _check_positive_int("gpu_memory_mb", gpu_memory_mb)
    if not isinstance(num_physical_gpus, int) or num_physical_gpus < 0:
        raise ValueError(f"num_physical_gpus must be a non-negative integer, got {num_physical_gpus!r}")
    if num_physical_gpus == 0:
        return DevicePlan("cpu", n, f"No GPU found: simulating {_plural(n, 'device')} with logical CPU devices")
    if num_physical_gpus == n:
        return DevicePlan("gpu", n, f"Using {_plural(n, 'real GPU')}")
    if num_physical_gpus > n:
        shown = ", ".join(f"GPU:{i}" for i in range(n))
        return DevicePlan("gpu", n, f"{_plural(num_physical_gpus, 'physical GPU')}: making {shown} "
                                    f"visible (MirroredStrategy uses every visible GPU)")
    base, extra = divmod(n, num_physical_gpus)
    split = tuple(base + (i < extra) for i in range(num_physical_gpus))
    gpus = _plural(num_physical_gpus, "physical GPU")
    if num_physical_gpus == 1:
        return DevicePlan("logical_gpu", n, f"{gpus}: split GPU:0 into {n} logical GPUs of {gpu_memory_mb} MB "
                                            f"each (MirroredStrategy needs {n} devices)", gpu_memory_mb, split)
    shares = ", ".join(f"{k} on GPU:{i}" for i, k in enumerate(split))
    return DevicePlan("logical_gpu", n, f"{gpus}: split into {n} logical GPUs ({shares}) of {gpu_memory_mb} MB each "
                                        f"(MirroredStrategy needs {n} devices; replicas on one GPU share it, "
                                        f"NUM_DEVICES = {num_physical_gpus} uses each GPU whole)", gpu_memory_mb, split)


def _apply(tf, plan: DevicePlan, gpus: list) -> None:
    """Configure TensorFlow for ``plan``; raises RuntimeError once TensorFlow has started."""
    if plan.kind == "cpu":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(plan.count)])
    elif plan.kind == "gpu":
        tf.config.set_visible_devices(gpus[:plan.count], "GPU")
    else:
        used = gpus[:len(plan.split)]
        tf.config.set_visible_devices(used, "GPU")
        for gpu, count in zip(used, plan.split):
            tf.config.set_logical_device_configuration(gpu, [
                tf.config.LogicalDeviceConfiguration(memory_limit=plan.gpu_memory_mb) for _ in range(count)])


def simulate_devices(n: int = 2, *, gpu_memory_mb: int = 1024, verbose: bool = True) -> list[str]:
    """Give ``tf.distribute`` exactly ``n`` devices, print what was done, return their names.

    :func:`plan_devices` chooses the layout; ``gpu_memory_mb`` is each logical GPU's memory
    when a GPU has to be split. Calling again with the same arguments is a no-op; another
    layout after TensorFlow has started raises :class:`DeviceConfigError` telling the user to
    restart the kernel (TensorFlow cannot change its devices once it runs).
    """
    global _configured
    _check_positive_int("n", n)  # before TensorFlow starts: a typo should not cost a restart
    _check_positive_int("gpu_memory_mb", gpu_memory_mb)

    quiet_tensorflow()
    import tensorflow as tf  # noqa: PLC0415

    gpus = tf.config.list_physical_devices("GPU")
    plan = plan_devices(n, len(gpus), gpu_memory_mb)
    unchanged = _configured == plan
    if not unchanged:
        try:
            _apply(tf, plan, gpus)
        except RuntimeError as err:
            current = len(tf.config.list_logical_devices(plan.device_type))
            if _configured is not None or current != n:  # else: TF started with this layout already
                raise DeviceConfigError(
                    f"Cannot switch to this layout ({plan.description}): TensorFlow has already "
                    f"started with {_plural(current, plan.device_type + ' device')}. Restart the kernel "
                    f"(Kernel > Restart) and run the notebook from the top, with "
                    f"simulate_devices({n}) in the first code cell.") from err
            unchanged = True
    _configured = plan
    names = [d.name for d in tf.config.list_logical_devices(plan.device_type)]
    if verbose:
        print(f"Already set up: {_plural(len(names), _LABELS[plan.kind])} (no change)." if unchanged
              else f"{plan.description}: {', '.join(names)}")
    return names


def needs_reduction_to_one_device(num_physical_gpus: int, num_logical_gpus: int) -> bool:
    """Whether ``MirroredStrategy`` should get ``ReductionToOneDevice`` instead of its default.

    Counts: visible physical GPUs, and logical GPUs made of them. True on CPUs (no logical
    GPU) and on split GPUs (more logical than physical), False when every device is a whole
    physical GPU (TensorFlow's default then uses NCCL); see :func:`recommended_cross_device_ops`.
    """
    return num_logical_gpus == 0 or num_logical_gpus > num_physical_gpus


def recommended_cross_device_ops():
    """How ``MirroredStrategy`` should combine gradients on the devices configured now.

    ``MirroredStrategy``'s default is collective all-reduce (TF 2.21,
    ``_make_collective_ops_with_fallbacks``): RING collectives on CPUs and when there are more
    logical than physical GPUs, NCCL only when every device is a physical GPU.

    - Logical CPU devices: the RING collectives fail inside loops compiled into one
      ``tf.function`` (``Model.fit`` with ``steps_per_execution`` > 1, or a multi-step custom
      loop whose first call creates the optimizer's variables) with "You must feed a value
      for placeholder tensor" (TF 2.21, Keras 3.15, measured here). ``ReductionToOneDevice``
      works there at about the same speed (``benchmarks/cross_device_ops.py``).
    - Logical GPUs split from one card: NCCL cannot run there (``select_cross_device_ops``:
      "NCCL is not supported when using virtual GPUs"), and the default then uses the same
      RING collectives that fail on CPUs (not measured on a GPU here). ``ReductionToOneDevice``
      is the conservative choice: TensorFlow's own fallback, and the replicas share one card.
    - Only physical GPUs: ``None``, i.e. TensorFlow's default (NCCL via collectives).

    Counts are of the devices configured now; physical GPUs are the *visible* ones, since
    ``list_physical_devices`` also lists GPUs hidden by ``set_visible_devices``.
    """
    import tensorflow as tf  # noqa: PLC0415

    physical = len(tf.config.get_visible_devices("GPU"))
    logical = len(tf.config.list_logical_devices("GPU"))
    return tf.distribute.ReductionToOneDevice() if needs_reduction_to_one_device(physical, logical) else None
