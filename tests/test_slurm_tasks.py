"""course_utils.slurm_tasks and slurm_gpus without Slurm: a job step is the environment variables srun sets in
each task. The environments are those Slurm 23.x sets for the layouts an HPC user writes (GPU nodes with 4
GPUs; with device cgroups, ``ConstrainDevices=yes``, every task sees its own GPU as ``0``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils import slurm_gpus, slurm_tasks

ROOT = Path(__file__).resolve().parent.parent


def step(nodelist, tasks_per_node, rank, local, node, ntasks, **more):
    """The variables srun sets in one task of a job step (job 4242, its first step)."""
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
            "SLURMD_NODENAME": node, "SLURM_STEP_NUM_TASKS": str(ntasks), **more}


def two_nodes_of_four(rank, **more):
    """Task ``rank`` of 8 on g[1-2], 4 per node (block)."""
    return step("g[1-2]", "4(x2)", rank, rank % 4, f"g{1 + rank // 4}", 8, **more)


def no_cgroup(dev, *_):  # opens every /dev/nvidiaN: no device cgroup
    return os.open(os.devnull, os.O_RDONLY)


def gpu_devices(tmp_path, n=4) -> Path:
    for i in range(n):
        (tmp_path / f"nvidia{i}").touch()
    (tmp_path / "nvidiactl").touch()
    return tmp_path


# --- order, refusals -------------------------------------------------------------------------------

def test_one_node_two_tasks():
    found = slurm_tasks.layout(step("node7", "2", 1, 1, "node7", 2), port_base=7000)
    assert found.tf_config() == {"cluster": {"worker": ["node7:7000", "node7:7001"]},
                                 "task": {"type": "worker", "index": 1}}
    assert found.gpus == [] and not found.set_visible_devices


@pytest.mark.parametrize("nodelist, hosts", [("c[9-10]", ["c9", "c10"]), ("c[09-10]", ["c09", "c10"]),
                                             ("gpu-b7,gpu-a12", ["gpu-b7", "gpu-a12"])])
def test_two_nodes_in_slurms_order_padded_or_not(nodelist, hosts):
    """Task 0 is on Slurm's first host, whatever sorting the names as strings would give."""
    for rank, host in enumerate(hosts):
        found = slurm_tasks.layout(step(nodelist, "1(x2)", rank, 0, host, 2), port_base=7000)
        assert found.addresses == [f"{h}:7000" for h in hosts] and found.rank == rank


def test_block_and_cyclic_layouts_of_two_tasks_on_each_of_two_nodes():
    block = slurm_tasks.layout(step("c[9-10]", "2(x2)", 2, 0, "c10", 4), port_base=7000)
    assert block.addresses == ["c9:7000", "c9:7001", "c10:7000", "c10:7001"]
    cyclic = slurm_tasks.layout(step("c[9-10]", "2(x2)", 1, 0, "c10", 4, SLURM_DISTRIBUTION="cyclic"),
                                port_base=7000)
    assert cyclic.addresses == ["c9:7000", "c10:7000", "c9:7001", "c10:7001"] and cyclic.local_rank == 0
    assert slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2, SLURM_DISTRIBUTION="block:cyclic"), port_base=7000)
    uneven = slurm_tasks.task_order(["a", "b"], [3, 1], "cyclic")
    assert uneven == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]


def test_a_layout_slurm_contradicts_is_refused_with_what_it_said():
    with pytest.raises(SystemExit, match="Slurm says this is task 1 of 2, local task 0 on c9, but its block layout"):
        slurm_tasks.layout(step("c[9-10]", "1(x2)", 1, 0, "c9", 2), port_base=7000)
    with pytest.raises(SystemExit, match="SLURM_DISTRIBUTION=plane=2: only Slurm's block"):
        slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2, SLURM_DISTRIBUTION="plane=2"), port_base=7000)
    for suffix in ("pack", "nopack"):
        with pytest.raises(SystemExit, match="the ,pack/,nopack suffix"):
            slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2, SLURM_DISTRIBUTION=f"block,{suffix}"), port_base=7000)


def test_a_task_outside_srun_is_refused():
    """The batch script's own environment (measured on the local cluster: no SLURM_STEP_* variables)."""
    batch = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "c[9-10]", "SLURM_NODELIST": "c[9-10]", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "1(x2)", "SLURMD_NODENAME": "c9"}
    with pytest.raises(SystemExit, match="SLURM_STEP_NODELIST is not set.*would wait forever"):
        slurm_tasks.layout(batch)


# --- ports --------------------------------------------------------------------------------------------

def test_the_default_ports_come_from_the_job_and_step_ids_outside_slurms_mpi_ports():
    found = slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2))
    base = slurm_tasks.default_port_base(4242)
    assert found.addresses == [f"c9:{base}", f"c9:{base + 1}"]
    bases = {slurm_tasks.default_port_base(job) for job in range(10_000, 10_000 + slurm_tasks.PORT_SLOTS)}
    assert len(bases) == slurm_tasks.PORT_SLOTS == 1235
    assert min(bases) >= 13000 and max(bases) + slurm_tasks.PORTS_PER_JOB <= 32768  # not 12000-12999, not ephemeral


def test_a_second_step_on_the_same_node_gets_other_ports():
    first = slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2))
    second = slurm_tasks.layout(step("c9", "2", 0, 0, "c9", 2, SLURM_STEP_ID="1"))
    ports = [{int(a.split(":")[1]) for a in found.addresses} for found in (first, second)]
    assert not ports[0] & ports[1]


def test_more_tasks_on_a_node_than_a_steps_ports_are_refused():
    with pytest.raises(SystemExit, match="17 tasks on one node, but a job step has 16 ports"):
        slurm_tasks.layout(step("c9", "17", 0, 0, "c9", 17))
    assert len(slurm_tasks.layout(step("c9", "17", 0, 0, "c9", 17), port_base=20000).addresses) == 17


def test_a_port_in_use_is_refused_before_tensorflow_starts():
    import socket

    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        with pytest.raises(SystemExit, match=f"port {taken.getsockname()[1]} is in use.*--port-base"):
            slurm_tasks.check_port_free(taken.getsockname()[1])


# --- addresses on the fast network -----------------------------------------------------------------

def test_a_host_suffix_or_map_names_the_fast_network():
    suffixed = slurm_tasks.layout(step("c[9-10]", "1(x2)", 0, 0, "c9", 2), port_base=7000, host_suffix="-ib0")
    assert suffixed.addresses == ["c9-ib0:7000", "c10-ib0:7000"]
    mapped = slurm_tasks.layout(step("c[9-10]", "1(x2)", 1, 0, "c10", 2), port_base=7000,
                                host_map=slurm_tasks.parse_host_map("c9=10.1.0.9,c10=10.1.0.10"))
    assert mapped.addresses == ["10.1.0.9:7000", "10.1.0.10:7000"]
    with pytest.raises(SystemExit, match="write NODE=ADDRESS"):
        slurm_tasks.parse_host_map("c9")


# --- GPUs: what Slurm 23.x sets, and what each task keeps ----------------------------------------------

def test_gpus_per_task_with_cgroups_every_task_keeps_its_gpu_0():
    """2 nodes x 4 tasks, --gpus-per-task=1, ConstrainDevices=yes: CUDA_VISIBLE_DEVICES=0 in every task; the
    global numbers (SLURM_STEP_GPUS: this task's; SLURM_JOB_GPUS: node 0's) must not replace it."""
    for rank in range(8):
        env = two_nodes_of_four(rank, CUDA_VISIBLE_DEVICES="0", SLURM_GPUS_PER_TASK="1",
                                SLURM_STEP_GPUS=str(rank % 4), SLURM_JOB_GPUS="0,1,2,3", SLURM_GPUS_ON_NODE="4")
        found = slurm_tasks.layout(env, port_base=7000)
        assert (found.gpus, found.set_visible_devices) == (["0"], False)


def test_gres_four_gpus_one_task_per_node_keeps_all_four():
    for rank in range(2):
        env = step("g[1-2]", "1(x2)", rank, 0, f"g{rank + 1}", 2, CUDA_VISIBLE_DEVICES="0,1,2,3",
                   SLURM_JOB_GPUS="0,1,2,3", SLURM_STEP_GPUS="0,1,2,3", SLURM_GPUS_ON_NODE="4")
        found = slurm_tasks.layout(env, port_base=7000)
        assert (found.gpus, found.set_visible_devices) == (["0", "1", "2", "3"], False)


def test_gres_four_gpus_four_tasks_per_node_split_by_local_rank():
    """--gres=gpu:4 --ntasks-per-node=4, no --gpus-per-task: every task gets 0,1,2,3; each keeps its own."""
    for rank in range(8):
        env = two_nodes_of_four(rank, CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_JOB_GPUS="0,1,2,3",
                                SLURM_STEP_GPUS="0,1,2,3", SLURM_GPUS_ON_NODE="4")
        found = slurm_tasks.layout(env, port_base=7000)
        assert (found.gpus, found.set_visible_devices) == ([str(rank % 4)], True)
    three = step("g1", "3", 2, 2, "g1", 3, CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_JOB_GPUS="0,1,2,3")
    with pytest.raises(SystemExit, match="4 GPU.s. visible to each of this node's 3 tasks.*--gpus-per-task=1"):
        slurm_tasks.layout(three, port_base=7000)


def test_a_sites_default_gpu_bind_closest_still_splits_the_list_but_single_keeps_it():
    """SLURM_GPU_BIND=closest (a site's default) leaves two tasks of a socket the same list: still split by
    local rank. single:1 and map_gpu bind one GPU to each task: Slurm's list is the task's own."""
    for bind in ("closest", "verbose,closest", "none"):
        env = two_nodes_of_four(1, CUDA_VISIBLE_DEVICES="0,1", SLURM_GPU_BIND=bind)
        env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)"
        assert slurm_gpus.for_task(env, 1, 2).visible == ["1"], bind
    for bind in ("single:1", "map_gpu:0,1", "verbose,mask_gpu:0x1,0x2"):
        env = two_nodes_of_four(1, CUDA_VISIBLE_DEVICES="0", SLURM_GPU_BIND=bind)
        assert slurm_gpus.for_task(env, 1, 4).visible == ["0"], bind


def test_global_gpu_numbers_are_used_only_outside_a_device_cgroup(tmp_path):
    dev = gpu_devices(tmp_path)
    env = step("g1", "2", 1, 1, "g1", 2, SLURM_STEP_GPUS="4,5,6,7")  # no CUDA_VISIBLE_DEVICES (a prolog removed it)
    outside = slurm_gpus.for_task(env, 1, 2, dev=dev, opener=no_cgroup)
    assert (outside.visible, outside.set_visible) == (["6", "7"], True)

    def cgroup(path, flags):  # this task may open nvidia0 only: the others are another task's
        if not path.endswith("nvidia0"):
            raise PermissionError(1, "Operation not permitted", path)
        return os.open(os.devnull, flags)

    inside = slurm_gpus.for_task(env, 1, 2, dev=dev, opener=cgroup)
    assert (inside.visible, inside.set_visible) == ([], False) and "device cgroup" in inside.how
    assert slurm_gpus.in_device_cgroup(dev, cgroup) and not slurm_gpus.in_device_cgroup(dev, no_cgroup)
    assert not slurm_gpus.in_device_cgroup(tmp_path / "empty")  # CPU nodes have no /dev/nvidiaN


def test_cpu_only_tasks_have_no_gpus():
    assert slurm_tasks.layout(step("c1", "2", 0, 0, "c1", 2, CUDA_VISIBLE_DEVICES=""), port_base=7000).gpus == []
    assert slurm_tasks.layout(step("c1", "2", 0, 0, "c1", 2), port_base=7000, dev="/nonexistent").gpus == []


def test_gpu_uuids_from_a_fake_nvidia_smi(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, GPU-aaaa'\necho '1, GPU-bbbb'\n")
    fake.chmod(0o755)
    assert slurm_gpus.uuids(["1"], command=(str(fake),)) == ["GPU-bbbb"]
    assert slurm_gpus.uuids(["GPU-cccc"], command=(str(fake),)) == ["GPU-cccc"]
    assert slurm_gpus.uuids(["0"], command=(str(tmp_path / "absent"),)) == []


# --- CPUs ---------------------------------------------------------------------------------------------

def test_threads_from_the_cpus_the_task_may_use():
    everything = sorted(os.sched_getaffinity(0))
    assert slurm_tasks.task_cpus({}) == (len(everything), everything)  # no --cpus-per-task: its affinity decides
    assert slurm_tasks.task_cpus({"SLURM_CPUS_PER_TASK": "1"}) == (1, everything)  # unbound: Slurm's count
    assert slurm_tasks.thread_settings(8) == {"TF_NUM_INTRAOP_THREADS": "8", "TF_NUM_INTEROP_THREADS": "2",
                                              "OMP_NUM_THREADS": "8"}
    assert slurm_tasks.thread_settings(1)["TF_NUM_INTEROP_THREADS"] == "1"


def test_tf_config_command_runs_the_worker_with_its_place(tmp_path):
    """What srun runs in each task: no TensorFlow imported, TF_CONFIG, threads and GPUs set, then exec."""
    fake = tmp_path / "nvidia-smi"  # on PATH: the task prints its GPU's UUID
    fake.write_text("#!/bin/sh\necho '0, GPU-aaaa'\necho '1, GPU-bbbb'\necho '2, GPU-cccc'\necho '3, GPU-dddd'\n")
    fake.chmod(0o755)
    env = {**os.environ, **two_nodes_of_four(6, CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_CPUS_PER_TASK="1"),
           "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    names = ("TF_CONFIG", "CUDA_VISIBLE_DEVICES", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    show = (f"import json, os, sys; print(json.dumps({{k: os.environ.get(k) for k in {names}}}), "
            "'tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-m", "course_utils.slurm_tasks", "tf-config", "--port-base", "40000",
                           "--host-suffix=-ib0", "--", sys.executable, "-c", show],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said, shown = done.stdout.splitlines()
    assert said.startswith("task 6 (local 2) at g2-ib0:40002, GPUs 2 GPU-cccc (share 3 of 0,1,2,3), 1 CPU(s) ")
    values = json.loads(shown.rsplit(" ", 1)[0])
    assert json.loads(values["TF_CONFIG"])["task"] == {"type": "worker", "index": 6}
    assert (values["CUDA_VISIBLE_DEVICES"], values["TF_NUM_INTRAOP_THREADS"]) == ("2", "1")
    assert shown.endswith("False")  # the worker imports TensorFlow once, itself


def test_the_resolver_gives_strategies_this_layout(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    env = step("c[9-10]", "1(x2)", 1, 0, "c10", 2, CUDA_VISIBLE_DEVICES="0,1")
    found = slurm_tasks.resolver(env, port_base=7000)
    assert found.cluster_spec().as_dict() == {"worker": ["c9:7000", "c10:7000"]}
    assert (found.task_type, found.task_id, found.num_accelerators()) == ("worker", 1, {"GPU": 2})
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # Slurm's list is kept: nothing to set
