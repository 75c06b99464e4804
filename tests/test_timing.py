import time

import pytest

from course_utils.timing import Stopwatch, interleaved_rates, median, spread_table, throughput


def test_stopwatch_measures_elapsed_time():
    t0 = time.perf_counter()
    with Stopwatch() as sw:
        time.sleep(0.05)
    outer = time.perf_counter() - t0
    # sleep never returns early, and the stopwatch's span lies inside the one measured around it (same clock)
    assert 0.049 <= sw.seconds <= outer
    again = Stopwatch().start()
    assert again.stop() >= 0
    with pytest.raises(RuntimeError, match="before start"):
        Stopwatch().stop()


def test_throughput():
    assert throughput(1000, 2.0) == 500.0
    with pytest.raises(ValueError):
        throughput(10, 0)
    with pytest.raises(ValueError):
        throughput(-1, 1.0)


def test_interleaved_rates_warm_up_then_alternate(monkeypatch):
    clock, calls = [0.0], []
    monkeypatch.setattr("course_utils.timing.time.perf_counter", lambda: clock[0])

    def takes(name, seconds, warmup_seconds):
        def run_once():
            clock[0] += warmup_seconds if name not in calls else seconds  # the first run traces: slow
            calls.append(name)
        return run_once

    variants = {"a": takes("a", 1.0, 50.0), "b": takes("b", 2.0, 50.0)}
    rates = interleaved_rates(variants, examples=10, rounds=3, warmup=1)
    assert calls == ["a", "b"] + ["a", "b"] * 3
    # each run timed alone (b's time is not a's), the slow warm-up runs not at all
    assert rates == {"a": [10.0, 10.0, 10.0], "b": [5.0, 5.0, 5.0]}
    with pytest.raises(ValueError, match="rounds"):
        interleaved_rates(variants, examples=10, rounds=0)


def test_interleaved_rates_with_an_example_count_per_variant(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("course_utils.timing.time.perf_counter", lambda: clock[0])

    def takes(seconds):
        return lambda: clock.__setitem__(0, clock[0] + seconds)

    variants = {"small": takes(1.0), "large": takes(2.0)}
    rates = interleaved_rates(variants, examples={"small": 10, "large": 40}, rounds=2, warmup=0)
    assert rates == {"small": [10.0, 10.0], "large": [20.0, 20.0]}
    with pytest.raises(KeyError, match="no count for"):
        interleaved_rates(variants, examples={"small": 10}, rounds=1)


def test_median_and_spread_table():
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError):
        median([])
    table = spread_table({"naive": [100.0, 50.0, 110.0], "tuned": [200.0, 190.0, 60.0]}, baseline="naive")
    header, naive, tuned = table.splitlines()
    assert "median" in header and "min-max" in header
    assert naive.split()[:4] == ["naive", "100", "50-110", "1.00x"]
    assert tuned.split()[:4] == ["tuned", "190", "60-200", "1.90x"] and "3 runs" in tuned
    with pytest.raises(KeyError, match="baseline"):
        spread_table({"a": [1.0]}, baseline="b")
