import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from course_utils import plots  # noqa: E402


def test_history_plot_has_train_and_validation_curves():
    history = {"loss": [1.0, 0.5], "val_loss": [1.1, 0.7], "accuracy": [0.5, 0.8]}
    fig = plots.plot_history(history, ["loss", "accuracy"], title="t")
    loss_ax, acc_ax = fig.axes
    assert [line.get_label() for line in loss_ax.lines] == ["train loss", "validation loss"]
    assert list(loss_ax.lines[1].get_ydata()) == [1.1, 0.7]
    assert [line.get_label() for line in acc_ax.lines] == ["train accuracy"]


def test_history_plot_accepts_keras_history_and_reports_missing_metric():
    class History:
        history = {"loss": [1.0]}

    assert len(plots.plot_history(History(), ["loss"]).axes) == 1
    with pytest.raises(KeyError, match="accuracy"):
        plots.plot_history(History(), ["loss", "accuracy"])


def test_median_bars_with_min_max_whiskers():
    groups = {"batch 64": {"naive": [100.0, 50.0, 110.0], "tuned": [120.0, 130.0, 125.0]},
              "batch 8": {"naive": [10.0, 12.0, 11.0], "tuned": [30.0, 28.0, 29.0]}}
    fig = plots.plot_medians(groups, ylabel="images/s")
    left, right = fig.axes
    assert [p.get_height() for p in left.patches] == [100.0, 125.0]
    assert [p.get_height() for p in right.patches] == [11.0, 29.0]
    assert [t.get_text() for t in left.texts] == ["100", "125"] and left.get_title() == "batch 64"
    whiskers = left.collections[0].get_segments()  # error bars: min to max around each median
    assert [(seg[0][1], seg[1][1]) for seg in whiskers] == [(50.0, 110.0), (120.0, 130.0)]
    with pytest.raises(ValueError):
        plots.plot_medians({}, ylabel="x")


def test_ps_cluster_diagram_has_a_box_per_task():
    fig = plots.plot_ps_cluster(3, 2)
    boxes = [t.get_text().splitlines()[0] for t in fig.axes[0].texts if t.get_bbox_patch() is not None]
    assert boxes == ["coordinator (chief)", "worker 0", "worker 1", "worker 2", "ps 0", "ps 1"]
    with pytest.raises(ValueError, match="at least one worker and one ps"):
        plots.plot_ps_cluster(2, 0)


def test_measured_vs_predicted_draws_medians_whiskers_and_dashed_predictions():
    fig = plots.plot_measured_vs_predicted([32, 128], {"slow": [[1.0, 3.0, 2.0], [5.0, 6.0, 7.0]]},
                                           {"slow": [1.5, 6.5]}, xlabel="batch", ylabel="images/s")
    ax = fig.axes[0]
    measured, predicted = ax.lines[0], ax.lines[-1]
    assert list(measured.get_ydata()) == [2.0, 6.0] and list(predicted.get_ydata()) == [1.5, 6.5]
    assert predicted.get_linestyle() == "--" and ax.get_xscale() == "log"
    whiskers = ax.collections[0].get_segments()
    assert [(seg[0][1], seg[1][1]) for seg in whiskers] == [(1.0, 3.0), (5.0, 7.0)]
    with pytest.raises(ValueError, match="same series"):
        plots.plot_measured_vs_predicted([1], {"a": [[1.0]]}, {"b": [1.0]}, xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="one point per x"):
        plots.plot_measured_vs_predicted([1, 2], {"a": [[1.0]]}, {"a": [1.0]}, xlabel="x", ylabel="y")


def test_stacked_bars_put_each_segment_after_the_ones_before_in_every_bar():
    fig = plots.plot_stacked({"one": {"a": 2.0, "b": 1.0}, "two": {"b": 3.0, "c": 0.5}}, xlabel="ms per step")
    ax = fig.axes[0]
    spans = sorted((round(p.get_y(), 3), p.get_x(), p.get_width()) for p in ax.patches if p.get_width() > 0)
    one_y, two_y = sorted({y for y, _, _ in spans})
    assert [(x, w) for y, x, w in spans if y == one_y] == [(0.0, 2.0), (2.0, 1.0)]
    assert [(x, w) for y, x, w in spans if y == two_y] == [(0.0, 3.0), (3.0, 0.5)]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="at least one bar"):
        plots.plot_stacked({}, xlabel="x")


CURES = ["naive", "+ parallel map, cache, prefetch", "+ batch 256/replica, LR x4", "+ steps_per_execution 8",
         "+ XLA", "+ mixed_bfloat16"]


def test_long_variant_names_are_wrapped_and_their_labels_do_not_overlap():
    rates = {name: [1000.0 + 300 * k, 1100.0 + 300 * k, 1050.0 + 300 * k] for k, name in enumerate(CURES)}
    fig = plots.plot_medians({"cures, cumulative": rates}, ylabel="images/s")
    ax = fig.axes[0]
    labels = ax.get_xticklabels()
    assert [t.get_text().replace("\n", " ") for t in labels] == CURES  # wrapped at spaces, nothing lost
    assert "+ steps_per_execution\n8" in [t.get_text() for t in labels]  # a lone "+" keeps to its word
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert all(fig.bbox.contains(*b.p0) and fig.bbox.contains(*b.p1) for b in boxes), "labels inside the figure"


def test_muted_variants_are_grey_with_a_legend_and_notes_are_written_on_their_bars():
    import io

    from matplotlib.colors import to_hex

    rates = {name: [1000.0 + 300 * k, 1100.0 + 300 * k] for k, name in enumerate(CURES)}
    notes = {name: f"acc 0.{800 + k}" for k, name in enumerate(CURES)}
    fig = plots.plot_medians({"cures": rates}, ylabel="images/s", muted={"+ XLA", "naive"}, notes=notes)
    ax = fig.axes[0]
    colors = [to_hex(p.get_facecolor()) for p in ax.patches]
    assert colors == [to_hex(plots.MUTED) if n in ("+ XLA", "naive") else to_hex("tab:blue") for n in CURES]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["not told apart from the row before"]
    texts = [t.get_text() for t in ax.texts]
    assert texts[:6] == [f"{1050 + 300 * k}" for k in range(6)] and texts[6:] == list(notes.values())
    other = plots.plot_medians({"cures": rates}, ylabel="images/s", muted=["+ XLA"], muted_label="not told apart")
    assert [t.get_text() for t in other.axes[0].get_legend().get_texts()] == ["not told apart"]
    assert plots.plot_medians({"cures": rates}, ylabel="images/s").axes[0].get_legend() is None  # nothing muted
    with pytest.raises(KeyError, match="no group has"):
        plots.plot_medians({"cures": rates}, ylabel="images/s", muted={"+ XLB"})
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG")
