"""Plumbing shared by the notebooks of the distributed-training course, one small module per concern.

The ``tf.distribute`` calls the course teaches stay in the notebooks. Modules import TensorFlow lazily
where they can, so that ``devices.simulate_devices`` can run before TensorFlow starts.

Every notebook
- :mod:`course_utils.devices`    -- ``n`` devices anywhere: logical CPUs, a GPU split, or real GPUs.
- :mod:`course_utils.parameters` -- the checks in the cell after the parameters: stop at once, naming values that work.
- :mod:`course_utils.datasets`   -- Fashion-MNIST (and SVHN) from the best available source, offline first.
- :mod:`course_utils.idx`        -- read and write IDX files (the MNIST file format).
- :mod:`course_utils.pipeline`   -- the shared ``tf.data`` input pipeline and its checks.
- :mod:`course_utils.models`     -- the course's CNN, with stable layer names.
- :mod:`course_utils.timing`     -- a stopwatch, interleaved repeats, median and spread tables.
- :mod:`course_utils.plots`      -- training curves, median bars with min-max whiskers, cluster diagrams.
- :mod:`course_utils.diagrams`   -- the pictures of mechanisms (scaling, a step's timeline, all-reduce), drawn by code.
- :mod:`course_utils.strategy_diagrams` -- a ``MirroredVariable``'s copies; all-reduce beside parameter servers.
- :mod:`course_utils.mwms_diagrams` -- a multi-worker job's processes and ``TF_CONFIG``; a worker's death in time.
- :mod:`course_utils.network_diagrams` -- notebook 05b's namespaces, veth pairs, bridge and rate limits.
- :mod:`course_utils.ps_diagrams` -- variables on the parameter servers; an asynchronous timeline, staleness.
- :mod:`course_utils.slurm_diagrams` -- a Slurm job's tasks on its nodes, with what each task is told.
- :mod:`course_utils.machine`    -- the machine a notebook ran on, in one line.
- :mod:`course_utils.verdicts`   -- run-dependent conclusions, one short line each, printed by their rule.

02 ``MirroredStrategy`` with ``fit`` and 03 the custom loop
- :mod:`course_utils.callbacks`   -- a throughput callback that times training steps only.
- :mod:`course_utils.checkpoints` -- find and load checkpoints, with errors that say what to do.
- :mod:`course_utils.compare`     -- gradients and weights of two runs: scale, angle, max difference.

04 single vs multi device
- :mod:`course_utils.peak`       -- this machine's matmul peak FLOP/s, FLOPs per image, mixed precision measured.
- :mod:`course_utils.monitor`    -- per-core CPU and GPU utilisation sampled in a background thread.
- :mod:`course_utils.waterfall`  -- whole runs side by side, what each one-at-a-time change cost.
- :mod:`course_utils.waterfall_charts` -- the waterfall chart, and the grouped chart of differences.
- :mod:`course_utils.op_profile` -- a TensorFlow profiler trace read back: step times, op time by owner.
- :mod:`course_utils.kernel_sets` -- one training step with TensorFlow's own x86 kernels and with oneDNN's, each
  in processes of its own.

05 multi-worker and 05b network links
- :mod:`course_utils.tf_config`      -- build ``TF_CONFIG`` on free local ports, and check any you are given.
- :mod:`course_utils.processes`      -- child processes in their own groups, always stopped (never left running).
- :mod:`course_utils.cluster`        -- run a cluster's tasks as local processes, with faults and restarts (a package:
  its launcher, its run's phases, what a run returns, the tasks' output).
- :mod:`course_utils.worker_exit`    -- the last line of every worker script: all workers leave together.
- :mod:`course_utils.notebook_files` -- the files a notebook's ``%%writefile`` cells write.
- :mod:`course_utils.scaling`        -- time 1 worker against N over per-worker batch sizes.
- :mod:`course_utils.netlab`         -- machines joined by links of a chosen bandwidth (network namespaces).

06 parameter servers
- :mod:`course_utils.servers` -- parameter-server tasks that keep running: kill, restart, a bounded join.

07 the SVHN exercise
- :mod:`course_utils.svhn_standin`    -- an offline, generated stand-in for SVHN crops, cached on disk.
- :mod:`course_utils.exercise_checks` -- the exercise's check cells: each wrong answer told what to do.

08 Slurm
- :mod:`course_utils.slurm`       -- a local one-node Slurm cluster, ``sbatch`` and wait, jobs that never start.
- :mod:`course_utils.slurm_tasks` -- inside a Slurm task: the step's layout in Slurm's order, ports, ``TF_CONFIG``.
- :mod:`course_utils.slurm_hostlist` -- Slurm's compressed host lists and task counts, without TensorFlow.
- :mod:`course_utils.slurm_gpus`  -- which GPUs a Slurm task uses, from what Slurm set (device cgroups too).
"""

__version__ = "0.1.0"
