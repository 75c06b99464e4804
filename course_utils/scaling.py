"""How ``MultiWorkerMirroredStrategy`` scales on this machine: 1 worker vs N, over per-worker batch sizes.

Two halves:

- run as a script (:func:`worker_main`), each task of a cluster trains the course's CNN with a custom
  loop and times it at each per-worker batch size in ``--batches``: warm-up steps first, then
  ``--images`` images per worker, and prints one ``RESULT {json}`` line per batch size;
- :func:`measure` runs that script with :func:`course_utils.cluster.run` on 1 worker and on N workers
  (one core and one thread each, so N workers have N times the hardware of one), alternating them
  for ``rounds`` rounds, and :class:`Scaling` reports median, spread, speed-up and efficiency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import verdicts

RESULT = "RESULT "
ALLREDUCE = "ALLREDUCE "


def _worker_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", default="32,64,128,256,512", help="per-worker batch sizes, comma-separated")
    parser.add_argument("--images", type=int, default=4096, help="timed images per worker per batch size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per batch size")
    parser.add_argument("--allreduce-repeats", type=int, default=10, help="timed all-reduces of the gradients alone")
    return parser.parse_args(argv)


def worker_main(argv=None) -> None:
    """One task of the timing cluster (``TF_CONFIG`` set by the launcher)."""
    args = _worker_args(argv)
    batches = [int(b) for b in args.batches.split(",")]

    from course_utils import datasets, devices, models, pipeline, worker_exit  # noqa: PLC0415

    devices.quiet_tensorflow()  # before TensorFlow's import: its start-up lines hidden, the collector paused
    import keras  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    ring = tf.distribute.experimental.CommunicationImplementation.RING
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=ring))
    workers = strategy.num_replicas_in_sync
    train = datasets.load("fashion_mnist", "train", limit=max(batches) * workers * 4, verbose=False)
    with strategy.scope():
        model, optimizer = models.build_cnn(train.image_shape, train.num_classes), keras.optimizers.Adam()
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    for batch in batches:
        global_batch = batch * workers

        def dataset_fn(context):
            ds = train.dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
            ds = ds.map(pipeline.scale_image).cache().repeat()
            per_replica = context.get_per_replica_batch_size(global_batch)  # noqa: B023 (used in this iteration)
            return ds.batch(per_replica, drop_remainder=True).prefetch(2)

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

        @tf.function
        def train_step(images, labels):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example(labels, model(images, training=True)),
                                                  global_batch_size=global_batch)  # noqa: B023 (traced here)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        def step():
            return strategy.run(train_step, args=next(iterator))  # noqa: B023 (called in this iteration)

        for _ in range(args.warmup):
            float(strategy.experimental_local_results(step())[0])
        steps = max(8, -(-args.images // batch))  # at least --images images, and 8 steps
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        float(strategy.experimental_local_results(loss)[0])  # wait for the last step
        seconds = time.perf_counter() - start
        print(f"batch {batch} step {steps}", flush=True)
        print(RESULT + json.dumps({"workers": workers, "per_worker_batch": batch, "steps": steps,
                                   "seconds": seconds, "images_per_s": steps * global_batch / seconds}), flush=True)
    if workers > 1:
        seconds = _time_bare_all_reduce(strategy, model, args.warmup, args.allreduce_repeats)
        print(ALLREDUCE + json.dumps({"workers": workers, "seconds": seconds}), flush=True)
    iterator = None  # stop the last input pipeline while every peer is still there (see worker_exit)
    worker_exit.leave_together()  # nobody exits while a peer is still inside the last all-reduce


def _time_bare_all_reduce(strategy, model, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` all-reduces of tensors shaped like the model's gradients, with no
    training in the step (after ``warmup`` untimed ones); each includes one call and one wait for it."""
    import tensorflow as tf  # noqa: PLC0415

    zeros = [tf.zeros_like(v) for v in model.trainable_variables]

    @tf.function
    def bare_all_reduce():
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", zeros))

    seconds = []
    for repeat in range(warmup + repeats):
        start = time.perf_counter()
        float(tf.reduce_sum(strategy.experimental_local_results(bare_all_reduce())[0][-1]))  # wait for it
        if repeat >= warmup:
            seconds.append(time.perf_counter() - start)
    return seconds


@dataclass
class Scaling:
    """``rates[workers][per_worker_batch]``: images/s (all workers together), one per round."""

    rates: dict
    allreduce_s: dict = field(default_factory=dict)  # {workers: [seconds of one bare all-reduce, ...]}

    def median(self, workers: int, batch: int) -> float:
        return statistics.median(self.rates[workers][batch])

    def efficiency(self, workers: int, batch: int) -> float:
        """Speed-up over one worker divided by the worker count (1.0: perfect scaling)."""
        return self.median(workers, batch) / self.median(1, batch) / workers

    def efficiency_range(self, workers: int, batch: int) -> tuple[float, float]:
        """The lowest and highest efficiency the rounds allow: slowest N against fastest 1, and back."""
        many, one = self.rates[workers][batch], self.rates[1][batch]
        return min(many) / max(one) / workers, max(many) / min(one) / workers

    def trend(self, workers: int) -> list[str]:
        """Whether efficiency rises from each batch size to the next, by the range rule, or why no verdict."""
        batches = sorted(self.rates[workers])
        rounds = min(len(self.rates[n][b]) for n in (1, workers) for b in batches)
        if len(batches) < 2 or rounds < 2:
            return [f"efficiency against the per-worker batch: no verdict from {len(batches)} batch size(s) and "
                    f"{rounds} round(s) (the rule needs 2 sizes and the ranges of 2 rounds)"]
        lines = []
        for small, large in zip(batches, batches[1:]):
            (lo_s, hi_s), (lo_l, hi_l) = self.efficiency_range(workers, small), self.efficiency_range(workers, large)
            ranges = f"{lo_s:.0%}-{hi_s:.0%} vs {lo_l:.0%}-{hi_l:.0%}"
            verdict = {1: "rises: the ranges separate", -1: "falls: the ranges separate",
                       0: "within noise: the ranges overlap"}[verdicts.separate((lo_l, hi_l), (lo_s, hi_s))]
            lines.append(f"efficiency from per-worker batch {small} to {large} {verdict} ({ranges})")
        return lines

    def account(self, workers: int, batch: int) -> dict:
        """Milliseconds of one step at ``batch`` per worker: one worker's, N workers', the all-reduce alone
        (median of its repeats) and the rest of the difference; and the efficiency the all-reduce alone leaves."""
        one = 1e3 * batch / self.median(1, batch)
        many = 1e3 * batch * workers / self.median(workers, batch)
        if workers > 1 and not self.allreduce_s.get(workers):
            raise ValueError(f"no bare all-reduce timed for {workers} workers: measure() again with this scaling.py")
        bare = 1e3 * statistics.median(self.allreduce_s[workers]) if workers > 1 else 0.0  # nothing to combine
        return {"one": one, "many": many, "all_reduce": bare, "rest": many - one - bare,
                "efficiency_if_only_all_reduce": one / (one + bare)}

    def best(self, workers: int) -> int:
        """The per-worker batch with the highest efficiency for ``workers``."""
        return max(self.rates[workers], key=lambda b: self.efficiency(workers, b))

    def table(self) -> str:
        many = max(self.rates)
        rows = [f"{'per-worker batch':>16} {'1 worker, images/s':>24} {f'{many} workers, images/s':>24}"
                f" {'speed-up':>9} {'efficiency':>11}"]
        for batch in sorted(self.rates[1]):
            cells = []
            for n in (1, many):
                values = self.rates[n][batch]
                cells.append(f"{self.median(n, batch):,.0f} ({min(values):,.0f}-{max(values):,.0f})")
            rows.append(f"{batch:>16} {cells[0]:>24} {cells[1]:>24} {self.efficiency(many, batch) * many:>8.2f}x"
                        f" {self.efficiency(many, batch):>10.0%}")
        return "\n".join(rows)


def measure(workers: int = 2, batches=(32, 64, 128, 256, 512), images: int = 4096, rounds: int = 2,
            log_dir="logs/scaling", show: str = "status", threads: int | None = 1) -> Scaling:
    """Time 1 worker and ``workers`` workers, alternating, ``rounds`` times (one launch each), each
    worker with ``threads`` threads on a core of its own (``None``: TensorFlow's defaults, any core)."""
    from course_utils import cluster  # noqa: PLC0415

    rates: dict = {1: {b: [] for b in batches}, workers: {b: [] for b in batches}}
    allreduce: dict = {}
    for round_ in range(rounds):
        for n in (1, workers):
            run = cluster.run(None, module=__name__, workers=n, threads=threads, show=show,
                              log_dir=Path(log_dir) / f"round{round_}-{n}w",
                              args=["--batches", ",".join(map(str, batches)), "--images", images])
            for line in run.latest()[0].log_path.read_text().splitlines():  # worker 0's log
                if line.startswith(RESULT):
                    found = json.loads(line[len(RESULT):])
                    rates[n][found["per_worker_batch"]].append(found["images_per_s"])
                elif line.startswith(ALLREDUCE):
                    allreduce.setdefault(n, []).extend(json.loads(line[len(ALLREDUCE):])["seconds"])
    return Scaling(rates, allreduce)


def core_ceiling(workers: int, threads: int, cores: int) -> float:
    """The highest efficiency ``workers`` tasks of ``threads`` threads can reach on ``cores`` cores (1.0 when
    every thread has a core of its own): oversubscribed cores are shared, so the work cannot run faster."""
    return min(1.0, cores / (workers * threads))


if __name__ == "__main__":
    worker_main()
