"""
Checkerboard corners across the sub-aperture views of a conventional light-field camera.

1. The board is found in the central view with OpenCV's ``findChessboardCornersSB`` (views of
   a Lytro are ~330 px, so small views are upsampled first).
2. The labelling is made unambiguous: among the proper relabellings of the corner grid
   (identity and 180 degrees; also +-90 degrees for square boards) only those whose square
   colours match ``board.first_square`` are kept — this rejects a grid found one square off —
   and of those the one whose board x axis points most to the image's right wins, so
   symmetric boards are labelled the same way in every pose.
3. Every corner is refined with ``cornerSubPix`` in every usable view, views taken ring by
   ring outwards from the centre. The seed comes from the MPC model: a board point moves
   linearly across views (NOTES §1: u = u_c + a i + b j, v = v_c + c i + d j), so each
   corner's line is fitted to the views found so far and predicts the next ring.
4. A robust line fit per corner drops the views inconsistent with it (that corner only).

Views are taken from a decoded light field: ``views`` (n_j, n_i, rows, cols) indexed
[j_index, i_index, v, u], ``i_values`` (n_i,), ``j_values`` (n_j,) view indices relative to
the central view, ``valid`` (n_j, n_i), and ``ijuv_of(j_index, i_index, uv (N, 2)) -> (N, 4)``.
"""

from dataclasses import dataclass

import cv2
import numpy as np

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.interface import Detection
from lf_mpc_calib.camera.observations import Observations


@dataclass(frozen=True, eq=False)
class CornerOptions:
    """
    Options of the corner detector.

    min_view_size: views smaller than this (pixels, shorter side) are upsampled for the
    board search; window: cornerSubPix half window in pixels (None: from the corner spacing);
    max_step: largest move (px) of a refined corner from its prediction;
    line_threshold: residual (px) from a corner's line beyond which a view is dropped
    (the threshold is max(line_threshold, 4 robust sigmas)); min_views: fewest views a
    corner needs to be kept; min_contrast: least contrast (fraction of the central view's)
    for a view to be used; colour_check: match square colours with ``board.first_square``;
    subpix_upsample: views are upsampled by this factor for cornerSubPix (2 halves its
    pixel-phase bias on small blurred views); min_corners: fewest corners a ChArUco pose
    counts with (a checkerboard is always found whole).
    """

    min_view_size: int = 480
    window: int = None
    max_step: float = 1.5
    line_threshold: float = 0.3
    min_views: int = 4
    min_contrast: float = 0.25
    colour_check: bool = True
    subpix_upsample: int = 2
    smooth_sigma: float = 1.0
    max_grid_error: float = 0.15
    margin_check: bool = True
    min_corners: int = 6


MIN_CORNERS_A_SIDE = 3
"""Fewest inner corners a side of a checkerboard OpenCV's detectors find (findChessboardCornersSB
refuses a smaller pattern with an error every frame)."""


def check_detectable(board, name='board'):
    """InvalidInputError for a checkerboard ``board`` (cols x rows inner corners) with fewer
    than MIN_CORNERS_A_SIDE corners a side; a ChArUco board (its markers name the corners)
    passes."""
    if getattr(board, 'board_type', 'checkerboard') == 'charuco':
        return
    if min(board.cols, board.rows) < MIN_CORNERS_A_SIDE:
        raise InvalidInputError(
            f'{name} {board.cols}x{board.rows}: a checkerboard needs at least '
            f'{MIN_CORNERS_A_SIDE} x {MIN_CORNERS_A_SIDE} inner corners (OpenCV finds none '
            f'with fewer a side), got {board.cols}x{board.rows}')


def _as_uint8(img):
    """Stretch a float image to uint8 between its 0.5 and 99.5 percentiles."""
    lo, hi = np.percentile(img, (0.5, 99.5))
    if hi <= lo:
        hi = lo + 1e-6
    return np.clip((img - lo) * (255.0 / (hi - lo)), 0, 255).astype(np.uint8)


def _sb_grids(img, board, min_size):
    """
    Yield (rows, cols, 2) grids found by findChessboardCornersSB under several settings: the
    plain search at each upsampling factor (the one reaching ``min_size`` first, then the
    smaller, then the larger) before the exhaustive one (2-3 x slower) at each. Where the
    first factor failed, the smaller one often finds the board (focused renders: 0.2 s
    against 3.7 s for the exhaustive and larger searches first).
    """
    u8 = _as_uint8(img)
    base = int(np.clip(np.ceil(min_size / min(u8.shape)), 1, 4))
    scaled = {}
    for flags in (cv2.CALIB_CB_NORMALIZE_IMAGE,
                  cv2.CALIB_CB_NORMALIZE_IMAGE | cv2.CALIB_CB_EXHAUSTIVE):
        for factor in dict.fromkeys((base, max(base - 1, 1), min(base + 1, 5))):
            if factor not in scaled:
                scaled[factor] = u8 if factor == 1 else cv2.resize(
                    u8, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC)
            found, corners = cv2.findChessboardCornersSB(scaled[factor],
                                                         (board.cols, board.rows), flags=flags)
            if found:
                uv = (corners.reshape(-1, 2).astype(float) + 0.5) / factor - 0.5
                yield uv.reshape(board.rows, board.cols, 2)


def quick_find_board(image, board, *, square_px, max_grid_error=0.15):
    """
    The board's inner corners (rows, cols, 2) in a 2-D image, by one findChessboardCornersSB
    call after OpenCV's fast check (checkChessboard, about 1 ms), or None: for a search that
    must stay cheap where there is no board (:func:`find_board` tries six settings, about a
    second each on a textured image without a board). The image is upsampled so that a square
    of ``square_px`` px becomes at least 12 px (factor 1-4); labels unresolved, as find_board.
    """
    u8 = _as_uint8(np.asarray(image, dtype=np.float32))
    factor = int(np.clip(np.ceil(12.0 / max(float(square_px), 1e-6)), 1, 4))
    big = u8 if factor == 1 else cv2.resize(u8, None, fx=factor, fy=factor,
                                            interpolation=cv2.INTER_CUBIC)
    pattern = (board.cols, board.rows)
    if not cv2.checkChessboard(big, pattern):
        return None
    found, corners = cv2.findChessboardCornersSB(big, pattern, flags=cv2.CALIB_CB_NORMALIZE_IMAGE)
    if not found:
        return None
    grid = ((corners.reshape(-1, 2).astype(float) + 0.5) / factor - 0.5).reshape(
        board.rows, board.cols, 2)
    return grid if grid_error(grid, board) <= max_grid_error else None


def grid_error(grid, board):
    """
    How far a (rows, cols, 2) corner grid is from a perspective image of the board.

    Returns the largest distance (px) of a corner from the homography fitted to all of them,
    as a fraction of the smallest corner spacing (a true board: a few hundredths; a corner of
    another board row or a spurious one: 0.2 or more).
    """
    rc = np.mgrid[0:board.rows, 0:board.cols].reshape(2, -1).T[:, ::-1].astype(np.float64)
    uv = grid.reshape(-1, 2).astype(np.float64)
    H, _ = cv2.findHomography(rc, uv, 0)
    if H is None:
        return np.inf
    proj = cv2.perspectiveTransform(rc.reshape(-1, 1, 2), H).reshape(-1, 2)
    spacing = np.concatenate([np.linalg.norm(grid[:, 1:] - grid[:, :-1], axis=-1).ravel(),
                              np.linalg.norm(grid[1:] - grid[:-1], axis=-1).ravel()])
    return float(np.max(np.linalg.norm(proj - uv, axis=1)) / max(np.min(spacing), 1e-9))


def find_board(image, board, *, min_size=480, max_grid_error=0.15):
    """
    Find the board's inner corners in one 2-D image with findChessboardCornersSB.

    Small images are upsampled to ``min_size`` px first; several upsampling factors and flags
    are tried and a grid is accepted only when it is a perspective image of the board
    (:func:`grid_error` below ``max_grid_error``). Returns (rows, cols, 2) pixels in
    OpenCV's (unresolved) order; raises DetectionError.
    """
    for grid in _board_candidates(image, board, min_size, max_grid_error):
        return grid
    raise _not_found(image, board)


def _board_candidates(image, board, min_size, max_grid_error):
    img = np.asarray(image, dtype=np.float32)
    if img.ndim != 2:
        raise InvalidInputError(f'image must be 2-D (rows, cols), got shape {img.shape}')
    for grid in _sb_grids(img, board, min_size):
        if grid_error(grid, board) <= max_grid_error:
            yield grid


def _not_found(image, board, extra=''):
    h, w = np.shape(image)[:2]
    return DetectionError(
        f'no checkerboard of {board.cols}x{board.rows} inner corners found in the central '
        f'view ({w}x{h} px){extra}')


def _sample(img, uv):
    """Bilinear samples of img at uv (N, 2) (3x3 box-averaged), NaN outside."""
    h, w = img.shape
    blurred = cv2.blur(img, (3, 3))
    u, v = uv[:, 0], uv[:, 1]
    ok = (u >= 0) & (v >= 0) & (u <= w - 1) & (v <= h - 1)
    out = np.full(len(uv), np.nan)
    u0 = np.clip(np.floor(u[ok]).astype(int), 0, w - 2)
    v0 = np.clip(np.floor(v[ok]).astype(int), 0, h - 2)
    fu, fv = u[ok] - u0, v[ok] - v0
    out[ok] = (blurred[v0, u0] * (1 - fu) * (1 - fv) + blurred[v0, u0 + 1] * fu * (1 - fv)
               + blurred[v0 + 1, u0] * (1 - fu) * fv + blurred[v0 + 1, u0 + 1] * fu * fv)
    return out


def _relabellings(grid, board):
    """Proper relabellings of a (rows, cols, 2) grid: identity, 180 deg, (+-90 if square)."""
    # Make the labelling right-handed first: board x to board y turns clockwise on screen
    # (image y down), as for a board seen from the front with z pointing into it.
    dx = np.nanmean(grid[:, 1:] - grid[:, :-1], axis=(0, 1))
    dy = np.nanmean(grid[1:] - grid[:-1], axis=(0, 1))
    if dx[0] * dy[1] - dx[1] * dy[0] < 0:
        grid = grid[:, ::-1]
    out = [grid, grid[::-1, ::-1]]
    if board.cols == board.rows:
        rot = np.transpose(grid, (1, 0, 2))[:, ::-1]
        out += [rot, rot[::-1, ::-1]]
    return out


def resolve_orientation(image, grid, board, *, colour_check=True, margin_check=True):
    """
    Label a detected (rows, cols, 2) corner grid consistently with ``board``.

    Returns the relabelled grid; raises DetectionError when the square colours match no
    proper labelling (a grid one square off, or the wrong ``first_square``), or, with
    ``margin_check``, when the band half a square beyond the outer squares is not light
    everywhere it is seen (the grid is part of a larger board).
    """
    img = np.asarray(image, dtype=np.float32)
    candidates = _relabellings(grid, board)
    if colour_check:
        kept = []
        rr, cc = np.mgrid[0:board.rows - 1, 0:board.cols - 1]
        black_expected = ((rr + cc) % 2 == 0) == (board.first_square == 'black')
        contrasts = []
        for g in candidates:
            centres = 0.25 * (g[:-1, :-1] + g[:-1, 1:] + g[1:, :-1] + g[1:, 1:])
            vals = _sample(img, centres.reshape(-1, 2)).reshape(rr.shape)
            dark = np.nanmedian(vals[black_expected])
            light = np.nanmedian(vals[~black_expected])
            spread = np.nanmax(vals) - np.nanmin(vals)
            contrast = (light - dark) / spread if spread > 0 else 0.0
            contrasts.append(contrast)
            # Every square, not only most, must have its colour: a grid with one row off
            # the board has squares of neither colour there.
            mid = 0.5 * (dark + light)
            every = np.all(vals[black_expected] < mid) and np.all(vals[~black_expected] > mid)
            if contrast > 0.5 and every:
                kept.append(g)
        if not kept:
            raise DetectionError(
                f'square colours do not match the board (first_square={board.first_square!r},'
                f' colour contrast of the labellings {np.round(contrasts, 2).tolist()}): the '
                'corners found may be one square off or the board is not the one given')
        candidates = kept
        if margin_check:
            _check_margin(img, grid, board, contrasts)
    best, score = None, -np.inf
    for g in candidates:
        dx = np.nanmean(g[:, 1:] - g[:, :-1], axis=(0, 1))
        dy = np.nanmean(g[1:] - g[:-1], axis=(0, 1))
        s = dx[0] / np.hypot(*dx) + 1e-3 * dy[1] / np.hypot(*dy)
        if s > score:
            best, score = g, s
    return best


def _check_margin(img, grid, board, contrasts):
    """Raise DetectionError unless the board's border band (seen parts) is light."""
    cols, rows = board.cols, board.rows
    rc = np.mgrid[0:rows, 0:cols].reshape(2, -1).T[:, ::-1].astype(np.float64)
    H, _ = cv2.findHomography(rc, grid.reshape(-1, 2).astype(np.float64), 0)
    if H is None:
        return
    # Centres of the squares a larger board would have beside each side, pulled in to 0.35
    # of a square beyond the outer squares (inside any margin, clear of the background).
    d = 1.35
    xs = np.arange(-0.5, cols - 0.5 + 1e-9)
    ys = np.arange(-0.5, rows - 0.5 + 1e-9)
    sides = [np.column_stack([xs, np.full_like(xs, -d)]),
             np.column_stack([xs, np.full_like(xs, rows - 1 + d)]),
             np.column_stack([np.full_like(ys, -d), ys]),
             np.column_stack([np.full_like(ys, cols - 1 + d), ys])]
    inner = np.mgrid[0:rows - 1, 0:cols - 1].reshape(2, -1).T[:, ::-1] + 0.5
    pts = np.concatenate(sides + [inner])
    vals = _sample(img, cv2.perspectiveTransform(pts.reshape(-1, 1, 2), H).reshape(-1, 2))
    v_inner = vals[-len(inner):]
    black = (np.floor(inner[:, 0]) + np.floor(inner[:, 1])) % 2 == 0
    if board.first_square != 'black':
        black = ~black
    lo, hi = np.nanmedian(v_inner[black]), np.nanmedian(v_inner[~black])
    start = 0
    for name, side in zip(('top', 'bottom', 'left', 'right'), sides):
        v = vals[start:start + len(side)]
        start += len(side)
        seen = np.isfinite(v)
        dark = seen & (v < lo + 0.3 * (hi - lo))
        # Beside a larger board every other sample is a dark square; one dark sample alone
        # is a shadow or the background reaching in.
        if dark.sum() >= 2 and dark.sum() >= 0.3 * seen.sum():
            raise DetectionError(
                f'{int(dark.sum())} of {int(seen.sum())} samples beside the {name} side of the '
                f'board are dark squares: the {cols}x{rows} corners found are part of a larger '
                'board (or the board has no light margin: it needs a light border at least half a '
                'square wide around its outer squares)')


def smooth(img, sigma):
    """Gaussian pre-filter (sigma in pixels; 0: none) against resampling artefacts."""
    if not sigma:
        return img
    return cv2.GaussianBlur(img, (0, 0), float(sigma))


def window_for(grid, window):
    """cornerSubPix half window (px): ``window``, or 0.4 of the smallest corner spacing of
    the (rows, cols, 2) grid, within 2..9."""
    if window is not None:
        return int(window)
    spacing = np.concatenate([np.linalg.norm(grid[:, 1:] - grid[:, :-1], axis=-1).ravel(),
                              np.linalg.norm(grid[1:] - grid[:-1], axis=-1).ravel()])
    return int(np.clip(np.round(0.4 * np.nanmin(spacing)), 2, 9))


def refine_corners(img, uv, half, upsample=2):
    """cornerSubPix on img at uv (N, 2) -> (N, 2); NaN where the window leaves the image."""
    h, w = img.shape
    out = np.full_like(uv, np.nan)
    ok = np.all(np.isfinite(uv), axis=1)
    ok &= (uv[:, 0] >= half + 1) & (uv[:, 1] >= half + 1)
    ok &= (uv[:, 0] <= w - half - 2) & (uv[:, 1] <= h - half - 2)
    if not np.any(ok):
        return out
    f = int(upsample)
    if f > 1:
        img = cv2.resize(img, None, fx=f, fy=f, interpolation=cv2.INTER_CUBIC)
    pts = ((uv[ok] + 0.5) * f - 0.5).astype(np.float32).reshape(-1, 1, 2).copy()
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 40, 1e-3)
    cv2.cornerSubPix(img, pts, (half * f, half * f), (-1, -1), crit)
    out[ok] = (pts.reshape(-1, 2) + 0.5) / f - 0.5
    return out


def _local_contrast(img, uv, half):
    """Robust intensity range in the window around each uv (N, 2) -> (N,)."""
    h, w = img.shape
    out = np.zeros(len(uv))
    for k, (u, v) in enumerate(uv):
        if not np.isfinite(u):
            continue
        u0, v0 = int(round(u)), int(round(v))
        patch = img[max(v0 - half, 0):min(v0 + half + 1, h),
                    max(u0 - half, 0):min(u0 + half + 1, w)]
        if patch.size:
            lo, hi = np.percentile(patch, (10, 90))
            out[k] = hi - lo
    return out


def fit_lines(ij, uv, weights):
    """
    Per-corner least-squares lines uv = A [1, i, j] over views.

    ij (V, 2); uv (V, M, 2) with NaN where missing; weights (V, M) bool.
    Returns coefficients (M, 3, 2) and the number of views used (M,).
    """
    design = np.column_stack([np.ones(len(ij)), ij])
    w = weights.astype(float)
    data = np.where(weights[..., None], uv, 0.0)
    ata = np.einsum('vm,vk,vl->mkl', w, design, design)
    atb = np.einsum('vm,vk,vmc->mkc', w, design, data)
    count = weights.sum(axis=0)
    coef = np.full((uv.shape[1], 3, 2), np.nan)
    det = np.linalg.det(ata)
    scale = np.maximum(count, 1) ** 3
    full = (count >= 3) & (np.abs(det) > 1e-9 * scale)
    if full.any():
        coef[full] = np.linalg.solve(ata[full], atb[full])
    # Views along one line only (e.g. a single row of views so far): constant position.
    part = (count >= 1) & ~full
    if part.any():
        coef[part, 0] = atb[part, 0] / count[part, None]
        coef[part, 1:] = 0.0
    return coef, count


def detect_corners(lightfield, board, *, pose=0, options=None):
    """
    Corners of ``board`` in every usable view of one decoded light field.

    Returns a :class:`Detection` (observations with ``pose`` as their pose index, central-view
    corners for overlays, diagnostics: views used per corner, line residual RMS, drops).
    Raises DetectionError when the board is not found in the central view.

    Stages: the board in the central view (:func:`_find_in_central_view`), corners followed
    view by view outwards (:func:`_track_views`), corners kept on consistent lines across
    views (:func:`robust_lines`), observation rows (:func:`observation_rows`).
    """
    opt = options or CornerOptions()
    views, i_values, j_values, valid = checked_views(lightfield)
    n_j, n_i = views.shape[:2]
    jj, ii = np.meshgrid(j_values, i_values, indexing='ij')
    (jc, ic), central, grid = _find_in_central_view(views, valid, ii, jj, board, opt)
    half = window_for(grid, opt.window)
    m = board.n_points
    uv, found, stats = _track_views(views, valid, ii, jj, (jc, ic), central,
                                    grid.reshape(m, 2), half, opt)
    ij_all = np.column_stack([ii.ravel(), jj.ravel()]).astype(float)
    found, residual_rms, dropped = robust_lines(ij_all, uv, found, opt.line_threshold)
    stats['off_line'] = int(dropped)
    per_corner = found.sum(axis=0)
    enough = per_corner >= opt.min_views
    found &= enough[None, :]
    if not found.any():
        raise DetectionError('no corner was found consistently across views')

    obs = observation_rows(lightfield, board, pose, uv, found, n_i)
    central_uv = np.where(found[jc * n_i + ic][:, None], uv[jc * n_i + ic], np.nan)
    diagnostics = dict(stats)
    diagnostics.update({
        'views_used': int(np.count_nonzero(found.any(axis=1))),
        'views_available': int(np.count_nonzero(valid)),
        'corners_found': int(np.count_nonzero(found.any(axis=0))),
        'corners_total': m,
        'views_per_corner': per_corner.astype(int),
        'line_residual_rms_px': float(residual_rms),
        'window': half,
        'central_view': (int(i_values[ic]), int(j_values[jc])),
    })
    return Detection(obs, central_uv, central, diagnostics)


def checked_views(lightfield):
    """(views (n_j, n_i, rows, cols), i_values (n_i,), j_values (n_j,), valid (n_j, n_i)) of
    a decoded light field (RGB views averaged), or the error naming the mismatch."""
    views = np.asarray(lightfield.views)
    if views.ndim == 5 and views.shape[-1] == 3:  # RGB views of a Bayer camera: intensity
        views = views.mean(axis=-1, dtype=np.float32)
    if views.ndim != 4:
        raise InvalidInputError(
            f'lightfield.views must have shape (n_j, n_i, rows, cols), got {views.shape}')
    n_j, n_i = views.shape[:2]
    i_values = np.asarray(lightfield.i_values)
    j_values = np.asarray(lightfield.j_values)
    valid = np.asarray(getattr(lightfield, 'valid', np.ones((n_j, n_i), bool)), dtype=bool)
    if i_values.shape != (n_i,) or j_values.shape != (n_j,) or valid.shape != (n_j, n_i):
        raise InvalidInputError(
            f'i_values {i_values.shape}, j_values {j_values.shape}, valid {valid.shape} do '
            f'not match views {views.shape}')
    if not valid.any():
        raise DetectionError('no usable view in the light field')
    return views, i_values, j_values, valid


def _find_in_central_view(views, valid, ii, jj, board, opt):
    """((jc, ic) of the valid view closest to (0, 0), that view (rows, cols) float32, the
    board's corner grid (rows, cols, 2) found and oriented in it)."""
    dist = np.where(valid, np.hypot(ii, jj), np.inf)
    jc, ic = np.unravel_index(np.argmin(dist), dist.shape)
    central = views[jc, ic].astype(np.float32)
    grid, error = None, None
    for candidate in _board_candidates(central, board, opt.min_view_size, opt.max_grid_error):
        try:
            grid = resolve_orientation(central, candidate, board,
                                       colour_check=opt.colour_check,
                                       margin_check=opt.margin_check)
            break
        except DetectionError as exc:
            error = exc
    if grid is None:
        raise _with_markers(error or _not_found(central, board), central)
    return (jc, ic), central, grid


def _with_markers(error, image):
    """``error`` with, when ArUco markers are seen in ``image``, why: a ChArUco board."""
    from lf_mpc_calib.features.charuco import markers_seen
    seen = markers_seen(image)
    if seen is None:
        return error
    return DetectionError(f'{error}; the view shows ArUco markers ({seen}): a ChArUco board '
                          'given to a checkerboard configuration (board_type: charuco)')


def _track_views(views, valid, ii, jj, centre, central, seed, half, opt):
    """
    Corners refined in the central view from ``seed`` (M, 2), then in every other valid view,
    ring by ring outwards, from lines fitted through the views done so far.

    Returns uv (n_j * n_i, M, 2) NaN where not found, found (n_j * n_i, M) bool and the drop
    counts {'low_contrast', 'moved_too_far', 'off_line'}.
    """
    n_j, n_i = views.shape[:2]
    jc, ic = centre
    m = len(seed)
    # Per-view images, normalised so that thresholds are relative.
    order = sorted(((max(abs(ii[a, b] - ii[jc, ic]), abs(jj[a, b] - jj[jc, ic])),
                     np.hypot(ii[a, b] - ii[jc, ic], jj[a, b] - jj[jc, ic]), a, b)
                    for a in range(n_j) for b in range(n_i) if valid[a, b]))
    ij_all = np.column_stack([ii.ravel(), jj.ravel()]).astype(float)
    uv = np.full((n_j * n_i, m, 2), np.nan)
    found = np.zeros((n_j * n_i, m), bool)

    central_s = smooth(central, opt.smooth_sigma)
    uv_c = refine_corners(central_s, seed, half, opt.subpix_upsample)
    moved = np.linalg.norm(uv_c - seed, axis=1)
    keep = np.isfinite(moved) & (moved < opt.max_step)
    uv[jc * n_i + ic][keep] = uv_c[keep]
    found[jc * n_i + ic] = keep
    central_contrast = np.median(_local_contrast(central, uv_c[keep], half)) if keep.any() \
        else 0.0
    if not keep.any():
        raise DetectionError('no corner could be refined in the central view')

    coef = None
    ring = 0
    stats = {'low_contrast': 0, 'moved_too_far': 0, 'off_line': 0}
    for r, _, a, b in order[1:] if order and order[0][0] == 0 else order:
        if r != ring:
            ring = r
            coef, count = fit_lines(ij_all, uv, found)
        flat = a * n_i + b
        pred = _predict(coef, found, uv, ij_all, flat, uv[jc * n_i + ic])
        img = smooth(views[a, b].astype(np.float32), opt.smooth_sigma)
        ref = refine_corners(img, pred, half, opt.subpix_upsample)
        step = np.linalg.norm(ref - pred, axis=1)
        ok = np.isfinite(step) & (step < opt.max_step)
        stats['moved_too_far'] += int(np.count_nonzero(np.isfinite(pred[:, 0]) & ~ok))
        if ok.any() and opt.min_contrast > 0:
            con = _local_contrast(img, ref[ok], half)
            low = con < opt.min_contrast * central_contrast
            stats['low_contrast'] += int(np.count_nonzero(low))
            idx = np.flatnonzero(ok)
            ok[idx[low]] = False
        uv[flat][ok] = ref[ok]
        found[flat] = ok
    return uv, found, stats


def observation_rows(lightfield, board, pose, uv, found, n_i):
    """Observations of the found corners: view indices and pixels by ``lightfield.ijuv_of``."""
    rows = []
    board_pts = board.points()
    for flat in np.flatnonzero(found.any(axis=1)):
        a, b = divmod(flat, n_i)
        pts = np.flatnonzero(found[flat])
        ijuv = np.asarray(lightfield.ijuv_of(a, b, uv[flat, pts]), dtype=float)
        rows.append((pts, ijuv))
    point = np.concatenate([p for p, _ in rows])
    ijuv = np.concatenate([q for _, q in rows])
    return Observations(np.full(len(point), int(pose)), point, board_pts[point], ijuv)


def _predict(coef, found, uv, ij_all, flat, central_uv):
    """Predicted corners (M, 2) in view ``flat`` from the per-corner lines (or the centre)."""
    pred = central_uv.copy()
    if coef is None:
        return pred
    have = np.isfinite(coef[:, 0, 0])
    x = np.array([1.0, *ij_all[flat]])
    pred[have] = np.einsum('k,mkc->mc', x, coef[have])
    # Corners without a line yet: the central pixel moved by the median disparity of the
    # others (board points are close in depth).
    if have.any() and not have.all():
        slope = np.nanmedian(coef[have, 1:], axis=0)
        pred[~have] = central_uv[~have] + ij_all[flat] @ slope
    return pred


def robust_lines(ij_all, uv, found, threshold):
    """
    Drop views off each corner's line, iteratively.

    Returns (found (V, M), RMS residual of the kept rows, number of rows dropped).
    """
    found = found.copy()
    start = int(found.sum())
    design = np.column_stack([np.ones(len(ij_all)), ij_all])
    for _ in range(30):
        coef, count = fit_lines(ij_all, uv, found)
        pred = np.einsum('vk,mkc->vmc', design, coef)
        res = np.linalg.norm(np.where(found[..., None], uv - pred, np.nan), axis=-1)
        sigma = 1.4826 * np.nanmedian(res) if np.isfinite(res).any() else 0.0
        limit = max(threshold, 4.0 * sigma)
        bad = found & ~(res <= limit)
        if not bad.any():
            break
        # Drop only the worst offender per corner per round: one wrong view drags the line.
        worst = np.nanargmax(np.where(bad, res, -1.0), axis=0)
        cols = np.flatnonzero(bad.any(axis=0))
        found[worst[cols], cols] = False
    res_kept = res[found]
    rms = float(np.sqrt(np.mean(res_kept ** 2))) if res_kept.size else float('nan')
    return found, rms, start - int(found.sum())
