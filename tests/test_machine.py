"""course_utils.machine: the one-line description of the machine a notebook ran on."""

from course_utils import machine


def test_cpu_model_reads_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t: fpu\n")
    assert machine.cpu_model(str(info)) == "AMD EPYC 9B14"


def test_cpu_model_without_cpuinfo_falls_back(tmp_path):
    assert machine.cpu_model(str(tmp_path / "missing")) != ""


def test_describe_names_cores_and_gpus():
    assert machine.describe(gpus=0).endswith(f"{machine.cores()} cores, no GPU")
    assert machine.describe(gpus=4).endswith(", 4 GPUs")
    assert machine.describe(gpus=1).endswith(", 1 GPU")
