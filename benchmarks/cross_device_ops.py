"""Model.fit throughput under MirroredStrategy on logical CPU devices, by cross-device ops.

Backs the choice in ``course_utils.devices.recommended_cross_device_ops``: on a CPU-only
machine TensorFlow's default (collective all-reduce) fails with steps_per_execution > 1,
while ReductionToOneDevice runs both settings. Per-epoch rates are kept because single
epochs sometimes run at a half or a quarter of the usual speed on a small machine.

    python benchmarks/cross_device_ops.py [--devices 2] [--examples 19200] [--repeats 3]

Prints a table and writes benchmarks/results/cross_device_ops.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

from course_utils import machine
from course_utils.devices import simulate_devices


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--examples", type=int, default=19_200, help="training examples per epoch")
    parser.add_argument("--per-replica-batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per configuration")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "cross_device_ops.json")
    args = parser.parse_args(argv)

    simulate_devices(args.devices)  # before TensorFlow starts: it fixes its devices at its first op
    import keras  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    from course_utils import callbacks, datasets, models, pipeline  # noqa: PLC0415

    train = datasets.load("fashion_mnist", "train", limit=args.examples)
    configs = {"collective (TF default)": None, "ReductionToOneDevice": tf.distribute.ReductionToOneDevice()}
    results = []
    for name, ops in configs.items():
        strategy = tf.distribute.MirroredStrategy(cross_device_ops=ops)
        global_batch = args.per_replica_batch * strategy.num_replicas_in_sync
        ds = pipeline.make_pipeline(train.dataset, global_batch, training=True, seed=0, drop_remainder=True)
        examples = int(ds.cardinality()) * global_batch
        for steps_per_execution in (1, 10):
            keras.utils.set_random_seed(0)
            with strategy.scope():
                model = models.build_cnn(train.image_shape, train.num_classes)
                model.compile(optimizer="adam", steps_per_execution=steps_per_execution,
                              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            meter = callbacks.Throughput(examples)
            row = {"cross_device_ops": name, "steps_per_execution": steps_per_execution}
            try:
                model.fit(ds, epochs=1 + args.repeats, verbose=0, callbacks=[meter])
            except tf.errors.OpError as err:
                lines = [line.strip() for line in err.message.splitlines() if line.strip()]
                # the first "(0) INVALID_ARGUMENT: ..." style line says more than "Graph execution error:"
                detail = next((line for line in lines if line.split(":")[0].isupper()), lines[0])
                row["error"] = f"{type(err).__name__}: {detail[:160]}"
            else:
                timed = meter.images_per_sec[1:]
                row.update(images_per_sec=timed, median=statistics.median(timed),
                           spread=max(timed) / min(timed))
            results.append(row)
            shown = row.get("error") or (f"median {row['median']:7.0f} images/s, "
                                         f"epochs {[round(r) for r in row['images_per_sec']]}")
            print(f"{name:<24} steps_per_execution={steps_per_execution:<3} {shown}", flush=True)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "benchmark": "cross_device_ops", "devices": args.devices, "examples_per_epoch": args.examples,
        "per_replica_batch": args.per_replica_batch, "tensorflow": tf.__version__,
        "keras": keras.__version__, "machine": platform.machine(), "ran_on": machine.describe(),
        "results": results}, indent=2))
    print(f"saved {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
