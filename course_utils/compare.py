"""Compare lists of tensors (gradients, weights) from two runs, as numbers a student can read."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How ``candidate`` relates to ``reference``, over all tensors flattened together.

    - ``max_abs_diff``: the largest element-wise difference;
    - ``scale``: the least-squares factor s with candidate ~ s * reference
      (2.0 means "twice too large");
    - ``cosine``: 1.0 when the two point the same way, whatever their lengths.
    """

    max_abs_diff: float
    scale: float
    cosine: float

    @property
    def angle_degrees(self) -> float:
        """The angle between candidate and reference: 0 when they point the same way."""
        return float(np.degrees(np.arccos(np.clip(self.cosine, -1.0, 1.0))))

    def same(self, atol: float = 1e-5) -> bool:
        """Equal up to float32 noise: every element within ``atol``."""
        return self.max_abs_diff <= atol

    def __str__(self) -> str:
        return (f"scale {self.scale:.4f}, cosine {self.cosine:.6f} ({self.angle_degrees:.1f} degrees), "
                f"max |diff| {self.max_abs_diff:.2e}")


def _flat(tensors) -> np.ndarray:
    arrays = [np.asarray(t, dtype=np.float64).ravel() for t in tensors]
    return np.concatenate(arrays) if arrays else np.zeros(0)


def compare(candidate, reference) -> Comparison:
    """Compare two equally shaped lists of tensors (or arrays)."""
    candidate, reference = list(candidate), list(reference)
    if len(candidate) != len(reference):
        raise ValueError(f"different number of tensors: {len(candidate)} vs {len(reference)}")
    for i, (a, b) in enumerate(zip(candidate, reference)):
        if np.shape(a) != np.shape(b):
            raise ValueError(f"tensor {i} has shape {np.shape(a)} vs {np.shape(b)}")
    a, b = _flat(candidate), _flat(reference)
    if a.size == 0:
        raise ValueError("nothing to compare: the lists are empty")
    ref_sq = float(b @ b)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return Comparison(
        max_abs_diff=float(np.max(np.abs(a - b))),
        scale=float(a @ b) / ref_sq if ref_sq else float("nan"),
        cosine=float(a @ b) / norms if norms else float("nan"),
    )
