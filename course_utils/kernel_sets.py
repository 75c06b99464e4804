"""The same training step with each of TensorFlow's two sets of x86 CPU kernels, each set in processes of its own.

On x86 CPUs TensorFlow has two sets of CPU kernels, its own (Eigen's) and oneDNN's, and reads
``TF_ENABLE_ONEDNN_OPTS`` once, when it starts: one process cannot time both. :func:`compare` starts one
child per set and round, one at a time (the sets' order alternating from round to round), and returns
each set's results. A child (``python -m course_utils.kernel_sets``) builds the course's CNN
(:func:`course_utils.models.build_cnn`) compiled as the seed's (Adam, sparse cross-entropy from logits,
accuracy), on one batch of random images repeated (the arithmetic's speed does not depend on the values),
trains 2 steps untimed (tracing), ``steps`` steps timed by :class:`course_utils.callbacks.Throughput` (the
steps alone), then ``steps`` more under TensorFlow's profiler, read back by :mod:`course_utils.op_profile`.
Before the timed steps and after the profiled ones it times the float32 matmul peak
(:func:`course_utils.peak.matmul_peak`) in the same process, so that its steps can be set against a peak
measured at the same time and in the same process (a peak timed elsewhere, in a moment when the machine or
that process was slower, would inflate every share of it); the higher of TensorFlow's and NumPy's readings is
the one to divide by (:func:`course_utils.peak.fp32_peak`), and the result keeps each library's. It prints
one ``RESULT`` line of JSON and exits. The parent waits for it, then stops its process group however the
wait ends (a child is also killed when the thread that started it ends: ``processes.Piped``).
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import sys
import threading
from pathlib import Path

from . import processes

SETS = {"0": "TensorFlow's own (Eigen's)", "1": "oneDNN's"}  # TF_ENABLE_ONEDNN_OPTS -> the kernels it selects
RESULT = "RESULT "
PEAK_SIZE = 2048  # the side of the square matmul a child times its peak with


def measure(batch: int, steps: int, image_shape, num_classes: int, profile_dir, peak_size: int = PEAK_SIZE) -> dict:
    """In the child: the steps-alone rate and the profile of ``steps`` training steps of ``batch`` images, and
    the float32 matmul peak (``peak_size`` square) timed before and after them: ``peak_flops`` holds the higher
    of the two per library, ``peak_flops_each`` both (before, after)."""
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.util import _pywrap_util_port  # noqa: PLC0415

    from course_utils import models, op_profile, peak  # noqa: PLC0415
    from course_utils.callbacks import Throughput  # noqa: PLC0415

    rng = np.random.default_rng(0)
    images = rng.random((batch, *image_shape), dtype=np.float32)
    labels = rng.integers(0, num_classes, batch).astype(np.int64)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    model = models.build_cnn(image_shape, num_classes)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    model.fit(data, steps_per_epoch=2, verbose=0)  # traces the step: not timed
    before = peak.matmul_peak(peak_size, dtypes=("float32",))
    meter = Throughput(batch * steps)
    model.fit(data, steps_per_epoch=steps, verbose=0, callbacks=[meter])
    tf.profiler.experimental.start(str(profile_dir))
    try:
        model.fit(data, steps_per_epoch=steps, verbose=0, callbacks=[Throughput(batch * steps)])  # as timed
    finally:
        tf.profiler.experimental.stop()
    after = peak.matmul_peak(peak_size, dtypes=("float32",))
    profile = op_profile.read(profile_dir)
    return {"onednn": bool(_pywrap_util_port.IsMklEnabled()), "images_per_second": meter.images_per_sec[0],
            "peak_flops": {k: max(before[k], after[k]) for k in before}, "peak_flops_each": [before, after],
            "step_ms": 1000 * statistics.median(profile.step_seconds),
            "owner_ms": {name: 1000 * s for name, s in profile.per_step().items()},
            "op_types": sorted(profile.op_seconds)}


def _check(settings, timeout: float, peak_size: int) -> None:
    if unknown := [s for s in settings if s not in SETS]:
        raise ValueError(f"settings must be among {', '.join(SETS)} (TF_ENABLE_ONEDNN_OPTS), got {unknown}")
    if not settings or len(set(settings)) != len(settings):
        raise ValueError(f"give each setting once, at least one, got {list(settings)}")
    if not 0 < timeout <= threading.TIMEOUT_MAX:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not isinstance(peak_size, int) or peak_size < 64:
        raise ValueError(f"peak_size must be a whole number >= 64 (the matmul's side), got {peak_size!r}")


def run_child(setting: str, *, batch: int, steps: int, image_shape, num_classes: int, profile_dir,
              timeout: float = 900, command=None, peak_size: int = PEAK_SIZE) -> dict:
    """One child with ``TF_ENABLE_ONEDNN_OPTS=setting``: its result (:func:`measure`), or ``RuntimeError``
    with its last lines when it ends without one or gives none in ``timeout`` seconds (then, or on an
    interrupt, its process group is stopped at once; after its result it is given 30 s to exit by itself).
    ``command``: the child's program and arguments before the job (default: this module's ``main``);
    ``peak_size``: the side of the matmul the child times its peak with."""
    _check([setting], timeout, peak_size)
    job = {"batch": batch, "steps": steps, "image_shape": list(image_shape), "num_classes": num_classes,
           "profile_dir": str(profile_dir), "peak_size": peak_size}
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": setting}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notices out of the failure's last lines
    tail: collections.deque = collections.deque(maxlen=30)
    name = f"the TF_ENABLE_ONEDNN_OPTS={setting} child"
    program = command or [sys.executable, "-m", "course_utils.kernel_sets"]
    child = processes.Piped([*program, json.dumps(job)], env=env)
    try:
        found = child.wait_for(RESULT, timeout, tail=tail)
    except BaseException as error:  # a timeout, an interrupt: it is stopped now, not after a grace
        child.stop()
        if isinstance(error, TimeoutError):
            raise RuntimeError(f"{name} gave no result in {timeout:g} s; its last lines:\n" + "\n".join(tail)) from None
        raise
    child.stop(grace=30)
    if found is None:
        raise RuntimeError(f"{name} ended (exit {child.proc.returncode}) without a result; its last lines:\n"
                           + "\n".join(tail))
    return json.loads(found)


def compare(*, batch: int, steps: int, rounds: int, image_shape, num_classes: int, run_dir,
            settings=tuple(SETS), timeout: float = 900, peak_size: int = PEAK_SIZE) -> dict[str, list[dict]]:
    """``rounds`` children per setting of ``TF_ENABLE_ONEDNN_OPTS``, one at a time, interleaved (the order
    alternating from round to round): ``{setting: [result per round]}``. Profiles go under ``run_dir``."""
    settings = tuple(settings)
    _check(settings, timeout, peak_size)
    if rounds < 1 or steps < 1 or batch < 1:
        raise ValueError(f"rounds, steps and batch must be >= 1, got {rounds}, {steps}, {batch}")
    found: dict[str, list[dict]] = {s: [] for s in settings}
    for r in range(rounds):
        for setting in settings if r % 2 == 0 else settings[::-1]:
            found[setting].append(run_child(setting, batch=batch, steps=steps, image_shape=image_shape,
                                            num_classes=num_classes, timeout=timeout, peak_size=peak_size,
                                            profile_dir=Path(run_dir) / f"onednn_{setting}_round_{r}"))
    return found


def main(argv: list[str]) -> None:
    job = json.loads(argv[0])
    found = measure(job["batch"], job["steps"], tuple(job["image_shape"]), job["num_classes"], job["profile_dir"],
                    job["peak_size"])
    print(RESULT + json.dumps(found), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
