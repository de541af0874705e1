"""
A quick look for the board in one 2-D image: what a live picture can afford at camera rate.

OpenCV's classic ``findChessboardCorners`` with ``CALIB_CB_FAST_CHECK`` on the image upsampled
as the calibration's detector does (:mod:`lf_mpc_calib.features.corners`), refined with
``cornerSubPix`` and labelled like it (:func:`~lf_mpc_calib.features.corners.
resolve_orientation`). On a Lytro central view (331 x 382 px) it takes a few ms, with or
without a board in sight, where the calibration's ``findChessboardCornersSB`` search takes
0.1-0.4 s with a board and up to 1.6 s without (``benchmarks/bench_detections.py``). For
pictures only: captures use the full detector.
"""

from dataclasses import dataclass

import cv2
import numpy as np

from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.features.corners import resolve_orientation

_FLAGS = cv2.CALIB_CB_FAST_CHECK | cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE


@dataclass(frozen=True, eq=False)
class QuickLook:
    """corners (C, 2) pixels of the image in board order (rows of ``board.cols``; a ChArUco
    board's: NaN for the corners not seen), or None; reason: why there are none ('' when
    found); marker_ids (N,), marker_corners (N, 4, 2) px: a ChArUco board's markers read
    (None for a checkerboard)."""

    corners: np.ndarray
    reason: str = ''
    marker_ids: np.ndarray = None
    marker_corners: np.ndarray = None

    @property
    def found(self):
        """Corners found (int)."""
        if self.corners is None or self.reason:
            return 0
        return int(np.count_nonzero(np.isfinite(self.corners).all(axis=1)))


def _stretched(img):
    """uint8 image between the 0.5 and 99.5 percentiles of ``img``."""
    lo, hi = np.percentile(img, (0.5, 99.5))
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return np.clip((img - lo) * scale, 0, 255).astype(np.uint8)


def quick_corners(image, board, *, min_size=480):
    """
    A :class:`QuickLook` for ``board`` (a Checkerboard) in ``image`` (rows, cols) float: the
    image is upsampled by an integer factor to ``min_size`` px (shorter side, at most 4x). A
    ChArUco board: :func:`quick_charuco`.
    """
    img = np.asarray(image, dtype=np.float32)
    if img.ndim != 2:
        raise ValueError(f'image must be 2-D (rows, cols), got shape {img.shape}')
    if getattr(board, 'board_type', 'checkerboard') == 'charuco':
        return quick_charuco(img, board)
    img = np.where(np.isfinite(img), img, 0.0).astype(np.float32)
    u8 = _stretched(img)
    f = int(np.clip(np.ceil(min_size / max(min(u8.shape), 1)), 1, 4))
    big = u8 if f == 1 else cv2.resize(u8, None, fx=f, fy=f, interpolation=cv2.INTER_CUBIC)
    found, corners = cv2.findChessboardCorners(big, (board.cols, board.rows), flags=_FLAGS)
    if not found:
        return QuickLook(None, f'no {board.cols}x{board.rows} board in sight')
    corners = cv2.cornerSubPix(
        big, corners, (2 * f + 1, 2 * f + 1), (-1, -1),
        (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 0.01))
    uv = (corners.reshape(-1, 2).astype(float) + 0.5) / f - 0.5
    try:
        grid = resolve_orientation(img, uv.reshape(board.rows, board.cols, 2), board)
    except DetectionError as exc:
        return QuickLook(uv, f'board seen but not labelled: {exc}')
    return QuickLook(grid.reshape(-1, 2), '')


def quick_charuco(image, board, *, min_size=480):
    """
    A :class:`QuickLook` for a ChArUco ``board`` in ``image`` (rows, cols): the markers read
    and the corners they name (:func:`lf_mpc_calib.features.charuco.read_charuco`, upsampled
    to ``min_size`` px, half the capture's), any part of the board; corners (C, 2) NaN where
    not seen. Markers of another board give no corners and the reason (ids seen, dictionary
    expected), the markers read kept for the picture.
    """
    from lf_mpc_calib.features.charuco import read_charuco
    try:
        ids, uv, m_ids, quads = read_charuco(image, board, min_size=min_size)
    except DetectionError as exc:
        return QuickLook(None, str(exc))
    corners = np.full((board.n_points, 2), np.nan)
    corners[ids] = uv
    reason = '' if len(ids) else f'{len(m_ids)} markers but no corner between them'
    return QuickLook(corners, reason, m_ids, quads)


__all__ = ['QuickLook', 'quick_charuco', 'quick_corners']
