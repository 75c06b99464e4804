"""course_utils.mwms_diagrams (re-exported by course_utils.diagrams): what notebook 05 draws of a multi-worker job."""


import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_diagrams import assert_readable_png, strings  # noqa: E402

from course_utils import diagrams  # noqa: E402

VARIANTS = [
    ("mwms_cluster", {}), ("mwms_cluster", {"workers": 1}), ("mwms_cluster", {"workers": 4}),
    ("mwms_cluster", {"workers": 3, "chief": True}), ("mwms_cluster", {"workers": 4, "chief": True, "port": 65000}),
    ("fault_timeline", {}), ("fault_timeline", {"workers": 4, "killed": 0}),
    ("fault_timeline", {"kill_s": 15.8, "noticed_s": 1.8, "restart_s": 19.0, "end_s": 40.0, "backup_s": 12.0}),
    ("fault_timeline", {"kill_s": 3.0, "noticed_s": 9.9, "restart_s": 13.0, "end_s": 200.0, "backup_s": 0.0}),
    ("fault_timeline", {"kill_s": 100.0, "noticed_s": 0.2, "restart_s": 100.2, "end_s": 101.0, "backup_s": 100.0}),
]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(("name", "kwargs"), VARIANTS, ids=str)
def test_readable_no_overlap_and_renders_to_png(name, kwargs):
    fig = getattr(diagrams, name)(**kwargs)
    assert_readable_png(fig)


def test_the_cluster_is_drawn_once_and_each_process_has_its_own_task():
    texts = strings(diagrams.mwms_cluster(workers=2))
    assert sum(t.startswith('"cluster"') for t in texts) == 1
    assert any('"worker": ["host0:2222", "host1:2222"]' in t for t in texts)
    assert any('"task": {"type": "worker", "index": 0}' in t for t in texts)
    assert any('"task": {"type": "worker", "index": 1}' in t for t in texts)
    assert any(t.startswith("the chief:") for t in texts)
    assert any("worker 0 is the chief" in t for t in texts)


def test_with_a_chief_task_worker_0_is_not_the_chief():
    texts = strings(diagrams.mwms_cluster(workers=2, chief=True))
    assert any('"chief": ["host0:2222"]' in t for t in texts)
    assert sum(t.startswith(("the chief", "chief:")) for t in texts) == 1
    assert sum("temporary" in t for t in texts) == 2  # worker 0 and worker 1


def test_the_fault_timeline_labels_the_kill_the_survivors_error_and_the_restart():
    fig = diagrams.fault_timeline(kill_s=15.8, noticed_s=1.8, restart_s=19.0, end_s=40.0, backup_s=12.0)
    texts = strings(fig)
    assert " kill: worker 1" in texts and "restart at 19 s" in texts
    assert "  fails: Socket closed, 1.8 s after the kill" in texts
    assert "measured times" in fig._suptitle.get_text()
    assert "illustrative" in diagrams.fault_timeline()._suptitle.get_text()


@pytest.mark.parametrize(("name", "kwargs", "message"), [
    ("mwms_cluster", {"workers": 0}, "workers must be an integer from 1 to 4"),
    ("mwms_cluster", {"workers": 5}, "workers must be an integer from 1 to 4"),
    ("fault_timeline", {"workers": 1}, "workers must be an integer from 2 to 4"),
    ("fault_timeline", {"killed": 2}, "killed must be an integer from 0 to 1"),
    ("fault_timeline", {"noticed_s": 0}, "noticed_s must be a positive number"),
    ("fault_timeline", {"kill_s": 10.0, "restart_s": 5.0, "end_s": 20.0}, "the times must come in order"),
    ("fault_timeline", {"kill_s": 10.0, "backup_s": 11.0}, "the times must come in order"),
])
def test_arguments_that_cannot_be_drawn_are_refused(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(diagrams, name)(**kwargs)
