"""One worker of a MultiWorkerMirroredStrategy job: Model.fit, fault tolerant, chief duties."""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile

from course_utils import checkpoints, datasets, devices, worker_exit

def count(text):  # a number of examples; "None" (how the launchers pass Python's None): all
    return None if text == "None" else int(text)

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--per-worker-batch", type=int, default=64)
parser.add_argument("--learning-rate", type=float, default=0.001, help="Adam's (its default: 0.001)")
parser.add_argument("--limit", type=count, default=None, help="training examples (None: all)")
parser.add_argument("--test-limit", type=count, default=None, help="test examples (None: all)")
parser.add_argument("--out", default="../runs/05_multi_worker/by_hand_fit")  # beside notebooks/, as the runs
parser.add_argument("--keras", type=int, choices=[2, 3], default=2)
parser.add_argument("--communication", choices=["auto", "NCCL", "RING"], default="auto",
                    help="all-reduce across workers (auto: NCCL where this worker sees GPUs, else RING)")
parser.add_argument("--backup-every", type=int, default=None, help="steps between backups (None: each epoch's end)")
args = parser.parse_args()

stop_requested = []  # a signal asks fit to stop at its next backup (Slurm: the batch script's warning)
signal.signal(signal.SIGUSR1, lambda signum, frame: stop_requested.append(signum))

os.environ["TF_USE_LEGACY_KERAS"] = "1" if args.keras == 2 else "0"  # before TensorFlow is imported
devices.quiet_tensorflow()
import tensorflow as tf  # noqa: E402

keras = tf.keras  # tf_keras (Keras 2) with TF_USE_LEGACY_KERAS=1, else Keras 3

if args.communication == "auto":  # as in the custom loop: NCCL needs GPUs, AUTO means RING
    args.communication = "NCCL" if tf.config.list_physical_devices("GPU") else "RING"
strategy = tf.distribute.MultiWorkerMirroredStrategy(  # the cluster from TF_CONFIG
    communication_options=tf.distribute.experimental.CommunicationOptions(
        implementation=getattr(tf.distribute.experimental.CommunicationImplementation, args.communication)))
# A preemption sends TERM: handled from here on (the strategy's runtime installs a TERM handler of its own)
signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
resolver = strategy.cluster_resolver
me = f"{resolver.task_type} {resolver.task_id}"
# The chief: the task of type "chief", or worker 0 when the cluster has no chief.
is_chief = resolver.task_type == "chief" or (
    resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs)
GLOBAL_BATCH = args.per_worker_batch * strategy.num_replicas_in_sync
os.makedirs(args.out, exist_ok=True)

options = tf.data.Options()  # in-memory data has no files to split: shard by element
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA

def pipeline(split, limit, training):
    data = datasets.load("fashion_mnist", split, limit=limit, verbose=False)
    ds = data.dataset.map(lambda image, label: (tf.cast(image, tf.float32) / 255.0, label)).cache()
    if training:
        ds = ds.shuffle(10_000, seed=0)
    return ds.batch(GLOBAL_BATCH, drop_remainder=training).with_options(options), data

train_ds, train = pipeline("train", args.limit, training=True)
test_ds, _ = pipeline("test", args.test_limit, training=False)

with strategy.scope():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([  # the course's CNN (course_utils.models.build_cnn is Keras 3 only)
        keras.Input(train.image_shape),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(train.num_classes),
    ])
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

class Progress(keras.callbacks.Callback):
    """Prints `epoch E step S` after every step (the launcher reads it); the chief logs the start and each epoch."""

    def on_train_begin(self, logs=None):
        if is_chief:
            with open(os.path.join(args.out, "starts.jsonl"), "a") as f:
                f.write(json.dumps({"pid": os.getpid(), "weights": checkpoints.fingerprint(self.model.get_weights())}) + "\n")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1  # Keras counts from 0; after a restore, training starts later than 1

    def on_train_batch_end(self, batch, logs=None):
        print(f"epoch {self.epoch} step {batch + 1}", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        if is_chief:
            with open(os.path.join(args.out, "epochs.jsonl"), "a") as f:
                logs = {name: float(value) for name, value in logs.items()}
                f.write(json.dumps({"epoch": self.epoch, "pid": os.getpid(), **logs,
                                    "weights": checkpoints.fingerprint(self.model.get_weights())}) + "\n")

@tf.function
def anyone_asked(flag):  # an all-reduce: every worker gets the same answer after the same backup
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(flag,)), axis=None)

class Preempted(Exception):
    """Raised by StopOnSignal after a backup, when any worker was asked to stop."""

class StopOnSignal(keras.callbacks.Callback):
    """Right after each backup (it comes after BackupAndRestore in the list): stop every worker if any was asked."""

    def __init__(self):
        super().__init__()
        self.steps = 0  # counted as BackupAndRestore counts them, across epochs

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if args.backup_every and self.steps % args.backup_every == 0:
            self.stop_if_asked(f"epoch {self.epoch + 1} step {batch + 1}")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if not args.backup_every:
            self.stop_if_asked(f"the end of epoch {epoch + 1}")

    def stop_if_asked(self, where):
        if anyone_asked(tf.constant(float(len(stop_requested)))) > 0:
            raise Preempted(where)

callbacks = [
    keras.callbacks.BackupAndRestore(os.path.join(args.out, "backup"), save_freq=args.backup_every or "epoch"),
    keras.callbacks.ModelCheckpoint(os.path.join(args.out, "checkpoints", "epoch-{epoch:02d}.weights.h5"),
                                    save_weights_only=True),
    Progress(),
    StopOnSignal(),
]

PREEMPTED = 85  # the exit code that asks the batch script to requeue the job (cluster/slurm/)
try:
    model.fit(train_ds, epochs=args.epochs, validation_data=test_ds, callbacks=callbacks, verbose=0)
except Preempted as where:
    print(f"{me}: backed up at {where}, exits for a requeue", flush=True)
    worker_exit.leave_together()
    sys.exit(PREEMPTED)
test_loss, test_accuracy = model.evaluate(test_ds, verbose=0)

def write_dir(path):
    """The chief writes to `path`; every other worker to a temporary directory, removed after."""
    return path if is_chief else tempfile.mkdtemp(prefix=f"{resolver.task_type}-{resolver.task_id}-")

model_dir = write_dir(os.path.join(args.out, "model"))
model.save(model_dir)  # every worker must call save (it runs collective ops); only the chief's copy stays
if not is_chief:
    shutil.rmtree(model_dir)
    print(f"{me}: saved the model to {model_dir}, then removed it: {not os.path.exists(model_dir)}", flush=True)
else:
    with open(os.path.join(args.out, "test.json"), "w") as f:
        json.dump({"test_accuracy": test_accuracy, "test_loss": test_loss}, f)
print(f"{me}: test accuracy {test_accuracy:.4f}", flush=True)
worker_exit.leave_together()  # as in the custom loop: every worker leaves after the last collective
