"""course_utils.ps_diagrams (re-exported by course_utils.diagrams): what notebook 06 draws of parameter servers."""


import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_diagrams import assert_readable_png, strings  # noqa: E402

from course_utils import diagrams, ps_diagrams  # noqa: E402

VARIANTS = [
    ("variable_placement", {}),
    ("variable_placement", {"before": ps_diagrams.round_robin(ps=1), "after": ps_diagrams.round_robin(ps=1)}),
    ("variable_placement", {"before": ps_diagrams.round_robin(ps=4), "after": ps_diagrams.round_robin(
        ps=4, split="dense/kernel", shift=3)}),
    ("variable_placement", {"before": [("embedding", 0, 25_600.0), ("dense/kernel", 1, 1.0)],
                            "after": ps_diagrams.round_robin([("embedding", 25_600.0), ("dense/kernel", 1.0)], ps=2,
                                                             split="embedding")}),
    ("async_timeline", {}),
    ("async_timeline", {"compute": (1.0,)}),
    ("async_timeline", {"compute": (1.0, 1.2, 2.0, 3.0), "horizon": 8.0}),
    ("async_timeline", {"compute": (0.3, 0.5), "horizon": 4.0}),
]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("name, kwargs", VARIANTS, ids=lambda v: v if isinstance(v, str) else str(v or "defaults"))
def test_readable_no_overlap_and_renders_to_png(name, kwargs):
    fig = getattr(diagrams, name)(**kwargs)
    assert_readable_png(fig)


def test_placement_labels_each_server_its_total_and_the_shards():
    texts = strings(diagrams.variable_placement())
    assert texts.count("ps 0") == texts.count("ps 1") == 2  # a column per ps in each panel
    assert "dense/kernel\n9.44 MB" in texts  # before: the big kernel whole, on ps 0
    assert "dense/kernel part 0\n4.72 MB" in texts and "dense/kernel part 1\n4.72 MB" in texts  # after: split
    assert "9.51 MB" in texts and "4 small variables:\n0.68 kB in all" in texts  # the totals: nearly everything on ps 0
    assert "round robin (no partitioner)" in texts and "with a partitioner" in texts


def test_round_robin_places_in_turn_and_splits_one_variable():
    placed = ps_diagrams.round_robin(ps=2)
    assert [w for _, w, _ in placed] == [0, 1] * 4  # kernels on ps 0, biases on ps 1
    split = ps_diagrams.round_robin(ps=2, split="dense/kernel", shift=3)
    parts = [(n, w) for n, w, _ in split if n.startswith("dense/kernel")]
    assert parts == [("dense/kernel/part_0", 1), ("dense/kernel/part_1", 0)]  # tf_keras's three counters: shift 3
    assert sum(mb for *_, mb in split) == pytest.approx(sum(mb for *_, mb in placed))


def test_placement_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="beyond the 1 drawn"):
        diagrams.variable_placement(ps=1)
    with pytest.raises(ValueError, match="must be a number >= 0"):
        diagrams.variable_placement(before=[("w", 0, -1.0)])
    with pytest.raises(ValueError, match="no variables"):
        diagrams.variable_placement(after=[])


def test_async_steps_count_the_other_workers_updates():
    steps = ps_diagrams.async_steps((1.0, 2.5), horizon=7.0)
    slow = [s for s in steps if s[0] == 1]
    assert [s[4] for s in slow] == [2, 2]  # more than WORKERS - 1 = 1: the fast worker updates twice meanwhile
    assert all(s[4] <= 1 for s in steps if s[0] == 0)
    assert ps_diagrams.async_steps((1.0,), horizon=4.0)[-1][4] == 0  # alone: never stale


def test_async_timeline_labels_rows_versions_and_staleness():
    fig = diagrams.async_timeline()
    texts = strings(fig)
    assert "worker 0" in texts and "worker 1" in texts and "ps version" in texts
    assert "read v0, stale 2" in texts and "v0" in texts
    assert {"pull the variables", "forward + backward", "push: update on the ps"} <= set(texts)
    assert any(t.startswith("Staleness: updates applied by the other workers") for t in texts)
    with pytest.raises(ValueError, match="compute time"):
        diagrams.async_timeline(compute=(1.0, 0))


def test_async_timeline_labels_every_version_even_a_short_one():
    texts = strings(diagrams.async_timeline())  # v2 lasts 0.2 units: too short for its label inside its box
    assert {f"v{v}" for v in range(8)} <= set(texts)
    assert "v6" not in strings(diagrams.async_timeline(compute=(0.3, 0.5), horizon=4.0))  # two updates at once
