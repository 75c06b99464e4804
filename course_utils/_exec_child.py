"""Set up a child process, then become the command: ``python _exec_child.py PARENT CPUS -- COMMAND...``.

:func:`course_utils.processes.start` runs every child through this file instead of a ``preexec_fn``
(CPython documents ``preexec_fn`` as unsafe when the parent has threads, and the course's parents have
reader threads). Here, in a fresh single-threaded interpreter, the child asks Linux to kill it when its
parent dies (``PR_SET_PDEATHSIG``; kept across ``exec``), pins itself to ``CPUS`` (``-`` for none; kept
across ``exec`` too), and then replaces itself with ``COMMAND``, keeping its pid.
Standard library only, so that it starts in milliseconds (run with ``python -I -S``).
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, cpus, separator, *command = argv
    if separator != "--" or not command:
        sys.exit("usage: _exec_child.py PARENT_PID CPUS|- -- COMMAND...")
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != int(parent):  # the parent died before prctl took effect
            os._exit(1)
    if cpus != "-" and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these at start-up, and exec would pass that on
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"Could not start {command[0]}: {error}", file=sys.stderr, flush=True)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
