"""
The picture of what the calibration sees: a view with the board's corners, the captured poses'
outlines and the capture guidance in words (numpy and OpenCV only).

:func:`draw_detections` takes a 2-D reference image (the central view of a conventional camera,
the image rendered from the micro-images of a focused one), upscales it by an integer factor
(:func:`picture_scale`) so its text stays legible, and draws on it

- each found corner as a ring with a dot at its centre, coloured by its quality
  (:func:`corner_quality`: its distance from the homography of all found corners, as a
  fraction of the corner spacing; green <= :data:`GOOD_GRID_ERROR`, yellow <=
  :data:`WEAK_GRID_ERROR`, red beyond) and corner 0 (the board's origin) in a larger ring;
- the outline (convex hull of the corners) of every captured pose in :data:`OUTLINE`, with
  its pose number, and where ``~/suggest`` asks for the board next in :data:`SUGGESTED`;
- below the image, a band of :data:`TEXT_LINES` lines: the status line (in the colour of the
  corners, red when no board is found) and the guidance (:func:`guidance_lines`);
- for a ChArUco board (partial views): the markers read (outlined in :data:`MARKER`, each
  with its id), every corner's id beside it, and the image regions no captured corner has
  reached yet (:func:`uncovered_regions`: cells of a 3 x 3 grid, tinted :data:`UNCOVERED`),
  where a board pushed partly out of view adds what the principal point and the distortion
  rest on.

The picture is (H, W, 3) uint8 RGB of :func:`picture_shape`. Pixel (u, v) of the reference
image (pixel centres at integers) is drawn at ((u + 0.5) f - 0.5, (v + 0.5) f - 0.5).
"""

import textwrap

import cv2
import numpy as np

GREEN = (0, 255, 0)
YELLOW = (255, 255, 0)
RED = (255, 0, 0)
OUTLINE = (0, 128, 255)
SUGGESTED = (255, 0, 255)
TEXT = (255, 255, 255)
MARKER = (0, 255, 255)
UNCOVERED = (255, 128, 0)
REGION_NAMES = (('top-left', 'top', 'top-right'), ('left', 'centre', 'right'),
                ('bottom-left', 'bottom', 'bottom-right'))
"""Names of the cells of :func:`uncovered_regions` (rows top to bottom, columns left to
right)."""
QUALITY_COLOURS = (GREEN, YELLOW, RED)
"""Colour of a corner of quality 0 (good), 1 (weak), 2 (bad)."""

GOOD_GRID_ERROR = 0.05
"""A corner within this fraction of the corner spacing of the board's homography is good."""
WEAK_GRID_ERROR = 0.15
"""... within this (the corner detector's largest grid error accepted) weak, beyond it bad."""

MIN_SIDE = 640          # the picture's image part is upscaled to at least this (shorter side)
TEXT_LINES = 6          # lines in the text band under the image
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_FONT_SCALE = 0.5
_LINE_PX = 20


def picture_scale(view_shape, min_side=MIN_SIDE):
    """Integer upscaling factor f >= 1 of a (rows, cols) reference image (f * shorter side
    reaches ``min_side`` or f is 4)."""
    rows, cols = (int(x) for x in view_shape[:2])
    return int(np.clip(np.ceil(min_side / max(min(rows, cols), 1)), 1, 4))


def picture_shape(view_shape, min_side=MIN_SIDE):
    """(H, W, 3) of the picture of a (rows, cols) reference image."""
    f = picture_scale(view_shape, min_side)
    rows, cols = (int(x) for x in view_shape[:2])
    return (f * rows + TEXT_LINES * _LINE_PX + 8, f * cols, 3)


def corner_quality(uv, cols, rows):
    """
    (C,) int quality of the corners uv (C = cols * rows, row-major board order, NaN where not
    found): 0 good, 1 weak, 2 bad (their distance from the homography fitted to all found
    corners over the median corner spacing, thresholds :data:`GOOD_GRID_ERROR`,
    :data:`WEAK_GRID_ERROR`); -1 not found. With fewer than 5 found corners (no check
    possible) every found one is weak.
    """
    uv = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
    if len(uv) != cols * rows:
        raise ValueError(f'uv has {len(uv)} corners, expected {cols} x {rows} = {cols * rows}')
    found = np.isfinite(uv).all(axis=1)
    quality = np.where(found, 1, -1)
    if found.sum() < 5:
        return quality
    rc = np.mgrid[0:rows, 0:cols].reshape(2, -1).T[:, ::-1].astype(np.float64)
    H, _ = cv2.findHomography(rc[found], uv[found], 0)
    if H is None:
        return np.where(found, 2, -1)
    proj = cv2.perspectiveTransform(rc.reshape(-1, 1, 2), H).reshape(-1, 2)
    grid = proj.reshape(rows, cols, 2)
    spacing = np.median(np.concatenate([
        np.linalg.norm(np.diff(grid, axis=1), axis=-1).ravel(),
        np.linalg.norm(np.diff(grid, axis=0), axis=-1).ravel()]))
    error = np.linalg.norm(proj - uv, axis=1) / max(float(spacing), 1e-9)
    quality = np.where(error <= GOOD_GRID_ERROR, 0, np.where(error <= WEAK_GRID_ERROR, 1, 2))
    return np.where(found, quality, -1)


def uncovered_regions(points, shape):
    """
    (3, 3) bool: the cells of a 3 x 3 grid over an image of ``shape`` (rows, cols) that none
    of ``points`` (N, 2) px (NaN ignored) falls in; names in :data:`REGION_NAMES`.
    """
    rows, cols = (int(x) for x in shape[:2])
    pts = np.asarray(points, float).reshape(-1, 2)
    pts = pts[np.isfinite(pts).all(axis=1)]
    covered = np.zeros((3, 3), bool)
    gx = np.clip(np.floor(3 * (pts[:, 0] + 0.5) / max(cols, 1)), 0, 2).astype(int)
    gy = np.clip(np.floor(3 * (pts[:, 1] + 0.5) / max(rows, 1)), 0, 2).astype(int)
    inside = (pts[:, 0] > -0.5) & (pts[:, 0] < cols - 0.5) & (pts[:, 1] > -0.5) & \
        (pts[:, 1] < rows - 0.5)
    covered[gy[inside], gx[inside]] = True
    return ~covered


def region_names(mask):
    """Names (list of str) of the True cells of a (3, 3) mask of :func:`uncovered_regions`."""
    return [REGION_NAMES[r][c] for r, c in zip(*np.nonzero(np.asarray(mask, bool)))]


def guidance_lines(status):
    """
    The guidance in words from a ``~/status`` mapping (``summary``: the one-line guidance of
    :meth:`lf_mpc_calib.calibration.guidance.CaptureGuidance.summary`, ``advice``, ``flags``):
    the summary's parts, then the further advice and flags. [] without a summary.
    """
    summary = str(status.get('summary') or '')
    lines = [p for p in summary.split('; ') if p]
    advice = list(status.get('advice') or ())
    if not status.get('sufficient', False) and len(advice) > 1:
        lines += [f'then: {a}' for a in advice[1:]]
    lines += [str(f) for f in status.get('flags') or ()]
    return lines


def _to_uint8(image):
    """A 2-D float image stretched to uint8 between its 0.5 and 99.5 percentiles."""
    img = np.asarray(image, dtype=np.float32)
    if img.ndim == 3:
        img = img.mean(axis=2)
    if img.ndim != 2 or img.size == 0:
        raise ValueError(f'image must be 2-D (rows, cols), got shape {np.shape(image)}')
    finite = np.isfinite(img)
    if not finite.any():
        return np.zeros(img.shape, np.uint8)
    lo, hi = np.percentile(img[finite], (0.5, 99.5))
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return np.clip((np.where(finite, img, lo) - lo) * scale, 0, 255).astype(np.uint8)


def _at(uv, f):
    """Reference pixels (N, 2) -> picture pixels (N, 2) int32 for cv2 drawing."""
    return np.round((np.asarray(uv, float) + 0.5) * f - 0.5).astype(np.int32)


def _wrap(lines, width_px):
    """Lines wrapped to ``width_px`` at the text font; at most TEXT_LINES."""
    char_px = cv2.getTextSize('abcdefghij', _FONT, _FONT_SCALE, 1)[0][0] / 10.0
    chars = max(int((width_px - 12) / char_px), 20)
    out = []
    for line in lines:
        out += textwrap.wrap(line, chars, subsequent_indent='  ') or ['']
    if len(out) > TEXT_LINES:
        out = out[:TEXT_LINES - 1] + [out[TEXT_LINES - 1][:chars - 4] + ' ...']
    return out


def draw_detections(image, corners_uv=None, *, board_size=None, outlines=(), status='',
                    lines=(), min_side=MIN_SIDE, suggested=None, markers=None,
                    corner_ids=False, uncovered=None):
    """
    The picture (H, W, 3) uint8 RGB (:func:`picture_shape`) of ``image`` (rows, cols) with
    ``corners_uv`` (C, 2) reference pixels (NaN where not found; None: no board) coloured by
    :func:`corner_quality` (``board_size`` (cols, rows) needed with corners), ``outlines``
    (sequence of (K, 2) corner sets of captured poses; each drawn as its convex hull, numbered
    by its index), ``status`` (the first text line), ``lines`` (the guidance) and
    ``suggested`` (K, 2): the corners where the next board is suggested (drawn as their hull,
    labelled 'suggested'), or None. A ChArUco board's: ``markers`` (ids (N,), corners
    (N, 4, 2) px) outlined with their ids, ``corner_ids``: each found corner's id beside it,
    ``uncovered`` (3, 3) bool: the image regions to tint (:func:`uncovered_regions`).
    """
    grey = _to_uint8(image)
    f = picture_scale(grey.shape, min_side)
    shape = picture_shape(grey.shape, min_side)
    out = np.zeros(shape, np.uint8)
    big = cv2.resize(grey, None, fx=f, fy=f, interpolation=cv2.INTER_LINEAR) if f > 1 else grey
    out[:big.shape[0], :, :] = big[..., None]
    if uncovered is not None:
        _tint_regions(out[:big.shape[0]], uncovered)
    if markers is not None:
        _draw_markers(out, markers, f)
    for k, pts in enumerate(outlines):
        pts = np.asarray(pts, float).reshape(-1, 2)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if len(pts) < 3:
            continue
        hull = cv2.convexHull(_at(pts, f).reshape(-1, 1, 2))
        cv2.polylines(out, [hull], True, OUTLINE, 2, cv2.LINE_AA)
        x, y = hull.reshape(-1, 2).min(axis=0)
        cv2.putText(out, str(k), (int(x) + 3, int(y) + 15), _FONT, _FONT_SCALE, OUTLINE, 1,
                    cv2.LINE_AA)
    if suggested is not None:
        pts = np.asarray(suggested, float).reshape(-1, 2)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if len(pts) >= 3:
            hull = cv2.convexHull(_at(pts, f).reshape(-1, 1, 2))
            cv2.polylines(out, [hull], True, SUGGESTED, 2, cv2.LINE_AA)
            x, y = hull.reshape(-1, 2).min(axis=0)
            cv2.putText(out, 'suggested', (int(x) + 3, int(y) - 5), _FONT, _FONT_SCALE,
                        SUGGESTED, 1, cv2.LINE_AA)
    colour = RED
    if corners_uv is not None:
        if board_size is None:
            raise ValueError('board_size (cols, rows) is needed to draw corners')
        colour = _draw_corners(out, corners_uv, board_size, f, corner_ids)
    text = _wrap([status] if status else [], shape[1]) + _wrap(list(lines), shape[1])
    text = text[:TEXT_LINES]
    y0 = big.shape[0] + 4
    for n, line in enumerate(text):
        cv2.putText(out, line, (6, y0 + (n + 1) * _LINE_PX - 5), _FONT, _FONT_SCALE,
                    colour if (status and n == 0) else TEXT, 1, cv2.LINE_AA)
    return out


def _draw_corners(out, corners_uv, board_size, f, corner_ids):
    """Draw the found corners of ``corners_uv`` (C, 2) reference px coloured by quality (and
    their ids); returns the colour of the worst (RED when none is found)."""
    uv = np.asarray(corners_uv, float).reshape(-1, 2)
    quality = corner_quality(uv, *board_size)
    found = quality >= 0
    ring = max(2 * f + 1, 4)
    for c in np.nonzero(found)[0]:
        x, y = _at(uv[c], f)
        col = QUALITY_COLOURS[quality[c]]
        cv2.circle(out, (int(x), int(y)), ring, col, 1, cv2.LINE_AA)
        cv2.circle(out, (int(x), int(y)), max(f - 1, 1), col, -1)
        if c == 0:
            cv2.circle(out, (int(x), int(y)), 2 * ring, col, 1, cv2.LINE_AA)
        if corner_ids:
            cv2.putText(out, str(c), (int(x) + ring, int(y) - ring), _FONT, 0.35, col, 1,
                        cv2.LINE_AA)
    return QUALITY_COLOURS[int(quality[found].max())] if found.any() else RED


def _tint_regions(image_part, mask):
    """Blend UNCOVERED into the cells of ``image_part`` (H, W, 3) where ``mask`` (3, 3)."""
    h, w = image_part.shape[:2]
    ys, xs = np.linspace(0, h, 4).round().astype(int), np.linspace(0, w, 4).round().astype(int)
    tint = np.array(UNCOVERED, np.float32)
    for r, c in zip(*np.nonzero(np.asarray(mask, bool))):
        cell = image_part[ys[r]:ys[r + 1], xs[c]:xs[c + 1]]
        cell[:] = np.round(0.65 * cell + 0.35 * tint).astype(np.uint8)
        cv2.rectangle(image_part, (int(xs[c]), int(ys[r])),
                      (int(xs[c + 1]) - 1, int(ys[r + 1]) - 1), UNCOVERED, 1)


def _draw_markers(out, markers, f):
    """Outline each marker (ids (N,), corners (N, 4, 2) reference px) with its id."""
    ids, quads = markers
    for k, quad in zip(np.asarray(ids, int).ravel(), np.asarray(quads, float).reshape(-1, 4, 2)):
        if not np.isfinite(quad).all():
            continue
        pts = _at(quad, f)
        cv2.polylines(out, [pts.reshape(-1, 1, 2)], True, MARKER, 1, cv2.LINE_8)
        (tw, th), _ = cv2.getTextSize(str(k), _FONT, 0.35, 1)
        cx, cy = pts.mean(axis=0)
        cv2.putText(out, str(k), (int(cx - tw / 2), int(cy + th / 2)), _FONT, 0.35, MARKER, 1,
                    cv2.LINE_AA)


__all__ = ['draw_detections', 'corner_quality', 'guidance_lines', 'picture_scale',
           'picture_shape', 'region_names', 'uncovered_regions', 'GREEN', 'YELLOW', 'RED',
           'OUTLINE', 'SUGGESTED', 'MARKER', 'UNCOVERED', 'QUALITY_COLOURS', 'REGION_NAMES']
