"""Run-dependent conclusions are printed by a rule: ranges of interleaved repeats, or twice the standard error."""

from __future__ import annotations

import pytest

from course_utils import verdicts


def test_speed_separates_only_when_the_ranges_do():
    rates = {"a": [100, 110, 105], "b": [50, 60, 55], "c": [90, 120, 95]}
    assert verdicts.speed(rates, "a", "b", long=True).startswith(
        "a is faster than b: the ranges separate (100-110 vs 50-60")
    assert verdicts.speed(rates, "b", "a", long=True).startswith("b is slower than a")
    assert "within noise, the ranges overlap" in verdicts.speed(rates, "a", "c", long=True)
    assert "no verdict from 1 run(s)" in verdicts.speed({"a": [1.0], "b": [2.0, 3.0]}, "a", "b", long=True)


def test_accuracy_differs_only_beyond_twice_the_standard_error():
    assert verdicts.standard_error(0.5, 100) == pytest.approx(0.05)
    assert "within noise" in verdicts.accuracy(0.55, 0.50, 100, "x", "y", long=True)  # gap 0.05 < 2 x 0.0704
    assert verdicts.accuracy(0.70, 0.50, 100, "x", "y", long=True).startswith("x is more accurate than y")
    assert verdicts.accuracy(0.30, 0.50, 1000, "x", "y", long=True).startswith("x is less accurate than y")
    assert "equal accuracies" in verdicts.accuracy(1.0, 1.0, 10, "x", "y", long=True)
    with pytest.raises(ValueError, match="n >= 1"):
        verdicts.standard_error(0.5, 0)


def test_separate_is_the_range_rule_on_two_ranges():
    assert verdicts.separate((3, 4), (1, 2)) == 1 and verdicts.separate((1, 2), (3, 4)) == -1
    assert verdicts.separate((1, 3), (2, 4)) == 0 and verdicts.separate((1, 2), (2, 3)) == 0, "touching: overlap"
    with pytest.raises(ValueError, match="low <= high"):
        verdicts.separate((2, 1), (0, 3))


def test_speed_cannot_tell_from_overlapping_ranges_wider_than_max_spread():
    disturbed = {"naive": [468, 1861, 3299], "tuned": [468, 934, 1860], "quiet": [1800, 1850, 1900]}
    said = verdicts.speed(disturbed, "tuned", "naive", max_spread=0.25, long=True)
    assert said.startswith("tuned vs naive: cannot tell from this run") and "152%" in said and "more than 25%" in said
    assert "too wide to call them equal" in said and "quiet machine" not in said  # measured width, no cause
    assert "within noise" in verdicts.speed(disturbed, "tuned", "naive", long=True)        # no limit given: as before
    narrow = {"a": [100, 104], "b": [101, 105]}
    assert "within noise" in verdicts.speed(narrow, "a", "b", max_spread=0.25, long=True)  # narrow: a real overlap
    separated = {"a": [100, 400], "b": [10, 20]}
    assert verdicts.speed(separated, "a", "b", max_spread=0.25, long=True).startswith("a is faster")  # wide, apart


def test_a_range_of_differences_is_judged_against_zero():
    assert verdicts.against_zero(0.1, 0.5) == "above zero" and verdicts.against_zero(-0.5, -0.1) == "below zero"
    assert verdicts.against_zero(-0.1, 0.5) == "cannot tell from zero"
    assert verdicts.against_zero(0.0, 0.5) == "cannot tell from zero", "a range touching 0 includes it"


def test_a_separation_is_printed_with_the_decimals_that_show_it():
    touching = {"a": [2263.4, 2499.0], "b": [2127.0, 2263.2]}  # separate, but both ends print as 2,263
    said = verdicts.speed(touching, "a", "b", long=True)
    assert said.startswith("a is faster") and "2,263.4-2,499.0 vs 2,127.0-2,263.2" in said
    assert "(2,300-2,499 vs 2,127-2,263 images/s)" in verdicts.speed({"a": [2300, 2499], "b": [2127, 2263]}, "a", "b",
                                                                            long=True)
    assert verdicts.decimals(1.0, 1.0) == 6 and verdicts.decimals(6.94, 6.9449, least=2) == 3


def test_the_short_speed_verdict_gives_medians_their_ratio_and_the_verdict_word():
    rates = {"tuned": [2380, 2392, 2410], "naive": [2130, 2146, 2160], "close": [2100, 2300, 2420],
             "wild": [1200, 2146, 3100], "once": [2392]}
    assert verdicts.speed(rates, "tuned", "naive") == "tuned vs naive: 1.11x faster (2,392 vs 2,146 images/s, " \
                                                      "ranges separate)"
    assert verdicts.speed(rates, "naive", "tuned") == "naive vs tuned: 1.11x slower (2,146 vs 2,392 images/s, " \
                                                      "ranges separate)"  # the ratio reads tuned's over naive's
    assert verdicts.speed(rates, "tuned", "close") == "tuned vs close: within noise (2,392 vs 2,300 images/s, " \
                                                      "ranges overlap)"
    assert verdicts.speed(rates, "wild", "tuned", max_spread=0.25) == \
        "wild vs tuned: cannot tell (2,146 vs 2,392 images/s, ranges too wide)"
    assert "within noise" in verdicts.speed(rates, "wild", "tuned")  # no limit given: an overlap is noise
    assert verdicts.speed({"a": [1.0], "b": [2.0]}, "a", "b") == "a vs b: no verdict (1 run each)"
    assert verdicts.speed(rates, "once", "naive") == "once vs naive: no verdict (1 and 3 runs)"
    small = {"a": [9.1, 9.2, 9.4], "b": [4.3, 4.4, 4.5]}
    assert verdicts.speed(small, "a", "b", unit="steps/s") == \
        "a vs b: 2.09x faster (9.2 vs 4.4 steps/s, ranges separate)"
    close = {"a": [1.004, 1.005], "b": [1.000, 1.001]}  # told apart: more decimals, so that they print apart
    assert verdicts.speed(close, "a", "b", unit="x") == "a vs b: 1.004x faster (1.004 vs 1.000 x, ranges separate)"
    assert all(len(verdicts.speed(rates, a, b, max_spread=0.25)) - len(a) - len(b) <= 90
               for a in rates for b in rates if a != b)


def test_the_verdict_as_data_is_the_decision_the_lines_print():
    rates = {"tuned": [2380, 2392, 2410], "naive": [2130, 2146, 2160], "close": [2100, 2300, 2420],
             "wild": [1200, 2146, 3100], "once": [2392]}
    assert verdicts.speed_side(rates, "tuned", "naive") == 1 and verdicts.speed_side(rates, "naive", "tuned") == -1
    assert verdicts.speed_side(rates, "tuned", "close") == 0
    assert verdicts.speed_side(rates, "wild", "tuned", max_spread=0.25) is None  # cannot tell: too wide
    assert verdicts.speed_side(rates, "wild", "tuned") == 0
    assert verdicts.speed_side(rates, "once", "naive") is None  # too few repeats
    assert verdicts.judge([1.0], [2.0, 3.0]) == (None, "few") and verdicts.judge([1, 2], [3, 4]) == (-1, "")
    assert verdicts.accuracy_side(0.70, 0.50, 100) == 1 and verdicts.accuracy_side(0.30, 0.50, 1000) == -1
    assert verdicts.accuracy_side(0.55, 0.50, 100) == 0 and verdicts.accuracy_side(1.0, 1.0, 10) == 0


def test_the_short_accuracy_verdict_gives_the_gap_both_accuracies_and_twice_the_standard_error():
    assert verdicts.accuracy(0.812, 0.793, 10_000, "a", "b") == \
        "a vs b: more accurate (+0.019, 0.812 vs 0.793; 2 SE = 0.011)"
    assert verdicts.accuracy(0.774, 0.793, 10_000, "a", "b") == \
        "a vs b: less accurate (-0.019, 0.774 vs 0.793; 2 SE = 0.012)"
    assert verdicts.accuracy(0.797, 0.793, 10_000, "a", "b") == \
        "a vs b: within noise (+0.004, 0.797 vs 0.793; 2 SE = 0.011)"
    assert verdicts.accuracy(1.0, 1.0, 10, "a", "b") == "a vs b: equal accuracy (1.000 vs 1.000; 2 SE = 0)"
    assert "(+0.00010, 0.80010 vs 0.80000; 2 SE = 0.00036)" in verdicts.accuracy(0.8001, 0.8, 10_000_000, "a", "b")
    assert " less accurate " in verdicts.accuracy(0.30, 0.50, 1000, "x", "y")  # as the long line has it


def test_numbers_print_with_two_or_three_significant_digits():
    assert [verdicts.number(x) for x in (2392.4, 453.2, 45.34, 9.24, 0.812, 0.01234, 0.0)] == \
        ["2,392", "453", "45.3", "9.2", "0.81", "0.012", "0"]
    assert verdicts.pair(9.24, 12.1) == ("9.2", "12.1") and verdicts.pair(2392.2, 2392.4, apart=True) == (
        "2,392.2", "2,392.4")
    assert verdicts.ratio(9.2, 4.4) == "2.09x" and verdicts.ratio(150, 1) == "150x" and verdicts.ratio(1, 0) == ""
    assert verdicts.ratio(1.004, 1.0) == "1.004x" and verdicts.ratio_word(1.5, 1.0, "faster") == "1.50x faster"
    assert verdicts.ratio_word(1.0, 0.0, "faster") == "faster"


def test_the_legend_states_the_rule_once():
    said = " ".join(verdicts.legend().split())  # its lines wrapped at 100 characters
    assert "ranges (min-max) do not overlap" in said and "medians" in said and "twice its standard error" in said
    assert "cannot tell" not in said
    assert 'wider than 25% of their median give "cannot tell"' in " ".join(verdicts.legend(max_spread=0.25).split())
    assert all(len(line) <= 100 for line in verdicts.legend(0.25).splitlines())
