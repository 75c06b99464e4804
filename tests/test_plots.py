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


def test_bar_chart_labels_each_bar():
    fig = plots.plot_bars({"1 device": 450.0, "2 devices": 812.4}, ylabel="images/s")
    (ax,) = fig.axes
    assert [p.get_height() for p in ax.patches] == [450.0, 812.4]
    assert [t.get_text() for t in ax.texts] == ["450", "812"]
    with pytest.raises(ValueError):
        plots.plot_bars({}, ylabel="x")
