"""course_utils.scaling: the arithmetic of the 1-vs-N-workers table (the timing itself runs in notebook 05)."""

from __future__ import annotations

import json

import pytest

from course_utils import scaling


@pytest.fixture
def sweep():
    # images/s of all workers together, three rounds each
    return scaling.Scaling({1: {32: [800, 820, 900], 512: [1100, 1000, 1120]},
                            2: {32: [900, 1000, 700], 512: [2000, 1900, 2100]}})


def test_efficiency_is_the_median_speed_up_per_worker(sweep):
    assert sweep.median(1, 32) == 820 and sweep.median(2, 512) == 2000
    assert sweep.efficiency(2, 32) == pytest.approx(900 / 820 / 2)
    assert sweep.efficiency(2, 512) == pytest.approx(2000 / 1100 / 2)
    assert sweep.best(2) == 512


def test_table_reports_medians_ranges_speed_up_and_efficiency(sweep):
    rows = sweep.table().splitlines()
    assert len(rows) == 3 and "efficiency" in rows[0]
    assert rows[1].split()[:3] == ["32", "820", "(800-900)"]
    assert "1.82x" in rows[2] and "91%" in rows[2]


def test_measure_reads_each_launch_result_lines(monkeypatch, tmp_path):
    """measure() alternates 1 and N workers per round and files each RESULT line under its batch."""
    from course_utils import cluster

    launches = []

    def fake_run(script, *, module, workers, threads, show, log_dir, args):
        launches.append(workers)
        log = tmp_path / f"{len(launches)}.log"
        batches = [int(b) for b in args[args.index("--batches") + 1].split(",")]
        log.write_text("noise\n" + "".join(
            scaling.RESULT + json.dumps({"per_worker_batch": b, "images_per_s": 100.0 * workers * len(launches)}) + "\n"
            for b in batches))
        task = cluster.TaskResult("worker 0", 1, log)
        return cluster.RunResult(tasks=[task])

    monkeypatch.setattr(cluster, "run", fake_run)
    result = scaling.measure(workers=2, batches=(16, 64), rounds=2, log_dir=tmp_path)
    assert launches == [1, 2, 1, 2]
    assert result.rates == {1: {16: [100.0, 300.0], 64: [100.0, 300.0]}, 2: {16: [400.0, 800.0], 64: [400.0, 800.0]}}


def test_efficiency_range_takes_the_extremes_of_the_rounds(sweep):
    assert sweep.efficiency_range(2, 32) == pytest.approx((700 / 900 / 2, 1000 / 800 / 2))


def test_trend_is_decided_by_separate_ranges_only(sweep):
    # 32: 39 %-62 %; 512: 85 %-105 %: the ranges separate, so efficiency rises
    assert sweep.trend(2) == [
        "efficiency from per-worker batch 32 to 512 rises: the ranges separate (39%-62% vs 85%-105%)"]
    overlapping = scaling.Scaling({1: {32: [800, 900], 64: [800, 900]}, 2: {32: [1500, 1700], 64: [1600, 1650]}})
    assert "within noise" in overlapping.trend(2)[0]
    falling = scaling.Scaling({1: {32: [800, 810], 64: [800, 810]}, 2: {32: [1600, 1610], 64: [1000, 1010]}})
    assert "falls" in falling.trend(2)[0]


def test_trend_refuses_a_verdict_from_one_size_or_one_round():
    one_size = scaling.Scaling({1: {512: [900, 950]}, 2: {512: [1800, 1850]}})
    one_round = scaling.Scaling({1: {32: [900], 512: [950]}, 2: {32: [1000], 512: [1850]}})
    for sweep in (one_size, one_round):
        (line,) = sweep.trend(2)
        assert line.startswith("efficiency against the per-worker batch: no verdict")


def test_core_ceiling_names_oversubscription():
    assert scaling.core_ceiling(2, 1, 2) == 1.0
    assert scaling.core_ceiling(3, 1, 2) == pytest.approx(2 / 3)
    assert scaling.core_ceiling(2, 2, 2) == 0.5


def test_measure_keeps_the_bare_all_reduce_times_of_the_n_worker_launches(monkeypatch, tmp_path):
    from course_utils import cluster

    def fake_run(script, *, module, workers, threads, show, log_dir, args):
        log = tmp_path / f"{workers}-{len(list(tmp_path.iterdir()))}.log"
        lines = [scaling.RESULT + json.dumps({"per_worker_batch": 64, "images_per_s": 1000.0 * workers})]
        if workers > 1:
            lines.append(scaling.ALLREDUCE + json.dumps({"workers": workers, "seconds": [0.01, 0.03]}))
        log.write_text("\n".join(lines) + "\n")
        return cluster.RunResult(tasks=[cluster.TaskResult("worker 0", 1, log)])

    monkeypatch.setattr(cluster, "run", fake_run)
    result = scaling.measure(workers=2, batches=(64,), rounds=2, log_dir=tmp_path)
    assert result.allreduce_s == {2: [0.01, 0.03, 0.01, 0.03]}


def test_account_splits_the_n_worker_step_into_one_workers_step_the_all_reduce_and_the_rest():
    sweep = scaling.Scaling({1: {100: [1000.0]}, 2: {100: [1600.0]}}, {2: [0.010, 0.020, 0.030]})
    parts = sweep.account(2, 100)
    assert parts["one"] == pytest.approx(100.0) and parts["many"] == pytest.approx(125.0)  # ms per step
    assert parts["all_reduce"] == pytest.approx(20.0) and parts["rest"] == pytest.approx(5.0)
    assert parts["efficiency_if_only_all_reduce"] == pytest.approx(100 / 120)
