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


def test_speed_cannot_tell_from_overlapping_ranges_wider_than_max_spread():
    disturbed = {"naive": [468, 1861, 3299], "tuned": [468, 934, 1860], "quiet": [1800, 1850, 1900]}
    said = verdicts.speed(disturbed, "tuned", "naive", max_spread=0.25)
    assert said.startswith("tuned vs naive: cannot tell from this run") and "152%" in said and "more than 25%" in said
    assert "too wide to call them equal" in said and "quiet machine" not in said  # measured width, no cause
    assert "within noise" in verdicts.speed(disturbed, "tuned", "naive")        # no limit given: as before
    narrow = {"a": [100, 104], "b": [101, 105]}
    assert "within noise" in verdicts.speed(narrow, "a", "b", max_spread=0.25)  # narrow ranges: a real overlap
    separated = {"a": [100, 400], "b": [10, 20]}
    assert verdicts.speed(separated, "a", "b", max_spread=0.25).startswith("a is faster than b")  # wide but apart


def test_a_range_of_differences_is_judged_against_zero():
    assert verdicts.against_zero(0.1, 0.5) == "above zero" and verdicts.against_zero(-0.5, -0.1) == "below zero"
    assert verdicts.against_zero(-0.1, 0.5) == "cannot tell from zero"
    assert verdicts.against_zero(0.0, 0.5) == "cannot tell from zero", "a range touching 0 includes it"


def test_a_separation_is_printed_with_the_decimals_that_show_it():
    touching = {"a": [2263.4, 2499.0], "b": [2127.0, 2263.2]}  # separate, but both ends print as 2,263
    said = verdicts.speed(touching, "a", "b")
    assert said.startswith("a is faster") and "2,263.4-2,499.0 vs 2,127.0-2,263.2" in said
    assert "(2,300-2,499 vs 2,127-2,263 images/s)" in verdicts.speed({"a": [2300, 2499], "b": [2127, 2263]}, "a", "b")
    assert verdicts.decimals(1.0, 1.0) == 6 and verdicts.decimals(6.94, 6.9449, least=2) == 3
