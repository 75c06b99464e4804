import io
import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from course_utils import diagrams  # noqa: E402

DIAGRAMS = {
    "strong_vs_weak_scaling": diagrams.strong_vs_weak_scaling,
    "mirrored_step_timeline": diagrams.mirrored_step_timeline,
    "allreduce": diagrams.allreduce,
    "global_batch_loss": diagrams.global_batch_loss,
    "ring_allreduce": diagrams.ring_allreduce,
    "mirrored_variable": diagrams.mirrored_variable,
    "sync_vs_parameter_servers": diagrams.sync_vs_parameter_servers,
}
# Each diagram at its defaults and at the extremes its arguments allow: still readable, still no text on text.
VARIANTS = [
    *((name, {}) for name in DIAGRAMS),
    ("strong_vs_weak_scaling", {"replicas": 1, "global_batch": 32, "per_replica_batch": 32}),
    ("strong_vs_weak_scaling", {"replicas": 16, "global_batch": 1024, "per_replica_batch": 128}),
    ("strong_vs_weak_scaling", {"replicas": 16, "global_batch": 320, "per_replica_batch": 64}),
    ("strong_vs_weak_scaling", {"replicas": 2, "global_batch": 32, "per_replica_batch": 4096, "fixed_share": 0.05}),
    ("strong_vs_weak_scaling", {"replicas": 8, "global_batch": 4096, "per_replica_batch": 1, "fixed_share": 0.95}),
    ("mirrored_step_timeline", {"replicas": 1}),
    ("mirrored_step_timeline", {"replicas": 16}),
    ("mirrored_step_timeline", {"replicas": 4, "input_ms": 1.5, "compute_ms": [30, 31, 29, 36], "allreduce_ms": 8,
                                "update_ms": 2}),
    ("mirrored_step_timeline", {"replicas": 3, "input_ms": 0.2, "compute_ms": 400, "allreduce_ms": 0.5}),
    ("mirrored_step_timeline", {"replicas": 16, "allreduce_ms": 7}),
    ("allreduce", {"replicas": 1}),
    ("allreduce", {"replicas": 16}),
    ("global_batch_loss", {"replicas": 1, "per_replica_batch": 1}),
    ("global_batch_loss", {"replicas": 16, "per_replica_batch": 8}),
    ("ring_allreduce", {"workers": 2}),
    ("ring_allreduce", {"workers": 8}),
    ("mirrored_variable", {"replicas": 1}),
    ("mirrored_variable", {"replicas": 16, "value": "[1.5, 2.25, 3.0]"}),
    ("mirrored_variable", {"replicas": 3, "devices": [f"/job:worker/task:0/device:GPU:{i}" for i in range(3)]}),
    ("sync_vs_parameter_servers", {"workers": 2, "ps": 1}),
    ("sync_vs_parameter_servers", {"workers": 5, "ps": 4}),
    ("sync_vs_parameter_servers", {"workers": 5, "ps": 1}),
]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def shown_texts(fig) -> list[Text]:
    """The texts a reader sees once the figure is drawn: visible and not empty (tick labels, legend included)."""
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def strings(fig) -> list[str]:
    return [t.get_text() for t in shown_texts(fig)]


def overlapping_texts(fig, slack: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of shown texts whose bounding boxes (in pixels) overlap by more than ``slack``."""
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in shown_texts(fig)]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > slack and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > slack]


def outside_figure(fig) -> list[str]:
    width, height = fig.canvas.get_width_height()
    renderer = fig.canvas.get_renderer()
    return [t.get_text() for t in shown_texts(fig) for box in [t.get_window_extent(renderer)]
            if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1]


def test_the_overlap_check_sees_an_overlap():
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "one label")
    ax.text(0.52, 0.5, "another label")
    ax.text(0.1, 0.1, "apart")
    assert overlapping_texts(fig) == [("one label", "another label")]


def assert_readable_png(fig) -> None:
    """Every diagram's floor: no two texts overlap, none leaves the figure, fonts of 9 pt or more, at most 8 in
    wide, a title, and it renders to a PNG of some substance."""
    assert overlapping_texts(fig) == []
    assert outside_figure(fig) == []
    assert min(t.get_fontsize() for t in shown_texts(fig)) >= 9
    assert fig.get_size_inches()[0] <= 8 and fig._suptitle.get_text()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG") and len(png.getvalue()) > 10_000


@pytest.mark.parametrize("name, kwargs", VARIANTS, ids=lambda v: v if isinstance(v, str) else str(v or "defaults"))
def test_readable_no_overlap_and_renders_to_png(name, kwargs):
    fig = DIAGRAMS[name](**kwargs)
    assert_readable_png(fig)
    if not kwargs:
        assert fig.get_size_inches()[1] <= 3.3


def test_strong_vs_weak_scaling_labels_the_sizes():
    fig = diagrams.strong_vs_weak_scaling(replicas=5, global_batch=320, per_replica_batch=320)  # the lesson's call
    texts = strings(fig)
    assert fig.axes[0].get_title() == "Strong scaling: global batch 320 kept"
    assert fig.axes[1].get_title() == "Weak scaling: 320 per replica kept"
    assert texts.count("320 images") == 1 + 6  # strong: the one device; weak: the one device and every replica
    assert sum(t in ("64", "64 images") for t in texts) == 5  # strong: 320 split into 5 pieces of 64
    assert texts.count("fixed cost") == 2  # the first row of each panel
    assert fig.axes[0].get_xlabel() == "each replica: 320 / 5 = 64 images;\nthe fixed cost stays"
    assert fig.axes[1].get_xlabel() == "global batch 5 × 320 = 1,600;\neach step the same length as one device's"
    assert "fixed cost per step: launch, all-reduce, update (illustrative)" in texts  # the legend
    assert "1 device" in texts and "5 replicas" in fig._suptitle.get_text()


def test_strong_vs_weak_scaling_draws_a_row_per_replica():
    for replicas in (1, 2, 8):
        texts = strings(diagrams.strong_vs_weak_scaling(replicas, global_batch=64 * replicas))
        assert [t for t in texts if t.startswith("replica ")] == [f"replica {i}" for i in range(replicas)]


def scaling_bars(ax) -> list[tuple]:
    """One panel's bars, top row first: (fixed-cost segment, work segment) each."""
    def kind(name):
        return sorted((p for p in ax.patches if matplotlib.colors.to_hex(p.get_facecolor()) == diagrams.COLORS[name]),
                      key=lambda p: p.get_y())

    fixed, work = kind("fixed"), kind("forward")
    assert len(fixed) == len(work) == len(ax.patches) / 2
    return list(zip(fixed, work))


SCALING_CASES = [({"replicas": 5, "global_batch": 320, "per_replica_batch": 320}, 0.3),
                 ({"replicas": 16, "global_batch": 320, "per_replica_batch": 64}, 0.3),
                 ({"replicas": 3, "global_batch": 96, "per_replica_batch": 200, "fixed_share": 0.6}, 0.6),
                 ({"replicas": 1, "global_batch": 32, "fixed_share": 0.1}, 0.1)]


@pytest.mark.parametrize("kwargs, share", SCALING_CASES)
def test_strong_vs_weak_scaling_one_x_scale_and_a_fixed_cost_in_every_row(kwargs, share):
    fig = diagrams.strong_vs_weak_scaling(**kwargs)
    strong, weak = fig.axes
    assert strong.get_xlim() == weak.get_xlim()  # the same scale: bars compare across the panels
    bars = scaling_bars(strong) + scaling_bars(weak)
    assert len(bars) == 2 * (kwargs["replicas"] + 1)  # one device and each replica, in both panels
    width = bars[0][0].get_width()
    for fixed, work in bars:
        assert fixed.get_x() == 0 and fixed.get_width() == pytest.approx(width)  # the same fixed cost everywhere
        assert work.get_x() == pytest.approx(width)  # the work follows it
        assert fixed.get_y() == work.get_y()
        assert work.get_x() + work.get_width() <= strong.get_xlim()[1]
    one_device = bars[0][1].get_width() + width
    assert width / one_device == pytest.approx(share)  # a share of one device's step on the global batch


@pytest.mark.parametrize("kwargs, share", SCALING_CASES)
def test_strong_vs_weak_scaling_work_proportional_to_images(kwargs, share):
    fig = diagrams.strong_vs_weak_scaling(**kwargs)
    n, batch = kwargs["replicas"], kwargs["global_batch"]
    each = kwargs.get("per_replica_batch", batch)  # weak scaling keeps the one device's batch by default
    images = [batch] + [batch // n] * n + [each] * (n + 1)
    widths = [work.get_width() for ax in fig.axes for _, work in scaling_bars(ax)]
    assert [w / widths[0] for w in widths] == pytest.approx([i / batch for i in images])
    assert any(f"{batch // n} images" == t or str(batch // n) == t for t in strings(fig))


def test_strong_vs_weak_scaling_labels_thin_bars_beside_them():
    fig = diagrams.strong_vs_weak_scaling(replicas=16, global_batch=320, per_replica_batch=64)
    texts = strings(fig)
    assert texts.count("20 images") == 16  # too thin to hold their count: it is written right of the bar
    assert "320 images" in texts and texts.count("fixed cost") == 2  # rows compressed, but still room inside
    renderer = fig.canvas.get_renderer()
    beside = [t.get_window_extent(renderer) for t in shown_texts(fig) if t.get_text() == "20 images"]
    ends = [work.get_window_extent(renderer).x1 for _, work in scaling_bars(fig.axes[0])[1:]]
    assert all(box.x0 >= end for box, end in zip(sorted(beside, key=lambda b: -b.y0), ends))


def test_strong_vs_weak_scaling_weak_keeps_the_global_batch_per_replica_by_default():
    fig = diagrams.strong_vs_weak_scaling(replicas=4, global_batch=320)
    assert fig.axes[1].get_title() == "Weak scaling: 320 per replica kept"
    assert "global batch 4 × 320 = 1,280" in fig.axes[1].get_xlabel()


@pytest.mark.parametrize("kwargs, message", [
    ({"replicas": 0}, "replicas must be an integer from 1"),
    ({"replicas": 2.0}, "replicas must be an integer"),
    ({"replicas": 17}, "from 1 to 16"),
    ({"global_batch": 0}, "global_batch must be an integer of at least 1"),
    ({"per_replica_batch": -4}, "per_replica_batch must be an integer of at least 1"),
    ({"per_replica_batch": 0}, "per_replica_batch"),
    ({"per_replica_batch": 2.5}, "per_replica_batch"),
    ({"per_replica_batch": True}, "per_replica_batch"),
    ({"replicas": 3, "global_batch": 320}, "does not split evenly across 3 replicas"),
    ({"fixed_share": 0}, "fixed_share must be a number greater than 0 and less than 1"),
    ({"fixed_share": 1}, "fixed_share"),
    ({"fixed_share": -0.1}, "fixed_share"),
    ({"fixed_share": float("nan")}, "fixed_share"),
    ({"fixed_share": "0.3"}, "fixed_share"),
    ({"fixed_share": None}, "fixed_share"),
    ({"fixed_share": True}, "fixed_share"),
])
def test_strong_vs_weak_scaling_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.strong_vs_weak_scaling(**kwargs)


def test_mirrored_step_timeline_illustrative_by_default():
    fig = diagrams.mirrored_step_timeline()
    texts = strings(fig)
    assert "illustrative durations" in fig._suptitle.get_text()
    assert [t for t in texts if t.startswith("replica ")] == ["replica 0", "replica 1"]
    for label in ("input", "forward", "backward", "wait", "all-reduce", "update", "input pipeline"):
        assert label in texts, label
    assert any("every replica waits for the slowest" in t for t in texts)
    assert any("prefetch" in t for t in texts)
    assert not any(" ms" in t for t in texts if t != "time (ms)")  # no number passed, none claimed
    faint = [p for p in fig.axes[0].patches if p.get_alpha() is not None and p.get_alpha() < 1]
    assert len(faint) == 1  # the next batch, prepared while this step computes


def test_mirrored_step_timeline_writes_given_durations_on_the_bars():
    fig = diagrams.mirrored_step_timeline(3, input_ms=5, compute_ms=[30, 40, 35], allreduce_ms=12, update_ms=6)
    texts = strings(fig)
    assert "durations as given" in fig._suptitle.get_text()
    # narrow bars keep the number and drop the name (the legend names the colour); a label may take two lines
    # (which variant fits depends on matplotlib's text metrics: 3.7 picks "input\n5 ms" where 3.11 picks "5 ms")
    flat = [t.replace("\n", " ") for t in texts]
    assert sum(t in ("input 5 ms", "in 5 ms", "5 ms") for t in flat) == 3
    assert sum(t in ("update 6 ms", "upd 6 ms", "6 ms") for t in flat) == 3
    assert "all-reduce 12 ms" in flat
    assert {"forward + backward 30 ms", "forward + backward 40 ms", "forward + backward 35 ms"} <= set(texts)
    assert texts.count("wait") == 2  # the two faster replicas wait for the slowest
    assert [t for t in texts if t.startswith("replica ")] == ["replica 0", "replica 1", "replica 2"]
    allreduce = [p for p in fig.axes[0].patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb(
        diagrams.COLORS["allreduce"])]
    assert len(allreduce) == 1  # one bar across all replicas
    mixed = diagrams.mirrored_step_timeline(2, allreduce_ms=7)
    assert "given ms on bars, rest illustrative" in mixed._suptitle.get_text()
    assert "all-reduce\n7 ms" in strings(mixed)


@pytest.mark.parametrize("kwargs, message", [
    ({"replicas": 0}, "replicas must be an integer from 1 to 16"),
    ({"input_ms": 0}, "input_ms must be a positive number"),
    ({"allreduce_ms": float("nan")}, "allreduce_ms"),
    ({"update_ms": "3"}, "update_ms"),
    ({"compute_ms": -1}, "compute_ms"),
    ({"replicas": 2, "compute_ms": [10, 20, 30]}, "one number or one per replica"),
])
def test_mirrored_step_timeline_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.mirrored_step_timeline(**kwargs)


def test_allreduce_before_and_after():
    texts = strings(diagrams.allreduce(3))
    assert [t for t in texts if t.startswith("replica ")] == ["replica 0", "replica 1", "replica 2"]
    assert {"g0", "g1", "g2"} <= set(texts) and texts.count("g0+g1+g2") == 3
    assert "all-reduce\n(sum)" in texts
    assert strings(diagrams.allreduce(6)).count("g0+…+g5") == 6
    with pytest.raises(ValueError, match="replicas"):
        diagrams.allreduce(0)


def test_global_batch_loss_divides_by_the_global_batch():
    fig = diagrams.global_batch_loss(replicas=2, per_replica_batch=4)
    texts = strings(fig)
    assert [t for t in texts if t.startswith("replica ")] == ["replica 0", "replica 1"]
    assert [t for t in texts if t.startswith("ℓ")] == [f"ℓ{i}" for i in range(8)]
    assert "(ℓ0+ℓ1+ℓ2+ℓ3) / 8" in texts and "(ℓ4+ℓ5+ℓ6+ℓ7) / 8" in texts  # the global batch, not 4
    assert texts.count("g0+g1") == 2 and any("÷ 4 would make it 2× too big" in t for t in texts)
    assert "(ℓ0+…+ℓ4) / 15" in strings(diagrams.global_batch_loss(3, 5))
    for kwargs in ({"replicas": 0}, {"per_replica_batch": 0}, {"per_replica_batch": 9}):
        with pytest.raises(ValueError, match="must be an integer"):
            diagrams.global_batch_loss(**kwargs)


def test_global_batch_loss_shows_the_global_batch_split():
    texts = strings(diagrams.global_batch_loss(replicas=3, per_replica_batch=2))
    assert "the global batch (6), split:\nper-example losses" in texts
    assert [t for t in texts if t.startswith("ℓ")] == [f"ℓ{i}" for i in range(6)]  # each example in one replica


def test_mirrored_variable_copies_and_one_update():
    fig = diagrams.mirrored_variable(replicas=2, devices=["CPU:0", "CPU:1"])
    texts = strings(fig)
    assert "MirroredVariable on 2 replicas" in fig._suptitle.get_text()
    assert [t for t in texts if t.startswith("replica ")] == ["replica 0", "replica 1"]
    assert "Mirrored-\nVariable w" in texts  # the one variable
    assert [t for t in texts if t.startswith("CPU:")] == ["CPU:0: w = [1, 2]", "CPU:1: w = [1, 2]"]  # equal copies
    assert {"g0", "g1", "all-\nreduce"} <= set(texts)
    assert texts.count("w − η·(g0+g1)") == 2  # the same update on every copy
    assert any("copies start equal and stay equal" in t for t in texts)
    default = strings(diagrams.mirrored_variable(3, value="[0.5]"))
    assert [t for t in default if t.startswith("GPU:")] == [f"GPU:{i}: w = [0.5]" for i in range(3)]
    assert default.count("w − η·(g0+g1+g2)") == 3


def test_mirrored_variable_colours_the_copies_as_variables():
    fig = diagrams.mirrored_variable(4)
    variable = matplotlib.colors.to_rgb(diagrams.COLORS["variable"])
    assert sum(p.get_facecolor()[:3] == variable for p in fig.axes[0].patches) == 1 + 4 + 4  # one, copies, updated


@pytest.mark.parametrize("kwargs, message", [
    ({"replicas": 0}, "replicas must be an integer from 1 to 16"),
    ({"replicas": 2, "devices": ["GPU:0"]}, "one name per replica"),
])
def test_mirrored_variable_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.mirrored_variable(**kwargs)


def test_sync_vs_parameter_servers_side_by_side():
    fig = diagrams.sync_vs_parameter_servers(workers=3, ps=2)
    texts = strings(fig)
    assert "Synchronous: all-reduce" in texts and "Asynchronous: parameter servers" in texts
    # left: every worker holds all the variables and sends its gradient to one all-reduce
    assert [t for t in texts if t.startswith("worker ")] == [f"worker {i}" for i in range(3)] * 2
    assert texts.count("all variables") == 3 and {"g0", "g1", "g2", "all-\nreduce"} <= set(texts)
    # right: the variables sharded over the ps tasks, a coordinator, workers pulling and pushing on their own
    assert "ps 0: variables,\nshard 1 of 2" in texts and "ps 1: variables,\nshard 2 of 2" in texts
    assert "coordinator" in texts
    assert any("pull variables" in t and "push gradients" in t for t in texts)
    assert any("A slow worker delays no one" in t.replace("\n", " ") for t in texts)
    assert any("waits for all" in t.replace("\n", " ") for t in texts)
    sharded = strings(diagrams.sync_vs_parameter_servers(workers=4, ps=4))
    assert [t for t in sharded if t.startswith("ps ")] == [f"ps {i}\nshard {i + 1}/4" for i in range(4)]


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": 1}, "workers must be an integer from 2 to 5"),
    ({"workers": 6}, "workers"),
    ({"ps": 0}, "ps must be an integer from 1 to 4"),
    ({"ps": 2.0}, "ps"),
])
def test_sync_vs_parameter_servers_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagrams.sync_vs_parameter_servers(**kwargs)


def test_ring_allreduce_phases_and_traffic():
    fig = diagrams.ring_allreduce(4)
    texts = strings(fig)
    assert texts.count("w0") == 2 and texts.count("w3") == 2 and "w4" not in texts  # in the ring, by the grid
    assert "reduce-scatter\n3 steps" in texts and "all-gather\n3 steps" in texts
    assert any("2(N−1)/N = 2·3/4 = 1.5×" in t for t in texts)
    assert texts.count("Σ") == 4 + 16  # after reduce-scatter one chunk per worker, after all-gather all
    assert any("2·7/8 = 1.75×" in t for t in strings(diagrams.ring_allreduce(8)))
    with pytest.raises(ValueError, match="workers must be an integer from 2 to 8"):
        diagrams.ring_allreduce(1)


def test_one_colour_per_kind_of_work_across_diagrams():
    def colours(fig):
        return {matplotlib.colors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches
                if p.get_facecolor()[3] > 0}

    kinds = {matplotlib.colors.to_hex(c) for c in diagrams.COLORS.values()}
    for name, make in DIAGRAMS.items():
        assert colours(make()) - kinds - {"#ffffff"} == set(), name  # white: the ring's worker nodes
    assert matplotlib.colors.to_hex(diagrams.COLORS["allreduce"]) in colours(diagrams.ring_allreduce())
    assert matplotlib.colors.to_hex(diagrams.COLORS["allreduce"]) in colours(diagrams.allreduce())
