"""cluster/: the worker scripts are notebook 05's, byte for byte; the Slurm batch scripts pass shellcheck, say
what they ask for, and (run with a stand-in srun and scontrol, no Slurm needed) pass --cpus-per-task on only
when the job has one, put the job id in the worker's arguments and requeue the job on the workers' exit code 85.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from course_utils import notebook_files

ROOT = Path(__file__).resolve().parent.parent
SLURM_DIR = ROOT / "cluster" / "slurm"
SCRIPTS = sorted(SLURM_DIR.glob("*.sbatch"))
PREEMPTED = 85  # the workers' exit code after saving at Slurm's warning (notebook 05's custom loop)


def sbatch_options(script: Path) -> dict[str, str]:
    """The active ``#SBATCH --name=value`` lines (``##SBATCH`` lines are off)."""
    found = {}
    for line in script.read_text().splitlines():
        match = re.match(r"#SBATCH --([\w-]+)(?:=(\S+))?", line)
        if match:
            found[match.group(1)] = match.group(2) or ""
    return found


def test_the_worker_scripts_are_notebook_05s():
    written = notebook_files.writefile_cells(ROOT / "notebooks" / "05_multi_worker.ipynb")
    shipped = {f"workers/{p.name}": p.read_text() for p in (ROOT / "cluster" / "workers").glob("*.py")}
    assert shipped == written, "regenerate cluster/workers/ from notebook 05's %%writefile cells"


def test_three_batch_scripts_each_warn_and_requeue():
    assert [p.name for p in SCRIPTS] == ["mwms-gpu-per-task.sbatch", "mwms-gpu.sbatch", "mwms.sbatch"]
    for script in SCRIPTS:
        text = script.read_text()
        assert "requeue" in sbatch_options(script) and "signal" not in sbatch_options(script), script.name
        assert 'scancel --signal=USR1 "$SLURM_JOB_ID"' in text and "WARN_SECONDS=${WARN_SECONDS:-" in text
        assert "scontrol requeue" in text and f'"$status" -eq {PREEMPTED}' in text


def test_the_gpu_scripts_ask_for_gpus_cores_and_memory_together():
    whole_node = sbatch_options(SLURM_DIR / "mwms-gpu.sbatch")
    assert (whole_node["ntasks-per-node"], whole_node["gpus-per-node"]) == ("1", "4")
    # one task per node: all the node's cores as --cpus-per-task, which srun is given exactly (with
    # --cpus-per-gpu and a default --cpus-per-task of 1, how the task is bound depends on version and site)
    assert "cpus-per-task" in whole_node and "mem-per-gpu" in whole_node and "cpus-per-gpu" not in whole_node
    per_gpu = sbatch_options(SLURM_DIR / "mwms-gpu-per-task.sbatch")
    assert (per_gpu["ntasks-per-node"], per_gpu["gpus-per-task"]) == ("4", "1") and "mem-per-gpu" in per_gpu
    text = (SLURM_DIR / "mwms-gpu-per-task.sbatch").read_text()
    assert "##SBATCH --gres-flags=allow-task-sharing" in text and "23.11" in text
    for script in ("mwms-gpu.sbatch", "mwms-gpu-per-task.sbatch"):
        text = (SLURM_DIR / script).read_text()
        assert "NCCL_DEBUG" in text and "NCCL_SOCKET_IFNAME" in text and "learning rate" in text


def test_the_batch_scripts_pass_shellcheck():
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (python3 tasks.py setup installs Debian's where it can)")
    done = subprocess.run(["shellcheck", "--shell=bash", *map(str, SCRIPTS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def fake_slurm(tmp_path: Path, srun_exit: int) -> Path:
    """Stand-ins for Slurm's commands that record their arguments: srun runs ``$SRUN_SECONDS`` and exits
    with ``srun_exit``; squeue prints ``$SQUEUE_END`` (the run's end time; N/A: no limit), in
    ``$SLURM_TIME_FORMAT`` when one is set."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = ('if [ "${SLURM_TIME_FORMAT:-standard}" = standard ]; then echo "${SQUEUE_END:-N/A}"; '
              'else date -d "${SQUEUE_END:-now}" +"$SLURM_TIME_FORMAT"; fi')  # a user's format, as squeue does
    for name, then in (("srun", f"sleep ${{SRUN_SECONDS:-0}}; exit {srun_exit}"), ("scontrol", "exit 0"),
                       ("scancel", "exit 0"), ("squeue", squeue)):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "${{0##*/}} $*" >> {tmp_path}/calls\n{then}\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_script(tmp_path, srun_exit=0, **env):
    tmp_path.mkdir(exist_ok=True)
    bin_dir = fake_slurm(tmp_path, srun_exit)
    variables = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2",
                 "SLURM_JOB_NODELIST": "c[9-10]", **env}
    done = subprocess.run(["bash", str(SLURM_DIR / "mwms.sbatch"), "w.py", "--out", "runs/%j", "--epochs", "1"],
                          env=variables, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return done, [call for call in calls if not call.startswith("squeue ")]


def test_cpus_per_task_is_passed_on_only_when_the_job_has_it(tmp_path):
    done, calls = run_script(tmp_path / "without")
    (srun,) = calls
    assert done.returncode == 0 and srun.startswith("srun ") and "--cpus-per-task" not in srun, srun
    assert srun.endswith("-- python3 w.py --out runs/4242 --epochs 1")  # %j: the job's own folder
    done, calls = run_script(tmp_path / "with", SLURM_CPUS_PER_TASK="8")
    assert "--cpus-per-task=8" in calls[0]


def test_the_workers_exit_code_85_requeues_the_job(tmp_path):
    done, calls = run_script(tmp_path / "saved", srun_exit=PREEMPTED)
    assert done.returncode == PREEMPTED and calls[1] == "scontrol requeue 4242", calls
    done, calls = run_script(tmp_path / "failed", srun_exit=1)
    assert done.returncode == 1 and len(calls) == 1, "a failure is not requeued"
    done, calls = run_script(tmp_path / "again", srun_exit=PREEMPTED, SLURM_RESTART_COUNT="20")
    assert done.returncode == PREEMPTED and len(calls) == 1, "MAX_REQUEUES (20) ends the round"


def test_host_suffix_and_port_base_reach_the_task_wrapper(tmp_path):
    done, calls = run_script(tmp_path, HOST_SUFFIX="-ib0", PORT_BASE="20000")
    assert "tf-config --port-base 20000 --host-suffix=-ib0 --" in calls[0]


def test_the_script_warns_the_workers_itself_before_each_runs_time_limit(tmp_path):
    """Slurm's own --signal warning is sent once per job; the script sends USR1 to the job's steps
    WARN_SECONDS before this run's end, on every run, and only while its srun runs."""
    import datetime

    def in_seconds(seconds):
        return (datetime.datetime.now() + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")

    # the warning is due 1-2 s after the script starts (the end is given to the second); srun lasts 6 s, so
    # a loaded machine that starts the script or its timer late still sends it while srun runs
    done, calls = run_script(tmp_path / "warned", WARN_SECONDS="100", SQUEUE_END=in_seconds(102), SRUN_SECONDS="6")
    assert done.returncode == 0 and "scancel --signal=USR1 4242" in calls, calls
    # a user's own SLURM_TIME_FORMAT (squeue prints times in it) must not keep the warning from being sent
    done, calls = run_script(tmp_path / "formatted", WARN_SECONDS="100", SQUEUE_END=in_seconds(102), SRUN_SECONDS="6",
                             SLURM_TIME_FORMAT="%d.%m. %H:%M:%S")
    assert done.returncode == 0 and "scancel --signal=USR1 4242" in calls, (calls, done.stderr)
    # srun ends at once and the warning is due 2-3 s later (never in the second srun ends: that raced, the
    # warning due "now" beside an srun ending "now")
    done, calls = run_script(tmp_path / "quick", WARN_SECONDS="100", SQUEUE_END=in_seconds(103))
    time.sleep(4)  # past the warning's time: the script stopped its timer when srun ended
    assert not (tmp_path / "quick" / "calls").read_text().count("scancel"), "no warning after srun has ended"
    done, calls = run_script(tmp_path / "unlimited")
    assert done.returncode == 0 and calls[0].startswith("srun ")
