"""Run-dependent conclusions are printed by a rule: ranges of interleaved repeats, or twice the standard error."""

from __future__ import annotations

import pytest

from course_utils import verdicts


def test_speed_separates_only_when_the_ranges_do():
    rates = {"a": [100, 110, 105], "b": [50, 60, 55], "c": [90, 120, 95]}
    assert verdicts.speed(rates, "a", "b").startswith("a is faster than b: the ranges separate (100-110 vs 50-60")
    assert verdicts.speed(rates, "b", "a").startswith("b is slower than a")
    assert "within noise, the ranges overlap" in verdicts.speed(rates, "a", "c")
    assert "no verdict from 1 run(s)" in verdicts.speed({"a": [1.0], "b": [2.0, 3.0]}, "a", "b")


def test_accuracy_differs_only_beyond_twice_the_standard_error():
    assert verdicts.standard_error(0.5, 100) == pytest.approx(0.05)
    assert "within noise" in verdicts.accuracy(0.55, 0.50, 100, "x", "y")  # gap 0.05 < 2 x 0.0704
    assert verdicts.accuracy(0.70, 0.50, 100, "x", "y").startswith("x is more accurate than y")
    assert verdicts.accuracy(0.30, 0.50, 1000, "x", "y").startswith("x is less accurate than y")
    assert "equal accuracies" in verdicts.accuracy(1.0, 1.0, 10, "x", "y")
    with pytest.raises(ValueError, match="n >= 1"):
        verdicts.standard_error(0.5, 0)


def test_separate_is_the_range_rule_on_two_ranges():
    assert verdicts.separate((3, 4), (1, 2)) == 1 and verdicts.separate((1, 2), (3, 4)) == -1
    assert verdicts.separate((1, 3), (2, 4)) == 0 and verdicts.separate((1, 2), (2, 3)) == 0, "touching: overlap"
    with pytest.raises(ValueError, match="low <= high"):
        verdicts.separate((2, 1), (0, 3))
