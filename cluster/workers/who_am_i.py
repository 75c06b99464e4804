"""Prints what one task of the cluster sees."""
import json
import os

from course_utils import devices

devices.quiet_tensorflow()
import tensorflow as tf  # noqa: E402

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
jobs = resolver.cluster_spec().as_dict()
chief = resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                          and "chief" not in jobs)
cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "all"
print(f"I am {resolver.task_type} {resolver.task_id} of {', '.join(f'{len(a)} {t}' + 's' * (len(a) > 1) for t, a in jobs.items())};"
      f" chief: {chief}; TF_CONFIG task: {json.loads(os.environ['TF_CONFIG'])['task']}")
threads = os.environ.get("TF_NUM_INTRAOP_THREADS", "unset (TensorFlow's default: one per core)")
print(f"pid {os.getpid()}, cores {cores}, TF_NUM_INTRAOP_THREADS {threads}")
