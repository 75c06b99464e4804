"""Plumbing shared by the notebooks of the distributed-training course.

One small module per concern:

- :mod:`course_utils.devices`   -- simulate several devices on a CPU-only machine.
- :mod:`course_utils.data`      -- load Fashion-MNIST / SVHN from the best available source,
                                   and the shared ``tf.data`` input pipeline.
- :mod:`course_utils.models`    -- the course's CNN builders.
- :mod:`course_utils.callbacks` -- learning-rate decay, ``PrintLR`` and a throughput callback.
- :mod:`course_utils.timing`    -- a stopwatch and throughput arithmetic.
- :mod:`course_utils.plots`     -- training curves and bar charts.

The ``tf.distribute`` calls that the course teaches stay in the notebooks.
Modules import TensorFlow lazily where they can, so that
``course_utils.devices.simulate_devices`` can run before TensorFlow starts.
"""

__version__ = "0.1.0"
