import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from course_utils import devices
from conftest import TEST_DEVICES


def test_two_logical_cpu_devices_configured():
    assert len(TEST_DEVICES) == 2
    assert [d.name for d in tf.config.list_logical_devices("CPU")] == TEST_DEVICES
    assert tf.distribute.MirroredStrategy().num_replicas_in_sync == 2


def test_same_count_again_is_a_no_op(capsys):
    assert devices.simulate_devices(2) == TEST_DEVICES
    assert "no change" in capsys.readouterr().out


def test_other_count_after_start_says_restart_the_kernel():
    with pytest.raises(devices.DeviceConfigError, match="Restart the kernel"):
        devices.simulate_devices(3)
    assert len(tf.config.list_logical_devices("CPU")) == 2  # nothing changed


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True])
def test_rejects_non_positive_or_non_integer(bad):
    with pytest.raises(ValueError, match="positive integer"):
        devices.simulate_devices(bad)


def test_fresh_process_gets_the_requested_count_and_quiet_start():
    code = textwrap.dedent("""
        from course_utils.devices import simulate_devices
        names = simulate_devices(3)
        import tensorflow as tf
        print("replicas", tf.distribute.MirroredStrategy().num_replicas_in_sync, len(names))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "simulating 3 devices" in proc.stdout
    assert "replicas 3 3" in proc.stdout
    assert "oneDNN" not in proc.stderr and "cuda" not in proc.stderr.lower()


def test_cpu_only_machines_reduce_through_one_device():
    ops = devices.recommended_cross_device_ops()
    assert isinstance(ops, tf.distribute.ReductionToOneDevice)
    strategy = tf.distribute.MirroredStrategy(cross_device_ops=ops)

    @tf.function
    def two_steps_in_one_call(iterator):
        # the in-graph loop that collective all-reduce breaks on logical CPU devices
        total = tf.constant(0.0)
        for _ in tf.range(2):
            per_replica = strategy.run(lambda x: tf.reduce_sum(x), args=(next(iterator),))
            total += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return total

    ds = tf.data.Dataset.range(8).map(lambda i: tf.cast(i, tf.float32)).batch(4)
    assert float(two_steps_in_one_call(iter(strategy.experimental_distribute_dataset(ds)))) == 28.0
