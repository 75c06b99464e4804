"""servers.start with fake servers: scripts that listen on their TF_CONFIG port as tf.distribute.Server
would (no TensorFlow). Every test counts processes: the fake servers record their pids and their
children's, and none may survive a test."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from course_utils import processes, servers
from course_utils.cluster import ClusterError, ClusterTimeout
from course_utils.tf_config import local_cluster
from process_checks import alive, wait_until

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

ROOT = Path(__file__).resolve().parent.parent

# argv[1]: a JSON plan {"all": {...}, "ps 0": {...}}; a task's entry overrides "all".
FAKE_SERVER = r'''
import json, os, signal, socket, subprocess, sys, time

config = json.loads(os.environ["TF_CONFIG"])
name = f"{config['task']['type']} {config['task']['index']}"
plans = json.loads(sys.argv[1])
plan = {**plans.get("all", {}), **plans.get(name, {})}
state = os.environ["FAKE_STATE"]
with open(os.path.join(state, "pids"), "a") as f:
    f.write(f"{name} {os.getpid()}\n")
    if plan.get("grandchild"):
        f.write(f"{name} {subprocess.Popen(['sleep', '300']).pid}\n")
if plan.get("ignore_sigterm"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("REPORT " + json.dumps({"TF_CONFIG": config, "interop": os.environ.get("TF_NUM_INTEROP_THREADS"),
                              "intra": os.environ.get("TF_NUM_INTRAOP_THREADS"), "TMPDIR": os.environ["TMPDIR"]}),
      flush=True)
if plan.get("exit") is not None:
    print("cannot serve: port is bad", flush=True)
    sys.exit(plan["exit"])
time.sleep(plan.get("delay", 0))
port = int(config["cluster"][config["task"]["type"]][config["task"]["index"]].rpartition(":")[2])
server = socket.create_server(("127.0.0.1", port))
while True:
    server.accept()[0].close()
'''

# Starts servers in its own process, then waits: to be interrupted (SIGINT) or killed (SIGKILL).
DRIVER = r'''
import json, sys, time
from course_utils import servers
script, cluster, log_dir, plan = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
with servers.start(script, cluster=cluster, args=[plan], log_dir=log_dir) as tasks:
    tasks.wait_listening(timeout=60)
    try:
        print("listening", flush=True)
        for _ in range(120):  # in 1 s steps: a SIGINT handled just before one long sleep began would wait for its end
            time.sleep(1)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise
'''


class Fake:
    def __init__(self, tmp_path: Path, monkeypatch):
        self.dir = tmp_path
        self.script = tmp_path / "fake_server.py"
        self.script.write_text(FAKE_SERVER)
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.logs = tmp_path / "logs"
        self.cluster = local_cluster(2, chief=True, ps=2)
        monkeypatch.setenv("FAKE_STATE", str(self.state))

    def start(self, plans=None, **kwargs):
        kwargs = {"cluster": self.cluster, "log_dir": self.logs, "stop_grace": 1, "gpus": 0, **kwargs}
        return servers.start(self.script, args=[json.dumps(plans or {})], **kwargs)

    def pids(self) -> dict[str, list[int]]:
        path, found = self.state / "pids", {}
        for line in path.read_text().splitlines() if path.exists() else []:
            name, pid = line.rsplit(" ", 1)
            found.setdefault(name, []).append(int(pid))
        return found

    def survivors(self) -> list[int]:
        return [pid for pids in self.pids().values() for pid in pids if alive(pid)]

    def reports(self, tasks) -> dict[str, dict]:
        found = {}
        for task in tasks.result.tasks:
            for line in task.log_path.read_text().splitlines():
                if line.startswith("REPORT "):
                    found[f"{task.name} {task.attempt}"] = json.loads(line[7:])
        return found


@pytest.fixture
def fake(tmp_path, monkeypatch):
    fake = Fake(tmp_path, monkeypatch)
    yield fake
    # a process SIGKILLed a moment ago ends when the kernel next runs it (late on a loaded machine); one
    # nobody stopped never ends by itself (the fake servers serve forever, their children sleep 300 s)
    deadline = time.monotonic() + 10
    while (left := fake.survivors()) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        psutil.Process(pid).kill()
    assert not left, f"processes of the fake servers survived: {fake.pids()}"
    assert not processes.LIVE, "the registry of live processes is not empty"


class Coordinator:
    """Stands in for tf.distribute.coordinator.ClusterCoordinator: done() after `after` seconds, or never."""

    def __init__(self, after=None, error=None):
        self.t0, self.after, self.error, self.joined = time.monotonic(), after, error, False

    def done(self):
        if self.error is not None:
            raise self.error
        return self.after is not None and time.monotonic() - self.t0 >= self.after

    def join(self):
        self.joined = True


def test_servers_start_listen_and_stop(fake):
    t0 = time.monotonic()
    with fake.start({"all": {"grandchild": True}, "ps 1": {"delay": 2}}, threads=1) as tasks:
        waited = tasks.wait_listening(timeout=60, ready="REPORT")
        # it waited for the slow ps 1 (which listens 2 s after it started, after t0), and returned no
        # sooner than every task listened: each accepts a connection now
        assert time.monotonic() - t0 >= 2 and 0 <= waited <= time.monotonic() - t0
        for address in fake.cluster["worker"] + fake.cluster["ps"]:
            host, port = address.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=5).close()
        assert tasks.running() == ["worker 0", "worker 1", "ps 0", "ps 1"]  # not the chief: that is us
        reports = fake.reports(tasks)
        assert sorted(reports) == ["ps 0 1", "ps 1 1", "worker 0 1", "worker 1 1"]  # each printed it
        tmpdirs = [r["TMPDIR"] for r in reports.values()]
        assert all(os.path.isdir(d) for d in tmpdirs)
    for name, report in reports.items():
        kind, index, _ = name.split()
        assert report["TF_CONFIG"] == {"cluster": fake.cluster, "task": {"type": kind, "index": int(index)}}
        assert (report["interop"], report["intra"]) == ("3", "1")  # 2 workers + 1 inter-op threads
    assert not any(os.path.exists(d) for d in tmpdirs)
    assert [t.stopped_by for t in tasks.result.tasks] == ["stop"] * 4
    assert len([p for pids in fake.pids().values() for p in pids]) == 8  # tasks and their grandchildren
    tasks.stop()  # a second stop does nothing


def test_kill_and_restart_a_worker_on_its_port(fake):
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)
        first = fake.pids()["worker 1"][0]
        tasks.kill("worker 1")
        assert not alive(first) and "worker 1" not in tasks.running()
        tasks.restart("worker 1")
        tasks.wait_listening(timeout=60)
        assert "worker 1" in tasks.running() and fake.pids()["worker 1"][1] != first
        table = tasks.table()
    assert [(t.name, t.attempt, t.stopped_by) for t in tasks.result.tasks if t.name == "worker 1"] == \
        [("worker 1", 1, "fault"), ("worker 1", 2, "stop")]
    assert "worker-1.attempt2.log" in table and "(fault)" in table


def test_restart_everything_after_a_ps_is_lost(fake):
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)
        tasks.kill("ps 0")
        tasks.restart()
        tasks.wait_listening(timeout=60)
        assert sorted(t.attempt for t in tasks.result.latest()) == [2, 2, 2, 2]
        assert len(fake.pids()["worker 0"]) == 2


def test_restart_from_another_thread_is_refused(fake):
    errors = []
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)
        thread = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, tasks.restart, "worker 0")))
        thread.start()
        thread.join()
    assert "from the thread that started the servers" in str(errors[0].value)


def test_a_worker_with_one_interop_thread_is_refused_before_anything_starts(fake):
    with pytest.raises(ValueError, match="at least 2 inter-op threads"):
        fake.start(threads=1, interop_threads={"worker": 1})
    assert not fake.pids() and not processes.LIVE
    with fake.start() as tasks:  # also while the cluster runs (its ports are taken): this is said first
        tasks.wait_listening(timeout=60)
        with pytest.raises(ValueError, match="at least 2 inter-op threads"):
            fake.start(threads=1, interop_threads={"worker": 1})


def test_a_task_that_listens_but_never_says_it_is_ready_times_out(fake):
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)  # started and listening, however loaded the machine
        with pytest.raises(ClusterTimeout, match="did not print 'serving at' within 0.5 s"):
            tasks.wait_listening(timeout=0.5, ready="serving at")


def test_a_task_that_dies_before_it_is_ready_is_reported_at_once(fake):
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)
        tasks.kill("ps 0")
        t0 = time.monotonic()
        with pytest.raises(ClusterError, match="ps 0 exited before it listened"):
            tasks.wait_listening(timeout=120, ready="REPORT")
        assert time.monotonic() - t0 < 60  # at once, not at the timeout


def test_stop_from_two_threads_stops_once(fake):
    tasks = fake.start()
    tasks.wait_listening(timeout=60)
    threads = [threading.Thread(target=tasks.stop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [t.stopped_by for t in tasks.result.tasks] == ["stop"] * 4 and not tasks.running()


def test_a_task_that_exits_before_listening_is_reported_with_its_output(fake):
    with fake.start({"ps 1": {"exit": 3}}) as tasks:
        with pytest.raises(ClusterError, match="ps 1 exited before it listened") as err:
            tasks.wait_listening(timeout=60)
    assert "cannot serve: port is bad" in str(err.value)
    assert [t.returncode for t in tasks.result.tasks if t.name == "ps 1"] == [3]


def test_join_is_bounded(fake):
    with fake.start() as tasks:
        tasks.wait_listening(timeout=60)
        done = Coordinator(after=0.2)
        t0 = time.monotonic()
        waited = tasks.join(done, timeout=60)
        # join returned once the coordinator was done (0.2 s after it was made), and joined it
        assert done.joined and time.monotonic() - done.t0 >= 0.2
        assert 0 <= waited <= time.monotonic() - t0
        t0 = time.monotonic()
        with pytest.raises(ClusterTimeout, match="did not finish within 0.5 s"):
            tasks.join(Coordinator(), timeout=0.5)
        assert 0.5 < time.monotonic() - t0 < 30  # the timeout is kept (join never ends by itself here)
        with pytest.raises(ZeroDivisionError):  # a scheduled function's error comes through
            tasks.join(Coordinator(error=ZeroDivisionError("step failed")))
        tasks.kill("worker 0")
        tasks.kill("worker 1")
        with pytest.raises(ClusterError, match="Every worker has stopped"):
            tasks.join(Coordinator(), timeout=120)


@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_servers_do_not_outlive_an_interrupted_or_killed_coordinator(fake, how):
    driver = fake.dir / "driver.py"
    driver.write_text(DRIVER)
    # A server's own children are stopped with it when the coordinator is interrupted (its process group
    # is stopped); when the coordinator is SIGKILLed, PR_SET_PDEATHSIG ends the servers themselves only.
    plan = {"all": {"grandchild": True}} if how == "interrupt" else {}
    proc = subprocess.Popen([sys.executable, str(driver), str(fake.script), json.dumps(fake.cluster), str(fake.logs),
                             json.dumps(plan)], cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert proc.stdout.readline().strip() == "listening"
        pids = [p for ps in fake.pids().values() for p in ps]
        assert len(pids) == (8 if plan else 4) and all(map(alive, pids))
        proc.send_signal(signal.SIGINT if how == "interrupt" else signal.SIGKILL)
        proc.wait(timeout=60)
        wait_until(lambda: not any(map(alive, pids)), timeout=30, what="the servers to end")
        if how == "interrupt":
            assert proc.stdout.read().strip() == "interrupted" and proc.returncode != 0
    finally:
        proc.kill()
        proc.wait()


def test_coordinator_log_collects_tensorflows_messages_and_restores_the_logger(capsys):
    import logging

    logger = logging.getLogger("tensorflow")
    original = logger.level
    logger.setLevel(logging.ERROR)  # as the notebooks leave it
    before = (logger.handlers[:], logger.propagate, logger.level)
    with servers.coordinator_log() as messages:
        logger.error("Worker %s failed with UnavailableError():Socket closed", "/job:worker/replica:0/task:1")
        logger.info("Cluster successfully recovered.")
        logger.debug("not collected")
    assert messages == ["Worker /job:worker/replica:0/task:1 failed with UnavailableError():Socket closed",
                        "Cluster successfully recovered."]
    assert (logger.handlers, logger.propagate, logger.level) == before
    assert "Socket closed" not in capsys.readouterr().err
    with servers.coordinator_log(logging.WARNING) as messages:
        logger.info("Cluster successfully recovered.")
    assert messages == [] and logger.level == logging.ERROR
    logger.setLevel(original)
