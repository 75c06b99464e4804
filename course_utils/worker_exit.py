"""How a worker of a multi-worker job ends: every task leaves together, after the last collective.

Why this is needed. In a ``MultiWorkerMirroredStrategy`` job each collective (an all-reduce, a
broadcast) is finished by every worker on its own clock. With two workers, worker 1 can hold the
result of the last all-reduce while worker 0 is still fetching its final chunk from worker 1. If
worker 1 exits then, its sockets close and worker 0's collective fails with ``UnavailableError:
Collective ops is aborted by: Socket closed`` (seen in CI on a loaded machine). The opposite order
costs time: the task that hosts TensorFlow's coordination service (worker 0, or the chief) waits at
its own exit until the service declares the departed peers dead -- 5 to 20 s here, ending with "The
tasks have crashed ... CoordinationServiceError" in its log although nothing crashed.

The cure is TensorFlow's own: its coordination service (started by the strategy, hosted by the
leader task) offers a barrier that completes only when every task of the job has reached it.
:func:`leave_together` waits there. A task reaches it only after its own last collective returned,
so once it passes, no collective is in flight anywhere and any task may exit. (Measured here: notebook
05's custom-loop workers now end together, 14.8 s and 14.8 s, where worker 0 had ended 20 s after
worker 1 with "The tasks have crashed".) Exiting can still take a while after the barrier if the
script leaves an input iterator running: TensorFlow destroys it only as Python exits, and when a peer
has already left by then, the exit can wait until the coordination service declares that peer gone
(about 10 s here, with "The tasks have crashed" in the waiting task's log). Measured on notebook 05's
custom loop: one task's exit was held ~10 s in most of 6 runs without ``del iterator`` before the barrier,
in none of 8 with it. So every worker script deletes its iterator just before :func:`leave_together`.
The deletion itself can take up to a minute: it waits for tf.data's tuning threads to reach their next
round (benchmarks/README.md, ``iterator_teardown.py``). A worker warned before a Slurm time limit must
have that time: 5 of 6 such deletions took 30-32 s in ``tests/test_slurm.py``'s time-limit job.

TensorFlow 2.21 points at this itself: "If a synchronized shutdown is desired,
the user / library should invoke ``WaitAtBarrier`` explicitly at the end of the program"; its
DTensor ``barrier()`` is built on the same call. It has no public ``tf.`` name, so the course calls
it in this one place.

Every worker script of the course ends with ``worker_exit.leave_together()`` (notebooks 05 and 05b,
``course_utils.scaling``, the tests' scripts); none calls ``os._exit``. If a peer died, the barrier
fails as soon as the service notices (or after ``timeout_s``) and the worker exits with an error, as
it should: the job did not finish.
"""

from __future__ import annotations

import signal
import threading

BARRIER_ID = "course_utils.worker_exit.leave_together"


def leave_together(timeout_s: float = 600.0) -> bool:
    """Block until every task of this multi-worker job has called this; return ``True`` once all have.

    Call it as the last statement of a worker script, after its last collective (training, saving).
    Returns ``False`` at once where there is no coordination service to wait on (no ``TF_CONFIG``
    cluster, so no peer). ``timeout_s``: how long the first task to arrive waits for the last one
    (the chief may still be saving a model); past it, or when a peer is found dead, this raises.

    From here on the worker ignores USR1, the batch scripts' warning before a time limit: the work is
    saved, and Python restores USR1's default action (to end the process) as it exits. A warning that
    arrived then, after the last line (tests/test_slurm.py's job: its final run exited 138), would
    fail a job that had finished.
    """
    if threading.current_thread() is threading.main_thread():  # only the main thread may set a handler
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    from tensorflow.python.eager import context  # noqa: PLC0415 (TensorFlow starts with the worker)

    if context.context().coordination_service is None:
        return False
    try:
        context.context().wait_at_barrier(BARRIER_ID, int(timeout_s * 1000))
    except Exception as error:  # noqa: BLE001 (TensorFlow raises several kinds: all mean the same here)
        raise RuntimeError(
            f"Not every worker reached the end of the job within {timeout_s:g} s: a peer failed or is "
            f"still busy. Read the other workers' logs; if one is just slow to finish (saving a large "
            f"model), pass a larger timeout_s. TensorFlow said: {error}") from error
    return True
