import numpy as np
import pytest

from course_utils.compare import compare


def test_identical_lists():
    ref = [np.ones((2, 3)), np.arange(4.0)]
    result = compare(ref, ref)
    assert result.max_abs_diff == 0 and result.scale == pytest.approx(1) and result.cosine == pytest.approx(1)
    assert result.same()


def test_scaled_copy_reports_the_factor():
    ref = [np.array([1.0, -2.0]), np.array([[0.5, 3.0]])]
    result = compare([2 * t for t in ref], ref)
    assert result.scale == pytest.approx(2.0) and result.cosine == pytest.approx(1.0)
    assert result.max_abs_diff == pytest.approx(3.0) and not result.same()
    assert "scale 2.0000" in str(result)


def test_direction_change_lowers_cosine():
    result = compare([np.array([1.0, 0.0])], [np.array([1.0, 1.0])])
    assert result.cosine == pytest.approx(1 / np.sqrt(2))
    assert result.scale == pytest.approx(0.5)
    assert result.angle_degrees == pytest.approx(45.0)
    assert "(45.0 degrees)" in str(result)
    assert compare([np.array([-1.0])], [np.array([1.0])]).angle_degrees == pytest.approx(180.0)


def test_float32_noise_counts_as_same():
    ref = [np.full(10, 0.1, np.float32)]
    assert compare([ref[0] + np.float32(1e-7)], ref).same()


def test_mismatched_inputs_are_rejected():
    with pytest.raises(ValueError, match="number of tensors"):
        compare([np.ones(2)], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="shape"):
        compare([np.ones(2)], [np.ones(3)])
    with pytest.raises(ValueError, match="empty"):
        compare([], [])
