import numpy as np
import pytest
import tensorflow as tf

from course_utils import pipeline


def test_check_global_batch():
    assert pipeline.per_replica_batch(128, 2) == 64
    with pytest.raises(ValueError, match="101 does not divide across 2 replicas.*e.g. 100 or 102"):
        pipeline.per_replica_batch(101, 2)
    with pytest.raises(ValueError, match="2 does not divide across 3 replicas.*e.g. 3"):
        pipeline.per_replica_batch(2, 3)
    with pytest.raises(ValueError, match="positive integer"):
        pipeline.per_replica_batch(0, 2)


def _toy(n=10):
    images = np.stack([np.full((28, 28, 1), (i * 20) % 256, np.uint8) for i in range(n)])
    return tf.data.Dataset.from_tensor_slices((images, np.arange(n, dtype=np.int64)))


def test_pipeline_scales_batches_and_keeps_partial_batch():
    batches = list(pipeline.make_pipeline(_toy(), 4, training=False))
    assert [int(b[0].shape[0]) for b in batches] == [4, 4, 2]
    images, labels = batches[0]
    assert images.dtype == tf.float32
    np.testing.assert_allclose(images[:, 0, 0, 0].numpy(), np.arange(4) * 20 / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(labels.numpy(), [0, 1, 2, 3])


def test_pipeline_drop_remainder():
    batches = list(pipeline.make_pipeline(_toy(), 4, training=False, drop_remainder=True))
    assert [int(b[0].shape[0]) for b in batches] == [4, 4]


def test_training_pipeline_shuffles_each_epoch_without_losing_examples():
    ds = pipeline.make_pipeline(_toy(50), 50, training=True, seed=1)
    first, second = (next(iter(ds))[1].numpy() for _ in range(2))
    assert sorted(first) == list(range(50)) == sorted(second)
    assert list(first) != list(range(50)) and list(first) != list(second)


def test_pipeline_rejects_batch_that_does_not_divide():
    with pytest.raises(ValueError, match="does not divide across 3 replicas"):
        pipeline.make_pipeline(_toy(), 10, training=True, num_replicas=3)
    with pytest.raises(ValueError, match="positive integer"):
        pipeline.make_pipeline(_toy(), 0, training=True)


@pytest.mark.parametrize("n, batch, replicas, split", [
    (10, 5, 1, []), (101, 48, 3, [2, 2, 1]), (100, 48, 3, [2, 2, 0]), (5, 48, 4, [2, 2, 1, 0]), (98, 48, 2, [1, 1])])
def test_last_batch_split(n, batch, replicas, split):
    assert pipeline.last_batch_split(n, batch, replicas) == split


def test_last_batch_split_matches_tf_distribute():
    strategy = tf.distribute.MirroredStrategy()  # the 2 logical CPU devices of conftest
    batches = list(strategy.experimental_distribute_dataset(tf.data.Dataset.range(11).batch(4)))
    last = [int(tf.size(t)) for t in strategy.experimental_local_results(batches[-1])]
    assert last == pipeline.last_batch_split(11, 4, 2) == [2, 1]


def test_pipeline_refuses_a_last_batch_that_leaves_a_replica_empty():
    with pytest.raises(ValueError, match=r"splits as \[1, 1, 0\] over 3 replicas.*drop_remainder=True"):
        pipeline.make_pipeline(_toy(50), 24, training=False, num_replicas=3)
    # dropping the remainder, or a batch size that leaves every replica something, is fine
    assert len(list(pipeline.make_pipeline(_toy(50), 24, training=True, num_replicas=3, drop_remainder=True))) == 2
    assert len(list(pipeline.make_pipeline(_toy(50), 15, training=False, num_replicas=3))) == 4  # last: [2, 2, 1]


def test_pipeline_rejects_zero_replicas():
    with pytest.raises(ValueError, match="num_replicas must be a positive integer"):
        pipeline.make_pipeline(_toy(), 4, training=False, num_replicas=0)
