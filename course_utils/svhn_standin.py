"""An offline, generated stand-in for SVHN cropped digits (TFDS ``svhn_cropped``).

No package registry ships SVHN, and the course must run offline, so this module draws
house-number-like crops instead: ``uint8 [32, 32, 3]`` RGB images of a centred digit 0-9
with the form of TFDS's ``svhn_cropped`` (labels ``int64`` 0-9). They are NOT real SVHN
photographs: accuracies measured on them say nothing about SVHN itself.

Each image has a digit in one of 18 fonts shipped with matplotlib (DejaVu, STIX, Computer
Modern) of varied size, colour and contrast, dark on light (60 %) or light on dark, on a
flat, graded or stained plate that sometimes ends at an edge near the border; it is slightly
rotated, sheared and shifted, blurred and noisy, and parts of its neighbours are cut off at
the left and right edges as in real crops. Labels are uniform over 0-9 (real SVHN has more
1s and 2s than 9s). A ridge classifier on gray pixels gets about 20-24 % (chance: 10 %),
the course's CNN about 91 % (solution 07).

- :func:`generate` -- ``(images, labels)`` in memory, deterministic for ``(n, split, seed)``.
- :func:`load`     -- the same, cached on disk as one ``.npz`` per (seed, split, n, version).

Image ``i`` of a seed and split is the same whatever ``n`` is (smaller ``n`` give prefixes).
The glyphs come from the installed matplotlib's FreeType, so other matplotlib versions may
differ in a few pixel values. Each glyph is rendered once into an alpha atlas and images are
composed in NumPy: about 8,000 images/s on an idle CPU core (``python -m
tools.svhn_standin_report --n 20000`` measures it, and its learnability).
"""

from __future__ import annotations

import functools
import os
import zipfile
from pathlib import Path

import numpy as np

CACHE_DIR_ENV = "COURSE_DATA_DIR"  # = course_utils.datasets.DATA_DIR_ENV (a test checks; no import: no cycle)

NUM_CLASSES = 10
IMAGE_SHAPE = (32, 32, 3)
SPLITS = ("train", "test")
DEFAULT_SIZES = {"train": 20_000, "test": 5_000}  # real SVHN: 73,257 and 26,032
VERSION = 2  # bump whenever the images change: it is part of every cache file's name
SOURCE = ("generated stand-in for SVHN cropped digits (course_utils.svhn_standin, "
          f"version {VERSION}): synthetic house-number crops, NOT real SVHN")
FONTS = (
    "DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique",
    "DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "DejaVuSansMono",
    "DejaVuSansMono-Bold", "STIXGeneral", "STIXGeneralBol", "STIXGeneralItalic",
    "STIXGeneralBolIta", "cmr10", "cmb10", "cmss10", "cmtt10", "cmti10",
)
_CHUNK = 128  # images per random stream: image i comes from stream i // _CHUNK
_ATLAS, _GLYPH_H = 48, 34  # atlas cell size and digit height in atlas pixels


@functools.lru_cache(maxsize=1)
def glyph_atlas() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Every (font, digit) glyph rendered once: ``(alpha float32 [F*10 + 1, 48, 48],
    ink widths [F*10 + 1], font names)``; glyph ``10 * f + d`` is digit d in font f, the
    last one is blank. Fonts missing from this matplotlib are left out."""
    import matplotlib  # noqa: PLC0415
    from matplotlib.ft2font import FT2Font  # noqa: PLC0415

    cells, widths, names = [], [], []
    for name in FONTS:
        path = Path(matplotlib.get_data_path(), "fonts", "ttf", f"{name}.ttf")
        if not path.exists():
            continue
        font = FT2Font(str(path))
        size = 100.0 * _GLYPH_H / _render(font, "8", 100.0).shape[0]  # "8" is _GLYPH_H high
        glyphs = [_render(font, d, size)[:_ATLAS - 6, :_ATLAS - 6] for d in "0123456789"]
        for ink in glyphs:
            cell = np.zeros((_ATLAS, _ATLAS), np.float32)
            top, left = (_ATLAS - ink.shape[0]) // 2, (_ATLAS - ink.shape[1]) // 2
            cell[top:top + ink.shape[0], left:left + ink.shape[1]] = ink
            cells.append(_blur(cell[None, ..., None])[0, ..., 0])  # soften before downscaling
            widths.append(ink.shape[1])
        names.append(name)
    cells.append(np.zeros((_ATLAS, _ATLAS), np.float32))
    widths.append(0)
    return np.stack(cells), np.asarray(widths, np.float32), tuple(names)


def _render(font, char: str, size: float) -> np.ndarray:
    """``char`` in ``font`` at ``size`` pixels per em: alpha cropped to its ink."""
    font.set_size(size, 72)
    font.set_text(char, 0.0)
    font.draw_glyphs_to_bitmap()
    ink = np.asarray(font.get_image(), dtype=np.float32) / 255.0
    ys, xs = np.nonzero(ink > 0.02)
    return ink[ys.min():ys.max() + 1, xs.min():xs.max() + 1]


def _blur(x: np.ndarray) -> np.ndarray:
    """Separable [1, 2, 1] / 4 blur of ``[B, H, W, C]`` images (edges repeated)."""
    p = np.pad(x, ((0, 0), (1, 1), (0, 0), (0, 0)), mode="edge")
    x = 0.25 * p[:, :-2] + 0.5 * p[:, 1:-1] + 0.25 * p[:, 2:]
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)), mode="edge")
    return 0.25 * p[:, :, :-2] + 0.5 * p[:, :, 1:-1] + 0.25 * p[:, :, 2:]


def _upsample(grid: np.ndarray, size: int = 32) -> np.ndarray:
    """Bilinear upsampling of ``[B, g, g, C]`` to ``[B, size, size, C]`` (no BLAS: no threads)."""
    pos = (np.arange(size) + 0.5) * (grid.shape[1] - 1) / size
    lo = np.minimum(pos.astype(int), grid.shape[1] - 2)
    f = (pos - lo).astype(np.float32)
    rows = grid[:, lo] + f[:, None, None] * (grid[:, lo + 1] - grid[:, lo])
    return rows[:, :, lo] + f[:, None] * (rows[:, :, lo + 1] - rows[:, :, lo])


def _chunk(seed: int, split: str, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Images ``index * _CHUNK ...`` of a seed and split, from their own random stream."""
    rng = np.random.default_rng([VERSION, seed, SPLITS.index(split), index])
    labels, alpha = _ink(rng)  # the order of the random draws is the images' definition: ink, then paint
    return _paint(rng, alpha), labels.astype(np.int64)


def _uniform(rng: np.random.Generator, b: int):
    """``u(lo, hi, *shape)``: ``b`` float32 draws (per image) from ``[lo, hi)``."""
    return lambda lo, hi, *shape: rng.uniform(lo, hi, (b, *shape)).astype(np.float32)


_YY, _XX = np.mgrid[0:32, 0:32].astype(np.float32) - 15.5  # pixel centres relative to the crop's centre


def _ink(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Labels and ink coverage ``[b, 32, 32]``: three glyphs placed, rotated, sheared, scaled and blurred."""
    atlas, widths, names = glyph_atlas()
    b, blank, u = _CHUNK, len(widths) - 1, _uniform(rng, _CHUNK)
    yy, xx = _YY, _XX
    labels = rng.integers(0, NUM_CLASSES, b)
    font = rng.integers(0, len(names), b)
    glyph = 10 * font[:, None] + np.stack([rng.integers(0, 10, b), labels, rng.integers(0, 10, b)], 1)
    glyph[:, 0] = np.where(rng.random(b) < 0.85, glyph[:, 0], blank)  # neighbour on the left
    glyph[:, 2] = np.where(rng.random(b) < 0.85, glyph[:, 2], blank)  # ... and on the right
    w = widths[glyph]
    gap = u(-1, 7, 2)  # atlas pixels between the centre digit and each neighbour
    # Output -> atlas map: undo shift, rotation, shear and scale (digit height 20-30 px).
    scale = u(17, 30) / _GLYPH_H
    sx, sy = scale * np.exp(u(-0.15, 0.15)), scale
    angle, shear = np.radians(np.clip(rng.normal(0, 7, b), -20, 20)), u(-0.2, 0.2)
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    dx = xx - u(-3, 3)[:, None, None]
    dy = yy - u(-2.5, 2.5)[:, None, None]
    ry = (-sin[:, None, None] * dx + cos[:, None, None] * dy) / sy[:, None, None]
    rx = (cos[:, None, None] * dx + sin[:, None, None] * dy) / sx[:, None, None]
    qy, qx = ry, rx - shear[:, None, None] * ry
    # Each pixel samples one glyph: left, centre or right of the gaps beside the centre digit.
    right_edge = (w[:, 1] + gap[:, 1]) / 2
    left_edge = -(w[:, 1] + gap[:, 0]) / 2
    slot = (qx > right_edge[:, None, None]).astype(int) - (qx < left_edge[:, None, None])
    centre = np.stack([left_edge - (w[:, 0] + gap[:, 0]) / 2, np.zeros_like(left_edge),
                       right_edge + (w[:, 2] + gap[:, 1]) / 2], 1)
    pick = np.take_along_axis(glyph, slot.reshape(b, -1) + 1, 1).reshape(slot.shape)
    shift = np.take_along_axis(centre, slot.reshape(b, -1) + 1, 1).reshape(slot.shape)
    alpha = _sample(atlas, pick, qy + _ATLAS / 2 - 0.5, qx - shift + _ATLAS / 2 - 0.5)
    # Focus: blur the ink by 0-2 passes of [1, 2, 1] (the background is smooth already).
    blur = u(0, 2)[:, None, None] ** 0.7 * 2 ** 0.3
    once = _blur(alpha[..., None])[..., 0]
    twice = _blur(once[..., None])[..., 0]
    alpha = np.where(blur < 1, alpha + blur * (once - alpha), once + (blur - 1) * (twice - once))
    alpha *= u(0.8, 1.0)[:, None, None]
    return labels, alpha


def _paint(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """``uint8 [b, 32, 32, 3]`` images: tinted ink on a plate (maybe edged), shaded, stained and grainy."""
    b, u, yy, xx = _CHUNK, _uniform(rng, _CHUNK), _YY, _XX
    # Colours: a light and a dark level 0.2-0.75 apart, either way round, each tinted.
    light = u(0.45, 1.0) * 255
    dark = np.clip(light - u(0.16, 0.72) * 255, 0.0, None)
    dark_ink = rng.random(b) < 0.6  # 60 % dark digits on light plates

    def tint(saturation):  # random colours of mean 1 across R, G, B: they keep the level
        t = 1 - 0.9 * saturation[:, None] + 0.9 * saturation[:, None] * rng.random((b, 3))
        return t / t.mean(1, keepdims=True)
    ink_level, bg_level = np.where(dark_ink, dark, light), np.where(dark_ink, light, dark)
    ink = (ink_level[:, None] * tint(u(0, 1) ** 2)).astype(np.float32)
    bg = (bg_level[:, None] * tint(u(0, 1) ** 2)).astype(np.float32)
    # A third of the plates end near the crop's border: another surface beyond a straight edge.
    edge = u(0, 2 * np.pi)
    offset = np.where(rng.random(b) < 0.35, u(9, 16), 99)[:, None, None]
    beyond = np.cos(edge)[:, None, None] * xx + np.sin(edge)[:, None, None] * yy - offset
    beyond = np.clip(beyond + 0.5, 0, 1).astype(np.float32)[..., None]
    other = (u(0.05, 1.0)[:, None] * 255 * tint(u(0, 1) ** 2)).astype(np.float32)
    img = bg[:, None, None, :] + beyond * (other - bg)[:, None, None, :]
    img += alpha[..., None] * (ink[:, None, None, :] - img)
    # Light across the plate, smooth stains and grain.
    shade = _upsample(rng.standard_normal((b, 5, 5, 1), np.float32)) * u(0, 0.12)[:, None, None, None]
    shade += 1 + (u(-0.012, 0.012)[:, None, None] * xx + u(-0.012, 0.012)[:, None, None] * yy)[..., None]
    img *= shade
    grain = rng.standard_normal((b, 32, 32, 1), np.float32)
    grain *= u(1.5, 14.0)[:, None, None, None]
    grain += 0.5  # so that the uint8 cast below rounds to the nearest value
    img += grain
    return np.clip(img, 0, 255, out=img).astype(np.uint8)


def _sample(atlas: np.ndarray, glyph: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bilinear samples of ``atlas[glyph]`` at ``(y, x)``; outside the cell is 0."""
    s = atlas.shape[1]
    y, x = np.clip(y, 0, s - 1.001), np.clip(x, 0, s - 1.001)  # cells have blank borders
    y0, x0 = y.astype(np.intp), x.astype(np.intp)
    fy, fx = y - y0, x - x0
    flat, i = atlas.reshape(-1), (glyph * s + y0) * s + x0
    top_left, top_right, bottom_left, bottom_right = flat[i], flat[i + 1], flat[i + s], flat[i + s + 1]
    top = top_left + fx * (top_right - top_left)
    return top + fy * (bottom_left + fx * (bottom_right - bottom_left) - top)


def _check(n: int, split: str, seed: int) -> None:
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}: use one of {', '.join(map(repr, SPLITS))}.")
    for name, value, least in (("n", n, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}: pass e.g. "
                             f"{name}={1000 if name == 'n' else 0}.")


def generate(n: int, *, split: str = "train", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` generated images and labels: ``(uint8 [n, 32, 32, 3], int64 [n])``; no disk.

    The same ``(n, split, seed)`` give identical arrays, image ``i`` does not depend on
    ``n``, and ``"train"`` and ``"test"`` come from different random streams.
    """
    _check(n, split, seed)
    chunks = [_chunk(int(seed), split, c) for c in range(-(-int(n) // _CHUNK))]
    return (np.concatenate([c[0] for c in chunks])[:n],
            np.concatenate([c[1] for c in chunks])[:n])


def cache_path(split: str = "train", *, n: int | None = None, seed: int = 0,
               cache_dir: str | os.PathLike | None = None) -> Path:
    """Where :func:`load` keeps these images: ``cache_dir``, else ``$COURSE_DATA_DIR/svhn_standin``,
    else ``~/.cache/course_utils/svhn_standin``."""
    n = DEFAULT_SIZES.get(split, 0) if n is None else n
    _check(n, split, seed)
    if cache_dir is None:
        env = os.environ.get(CACHE_DIR_ENV)
        base = Path(env) if env else Path.home() / ".cache" / "course_utils"
        cache_dir = base / "svhn_standin"
    return Path(cache_dir) / f"svhn_standin-v{VERSION}-{split}-seed{int(seed)}-n{int(n)}.npz"


def load(split: str = "train", *, n: int | None = None, seed: int = 0,
         cache_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`generate`'s ``(images, labels)``, read from the disk cache when there.

    ``n`` defaults to :data:`DEFAULT_SIZES` ``[split]``. A missing or unreadable cache file
    (see :func:`cache_path`) is (re)generated and written atomically.
    """
    n = DEFAULT_SIZES.get(split, 0) if n is None else n
    path = cache_path(split, n=n, seed=seed, cache_dir=cache_dir)
    try:
        with np.load(path) as data:
            images, labels = data["images"], data["labels"]
        if images.shape == (n, *IMAGE_SHAPE) and images.dtype == np.uint8 \
                and labels.shape == (n,) and labels.dtype == np.int64:
            return images, labels
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass  # missing or corrupt: generate it again
    images, labels = generate(n, split=split, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, images=images, labels=labels)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return images, labels
