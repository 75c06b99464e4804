"""Read back a TensorFlow profiler trace: each step's wall time, and the op time by type and by owner.

``tf.profiler.experimental.start(logdir)`` ... ``stop()`` writes an XSpace protobuf,
``logdir/plugins/profile/<run>/<host>.xplane.pb``. On a CPU host its ``/host:CPU`` plane has a line per
thread; a kernel's event is named ``"<node name>:<op type>"`` on the thread that ran it (its intra-op
helpers are inside that event), an asynchronous kernel (``_Recv``, iterator ops) is an
``ExecutorState::ProcessAsync::Start`` event with its type in the ``kernel_type`` stat, and each call of
a ``tf.function`` is an event named after the function on the Python thread (Keras 3's train step:
``multi_step_on_iterator``) whose ``tf_function_call`` stat says whether that call traced. Ops are given to
the step during which they start; calls that traced are left out. Op times on several threads overlap,
so their sum can exceed the step's wall time: shares are of the summed op time.

oneDNN (on by default on x86) fuses kernels: ``_MklNativeFusedConv2D`` is convolution + bias + ReLU,
``_MklNativeConv2DBackpropFilterWithBias`` the weights' gradient with the bias's. :data:`OWNERS` names
what each type is for, fused or stock.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

KERNEL = re.compile(r"^(.*[^:]):([A-Za-z_][A-Za-z0-9_]*)$")  # "node:OpType", not "A::B" or "X: Y"

CONV_FILTER, CONV_INPUT, CONV_FORWARD = ("convolution: weights' gradient", "convolution: inputs' gradient",
                                         "convolution: forward")
DENSE, ALL_REDUCE, INPUT, OTHER = ("dense layers (matmul)", "all-reduce (cross-device)", "input", "other ops")
OWNERS = {
    CONV_FILTER: {"Conv2DBackpropFilter", "_MklConv2DBackpropFilter", "_MklNativeConv2DBackpropFilter",
                  "_MklNativeConv2DBackpropFilterWithBias", "_MklConv2DBackpropFilterWithBias"},
    CONV_INPUT: {"Conv2DBackpropInput", "_MklConv2DBackpropInput", "_MklNativeConv2DBackpropInput"},
    CONV_FORWARD: {"Conv2D", "_FusedConv2D", "_MklConv2D", "_MklNativeConv2D", "_MklFusedConv2D",
                   "_MklNativeFusedConv2D"},
    DENSE: {"MatMul", "_FusedMatMul", "_MklMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul"},
    # ReductionToOneDevice sums each gradient with AddN after _Send/_Recv; collectives and NCCL on GPUs
    ALL_REDUCE: {"AddN", "_Send", "_Recv", "_HostSend", "_HostRecv", "CollectiveReduceV2", "CollectiveGatherV2",
                 "CollectiveBcastSendV2", "CollectiveBcastRecvV2", "NcclAllReduce"},
    INPUT: {"IteratorGetNext", "MultiDeviceIteratorGetNextFromShard", "IteratorGetNextAsOptional"},
}


def owner(op_type: str) -> str:
    return next((name for name, types in OWNERS.items() if op_type in types), OTHER)


@dataclass(frozen=True)
class Profile:
    """The profiled steps' wall times (seconds) and the op time (seconds, summed over them) by op type.

    ``step_periods``: from each step's start to the next one's, in seconds (one fewer than the steps of a
    recording): a step's wall time plus the gap before the next call (the caller's loop, its callbacks),
    as a loop's elapsed time per step holds them."""

    step_seconds: tuple[float, ...]
    op_seconds: dict[str, float]
    step_periods: tuple[float, ...] = ()

    @property
    def steps(self) -> int:
        return len(self.step_seconds)

    def per_step(self) -> dict[str, float]:
        """Op time per step by owner, largest first."""
        totals = Counter()
        for op_type, seconds in self.op_seconds.items():
            totals[owner(op_type)] += seconds / self.steps
        return dict(totals.most_common())

    def share(self, name: str) -> float:
        """``name``'s share of the summed op time."""
        found = self.per_step()
        return found.get(name, 0.0) / sum(found.values())


def combine(profiles) -> Profile:
    """One profile of every step of ``profiles`` (repeated recordings of the same steps): their step times
    together, their op times added up, so :meth:`Profile.per_step` averages over all of them."""
    profiles = list(profiles)
    if not profiles:
        raise ValueError("no profile to combine")
    op_seconds = Counter()
    for profile in profiles:
        op_seconds.update(profile.op_seconds)
    return Profile(tuple(s for profile in profiles for s in profile.step_seconds), dict(op_seconds),
                   tuple(s for profile in profiles for s in profile.step_periods))


def trace_file(logdir: str | Path) -> Path:
    found = sorted(Path(logdir).glob("plugins/profile/*/*.xplane.pb"))
    if not found:
        raise FileNotFoundError(f"no profiler trace (plugins/profile/*/*.xplane.pb) under {logdir}: "
                                "run the steps between tf.profiler.experimental.start(logdir) and stop()")
    return found[-1]


def read(logdir: str | Path, step_function: str = "multi_step_on_iterator") -> Profile:
    """The newest trace under ``logdir``; steps are the calls of the ``tf.function`` named ``step_function``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: PLC0415

    space = xplane_pb2.XSpace()
    space.ParseFromString(trace_file(logdir).read_bytes())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    events, stat_names = plane.event_metadata, plane.stat_metadata

    def stats(event) -> dict:
        found = {}
        for s in event.stats:
            kind = s.WhichOneof("value")
            found[stat_names[s.metadata_id].name] = (stat_names[s.ref_value].name if kind == "ref_value"
                                                     else getattr(s, kind) if kind else None)
        return found

    steps, ops = [], []
    for line in plane.lines:
        origin = line.timestamp_ns * 1000
        for e in line.events:
            name, start = events[e.metadata_id].name, origin + e.offset_ps
            if name == step_function:
                if str(stats(e).get("tf_function_call", "")).startswith("notTraced"):
                    steps.append((start, start + e.duration_ps))
            elif match := KERNEL.match(name):
                ops.append((start, match.group(2), e.duration_ps))
            elif name == "ExecutorState::ProcessAsync::Start":
                ops.append((start, str(stats(e).get("kernel_type", "?")), e.duration_ps))
    if not steps:
        raise ValueError(f"no call of {step_function!r} that did not trace in {trace_file(logdir)}: "
                         "warm the function up before profiling, with the same input types")
    steps.sort()
    starts = [s for s, _ in steps]
    op_seconds = Counter()
    for start, op_type, duration in ops:
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and start < steps[i][1]:
            op_seconds[op_type] += duration / 1e12
    return Profile(tuple((end - start) / 1e12 for start, end in steps), dict(op_seconds),
                   tuple((after - before) / 1e12 for before, after in zip(starts, starts[1:])))


def flops_per_image(model) -> dict[str, int]:
    """FLOPs per training image of a Sequential Conv2D/Dense model, by the owners of :data:`OWNERS`.

    Each layer's forward product counts once forward, once for its weights' gradient and once for its
    inputs' gradient, except the first layer with weights, whose inputs (the data) need no gradient.
    """
    from course_utils.peak import _forward_flops  # noqa: PLC0415

    shape, found, first = (1, *model.inputs[0].shape[1:]), Counter(), True
    for layer in model.layers:
        forward = _forward_flops(layer, shape)
        if forward:
            conv = type(layer).__name__ == "Conv2D"
            found[CONV_FORWARD if conv else DENSE] += forward
            found[CONV_FILTER if conv else DENSE] += forward
            if not first:
                found[CONV_INPUT if conv else DENSE] += forward
            first = False
        shape = tuple(layer.compute_output_shape(shape))
    return dict(found)
