"""Training throughput of the course's CNN over configurations, against this machine's measured peak.

    python benchmarks/training_throughput.py                 # the naive run, then the cures one at a time
    python benchmarks/training_throughput.py --grid --replicas 1,2 --batches 64,256 --precision float32
    python benchmarks/training_throughput.py --grid --replicas 1 --batches 256 --input cached \
        --steps-per-execution 1 --precision float32 --onednn 0,1   # TensorFlow's own kernels vs oneDNN's
    python benchmarks/training_throughput.py --help

Each configuration runs in a process of its own (logical devices are fixed when TensorFlow starts):
``Model.fit`` under ``MirroredStrategy`` on ``replicas`` logical CPU devices (GPUs where present), with
Adam's learning rate scaled with the global batch, 1e-3 x global batch / 128 (128: the naive run's 2 x 64).
The processes start one at a time; each builds its model, trains one untimed epoch of ``--steps`` steps
(tracing, compiling, filling caches) and waits. Then the timed epochs are interleaved, as notebook 04
does: in each of ``--repeats`` rounds every configuration trains one epoch in turn, told to over its
stdin while the others wait idle, so that a slow spell of the shared machine lands on all of them instead
of one. The training steps alone are timed (``course_utils.callbacks.Throughput``), and the median and
range over the rounds are reported. The same run measures the peak: the fastest matrix multiply of
TensorFlow (float32 and bfloat16) and of NumPy's BLAS, at the thread count the training uses, and counts
the CNN's training FLOPs per image from its layer shapes (forward pass x 3: the backward pass costs about
twice the forward). The mixed-precision configurations use ``course_utils.peak.mixed_precision_policy()``
(``mixed_bfloat16`` on a CPU with bfloat16 instructions, ``mixed_float16`` on GPUs) and are left out,
with its reason, where it names none; ``--precision`` names one instead. A configuration TensorFlow
cannot run here is recorded with TensorFlow's message and sits out the later rounds. ``--onednn 0,1`` sets
``TF_ENABLE_ONEDNN_OPTS`` in each configuration's process (TensorFlow reads it when it starts): on x86 it
chooses between TensorFlow's own CPU kernels (Eigen's) and oneDNN's, which TensorFlow on Linux uses by default
only on CPUs with AVX-512 VNNI or bfloat16, AVX-VNNI or AMX instructions (``DefaultOneDnnPolicy`` in its
``tensorflow/core/util/port.cc``). Then the best
float32 configuration and the best overall train ``--accuracy-epochs`` epochs from the same seed and
report their test accuracy. Results: a table, ``--out``.json (with the machine: CPU model and flags,
logical CPUs, Python, TensorFlow and Keras versions, the precision policy) and ``--out``.png (about 4
minutes on 2 CPU cores with the defaults).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from course_utils import machine as course_machine  # none of the three imports TensorFlow: the parent never starts it
from course_utils import peak, processes

ROOT = Path(__file__).resolve().parent.parent
RESULT = "RESULT "
ONEDNN_CHOICES = ("default", "0", "1")  # TF_ENABLE_ONEDNN_OPTS per configuration; "default": left as it is
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "fma")


@dataclass(frozen=True)
class Config:
    replicas: int = 2
    batch: int = 64            # per replica
    input: str = "naive"       # "naive": map and batch only; "cached": + cache, prefetch
    steps_per_execution: int = 1
    xla: bool = False
    precision: str = "float32"  # or "mixed_bfloat16", "mixed_float16"
    onednn: str = "default"     # TF_ENABLE_ONEDNN_OPTS for its process: "0", "1", or "default" (left as it is)

    def label(self) -> str:
        return (f"{self.replicas}x{self.batch} {self.input} spe{self.steps_per_execution}"
                f"{' xla' if self.xla else ''} {self.precision.replace('mixed_', '')}"
                f"{'' if self.onednn == 'default' else ' onednn' + self.onednn}")


def preset(mixed: str | None) -> list[Config]:
    """The seeds' naive run, the cures one at a time on two replicas, and the same on one device; the
    mixed-precision cure in policy ``mixed``, left out where that is None."""
    naive = Config()
    cached = replace(naive, input="cached")
    big = replace(cached, batch=256)
    one = replace(big, replicas=1, batch=512)
    configs = [naive, cached, big, replace(big, steps_per_execution=8), replace(big, xla=True),
               mixed and replace(big, precision=mixed), one, replace(one, xla=True),
               mixed and replace(one, precision=mixed)]
    return [c for c in configs if c]


def grid(args) -> list[Config]:
    lists = [args.replicas, args.batches, args.input, args.steps_per_execution, args.xla, args.precision,
             args.onednn]
    return list(dict.fromkeys(Config(*values) for values in itertools.product(*lists)))


def precisions(requested: list[str] | None, policy: str | None) -> list[str]:
    """The precisions to run: those named (default float32 and "auto"), "auto" standing for this machine's
    mixed policy (``course_utils.peak.mixed_precision_policy``) and dropped where that is None."""
    chosen = [policy if name == "auto" else name for name in requested or ["float32", "auto"]]
    return list(dict.fromkeys(name for name in chosen if name))


def learning_rate(global_batch: int) -> float:
    """Adam's learning rate scaled linearly with the global batch: its default 1e-3 at 128 (the naive 2 x 64)."""
    if global_batch < 1:
        raise ValueError(f"global_batch must be >= 1, got {global_batch}")
    return 1e-3 * global_batch / 128


def machine(software: dict, cpuinfo: str = "/proc/cpuinfo") -> dict:
    """What the figures depend on: the CPU (model, the flags that set its matmul speed, logical CPUs), the
    Python, TensorFlow and Keras versions, and the precision policy with its reason."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        text = ""
    models = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    flags = peak.cpu_flags(cpuinfo)
    policy, why = software.get("precision_policy") or (None, "unknown")
    return {"ran_on": course_machine.describe(software.get("gpus", 0)),  # the notebooks' metadata names it so
            "machine": platform.processor() or platform.machine(),
            "cpu_model": models[0] if models else platform.processor() or platform.machine(),
            "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags], "cpus": os.cpu_count(),
            "python": platform.python_version(), "tensorflow": software.get("tensorflow"),
            "keras": software.get("keras"), "precision_policy": policy, "precision_policy_reason": why}


# -- inside a child process -------------------------------------------------------------------------------

def accuracy(config: Config, epochs: int, limit: int) -> dict:
    """Test accuracy after ``epochs`` epochs of ``limit`` images, from seed 0 (the same start for every config)."""
    model, ds, global_batch = _build(config, limit, shuffle=True)
    model.fit(ds, epochs=epochs, verbose=0)
    from course_utils import datasets, pipeline  # noqa: PLC0415

    test = datasets.load("fashion_mnist", "test", verbose=False).dataset.map(pipeline.scale_image).batch(1000)
    return {"config": asdict(config), "epochs": epochs, "images": limit, "learning_rate": learning_rate(global_batch),
            "test_accuracy": float(model.evaluate(test, verbose=0, return_dict=True)["accuracy"])}


def _build(config: Config, limit: int, shuffle: bool = False):
    from course_utils.devices import recommended_cross_device_ops, simulate_devices  # noqa: PLC0415

    devices = simulate_devices(config.replicas, verbose=False)
    import keras  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    from course_utils import datasets, models, pipeline  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(config.precision)
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=recommended_cross_device_ops())
    global_batch = config.batch * config.replicas
    train = datasets.load("fashion_mnist", "train", limit=limit, verbose=False)
    ds = train.dataset.map(pipeline.scale_image)
    if config.input == "cached":
        ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(10_000, seed=0)
    ds = ds.batch(global_batch, drop_remainder=True)
    if config.input == "cached":
        ds = ds.prefetch(tf.data.AUTOTUNE)
    with strategy.scope():
        model = models.build_cnn(train.image_shape, train.num_classes)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate(global_batch)), jit_compile=config.xla,
                      metrics=["accuracy"], steps_per_execution=config.steps_per_execution,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, ds, global_batch


def serve(config: Config, steps: int, repeats: int, limit: int, commands=None) -> None:
    """The child's side of :func:`interleave`: build, train the untimed epoch and report it, then train one
    timed epoch per "epoch" line read from ``commands``, reporting each; "quit" (or end of input) ends it.
    One ``fit`` call throughout: the input iterator (and its cache) lives on from epoch to epoch."""
    model, ds, global_batch = _build(config, limit)
    import keras  # noqa: PLC0415  (after _build: the logical devices first)

    from course_utils import callbacks  # noqa: PLC0415

    steps = max(steps // config.steps_per_execution, 1) * config.steps_per_execution
    meter, commands = callbacks.Throughput(steps * global_batch), commands or sys.stdin

    def report_then_wait(epoch, logs=None):  # after the meter's on_epoch_end: outside the timed steps
        rate = meter.images_per_sec[-1]
        print(RESULT + json.dumps({"images_per_s": rate} if epoch else {"steps": steps, "warmup_images_per_s": rate}),
              flush=True)
        model.stop_training = commands.readline().strip() != "epoch"

    model.fit(ds.repeat(), epochs=1 + repeats, steps_per_epoch=steps, verbose=0,
              callbacks=[meter, keras.callbacks.LambdaCallback(on_epoch_end=report_then_wait)])


def measure_peak() -> dict:
    """The peak, the CNN's FLOPs, and the software and precision policy the parent records (it never imports TF)."""
    import keras  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    from course_utils import models  # noqa: PLC0415

    model = models.build_cnn()
    return {"peak_flops": peak.matmul_peak(repeats=10), "training_flops": peak.training_flops(model),
            "profiled_forward_flops": peak.profiled_forward_flops(model),
            "software": {"tensorflow": tf.__version__, "keras": keras.__version__,
                         "precision_policy": list(peak.mixed_precision_policy()),
                         "gpus": len(tf.config.list_physical_devices("GPU"))}}


# -- the parent ---------------------------------------------------------------------------------------------

def child_env(payload: dict, environ=os.environ) -> dict:
    """A child's environment: TensorFlow's start-up lines off, and where the payload's configuration names
    "0" or "1", ``TF_ENABLE_ONEDNN_OPTS`` set to it (TensorFlow reads it once, when it starts: one reason each
    configuration has a process of its own). "default" leaves it as it is: unset, TensorFlow's own choice
    for the CPU (on Linux, oneDNN only where the CPU has AVX-512 VNNI or bfloat16, AVX-VNNI or AMX)."""
    env = {**environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    onednn = payload.get("config", {}).get("onednn", "default")
    if onednn not in ONEDNN_CHOICES:
        raise ValueError(f"onednn must be default, 0 or 1, got {onednn!r}")
    if onednn != "default":
        env["TF_ENABLE_ONEDNN_OPTS"] = onednn
    return env


def _child(payload: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(payload)], capture_output=True,
                          text=True, env=child_env(payload), timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        if "peak" in payload:
            raise RuntimeError(f"measuring the peak failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        # A configuration TensorFlow cannot run here (XLA under MirroredStrategy on logical CPU devices,
        # say) is a result too: recorded with TensorFlow's own message, and the grid goes on.
        return {**payload, "error": _reason(done.stderr) or f"exit {done.returncode}"}
    return json.loads(lines[-1][len(RESULT):])


def _reason(stderr: str) -> str | None:
    """TensorFlow's own words for a failure: the message of the last exception, and where that is only
    "Graph execution error:", the status text printed after the traceback of the failing node."""
    lines = stderr.splitlines()
    found = [i for i, line in enumerate(lines) if re.match(r"[\w.]*(Error|Exception):", line)]
    if not found:
        return None
    i = found[-1]
    message = lines[i].split(":", 1)[1].strip()
    if not message.endswith(":"):
        return message[:400]
    for line in lines[i + 1:]:
        if line.strip() and not line[0].isspace() and not line.startswith("Detected at node"):
            return re.sub(r"^\(\d+\) [A-Z_]+:\s*", "", line.strip())[:400]
    return message[:400]


class ChildFailed(Exception):
    """A configuration's process ended or fell silent without its result (TensorFlow's words where it left any)."""


class Child:
    """A configuration's process running :func:`serve`, in a process group of its own: ``send`` a command,
    ``read_result`` its next ``RESULT`` line, ``close`` it (always: terminate, then kill the group)."""

    def __init__(self, payload: dict, argv: list | None = None, timeout: float = 1800):
        self.timeout, self.tail = timeout, collections.deque(maxlen=400)  # its last lines: why it failed
        self.piped = processes.Piped([*(argv or [sys.executable, __file__, "--child"]), json.dumps(payload)],
                                     env=child_env(payload))
        self.proc = self.piped.proc

    def send(self, command: str) -> None:
        if not self.piped.send(command):  # a broken pipe: it has exited
            raise self._failed()

    def read_result(self) -> dict:
        try:
            found = self.piped.wait_for(RESULT, self.timeout, tail=self.tail)
        except TimeoutError:
            self.close()
            raise ChildFailed(f"no result in {self.timeout:.0f} s") from None
        if found is None:
            raise self._failed()
        return json.loads(found)

    def _failed(self) -> ChildFailed:
        self.close(grace=10)
        deadline = time.monotonic() + 5
        with contextlib.suppress(TimeoutError):  # the lines it wrote before it ended, not yet read
            while (line := self.piped.next_line(deadline - time.monotonic())) is not None:
                self.tail.append(line)
        # A configuration TensorFlow cannot run here (XLA under MirroredStrategy on logical CPU devices,
        # say) is a result too: recorded with TensorFlow's own message, and the others go on.
        return ChildFailed(_reason("\n".join(self.tail)) or f"exit {self.proc.returncode}")

    def close(self, grace: float = 0.0) -> None:
        """Stop it: close its stdin, wait up to ``grace`` seconds for it to leave by itself, then SIGTERM,
        SIGKILL its group. Once: later calls do nothing."""
        self.piped.stop(grace)


def _outcome(child, command: str | None = None) -> dict:
    try:
        if command:
            child.send(command)
        return child.read_result()
    except ChildFailed as failure:
        return {"error": str(failure)}


def interleave(payloads: dict[str, dict], rounds: int, start=Child, report=print) -> dict[str, dict]:
    """Start a child per configuration, one at a time (each trains its untimed epoch before the next starts),
    then ``rounds`` rounds in which each trains one timed epoch in turn. ``start(payload)`` gives an object
    with ``send(command)``, ``read_result()`` (raising :class:`ChildFailed`) and ``close(grace=0)``. A
    configuration that fails keeps its message and sits out later rounds. Every child is closed, however
    this ends (an exception, Ctrl-C)."""
    children, found = {}, {}
    with contextlib.ExitStack() as stack:
        for name, payload in payloads.items():
            child = children[name] = start(payload)
            stack.callback(child.close)
            warm = found[name] = dict(_outcome(child))  # a record of its own, to add the timed epochs to
            if "error" not in warm:
                warm["images_per_s"] = []
            report(f"  {name}: " + (f"fails: {warm['error'][:100]}" if "error" in warm else
                                    f"ready (untimed epoch {warm['warmup_images_per_s']:,.0f} images/s)"))
        for i in range(rounds):
            for name, child in children.items():
                record = found[name]
                if "error" in record:
                    continue
                got = _outcome(child, "epoch")
                if "error" in got:
                    record["images_per_s_before_failure"] = record.pop("images_per_s")
                    record["error"] = got["error"]
                    report(f"  {name}: fails in round {i + 1}: {got['error'][:100]}")
                else:
                    record["images_per_s"].append(got["images_per_s"])
            rates = [f"{r['images_per_s'][-1]:,.0f}" if "error" not in r else "-" for r in found.values()]
            report(f"  round {i + 1}/{rounds}, images/s in the order above: {' '.join(rates)}")
        for name, child in children.items():
            if "error" not in found[name]:
                with contextlib.suppress(ChildFailed):
                    child.send("quit")
        for child in children.values():
            child.close(grace=10)
    return found


def summarize(results: list[dict], measured: dict) -> tuple[list[str], dict]:
    """The table (one row per configuration) and the headline figures, each rate as a fraction of the peak."""
    fp32_peak = peak.fp32_peak(measured["peak_flops"])
    flops = measured["training_flops"]
    ran = [r for r in results if "images_per_s" in r]
    for r in ran:
        r["median"] = statistics.median(r["images_per_s"])
        r["range"] = [min(r["images_per_s"]), max(r["images_per_s"])]
        r["fraction_of_fp32_peak"] = r["median"] * flops / fp32_peak
    naive = ran[0]["median"] if ran and results[0] is ran[0] else None
    rows = [f"{'configuration':<34} {'images/s: median (range)':>26} {'vs naive':>9} {'of fp32 peak':>13}"]
    for r in results:
        label = Config(**r["config"]).label()
        if "error" in r:
            rows.append(f"{label:<34} fails here: {r['error'][:90]}")
            continue
        rates = r["images_per_s"]
        ratio = f"{r['median'] / naive:8.2f}x" if naive else f"{'':>9}"
        rows.append(f"{label:<34} {r['median']:>10,.0f} ({min(rates):,.0f}-{max(rates):,.0f}){'':>3} {ratio} "
                    f"{r['fraction_of_fp32_peak']:>12.0%}")
    fp32 = [r for r in ran if r["config"]["precision"] == "float32"]
    best_fp32 = max(fp32, key=lambda r: r["median"]) if fp32 else None
    best = max(ran, key=lambda r: r["median"]) if ran else None
    headline = {"fp32_peak_flops": fp32_peak, "naive_images_per_s": naive,
                "best_fp32": best_fp32 and Config(**best_fp32["config"]).label(),
                "best_fp32_images_per_s": best_fp32 and best_fp32["median"],
                "best_fp32_fraction_of_peak": best_fp32 and best_fp32["fraction_of_fp32_peak"],
                "best": best and Config(**best["config"]).label(), "best_images_per_s": best and best["median"]}
    if best and best_fp32:
        headline["best_over_best_fp32"] = best["median"] / best_fp32["median"]
    if best and naive:
        headline["best_over_naive"] = best["median"] / naive
    return rows, headline


def plot(results: list[dict], path: Path, fp32_peak_images: float) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # noqa: PLC0415

    ran = [r for r in results if "median" in r]
    medians = [r["median"] for r in ran]
    spread = [[m - min(r["images_per_s"]) for m, r in zip(medians, ran)],
              [max(r["images_per_s"]) - m for m, r in zip(medians, ran)]]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(ran)), 4.5))
    ax.bar(range(len(ran)), medians, yerr=spread, capsize=3)
    ax.axhline(fp32_peak_images, color="k", linestyle="--", label="float32 matmul peak / FLOPs per image")
    ax.set_xticks(range(len(ran)), [Config(**r["config"]).label() for r in ran], rotation=50, ha="right",
                  fontsize="small")
    ax.set_ylabel("images/s (median, min-max)")
    ax.set_title("Course CNN training throughput on this machine")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    words = lambda text: text.split(",")  # noqa: E731
    parser.add_argument("--grid", action="store_true", help="every combination of the lists below "
                        "(default: the naive run, then the cures one at a time, on 2 replicas and on one device)")
    parser.add_argument("--replicas", type=ints, default=[1, 2])
    parser.add_argument("--batches", type=ints, default=[64, 256], help="per-replica batch sizes")
    parser.add_argument("--input", type=words, default=["naive", "cached"])
    parser.add_argument("--steps-per-execution", type=ints, default=[1, 8])
    parser.add_argument("--xla", type=lambda t: [v == "on" for v in t.split(",")], default=[False],
                        help="off,on")
    parser.add_argument("--precision", type=words, help="float32, mixed_bfloat16, mixed_float16, auto (this "
                        "machine's mixed policy, left out where none); default float32,auto. Without --grid: "
                        "the first mixed one is the preset's")
    parser.add_argument("--onednn", type=words, default=["default"],
                        help="default,0,1: TF_ENABLE_ONEDNN_OPTS for each configuration's process (default: as "
                             "this environment has it; unset, TensorFlow decides by the CPU)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed epoch")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds: timed epochs per configuration, interleaved (after one untimed)")
    parser.add_argument("--limit", type=int, default=20_000, help="training examples")
    parser.add_argument("--accuracy-epochs", type=int, default=2,
                        help="epochs of --limit images for the test-accuracy check of the best float32 and the best "
                             "configuration (0: skip)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "training_throughput"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if bad := [v for v in args.onednn if v not in ONEDNN_CHOICES]:
        parser.error(f"--onednn takes default, 0 and 1, not {', '.join(bad)}")
    if args.child:
        payload = json.loads(args.child)
        if "steps" in payload:
            serve(Config(**payload["config"]), payload["steps"], payload["repeats"], payload["limit"])
            return 0
        found = (measure_peak() if payload.get("peak") else
                 accuracy(Config(**payload["config"]), payload["epochs"], payload["limit"]))
        print(RESULT + json.dumps(found), flush=True)
        return 0
    started = time.perf_counter()
    measured = _child({"peak": True})
    software = measured.pop("software")
    policy, why = software["precision_policy"]
    args.precision = precisions(args.precision, policy)
    mixed = next((name for name in args.precision if name != "float32"), None)
    left_out = None if mixed else f"mixed precision left out: {why}"
    print(f"precision policy here: {policy} ({why}); running {', '.join(args.precision)}")
    configs = grid(args) if args.grid else preset(mixed)
    peaks = measured["peak_flops"].items()
    print("peak, 2048x2048 matmul: " + ", ".join(f"{k} {v / 1e9:.0f} GFLOP/s" for k, v in peaks))
    print(f"the CNN: {measured['training_flops'] / 1e6:.1f} MFLOP per training image (forward x 3); TensorFlow's "
          f"profiler counts the forward pass as {(measured['profiled_forward_flops'] or 0) / 1e6:.1f} MFLOP")
    timed = interleave({c.label(): {"config": asdict(c), "steps": args.steps, "repeats": args.repeats,
                                    "limit": args.limit} for c in configs}, args.repeats,
                       report=lambda line: print(line, flush=True))
    results = [{"config": asdict(c), "global_batch": c.replicas * c.batch,
                "learning_rate": learning_rate(c.replicas * c.batch), **timed[c.label()]} for c in configs]
    rows, headline = summarize(results, measured)
    print("\n".join(rows))
    accuracies = []
    if args.accuracy_epochs and headline["best"]:
        by_label = {Config(**r["config"]).label(): r for r in results}
        for r in [by_label[headline["best_fp32"]]] + ([by_label[headline["best"]]]
                                                      if headline["best"] != headline["best_fp32"] else []):
            accuracies.append(_child({"config": r["config"], "epochs": args.accuracy_epochs, "limit": args.limit}))
            found = accuracies[-1]
            print(f"test accuracy after {args.accuracy_epochs} epochs of {args.limit:,} images, "
                  f"{Config(**r['config']).label()}: " + (f"{found['test_accuracy']:.4f}" if "test_accuracy" in found
                                                          else f"fails: {found.get('error')}"))
        if len(accuracies) == 2 and all("test_accuracy" in a for a in accuracies):
            headline["accuracy_best_minus_best_fp32_points"] = 100 * (accuracies[1]["test_accuracy"]
                                                                     - accuracies[0]["test_accuracy"])
            print(f"difference: {headline['accuracy_best_minus_best_fp32_points']:+.2f} points")
    fp32_peak_images = headline["fp32_peak_flops"] / measured["training_flops"]
    print(f"best float32: {headline['best_fp32']} at {headline['best_fp32_fraction_of_peak']:.0%} of the float32 "
          f"peak; best: {headline['best']}, {headline.get('best_over_best_fp32', float('nan')):.2f}x the best "
          f"float32 and {headline.get('best_over_naive', float('nan')):.2f}x the naive run")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({
        "date": datetime.date.today().isoformat(), **machine(software), **measured, "steps": args.steps,
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "repeats": args.repeats, "interleaved": True, "precisions": args.precision,
        "mixed_precision_left_out": left_out, "headline": headline,
        "accuracy": accuracies, "results": results,
        "seconds": round(time.perf_counter() - started)}, indent=1) + "\n")
    plot(results, out.with_suffix(".png"), fp32_peak_images)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
