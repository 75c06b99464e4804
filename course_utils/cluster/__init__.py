"""Run a multi-worker job on this machine: one process per task, always reaped.

:func:`run` starts one Python process per task of a cluster (``tf_config.local_cluster``), each with
its own ``TF_CONFIG``, thread counts, optional CPU core, temporary directory and process group. It
streams their output prefixed by task (``worker 0 | ...``) with TensorFlow's run-dependent log lines
(:data:`NOISE`) left out (every line is in the task's log file), or shows one status line per task. It
can kill a task on purpose (:class:`Fault`) and restart the task or the whole cluster.

Whatever happens, no process it started survives it (:mod:`course_utils.processes`): after success,
after a task fails (the others get ``fail_grace`` seconds to notice on their own, then are stopped),
on a timeout, on Ctrl-C (a Jupyter interrupt), when the Python process exits (``atexit``), and, for
the tasks themselves, when the parent dies outright (Linux: ``PR_SET_PDEATHSIG``). Tasks are stopped
by process group, so children a task started go too.

Progress: a task reports it by printing lines containing ``epoch N`` and/or ``step N``.

Inside: ``_launcher`` (:class:`Launcher`, which owns the processes of one :class:`Job`), ``_run``
(:func:`run`'s phases), ``_results`` (what a run returns or raises) and ``_output`` (noise filter,
progress, status board). :mod:`course_utils.servers` is built on the same :class:`Launcher`.
"""

from course_utils.cluster._launcher import Job, Launcher, job, visible_gpus
from course_utils.cluster._output import NOISE, Progress, StatusBoard
from course_utils.cluster._results import ClusterError, ClusterTimeout, Fault, RunResult, TaskFailed, TaskResult
from course_utils.cluster._run import Phase, Watch, run

__all__ = ["NOISE", "ClusterError", "ClusterTimeout", "Fault", "Job", "Launcher", "Phase", "Progress", "RunResult",
           "StatusBoard", "TaskFailed", "TaskResult", "Watch", "job", "run", "visible_gpus"]
