"""course_utils.slurm on a real local Slurm cluster, and its resolver on CPU-only and (faked) GPU nodes.

The cluster tests need Debian's slurm-wlm and munge, and root. CI has both (set-up installs the
packages), so with ``CI`` set they never skip: there a missing Slurm fails them. Every cluster test
checks processes, not only results: no daemon, job step or job task may outlive the cluster.
"""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from course_utils import notebook_files, slurm, slurm_tasks

ROOT = Path(__file__).resolve().parent.parent
AVAILABLE, WHY_NOT = slurm.available()
needs_slurm = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"),
                                 reason=f"no local Slurm cluster here: {WHY_NOT}")
SLURM_NAMES = {"munged", "slurmctld", "slurmd", "slurmstepd"}


def slurm_pids() -> set[int]:
    """Every live (not zombie) Slurm or munge process on this machine, ours or not."""
    pids = set()
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] in SLURM_NAMES and proc.info["status"] != psutil.STATUS_ZOMBIE:
            pids.add(proc.pid)
    return pids


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


@needs_slurm
def test_an_error_in_the_body_stops_everything_and_propagates():
    before = slurm_pids()
    with pytest.raises(ValueError, match="the body failed"):
        with slurm.local_cluster() as cluster:
            raise ValueError("the body failed")
    assert_nothing_left(cluster, before)


@needs_slurm
def test_interrupt_while_a_job_runs_cancels_it_and_stops_everything(tmp_path):
    before = slurm_pids()
    with pytest.raises(KeyboardInterrupt):
        with slurm.local_cluster() as cluster:
            job_id = cluster.run("sbatch", "--parsable", "-n", "2", "-o", tmp_path / "out",
                                 script(tmp_path, "srun sleep 300"), cwd=tmp_path).stdout.strip()
            deadline = time.monotonic() + 120  # returns as soon as both tasks run
            while sum(p.name() == "sleep" for p in slurm.leftovers(cluster.directory)) < 2:
                assert time.monotonic() < deadline, slurm.job_fields(cluster, job_id)
                time.sleep(0.1)
            raise KeyboardInterrupt  # what Jupyter's interrupt raises
    assert_nothing_left(cluster, before)


@needs_slurm
def test_a_daemon_that_does_not_come_up_is_reported_with_its_log():
    before = slurm_pids()
    with pytest.raises(slurm.SlurmError, match="(?s)slurmctld exited.*Can't find plugin for select/nonexistent"):
        with slurm.local_cluster(settings={"SelectType": "select/nonexistent"}):
            pass
    assert slurm_pids() <= before


@pytest.fixture(scope="module")
def cluster():
    before = slurm_pids()
    with slurm.local_cluster() as running:
        yield running
    assert_nothing_left(running, before)


@needs_slurm
def test_one_task_job_completes_and_its_output_is_read_back(cluster, tmp_path):
    t0 = time.monotonic()
    job = slurm.submit(script(tmp_path, "hostname"), cluster, cwd=tmp_path, timeout=300)
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert job.output == [tmp_path / f"slurm-{job.id}.out"] and job.text() == cluster.node + "\n"
    assert 0 < job.elapsed_s <= time.monotonic() - t0


@needs_slurm
def test_two_task_job_runs_both_tasks(cluster, tmp_path):
    body = "#SBATCH --ntasks=2\nsrun bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS'"
    job = slurm.submit(script(tmp_path, body), cluster, cwd=tmp_path, timeout=300)
    assert (job.state, job.exit_code) == ("COMPLETED", 0)
    assert sorted(job.text().splitlines()) == ["task 0 of 2", "task 1 of 2"]


@needs_slurm
def test_a_failing_job_raises_with_its_exit_code_and_output(cluster, tmp_path):
    with pytest.raises(slurm.JobFailed, match="(?s)ended FAILED with exit code 3.*about to fail") as failed:
        slurm.submit(script(tmp_path, "echo about to fail; exit 3"), cluster, cwd=tmp_path, timeout=300)
    assert failed.value.job.exit_code == 3
    job = slurm.submit(script(tmp_path, "exit 3"), cluster, cwd=tmp_path, timeout=300, check=False)
    assert (job.state, job.exit_code) == ("FAILED", 3)


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
    assert f"{cluster.cpus} CPUs" in message and f"--ntasks={cluster.cpus}" in message
    assert real(cluster, never.value.job.id)["JobState"] == "CANCELLED"


@needs_slurm
def test_a_job_over_its_timeout_is_cancelled(cluster, tmp_path):
    with pytest.raises(slurm.JobTimeout, match="did not finish within 2 s") as late:
        slurm.submit(script(tmp_path, "sleep 300"), cluster, cwd=tmp_path, timeout=2)
    deadline = time.monotonic() + 60
    while slurm.job_fields(cluster, late.value.job.id)["JobState"] != "CANCELLED":
        assert time.monotonic() < deadline
        time.sleep(0.1)


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
@pytest.mark.notebook  # two TensorFlow workers train a few steps: about 20 s on 2 cores
def test_mwms_sbatch_trains_notebook_05s_worker_on_two_slurm_tasks(cluster, tmp_path, notebook_data_env):
    notebook_files.write(ROOT / "notebooks" / "05_multi_worker.ipynb", "workers/mwms_custom_loop.py", into=tmp_path)
    base = slurm.free_port_base(2)
    job = slurm.submit(ROOT / "cluster" / "slurm" / "mwms.sbatch", cluster, cwd=tmp_path, timeout=300,
                       args=["workers/mwms_custom_loop.py", "--epochs", 1, "--limit", 256, "--per-worker-batch", 32,
                             "--out", "out"],
                       env={"PYTHON": sys.executable, "PORT_BASE": str(base), **notebook_data_env})
    assert (job.state, job.exit_code) == ("COMPLETED", 0) and job.output == [tmp_path / f"slurm-mwms-{job.id}.out"]
    assert slurm.job_fields(cluster, job.id)["ExitCode"] == "0:0", "Slurm's own record of the job"
    got = sorted(line for line in job.text().splitlines() if "TF_CONFIG=" in line)  # "0: TF_CONFIG=...", "1: ..."
    workers = [f"{cluster.node}:{base}", f"{cluster.node}:{base + 1}"]
    assert [json.loads(line.split("TF_CONFIG=", 1)[1]) for line in got] == [
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}} for i in (0, 1)], job.text()
    saved = [np.load(tmp_path / "out" / f"weights-worker-{i}.npz") for i in (0, 1)]
    assert len(saved[0].files) == 8
    assert all(np.array_equal(saved[0][key], saved[1][key]) for key in saved[0].files), "workers differ"


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


# --- the resolver (no Slurm needed: a Slurm step is its environment variables) ---------------------

@pytest.fixture
def slurm_step(monkeypatch, tmp_path):
    """Task 1 of a 2-task step on one node, ``PATH`` with only what the test puts in ``tmp_path``."""
    for name, value in {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node7",
                        "SLURM_STEP_TASKS_PER_NODE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # and whatever the resolver sets is undone after the test
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_resolver_reports_no_gpus_where_nvidia_smi_is_missing(slurm_step):
    import tensorflow as tf

    with pytest.raises(FileNotFoundError, match="nvidia-smi"):  # the upstream bug; fixed when this fails
        tf.distribute.cluster_resolver.SlurmClusterResolver()
    with pytest.raises(ValueError, match="must not be zero"):  # and its gpus_per_node=0
        tf.distribute.cluster_resolver.SlurmClusterResolver(gpus_per_node=0).cluster_spec()
    resolver = slurm_tasks.resolver(port_base=7000)
    assert isinstance(resolver, tf.distribute.cluster_resolver.SlurmClusterResolver)
    assert resolver.cluster_spec().as_dict() == {"worker": ["node7:7000", "node7:7001"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    assert resolver.num_accelerators() == {} and "CUDA_VISIBLE_DEVICES" not in os.environ
    assert slurm_tasks.tf_config(7000) == {"cluster": {"worker": ["node7:7000", "node7:7001"]},
                                     "task": {"type": "worker", "index": 1}}


def test_resolver_is_slurms_own_where_there_are_gpus(slurm_step, monkeypatch):
    import tensorflow as tf

    smi = slurm_step / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake (UUID: GPU-0)'\necho 'GPU 1: Fake (UUID: GPU-1)'\n")
    smi.chmod(0o755)
    parent = tf.distribute.cluster_resolver.SlurmClusterResolver(port_base=7000)
    resolver = slurm_tasks.resolver(port_base=7000)
    assert resolver.num_accelerators() == parent.num_accelerators() == {"GPU": 1}
    assert resolver.cluster_spec().as_dict() == parent.cluster_spec().as_dict()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1", "task 1 gets the second GPU, as upstream does"
    assert slurm_tasks.resolver(gpus_per_node=0).num_accelerators() == {}, "gpus_per_node=0: CPU only, GPUs or not"


def test_module_imports_without_tensorflow():
    code = "import sys, course_utils.slurm; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
