import time

import pytest

from course_utils.timing import Stopwatch, ratio_table, throughput


def test_stopwatch_measures_elapsed_time():
    with Stopwatch() as sw:
        time.sleep(0.05)
    assert 0.04 < sw.seconds < 1.0
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


def test_ratio_table():
    table = ratio_table({"one device": 400.0, "two devices": 600.0}, baseline="one device")
    first, second = table.splitlines()
    assert first.split()[-3:] == ["400.0", "images/s", "1.00x"] or "1.00x one device" in first
    assert "600.0 images/s   1.50x one device" in second
    with pytest.raises(KeyError, match="baseline"):
        ratio_table({"a": 1.0}, baseline="b")
