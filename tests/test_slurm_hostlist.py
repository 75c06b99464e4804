"""course_utils.slurm_hostlist: Slurm's compressed host lists and task counts, without TensorFlow, checked
against Slurm's own ``scontrol show hostnames`` where Slurm is installed (no cluster needed)."""

import os
import shutil
import subprocess
import sys

import pytest

from course_utils.slurm_hostlist import expand_hostlist, expand_tasks_per_node

CASES = {
    "c[001-003,7],d1": ["c001", "c002", "c003", "c7", "d1"],
    "c[9-10]": ["c9", "c10"],  # unpadded: Slurm's order, not the strings' (c10 < c9)
    "c[09-10]": ["c09", "c10"],
    "rack[1-2]-n[1-2]": ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"],
    "gpu-b7,gpu-a12": ["gpu-b7", "gpu-a12"],
    "node7": ["node7"],
}


@pytest.mark.parametrize("hostlist", list(CASES))
def test_host_lists_expand_in_slurms_order(hostlist):
    assert expand_hostlist(hostlist) == CASES[hostlist]


def test_the_same_as_slurms_own_expansion(tmp_path):
    if not shutil.which("scontrol"):
        pytest.skip("Slurm's scontrol is not installed here")
    conf = tmp_path / "slurm.conf"  # scontrol reads a configuration first, even to expand a list
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\nPartitionName=p Nodes=ALL\n")
    for hostlist, hosts in CASES.items():
        done = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True,
                              env={**os.environ, "SLURM_CONF": str(conf)}, check=True)
        assert done.stdout.split() == hosts, hostlist


def test_task_counts_expand_per_node():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]


@pytest.mark.parametrize("bad", ["", "c[1-", "c1-2]", "c[a-b]", "c[3-1]", "c[[1-2]]"])
def test_malformed_host_lists_are_refused(bad):
    with pytest.raises(ValueError):
        expand_hostlist(bad)


def test_malformed_task_counts_are_refused():
    with pytest.raises(ValueError, match="not a task count"):
        expand_tasks_per_node("2(3)")


def test_it_imports_without_tensorflow():
    code = "import sys, course_utils.slurm_tasks; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
