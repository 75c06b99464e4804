"""How long deleting a tf.data input iterator waits, and whether each wait ends at a tuning round.

Notebook 04's custom loop (the seed's) deletes its distributed training iterator at the end of every epoch;
on the 2-core development machine that took from milliseconds to seconds. With autotuning on
(tf.data's default) every iterator runs a tuning thread (``Model::OptimizeLoop``, in TensorFlow's
``tensorflow/core/framework/model.cc``) that sleeps between tuning rounds for a period that doubles each
round, from 10 ms up to a minute, and logs each sleep ("Waiting for N ms.") with ``TF_CPP_VMODULE=model=2``.
Deleting the iterator cancels it. Read in the source: the ``CancellationManager`` runs its callbacks (the
one that wakes the thread among them) *before* it marks itself cancelled, so a thread that wakes in between
sees no cancellation and sleeps on until its next round, which the deletion then waits for.

This script tests that reading. A child process, with that log on, trains the course CNN under
``MirroredStrategy`` with the seed's loop (``iter``, one ``strategy.run`` per batch, ``del iterator``) and
marks each deletion's start and end; the parent reads the child's log and, for every deletion, finds
whether a tuning thread logged a new sleep as the deletion started (woken, but not cancelled) and how far
the deletion's end lies from the nearest round a thread had scheduled. ``--autotune off`` runs the same
loop with ``tf.data.Options().autotune.enabled = False`` on the source dataset (whether the distributed
iterator's own pipelines still tune is what the log shows); the default runs both, interleaved epoch by
epoch in two processes. Writes ``results/iterator_teardown.json``; ``--from-logs`` analyses the children's
logs of the last run again without running anything.

    .venv/bin/python benchmarks/iterator_teardown.py                 # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/iterator_teardown.py --epochs 4 --autotune on
    .venv/bin/python benchmarks/iterator_teardown.py --from-logs
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

from course_utils import machine, processes  # neither imports TensorFlow: the parent never starts it

SLOW = 0.1  # seconds: a deletion slower than this is a "wait"
AT_ROUND = 0.05  # seconds: a deletion that ends this close to a scheduled round ends "at the round"
WAITING = re.compile(r"^I\d{4} [\d:]*?(\d+\.\d+)\s+(\d+) model\.cc:\d+\] Waiting for (\d+) ms")
MARK = re.compile(r"^MARK (made|del_start|del_end) (\d+\.\d+)$")


def analyse(lines: list[str]) -> list[dict]:
    """Each deletion in a child's log: its wait, whether a tuning thread logged a new sleep within ``AT_ROUND``
    of its start (woken by the cancellation, not stopped), the distance from its end to the nearest round
    the current iterator's threads had scheduled, each by its latest sleep logged before the end and due after
    the start (None: none had), and how many tuning threads logged a sleep since the iterator was made."""
    latest, deletions, start = {}, [], None  # latest: thread -> (logged at, due at), the current iterator's
    woken = False
    for line in lines:
        if found := WAITING.match(line):
            logged, thread, ms = float(found[1]), found[2], int(found[3])
            if logged < 1e9:
                raise ValueError(f"TensorFlow's log line carries no Unix time to set beside the marks: {line!r}")
            latest[thread] = (logged, logged + ms / 1000)
            woken = woken or (start is not None and start <= logged <= start + AT_ROUND)
        elif "model.cc" in line and "Waiting for" in line:
            raise ValueError(f"a tuning thread's log line in a format this script does not read: {line!r}")
        elif found := MARK.match(line.strip()):
            kind, at = found[1], float(found[2])
            if kind == "made":
                latest, start, woken = {}, None, False
            elif kind == "del_start":
                start = at
            elif kind == "del_end" and start is not None:
                due = [d for logged, d in latest.values() if logged <= at and d >= start]
                nearest = min((abs(at - d) for d in due), default=None)
                deletions.append({"seconds": round(at - start, 4), "slept_on_at_start": woken,
                                  "end_to_nearest_round_s": None if nearest is None else round(nearest, 4),
                                  "tuning_threads": len(latest)})
                start = None
    return deletions


def summary(deletions: list[dict]) -> dict:
    """How many deletions waited (> ``SLOW``), and of those, how many began with a thread sleeping on and
    ended at a scheduled round (within ``AT_ROUND``)."""
    slow = [d for d in deletions if d["seconds"] > SLOW]
    at_round = [d for d in slow if d["end_to_nearest_round_s"] is not None and d["end_to_nearest_round_s"] < AT_ROUND]
    return {"deletions": len(deletions), "slow": len(slow), "slow_seconds": sorted(d["seconds"] for d in slow),
            "fast_max_seconds": max((d["seconds"] for d in deletions if d["seconds"] <= SLOW), default=None),
            "tuning_threads_per_epoch": sorted({d["tuning_threads"] for d in deletions}),
            "slow_that_began_with_a_thread_sleeping_on": sum(d["slept_on_at_start"] for d in slow),
            "slow_that_ended_at_a_scheduled_round": len(at_round),
            "fast_that_began_with_a_thread_sleeping_on": sum(d["slept_on_at_start"] for d in deletions
                                                              if d["seconds"] <= SLOW)}


# -- the child: the seed's loop, one epoch per line read from stdin ------------------------------------------

def serve(autotune: bool, replicas: int, limit: int, batch: int) -> None:
    from course_utils.devices import recommended_cross_device_ops, simulate_devices  # noqa: PLC0415

    devices = simulate_devices(replicas)
    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    from course_utils import datasets, models  # noqa: PLC0415

    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=recommended_cross_device_ops())
    train = datasets.load("fashion_mnist", "train", limit=limit, verbose=False)
    images, labels = next(iter(train.dataset.batch(limit)))
    options = tf.data.Options()
    options.autotune.enabled = autotune
    ds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((images.numpy() / np.float32(255), labels.numpy()))
        .shuffle(limit).batch(batch * replicas).with_options(options))
    with strategy.scope():
        model, optimizer = models.build_cnn(train.image_shape, train.num_classes), keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)), global_batch_size=batch * replicas)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    train_step = tf.function(lambda b: strategy.reduce("SUM", strategy.run(step, args=b), axis=None))
    print("ready", flush=True)
    for _ in sys.stdin:  # one epoch per line
        iterator = iter(ds)
        print(f"MARK made {time.time():.3f}", file=sys.stderr, flush=True)
        for b in iterator:
            train_step(b)
        print(f"MARK del_start {time.time():.3f}", file=sys.stderr, flush=True)
        del iterator
        print(f"MARK del_end {time.time():.3f}", file=sys.stderr, flush=True)
        print("done", flush=True)


def child_env(environ=os.environ) -> dict:
    """The child logs tf.data's tuning sleeps: INFO level (TensorFlow's other INFO lines come too) and
    ``model.cc`` at verbosity 2."""
    return {**environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "model=2"}


def _await(child: processes.Piped, word: str, error: str, timeout: float) -> None:
    """Take the child's stdout lines up to one that starts with ``word`` (other lines, such as the device
    notice, pass); ``error`` when the child ends first or writes no such line in ``timeout`` seconds (a hung
    child)."""
    try:
        found = child.wait_for(word, timeout)
    except TimeoutError:
        raise RuntimeError(f"{error} (no '{word}' line in {timeout:g} s)") from None
    if found is None:
        raise RuntimeError(error)


def run(args) -> dict:
    children, logs = {}, {}
    try:
        for name in args.autotune:
            logs[name] = open(args.log_dir / f"child_autotune_{name}.log", "w")  # noqa: SIM115 -- closed below
            children[name] = processes.Piped(
                [sys.executable, __file__, "--child", name, "--replicas", str(args.replicas), "--limit",
                 str(args.limit), "--batch", str(args.batch)], stderr=logs[name], env=child_env())
        for name, child in children.items():
            _await(child, "ready", f"the autotune-{name} child did not start: see {logs[name].name}", args.timeout)
        for _ in range(args.epochs):  # interleaved: one epoch of each child in turn, the other idle
            for name, child in children.items():
                stopped = f"the autotune-{name} child stopped: see {logs[name].name}"
                if not child.send("epoch"):  # it has exited
                    raise RuntimeError(stopped)
                _await(child, "done", stopped, args.timeout)
    finally:
        try:
            for child in children.values():  # its stdin closed, its loop ends: it exits on its own
                child.stop(grace=30)  # or, not gone in 30 s, it is stopped by process group; reaped
        finally:
            for child in children.values():  # after an interrupt in a wait above: the rest at once
                child.stop()
            for log in logs.values():
                log.close()
    args.pids = [child.proc.pid for child in children.values()]
    return analyse_logs(args)


def analyse_logs(args) -> dict:
    found = {name: analyse((args.log_dir / f"child_autotune_{name}.log").read_text().splitlines())
             for name in args.autotune}
    if short := {name: len(d) for name, d in found.items() if len(d) != args.epochs}:
        raise RuntimeError(f"deletions found in the logs {short}, not {args.epochs} each: marks were lost")
    return {name: {"deletions": d, "summary": summary(d)} for name, d in found.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=8, help="epochs (deletions) per setting (default 8)")
    parser.add_argument("--autotune", type=lambda s: s.split(","), default=["on", "off"],
                        help="on, off or on,off (default: both, interleaved)")
    parser.add_argument("--replicas", type=int, default=2, help="MirroredStrategy replicas (default 2)")
    parser.add_argument("--limit", type=int, default=3072, help="training images (default 3072, notebook 04's)")
    parser.add_argument("--batch", type=int, default=64, help="per-replica batch (default 64, the seed's)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds a child may take to start, or to train one epoch, before the run stops "
                             "both (default 600)")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "iterator_teardown.json")
    parser.add_argument("--from-logs", action="store_true",
                        help="analyse the children's logs of the last run again (same --epochs, --autotune)")
    parser.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        serve(args.child == "on", args.replicas, args.limit, args.batch)
        return 0
    if [a for a in args.autotune if a not in ("on", "off")] or len(set(args.autotune)) != len(args.autotune):
        parser.error(f"--autotune takes on, off or on,off, each once (got {','.join(args.autotune)})")
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    if not 0 < args.timeout <= threading.TIMEOUT_MAX:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    args.log_dir = args.output.parent / "iterator_teardown_logs"
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if args.from_logs:  # the analysis again, on the last run's logs; its date and duration stay
        previous = json.loads(args.output.read_text())
        report = {**previous, "autotune": analyse_logs(args)}
        args.output.write_text(json.dumps(report, indent=1) + "\n")
        print(f"re-analysed {args.log_dir}; wrote {args.output}")
        return 0
    started = time.perf_counter()
    results = run(args)
    import tensorflow as tf  # noqa: PLC0415 -- the versions, after the children have finished

    report = {"date": datetime.date.today().isoformat(), "seconds": round(time.perf_counter() - started),
              "tensorflow": tf.__version__, "cpus": os.cpu_count(), "ran_on": machine.describe(),
              "settings": {k: v for k, v in vars(args).items() if k in ("epochs", "replicas", "limit", "batch")},
              "rules": {"slow_s": SLOW, "at_round_s": AT_ROUND}, "pids": args.pids, "autotune": results}
    args.output.write_text(json.dumps(report, indent=1) + "\n")
    for name, result in results.items():
        s = result["summary"]
        print(f"autotune {name}: {s['deletions']} deletions, {s['slow']} slower than {SLOW} s "
              f"({', '.join(f'{x:.2f}' for x in s['slow_seconds'])} s); of those, "
              f"{s['slow_that_began_with_a_thread_sleeping_on']} began with a tuning thread sleeping on and "
              f"{s['slow_that_ended_at_a_scheduled_round']} ended within {AT_ROUND * 1000:.0f} ms of a scheduled round")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
