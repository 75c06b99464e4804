"""Slurm for the course: a local one-node cluster, a submit helper, and a resolver for CPU-only nodes.

:func:`local_cluster` starts a private Slurm cluster on this machine (Debian's ``slurm-wlm`` and ``munge``;
:func:`available` says whether it can): its own munge key, ``slurm.conf``, ports, state and logs in a
temporary directory (a system Slurm is never touched), ``munged``, ``slurmctld`` and ``slurmd`` as child
processes (:mod:`course_utils.processes`). On exit, error or Ctrl-C it cancels the jobs, stops its daemons,
kills what the jobs left (:func:`leftovers`) and removes the directory; if the process that started it
dies first (``kill -9``, a crashed kernel), a janitor process does the same (``_janitor``).
:func:`stop_when_a_cell_fails` stops it when a notebook cell raises, so that a Run All stopped by an
error leaves nothing running. :func:`submit` runs ``sbatch`` and
waits; a job Slurm would leave pending forever (more tasks than CPUs: reason ``PartitionConfig``) is
cancelled and raises :class:`JobNeverStarts`, saying what to change; :func:`requeued_starter` starts a
requeued job seconds after its requeue, not after Slurm's two-minute hold. What runs inside a job's tasks
(the resolver, the ``TF_CONFIG`` wrapper) is in :mod:`course_utils.slurm_tasks`.

Inside: ``_daemons`` (the cluster's daemons, started and stopped) and ``_jobs`` (``sbatch``, waiting, states).
"""

from course_utils.slurm._daemons import (
           COMMANDS,
           SBIN,
           LocalCluster,
           SlurmError,
           available,
           leftovers,
           local_cluster,
)
from course_utils.slurm._janitor import stop_when_a_cell_fails
from course_utils.slurm._jobs import (
           FINISHED,
           NEVER_STARTS,
           Job,
           JobFailed,
           JobNeverStarts,
           JobTimeout,
           free_port_base,
           job_fields,
           requeued_starter,
           submit,
)

__all__ = ["COMMANDS", "FINISHED", "NEVER_STARTS", "SBIN", "Job", "JobFailed", "JobNeverStarts", "JobTimeout",
           "LocalCluster", "SlurmError", "available", "free_port_base", "job_fields", "leftovers", "local_cluster",
           "requeued_starter", "stop_when_a_cell_fails", "submit"]
