"""course_utils.slurm_diagrams (re-exported by course_utils.diagrams): what notebook 08 draws of a Slurm job."""


import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_diagrams import assert_readable_png, strings  # noqa: E402

from course_utils import diagrams  # noqa: E402

VARIANTS = [{}, {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4},
            {"nodes": 2, "tasks_per_node": 1, "gpus_per_node": 4}, {"nodes": 1, "tasks_per_node": 1},
            {"nodes": 4, "tasks_per_node": 8}, {"nodes": 4, "tasks_per_node": 2, "gpus_per_node": 8},
            {"nodes": 2, "names": ["gpu-node-0001", "gpu-node-0002"], "port_base": 32000}]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("kwargs", VARIANTS, ids=str)
def test_readable_no_overlap_and_renders_to_png(kwargs):
    fig = diagrams.slurm_job(**kwargs)
    assert_readable_png(fig)
    if not kwargs:
        assert fig.get_size_inches()[1] <= 3.3


def test_the_lessons_job_labels_every_task_with_its_ranks_node_and_port():
    texts = strings(diagrams.slurm_job(nodes=2, tasks_per_node=2, port_base=13016))
    assert "node c9" in texts and "node c10" in texts  # unpadded names, in Slurm's order
    assert [t for t in texts if t.startswith("task ")] == [
        "task 0 · local 0 · c9:13016", "task 1 · local 1 · c9:13017",
        "task 2 · local 0 · c10:13016", "task 3 · local 1 · c10:13017"]
    assert not any(t.startswith("GPU") for t in texts)
    assert any("No GPUs" in t for t in texts)


def test_gpus_are_shared_out_by_local_rank():
    per_task = strings(diagrams.slurm_job(nodes=2, tasks_per_node=4, gpus_per_node=4))
    assert per_task.count("GPU 0") == per_task.count("GPU 3") == 2  # one GPU per task, on each node
    whole_node = strings(diagrams.slurm_job(nodes=2, tasks_per_node=1, gpus_per_node=4))
    assert [t for t in whole_node if t.startswith("task ")] == ["task 0 · local 0 · c9:13016",
                                                                 "task 1 · local 0 · c10:13016"]
    assert [t for t in whole_node if t.startswith("GPU")] == [f"GPU {i}" for i in range(4)] * 2
    assert "node c9, 4 GPUs" in whole_node


def test_a_long_label_is_shortened_not_overlapping():
    texts = strings(diagrams.slurm_job(nodes=4, tasks_per_node=8))
    assert "task 31 · local 7\nc12:13023" in texts or "task 31, local 7" in texts or "task 31" in texts


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"nodes": 0}, "nodes must be an integer from 1 to 4"),
    ({"tasks_per_node": 9}, "tasks_per_node must be an integer from 1 to 8"),
    ({"tasks_per_node": 3, "gpus_per_node": 4}, "must be a multiple of tasks_per_node"),
    ({"nodes": 2, "names": ["a"]}, "one host name per node"),
])
def test_arguments_that_cannot_be_drawn_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.slurm_job(**kwargs)
