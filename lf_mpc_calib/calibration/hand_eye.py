"""
Hand-eye calibration of a light-field camera on (or watching) a robot arm.

Two set-ups (``SETUPS``):

``'eye-in-hand'``
    The camera rides on the arm, the board is fixed in the robot's base frame. Unknowns: the
    mount T_tool_optical and the board's pose T_base_board.
``'eye-to-hand'``
    The camera is fixed, the board rides in the gripper. Unknowns: the mount T_base_optical and
    the board's pose in the tool frame T_tool_board.

Transforms follow :mod:`lf_mpc_calib.camera.transforms` (T_a_b maps b coordinates to a,
X_a = R X_b + t); robot poses are base -> tool (T_base_tool, as TF gives them) and board
poses board -> optical (T_optical_board, the calibration's poses). Both set-ups are one
equation with G_k = T_base_tool(k) (eye-in-hand) or T_tool_base(k) (eye-to-hand), M the
mount and B the board's pose: G_k M C_k = B for every capture k with board pose C_k.

Steps of :func:`calibrate_hand_eye`:

1. Motion diversity (:func:`motion_diversity`): >= ``MIN_CAPTURES`` captures with robot poses,
   relative tool rotations of >= ``MIN_ROTATION_DEG`` about >= 2 axes at least
   ``MIN_AXIS_ANGLE_DEG`` apart; else DegenerateConfigurationError with the figures and what
   to capture next (:func:`hand_eye_guidance` gives the same answer without raising).
2. Closed form AX = XB with OpenCV's ``calibrateHandEye`` by each method of ``CV_METHODS`` on
   the per-capture board poses; B from the mean of G_k M C_k; the method whose (M, B) gives
   the smallest light-field reprojection RMS starts the refinement. A closed form whose B
   spreads over more than ``MAX_CLOSED_FORM_SPREAD_DEG`` between captures means the robot and
   board poses do not describe one rigid set-up (wrong set-up, pose direction, units or frames):
   InvalidInputError. A focused camera's calibration must be in the physical orientation
   (k_3 + k_4 > 0, :func:`~lf_mpc_calib.calibration.focused.orient_focused`): its point
   reflection explains every ray as well, but its frame is not a rigid one (the relative
   rotations agree, the translations change sign), so no mount exists there and the refinement
   only crawls (:func:`check_focused_orientation`).
3. Joint refinement of M, B (and the MPC intrinsics, unless fixed) on the reprojection errors
   of every ray of every capture, through the same analytic Jacobian as the calibration
   (:class:`lf_mpc_calib.calibration.refine.RefinementProblem`: d residual / d camera point
   is its translation block), chained through the composed pose
   C_k = M^-1 G_k^-1 B. Standard deviations from the cluster-robust sandwich covariance
   (clusters: one corner of one capture in every view; :func:`_covariance`).
   The refinement's RMS is compared with the free-pose calibration's: a ratio above
   ``max_rms_ratio`` means the robot poses disagree with what the camera saw (InvalidInputError).
"""

from dataclasses import dataclass, field, replace

import cv2
import numpy as np
import scipy.optimize
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration.closed_form import validate_observations
from lf_mpc_calib.calibration.refine import RefinementProblem
from lf_mpc_calib.camera import transforms
from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES
from lf_mpc_calib.camera.observations import guess_camera_type
from lf_mpc_calib.camera.rotations import rotation_matrix_jacobian, rotation_vector
from lf_mpc_calib.errors import (
    ConvergenceError, DegenerateConfigurationError, InvalidInputError)

SETUPS = ('eye-in-hand', 'eye-to-hand')
CV_METHODS = {'TSAI': cv2.CALIB_HAND_EYE_TSAI, 'PARK': cv2.CALIB_HAND_EYE_PARK,
              'HORAUD': cv2.CALIB_HAND_EYE_HORAUD, 'ANDREFF': cv2.CALIB_HAND_EYE_ANDREFF,
              'DANIILIDIS': cv2.CALIB_HAND_EYE_DANIILIDIS}
MIN_CAPTURES = 3
MIN_ROTATION_DEG = 5.0
MIN_AXIS_ANGLE_DEG = 15.0
MAX_CLOSED_FORM_SPREAD_DEG = 3.0
MAX_RMS_RATIO = 3.0
#: version of the ``hand_eye`` mapping in the calibration file
HAND_EYE_FORMAT_VERSION = 1
_MAX_AXES = 400


def check_setup(setup):
    """Return ``setup`` or raise InvalidInputError naming SETUPS."""
    if setup not in SETUPS:
        raise InvalidInputError(f'setup must be one of {SETUPS}, got {setup!r}')
    return setup


def mount_frames(setup, *, base_frame, tool_frame):
    """(parent of the mount, parent of the board) frame names of ``setup``."""
    check_setup(setup)
    return (tool_frame, base_frame) if setup == 'eye-in-hand' else (base_frame, tool_frame)


# ---- motion diversity ------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MotionDiversity:
    """
    What the robot motions determine (:func:`motion_diversity`).

    n_captures: captures with robot poses; largest_rotation_deg: the largest rotation of the
    tool between two captures; axis_spread_deg: the largest angle between the axes (as lines,
    tool frame) of relative rotations of >= min_rotation_deg; main_axis (3,): the tool-frame
    axis of the largest relative rotation (zeros with < 2 captures); determined: whether the
    mount is determined; message: the figures and, if not determined, what to capture next.
    """

    n_captures: int
    largest_rotation_deg: float
    axis_spread_deg: float
    main_axis: np.ndarray
    determined: bool
    message: str
    min_rotation_deg: float = MIN_ROTATION_DEG
    min_axis_angle_deg: float = MIN_AXIS_ANGLE_DEG


def _rotations(robot_rotation_vectors):
    w = np.asarray(robot_rotation_vectors, dtype=float).reshape(-1, 3) \
        if np.size(robot_rotation_vectors) else np.zeros((0, 3))
    if not np.all(np.isfinite(w)):
        raise InvalidInputError('robot rotation vectors contain NaN or inf')
    return w


def motion_diversity(robot_rotation_vectors, *, min_rotation_deg=MIN_ROTATION_DEG,
                     min_axis_angle_deg=MIN_AXIS_ANGLE_DEG):
    """
    Whether robot poses (rotation vectors (P, 3) of base -> tool) determine a hand-eye mount.

    Relative rotations R_i^T R_j of every pair (tool frame) of at least ``min_rotation_deg``
    contribute their axes; the mount is determined when there are >= MIN_CAPTURES captures and
    two of those axes are >= ``min_axis_angle_deg`` apart. Returns a :class:`MotionDiversity`.
    """
    w = _rotations(robot_rotation_vectors)
    n = len(w)
    largest, spread, axis = 0.0, 0.0, np.zeros(3)
    if n >= 2:
        rot = Rotation.from_rotvec(w)
        i, j = np.triu_indices(n, 1)
        rel = (rot[i].inv() * rot[j]).as_rotvec()
        ang = np.degrees(np.linalg.norm(rel, axis=1))
        k = int(np.argmax(ang))
        largest = float(ang[k])
        axis = rel[k] / max(np.linalg.norm(rel[k]), 1e-300) if largest > 0 else axis
        big = np.flatnonzero(ang >= min_rotation_deg)
        big = big[np.argsort(-ang[big])][:_MAX_AXES]
        if len(big) >= 2:
            axes = rel[big] / np.linalg.norm(rel[big], axis=1)[:, None]
            cos = np.clip(np.abs(axes @ axes.T), 0.0, 1.0)
            spread = float(np.degrees(np.arccos(cos.min())))
    ax = ', '.join(f'{v:+.2f}' for v in axis)
    if n < MIN_CAPTURES:
        determined = False
        message = (f'{n} capture(s) with robot poses; hand-eye calibration needs >= '
                   f'{MIN_CAPTURES}: capture {MIN_CAPTURES - n} more, the tool turned by >= '
                   f'{min_rotation_deg:g} deg about two different axes')
    elif largest < min_rotation_deg:
        determined = False
        message = (f'the tool turned by at most {largest:.2f} deg between the {n} captures '
                   f'(< {min_rotation_deg:g} deg): the mount is not determined; add captures '
                   f'with the tool turned by >= {min_rotation_deg:g} deg about two axes at '
                   f'least {min_axis_angle_deg:g} deg apart')
    elif spread < min_axis_angle_deg:
        determined = False
        message = (f'all tool rotations between the {n} captures (up to {largest:.1f} deg) are '
                   f'about one axis (tool frame ({ax}); axes spread {spread:.1f} deg < '
                   f'{min_axis_angle_deg:g} deg): the mount is not determined along it; add a '
                   f'capture with the tool turned by >= {min_rotation_deg:g} deg about an axis '
                   f'perpendicular to ({ax})')
    else:
        determined = True
        message = (f'{n} captures, tool rotations up to {largest:.1f} deg about axes '
                   f'{spread:.1f} deg apart: the mount is determined; more captures with large '
                   'rotations about other axes shrink its uncertainty')
    return MotionDiversity(n, largest, spread, axis, determined, message,
                           float(min_rotation_deg), float(min_axis_angle_deg))


def hand_eye_guidance(robot_rotation_vectors, **options):
    """Alias of :func:`motion_diversity`: what the motions so far determine, what to add."""
    return motion_diversity(robot_rotation_vectors, **options)


def check_motion_diversity(robot_rotation_vectors, **options):
    """:func:`motion_diversity`, raising DegenerateConfigurationError when not determined."""
    d = motion_diversity(robot_rotation_vectors, **options)
    if not d.determined:
        raise DegenerateConfigurationError(d.message)
    return d


# ---- closed form -----------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ClosedFormEstimate:
    """
    One closed-form AX = XB solution.

    method: OpenCV's method name; mount, board: (rotation vector (3,), translation (3,));
    rotation_spread_deg, translation_spread_mm: RMS deviation of G_k M C_k from B over the
    captures (0 for exact data); rms_reprojection_px: light-field reprojection RMS of the
    poses M^-1 G_k^-1 B (NaN until computed by :func:`calibrate_hand_eye`).
    """

    method: str
    mount: tuple
    board: tuple
    rotation_spread_deg: float
    translation_spread_mm: float
    rms_reprojection_px: float = float('nan')


def _robot_chain(setup, robot_rvecs, robot_tvecs):
    """G_k (w (P, 3), t (P, 3)): T_base_tool (eye-in-hand) or T_tool_base (eye-to-hand)."""
    g = (robot_rvecs, robot_tvecs)
    return g if check_setup(setup) == 'eye-in-hand' else transforms.invert(g)


def _board_from_mount(g, mount, c):
    """B = mean over k of G_k M C_k; returns (B, rotation spread deg, translation spread mm)."""
    w, t = transforms.compose(transforms.compose(g, mount), c)
    mean = Rotation.from_rotvec(w).mean()
    tm = t.mean(axis=0)
    dev = (Rotation.from_rotvec(w) * mean.inv()).as_rotvec()
    rs = float(np.degrees(np.sqrt(np.mean(np.sum(dev * dev, axis=1)))))
    ts = float(1e3 * np.sqrt(np.mean(np.sum((t - tm) ** 2, axis=1))))
    return (mean.as_rotvec(), tm), rs, ts


def closed_form_hand_eye(board_rvecs, board_tvecs, robot_rvecs, robot_tvecs, *, setup,
                         methods=tuple(CV_METHODS)):
    """
    Closed-form mounts by OpenCV's calibrateHandEye, one per method.

    board_rvecs, board_tvecs (P, 3): board -> optical poses; robot_rvecs, robot_tvecs (P, 3):
    base -> tool, same captures in the same order. Returns {method: ClosedFormEstimate}
    (methods that fail or return non-finite values are left out).
    """
    c = (np.asarray(board_rvecs, float).reshape(-1, 3),
         np.asarray(board_tvecs, float).reshape(-1, 3))
    g = _robot_chain(setup, np.asarray(robot_rvecs, float).reshape(-1, 3),
                     np.asarray(robot_tvecs, float).reshape(-1, 3))
    if len(c[0]) != len(g[0]):
        raise InvalidInputError(
            f'{len(c[0])} board poses but {len(g[0])} robot poses; expected one of each per '
            'capture')
    unknown = [m for m in methods if m not in CV_METHODS]
    if unknown:
        raise InvalidInputError(f'methods must be in {tuple(CV_METHODS)}, got {unknown}')
    rg = [m for m in Rotation.from_rotvec(g[0]).as_matrix()]
    tg = [t.reshape(3, 1) for t in g[1]]
    rc = [m for m in Rotation.from_rotvec(c[0]).as_matrix()]
    tc = [t.reshape(3, 1) for t in c[1]]
    out = {}
    for name in methods:
        try:
            r, t = cv2.calibrateHandEye(rg, tg, rc, tc, method=CV_METHODS[name])
        except cv2.error:
            continue
        r = np.asarray(r, float)
        t = np.asarray(t, float).reshape(3)
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(t))):
            continue
        mount = (rotation_vector(r), t)
        board, rs, ts = _board_from_mount(g, mount, c)
        out[name] = ClosedFormEstimate(name, mount, board, rs, ts)
    return out


# ---- joint refinement ------------------------------------------------------------------------
class HandEyeProblem:
    """
    Reprojection residuals (2N,) and Jacobian (2N, 12 + n_free) of the joint hand-eye problem.

    Parameters x = (w_M, t_M, w_B, t_B, the free model parameters in PARAMETER_NAMES order).
    Captures are the pose ids of ``obs``; ``g`` = (w (P, 3), t (P, 3)) the robot chain G_k in
    the order of the sorted pose ids; grouped: ``obs`` grouped by pose, if already checked
    (the planner's one-capture informations), else validated here.
    """

    def __init__(self, obs, model, g, free, grouped=None):
        grouped = validate_observations(obs) if grouped is None else grouped
        self.pb = RefinementProblem(obs, grouped)
        self.pose_ids = grouped.pose_ids
        self.theta0 = model.to_vector()
        self.free = np.asarray(free, dtype=bool)
        self.free_idx = np.flatnonzero(self.free)
        self.h = transforms.invert(g)                 # H_k = G_k^-1 = (A_k, a_k)
        self.a_rot = Rotation.from_rotvec(self.h[0]).as_matrix()  # (P, 3, 3)
        self.a_t = self.h[1]                                      # (P, 3)
        self.n_params = 12 + len(self.free_idx)

    def unpack(self, x):
        """(mount (w, t), board (w, t), theta (10,)) of a parameter vector."""
        theta = self.theta0.copy()
        theta[self.free_idx] = x[12:]
        return (x[0:3], x[3:6]), (x[6:9], x[9:12]), theta

    def poses(self, x):
        """Composed board -> optical poses (P, 6) = (w, t) of C_k = M^-1 H_k B."""
        mount, board, _ = self.unpack(x)
        w, t = transforms.compose(transforms.compose(transforms.invert(mount), self.h), board)
        return np.hstack([w, t])

    def evaluate(self, x, *, jacobian=True):
        """Residuals (2, N) (predicted - observed, sorted by pose) and J (2, N, n) or None."""
        (w_m, t_m), (w_b, t_b), theta = self.unpack(x)
        res, jac = self.pb.evaluate(theta, self.poses(x), jacobian=jacobian)
        if not jacobian:
            return res, None
        r_m, dr_m = rotation_matrix_jacobian(w_m[None])
        r_b, dr_b = rotation_matrix_jacobian(w_b[None])
        r_m, dr_m, r_b, dr_b = r_m[0], dr_m[0], r_b[0], dr_b[0]
        k = self.pb.pose_index
        x_b = self.pb.board_t                                     # (3, N)
        a = self.a_rot[k]                                         # (N, 3, 3)
        p_b = r_b @ x_b + t_b[:, None]
        q = np.einsum('nij,jn->in', a, p_b) + self.a_t[k].T       # (3, N)
        ma = np.einsum('ji,njk->nik', r_m, a)                     # R_M^T A_k (N, 3, 3)
        d = jac[13:16]                                            # (3, 2, N) d res / d Pc
        n = self.pb.n
        out = np.empty((2, n, self.n_params))

        def chain(dpc):                                           # dpc (3, N) -> (2, N)
            return np.einsum('crn,cn->rn', d, dpc)

        for j in range(3):
            out[:, :, j] = chain(dr_m[j].T @ (q - t_m[:, None]))
            out[:, :, 3 + j] = chain(np.broadcast_to(-r_m.T[:, j:j + 1], (3, n)))
            out[:, :, 6 + j] = chain(np.einsum('nij,jn->in', ma, dr_b[j] @ x_b))
            out[:, :, 9 + j] = chain(ma[:, :, j].T)
        if len(self.free_idx):
            out[:, :, 12:] = np.transpose(jac[self.free_idx], (1, 2, 0))
        return res, out


@dataclass(frozen=True, eq=False)
class HandEyeResult:
    """
    A hand-eye calibration.

    setup: 'eye-in-hand' | 'eye-to-hand'. mount: (rotation vector (3,), translation (3,) m),
    T_tool_optical (eye-in-hand) or T_base_optical (eye-to-hand); board: T_base_board or
    T_tool_board likewise. mount_stddev, board_stddev: 1-sigma of the rotation vector (3,)
    (rad) and translation (3,) (m). covariance (12, 12) of (w_M, t_M, w_B, t_B). model: the MPC
    model after the joint refinement (the calibration's when intrinsics were fixed);
    model_stddev {name: sigma} (NaN for fixed ones). pose_ids (P,); robot_rvecs,
    robot_tvecs (P, 3) base -> tool of those captures. residuals_px (N, 2): measured -
    predicted per observation row (input order); rms_reprojection_px; per_capture_rms_px
    (P,); calibration_rms_px: the free-pose calibration's RMS it is compared with.
    closed_form {method: ClosedFormEstimate}; closed_form_method: the one that started the
    refinement. diversity: MotionDiversity. iterations, converged, message: solver report.
    model_covariance (F, F): covariance of the F refined model parameters (those whose
    model_stddev is finite, PARAMETER_NAMES order), or None when the intrinsics were held.
    """

    setup: str
    mount: tuple
    mount_stddev: tuple
    board: tuple
    board_stddev: tuple
    covariance: np.ndarray
    model: MPCModel
    model_stddev: dict
    pose_ids: np.ndarray
    robot_rvecs: np.ndarray
    robot_tvecs: np.ndarray
    residuals_px: np.ndarray
    rms_reprojection_px: float
    per_capture_rms_px: np.ndarray
    calibration_rms_px: float
    closed_form: dict
    closed_form_method: str
    diversity: MotionDiversity
    iterations: int
    converged: bool
    message: str
    extras: dict = field(default_factory=dict)
    model_covariance: np.ndarray = None

    def in_optical_frame(self, frame):
        """This result with its mount (and each closed form's) parent -> the optical frame
        ``frame`` (:class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame` of :attr:`model`),
        as the calibration file and TF give it, for reports; the solve works in the model's
        MPC frame. The sigmas are kept (the origin's own uncertainty is not added)."""
        if frame.is_identity:
            return self
        closed = {k: replace(e, mount=frame.mount(*e.mount))
                  for k, e in self.closed_form.items()}
        return replace(self, mount=frame.mount(*self.mount), closed_form=closed)

    def optical_poses(self):
        """Board -> optical poses (w (P, 3), t (P, 3)) the refined set-up predicts."""
        g = _robot_chain(self.setup, self.robot_rvecs, self.robot_tvecs)
        return transforms.compose(transforms.compose(transforms.invert(self.mount),
                                                     transforms.invert(g)), self.board)

    def optical_in_base(self):
        """T_base_optical (w (P, 3), t (P, 3)) per capture (eye-to-hand: the mount P times)."""
        if self.setup == 'eye-in-hand':
            return transforms.compose((self.robot_rvecs, self.robot_tvecs), self.mount)
        p = len(self.pose_ids)
        return (np.tile(self.mount[0], (p, 1)), np.tile(self.mount[1], (p, 1)))

    def to_dict(self, *, base_frame, tool_frame, optical_frame):
        """The ``hand_eye`` mapping of the calibration file (plain floats)."""
        parent, board_parent = mount_frames(self.setup, base_frame=base_frame,
                                            tool_frame=tool_frame)
        return hand_eye_dict(
            self.setup, self.mount, parent_frame=parent, child_frame=optical_frame,
            stddev=self.mount_stddev, board=self.board, board_parent_frame=board_parent,
            board_stddev=self.board_stddev,
            errors=self.error_figures())

    def error_figures(self):
        """The ``errors`` of the ``hand_eye`` mapping: RMS of the solve and of the camera-only
        calibration, closed form, captures, whether the intrinsics were refined with the mount
        ('joint') or held ('held'), and (joint) intrinsics_shift_max_sigmas: how far they moved
        from the camera-only calibration in its sigmas."""
        errors = {'rms_reprojection_px': self.rms_reprojection_px,
                  'calibration_rms_px': self.calibration_rms_px,
                  'closed_form_method': self.closed_form_method,
                  'captures': int(len(self.pose_ids)),
                  'intrinsics': 'held' if self.model_covariance is None else 'joint'}
        shift = self.extras.get('intrinsics_shift')
        if shift is not None:
            errors['intrinsics_shift_max_sigmas'] = shift.max_sigmas
        return errors


def hand_eye_dict(setup, mount, *, parent_frame, child_frame, stddev=None, board=None,
                  board_parent_frame=None, board_stddev=None, errors=None):
    """
    The ``hand_eye`` mapping of a calibration file (also the simulator's ground truth).

    Keys: format_version, setup, parent_frame, child_frame, rotation_vector [3],
    translation_m [3] (parent -> child), stddev {rotation_vector, translation_m} or None,
    board_in_base (eye-in-hand) / board_in_tool (eye-to-hand) {parent_frame, rotation_vector,
    translation_m, stddev}, errors.
    """
    def vec(v):
        return [float(x) for x in np.asarray(v, float).reshape(3)]

    def sd(s):
        return None if s is None else {'rotation_vector': vec(s[0]), 'translation_m': vec(s[1])}

    d = {'format_version': HAND_EYE_FORMAT_VERSION, 'setup': check_setup(setup),
         'parent_frame': str(parent_frame), 'child_frame': str(child_frame),
         'rotation_vector': vec(mount[0]), 'translation_m': vec(mount[1]), 'stddev': sd(stddev)}
    if board is not None:
        key = 'board_in_base' if setup == 'eye-in-hand' else 'board_in_tool'
        d[key] = {'parent_frame': str(board_parent_frame), 'rotation_vector': vec(board[0]),
                  'translation_m': vec(board[1]), 'stddev': sd(board_stddev)}
    if errors is not None:
        d['errors'] = {k: (v if isinstance(v, (str, int)) else float(v))
                       for k, v in errors.items()}
    return d


def _covariance(problem, res, jac):
    """
    Covariance (n, n) of the joint parameters: the cluster-robust sandwich H^-1 M H^-1.

    res (2, N), jac (2, N, n) at the solution. Clusters are the rays of one board corner in one
    capture (every view sees the same image patch, so a corner detector's error is largely
    common to them): M = sum over clusters of g_c g_c^T with g_c = J_c^T r_c, times the
    small-sample factor G/(G-1) (N-1)/(N-n); never below the classic (J^T J)^-1 s^2 on the
    diagonal (as the calibration's, :mod:`lf_mpc_calib.calibration.refine`). On raw frames the
    classic one alone gave mount sigmas 4-5x below the errors (principal point error carried
    into the mount rotation). Raises LinAlgError when J^T J is singular.
    """
    n = problem.n_params
    j = jac.reshape(-1, n)
    r = res.reshape(-1)
    dof = max(len(r) - n, 1)
    h = j.T @ j
    s = np.sqrt(np.maximum(np.diag(h), 1e-300))
    h_inv = np.linalg.inv(h / np.outer(s, s)) / np.outer(s, s)
    classic = h_inv * (float(r @ r) / dof)
    pb = problem.pb
    cluster = pb.pose_index * (int(pb.point.max()) + 1) + pb.point
    _, inv = np.unique(cluster, return_inverse=True)
    g = np.zeros((int(inv.max()) + 1, n))
    np.add.at(g, inv, np.einsum('rnk,rn->nk', jac, res))
    clusters = len(g)
    factor = (clusters / max(clusters - 1, 1)) * (len(r) - 1) / dof
    sandwich = factor * (h_inv @ (g.T @ g) @ h_inv)
    d = np.sqrt(np.maximum(np.diag(classic), 0.0) / np.maximum(np.diag(sandwich), 1e-300))
    d = np.maximum(d, 1.0)
    return sandwich * np.outer(d, d)


def _held_intrinsics_covariance(problem, obs, g, x, calibration):
    """
    What the uncertainty of the intrinsics held at the calibration's adds to the covariance
    (n, n) of the joint parameters: S C S^T with S = -(J_x^T J_x)^-1 J_x^T J_h the sensitivity
    of the solution to the held intrinsics and C their covariance in the calibration (zeros
    when none is held or the calibration has no covariance). Without it a mount solved with
    held intrinsics claimed sigmas 10-40x below its error against the truth on raw frames
    (the principal point's error tilts the optical frame the mount refers to).
    """
    n = problem.n_params
    cov_cal = getattr(calibration, 'covariance', None)
    names = calibration.free_names() if hasattr(calibration, 'free_names') else ()
    if cov_cal is None or len(names) != len(cov_cal):
        return np.zeros((n, n))
    held = [k for k, name in enumerate(names)
            if not problem.free[PARAMETER_NAMES.index(name)]]
    if not held:
        return np.zeros((n, n))
    mask = problem.free.copy()
    mask[[PARAMETER_NAMES.index(names[k]) for k in held]] = True
    full = HandEyeProblem(obs, MPCModel.from_vector(problem.unpack(x)[2]), g, mask)
    xf = np.concatenate([x[:12], full.theta0[full.free_idx]])
    _, jac = full.evaluate(xf)
    jf = jac.reshape(-1, full.n_params)
    cols_h = [12 + int(np.flatnonzero(full.free_idx == PARAMETER_NAMES.index(names[k]))[0])
              for k in held]
    cols_x = [c for c in range(full.n_params) if c not in cols_h]
    j_x, j_h = jf[:, cols_x], jf[:, cols_h]
    sens = -np.linalg.lstsq(j_x, j_h, rcond=None)[0]                 # (n, H)
    c = np.asarray(cov_cal)[np.ix_(held, held)]
    return sens @ c @ sens.T


def _solve(problem, x0, max_iterations, progress):
    cache = {}

    def evaluate(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            res, jac = problem.evaluate(x)
            cache[key] = (res, jac)
        return cache[key]

    def fun(x):
        r = evaluate(x)[0].reshape(-1).copy()
        r[~np.isfinite(r)] = 1e6
        return r

    state = {'n': 0}

    def jac(x):
        j = np.nan_to_num(evaluate(x)[1]).reshape(-1, problem.n_params)
        state['n'] += 1
        if progress is not None:
            r = fun(x)
            progress(state['n'], 0.5 * float(r @ r))
        return j

    return scipy.optimize.least_squares(fun, x0, jac=jac, method='trf', x_scale='jac',
                                        ftol=1e-12, xtol=1e-12, gtol=1e-12,
                                        max_nfev=int(max_iterations))


def _align_robot_poses(pose_ids, robot_rvecs, robot_tvecs, robot_pose_ids):
    rv = np.asarray(robot_rvecs, float).reshape(-1, 3) if np.size(robot_rvecs) \
        else np.zeros((0, 3))
    tv = np.asarray(robot_tvecs, float).reshape(-1, 3) if np.size(robot_tvecs) \
        else np.zeros((0, 3))
    if rv.shape != tv.shape:
        raise InvalidInputError(
            f'robot rotation vectors {rv.shape} and translations {tv.shape} must both be (P, 3)')
    if not (np.all(np.isfinite(rv)) and np.all(np.isfinite(tv))):
        raise InvalidInputError('robot poses contain NaN or inf')
    ids = np.asarray(pose_ids if robot_pose_ids is None else robot_pose_ids).reshape(-1)
    if len(ids) != len(rv):
        raise InvalidInputError(
            f'{len(rv)} robot poses for {len(ids)} pose ids; give robot_pose_ids with one id '
            'per robot pose')
    lookup = {int(p): k for k, p in enumerate(ids)}
    keep = np.array([int(p) in lookup for p in pose_ids], dtype=bool)
    rows = np.array([lookup[int(p)] for p in pose_ids[keep]], dtype=int)
    return keep, rv[rows], tv[rows]


def check_focused_orientation(obs, calibration):
    """
    Raise InvalidInputError when ``calibration`` (a CalibrationResult of ``obs``) is a focused
    camera's in the reflected orientation (k_3 + k_4 < 0): its frame is the point reflection of
    the camera's (:mod:`~lf_mpc_calib.calibration.focused`), not a rigid frame a mount can
    refer to. (Found on focused-keplerian: the closed-form mount's board spread 153 mm, the
    refinement not converged in 400 evaluations; 4 evaluations once oriented.)
    """
    m = calibration.model
    if guess_camera_type(obs) == 'focused' and m.k_3 + m.k_4 < 0:
        raise InvalidInputError(
            f'the focused calibration is in the reflected orientation (k_3 + k_4 = '
            f'{m.k_3 + m.k_4:.4g} < 0): its frame is the point reflection of the camera\'s, '
            'which no rigid mount relates to the robot; orient it first '
            '(lf_mpc_calib.calibration.focused.orient_focused)')


def calibrate_hand_eye(obs, calibration, robot_rvecs, robot_tvecs, *, setup,
                       robot_pose_ids=None, refine_intrinsics=True, fix=(),
                       methods=tuple(CV_METHODS), min_rotation_deg=MIN_ROTATION_DEG,
                       min_axis_angle_deg=MIN_AXIS_ANGLE_DEG, max_rms_ratio=MAX_RMS_RATIO,
                       max_iterations=100, progress=None):
    """
    Hand-eye calibration from an observation table, its MPC calibration and robot poses.

    obs: Observations; calibration: a CalibrationResult of ``obs`` (model, rotation_vectors,
    translations, pose_ids, rms_reprojection_px, fixed). robot_rvecs, robot_tvecs (R, 3):
    base -> tool per capture; robot_pose_ids (R,): the pose id of each (default: the
    calibration's pose ids in order). Captures without a robot pose are left out of the
    hand-eye (their rays too). setup: 'eye-in-hand' | 'eye-to-hand'. refine_intrinsics: refine
    the model jointly (parameters in ``fix`` and those the calibration held fixed stay put);
    False holds all ten at the calibration. Returns a :class:`HandEyeResult`.

    Raises DegenerateConfigurationError when the motions do not determine the mount (fewer
    than 3 captures with robot poses, rotations too small or about one axis), InvalidInputError
    when robot and board poses do not describe one rigid set-up (closed-form spread above
    MAX_CLOSED_FORM_SPREAD_DEG, or refined RMS above ``max_rms_ratio`` times the
    calibration's) or a focused calibration is in the reflected orientation, ConvergenceError
    when the refinement does not converge.
    """
    check_setup(setup)
    validate_observations(obs)
    check_focused_orientation(obs, calibration)
    ids, rv, tv, board_poses, diversity = _robot_captures(
        calibration, robot_rvecs, robot_tvecs, robot_pose_ids, min_rotation_deg,
        min_axis_angle_deg)
    rows = np.isin(obs.pose, ids)
    sub = obs.select(rows)
    g = _robot_chain(setup, rv, tv)
    problem = HandEyeProblem(sub, calibration.model, g, _free_mask(calibration, fix,
                                                                   refine_intrinsics))
    scored, best = _scored_closed_forms(problem, board_poses, rv, tv, setup, methods)
    start = scored[best]
    if start.rotation_spread_deg > MAX_CLOSED_FORM_SPREAD_DEG:
        raise InvalidInputError(
            f'robot and board poses do not describe one rigid {setup} set-up: with the best '
            f'closed-form mount ({best}) the board pose spreads by {start.rotation_spread_deg:.2f}'
            f' deg RMS over {len(ids)} captures (> {MAX_CLOSED_FORM_SPREAD_DEG:g} deg); check '
            'the set-up, that robot poses are base -> tool in metres and radians, and that each '
            'belongs to its frame')
    sol, res, jac = _refined(problem, _packed(problem, start), max_iterations, progress)
    try:
        cov = _covariance(problem, res, jac)
    except np.linalg.LinAlgError:
        raise DegenerateConfigurationError(
            'the hand-eye normal equations are singular: the captures do not determine the '
            f'mount and board ({diversity.message})') from None
    cov = cov + _held_intrinsics_covariance(problem, sub, g, sol.x, calibration)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    mount, board, theta_f = problem.unpack(sol.x)
    rms, per, residuals = _residual_figures(problem, res, rows, len(obs))
    cal_rms = float(getattr(calibration, 'rms_reprojection_px', float('nan')))
    if np.isfinite(cal_rms) and rms > max_rms_ratio * cal_rms + 1e-9:
        raise InvalidInputError(
            f'the robot poses disagree with the board poses: the hand-eye refinement leaves '
            f'{rms:.3f} px RMS, {rms / cal_rms:.1f}x the calibration\'s {cal_rms:.3f} px (limit '
            f'{max_rms_ratio:g}x); check that the robot poses are those of the captured frames '
            '(arm at rest, stamps matched) and accurate')
    model_sd = {n: float('nan') for n in PARAMETER_NAMES}
    for k, idx in enumerate(problem.free_idx):
        model_sd[PARAMETER_NAMES[idx]] = float(sd[12 + k])
    return HandEyeResult(
        setup=setup, mount=(mount[0].copy(), mount[1].copy()), mount_stddev=(sd[0:3], sd[3:6]),
        board=(board[0].copy(), board[1].copy()), board_stddev=(sd[6:9], sd[9:12]),
        covariance=cov[:12, :12], model=MPCModel.from_vector(theta_f), model_stddev=model_sd,
        pose_ids=ids, robot_rvecs=rv, robot_tvecs=tv, residuals_px=residuals,
        rms_reprojection_px=rms, per_capture_rms_px=per, calibration_rms_px=cal_rms,
        closed_form=scored, closed_form_method=best, diversity=diversity,
        iterations=int(sol.nfev), converged=bool(sol.success), message=str(sol.message),
        model_covariance=cov[12:, 12:].copy() if len(problem.free_idx) else None)


def _robot_captures(calibration, robot_rvecs, robot_tvecs, robot_pose_ids, min_rotation_deg,
                    min_axis_angle_deg):
    """The captures with a robot pose, in pose-id order: (ids (C,), robot rv, tv (C, 3),
    board poses (rv, tv) (C, 3) each, MotionDiversity); DegenerateConfigurationError when
    their motions do not determine the mount."""
    cal_ids = np.asarray(calibration.pose_ids)
    keep, rv, tv = _align_robot_poses(cal_ids, robot_rvecs, robot_tvecs, robot_pose_ids)
    diversity = motion_diversity(rv, min_rotation_deg=min_rotation_deg,
                                 min_axis_angle_deg=min_axis_angle_deg)
    if not diversity.determined:
        raise DegenerateConfigurationError(diversity.message)
    ids = cal_ids[keep]
    order = np.argsort(ids)
    board_poses = (np.asarray(calibration.rotation_vectors, float)[keep][order],
                   np.asarray(calibration.translations, float)[keep][order])
    return ids[order], rv[order], tv[order], board_poses, diversity


def _free_mask(calibration, fix, refine_intrinsics):
    """(10,) bool: the model parameters refined jointly (none unless ``refine_intrinsics``;
    never those in ``fix`` or held by the calibration)."""
    fixed = set(fix) | set(getattr(calibration, 'fixed', ()))
    unknown = [n for n in fixed if n not in PARAMETER_NAMES]
    if unknown:
        raise InvalidInputError(f'fix names must be in {PARAMETER_NAMES}, got {unknown}')
    return np.array([refine_intrinsics and n not in fixed for n in PARAMETER_NAMES])


def _packed(problem, estimate):
    """The problem's parameter vector at a closed-form ``estimate`` (intrinsics as given)."""
    return np.concatenate([estimate.mount[0], estimate.mount[1], estimate.board[0],
                           estimate.board[1], problem.theta0[problem.free_idx]])


def _scored_closed_forms(problem, board_poses, rv, tv, setup, methods):
    """({method: ClosedFormEstimate with its RMS}, the method of the lowest RMS)."""
    estimates = closed_form_hand_eye(board_poses[0], board_poses[1], rv, tv, setup=setup,
                                     methods=methods)
    if not estimates:
        raise ConvergenceError(f'no closed-form hand-eye method of {methods} gave a solution')
    scored = {}
    for name, e in estimates.items():
        res, _ = problem.evaluate(_packed(problem, e), jacobian=False)
        rms = float(np.sqrt(np.mean(np.sum(res * res, axis=0)))) \
            if np.all(np.isfinite(res)) else float('inf')
        scored[name] = ClosedFormEstimate(name, e.mount, e.board, e.rotation_spread_deg,
                                          e.translation_spread_mm, rms)
    return scored, min(scored, key=lambda n: scored[n].rms_reprojection_px)


def _refined(problem, x0, max_iterations, progress):
    """(solution, residuals (2, N), Jacobian) of the joint refinement from ``x0``;
    ConvergenceError when it does not converge or cannot project every ray."""
    sol = _solve(problem, x0, max_iterations, progress)
    if not sol.success:
        raise ConvergenceError(f'the hand-eye refinement did not converge after {sol.nfev} '
                               f'evaluations: {sol.message}')
    res, jac = problem.evaluate(sol.x)
    if not np.all(np.isfinite(res)):
        raise ConvergenceError('the refined hand-eye set-up cannot project every ray')
    return sol, res, jac


def _residual_figures(problem, res, rows, n_obs):
    """(RMS px, per-capture RMS (C,), residuals (n_obs, 2) in the table's rows, NaN for the
    rows without a robot pose) of the refined residuals ``res`` (2, N)."""
    sq = np.sum(res * res, axis=0)
    pb = problem.pb
    per = np.sqrt(np.bincount(pb.pose_index, weights=sq, minlength=pb.n_poses)
                  / np.maximum(np.bincount(pb.pose_index, minlength=pb.n_poses), 1))
    residuals = np.full((n_obs, 2), np.nan)
    residuals[np.flatnonzero(rows)[pb.order]] = -res.T
    return float(np.sqrt(np.mean(sq))), per, residuals
