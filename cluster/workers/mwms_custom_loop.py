"""One worker of a MultiWorkerMirroredStrategy job: a custom training loop with Keras 3."""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

from course_utils import datasets, devices, models, worker_exit

def count(text):  # a number of examples; "None" (how the launchers pass Python's None): all
    return None if text == "None" else int(text)

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--per-worker-batch", type=int, default=64)
parser.add_argument("--learning-rate", type=float, default=0.001, help="Adam's (its default: 0.001)")
parser.add_argument("--limit", type=count, default=None, help="training examples (None: all)")
parser.add_argument("--input", choices=["function", "dataset"], default="function")
parser.add_argument("--shard-policy", choices=["AUTO", "DATA", "FILE", "OFF"], default="DATA")
parser.add_argument("--communication", choices=["auto", "NCCL", "RING"], default="auto",
                    help="all-reduce across workers (auto: NCCL where this worker sees GPUs, else RING)")
parser.add_argument("--out", default="../runs/05_multi_worker/by_hand_loop")  # beside notebooks/, as the runs
args = parser.parse_args()

stop_requested = []  # a signal asks the loop to save and exit (Slurm: --signal=USR1@SECONDS before the time limit)
signal.signal(signal.SIGUSR1, lambda signum, frame: stop_requested.append(signum))

devices.quiet_tensorflow()  # TensorFlow's Python warnings off; the launcher filters its C++ log lines
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

me = "{type} {index}".format(**json.loads(os.environ["TF_CONFIG"])["task"])

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()  # reads TF_CONFIG
if args.communication == "auto":  # NCCL needs GPUs; TensorFlow's own AUTO means RING in 2.21
    args.communication = "NCCL" if tf.config.list_physical_devices("GPU") else "RING"
implementation = getattr(tf.distribute.experimental.CommunicationImplementation, args.communication)
strategy = tf.distribute.MultiWorkerMirroredStrategy(
    cluster_resolver=resolver,
    communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))
# A preemption sends TERM: handled from here on (the strategy's runtime installs a TERM handler of its own)
signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
GLOBAL_BATCH = args.per_worker_batch * strategy.num_replicas_in_sync
print(f"{me}: {strategy.num_replicas_in_sync} replicas in sync, global batch {GLOBAL_BATCH}, "
      f"all-reduce {args.communication}", flush=True)

train = datasets.load("fashion_mnist", "train", limit=args.limit, verbose=False)
STEPS_PER_EPOCH = train.num_examples // GLOBAL_BATCH   # the same on every worker: nobody waits forever

def scale(image, label):
    return tf.cast(image, tf.float32) / 255.0, label

def dataset_fn(context: tf.distribute.InputContext):
    """Called on each worker: its own shard of the data, batched per replica."""
    ds = train.dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
    ds = ds.map(scale).cache().shuffle(10_000, seed=0).repeat()
    return ds.batch(context.get_per_replica_batch_size(GLOBAL_BATCH), drop_remainder=True).prefetch(2)

if args.input == "function":
    dist_train = strategy.distribute_datasets_from_function(dataset_fn)
else:  # one pipeline batched globally; tf.data shards it on each worker by the policy below
    ds = train.dataset.map(scale).cache().shuffle(10_000, seed=0).repeat().batch(GLOBAL_BATCH, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy,
                                                                args.shard_policy)
    dist_train = strategy.experimental_distribute_dataset(ds.with_options(options))

with strategy.scope():  # variables created here are mirrored on every worker, kept in sync by all-reduce
    keras.utils.set_random_seed(resolver.task_id)  # a different seed on every worker, on purpose
    model = models.build_cnn(train.image_shape, train.num_classes)
    optimizer = keras.optimizers.Adam(args.learning_rate)
keras.utils.set_random_seed(resolver.task_id)      # the same seed, and the same model outside the scope
unshared = models.build_cnn(train.image_shape, train.num_classes)
print(f"{me}: initial weights' sum {sum(float(tf.reduce_sum(v)) for v in model.weights):.6f} in the scope, "
      f"{sum(float(tf.reduce_sum(v)) for v in unshared.weights):.6f} outside it", flush=True)
per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

@tf.function
def train_step(batch):
    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(per_example_loss(labels, model(images, training=True)),
                                              global_batch_size=GLOBAL_BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))  # all-reduce, then update
        return loss
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=batch), axis=None)

# Every worker saves (saving takes part in collectives): the chief where all restore from, the others aside.
# The chief: the task of type "chief", or worker 0 when the cluster has no chief (as in mwms_fit.py).
is_chief = resolver.task_type == "chief" or (
    resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs)
checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
saved = os.path.join(args.out, "checkpoint")
scratch = tempfile.TemporaryDirectory()  # the other workers' copies: removed as the worker exits
manager = tf.train.CheckpointManager(checkpoint, saved if is_chief else scratch.name, 1)
done = 0  # steps trained by an earlier run of this job (a requeued Slurm job runs the script again)
latest = tf.train.latest_checkpoint(saved)
if latest:
    with strategy.scope():
        optimizer.build(model.trainable_variables)  # restore into built variables
    checkpoint.restore(latest)
    done = int(latest.rsplit("-", 1)[1])  # saved as ckpt-<step>
    print(f"{me}: resuming at step {done}", flush=True)

@tf.function
def anyone_asked(flag):  # an all-reduce: every worker gets the same answer at the same step
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(flag,)), axis=None)

PREEMPTED = 85  # the exit code that asks the batch script to requeue the job (cluster/slurm/)
iterator = iter(dist_train)
for epoch in range(done // STEPS_PER_EPOCH + 1, args.epochs + 1):
    start, total = time.perf_counter(), tf.constant(0.0)
    steps = range(1 + done % STEPS_PER_EPOCH if epoch == done // STEPS_PER_EPOCH + 1 else 1, STEPS_PER_EPOCH + 1)
    for step in steps:
        total += train_step(next(iterator))
        if step % 10 == 0:
            print(f"epoch {epoch} step {step}", flush=True)
        if (step % 10 == 0 or step == STEPS_PER_EPOCH) and anyone_asked(tf.constant(float(len(stop_requested)))):
            at = (epoch - 1) * STEPS_PER_EPOCH + step  # steps trained in all
            manager.save(checkpoint_number=at)
            print(f"{me}: saved at step {at}, exits for a requeue", flush=True)
            del iterator
            worker_exit.leave_together()
            sys.exit(PREEMPTED)
    seconds = time.perf_counter() - start
    print(f"epoch {epoch}: {len(steps)} steps, mean loss {float(total) / len(steps):.4f}, "
          f"{len(steps) * GLOBAL_BATCH / seconds:,.0f} images/s (all workers, on this worker's clock)", flush=True)
    manager.save(checkpoint_number=epoch * STEPS_PER_EPOCH)  # every worker: a lost node costs one epoch at most

os.makedirs(args.out, exist_ok=True)  # every worker saves its weights: the notebook compares them
np.savez(os.path.join(args.out, f"weights-{me.replace(' ', '-')}.npz"), *[v.numpy() for v in model.weights])
print(f"{me}: done", flush=True)
del iterator  # stop the input pipeline while every peer is still there (see above)
worker_exit.leave_together()  # the last line of every worker script: nobody exits mid-collective
