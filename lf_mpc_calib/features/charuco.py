"""
ChArUco boards: corners named by the markers around them, in one 2-D image.

:func:`find_charuco` runs ``cv2.aruco.CharucoDetector`` on an image (small images, such as a
Lytro's sub-aperture views, upsampled first) and returns the corner ids, which are the board's
point indices (``row * cols + col``, :class:`lf_mpc_calib.camera.board.CharucoBoard`), with
their pixels. The markers name the corners, so a board partly out of view counts and the
numbering has no 180-degree ambiguity.

Before any corner is believed the markers are checked against the configured board, and a
frame that fails is refused with the reason (:class:`BoardMismatchError`): ids the board does
not have (another size, or another board), an id seen twice (two boards in one view), markers
not where the board has them (another layout or board size: a homography of the board's marker
corners onto the image leaves them more than a tenth of a marker away), or no marker of the
configured dictionary while markers of another are seen. A ChArUco board given as a
checkerboard is told by :func:`markers_seen` (used when a checkerboard is not found).
"""

import cv2
import numpy as np

from lf_mpc_calib.errors import DetectionError

MIN_MARKERS = 2
"""Fewest markers a view needs (the corners between them are named by them)."""
MAX_MARKER_ERROR = 0.35
"""Largest distance (marker sides) of a marker corner from the board's homography."""
OTHER_DICTIONARIES = ('DICT_4X4_250', 'DICT_5X5_250', 'DICT_6X6_250', 'DICT_7X7_250',
                      'DICT_ARUCO_ORIGINAL', 'DICT_APRILTAG_36h11')
"""Dictionaries looked for to say what a refused frame shows instead."""


class BoardMismatchError(DetectionError):
    """The image shows markers of another board than the configured one: refuse the frame."""


def find_charuco(image, board, *, min_size=960, min_corners=6):
    """
    ChArUco corners of ``board`` in a 2-D image.

    Returns (ids (K,) int, the board's point indices, ascending; uv (K, 2) float pixels of
    ``image``). Raises BoardMismatchError for markers of another board (reason, ids seen,
    dictionary expected) and DetectionError when fewer than ``min_corners`` corners are found.
    """
    ids, uv, m_ids, _ = read_charuco(image, board, min_size=min_size)
    if len(ids) < min_corners:
        raise DetectionError(f'{len(ids)} ChArUco corners found from {len(m_ids)} markers of '
                             f'{board.dictionary} (need {min_corners})')
    return ids, uv


def read_charuco(image, board, *, min_size=960):
    """
    The markers of ``board`` in a 2-D image and the corners they name, checked against the
    board (:func:`check_markers`).

    Returns (ids (K,) int ascending, uv (K, 2) px, marker_ids (N,) int, marker_corners
    (N, 4, 2) px), pixels of ``image``; K may be 0. Raises BoardMismatchError for markers of
    another board and DetectionError with fewer than MIN_MARKERS markers.
    """
    img = _as_uint8(image)
    factor = max(1, int(np.ceil(min_size / max(1, min(img.shape)))))
    big = cv2.resize(img, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC) \
        if factor > 1 else img
    corners, ids, m_corners, m_ids = _detector(board).detectBoard(big)
    m_ids = np.empty(0, int) if m_ids is None else m_ids.ravel().astype(int)
    m_corners = [np.asarray(c, float).reshape(4, 2) for c in (m_corners or ())]
    if len(m_ids) < MIN_MARKERS:
        raise _no_markers(big, board, m_ids)
    check_markers(board, m_ids, m_corners)
    quads = (np.asarray(m_corners, float).reshape(-1, 4, 2) + 0.5) / factor - 0.5
    if ids is None or not len(ids):
        return np.empty(0, int), np.empty((0, 2)), m_ids, quads
    ids = ids.ravel().astype(int)
    uv = (corners.reshape(-1, 2).astype(float) + 0.5) / factor - 0.5
    order = np.argsort(ids)
    return ids[order], uv[order], m_ids, quads


def _detector(board):
    """A CharucoDetector of ``board`` that also reads markers down to 1 % of the image."""
    params = cv2.aruco.DetectorParameters()
    params.minMarkerPerimeterRate = 0.01
    return cv2.aruco.CharucoDetector(board.cv_board(), cv2.aruco.CharucoParameters(), params)


def check_markers(board, m_ids, m_corners):
    """
    Raise BoardMismatchError unless the markers (ids (N,), corners list of (4, 2) px) are
    those of ``board``, each once, where the board has them. One id the board lacks among
    several of its own is taken for a misread (blurred views decode one now and then) and
    left out; two or more refuse.
    """
    own = (m_ids >= 0) & (m_ids < board.n_markers)
    foreign = sorted(set(m_ids[~own].tolist()))
    if len(foreign) == 1 and own.sum() >= 4:
        m_ids = m_ids[own]
        m_corners = [c for c, k in zip(m_corners, own) if k]
        foreign = []
    if foreign:
        raise BoardMismatchError(
            f'markers {_ids(foreign)} of {board.dictionary} are not on the configured '
            f'{board.cols}x{board.rows} ChArUco board (ids 0-{board.n_markers - 1}): another '
            f'board size or another board in view (ids seen: {_ids(sorted(m_ids))})')
    values, counts = np.unique(m_ids, return_counts=True)
    if np.any(counts > 1):
        raise BoardMismatchError(
            f'markers {_ids(values[counts > 1])} of {board.dictionary} seen twice: two boards '
            f'in one view (ids seen: {_ids(sorted(m_ids))})')
    if len(m_ids) >= 2:
        _check_layout(board, m_ids, m_corners)
    return m_ids, m_corners


def _check_layout(board, m_ids, m_corners):
    """Markers where the board has them: a homography of their board corners onto the image."""
    obj = board.cv_board().getObjPoints()
    src = np.concatenate([np.asarray(obj[k], float)[:, :2] for k in m_ids])
    dst = np.concatenate([np.asarray(c, float) for c in m_corners])
    h, _ = cv2.findHomography(src, dst, 0)
    if h is None:
        raise BoardMismatchError(f'markers {_ids(sorted(m_ids))} of {board.dictionary} do '
                                 'not fit one plane of the configured board')
    proj = cv2.perspectiveTransform(src.reshape(-1, 1, 2), h).reshape(-1, 2)
    side = np.median([np.linalg.norm(c[1] - c[0]) for c in m_corners])
    err = np.linalg.norm(proj - dst, axis=1).reshape(-1, 4).max(axis=1) / max(side, 1e-9)
    if np.max(err) > MAX_MARKER_ERROR:
        bad = np.asarray(m_ids)[err > MAX_MARKER_ERROR]
        raise BoardMismatchError(
            f'markers {_ids(sorted(bad))} of {board.dictionary} are not where the configured '
            f'{board.cols}x{board.rows} board ({board.layout} layout) has them '
            f'({np.max(err):.2f} marker sides off; ids seen: {_ids(sorted(m_ids))}): another '
            'board size or layout, or a mirrored or reprinted board')


def markers_seen(image, *, dictionaries=OTHER_DICTIONARIES, min_markers=3):
    """
    '(dictionary): ids ...' of the first dictionary whose markers are seen in ``image``
    (``min_markers`` or more), or None: why a checkerboard search may fail.
    """
    img = _as_uint8(image)
    if min(img.shape) < 480:
        f = int(np.ceil(480 / max(1, min(img.shape))))
        img = cv2.resize(img, None, fx=f, fy=f, interpolation=cv2.INTER_CUBIC)
    for name in dictionaries:
        d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, name))
        _, ids, _ = cv2.aruco.ArucoDetector(d).detectMarkers(img)
        if ids is not None and len(ids) >= min_markers:
            return f'{name}: ids {_ids(sorted(ids.ravel().tolist()))}'
    return None


def _no_markers(img, board, m_ids):
    seen = markers_seen(img, dictionaries=[d for d in OTHER_DICTIONARIES
                                           if d != board.dictionary])
    if seen:
        return BoardMismatchError(
            f'no marker of the configured dictionary {board.dictionary} found '
            f'({len(m_ids)} seen), but markers of {seen}: a board of another dictionary')
    return DetectionError(f'{len(m_ids)} markers of {board.dictionary} found (need '
                          f'{MIN_MARKERS}): no ChArUco board of that dictionary in view')


def _ids(ids, limit=12):
    ids = [int(i) for i in ids]
    text = ', '.join(str(i) for i in ids[:limit])
    return f'[{text}{", ..." if len(ids) > limit else ""}]'


def _as_uint8(img):
    img = np.asarray(img, dtype=np.float64)
    if img.ndim != 2:
        raise DetectionError(f'a ChArUco search needs a 2-D image, got shape {img.shape}')
    finite = img[np.isfinite(img)]
    lo, hi = (np.percentile(finite, (0.5, 99.5)) if finite.size else (0.0, 1.0))
    scaled = (np.nan_to_num(img, nan=lo) - lo) / max(hi - lo, 1e-12)
    return np.clip(np.rint(scaled * 255.0), 0, 255).astype(np.uint8)


MASK_PAD = 0.2
"""Markers are painted over this share of their gap to the square's edge beyond their side."""


def mask_markers(image, board, ids, uv):
    """
    ``image`` (H, W) float32 with the board's markers painted over in the local light level.

    ids (K,), uv (K, 2): corners found (at least 4). The markers, placed by the homography of
    the board through those corners and grown by MASK_PAD of their gap to the square's edge,
    are filled with the 90th percentile of the white margin around them (the margin's median
    is darkened by the markers' blur: 0.09 against 0.075 px RMS on a partial Lytro pose), so
    that cornerSubPix sees
    the checkerboard alone near every corner (a marker's edges 0.125 square from a corner pull
    it by up to 0.3 px in small blurred views).
    """
    img = np.array(image, dtype=np.float32)
    if len(ids) < 4:
        return img
    h_mat, _ = cv2.findHomography(board.points()[ids, :2], np.asarray(uv, np.float64), 0)
    if h_mat is None:
        return img
    gap = 0.5 * (board.square - board.marker)
    half = 0.5 * board.marker + MASK_PAD * gap
    band = 0.5 * board.marker + 0.5 * gap
    obj = board.cv_board().getObjPoints()
    for k in range(board.n_markers):
        centre = np.asarray(obj[k], float)[:, :2].mean(axis=0) - board.square
        quad = centre + half * np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float)
        ring = centre + band * np.array([[-1, 0], [1, 0], [0, -1], [0, 1],
                                         [-1, -1], [1, -1], [1, 1], [-1, 1]], float)
        px = cv2.perspectiveTransform(np.vstack([quad, ring]).reshape(-1, 1, 2),
                                      h_mat).reshape(-1, 2)
        r = np.rint(px[4:]).astype(int)
        inside = (r[:, 0] >= 0) & (r[:, 0] < img.shape[1]) & (r[:, 1] >= 0) & \
            (r[:, 1] < img.shape[0])
        if not inside.any():
            continue
        level = float(np.percentile(img[r[inside, 1], r[inside, 0]], 90))
        cv2.fillConvexPoly(img, np.rint(px[:4] * 16).astype(np.int32), level,
                           lineType=cv2.LINE_AA, shift=4)
    return img


def charuco_grid(image, board, *, min_corners=6):
    """
    The board's inner corners (rows, cols, 2) px in a 2-D image (a focused camera's rendered
    image), named by the markers: those found where found, every other predicted by the
    homography of the board through the found ones (the micro-images then tell which are seen).

    Raises BoardMismatchError / DetectionError as :func:`find_charuco`.
    """
    ids, uv = find_charuco(image, board, min_corners=max(4, min_corners))
    h_mat, _ = cv2.findHomography(board.points()[ids, :2], uv, 0)
    if h_mat is None:
        raise DetectionError(f'the {len(ids)} ChArUco corners found do not fit one plane')
    grid = cv2.perspectiveTransform(board.points()[:, None, :2], h_mat).reshape(-1, 2)
    grid[ids] = uv
    return grid.reshape(board.rows, board.cols, 2)
