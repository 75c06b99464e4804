"""The course's ``tf.data`` input pipeline: :func:`make_pipeline`, and the batch arithmetic of ``tf.distribute``.

:func:`make_pipeline` scales to [0, 1], caches, shuffles, batches by the *global* batch
size and prefetches; :func:`per_replica_batch` and :func:`last_batch_split` say how a
global batch divides across replicas.
"""

from __future__ import annotations


def per_replica_batch(global_batch_size: int, num_replicas: int) -> int:
    """Return the per-replica batch, or raise if the global batch does not divide evenly."""
    if not isinstance(global_batch_size, int) or global_batch_size < 1:
        raise ValueError(f"global_batch_size must be a positive integer, got {global_batch_size!r}")
    if not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"num_replicas must be a positive integer, got {num_replicas!r}")
    per_replica, rest = divmod(global_batch_size, num_replicas)
    if rest or per_replica == 0:
        lower = max(per_replica, 1) * num_replicas
        upper = (per_replica + 1) * num_replicas
        options = f"{lower} or {upper}" if lower != upper and per_replica else f"{upper}"
        raise ValueError(
            f"Global batch size {global_batch_size} does not divide across {num_replicas} "
            f"replicas. Use per_replica_batch * num_replicas_in_sync, e.g. {options}."
        )
    return per_replica


def last_batch_split(num_examples: int, global_batch_size: int, num_replicas: int) -> list[int]:
    """How ``tf.distribute`` splits the last (partial) batch across replicas; [] if there is none.

    Each replica takes up to ``ceil(remainder / num_replicas)`` examples in turn, so a
    short last batch can leave the last replicas with none: 4 examples on 3 replicas
    become [2, 2, 0].
    """
    remainder = num_examples % global_batch_size
    if remainder == 0:
        return []
    share = -(-remainder // num_replicas)  # ceil
    sizes = []
    for _ in range(num_replicas):
        sizes.append(min(share, remainder))
        remainder -= sizes[-1]
    return sizes


def scale_image(image, label):
    """uint8 [0, 255] -> float32 [0, 1]; the label is passed through."""
    import tensorflow as tf  # noqa: PLC0415

    return tf.cast(image, tf.float32) / 255.0, label


def make_pipeline(
    dataset,
    global_batch_size: int,
    *,
    training: bool,
    num_replicas: int | None = None,
    shuffle_buffer: int = 10_000,
    seed: int | None = None,
    cache: bool = True,
    drop_remainder: bool = False,
):
    """The course's input pipeline: scale, cache, shuffle (training only), batch, prefetch.

    Batches by the **global** batch size, which ``tf.distribute`` splits across
    replicas. With ``num_replicas`` given, a global batch that does not divide
    evenly raises a ``ValueError`` that says which sizes would, and so does a last
    partial batch that would leave a replica with no examples (see :func:`last_batch_split`).
    """
    import tensorflow as tf  # noqa: PLC0415

    per_replica_batch(global_batch_size, 1 if num_replicas is None else num_replicas)
    if num_replicas is not None:
        num_examples = int(dataset.cardinality())
        split = [] if drop_remainder or num_examples < 0 else last_batch_split(
            num_examples, global_batch_size, num_replicas)
        if 0 in split:
            raise ValueError(
                f"With {num_examples} examples the last batch holds {sum(split)}, which "
                f"tf.distribute splits as {split} over {num_replicas} replicas: a replica with no "
                "examples, and a Conv2D on an empty batch fails on CPU. Pass drop_remainder=True "
                "(training), or pick a global batch size that leaves at least one example per "
                "replica in the last batch."
            )
    ds = dataset.map(scale_image, num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        ds = ds.cache()
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds.batch(global_batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
