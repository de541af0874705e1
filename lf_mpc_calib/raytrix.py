"""
Real focused-camera observations of a Raytrix R12 (``shared/data/raytrix-r12a``) as an
observation table.

The dataset's CSV has one row per ray:
``frame, corner_id, board_x_m, board_y_m, lens_k, lens_l, lens_cx_px, lens_cy_px, u_px, v_px``
(the corner at raw pixel (u_px, v_px) inside micro-image (lens_k, lens_l) whose centre, detected
on a white image, is (lens_cx_px, lens_cy_px)). The conversion to the observation table follows
the focused-camera convention of :mod:`lf_mpc_calib.model`:

- pose = frame number (0-3, 5-15; not renumbered), point = corner_id,
  (X, Y, Z) = (board_x_m, board_y_m, 0);
- (i, j) = the micro-image centre in raw pixels, absolute (the detected centre, or with
  ``centres='grid'`` the node of the fitted hexagonal grid of the metadata);
- (u, v) = the corner's raw pixel minus that centre.

So a reprojection error in (u, v) is an error in raw pixels. Micro-lens types (three focal
lengths) follow the metadata's formula ``((l mod (I-1)) + k) mod I``.

Optional per-lens-type terms (:func:`calibrate_r12`): the MPC model has one (k_u, k_v, u_0,
v_0) for every micro-lens, but the three lens types of a multi-focus camera image at slightly
different scales. ``lens_type_terms='affine'`` models the measured offset of type T as
u' = (1 + a_T) u + d_T, v' = (1 + a_T) v + e_T (zero ray-weighted mean over types, so that the
global part stays in k_u, k_v, u_0, v_0) and estimates (a, d, e) by alternating with the
refinement: refine the MPC model on the corrected offsets, then fit (a, d, e) per type by linear
least squares to the predicted offsets, until the RMS stops falling. Each step lowers the same
sum of squares. The error is reported in raw pixels: residual / (1 + a_T).
"""

import dataclasses
from dataclasses import dataclass
import json
from pathlib import Path

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.observations import Observations

R12_COLUMNS = ('frame', 'corner_id', 'board_x_m', 'board_y_m', 'lens_k', 'lens_l',
               'lens_cx_px', 'lens_cy_px', 'u_px', 'v_px')
CENTRES = ('detected', 'grid')


@dataclass(frozen=True, eq=False)
class R12Dataset:
    """
    The R12 rays with what the observation table does not hold.

    observations Observations (N rows); lens_kl (N, 2) int micro-image index (k, l);
    lens_type (N,) int in 0..n_types-1; corner_px (N, 2) corner in raw pixels (absolute);
    image_size (width, height); lenslet_grid LensletGrid or None (from the metadata).
    """

    observations: Observations
    lens_kl: np.ndarray
    lens_type: np.ndarray
    corner_px: np.ndarray
    image_size: tuple
    lenslet_grid: LensletGrid = None


def lens_type(kl, n_types=3):
    """Micro-lens type (N,) of micro-image indices kl (N, 2): ((l mod (I-1)) + k) mod I."""
    kl = np.asarray(kl, dtype=np.int64).reshape(-1, 2)
    if n_types < 2:
        raise InvalidInputError(f'n_types must be >= 2, got {n_types}')
    return ((kl[:, 1] % (n_types - 1)) + kl[:, 0]) % n_types


def lenslet_grid_from_meta(meta):
    """
    Return the LensletGrid of the metadata's micro-image grid (``micro_images`` entry).

    The metadata's node formula c(k, l) = R [p_x (k + 0.5 [l even]), p_y l sin 60°] + t maps to
    origin = t, pitch = p_x, row_spacing = p_y sin 60°, rotation = angle of R's first column,
    hex_parity = 1 (even rows shifted).
    """
    mi = meta['micro_images']
    rows = np.array([[float(x) for x in r] for r in mi['pose_rotation_json']])
    rot = rows.T
    px, py = (float(x) for x in mi['pitch_px'])
    sensor = meta['sensor']
    return LensletGrid('hex', px, py * np.sin(np.pi / 3), float(np.arctan2(rot[1, 0], rot[0, 0])),
                       np.array(mi['pose_translation_px'], dtype=float),
                       (int(mi['width']), int(mi['height'])),
                       (int(sensor['width_px']), int(sensor['height_px'])), hex_parity=1)


def read_r12(csv_path, *, meta_path=None, centres='detected'):
    """
    Read the R12 CSV (and its ``r12a_meta.json``, by default beside it) into an R12Dataset.

    centres: 'detected' uses the micro-image centres of the CSV as (i, j); 'grid' the nodes of
    the metadata's regular hexagonal grid.
    """
    if centres not in CENTRES:
        raise InvalidInputError(f'centres must be one of {CENTRES}, got {centres!r}')
    csv_path = Path(csv_path)
    with open(csv_path) as f:
        header = [h.strip() for h in f.readline().split(',')]
    if tuple(header[:len(R12_COLUMNS)]) != R12_COLUMNS:
        raise InvalidInputError(
            f'{csv_path}: header must start with {",".join(R12_COLUMNS)}, got {",".join(header)}')
    a = np.loadtxt(csv_path, delimiter=',', skiprows=1, ndmin=2)
    if a.shape[1] < len(R12_COLUMNS):
        raise InvalidInputError(
            f'{csv_path}: expected {len(R12_COLUMNS)} columns, got {a.shape[1]}')
    meta_path = csv_path.with_name('r12a_meta.json') if meta_path is None else Path(meta_path)
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
    grid = lenslet_grid_from_meta(meta) if meta is not None else None
    n_types = int(meta['micro_lenses']['types_I']) if meta is not None else 3
    image_size = ((int(meta['sensor']['width_px']), int(meta['sensor']['height_px']))
                  if meta is not None else (4080, 3068))
    kl = a[:, 4:6].astype(np.int64)
    if centres == 'grid':
        if grid is None:
            raise InvalidInputError(f"centres='grid' needs the metadata file {meta_path}")
        centre = grid.centres_of(kl)
    else:
        centre = a[:, 6:8]
    corner = a[:, 8:10]
    board = np.column_stack([a[:, 2], a[:, 3], np.zeros(len(a))])
    obs = Observations(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), board,
                       np.column_stack([centre, corner - centre]))
    return R12Dataset(obs, kl, lens_type(kl, n_types), corner, image_size, grid)


def read_r12_observations(csv_path, *, centres='detected'):
    """Return only the observation table of :func:`read_r12`."""
    return read_r12(csv_path, centres=centres).observations


LENS_TYPE_TERMS = ('none', 'offset', 'affine')


@dataclass(frozen=True, eq=False)
class R12Calibration:
    """
    An MPC calibration of R12 data with optional per-lens-type terms.

    result: the CalibrationResult of the last refinement (on the corrected offsets);
    lens_type_terms: 'none' | 'offset' | 'affine'; scale (T,) the a_T; offset_px (T, 2) the
    (d_T, e_T); residuals_raw_px (N, 2) measured - predicted corner in raw pixels;
    rms_raw_px: sqrt(mean over rays of du^2 + dv^2) in raw pixels; rounds: alternations run.
    """

    result: object
    lens_type_terms: str
    scale: np.ndarray
    offset_px: np.ndarray
    residuals_raw_px: np.ndarray
    rms_raw_px: float
    rounds: int

    def lens_types_dict(self):
        """Plain mapping of the per-type terms (for the calibration file's ``lens_types``)."""
        return {'terms': self.lens_type_terms,
                'formula': "type = ((l mod (I-1)) + k) mod I; u' = (1 + scale) u + offset",
                'scale': [float(x) for x in self.scale],
                'offset_px': [[float(x) for x in row] for row in self.offset_px]}


def _fit_type_terms(uv, predicted, types, n_types, terms):
    """Per-type (a, d, e) with (1 + a) uv + (d, e) ~ predicted; zero ray-weighted mean."""
    a = np.zeros(n_types)
    off = np.zeros((n_types, 2))
    counts = np.bincount(types, minlength=n_types).astype(float)
    for t in range(n_types):
        m = types == t
        if not np.any(m):
            continue
        target = (predicted[m] - uv[m]).T.ravel()          # (2n,): all du then all dv
        n = int(m.sum())
        cols = [np.r_[np.ones(n), np.zeros(n)], np.r_[np.zeros(n), np.ones(n)]]
        if terms == 'affine':
            cols.insert(0, uv[m].T.ravel())
        x = np.linalg.lstsq(np.column_stack(cols), target, rcond=None)[0]
        if terms == 'affine':
            a[t], off[t] = x[0], x[1:]
        else:
            off[t] = x
    w = counts / counts.sum()
    return a - w @ a, off - w @ off


def calibrate_r12(data, *, lens_type_terms='affine', rounds=30, tol_px=1e-6, progress=None,
                  **options):
    """
    Calibrate an R12Dataset, optionally with per-lens-type terms (see the module docstring).

    options go to :func:`lf_mpc_calib.calibration.calibrate` (distortion, fix, loss, ...).
    progress(round, rms_raw_px): optional callback after each alternation.
    Returns an R12Calibration.
    """
    from lf_mpc_calib.calibration import calibrate, refine
    if lens_type_terms not in LENS_TYPE_TERMS:
        raise InvalidInputError(
            f'lens_type_terms must be one of {LENS_TYPE_TERMS}, got {lens_type_terms!r}')
    obs = data.observations
    types = np.asarray(data.lens_type, dtype=np.int64)
    n_types = int(types.max()) + 1 if types.size else 1
    uv = obs.ijuv[:, 2:]
    result = calibrate(obs, **options)
    a = np.zeros(n_types)
    off = np.zeros((n_types, 2))
    rms = result.rms_reprojection_px
    done = 0
    refine_options = {k: v for k, v in options.items()
                      if k in ('loss', 'f_scale', 'max_iterations', 'solver')}
    fixed = tuple(result.fixed)
    while lens_type_terms != 'none' and done < rounds:
        corrected = (1.0 + a[types])[:, None] * uv + off[types]
        predicted = corrected - result.residuals_px
        a_new, off_new = _fit_type_terms(uv, predicted, types, n_types, lens_type_terms)
        corrected = (1.0 + a_new[types])[:, None] * uv + off_new[types]
        obs_c = dataclasses.replace(obs, ijuv=np.column_stack([obs.ijuv[:, :2], corrected]))
        new = refine(obs_c, result, fix=fixed, **refine_options)
        done += 1
        new_rms = _raw_rms(new.residuals_px, a_new[types])
        if progress is not None:
            progress(done, new_rms)
        if new_rms > rms + 1e-12:
            break                                    # no further gain: keep the previous
        result, a, off = new, a_new, off_new
        improvement, rms = rms - new_rms, new_rms
        if improvement < tol_px:
            break
    residuals = result.residuals_px / (1.0 + a[types])[:, None]
    return R12Calibration(result, lens_type_terms, a, off, residuals,
                          _raw_rms(result.residuals_px, a[types]), done)


def _raw_rms(residuals, a):
    r = residuals / (1.0 + a)[:, None]
    return float(np.sqrt(np.mean(np.sum(r * r, axis=1))))
