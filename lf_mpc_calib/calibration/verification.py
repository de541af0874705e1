"""
Is a calibration right on captures it has not seen? Held-out captures measured with it.

Every held-out pose is measured with the calibrated model held:

- its board pose fitted on the reprojection error
  (:func:`~lf_mpc_calib.calibration.board_pose.fit_board_pose`): the RMS, against the
  calibration's own RMS (limit RMS_LIMIT x);
- every corner seen in >= 2 rays triangulated from its rays (Eq. 2-5) and the board fitted to
  those points with a free scale: the square-size error (scale - 1) x square and the flatness
  (RMS distance from their plane), in mm and in % of the board's distance;
- the board fitted with a free scale on the reprojection (:func:`fit_scaled_board`): the
  square-size error the pixels say best (a k_i 1 % off shows here, not in the RMS: the pose
  takes up most of it);
- with arm poses and the hand-eye mount, the board centre in the frame the arm holds still,
  across captures (:func:`base_spread`; a principal point 1 px off shows here: with a fitted
  pose alone it is a rotation of the board).

What the calibration predicts comes from its noise (its RMS, scaled by how much more its own
poses scatter in 3-D than independent noise says: :func:`noise_scale`) and its parameter
covariance: for the triangulated figures by sampling (the fitted board projected, noise added,
the corners triangulated with a model drawn from the covariance; one draw per sample shared by
all poses, so the overall figures keep the error common to every capture), for the fitted
scale and the board's spread by the fits' Jacobians and refits with each parameter stepped.

    v = verify_observations(obs, model, noise_px=cal_rms, covariance=(names, cov))
    v.passed, v.failures, v.summary(), v.to_dict()
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration.board_pose import fit_board_pose
from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES, triangulate
from lf_mpc_calib.camera.optical_frame import optical_origin
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError

RMS_LIMIT = 1.5
"""Largest accepted held-out RMS reprojection / the calibration's RMS (its noise); the
flatness (an RMS of the corners' scatter) passes up to this x its prediction too, or its
sampled mean + SIGMA_LIMIT sigma when larger: the noise model (independent pixel noise,
scaled by :func:`noise_scale`) predicts it to tens of per cent, not to its sampled spread."""
SIGMA_LIMIT = 3.0
"""3-D figures pass within expectation +- this many predicted standard deviations."""
SAMPLES = 48
"""Draws of noise and parameters for the predicted spreads."""
NOISE_SAMPLES = 16
"""Draws for the flatness prediction of the calibration's poses (:func:`noise_scale`)."""
ROBOT_ACCURACY_MM = 0.1
"""Robot pose accuracy (mm, RMS) added in quadrature to the spread the noise predicts."""
SPREAD_LIMIT = 1.6
"""The board's spread passes up to this x its prediction (~ the 99.9 % point of its chi
distribution for 3 (k - 1) = 15 degrees of freedom, 6 captures)."""
NOISE_POSES = 8
"""Calibration poses measured for :func:`noise_scale` (spread over them) at most."""
SAME_ROWS = 0.9
"""Share of rows with the same corner and view for two poses to be one frame's detections."""
SAME_UV_PX = 0.02
"""Median (u, v) difference (px) below which those rows are the same detections: a frame
detected again differs by up to 0.005 px (rendered focused data set: calibrate-raw detects
twice), another capture of the same pose by its noise (~0.1 px)."""
SAME_POSE_M = 1e-6
"""A fitted pose this close (m, rad) to one of the calibration's is that capture, reused."""


@dataclass(frozen=True, eq=False)
class PoseCheck:
    """
    One held-out pose measured. rays, corners: observations and corners triangulated;
    distance_m: of the corners' centroid from the optical frame's origin (a focused camera's
    main lens); rms_px: reprojection RMS with the board pose fitted;
    square_error_mm, flatness_mm: measured; square_expected_mm, square_spread_mm: sampled mean
    (triangulation's bias) and standard deviation of the square error (noise and covariance),
    square_cal_spread_mm: the covariance's part alone;
    flatness_expected_mm, flatness_spread_mm: sampled mean and standard deviation of the
    flatness; fitted_square_error_mm, fitted_square_noise_mm: the square error of the board
    fitted with a free scale on the reprojection (:func:`fit_scaled_board`) and its standard
    deviation from the noise; rotation_vector (3,), translation (3,): the fitted board pose
    (board -> camera).
    """

    pose: int
    rays: int
    corners: int
    distance_m: float
    rms_px: float
    square_error_mm: float
    flatness_mm: float
    square_expected_mm: float
    square_spread_mm: float
    square_cal_spread_mm: float
    flatness_expected_mm: float
    flatness_spread_mm: float
    fitted_square_error_mm: float
    fitted_square_noise_mm: float
    rotation_vector: np.ndarray
    translation: np.ndarray

    def line(self):
        """One line of the pose's figures."""
        d = self.distance_m * 1e3
        return (f'pose {self.pose}: {self.rays} rays, {self.corners} corners at {d:.0f} mm: '
                f'RMS {self.rms_px:.3f} px; square {self.square_error_mm:+.4f} mm '
                f'({_pct(self.square_error_mm, d)} of distance, predicted '
                f'{self.square_expected_mm:+.4f} +- {self.square_spread_mm:.4f}); flatness '
                f'{self.flatness_mm:.4f} mm '
                f'({_pct(self.flatness_mm, d)}, predicted {self.flatness_expected_mm:.4f} +- '
                f'{self.flatness_spread_mm:.4f}); fitted on the pixels: square '
                f'{self.fitted_square_error_mm:+.4f} +- {self.fitted_square_noise_mm:.4f} mm')


@dataclass(frozen=True, eq=False)
class Figure:
    """A judged figure: value, its prediction and limit, and whether it passes
    (``value <= limit``, or ``|value - expected| <= limit`` when two-sided)."""

    name: str
    value: float
    expected: float
    limit: float
    unit: str
    two_sided: bool = False

    @property
    def passed(self):
        """Whether the figure is within its limit."""
        off = abs(self.value - self.expected) if self.two_sided else self.value
        return bool(np.isfinite(off) and off <= self.limit)

    def text(self):
        """'name value unit (expected ..., limit ...)'."""
        bound = (f'{self.expected:+.4g} +- {self.limit:.4g}' if self.two_sided
                 else f'limit {self.limit:.4g}')
        return (f'{self.name} {self.value:.4g} {self.unit} (predicted {self.expected:.4g}; '
                f'{bound} {self.unit})')


@dataclass(frozen=True, eq=False)
class Verification:
    """
    The outcome of :func:`verify_observations`. poses: PoseChecks of the held-out poses;
    reused: pose ids whose observations the calibration used (counted apart, not measured);
    refused: (pose id, reason) of poses that could not be measured; figures: the judged
    Figures (overall RMS, square error, flatness, board spread in the base frame with arm
    poses); noise_px: the calibration's RMS; covariance_source: 'covariance' | 'stddev' |
    'none' (what the parameter draws came from); noise_scale: the sampled noise over the
    poses' RMS (:func:`noise_scale`).
    """

    poses: tuple
    reused: tuple
    refused: tuple
    figures: tuple
    noise_px: float
    covariance_source: str
    noise_scale: float = 1.0

    @property
    def passed(self):
        """Whether every figure passes and every pose was measured."""
        return bool(self.poses) and not self.failures

    @property
    def failures(self):
        """What fails, one line each (a figure with its limit, a pose not measured)."""
        out = [f'{f.text()}' for f in self.figures if not f.passed]
        out += [f'pose {p} not measured: {why}' for p, why in self.refused]
        if not self.poses:
            out.append('no held-out pose to measure')
        return tuple(out)

    def summary(self):
        """Lines: per pose, the figures, the verdict."""
        lines = [p.line() for p in self.poses]
        if self.noise_scale > 1.0:
            lines.append(f'3-D predictions with {self.noise_scale:.2f} x the pixel noise: the '
                         'calibration\'s own poses scatter that much more in 3-D than '
                         'independent noise')
        if self.reused:
            lines.append(f'{len(self.reused)} pose(s) used in the calibration, not counted: '
                         + ', '.join(str(p) for p in self.reused))
        lines += [('  ' if f.passed else '  FAILS: ') + f.text() for f in self.figures]
        lines.append('verdict: passes' if self.passed
                     else 'verdict: does not pass: ' + '; '.join(self.failures))
        return lines

    def to_dict(self):
        """Plain mapping (floats, lists, str) for a YAML file."""
        return {'passed': self.passed, 'failures': list(self.failures),
                'noise_px': float(self.noise_px), 'covariance_source': self.covariance_source,
                'noise_scale': float(self.noise_scale),
                'reused_poses': [int(p) for p in self.reused],
                'refused_poses': [{'pose': int(p), 'reason': str(r)} for p, r in self.refused],
                'figures': [{'name': f.name, 'value': float(f.value),
                             'expected': float(f.expected), 'limit': float(f.limit),
                             'unit': f.unit, 'passed': f.passed} for f in self.figures],
                'poses': [{k: (v.tolist() if isinstance(v, np.ndarray) else
                               (int(v) if isinstance(v, (int, np.integer)) else float(v)))
                           for k, v in vars(p).items()} for p in self.poses]}


def _pct(mm, distance_mm):
    return f'{100 * mm / distance_mm:+.4f} %'


# ---- 3-D figures ------------------------------------------------------------------------------
def square_of(board):
    """The square size (m) of board points (M, 3): their median nearest-neighbour distance."""
    b = np.asarray(board, dtype=float)
    if len(b) < 2:
        raise InvalidInputError(f'a board needs >= 2 points, got {len(b)}')
    d = np.linalg.norm(b[:, None] - b[None], axis=2)
    d[d == 0] = np.inf
    return float(np.median(d.min(axis=1)))


def board_figures(board, points):
    """
    (scale, flatness m) of triangulated corners ``points`` (C, 3) against their board
    points (C, 3): the similarity fit's scale (Umeyama) and the RMS distance of the points
    from their own best plane.
    """
    b = board - board.mean(axis=0)
    c = points - points.mean(axis=0)
    u, sv, vt = np.linalg.svd(c.T @ b)
    d = np.sign(np.linalg.det(u @ vt))
    scale = (sv[0] + sv[1] + d * sv[2]) / np.sum(b * b)
    flat = np.linalg.svd(c, compute_uv=False)[-1] / np.sqrt(len(c))
    return float(scale), float(flat)


def _corners(obs):
    """Rows of corners seen in >= 2 rays, and the board point of each such corner (C, 3)."""
    keep = np.bincount(obs.point)[obs.point] >= 2
    ids, first = np.unique(obs.point[keep], return_index=True)
    return keep, obs.board[keep][first]


def _measure(model, ijuv, point, board, origin=np.zeros(3)):
    """(scale, flatness m, distance m from ``origin``, the optical frame's in the model's) of
    the corners triangulated from rows ijuv (N, 4)."""
    pts = triangulate(model.rays(ijuv), point)
    scale, flat = board_figures(board, pts)
    return scale, flat, float(np.linalg.norm(pts.mean(axis=0) - origin))


# ---- parameter draws ------------------------------------------------------------------------
def parameter_covariance(*, covariance=None, stddev=None):
    """
    (names, (F, F), source) of the calibration's free parameters: ``covariance`` = (names,
    (F, F)) when given (source 'covariance'), else ``stddev`` {name: sigma} as independent
    (NaN, 0 or missing: fixed; source 'stddev', or 'none' when nothing is free).
    """
    if covariance is not None:
        names, cov = tuple(covariance[0]), np.asarray(covariance[1], dtype=float)
        if cov.shape != (len(names), len(names)):
            raise InvalidInputError(f'covariance must be ({len(names)}, {len(names)}) for '
                                    f'{names}, got {cov.shape}')
        unknown = [n for n in names if n not in PARAMETER_NAMES]
        if unknown:
            raise InvalidInputError(f'covariance names {unknown}, expected names from '
                                    f'{PARAMETER_NAMES}')
        return names, 0.5 * (cov + cov.T), 'covariance'
    sd = {k: float(v) for k, v in (stddev or {}).items()
          if k in PARAMETER_NAMES and np.isfinite(v) and v > 0}
    return tuple(sd), np.diag([v * v for v in sd.values()]), 'stddev' if sd else 'none'


def parameter_draws(model, n, rng, names, cov):
    """Models (n,) drawn around ``model`` from the covariance (F, F) of ``names``."""
    x = model.to_vector()
    w, v = np.linalg.eigh(cov) if len(names) else (np.zeros(0), np.zeros((0, 0)))
    root = v * np.sqrt(np.clip(w, 0.0, None))
    index = [PARAMETER_NAMES.index(name) for name in names]
    models = []
    for _ in range(n):
        xs = x.copy()
        if index:
            xs[index] += root @ rng.standard_normal(len(index))
        models.append(MPCModel.from_vector(xs))
    return models


# ---- the board's scale fitted on the pixels ------------------------------------------------------
def _scaled_residual(obs, model, x):
    pts = np.exp(x[6]) * Rotation.from_rotvec(x[:3]).apply(obs.board) + x[3:6]
    return (model.project(pts, obs.ijuv[:, :2]) - obs.ijuv[:, 2:]).ravel()


def fit_scaled_board(obs, model, rv, tv):
    """
    (x (7,) = rotation vector, translation, log scale; (J^T J)^-1 (7, 7); the pose's (6, 6)
    at the board's true size) of the board of ``obs`` (one pose) seen by ``model`` with its
    size free, fitted on the reprojection from the pose (rv, tv): the maximum-likelihood
    scale of the board the camera sees. Times the pixel noise variance: covariances.
    """
    fit = least_squares(lambda x: _scaled_residual(obs, model, x),
                        np.concatenate([rv, tv, [0.0]]), method='lm')
    jtj = fit.jac.T @ fit.jac
    return fit.x, np.linalg.pinv(jtj), np.linalg.pinv(jtj[:6, :6])


def parameter_gradients(obs, model, x, pose, names, steps):
    """
    (d log scale / d parameter (F,), d pose / d parameter (6, F) at the board's true size)
    for ``names``, by refitting the board from ``x`` (:func:`fit_scaled_board`) and ``pose``
    (6,) (:func:`fit_board_pose`) with each parameter stepped by ``steps`` (F,) (its sigma:
    well above the solver's tolerance, within the linear range).
    """
    v = model.to_vector()
    g_scale, g_pose = [], []
    for name, h in zip(names, steps):
        k = PARAMETER_NAMES.index(name)
        step = v.copy()
        step[k] += h
        moved = MPCModel.from_vector(step)
        fit = least_squares(lambda y: _scaled_residual(obs, moved, y), x, method='lm')
        g_scale.append((fit.x[6] - x[6]) / h)
        fit = least_squares(lambda y: _scaled_residual(obs, moved, np.append(y, 0.0)),
                            pose, method='lm')
        g_pose.append((fit.x - pose) / h)
    return np.array(g_scale), np.array(g_pose).reshape(-1, 6).T


# ---- one pose -------------------------------------------------------------------------------
def check_pose(obs, model, draws, rng, *, square, noise_px, names=(), steps=(),
               noise_scale=1.0, origin=np.zeros(3)):
    """
    (PoseCheck, sampled square errors mm (S,), sampled flatness mm (S,), d log scale /
    d parameter (F,) for ``names``, (the board centre's (3, 3) covariance m^2, its
    d / d parameter (3, F))) of ``obs`` (one
    pose) under ``model``; draws: sampled models (S,); the noise predicted is the
    calibration's RMS ``noise_px`` times ``noise_scale`` (:func:`noise_scale`): a capture's
    own RMS says little of its 3-D scatter, which the disparity part of its errors makes.
    origin: the optical frame's origin in the model's frame, from which the board's distance
    is measured (:func:`~lf_mpc_calib.camera.optical_frame.optical_origin`).
    Raises DegenerateConfigurationError when the pose cannot be measured.
    """
    rv, tv, rms = fit_board_pose(obs, model)
    keep, board = _corners(obs)
    ijuv, point = obs.ijuv[keep], obs.point[keep]
    scale, flat, dist = _measure(model, ijuv, point, board, origin)
    ideal = model.project(Rotation.from_rotvec(rv).apply(obs.board[keep]) + tv, ijuv[:, :2])
    sigma = noise_scale * noise_px / np.sqrt(2.0)
    sampled, cal = [], []
    for m in draws:
        noisy = np.column_stack([ijuv[:, :2], ideal + rng.normal(0.0, sigma, ideal.shape)])
        sampled.append(_measure(m, noisy, point, board)[:2])
        cal.append(_measure(m, ijuv, point, board)[0])
    sampled = np.array(sampled).reshape(-1, 2)
    x, cov, pose_cov = fit_scaled_board(obs, model, rv, tv)
    x_true = np.concatenate([rv, tv, [0.0]])
    grad, pose_grad = parameter_gradients(obs, model, x, x_true[:6], names, steps)
    sq = 1e3 * square
    check = PoseCheck(int(obs.pose[0]), len(obs), len(board), dist, rms, (scale - 1) * sq,
                      1e3 * flat, float((np.mean(sampled[:, 0]) - 1) * sq),
                      float(np.std(sampled[:, 0]) * sq), float(np.std(cal) * sq),
                      float(np.mean(sampled[:, 1]) * 1e3), float(np.std(sampled[:, 1]) * 1e3),
                      float(np.expm1(x[6]) * sq), float(sigma * np.sqrt(cov[6, 6]) * sq),
                      np.asarray(rv, float), np.asarray(tv, float))
    return (check, (sampled[:, 0] - 1) * sq, sampled[:, 1] * 1e3, grad,
            _centre_covariance(obs.board, x_true[:6], sigma ** 2 * pose_cov, pose_grad))


def _centre_covariance(board, pose, cov, pose_grad):
    """((3, 3) covariance of the board centre in the camera frame from the pose's (6, 6),
    d centre / d parameter (3, F)) at ``pose`` (6,)."""
    centre = np.unique(board, axis=0).mean(axis=0)

    def at(x):
        return Rotation.from_rotvec(x[:3]).apply(centre) + x[3:]
    jac = np.column_stack([(at(pose + 1e-7 * e) - at(pose)) / 1e-7 for e in np.eye(6)])
    return jac @ cov @ jac.T, jac @ pose_grad


def noise_scale(calibration_obs, model, draws, rng, *, square, noise_px, poses=NOISE_POSES):
    """
    How much more the corners scatter in 3-D than independent pixel noise of their RMS
    predicts, measured on (up to ``poses``) poses the calibration was made on: the RMS of
    their flatness over its prediction, at least 1. Detections of one corner share errors
    across views (blur, the micro-lens grid), which triangulation does not average out.
    """
    flat, expected = [], []
    ids = calibration_obs.pose_ids
    for p in ids[np.unique(np.linspace(0, len(ids) - 1, min(poses, len(ids))).astype(int))]:
        try:
            c = check_pose(calibration_obs.select(calibration_obs.pose == p), model, draws,
                           rng, square=square, noise_px=noise_px)[0]
        except DegenerateConfigurationError:
            continue
        flat.append(c.flatness_mm)
        expected.append(c.flatness_expected_mm)
    if not flat:
        return 1.0
    return max(1.0, float(np.sqrt(np.sum(np.square(flat)) / np.sum(np.square(expected)))))


# ---- reused captures --------------------------------------------------------------------------
def reused_poses(obs, calibration_obs=None, calibration_poses=None, fitted=None):
    """
    Pose ids of ``obs`` the calibration used: the same detections as one of
    ``calibration_obs``' poses (:func:`same_detections`), or (``fitted``: {pose: (rv, tv)})
    a fitted pose within SAME_POSE_M of one of ``calibration_poses`` = (rotation_vectors
    (P, 3), translations (P, 3)).
    """
    reused = set()
    if calibration_obs is not None and len(calibration_obs):
        known = [calibration_obs.select(calibration_obs.pose == p)
                 for p in calibration_obs.pose_ids]
        for p in obs.pose_ids:
            ours = obs.select(obs.pose == p)
            if any(same_detections(ours, k) for k in known):
                reused.add(int(p))
    if calibration_poses is not None and fitted:
        rvs, tvs = (np.asarray(a, float).reshape(-1, 3) for a in calibration_poses)
        for p, (rv, tv) in fitted.items():
            near = (np.max(np.abs(rvs - rv), axis=1) < SAME_POSE_M) & \
                   (np.max(np.abs(tvs - tv), axis=1) < SAME_POSE_M)
            if np.any(near):
                reused.add(int(p))
    return tuple(sorted(reused))


def same_detections(a, b):
    """Whether the Observations of two poses are one frame's detections: >= SAME_ROWS of
    the rows share corner and view, their (u, v) within SAME_UV_PX (median). The same frame
    detected again (a raw data set of the calibration's frames) differs in a few rows."""
    ka, kb = _row_keys(a), _row_keys(b)
    _, ia, ib = np.intersect1d(ka, kb, return_indices=True)
    if len(ia) < SAME_ROWS * max(len(ka), len(kb)):
        return False
    return bool(np.median(np.linalg.norm(a.ijuv[ia, 2:] - b.ijuv[ib, 2:], axis=1)) < SAME_UV_PX)


def _row_keys(obs):
    """A string key per row: board point and view (i, j), rounded to 1e-6."""
    ij = np.round(obs.ijuv[:, :2] * 1e6).astype(np.int64)
    return np.char.add(np.char.add(obs.point.astype(str), ':'),
                       np.char.add(np.char.add(ij[:, 0].astype(str), ','),
                                   ij[:, 1].astype(str)))


# ---- all poses --------------------------------------------------------------------------------
def verify_observations(obs, model, *, noise_px, covariance=None, stddev=None,
                        calibration_obs=None, calibration_poses=None, arm=None,
                        robot_accuracy_mm=ROBOT_ACCURACY_MM, samples=SAMPLES, seed=0,
                        camera_type='conventional'):
    """
    Measure the held-out poses of ``obs`` (Observations) with ``model`` (MPCModel, held).

    noise_px: the calibration's RMS reprojection; covariance (names, (F, F)) or stddev
    {name: sigma}: its parameter uncertainty; calibration_obs, calibration_poses: what it was
    calibrated on, to find reused captures (:func:`reused_poses`); arm: (setup, mount (rv, tv),
    {pose: (rv, tv) base -> tool}) with arm poses (:func:`base_spread`, with
    robot_accuracy_mm), else None; camera_type: the distances are from its optical frame's
    origin (a focused camera's main lens). Returns a :class:`Verification`.
    """
    if len(obs) == 0:
        raise InvalidInputError('no observations to verify')
    if not noise_px > 0:
        raise InvalidInputError(f'noise_px must be > 0 (the calibration\'s RMS), got {noise_px}')
    rng = np.random.default_rng(seed)
    origin = optical_origin(model, camera_type)
    names, cov, source = parameter_covariance(covariance=covariance, stddev=stddev)
    draws = parameter_draws(model, samples, rng, names, cov)
    reused = set(reused_poses(obs, calibration_obs))
    square = square_of(np.unique(obs.board, axis=0))
    scale = 1.0 if calibration_obs is None else \
        noise_scale(calibration_obs, model, draws[:NOISE_SAMPLES], rng, square=square,
                    noise_px=noise_px)
    done, refused = [], []
    for p in obs.pose_ids:
        if int(p) in reused:
            continue
        try:
            done.append(check_pose(obs.select(obs.pose == p), model, draws, rng, square=square,
                                   noise_px=noise_px, names=names,
                                   steps=np.sqrt(np.diag(cov)),
                                   noise_scale=scale, origin=origin))
        except DegenerateConfigurationError as exc:
            refused.append((int(p), str(exc)))
    fitted = {d[0].pose: (d[0].rotation_vector, d[0].translation) for d in done}
    again = set(reused_poses(obs, None, calibration_poses, fitted))
    done = [d for d in done if d[0].pose not in again]
    figures = _figures(done, cov, noise_px, square)
    if arm is not None and len(done) >= 2:
        figures += (base_spread(done, arm, np.unique(obs.board, axis=0).mean(axis=0), cov,
                                robot_accuracy_mm),)
    return Verification(tuple(d[0] for d in done), tuple(sorted(reused | again)),
                        tuple(refused), figures, float(noise_px), source, scale)


def _figures(done, cov, noise_px, square):
    """The overall Figures of check_pose's outcomes ``done``; cov (F, F) of the parameters."""
    if not done:
        return ()
    checks = [d[0] for d in done]
    n = np.array([c.rays for c in checks], float)
    rms = float(np.sqrt(np.sum(n * np.array([c.rms_px for c in checks]) ** 2) / n.sum()))
    sq = float(np.mean([c.square_error_mm for c in checks]))
    sq_mean = np.mean([d[1] for d in done], axis=0)                     # (S,) per draw
    flat = float(np.sqrt(np.mean([c.flatness_mm ** 2 for c in checks])))
    flat_rms = np.sqrt(np.mean(np.array([d[2] for d in done]) ** 2, axis=0))
    fitted = float(np.mean([c.fitted_square_error_mm for c in checks]))
    grad = np.mean([d[3] for d in done], axis=0) * 1e3 * square       # mm per parameter
    noise = np.sqrt(np.sum([c.fitted_square_noise_mm ** 2 for c in checks])) / len(checks)
    spread = float(np.sqrt(noise ** 2 + (grad @ cov @ grad if len(grad) else 0.0)))
    return (Figure('RMS reprojection', rms, noise_px, RMS_LIMIT * noise_px, 'px'),
            Figure('square size error (triangulated)', sq, float(np.mean(sq_mean)),
                   SIGMA_LIMIT * float(np.std(sq_mean)), 'mm', two_sided=True),
            Figure('square size error (fitted on the pixels)', fitted, 0.0,
                   SIGMA_LIMIT * spread, 'mm', two_sided=True),
            Figure('flatness', flat, float(np.mean(flat_rms)),
                   float(max(np.mean(flat_rms) + SIGMA_LIMIT * np.std(flat_rms),
                             RMS_LIMIT * np.mean(flat_rms))), 'mm'))


def _transform(rv, tv):
    t = np.eye(4)
    t[:3, :3] = Rotation.from_rotvec(rv).as_matrix()
    t[:3, 3] = tv
    return t


def base_spread(done, arm, centre, cov, robot_accuracy_mm=ROBOT_ACCURACY_MM):
    """
    The Figure of the board centre's spread (RMS distance from its mean, mm) across captures
    in the frame the arm holds still: the base (eye-in-hand: T_base_tool T_tool_optical) or
    the tool (eye-to-hand: T_tool_base T_base_optical). arm: (setup, mount (rv, tv), robot
    {pose: (rv, tv) base -> tool}); its limit: SPREAD_LIMIT x the spread the pose fits' noise
    , the calibration's parameter covariance ``cov`` (F, F) and the robot's accuracy (mm
    RMS) predict, in quadrature.
    """
    setup, mount, robot = arm
    t_mount = _transform(*mount)
    points, var, moves = [], [], []
    for c, *_, (centre_cov, centre_grad) in done:
        if c.pose not in robot:
            continue
        t_robot = _transform(*robot[c.pose])
        to_fixed = t_robot @ t_mount if setup == 'eye-in-hand' else \
            np.linalg.inv(t_robot) @ t_mount
        cam = Rotation.from_rotvec(c.rotation_vector).apply(centre) + c.translation
        points.append(to_fixed[:3, :3] @ cam + to_fixed[:3, 3])
        var.append(np.trace(centre_cov))
        moves.append(to_fixed[:3, :3] @ centre_grad)
    if len(points) < 2:
        raise InvalidInputError(f'{len(points)} held-out pose(s) have a robot pose, the board '
                                'spread in the base frame needs >= 2')
    pts = np.array(points)
    spread = float(np.sqrt(np.mean(np.sum((pts - pts.mean(axis=0)) ** 2, axis=1)))) * 1e3
    k = len(pts)
    moves = np.array(moves) - np.mean(moves, axis=0)                  # (k, 3, F)
    common = sum(np.trace(m @ cov @ m.T) for m in moves) / k if cov.size else 0.0
    predicted = 1e3 * float(np.sqrt(common + (np.mean(var) + (robot_accuracy_mm * 1e-3) ** 2)
                                    * (k - 1) / k))
    frame = 'base' if setup == 'eye-in-hand' else 'tool'
    return Figure(f'board position spread in the {frame} frame', spread, predicted,
                  SPREAD_LIMIT * predicted, 'mm')
