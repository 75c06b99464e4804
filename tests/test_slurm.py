"""course_utils.slurm on a real local Slurm cluster, and its resolver on CPU-only and (faked) GPU nodes.

The cluster tests need Debian's slurm-wlm and munge, and root. CI has both (set-up installs the
packages), so with ``CI`` set they never skip: there a missing Slurm fails them. Every cluster test
checks processes, not only results: no daemon, job step or job task may outlive the cluster.
"""

from __future__ import annotations

import _thread
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psutil
import pytest

from course_utils import notebook_files, slurm, slurm_tasks
from process_checks import wait_until

# the local cluster's process handling, whatever the library versions: the oldest-versions check skips it
versionless = pytest.mark.versionless

ROOT = Path(__file__).resolve().parent.parent
AVAILABLE, WHY_NOT = slurm.available()
needs_slurm = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"),
                                 reason=f"no local Slurm cluster here: {WHY_NOT}")
SLURM_NAMES = {"munged", "slurmctld", "slurmd", "slurmstepd"}


def slurm_pids() -> set[int]:
    """Every live (not zombie) Slurm or munge process on this machine, ours or not, and the janitors."""
    pids = set(janitors())
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] in SLURM_NAMES and proc.info["status"] != psutil.STATUS_ZOMBIE:
            pids.add(proc.pid)
    return pids


def janitors() -> list[int]:
    """The local clusters' janitor processes alive now."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        alive = proc.info["status"] != psutil.STATUS_ZOMBIE
        if alive and "course_utils.slurm._janitor" in (proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


def assert_nothing_left(cluster: slurm.LocalCluster, before: set[int]) -> None:
    assert not cluster.directory.exists(), "the temporary directory is still there"
    for name, pid in cluster.pids.items():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, \
            f"{name} (pid {pid}) still runs"
    assert slurm.leftovers(cluster.directory) == []
    assert slurm_pids() <= before, f"new Slurm processes left: {slurm_pids() - before}"


def script(tmp_path, body: str) -> Path:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n" + body + "\n")
    return path


@versionless
@needs_slurm
def test_cluster_comes_up_idle_and_goes_down_leaving_nothing():
    before, t0 = slurm_pids(), time.monotonic()
    with slurm.local_cluster() as cluster:
        entered = time.monotonic() - t0
        assert set(cluster.pids) == {"munged", "slurmctld", "slurmd"}
        assert all(psutil.pid_exists(pid) for pid in cluster.pids.values())
        assert cluster.conf.exists() and cluster.env["SLURM_CONF"] == str(cluster.conf)
        assert cluster.node == os.uname().nodename.split(".")[0] and cluster.cpus == os.cpu_count()
        assert cluster.run("sinfo", "-h", "-N", "-o", "%N %t %c").stdout.split() == [
            cluster.node, "idle", str(cluster.cpus)]
        assert 0 < cluster.started_s <= entered
    assert_nothing_left(cluster, before)


def test_a_requeued_job_is_started_once_its_requeues_second_is_past():
    """Slurm refuses a run started within its requeue's second (the old credential): the starter asks for a
    time after it, the same one at every look until the job runs, and a new one after the next requeue."""
    asked = []

    class Cluster:
        def run(self, *command):
            asked.append(command)

    start = slurm.requeued_starter(Cluster(), after_s=2)
    start("7", {"JobState": "RUNNING", "Reason": "None"})
    start("7", {"JobState": "PENDING", "Reason": "None"})  # the old run still completing
    assert asked == []
    before = datetime.now()
    for _ in range(3):
        start("7", {"JobState": "PENDING", "Reason": "BeginTime"})
    assert len(asked) == 3 and len(set(asked)) == 1, asked
    command, when = asked[0][:-1], datetime.fromisoformat(asked[0][-1].removeprefix("StartTime="))
    assert command == ("scontrol", "update", "JobId=7")
    assert before.replace(microsecond=0) + timedelta(seconds=1) <= when <= datetime.now() + timedelta(seconds=2)
    start("7", {"JobState": "RUNNING", "Reason": "None"})
    time.sleep(1.1)
    start("7", {"JobState": "PENDING", "Reason": "BeginTime"})  # the next requeue: a new time
    assert asked[-1][-1] > asked[0][-1], asked


NODES = pytest.mark.parametrize("nodes", [None, ["c9", "c10"]], ids=["one node", "two nodes"])


def node_namespaces() -> list[str]:
    """The network namespaces of multi-node local clusters (``sXXXX-hub``, ``sXXXX-0``, ...) that exist now."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
    return [line.split()[0] for line in listed if re.match(r"s[0-9a-f]{4}-(hub|\d+)\b", line)]


@versionless
@needs_slurm
@NODES
def test_an_error_in_the_body_stops_everything_and_propagates(nodes):
    before = slurm_pids()
    with pytest.raises(ValueError, match="the body failed"):
        with slurm.local_cluster(nodes=nodes) as cluster:
            assert len(node_namespaces()) == (3 if nodes else 0)
            raise ValueError("the body failed")
    assert_nothing_left(cluster, before)
    assert node_namespaces() == []


@versionless
@needs_slurm
@NODES
def test_interrupt_while_a_job_runs_cancels_it_and_stops_everything(tmp_path, nodes):
    before = slurm_pids()
    with pytest.raises(KeyboardInterrupt):
        with slurm.local_cluster(nodes=nodes) as cluster:
            job_id = cluster.run("sbatch", "--parsable", "-n", "2", "-o", tmp_path / "out",
                                 script(tmp_path, "srun sleep 300"), cwd=tmp_path).stdout.strip()
            deadline = time.monotonic() + 120  # returns as soon as both tasks run
            while sum(p.name() == "sleep" for p in slurm.leftovers(cluster.directory)) < 2:
                assert time.monotonic() < deadline, slurm.job_fields(cluster, job_id)
                time.sleep(0.1)
            raise KeyboardInterrupt  # what Jupyter's interrupt raises
    assert_nothing_left(cluster, before)
    assert node_namespaces() == []


@versionless
@needs_slurm
def test_a_daemon_that_does_not_come_up_is_reported_with_its_log():
    before = slurm_pids()
    with pytest.raises(slurm.SlurmError, match="(?s)slurmctld exited.*Can't find plugin for select/nonexistent"):
        with slurm.local_cluster(settings={"SelectType": "select/nonexistent"}):
            pass
    assert slurm_pids() <= before


@versionless
@needs_slurm
@pytest.mark.parametrize("nodes", [None, ["c9", "c10"]], ids=["one node", "two nodes"])
def test_kill_9_of_the_process_that_started_it_leaves_nothing(tmp_path, nodes):
    """The janitor's sweep: daemons, the running job's step and task, the directory with its munge key, and
    a multi-node cluster's namespaces and host files."""
    from course_utils import netlab

    before = slurm_pids()
    code = textwrap.dedent("""
        import json, sys, time
        from course_utils import slurm
        with slurm.local_cluster(nodes=json.loads(sys.argv[2])) as cluster:
            job = cluster.run("sbatch", "--parsable", "-o", sys.argv[1], "--wrap", "sleep 300").stdout.strip()
            while "JobState=RUNNING" not in cluster.run("scontrol", "show", "job", job).stdout:
                time.sleep(0.1)
            print(cluster.directory, flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, tmp_path / "out", json.dumps(nodes)], stdout=subprocess.PIPE,
                            text=True)
    try:
        directory = Path(proc.stdout.readline().strip())
        prefix = (directory / "netns").read_text().strip() if nodes else None
        assert not nodes or len(netlab.existing(prefix)) == 3
        wanted = {"munged", "slurmctld", "slurmd", "slurmstepd", "sleep"}  # the job's task starts soon after RUNNING
        wait_until(lambda: wanted <= {p.name() for p in slurm.leftovers(directory)}, 30, f"{wanted} to run")
        assert (directory / "munge.key").exists() and len(set(janitors()) - before) == 1
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while directory.exists() or slurm.leftovers(directory) or set(janitors()) - before:
        assert time.monotonic() < deadline, f"left: {slurm.leftovers(directory)}, {directory.exists()}, {janitors()}"
        time.sleep(0.1)
    assert slurm_pids() <= before, f"new Slurm processes left: {slurm_pids() - before}"
    if nodes:
        assert netlab.existing(prefix) == []


@versionless
@needs_slurm
def test_a_notebook_cell_that_fails_stops_the_cluster_while_the_kernel_lives(tmp_path):
    nbclient = pytest.importorskip("nbclient")
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    before = slurm_pids()
    nb = new_notebook(cells=[
        new_code_cell("import contextlib\nfrom course_utils import slurm\nstack = contextlib.ExitStack()\n"
                      "local = stack.enter_context(slurm.local_cluster())\n"
                      "print(slurm.stop_when_a_cell_fails(stack), local.directory)"),
        new_code_cell(f"local.run('sbatch', '-o', {str(tmp_path / 'out')!r}, '--wrap', 'sleep 300')"),
        new_code_cell("raise RuntimeError('a middle cell fails')"),
        new_code_cell("stack.close()"),
    ])
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120)
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        hooked, directory = nb.cells[0].outputs[0]["text"].split()
        client.execute_cell(nb.cells[1], 1)
        with pytest.raises(nbclient.exceptions.CellExecutionError, match="a middle cell fails"):
            client.execute_cell(nb.cells[2], 2)
        said = "".join(o.get("text", "") for o in nb.cells[2].outputs)
        assert hooked == "True" and "A cell failed, so the local Slurm cluster was stopped" in said
        check = nbformat.v4.new_code_cell("print('kernel alive, directory left:', local.directory.exists())")
        client.execute_cell(check, 3)  # stopped by the hook, not by the kernel's end
        assert check.outputs[0]["text"].strip() == "kernel alive, directory left: False"
        assert not Path(directory).exists() and slurm.leftovers(directory) == [] and set(janitors()) <= before
        assert slurm_pids() <= before, f"new Slurm processes left: {slurm_pids() - before}"


@versionless
def test_the_janitor_sweeps_only_a_local_clusters_directory(tmp_path):
    keep = tmp_path / "precious"
    keep.mkdir()
    done = subprocess.run([sys.executable, "-m", "course_utils.slurm._janitor"], input=f"{keep}\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a local Slurm cluster's directory" in done.stderr and keep.exists()


@pytest.fixture(scope="module")
def cluster():
    before = slurm_pids()
    with slurm.local_cluster() as running:
        yield running
    assert_nothing_left(running, before)


@versionless
@needs_slurm
def test_one_task_job_completes_and_its_output_is_read_back(cluster, tmp_path):
    t0 = time.monotonic()
    job = slurm.submit(script(tmp_path, "hostname"), cluster, cwd=tmp_path, timeout=300)
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert job.output == [tmp_path / f"slurm-{job.id}.out"] and job.text() == cluster.node + "\n"
    assert 0 < job.elapsed_s <= time.monotonic() - t0


@versionless
@needs_slurm
def test_two_task_job_runs_both_tasks(cluster, tmp_path):
    body = "#SBATCH --ntasks=2\nsrun bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS'"
    job = slurm.submit(script(tmp_path, body), cluster, cwd=tmp_path, timeout=300)
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert sorted(job.text().splitlines()) == ["task 0 of 2", "task 1 of 2"]


@versionless
@needs_slurm
def test_a_failing_job_raises_with_its_exit_code_and_output(cluster, tmp_path):
    with pytest.raises(slurm.JobFailed, match="(?s)ended FAILED with exit code 3.*about to fail") as failed:
        slurm.submit(script(tmp_path, "echo about to fail; exit 3"), cluster, cwd=tmp_path, timeout=300)
    assert failed.value.job.exit_code == 3
    job = slurm.submit(script(tmp_path, "exit 3"), cluster, cwd=tmp_path, timeout=300, check=False)
    assert (job.state, job.exit_code) == ("FAILED", 3)


@versionless
@needs_slurm
def test_a_job_asking_for_more_tasks_than_the_node_has_fails_at_once(cluster, tmp_path, monkeypatch):
    """Slurm would keep it pending forever (reason PartitionConfig)."""
    tasks, seen, real = 4 * cluster.cpus, [], slurm.job_fields
    monkeypatch.setattr(slurm._jobs, "job_fields", lambda *args: seen.append(real(*args)) or seen[-1])
    with pytest.raises(slurm.JobNeverStarts) as never:
        slurm.submit(script(tmp_path, "srun hostname"), cluster, options=["--ntasks", tasks], cwd=tmp_path,
                     timeout=600)
    # "at once": at the first look that shows the reason, not at the timeout (clock-free)
    assert seen[-1].get("Reason") == "PartitionConfig"
    assert all(fields.get("Reason") != "PartitionConfig" for fields in seen[:-1])
    message = str(never.value)
    assert "PartitionConfig" in message and f"asks for {tasks} tasks" in message
    assert f"{cluster.cpus} CPUs" in message and f"--ntasks-per-node={cluster.cpus}" in message
    assert real(cluster, never.value.job.id)["JobState"] == "CANCELLED"


@versionless
@needs_slurm
def test_a_job_over_its_timeout_is_cancelled(cluster, tmp_path):
    with pytest.raises(slurm.JobTimeout, match="did not finish within 2 s") as late:
        slurm.submit(script(tmp_path, "sleep 300"), cluster, cwd=tmp_path, timeout=2)
    deadline = time.monotonic() + 60
    while slurm.job_fields(cluster, late.value.job.id)["JobState"] != "CANCELLED":
        assert time.monotonic() < deadline
        time.sleep(0.1)


@versionless
@needs_slurm
def test_an_interrupt_while_waiting_cancels_the_job(cluster, tmp_path):
    def jobs():
        return [int(i) for i in cluster.run("squeue", "-h", "-t", "all", "-o", "%A").stdout.split()]

    before, stop = max(jobs(), default=0), threading.Event()

    def interrupt_once_queued():  # what Jupyter's stop button does, once sbatch has handed the job over
        while not stop.wait(0.1):
            if max(jobs(), default=0) > before:
                _thread.interrupt_main()
                return

    threading.Thread(target=interrupt_once_queued, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            slurm.submit(script(tmp_path, "sleep 300"), cluster, cwd=tmp_path, timeout=60)
    finally:
        stop.set()
    job_id = str(max(jobs()))
    deadline = time.monotonic() + 60
    while slurm.job_fields(cluster, job_id)["JobState"] != "CANCELLED":
        assert time.monotonic() < deadline
        time.sleep(0.1)


@versionless
@needs_slurm
def test_an_interrupt_while_sbatch_hands_the_job_over_cancels_it_too(cluster, tmp_path, monkeypatch):
    """The window between Slurm creating the job and sbatch printing its id: Ctrl-C lands right after sbatch."""
    real_run, submitted = cluster.run, []

    def run(*command, **kwargs):
        done = real_run(*command, **kwargs)
        if command[0] == "sbatch":
            submitted.append(done.stdout.strip().split(";")[0])
            _thread.interrupt_main()  # as if Jupyter's stop button was pressed now
        return done

    monkeypatch.setattr(cluster, "run", run)
    with pytest.raises(KeyboardInterrupt):
        slurm.submit(script(tmp_path, "sleep 300"), cluster, cwd=tmp_path, timeout=600)
    deadline = time.monotonic() + 60
    while slurm.job_fields(cluster, submitted[0])["JobState"] != "CANCELLED":
        assert time.monotonic() < deadline, "the job was left running"
        time.sleep(0.1)


@needs_slurm
@pytest.mark.notebook  # two TensorFlow workers, one per node, train a few steps
@pytest.mark.smoke_run  # tasks.py test leaves it out for time: nbval's run of notebook 08 submits the same
# two-node job of notebook 05's worker and compares its tasks' order and addresses with the committed output
def test_two_nodes_in_namespaces_run_notebook_05s_worker_in_slurms_order(tmp_path, notebook_data_env):
    """Nodes c9 and c10 (Slurm's order; sorted as strings, c10 would come first), each slurmd in network and
    UTS namespaces of its own: the batch script places task 0 on c9 with c9's address, and both train. (The
    same script on one node is notebook 08's job, which nbval's run of 08 checks.)"""
    from course_utils import netlab

    before = slurm_pids()
    notebook_files.write(ROOT / "notebooks" / "05_multi_worker.ipynb", "workers/mwms_custom_loop.py", into=tmp_path)
    with slurm.local_cluster(nodes=["c9", "c10"]) as cluster:
        prefix = (cluster.directory / "netns").read_text().strip()
        assert sorted(netlab.existing(prefix)) == sorted([f"{prefix}-hub", f"{prefix}-0", f"{prefix}-1"])
        assert sorted(cluster.run("sinfo", "-h", "-N", "-o", "%N:%t").stdout.split()) == ["c10:idle", "c9:idle"]
        names = cluster.run("srun", "--nodes=2", "--ntasks-per-node=1", "--label", "hostname", cwd=tmp_path).stdout
        assert sorted(names.split("\n")[:2]) == ["0: c9", "1: c10"], names  # each node's own host name
        job = slurm.submit(ROOT / "cluster" / "slurm" / "mwms.sbatch", cluster, cwd=tmp_path, timeout=300,
                           options=["--nodes=2", "--ntasks-per-node=1"],
                           args=["workers/mwms_custom_loop.py", "--epochs", 1, "--limit", 256,
                                 "--per-worker-batch", 32, "--out", "out"],
                           env={"PYTHON": sys.executable, **notebook_data_env})
        assert (job.state, job.exit_code) == ("COMPLETED", 0), job.text()
        assert slurm.job_fields(cluster, job.id)["ExitCode"] == "0:0", "Slurm's own record of the job"
        port = slurm_tasks.default_port_base(int(job.id))
        lines = sorted(line for line in job.text().splitlines() if "TF_CONFIG=" in line)
        assert [line.split(", GPUs")[0] for line in lines] == [
            f"0: task 0 (local 0) at c9:{port}", f"1: task 1 (local 0) at c10:{port}"]
        assert all(", GPUs none, 1 CPU(s) of " in line for line in lines), lines  # --cpus-per-task=1 each
        configs = [json.loads(line.split("TF_CONFIG=", 1)[1]) for line in lines]
        assert all(c["cluster"] == {"worker": [f"c9:{port}", f"c10:{port}"]} for c in configs)
        saved = [np.load(tmp_path / "out" / f"weights-worker-{i}.npz") for i in (0, 1)]
        assert all(np.array_equal(saved[0][key], saved[1][key]) for key in saved[0].files), "workers differ"
        with pytest.raises(slurm.JobNeverStarts, match=r"this cluster has 2 nodes \(c9, c10\) with 1 CPU each"):
            slurm.submit(script(tmp_path, "srun hostname"), cluster, options=["--nodes=2", "--ntasks-per-node=4"],
                         cwd=tmp_path, timeout=120)
    assert_nothing_left(cluster, before)
    assert netlab.existing(prefix) == []


@needs_slurm
@pytest.mark.notebook  # two TensorFlow workers train for minutes
@pytest.mark.smoke_run  # tasks.py test leaves it out for time (2-4 minutes: Slurm's time limit is in minutes)
def test_a_job_at_its_time_limit_saves_is_requeued_and_resumes_at_the_saved_step(tmp_path, notebook_data_env):
    """cluster/slurm/mwms.sbatch with a 2-minute limit: the script's warning 90 s before it (USR1 to the job's
    steps) reaches the custom loop, every worker saves at the same step and exits 85, the script requeues the
    job, and the next run resumes at that step. A run may be warned again before the work is done: each
    resumes where the last saved, until the job completes.

    90 s, as notebook 08 gives it: after the save, deleting the input iterator waits for tf.data's tuning
    threads, up to their 60 s period (benchmarks/README.md). Under load with a 60 s warning, deletions of 30-32 s
    were the rule, and one save and exit outlasted the warning: the job ended TIMEOUT, not requeued."""
    before = slurm_pids()
    scratch = tmp_path / "tmp"  # the workers' temporary directories: empty again at the end
    scratch.mkdir()
    with slurm.local_cluster() as cluster:
        job = slurm.submit(ROOT / "cluster" / "slurm" / "mwms.sbatch", cluster, cwd=tmp_path, timeout=900,
                           options=["--time=2", "--ntasks-per-node=2"],
                           args=[ROOT / "cluster" / "workers" / "mwms_custom_loop.py", "--epochs", 20, "--limit", 2048,
                                 "--per-worker-batch", 64, "--out", "out-%j"],
                           env={"PYTHON": sys.executable, "TMPDIR": str(scratch), "CUDA_VISIBLE_DEVICES": "",
                                "WARN_SECONDS": "90",
                                **notebook_data_env}, on_poll=slurm.requeued_starter(cluster))
        text = job.text()
        assert (job.state, job.exit_code) == ("COMPLETED", 0), text
        restarts = int(slurm.job_fields(cluster, job.id)["Restarts"])
    saved = [int(s) for s in re.findall(r"^0: worker 0: saved at step (\d+)", text, re.M)]
    resumed = [int(s) for s in re.findall(r"^0: worker 0: resuming at step (\d+)", text, re.M)]
    print(f"job {job.id}: {restarts} requeue(s), saved at steps {saved}, resumed at {resumed}")
    assert restarts >= 1 and len(saved) == restarts and resumed == saved, text
    assert text.count("the workers saved and exited for a requeue") == restarts
    assert re.search(r"^1: worker 1: saved at step", text, re.M), "every worker saves at the same step"
    assert "0: worker 0: done" in text and (tmp_path / f"out-{job.id}" / "checkpoint").is_dir()
    # __pycache__: TensorFlow's autograph imports the modules it writes there and deletes them, not their
    # bytecode (seen where PYTHONDONTWRITEBYTECODE is unset, as under tasks.py stress)
    left = [path for path in scratch.iterdir() if path.name != "__pycache__"]
    assert left == [], "a worker left a temporary directory"
    assert_nothing_left(cluster, before)


def test_the_notebook_writes_the_repositorys_batch_script():
    written = notebook_files.writefile_cells(ROOT / "notebooks" / "08_slurm.ipynb")["workers/mwms.sbatch"]
    assert written == (ROOT / "cluster" / "slurm" / "mwms.sbatch").read_text()


def test_mwms_sbatch_script_says_what_changes_on_a_real_cluster():
    text = (ROOT / "cluster" / "slurm" / "mwms.sbatch").read_text()
    marked = "\n".join(line for line in text.splitlines() if "REAL CLUSTER" in line)
    for what in ("--nodes", "--ntasks-per-node", "--gpus-per-node", "--partition", "load your site's software"):
        assert what in marked, f"no REAL CLUSTER line says how to change {what}"
    assert "#   module load" in text
    assert "course_utils.slurm_tasks tf-config" in text and "TF_CONFIG" in text


# --- TensorFlow's resolver (the layout's own tests, without Slurm: tests/test_slurm_tasks.py) ------------

def step(nodelist, tasks_per_node, rank, local, node, ntasks, **more):
    """The variables srun sets in one task of a job step (job 4242)."""
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
            "SLURMD_NODENAME": node, "SLURM_STEP_NUM_TASKS": str(ntasks), **more}


def test_upstream_resolver_still_sorts_hosts_as_strings(monkeypatch):
    """Why course_utils has its own: fails (and can go) once TensorFlow orders tasks as Slurm does."""
    import tensorflow as tf

    for name, value in step("c[9-10]", "1(x2)", 0, 0, "c9", 2).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    upstream = tf.distribute.cluster_resolver.SlurmClusterResolver(gpus_per_node=1, gpus_per_task=1,
                                                                    port_base=7000, auto_set_gpu=False)
    assert upstream.cluster_spec().as_dict() == {"worker": ["c10:7000", "c9:7000"]}
    assert upstream.task_id == 0  # SLURM_PROCID 0, whose address in that list is c10's


def test_module_imports_without_tensorflow():
    code = "import sys, course_utils.slurm; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@versionless
def test_the_session_check_sees_what_a_cluster_would_leave():
    """conftest fails the test session when one of these is left: here a cluster's directory and a janitor."""
    import tempfile

    from tools.leftovers import course_leftovers

    directory = Path(tempfile.mkdtemp(prefix="course-slurm-"))
    janitor = subprocess.Popen([sys.executable, "-m", "course_utils.slurm._janitor"], stdin=subprocess.PIPE)
    try:
        found = course_leftovers()
        assert f"directory {directory}" in found
        assert any(item.startswith(f"process {janitor.pid}:") for item in found), found
    finally:
        janitor.stdin.write(f"{directory}\n".encode())
        janitor.stdin.close()  # a cluster's directory: the janitor sweeps it and exits
        janitor.wait(timeout=60)
    assert not directory.exists() and not any(str(directory) in item for item in course_leftovers())


@versionless
@needs_slurm
def test_two_nodes_of_two_cpus_each_place_two_tasks_on_each_in_slurms_order(tmp_path):
    """cpus_per_node=2 on this 2-core machine: Slurm places 2 tasks on each of 2 nodes (they share the cores),
    in its block order: tasks 0 and 1 on c9, 2 and 3 on c10, each task with its node's host name."""
    before = slurm_pids()
    with slurm.local_cluster(nodes=["c9", "c10"], cpus_per_node=2) as cluster:
        assert cluster.cpus == 2
        names = cluster.run("srun", "--nodes=2", "--ntasks-per-node=2", "--label", "hostname", cwd=tmp_path).stdout
        assert sorted(names.splitlines()) == ["0: c9", "1: c9", "2: c10", "3: c10"], names
    assert_nothing_left(cluster, before)
