"""Ctrl-C at every window of the launcher: whatever point it hits, no process the course started survives.

Each case runs a driver process that starts real (tiny, TensorFlow-free) task processes through
``cluster.run`` or ``servers.start``, and sends itself a real SIGINT (``signal.raise_signal``) at the
``n``-th call of one function the launcher goes through: just after ``subprocess.Popen`` returns (the
process exists, nothing records it yet), just after ``processes.start`` returns (the launcher has not
recorded it yet), before a process group is signalled, before a ``wait`` that reaps, before the
temporary directories are removed, and at points of the run's polling loop; the SIGINT goes to the
driver alone, and (where a child could catch it too) to the driver's whole process group, as Jupyter's
interrupt button sends it to the kernel's. Right after
``KeyboardInterrupt`` reaches the driver's code (a Jupyter kernel lives on; ``atexit`` has not run),
the driver lists what is still alive: the processes whose command line carries the case's marker
(tasks and the grandchildren they started) and :data:`course_utils.processes.LIVE`. Both must be
empty, and the SIGINT must have fired and surfaced as ``KeyboardInterrupt``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

ROOT = Path(__file__).resolve().parent.parent

TASK = r'''
import subprocess, sys, time
marker, seconds = sys.argv[1], float(sys.argv[2])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])  # a grandchild
print("epoch 1 step 0", flush=True)
time.sleep(seconds)
print("epoch 1 step 1", flush=True)
'''

DRIVER = r'''
import json, os, queue, shutil, signal, subprocess, sys, time
import psutil
from course_utils import cluster, processes, servers

from course_utils.tf_config import local_cluster

case = json.loads(sys.argv[1])
owners = {"subprocess": subprocess, "Popen": subprocess.Popen, "processes": processes, "shutil": shutil,
          "time": time, "Launcher": cluster.Launcher, "Queue": queue.Queue}
owner, attr = owners[case["owner"]], case["attr"]
real, calls, fired = getattr(owner, attr), [0], []


def interrupt():
    fired.append(True)
    if case["to"] == "group":  # as Jupyter interrupts a kernel: SIGINT to its whole process group
        os.killpg(os.getpgrp(), signal.SIGINT)
    else:
        signal.raise_signal(signal.SIGINT)


def trapped(*args, **kwargs):
    calls[0] += 1
    hit = calls[0] == case["n"] and not fired
    if hit and case["when"] == "before":
        interrupt()
    try:
        return real(*args, **kwargs)
    finally:  # after it returned or raised (queue.Empty, say)
        if hit and case["when"] == "after":
            interrupt()


setattr(owner, attr, trapped)
raised = None
try:
    if case["mode"] == "run":
        cluster.run(case["task"], args=[case["marker"], "1.0"], workers=2, log_dir=case["logs"], show="quiet",
                    fault=cluster.Fault(task="worker 1", after_seconds=0.3, restart="cluster"), fail_grace=0.5,
                    stop_grace=1.0, timeout=60, gpus=0)
    else:
        spec = {"worker": local_cluster(2)["worker"], "ps": local_cluster(1)["worker"]}
        with servers.start(case["task"], args=[case["marker"], "300"], cluster=spec, log_dir=case["logs"],
                           stop_grace=1.0, gpus=0) as tasks:
            time.sleep(0.3)
            tasks.kill("worker 1")
            tasks.restart("worker 1")
            time.sleep(0.3)
except KeyboardInterrupt:
    raised = "KeyboardInterrupt"
except BaseException as error:
    raised = repr(error)
setattr(owner, attr, real)
alive = [p.pid for p in psutil.process_iter(["cmdline", "status"])
         if case["marker"] in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
print(json.dumps({"fired": bool(fired), "calls": calls[0], "raised": raised, "alive": alive,
                  "live": list(processes.LIVE)}))
'''

RUN = "run"  # cluster.run: two workers, a fault kills worker 1 at 0.3 s, the cluster restarts, both finish
SERVE = "servers"  # servers.start: two workers and a ps; worker 1 killed and restarted; then stop
CASES = [
    # (mode, owner, attr, when, n): SIGINT at the n-th call
    *[(RUN, "subprocess", "Popen", "after", n) for n in (1, 2, 3, 4)],  # started, not recorded (4: restart)
    *[(RUN, "processes", "start", "after", n) for n in (1, 2, 3)],  # recorded by processes, not by the launcher
    *[(RUN, "processes", "_signal_group", "before", n) for n in (1, 2, 3, 5)],  # while stopping
    *[(RUN, "Popen", "wait", "before", n) for n in (1, 2, 3, 4, 6)],  # while reaping
    (RUN, "shutil", "rmtree", "before", 1),  # removing the temporary directories
    *[(RUN, "time", "monotonic", "after", n) for n in (2, 8, 20, 40)],  # the polling loop
    (RUN, "Launcher", "reap", "after", 3),
    (RUN, "Queue", "get", "after", 2),  # showing output
    *[(SERVE, "subprocess", "Popen", "after", n) for n in (1, 2, 3, 4)],  # starting; 4: the restart
    *[(SERVE, "processes", "_signal_group", "before", n) for n in (1, 3, 6, 7)],  # kill(); stop(): TERM, KILL
    *[(SERVE, "Popen", "wait", "before", n) for n in (1, 2, 4, 6, 7)],  # 6, 7: reaping the killed groups
    (SERVE, "shutil", "rmtree", "before", 1),
]
GROUP = [  # also as Jupyter sends it, to the kernel's whole process group: one case per kind of window
    (RUN, "subprocess", "Popen", "after", 1), (RUN, "subprocess", "Popen", "after", 4),
    (RUN, "processes", "start", "after", 2), (RUN, "processes", "_signal_group", "before", 3),
    (SERVE, "subprocess", "Popen", "after", 4), (SERVE, "processes", "_signal_group", "before", 6),
    (SERVE, "Popen", "wait", "before", 6), (RUN, "time", "monotonic", "after", 20),
]
CASES = [(*case, "process") for case in CASES] + [(*case, "group") for case in GROUP]


@pytest.mark.parametrize("mode,owner,attr,when,n,to", CASES,
                         ids=[f"{m}-{o}.{a}-{w}-{n}-{t}" for m, o, a, w, n, t in CASES])
def test_ctrl_c_at_this_point_leaves_nothing_running(tmp_path, mode, owner, attr, when, n, to):
    marker = f"dtc-interrupt-{uuid.uuid4().hex}"
    task = tmp_path / "task.py"
    task.write_text(TASK)
    case = {"mode": mode, "owner": owner, "attr": attr, "when": when, "n": n, "to": to, "marker": marker,
            "task": str(task), "logs": str(tmp_path / "logs")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(case)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, start_new_session=True)  # its own group
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]
    for pid in left:  # clean up before failing
        psutil.Process(pid).kill()
    assert report["fired"], f"the trap never fired ({report['calls']} calls): the case tests nothing"
    assert report["raised"] == "KeyboardInterrupt", report
    assert report["alive"] == [] and report["live"] == [], f"survived the interrupt: {report}"
    assert left == [], f"survived the driver: {left}"
