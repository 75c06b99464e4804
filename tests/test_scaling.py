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
