"""cluster.run with fake tasks: small Python scripts that act as TensorFlow workers would (no TensorFlow).

Every test checks processes, not only exit codes: the fake tasks record their pids and those of the
children they start, and no test may leave a process behind (the autouse fixture ``no_survivors``).
"""

import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psutil
import pytest

from course_utils import cluster, processes
from course_utils.cluster import ClusterTimeout, Fault, TaskFailed
from course_utils.tf_config import TFConfigError, for_task, local_cluster
from process_checks import alive, wait_until

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

ROOT = Path(__file__).resolve().parent.parent

# One fake task for every test. argv[1] is a JSON plan: {"all": {...}, "worker 1": {...}, ...}, where a
# task's own entry overrides "all" and, on its second start, its "restarted" entry overrides both.
# Handshakes, not sleeps: a task records its pid once set up, waits for its peers' ports, and with peers
# waits for every task to finish its steps (files "{name}.done{attempt}") before it exits; it stamps
# time.monotonic() (system-wide on Linux) into "{name}.{what}{attempt}" files: "exit" just before it exits or
# crashes, "term" when SIGTERM comes (with "stamp_sigterm"), so tests time the launcher from those stamps.
FAKE_TASK = r'''
import json, os, signal, socket, subprocess, sys, tempfile, threading, time

config = json.loads(os.environ["TF_CONFIG"])
kind, index = config["task"]["type"], config["task"]["index"]
name = f"{kind} {index}"
state = os.environ["FAKE_STATE"]
with open(os.path.join(state, name + ".starts"), "a") as f:
    f.write("x")
with open(os.path.join(state, name + ".starts")) as f:
    attempt = len(f.read())
plans = json.loads(sys.argv[1])
plan = {**plans.get("all", {}), **plans.get(name, {})}
if attempt > 1:
    plan.update(plan.get("restarted", {}))


def record(what, pid):
    with open(os.path.join(state, "pids"), "a") as f:
        f.write(f"{what} {name} {pid}\n")


def stamp(what):
    with open(os.path.join(state, f"{name}.{what}{attempt}"), "w") as f:
        f.write(repr(time.monotonic()))


def reachable(address):
    try:
        socket.create_connection(("127.0.0.1", int(address.rpartition(":")[2])), timeout=1).close()
        return True
    except OSError:
        return False


def on_sigterm(signum, frame):  # note when the launcher's SIGTERM came, then die of it (returncode -15)
    stamp("term")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


if plan.get("ignore_sigterm"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif plan.get("stamp_sigterm"):
    signal.signal(signal.SIGTERM, on_sigterm)
record("task", os.getpid())  # after the SIGTERM disposition: a recorded task ignores (or stamps) SIGTERM
if plan.get("grandchild"):  # "stubborn": one that ignores SIGTERM
    ignore = (lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)) if plan["grandchild"] == "stubborn" else None
    record("grandchild", subprocess.Popen(["sleep", "300"], preexec_fn=ignore).pid)
if plan.get("report"):
    keys = ("TF_CONFIG", "TMPDIR", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
            "PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH",
            "FAKE_EXTRA")
    report = {k: os.environ.get(k) for k in keys}
    report.update(cpus=sorted(os.sched_getaffinity(0)), tmpdir_exists=os.path.isdir(os.environ["TMPDIR"]),
                  gettempdir=tempfile.gettempdir(), argv=sys.argv[2:])
    print("REPORT " + json.dumps(report))
for line in plan.get("say", []):
    print(line)

peers = []
if plan.get("peers") and kind in config["cluster"]:  # listen on my port, wait for the others' ports
    mine = config["cluster"][kind][index]
    server = socket.create_server(("127.0.0.1", int(mine.rpartition(":")[2])))

    def serve():
        while True:
            server.accept()[0].close()

    threading.Thread(target=serve, daemon=True).start()
    peers = [a for k in ("chief", "worker", "ps") for a in config["cluster"].get(k, []) if a != mine]
    deadline = time.monotonic() + 60  # returns as soon as the others listen
    while not all(map(reachable, peers)):
        if time.monotonic() > deadline:
            sys.exit("could not connect to the cluster")
        time.sleep(0.02)

if plan.get("spam"):  # progress lines in bursts that keep the pipe full
    i = 0
    while True:
        sys.stdout.write("".join(f"epoch 5 step {k}\n" for k in range(i, i + 2000)))
        i += 2000


def check_peers(epoch, step):
    if plan.get("peers") == "strict" and not all(map(reachable, peers)):
        print(f"lost a peer at epoch {epoch} step {step}: Socket closed")  # like an UnavailableError
        sys.exit(1)


epochs, steps, dt = plan.get("train", (0, 0, 0))
for epoch in range(1, epochs + 1):
    print(f"Epoch {epoch}/{epochs}")
    for step in range(steps):
        time.sleep(dt)
        check_peers(epoch, step)
        print(f"epoch {epoch} step {step} loss 0.5")
        if plan.get("stall") == [epoch, step]:  # hold still for the launcher's fault, however late it
            sys.stdout.flush()                  # comes, but (strict) notice meanwhile a peer's loss
            until = time.monotonic() + 60
            while time.monotonic() < until:
                time.sleep(0.02)
                check_peers(epoch, step)
if plan.get("burst"):  # progress lines in one write: the task exits with most of them unread in the pipe
    sys.stdout.write("".join(f"epoch {epochs} step {k} loss 0.5\n" for k in range(plan["burst"])))
    sys.stdout.flush()


def done(task):  # the task has finished its steps, in its latest start
    with open(os.path.join(state, task + ".starts")) as f:
        return os.path.exists(os.path.join(state, f"{task}.done{len(f.read())}"))


if peers:  # stay reachable until every task has finished its last step (a strict one checks us at each)
    stamp("done")
    everyone = [f"{k} {i}" for k in ("chief", "worker", "ps") for i in range(len(config["cluster"].get(k, [])))]
    deadline = time.monotonic() + 60
    while not all(map(done, everyone)) and time.monotonic() < deadline:
        time.sleep(0.02)

end = plan.get("end", "exit")
if end == "hang":
    time.sleep(300)  # outlasts every wait of the tests (60 s): running after one, it was not stopped
stamp("exit")
if end == "crash":
    raise ValueError(f"boom from {name}")
sys.exit(plan.get("code", 0))
'''

# Run cluster.run in a separate Python process, to interrupt it, kill it, or let it exit.
DRIVER = r'''
import json, os, sys, threading, time
import psutil
from course_utils import cluster, processes

script, plan, log_dir, mode, state, options = sys.argv[1:7]
options = json.loads(options)
kwargs = dict(args=[plan], log_dir=log_dir, show="lines", timeout=120, start_timeout=120, **options.get("run", {}))


def recorded():
    path = os.path.join(state, "pids")
    return [int(line.split()[-1]) for line in open(path)] if os.path.exists(path) else []


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


if mode == "thread":  # run in a daemon thread; the main thread exits as soon as the tasks are up
    threading.Thread(target=cluster.run, args=(script,), kwargs=kwargs, daemon=True).start()
    while len(recorded()) < options["pids"]:
        time.sleep(0.02)
    print("main thread exits with", len(processes.LIVE), "live tasks", flush=True)
    sys.exit(0)
try:
    cluster.run(script, **kwargs)
except KeyboardInterrupt:  # what a Jupyter kernel would see, before it goes on living
    deadline = time.monotonic() + 10  # SIGKILLs take a moment to land (returns once they have)
    while any(map(alive, recorded())) and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(os.path.join(state, "after_interrupt.json"), "w") as f:
        json.dump({"alive": [p for p in recorded() if alive(p)], "live": list(processes.LIVE)}, f)
    raise
'''


class Fake:
    """The fake task script and the pids its processes record."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path
        self.script = tmp_path / "fake_task.py"
        self.script.write_text(FAKE_TASK)
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.logs = tmp_path / "logs"

    def pids(self, what: str = "") -> dict[str, list[int]]:
        """``{"task worker 0": [pid, ...], "grandchild worker 0": [...]}``, in start order."""
        path = self.state / "pids"
        found: dict[str, list[int]] = {}
        for line in path.read_text().splitlines() if path.exists() else []:
            key, pid = line.rsplit(" ", 1)
            if key.startswith(what):
                found.setdefault(key, []).append(int(pid))
        return found

    def stamp(self, name: str, what: str, attempt: int = 1) -> float:
        """The time.monotonic() the task ``name`` stamped at ``what`` ("exit", "term") in that start."""
        return float((self.state / f"{name}.{what}{attempt}").read_text())

    def all_pids(self) -> list[int]:
        return [pid for pids in self.pids().values() for pid in pids]

    def survivors(self) -> list[int]:
        return [pid for pid in self.all_pids() if alive(pid)]

    def run(self, plans: dict, **kwargs) -> cluster.RunResult:
        env = {"FAKE_STATE": str(self.state), **kwargs.pop("env", {})}
        # start_timeout and stop_grace (for a task that obeys SIGTERM) end as soon as the task reports or goes:
        # generous, for a loaded machine; tests that time out or ignore SIGTERM on purpose set their own
        kwargs = {"log_dir": self.logs, "show": "quiet", "timeout": 30, "start_timeout": 30, "fail_grace": 5,
                  "stop_grace": 10, "gpus": 0, "env": env, **kwargs}
        return cluster.run(self.script, args=[json.dumps(plans), *kwargs.pop("args", ())], **kwargs)

    def driver(self, plans: dict, mode: str, **options) -> subprocess.Popen:
        script = self.dir / "driver.py"
        script.write_text(DRIVER)
        env = {**os.environ, "FAKE_STATE": str(self.state)}
        out = open(self.dir / "driver.out", "w")
        err = open(self.dir / "driver.err", "w")
        with out, err:
            return subprocess.Popen([sys.executable, str(script), str(self.script), json.dumps(plans),
                                     str(self.logs), mode, str(self.state), json.dumps(options)],
                                    cwd=ROOT, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)


@pytest.fixture
def fake(tmp_path):
    fake = Fake(tmp_path)
    yield fake
    left = fake.survivors()
    for pid in left:  # clean up, then fail: no test may leave a process behind
        try:
            proc = psutil.Process(pid)
            if str(fake.script) in proc.cmdline() or proc.name() == "sleep":
                proc.kill()
        except psutil.NoSuchProcess:
            pass
    assert not left, f"processes the fake tasks recorded survived: {fake.pids()}"


@pytest.fixture(autouse=True)
def no_survivors():
    yield
    me = psutil.Process()
    left = [p for p in me.children(recursive=True) if p.is_running()]
    for proc in left:
        proc.kill()
    leaked = list(processes.LIVE)
    processes.stop_all_live()  # so that one leak fails one test, not every test after it
    assert not left, f"child processes survived the test: {left}"
    assert not leaked, f"processes.LIVE still lists {leaked}"


TRAIN = (2, 3, 0.02)  # epochs, steps per epoch, seconds per step
# How long to wait for a fresh process to appear, report or go: waits return as soon as the condition holds,
# so this costs nothing when all is well and only has to be long enough for a loaded machine.
PATIENCE = 60
NOISE_LINES = [
    "I0000 00:00:1795414282.275369    4377 port.cc:153] oneDNN custom operations are on.",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "2024-01-01 12:00:00.123456: I tensorflow/core/util/port.cc:113] noise from the old format",
    "",
]


def reports(result) -> dict[str, dict]:
    found = {}
    for task in result.tasks:
        lines = [line for line in task.log_path.read_text().splitlines() if line.startswith("REPORT ")]
        assert len(lines) == 1, task.log_path.read_text()
        found[task.name] = json.loads(lines[0][len("REPORT "):])
    return found


# --- success -------------------------------------------------------------------------------------------

def test_success_prefixed_output_noise_in_logs_only(fake, capsys):
    plans = {"all": {"say": ["hello", *NOISE_LINES, "after the noise"], "train": TRAIN, "peers": "strict"}}
    result = fake.run(plans, show="lines")
    out = capsys.readouterr().out
    assert result.ok and result.wall_s > 0
    assert [(t.name, t.attempt, t.returncode, t.stopped_by) for t in result.tasks] == [
        ("worker 0", 1, 0, None), ("worker 1", 1, 0, None)]
    assert all(t.progress.describe() == "epoch 2 step 2" and t.ended >= t.started for t in result.tasks)
    for name in ("worker 0", "worker 1"):
        assert out.index(f"{name} | hello\n") < out.index(f"{name} | after the noise\n")
        assert f"{name} | Epoch 2/2\n" in out and f"{name} | epoch 2 step 2 loss 0.5\n" in out
    assert all(line.startswith(("worker 0 | ", "worker 1 | ")) for line in out.splitlines())
    assert all(line.split(" | ", 1)[1].strip() for line in out.splitlines())  # no blank lines shown
    for noise in filter(None, NOISE_LINES):
        assert noise not in out
    for k in (0, 1):
        log = (fake.logs / f"worker-{k}.log").read_text().splitlines()
        assert result.tasks[k].log_path == fake.logs / f"worker-{k}.log"
        start = log.index("hello")
        assert log[start:start + 6] == ["hello", *NOISE_LINES, "after the noise"]
        assert log[-1] == "epoch 2 step 2 loss 0.5"
    header, *rows = result.table().splitlines()
    assert header.split() == ["task", "attempt", "exit", "seconds", "log"]
    assert [row.split()[:4] for row in rows] == [["worker", "0", "1", "0"], ["worker", "1", "1", "0"]]
    assert str(fake.logs / "worker-1.log") in rows[1] and "(" not in rows[1]


def test_success_environment_threads_cpus_tmpdir(fake, capsys):
    cluster_spec = local_cluster(2, chief=True)
    plans = {"all": {"report": True, "train": (1, 1, 0.01)}}
    result = fake.run(plans, cluster=cluster_spec, evaluator=True, threads=1, args=["--flag", 3], gpus=2,
                      env={"FAKE_EXTRA": "yes"})
    assert result.ok and [t.name for t in result.tasks] == ["chief 0", "worker 0", "worker 1", "evaluator 0"]
    expected_cpus = processes.default_cpus(4)
    cores = sorted(os.sched_getaffinity(0))
    assert expected_cpus == [{cores[k % len(cores)]} for k in range(4)]
    tmpdirs = set()
    for k, (name, report) in enumerate(reports(result).items()):
        kind, index = name.split()
        assert json.loads(report["TF_CONFIG"]) == for_task(cluster_spec, kind, int(index))
        assert report["TF_NUM_INTRAOP_THREADS"] == report["TF_NUM_INTEROP_THREADS"] == "1"
        assert report["OMP_NUM_THREADS"] == "1" and report["PYTHONUNBUFFERED"] == "1"
        assert report["TF_CPP_MIN_LOG_LEVEL"] == "0"  # full logs in the files, filtered on screen
        assert report["CUDA_VISIBLE_DEVICES"] == str(k % 2) and report["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
        assert report["cpus"] == sorted(expected_cpus[k])  # pinned to one core
        assert report["FAKE_EXTRA"] == "yes" and report["argv"] == ["--flag", "3"]
        tmpdir = Path(report["TMPDIR"])
        assert str(tmpdir) == report["gettempdir"] and tmpdir.name.startswith(f"{kind}-{index}-")
        assert tmpdir.parent.parent == fake.logs and tmpdir.parent.name.startswith("tasks-tmp-")
        assert report["tmpdir_exists"]
        tmpdirs.add(report["TMPDIR"])
    assert len(tmpdirs) == 4
    assert not list(fake.logs.glob("tasks-tmp-*"))  # removed after the run
    assert capsys.readouterr().out == ""  # show="quiet"


def test_without_threads_no_thread_variables_no_pinning(fake, monkeypatch, capsys):
    for key in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(key, raising=False)
    # the last lines come in a burst: the task exits with a pipe full of them still to be read
    plans = {"all": {"report": True, "train": (1, 1, 0.01), "burst": 5000}}
    result = fake.run(plans, workers=1, show="status", gpus="auto")
    (report,) = reports(result).values()
    assert report["TF_NUM_INTRAOP_THREADS"] is None and report["OMP_NUM_THREADS"] is None
    assert report["cpus"] == sorted(os.sched_getaffinity(0))
    assert report["CUDA_VISIBLE_DEVICES"] == (None if cluster.visible_gpus() == 0 else "0")
    out = capsys.readouterr().out
    assert "REPORT" not in out and "Epoch" not in out  # a status line per task, not the task's lines
    assert out.endswith("worker 0 | exited with code 0 (epoch 1 step 4999)\n")  # its last line counted


def test_log_files_and_pipes_are_closed(fake):
    gc.collect()  # what earlier tests left unclosed is theirs, not this run's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fake.run({"all": {"train": (1, 1, 0.01)}})
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []


def test_module_instead_of_script(fake, tmp_path):
    (tmp_path / "fake_module.py").write_text(FAKE_TASK)
    env = {"PYTHONPATH": str(tmp_path), "FAKE_STATE": str(fake.state), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = cluster.run(None, module="fake_module", args=[json.dumps({"all": {"report": True}})], workers=1,
                         log_dir=fake.logs, show="quiet", env=env)
    (report,) = reports(result).values()
    assert result.ok and report["TF_CPP_MIN_LOG_LEVEL"] == "2"  # the caller's choice wins
    with pytest.raises(ValueError, match="either a script path or module="):
        cluster.run(fake.script, module="fake_module", log_dir=fake.logs)
    with pytest.raises(ValueError, match="either a script path or module="):
        cluster.run(None, log_dir=fake.logs)


def test_explicit_cpus_pin_each_task(fake):
    cores = sorted(os.sched_getaffinity(0))
    result = fake.run({"all": {"report": True}}, cpus=[{cores[-1]}, set(cores)], gpus=2,
                      env={"CUDA_VISIBLE_DEVICES": "7"})
    assert [r["cpus"] for r in reports(result).values()] == [[cores[-1]], cores]
    assert [r["CUDA_VISIBLE_DEVICES"] for r in reports(result).values()] == ["7", "7"]  # the caller's wins
    with pytest.raises(ValueError, match="cpus gives 1 core sets for 2 tasks"):
        fake.run({}, cpus=[{cores[0]}])


def test_cpus_none_means_no_pinning(fake):
    result = fake.run({"all": {"report": True}}, workers=1, cpus=None, threads=2)
    (report,) = reports(result).values()
    assert report["cpus"] == sorted(os.sched_getaffinity(0)) and report["TF_NUM_INTRAOP_THREADS"] == "2"


# --- failures ------------------------------------------------------------------------------------------

def test_crash_raises_task_failed_with_its_last_lines_and_stops_the_peer(fake):
    # peers: worker 0 crashes only once worker 1 is up, so worker 1 stamps the SIGTERM that stops it
    plans = {"all": {"peers": True},
             "worker 0": {"train": (1, 2, 0.02), "say": ["I0000 00:00:1.2    1 x.cc:1] noise"], "end": "crash"},
             "worker 1": {"train": (1, 1, 0.02), "end": "hang", "stamp_sigterm": True}}
    with pytest.raises(TaskFailed) as err:
        fake.run(plans, fail_grace=0.8)  # timeout: 30 s
    message = str(err.value)
    assert message.startswith("worker 0 failed.")
    assert "--- last lines of worker 0" in message and "last lines of worker 1" not in message
    assert "Traceback (most recent call last):" in message and "ValueError: boom from worker 0" in message
    assert "epoch 1 step 1 loss 0.5" in message and "noise" not in message
    w0, w1 = err.value.result.tasks
    assert (w0.returncode, w0.stopped_by) == (1, None)
    assert (w1.returncode, w1.stopped_by) == (-signal.SIGTERM, "stop")  # the hanging peer, stopped
    # SIGTERM came fail_grace after the crash, not before; the 10 s of slack are for a loaded machine, and
    # far below the 30 s run timeout, which a launcher ignoring fail_grace would wait for
    gap = fake.stamp("worker 1", "term") - fake.stamp("worker 0", "exit")
    assert 0.8 <= gap < 0.8 + 10
    assert not err.value.result.ok
    assert len(fake.all_pids()) == 2 and not fake.survivors()


def test_crash_with_check_false_returns_the_result(fake):
    plans = {"all": {"peers": True}, "worker 0": {"code": 3}, "worker 1": {"end": "hang", "ignore_sigterm": True}}
    result = fake.run(plans, check=False, fail_grace=0.2, stop_grace=0.3)
    assert not result.ok
    assert [(t.returncode, t.stopped_by) for t in result.tasks] == [(3, None), (-signal.SIGKILL, "stop")]
    assert not fake.survivors()


@pytest.mark.parametrize("how", ["exit", "hang"])
def test_grandchildren_are_stopped_with_their_task(fake, how):
    if how == "exit":  # the task exits 0, its child would live on; worker 1's even ignores SIGTERM
        plans = {"all": {"grandchild": True, "train": (1, 2, 0.02)}, "worker 1": {"grandchild": "stubborn"}}
        result = fake.run(plans)
        assert result.ok
        # no wait for the reader (the child holds the pipe): that would take its 5 s join timeout
        for task in result.tasks:
            assert task.ended - fake.stamp(task.name, "exit") < 2.5, task.name
    else:  # the task hangs and is stopped after its peer failed
        # worker 0 exits once both are up (peers: both past their setup, grandchildren started)
        plans = {"all": {"grandchild": "stubborn", "end": "hang", "peers": True},
                 "worker 0": {"code": 2, "end": "exit"}}
        result = fake.run(plans, fail_grace=0.2, check=False)
        assert [(t.returncode, t.stopped_by) for t in result.tasks] == [(2, None), (-signal.SIGTERM, "stop")]
    grandchildren = fake.pids("grandchild")
    assert sorted(grandchildren) == ["grandchild worker 0", "grandchild worker 1"]  # tasks start concurrently
    assert not fake.survivors(), fake.pids()


def test_task_that_never_reports_progress_times_out(fake):
    plans = {"worker 0": {"train": (1, 1, 0.01), "end": "hang"},
             "worker 1": {"say": ["starting, waiting for the chief"], "end": "hang"}}
    t0 = time.monotonic()
    with pytest.raises(ClusterTimeout) as err:
        fake.run(plans, start_timeout=3)
    assert 3 <= time.monotonic() - t0 < 3 + 10  # slack for a loaded machine; the run's timeout is 30 s
    message = str(err.value)
    assert message.startswith("Stopped the cluster: worker 1 reported no progress within 3 s")
    assert "worker 0 reported" not in message and "last lines of worker 0" not in message
    assert "--- last lines of worker 1" in message and "starting, waiting for the chief" in message
    assert [t.stopped_by for t in err.value.result.tasks] == ["stop", "stop"]
    assert not fake.survivors()


def test_overall_timeout(fake):
    plans = {"all": {"train": (1, 1, 0.01), "end": "hang"}, "worker 1": {"ignore_sigterm": True}}
    t0 = time.monotonic()
    with pytest.raises(ClusterTimeout, match="the run took longer than 2.5 s") as err:
        fake.run(plans, timeout=2.5, stop_grace=0.3)
    assert 2.5 <= time.monotonic() - t0 < 2.5 + 0.3 + 10  # slack for a loaded machine
    assert "last lines of worker 0" in str(err.value) and "last lines of worker 1" in str(err.value)
    result = err.value.result
    # worker 1 records its pid once it ignores SIGTERM: then only the SIGKILL after stop_grace ends it (if the
    # timeout came before, SIGTERM may have)
    ignoring = "task worker 1" in fake.pids("task")
    w0, w1 = result.tasks
    assert (w0.returncode, w0.stopped_by, w1.stopped_by) == (-signal.SIGTERM, "stop", "stop")
    assert w1.returncode in ((-signal.SIGKILL,) if ignoring else (-signal.SIGTERM, -signal.SIGKILL))
    assert result.wall_s >= 2.5
    assert not fake.survivors()


def test_bad_arguments_start_nothing(fake, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        spec = {"worker": [local_cluster(1)["worker"][0], f"localhost:{port}"]}
        with pytest.raises(TFConfigError, match=f"Port {port} of worker 1 is already in use"):
            fake.run({}, cluster=spec)
    with pytest.raises(ValueError, match="'worker 7', which is not a task of this cluster"):
        fake.run({}, fault=Fault(task="worker 7"))
    with pytest.raises(ValueError, match="Fault.restart"):
        fake.run({}, fault=Fault(restart="machine"))
    with pytest.raises(ValueError, match="show must be"):
        fake.run({}, show="verbose")
    assert not fake.logs.exists() and not fake.all_pids()


# --- interrupts, parent death, interpreter exit ---------------------------------------------------

def test_keyboard_interrupt_stops_every_process(fake):
    plans = {"all": {"grandchild": True, "train": (1, 1, 0.01), "end": "hang"}}
    driver = fake.driver(plans, "main")
    wait_until(lambda: len(fake.all_pids()) == 4, PATIENCE, what="tasks and their children to start")
    wait_until(lambda: all(t.exists() and "epoch 1 step 0" in t.read_text()
                           for t in (fake.logs / "worker-0.log", fake.logs / "worker-1.log")), PATIENCE,
               what="progress")
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=PATIENCE) != 0
    stderr = (fake.dir / "driver.err").read_text()
    assert "KeyboardInterrupt" in stderr and "Traceback" in stderr
    # Before the driver exited (a Jupyter kernel would go on living), run() had stopped everything.
    after = json.loads((fake.state / "after_interrupt.json").read_text())
    assert after == {"alive": [], "live": []}
    assert not fake.survivors()


def test_second_keyboard_interrupt_during_the_stop_still_stops_everything(fake):
    plans = {"all": {"train": (1, 1, 0.01), "end": "hang"}, "worker 0": {"ignore_sigterm": True}}
    driver = fake.driver(plans, "main", run={"stop_grace": 60})
    wait_until(lambda: all(t.exists() and "epoch 1 step 0" in t.read_text()
                           for t in (fake.logs / "worker-0.log", fake.logs / "worker-1.log")), PATIENCE,
               what="progress")
    (w0,), (w1,) = fake.pids("task")["task worker 0"], fake.pids("task")["task worker 1"]
    driver.send_signal(signal.SIGINT)
    # the launcher stops both: worker 1 goes on SIGTERM, worker 0 ignores it and is given stop_grace (60 s)
    wait_until(lambda: not alive(w1), PATIENCE, what="worker 1 to go on SIGTERM")
    assert alive(w0)
    driver.send_signal(signal.SIGINT)  # an impatient user presses interrupt again
    assert driver.wait(timeout=30) != 0  # < stop_grace: the second interrupt cut the wait short
    after = json.loads((fake.state / "after_interrupt.json").read_text())
    assert after["alive"] == [], f"still running after the interrupts: {after}"


def test_parent_killed_outright_takes_its_tasks_along(fake):
    driver = fake.driver({"all": {"train": (1, 1, 0.01), "end": "hang"}}, "main")
    # Once the tasks printed their last line, nothing but the parent's death can end them (a task that
    # printed after it would die of a broken pipe, PR_SET_PDEATHSIG or not).
    wait_until(lambda: all(t.exists() and "epoch 1 step 0" in t.read_text()
                           for t in (fake.logs / "worker-0.log", fake.logs / "worker-1.log")), PATIENCE,
               what="progress")
    tasks = fake.all_pids()
    assert all(psutil.Process(pid).ppid() == driver.pid for pid in tasks)
    driver.kill()
    driver.wait(timeout=PATIENCE)
    wait_until(lambda: not any(map(alive, tasks)), PATIENCE, what="PR_SET_PDEATHSIG to kill the tasks")


def test_interpreter_exit_stops_tasks_and_their_children(fake):
    # The tasks' children prove atexit: PR_SET_PDEATHSIG alone would kill the tasks but not them.
    plans = {"all": {"grandchild": True, "train": (1, 1, 0.01), "end": "hang"}}
    driver = fake.driver(plans, "thread", pids=4)
    assert driver.wait(timeout=PATIENCE) == 0
    assert "main thread exits with 2 live tasks" in (fake.dir / "driver.out").read_text()
    assert len(fake.all_pids()) == 4
    wait_until(lambda: not fake.survivors(), PATIENCE, what=f"no survivors of {fake.pids()}")


def test_stop_all_live_reaps_registered_processes():
    proc = subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '300']);"
                             " print('up', flush=True); time.sleep(300)"],
                            start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"up\n"
    (child,) = psutil.Process(proc.pid).children()
    processes.LIVE[proc.pid] = proc
    processes.stop_all_live()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGTERM and not processes.LIVE
    wait_until(lambda: not alive(child.pid), PATIENCE, what="the task's child to go")  # it sleeps 300 s


# --- faults --------------------------------------------------------------------------------------------

# a task exits 1 when it loses a peer; worker 1 holds still where the faults below kill it (however loaded
# the machine, it is killed at epoch 2 step 1), and worker 0 a step later, checking its peers, so that it
# can only end by noticing worker 1's loss; neither holds once restarted
STRICT = {"all": {"train": (3, 3, 0.05), "peers": "strict"},
          "worker 0": {"stall": [2, 2], "restarted": {"stall": None}},
          "worker 1": {"stall": [2, 1], "restarted": {"stall": None}}}


def test_fault_restarts_the_cluster(fake, capsys):
    result = fake.run(STRICT, fault=Fault("worker 1", epoch=2, step=1, restart="cluster"), show="lines",
                      fail_grace=30)
    out = capsys.readouterr().out
    assert result.ok and result.fault_at is not None
    assert [(t.name, t.attempt) for t in result.tasks] == [
        ("worker 0", 1), ("worker 1", 1), ("worker 0", 2), ("worker 1", 2)]
    w0, w1 = result.attempt(1)
    assert (w1.returncode, w1.stopped_by) == (-signal.SIGKILL, "fault")
    assert w1.progress.epoch == 2 and w1.progress.step >= 1
    assert "epoch 3" not in w1.log_path.read_text()
    assert (w0.returncode, w0.stopped_by) == (1, None) and "lost a peer" in w0.log_path.read_text()
    noticed = result.noticed_s()
    assert list(noticed) == ["worker 0"] and 0 < noticed["worker 0"]  # it exited by itself, after the kill
    # restarted once every task had exited, not after fail_grace (30 s); 10 s of slack for a loaded machine
    assert result.attempt(2)[0].started - w0.ended < 10
    assert all(t.returncode == 0 and t.progress.describe() == "epoch 3 step 2" for t in result.attempt(2))
    assert [t.log_path.name for t in result.latest()] == ["worker-0.attempt2.log", "worker-1.attempt2.log"]
    assert "[launcher] fault: killing worker 1 at epoch 2 step" in out
    assert "[launcher] restarting the cluster (attempt 2)" in out
    assert "(fault)" in result.table().splitlines()[2]
    assert len(fake.pids("task")["task worker 1"]) == 2 and not fake.survivors()


def test_fault_restarts_the_task(fake):
    plans = {"all": {"train": (3, 3, 0.05)}, "worker 1": {"stall": [2, 1], "restarted": {"stall": None}}}
    result = fake.run(plans, fault=Fault("worker 1", epoch=2, step=1, restart="task"))
    assert result.ok
    assert [(t.name, t.attempt, t.returncode, t.stopped_by) for t in result.tasks] == [
        ("worker 0", 1, 0, None), ("worker 1", 1, -signal.SIGKILL, "fault"), ("worker 1", 2, 0, None)]
    assert [t.name for t in result.attempt(2)] == ["worker 1"]
    assert result.noticed_s() == {"worker 0": pytest.approx(result.tasks[0].ended - result.fault_at)}
    assert not fake.survivors()


def test_fault_without_restart_fails(fake):
    with pytest.raises(TaskFailed) as err:
        fake.run(STRICT, fault=Fault("worker 1", epoch=2, step=1, restart=None), fail_grace=30)
    assert str(err.value).startswith("worker 0 failed.") and "lost a peer at epoch" in str(err.value)
    w0, w1 = err.value.result.tasks
    assert (w1.returncode, w1.stopped_by) == (-signal.SIGKILL, "fault")
    assert (w0.returncode, w0.stopped_by) == (1, None)
    assert not fake.survivors()


def test_fault_after_seconds(fake):
    # worker 0 hangs after its steps: however late the fault, it is still there to be killed
    plans = {"all": {"train": (1, 30, 0.05)},
             "worker 0": {"end": "hang", "restarted": {"train": (1, 1, 0.01), "end": "exit"}}}
    result = fake.run(plans, fault=Fault("worker 0", after_seconds=0.6, restart="task"))
    assert result.ok
    first = result.tasks[0]
    assert (first.name, first.attempt, first.stopped_by) == ("worker 0", 1, "fault")
    assert 0.6 <= first.ended - first.started < 0.6 + 10  # slack for a loaded machine
    assert [(t.name, t.attempt, t.returncode) for t in result.tasks[1:]] == [("worker 1", 1, 0), ("worker 0", 2, 0)]
    assert not fake.survivors()


def test_restarted_task_that_stays_silent_times_out(fake):
    plans = {"worker 0": {"train": (1, 40, 0.05)},
             "worker 1": {"spam": True, "restarted": {"spam": False, "say": ["restarted, not connected"],
                                                      "end": "hang"}}}
    with pytest.raises(ClusterTimeout, match="worker 1 reported no progress within 3 s") as err:
        fake.run(plans, fault=Fault("worker 1", epoch=5, step=50, restart="task"), start_timeout=3, timeout=30)
    tasks = err.value.result.tasks
    assert [(t.name, t.attempt) for t in tasks] == [("worker 0", 1), ("worker 1", 1), ("worker 1", 2)]
    assert tasks[1].stopped_by == "fault"


def test_a_folder_of_the_users_in_the_log_dir_is_left_alone_and_an_empty_cluster_is_refused(fake):
    (fake.logs / "tmp").mkdir(parents=True)
    (fake.logs / "tmp" / "mine.txt").write_text("keep me")
    assert fake.run({"all": {"report": True, "train": (1, 1, 0.01)}}).ok
    assert (fake.logs / "tmp" / "mine.txt").read_text() == "keep me"
    with pytest.raises(TFConfigError, match="no tasks"):
        cluster.run(fake.script, cluster={}, log_dir=fake.logs)
