import itertools

import pytest

from course_utils import waterfall
from course_utils.waterfall import Run


def test_runs_are_interleaved_and_timed_whole_with_their_epochs(monkeypatch):
    clock = itertools.count()
    monkeypatch.setattr(waterfall.time, "perf_counter", lambda: float(next(clock)))
    order = []

    def variant(name, epochs):
        def run():
            order.append(name)
            next(clock)  # the run takes one more tick than its start and stop readings
            return epochs
        return run

    timed_itself = Run(7.0, (3.0, 3.0))
    runs = waterfall.interleaved_runs({"a": variant("a", [0.5, 0.25]), "b": variant("b", None),
                                       "c": lambda: timed_itself}, rounds=2)
    assert order == ["a", "b", "a", "b"]
    assert runs["c"] == [timed_itself, timed_itself]  # its own timer, as the code it reproduces timed it
    assert [r.seconds for r in runs["a"]] == [2.0, 2.0]
    assert runs["a"][0].epochs == (0.5, 0.25) and runs["b"][0].epochs == ()
    assert runs["a"][0].setup == pytest.approx(1.25)
    with pytest.raises(ValueError, match="rounds >= 1"):
        waterfall.interleaved_runs({}, rounds=0)


def test_the_garbage_collector_is_off_during_each_run_and_back_on_after_a_failing_one():
    import gc

    seen = []
    runs = waterfall.interleaved_runs({"a": lambda: seen.append(gc.isenabled())}, rounds=2)
    assert seen == [False, False] and gc.isenabled() and len(runs["a"]) == 2

    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        waterfall.interleaved_runs({"b": fails}, rounds=1)
    assert gc.isenabled()


def test_shuffled_rounds_each_run_every_variant_once_in_orders_of_their_own():
    order = []
    variants = {name: (lambda name=name: order.append(name)) for name in "abcdef"}
    runs = waterfall.interleaved_runs(variants, rounds=4, shuffle=0)
    rounds = [order[i:i + 6] for i in range(0, 24, 6)]
    assert all(sorted(r) == list("abcdef") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1  # not the same order every round
    assert all(len(v) == 4 for v in runs.values())
    order.clear()
    waterfall.interleaved_runs(variants, rounds=4, shuffle=0)
    assert [order[i:i + 6] for i in range(0, 24, 6)] == rounds  # the seed decides: the same orders again


def test_first_epoch_extra_is_measured_against_the_median_of_the_others():
    assert Run(10.0, (4.0, 1.0, 2.0, 1.5)).first_epoch_extra == pytest.approx(2.5)
    with pytest.raises(ValueError, match="at least 2 epochs"):
        _ = Run(1.0, (1.0,)).first_epoch_extra


def test_a_run_s_time_outside_the_steps_splits_into_epoch_boundaries_and_the_rest():
    run = Run(10.0, epochs=(3.0, 2.0, 2.0), boundaries=(0.5, 1.5, 0.25))
    assert run.setup == pytest.approx(3.0)  # everything outside the steps
    assert run.outside_epochs == pytest.approx(0.75)  # before the first epoch and after the last
    assert Run(10.0, (3.0, 2.0)).outside_epochs == pytest.approx(5.0)  # no boundaries reported: all of it
    with pytest.raises(ValueError, match="one per epoch"):
        Run(10.0, (3.0, 2.0), boundaries=(0.5,))


def test_without_its_iterator_waits_a_run_keeps_its_steps_and_the_rest_of_its_boundaries():
    run = Run(10.0, epochs=(3.0, 2.0, 2.0), boundaries=(0.5, 1.5, 0.25), waits=(0.5, 1.0, 0.0))
    calm = run.without_waits()
    assert calm.seconds == pytest.approx(8.5)
    assert calm.epochs == run.epochs and calm.boundaries == pytest.approx((0.0, 0.5, 0.25))
    assert calm.outside_epochs == pytest.approx(run.outside_epochs)  # before the first epoch, after the last: kept
    assert calm.waits == ()
    assert Run(4.0, (1.0, 1.0), (0.5, 0.5)).without_waits() == Run(4.0, (1.0, 1.0), (0.5, 0.5))  # none reported
    with pytest.raises(ValueError, match="one per epoch"):
        Run(10.0, (3.0, 2.0), boundaries=(0.5, 0.5), waits=(0.5,))
    with pytest.raises(ValueError, match="within their epoch boundaries"):
        Run(10.0, (3.0, 2.0), boundaries=(0.5, 0.5), waits=(0.5, 0.75))
    with pytest.raises(ValueError, match="within their epoch boundaries"):
        Run(10.0, (3.0, 2.0), boundaries=(0.5, 0.5), waits=(-0.1, 0.0))
    with pytest.raises(ValueError, match="one per epoch"):  # waits need the boundaries they lie in
        Run(10.0, (3.0, 2.0), waits=(0.1, 0.1))


def test_the_last_wait_after_the_epochs_comes_out_of_the_time_outside_them():
    run = Run(10.0, epochs=(3.0, 2.0), boundaries=(0.5, 1.5), waits=(0.5, 1.0), last_wait=2.0)
    assert run.outside_epochs == pytest.approx(3.0)
    calm = run.without_waits()
    assert calm.seconds == pytest.approx(6.5) and calm.outside_epochs == pytest.approx(1.0)
    assert calm.boundaries == pytest.approx((0.0, 0.5)) and calm.last_wait == 0.0
    with pytest.raises(ValueError, match="within the time outside the epochs"):
        Run(10.0, (3.0, 2.0), boundaries=(0.5, 1.5), last_wait=3.5)
    with pytest.raises(ValueError, match="within the time outside the epochs"):
        Run(10.0, (3.0, 2.0), last_wait=-0.1)
    # parts measured to add up exactly may not, in floats: a last wait equal to the time outside is accepted
    epochs, boundaries, last = (0.1, 0.2), (0.3, 0.7), 0.6
    assert Run(sum(epochs) + sum(boundaries) + last, epochs, boundaries, boundaries, last).without_waits().seconds \
        == pytest.approx(0.3)


def test_saved_runs_read_back_equal_and_in_their_order(tmp_path):
    runs = {"b": [Run(10.5, (3.0, 2.0), (0.5, 1.5), (0.25, 1.0), 1.5), Run(9.0)], "a": [Run(8.0, (4.0, 3.0)), Run(7.5)]}
    waterfall.save_runs(runs, tmp_path / "runs.json")
    back = waterfall.load_runs(tmp_path / "runs.json")
    assert back == runs and list(back) == ["b", "a"]
    assert back["b"][0].without_waits().seconds == pytest.approx(7.75)
    (tmp_path / "other.json").write_text('{"a": [{"seconds": 1.0, "steps": [0.5]}]}')
    with pytest.raises(ValueError, match="fields \\['steps'\\] that a Run does not have"):
        waterfall.load_runs(tmp_path / "other.json")


def test_chain_steps_pair_the_rounds_and_give_the_rule_s_verdict():
    runs = {"base": [Run(10.0), Run(20.0), Run(11.0)],  # a slow spell in round 2 lands on every variant
            "slower": [Run(12.0), Run(22.5), Run(13.0)],
            "same": [Run(12.5), Run(21.0), Run(13.5)]}
    first, second = waterfall.chain_steps(runs, ["base", "slower", "same"])
    assert first.differences == (2.0, 2.5, 2.0) and first.median == 2.0 and first.fastest == 2.0
    assert waterfall.fastest(runs["same"]) == Run(12.5)
    assert "within noise" in first.verdict  # paired differences are clear, but the ranges overlap: no claim
    assert second.before == "slower" and second.median == pytest.approx(0.5)
    assert first.fastest + second.fastest == pytest.approx(12.5 - 10.0)  # fastest differences add up
    apart = {"base": [Run(1.0), Run(1.2)], "cost": [Run(2.0), Run(2.1)], "cure": [Run(0.5), Run(0.6)]}
    cost, cure = waterfall.chain_steps(apart, ["base", "cost", "cure"])
    assert cost.verdict.startswith("costs time") and cure.verdict.startswith("saves time")
    assert "no verdict" in waterfall.compare({"a": [Run(1.0)], "b": [Run(2.0)]}, "b", "a", long=True)
    # ranges wider than max_spread of their medians cannot decide: "cannot tell", not "within noise"
    wide, = waterfall.chain_steps(runs, ["base", "slower"], max_spread=0.25)  # base spans 10/11 of its median
    assert wide.verdict.startswith("cannot tell") and "91%" in wide.verdict
    narrow = {"a": [Run(10.0), Run(10.5)], "b": [Run(10.2), Run(10.4)]}
    assert waterfall.compare(narrow, "b", "a", max_spread=0.25, long=True).startswith("within noise")
    assert "too wide to call them equal" in wide.verdict and "disturbed" not in wide.verdict  # no unmeasured cause
    short = {"a": [Run(0.012), Run(0.015)], "b": [Run(0.030), Run(0.041)]}  # waits of milliseconds: printed in ms
    said = waterfall.compare(short, "b", "a", unit="ms", long=True)
    assert said == "costs time: the ranges separate (30.00-41.00 ms vs 12.00-15.00 ms)"
    edge = {"a": [Run(5.62), Run(6.9412)], "b": [Run(6.9449), Run(7.45)]}  # separate, both ends 6.94 at 2 decimals
    assert "(6.945-7.450 s vs 5.620-6.941 s)" in waterfall.compare(edge, "b", "a", long=True)
    with pytest.raises(ValueError, match="unit is one of"):
        waterfall.compare(short, "b", "a", unit="min", long=True)
    with pytest.raises(ValueError, match="unit is one of"):
        waterfall.compare(short, "b", "a", unit="min")
    with pytest.raises(KeyError, match="no runs for"):
        waterfall.chain_steps(runs, ["base", "missing"])
    with pytest.raises(ValueError, match="not paired"):
        waterfall.chain_steps({"a": [Run(1.0)], "b": [Run(1.0), Run(2.0)]}, ["a", "b"])
    table = waterfall.step_table([first, second])
    assert "+2.00s" in table and "+2.00 to +2.50" in table and "fastest" in table
    assert "(the rule: ranges of whole runs separate)" in table.splitlines()[0]
    assert "(the rule: runs without waits)" in waterfall.step_table([first], rule="runs without waits").splitlines()[0]
    assert "  above 0  " in table.splitlines()[1]  # paired: +2.00 to +2.50
    once = waterfall.chain_steps({"a": [Run(1.0)], "b": [Run(2.0)]}, ["a", "b"])
    assert waterfall.step_table(once).count("1 round") == 1


def test_a_paired_range_on_the_side_its_change_cannot_take_is_marked():
    runs = {"timer at build": [Run(10.0), Run(11.0)], "timer at fit": [Run(10.5), Run(11.2)],  # removes work, yet +
            "+ callback": [Run(10.0), Run(11.0)], "+ other": [Run(10.5), Run(10.8)]}
    steps = waterfall.chain_steps(runs, list(runs))
    table = waterfall.step_table(steps, sign={"timer at fit": -1, "+ callback": +1, "+ other": +1})
    rows = {line.split("  ")[0].strip(): line for line in table.splitlines()[1:4]}
    assert "above 0 !" in rows["timer at fit"]  # +0.50 and +0.20: wholly above, for a change that only removes work
    assert "below 0 !" in rows["+ callback"]  # -0.50 and -0.20: wholly below, for one that only adds
    assert "includes 0" in rows["+ other"] and "!" not in rows["+ other"]  # +0.50 and -0.20
    assert table.splitlines()[-1] == waterfall.IMPOSSIBLE
    assert waterfall.IMPOSSIBLE not in waterfall.step_table(steps)  # no sign given: nothing to mark
    apart = {"base": [Run(10.0), Run(10.1)], "+ callback": [Run(9.0), Run(9.1)], "timer later": [Run(12.0), Run(12.1)]}
    saves, costs = waterfall.chain_steps(apart, list(apart))
    assert saves.verdict.startswith("saves time") and costs.verdict.startswith("costs time")
    marked = waterfall.step_table([saves, costs], sign={"+ callback": +1, "timer later": -1}).splitlines()
    assert "  ! saves time" in marked[1] and "  ! costs time" in marked[2]  # verdicts on the impossible side
    assert "  ! " not in waterfall.step_table([saves, costs], sign={"+ callback": -1, "timer later": +1})
    with pytest.raises(ValueError, match=r"sign takes \+1 \(only adds work\) or -1"):
        waterfall.step_table(steps, sign={"+ other": 2})


def test_the_short_comparison_of_times_gives_medians_their_ratio_and_the_verdict_word():
    runs = {"one device": [Run(4.3), Run(4.4), Run(4.6)], "Mirrored": [Run(9.0), Run(9.2), Run(9.5)],
            "close": [Run(4.2), Run(4.5), Run(4.7)], "wild": [Run(2.0), Run(4.4), Run(8.0)], "once": [Run(4.4)]}
    assert waterfall.compare(runs, "Mirrored", "one device") == \
        "Mirrored vs one device: 2.09x slower (9.2 s vs 4.4 s, ranges separate)"
    assert waterfall.compare(runs, "one device", "Mirrored") == \
        "one device vs Mirrored: 2.09x faster (4.4 s vs 9.2 s, ranges separate)"  # the ratio: Mirrored's over its
    assert waterfall.compare(runs, "close", "one device") == \
        "close vs one device: within noise (4.5 s vs 4.4 s, ranges overlap)"
    assert waterfall.compare(runs, "wild", "one device", 0.25) == \
        "wild vs one device: cannot tell (4.4 s vs 4.4 s, ranges too wide)"
    assert waterfall.compare(runs, "once", "one device") == "once vs one device: no verdict (1 and 3 runs)"
    short = {"a": [Run(0.012), Run(0.015)], "b": [Run(0.030), Run(0.041)]}
    assert waterfall.compare(short, "b", "a", unit="ms") == "b vs a: 2.63x slower (35.5 ms vs 13.5 ms, ranges separate)"
    sides = {name: waterfall.compare_side(runs, name, "one device", 0.25) for name in runs}
    assert sides == {"one device": 0, "Mirrored": 1, "close": 0, "wild": None, "once": None}  # +1: takes longer
    assert waterfall.compare_side(runs, "one device", "Mirrored") == -1
    steps = waterfall.chain_steps(runs, ["one device", "Mirrored"])  # the step table keeps the long verdict
    assert steps[0].verdict == waterfall.compare(runs, "Mirrored", "one device", long=True)
    assert steps[0].verdict.startswith("costs time: the ranges separate")


def _rows():
    return [("what the page timed differently", "timer at fit", -0.4, -0.6, -0.2),
            ("what the page timed differently", "no validation", -1.1, -1.3, -0.9),
            ("the strategy", "all-reduce", 2.3, 1.9, 2.6),
            ("the strategy", "per step (profiled)", 1.2, 0.4, 22.0),  # a whisker 10x the largest bar
            ("the callbacks", "+ PrintLR", 0.05, -0.1, 0.2)]


def test_the_differences_chart_draws_a_bar_per_row_under_its_group_heading():
    import io

    import matplotlib

    matplotlib.use("Agg")
    fig = waterfall.plot_differences(_rows(), title="what the gap is made of")
    ax = fig.axes[0]
    bars = ax.patches
    assert [round(b.get_width(), 6) for b in bars] == [-0.4, -1.1, 2.3, 1.2, 0.05]  # one bar per row, in order
    assert [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars] == \
        [matplotlib.colors.to_hex(c) for c in ["tab:green"] * 2 + ["tab:red"] * 3]  # saves, costs
    ticks = ax.get_yticklabels()
    labels = [t.get_text() for t in ticks]
    assert labels == ["what the page timed differently", "timer at fit", "no validation", "the strategy", "all-reduce",
                      "per step (profiled)", "the callbacks", "+ PrintLR"]
    assert [t.get_text() for t in ticks if t.get_fontweight() == "bold"] == \
        ["what the page timed differently", "the strategy", "the callbacks"]
    assert [b.get_y() + b.get_height() / 2 for b in bars] == pytest.approx([1, 2, 4, 5, 7])  # under their headings
    texts = [t.get_text() for t in ax.texts]
    assert texts[:3] == ["-0.40 s", "-1.10 s", "+2.30 s"] and texts[4] == "+0.05 s"
    assert texts[3] == "+1.20 s (range +0.40 to +22.0)"  # the whisker cut at the edge: its true end written
    assert any(line.get_xdata()[0] == 0 for line in ax.lines)  # the line at zero
    low, high = ax.get_xlim()
    assert high < 11 and low > -3, "the 22 s whisker does not set the scale: the bars (and their texts) do"
    assert ax.get_title() == "what the gap is made of"
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG")
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox
    assert all(inside.contains(*t.get_window_extent(renderer).p1) for t in ax.texts), "every value stays in the figure"


def test_the_differences_chart_rejects_a_reversed_range_and_no_rows():
    with pytest.raises(ValueError, match="low <= high"):
        waterfall.plot_differences([("g", "x", 1.0, 2.0, 0.5)])
    with pytest.raises(ValueError, match="at least one row"):
        waterfall.plot_differences([])
    with pytest.raises(ValueError, match="each row is"):
        waterfall.plot_differences([("x", 1.0, 0.5, 2.0)])


def test_the_waterfall_draws_each_part_from_the_running_total_and_the_remainder():
    import matplotlib

    matplotlib.use("Agg")
    fig = waterfall.plot_waterfall(("one device", 10.0), [("cost", 3.0, 2.0, 4.0), ("saving", -1.0, -2.0, 0.0)],
                                   ("Mirrored", 13.0))
    bars = fig.axes[0].patches
    spans = [(round(b.get_y(), 6), round(b.get_y() + b.get_height(), 6)) for b in bars]
    assert spans == [(0.0, 10.0), (10.0, 13.0), (12.0, 13.0), (12.0, 13.0), (0.0, 13.0)]
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["one device", "cost", "saving", "remainder", "Mirrored"]


def test_a_whisker_is_the_parts_range_even_when_its_value_lies_outside_it():
    import matplotlib

    matplotlib.use("Agg")
    # a fastest-run difference (0.5) outside the range of the paired differences (0.6 to 0.9): it happens
    fig = waterfall.plot_waterfall(("one device", 10.0), [("cost", 0.5, 0.6, 0.9), ("saving", -1.0, -2.0, 0.0)],
                                   ("Mirrored", 9.5))
    lines = next(c for c in fig.axes[0].collections if c.get_segments())
    whiskers = sorted((round(seg[0][0]), round(seg[0][1], 6), round(seg[1][1], 6)) for seg in lines.get_segments())
    assert whiskers == [(1, 10.6, 10.9), (2, 8.5, 10.5)]  # from each part's running total: 10 + range, 10.5 + range
