"""
Next-best board pose: plan the captures that reach a target uncertainty of the camera.

The counterpart of pose_calib (Rojtberg & Kuijper 2018) and Calibration Wizard (Peng & Sturm
2019) for the MPC model. Each candidate pose's rows are predicted with the model (every board
corner in every view or micro-image where the constraints say it is seen); their Jacobian
(:func:`~lf_mpc_calib.calibration.refine.pose_information`, the refinement's own, the pose's
six parameters eliminated) gives the Fisher information the pose adds. Information adds over
poses, so the predicted covariance after a capture is inv(I_so_far + I_pose) sigma^2 for the
measured corner noise sigma (px).

Criterion: **A-optimal (not D-optimal) on the normalised sigmas of what is short of its
target**: with q = (k_i, k_j, k_u, k_v in % of their value, principal point u, v in px) and
their targets t, the pose chosen minimises sum_q max(sigma_q / t_q, 1)^2 (the trace of the
normalised covariance, each term floored at its target: a sigma already below its target
earns a pose nothing more; TIE_WEIGHT sum (sigma_q / t_q)^2 orders the poses once all are).
The target is reached when every sigma_q <= t_q. Candidates are drawn at random within the
constraints (:class:`PoseConstraints`), then REFINE_ROUNDS rounds of NEIGHBOURS poses are
drawn around the best so far (the same constraints); constraints no candidate satisfies
are refused with the count of draws each one rejected. Measured (bench_planning.py,
observation level, 40 random candidates): the floor and the neighbours took the Keplerian's
planned captures from 24-25 to 19-21 and the Lytro's from 8-9 to 6-7 (docs/planning.md).

On a robot arm (``arm``: :class:`~lf_mpc_calib.calibration.arm_planning.ArmConstraints`;
the mount's terms below are not floored at their targets: floored, the mount translation's
sigma stopped at 0.083 mm for a 0.1 mm target and its error reached 0.21 mm,
bench_planning --arm eye-in-hand seed 0; unfloored 0.05 mm, errors <= 0.061 mm)
each candidate's tool pose (the base -> tool pose that brings the camera, eye-in-hand, or
the board, eye-to-hand, there) must lie in the workspace box and tool-tilt limit, checked
before any candidate is scored; the information is the joint hand-eye problem's (mount,
board pose and intrinsics; the arm ties the captures' poses together), and the criterion
adds the mount: (sigma_t / s_mm)^2 + (sigma_w / s_deg)^2 summed over the mount's
translation (mm) and rotation-vector (deg) components, reported as ``mount_translation``
(mm) and ``mount_rotation`` (deg): the root of each trace. The mount targets bound its error
(95 %): the sigmas aimed at are s = target / MOUNT_CONFIDENCE.

Multi-focus cameras (T micro-lens types): a ray is predicted only in micro-images whose type
images its corner sharply (``PoseConstraints.view_types``, ``type_depths_m``: each type's focus
band); the per-type terms (:mod:`~lf_mpc_calib.calibration.type_terms`) are **held fixed** in
the information (the rows are predicted with the MPC model alone; the terms, zero-mean over the
types by their gauge, hardly correlate with k_i..v_0: checked against the sigmas a multi-focus
calibration that estimates them reports, test/test_planning_multifocus.py). As the
calibration needs rays of every type for its terms, a type with fewer than MIN_TYPE_RAYS rays
in the captures so far is asked for first (candidates that show it, if any), and the target
is reached only once every type has them.

After a calibration (:meth:`PosePlanner.set_measured`) the captures so far count with the
errors the calibration measured on them, the candidate with the noise it measured: the
predicted covariance is the refinement's cluster-robust sandwich inv(I) (I0 C0 I0 + a (I - I0)
+ b (K - K0)) inv(I), never below inv(I) s^2 (as the refinement reports it), with C0 the
covariance the calibration reports for its captures (information I0, clustered information
K0: refine.pose_information), s its residual corner noise, and a, b the variances
independent across rays and common to the views of a corner that fit its meat I0 C0 I0
(:func:`noise_split`). Measured (observation level, Lytro half crop, 30 seeds): the
prediction from a 3- or 4-capture calibration within 25 % of what the next one reports in
59 of 60 cases (the one left: that calibration freed k_1, k_2, held before), where the
candidate at independent noise missed by up to 47 % (docs/planning-results.md).

Poses map board to the model's MPC frame, X_cam = R X_board + t (DESIGN.md "Frames"): the
planner computes there, depths and constraints included; :meth:`Suggestion.in_frame` gives a
suggestion in the optical frame users are given (a focused camera's origin at the main lens,
:mod:`lf_mpc_calib.camera.optical_frame`).
"""

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration.arm_planning import MOUNT_NAMES, joint_informations
from lf_mpc_calib.calibration.refine import pose_information
from lf_mpc_calib.camera.model import DISTORTION_NAMES, as_points
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError

SCALES = ('k_i', 'k_j', 'k_u', 'k_v')
QUANTITIES = SCALES + ('principal_point_u', 'principal_point_v')
MOUNT_QUANTITIES = ('mount_translation', 'mount_rotation')
"""On an arm: sqrt(trace) of the mount's translation (mm) and rotation-vector (deg) sigmas."""
MOUNT_CONFIDENCE = 1.614
"""On an arm the mount targets bound the mount's error, at 95 % confidence: the planner aims
at sqrt(trace) sigmas of target / MOUNT_CONFIDENCE. The error of a 3-vector with covariance
C has |error|^2 / (trace C / 3) ~ chi^2(3) when C is isotropic, whose 95 % quantile is 7.81:
|error| <= sqrt(7.81 / 3) sqrt(trace C) = 1.614 sqrt(trace C). Stopping at sqrt(trace) <=
target let 2 of 10 rendered rotation errors reach 0.022 / 0.023 deg for a 0.02 deg target
(1.3-1.4 x the sigma; docs/pose-planning.md)."""
CANDIDATES = 120
"""Candidate poses drawn per suggestion."""
MAX_DRAWS = 40
"""Draws tried per candidate wanted before the constraints are refused."""
MIN_CAPTURES = 3
"""Captures a calibration needs (guidance.MIN_POSES)."""
BATCH = 16
"""Candidates whose Jacobian is evaluated together (bounds the memory)."""
REFINE_ROUNDS = 2
"""Rounds of poses drawn around the best candidate so far (:meth:`PosePlanner.suggest`)."""
NEIGHBOURS = 8
"""Poses drawn around the best per round."""
NEIGHBOUR_SPREAD = 0.1
"""First round's spread: depth x exp(N(0, it)), tilts and roll + N(0, 30 it) deg, the centre
+ N(0, it) x the lateral range."""
SPLIT_MISFIT = 0.3
"""Largest misfit (:func:`noise_split`) at which a calibration's meat counts as described by
independent plus per-corner common noise. Measured: 0.11-0.23 on observations with such
noise (Lytro half crop, 0.08 + 0.03 px), 0.39-0.79 on the rendered Lytro loop, whose
errors it does not describe (there a later capture is predicted at the residual noise,
independent)."""
TIE_WEIGHT = 1e-3
"""Weight of sum (sigma / target)^2 in the criterion: orders candidates once every sigma
meets its target."""
MIN_TYPE_RAYS = 50
"""Multi-focus: rays each micro-lens type needs in the captures (the calibration estimates its
terms; a type without rays is refused there), asked for before the criterion."""


def noise_split(meat, information, common):
    """
    (a, b, misfit): a, b >= 0 the variances (px^2 per coordinate) independent across rays
    and common to the views of a corner whose meat a I + b K fits a calibration's measured
    ``meat`` (nf, nf) best (least squares over the entries scaled by the information's
    diagonal), I the captures' ``information``, K their ``common`` (clustered) information;
    misfit the norm of what the fit leaves over that of the meat. The cluster-robust
    covariance measures the noise this way (refine._covariance_from); so does a capture the
    planner predicts where the fit describes the meat (misfit <= SPLIT_MISFIT).
    """
    from scipy.optimize import nnls
    d = 1.0 / np.sqrt(np.maximum(np.diag(information), 1e-300))
    scaled = [np.asarray(m, float) * np.outer(d, d) for m in (meat, information, common)]
    upper = np.triu_indices(len(d))
    a = np.column_stack([scaled[1][upper], scaled[2][upper]])
    (var_ind, var_common), rest = nnls(a, scaled[0][upper])
    return float(var_ind), float(var_common), float(rest / np.linalg.norm(scaled[0][upper]))


def criterion(ratios):
    """The planner's criterion of sigma / target ratios (Q,): sum max(ratio, 1)^2 +
    TIE_WEIGHT sum ratio^2 (module docstring)."""
    r2 = np.square(np.asarray(ratios, float))
    return float(np.maximum(r2, 1.0).sum() + TIE_WEIGHT * r2.sum())


@dataclass(frozen=True)
class PoseConstraints:
    """
    Where the board may go, in the model's MPC frame (a focused camera's Z counts from the
    plane conjugate to the micro-lenses; conventional cameras: the optical frame).

    views (V, 2): the views (conventional: view indices) or micro-image centres (focused) the
    rows are predicted in; image_size (w, h): a view's size in px (conventional; a corner must
    be inside it, margin_px in, in every view); micro_image_radius: focused cameras, a corner
    is seen where |(u, v)| < it (and must be in >= min_rays micro-images); depth_range_m
    (near, far): board-centre Z; excluded_depths_m (lo, hi) or None: a band of Z kept clear
    (focused: around the plane conjugate to the micro-lenses); max_tilt_deg: board normal
    against the optical axis about each of x, y; max_roll_deg: about the board normal.
    Multi-focus cameras (focused, T micro-lens types): view_types (V,) the type of each
    micro-image and type_depths_m ((lo, hi),) * T: the corner depths (Z, MPC frame) each
    type images sharply enough to be detected (its focus band); a ray counts only in a
    micro-image whose type's band holds its corner's Z. None: every type sees every depth.
    min_corners: conventional cameras, None: the whole board in every view (a checkerboard);
    N: a board that counts partly out of view (ChArUco, its markers naming the corners it
    shows): a corner counts in the views it falls in (min_rays or more), a pose needs N such
    corners not on one line, and candidates are drawn with the board centre up to the views'
    edges (partly out of view, where the principal point and the distortion are determined).
    message_origin_z: Z (this frame) of the origin of the frame the refusals name depths in
    (a focused camera's optical frame: C_z = -1/k_3,
    :class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame`; 0: this frame's own).
    """

    views: np.ndarray
    depth_range_m: tuple
    image_size: tuple = None
    micro_image_radius: float = None
    excluded_depths_m: tuple = None
    max_tilt_deg: float = 30.0
    max_roll_deg: float = 15.0
    margin_px: float = 1.0
    min_rays: int = 2
    view_types: np.ndarray = None
    type_depths_m: tuple = None
    min_corners: int = None
    message_origin_z: float = 0.0

    def _said(self, *z):
        """Depths as the refusals name them (message_origin_z)."""
        return tuple(float(v) - float(self.message_origin_z) for v in z)

    def __post_init__(self):
        near, far = (float(v) for v in self.depth_range_m)
        if self.min_corners is not None and not (
                self.image_size is not None and int(self.min_corners) >= 4):
            raise InvalidInputError(f'min_corners: expected None or >= 4 with image_size '
                                    f'(conventional), got {self.min_corners!r}')
        if not near < far:
            raise InvalidInputError(f'depth_range_m: expected near < far, got {near}, {far}')
        if (self.image_size is None) == (self.micro_image_radius is None):
            raise InvalidInputError('give image_size (conventional) or micro_image_radius '
                                    '(focused), exactly one')
        if not 0.0 <= self.max_tilt_deg < 90.0:
            raise InvalidInputError(f'max_tilt_deg: expected 0-90, got {self.max_tilt_deg}')
        if self.excluded_depths_m is not None:
            lo, hi = self.excluded_depths_m
            if lo <= near and hi >= far:
                lo, hi, near, far = self._said(lo, hi, near, far)
                raise DegenerateConfigurationError(
                    f'no pose satisfies the constraints: the excluded band {lo:.3f}-{hi:.3f} m '
                    f'covers the whole depth range {near:.3f}-{far:.3f} m')
        if (self.view_types is None) != (self.type_depths_m is None):
            raise InvalidInputError('view_types and type_depths_m go together (multi-focus)')
        if self.view_types is not None:
            self._check_types(near, far)

    def _check_types(self, near, far):
        """Multi-focus: one type per view, one (lo, hi) per type, some band in range."""
        types = np.asarray(self.view_types)
        n_views = len(np.asarray(self.views).reshape(-1, 2))
        if self.micro_image_radius is None or types.shape != (n_views,) \
                or not np.issubdtype(types.dtype, np.integer) or types.min() < 0:
            raise InvalidInputError(f'view_types: expected a focused camera\'s {n_views} '
                                    f'micro-image types (integers >= 0), got {types.shape}')
        bands = np.asarray(self.type_depths_m, float)
        if bands.ndim != 2 or bands.shape[1] != 2 or len(bands) <= types.max() \
                or not np.all(bands[:, 0] < bands[:, 1]):
            raise InvalidInputError(
                f'type_depths_m: expected (lo, hi) with lo < hi for each of the '
                f'{types.max() + 1} lens types, got {self.type_depths_m!r}')
        object.__setattr__(self, 'view_types', types)
        object.__setattr__(self, 'type_depths_m', bands)
        if not np.any((bands[:, 0] < far) & (bands[:, 1] > near)):
            near, far = self._said(near, far)
            raise DegenerateConfigurationError(
                'no pose satisfies the constraints: no lens type images the depth range '
                f'{near:.3f}-{far:.3f} m sharply (focus bands ' + ', '.join(
                    f'type {t}: {lo:.3f}-{hi:.3f} m' for t, (lo, hi)
                    in enumerate(bands - self.message_origin_z)) + ')')

    def depth_allowed(self, z):
        """Whether board-centre depth z is in range and outside the excluded band."""
        near, far = self.depth_range_m
        if not near <= z <= far:
            return False
        band = self.excluded_depths_m
        return band is None or not band[0] < z < band[1]


def _partial_rows(seen, board, min_corners, min_rays):
    """(V * M,) bool of the rows of a partial view that count, from seen (V, M): the corners
    in ``min_rays`` views or more; None when fewer than ``min_corners`` of them, or all on
    one line of the board (M, 3), are left."""
    keep = seen.sum(axis=0) >= min_rays
    xy = board[keep, :2]
    if keep.sum() < min_corners or np.linalg.matrix_rank(xy - xy.mean(axis=0), tol=1e-9) < 2:
        return None
    return (seen & keep[None, :]).ravel()


@dataclass(frozen=True, eq=False)
class Suggestion:
    """
    The next pose: rotation_vector (3,), translation (3,) board -> camera; predicted: {q:
    sigma after the capture} (QUANTITIES, and MOUNT_QUANTITIES on an arm; % for the scales,
    px for the principal point, mm / deg for the mount); criterion: :func:`criterion` of
    sigma_q / target_q; reached: whether every sigma meets its target; why: one line;
    tool_pose: on an arm, the base -> tool pose (w (3,), t (3,)) that brings the camera or
    board there; depth_m: the board centre's depth (Z) that ``why`` names. The pose and the
    depth are in the planner model's MPC frame (:meth:`in_frame`: in the optical frame).
    """

    rotation_vector: np.ndarray
    translation: np.ndarray
    predicted: dict
    criterion: float
    reached: bool
    why: str
    tool_pose: tuple = None
    depth_m: float = None

    def in_frame(self, frame):
        """
        This suggestion in ``frame`` (an :class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame`
        of the planner's model): its pose board -> that frame, and the board depth ``why``
        names measured there (a focused camera's from the main lens, not from the plane
        conjugate to the micro-lenses). The sigmas and the tool pose (base -> tool) do not
        depend on the camera frame. Not to be given back to the planner
        (:meth:`PosePlanner.add_capture` takes the model's frame).
        """
        if frame.is_identity:
            return self
        rv, tv = frame.poses(self.rotation_vector, self.translation)
        why, depth = self.why, self.depth_m
        if depth is not None:
            depth = frame.depths(depth)
            why = why.replace(_board_at(self.depth_m), _board_at(depth), 1)
        return replace(self, rotation_vector=rv, translation=tv, why=why, depth_m=depth)

    def to_dict(self):
        """Plain types (a Trigger reply's JSON, a YAML file)."""
        return {'rotation_vector': [float(v) for v in self.rotation_vector],
                'translation_m': [float(v) for v in self.translation],
                'predicted_sigma': {k: float(v) for k, v in self.predicted.items()},
                'criterion': float(self.criterion), 'reached': bool(self.reached),
                'why': self.why,
                **({} if self.tool_pose is None else {'tool_pose_in_base': {
                    'rotation_vector': [float(v) for v in self.tool_pose[0]],
                    'translation_m': [float(v) for v in self.tool_pose[1]]}})}


def _board_at(depth):
    """The words of a suggestion's ``why`` that name the board's depth (m)."""
    return f'board at {depth:.3f} m'


def pose_geometry(rotation_vector, translation, board):
    """(board-centre depth, tilt about x, tilt about y in deg, roll in deg) of one pose."""
    rot = Rotation.from_rotvec(np.asarray(rotation_vector, float))
    centre = as_points(board, 'board', 3).mean(axis=0)
    depth = float(rot.apply(centre)[2] + translation[2])
    roll, ay, ax = rot.as_euler('zyx', degrees=True)
    return depth, float(ax), float(ay), float(roll)


@dataclass(eq=False)
class PosePlanner:
    """
    Plans captures for ``model`` (MPCModel: the current calibration or the nominal camera).

    board (M, 3): the board's corners in its frame; constraints: :class:`PoseConstraints`;
    noise_px: the measured corner noise (px, per coordinate); target_k_pct, target_pp_px:
    what is asked; fix: parameters held in the calibration (default: the distortion terms
    the model has at 0); rng: numpy Generator of the candidates; pose_filter(rvec, tvec) ->
    bool: a further test of where the board may go (e.g. the whole board inside the raw
    image), or None; sigma_scale: {quantity: factor} the predicted sigmas are multiplied by
    (a calibration's reported sigmas against the prediction for its captures), or None;
    arm: :class:`~lf_mpc_calib.calibration.arm_planning.ArmConstraints` on a robot arm (the
    tool poses checked, the mount in the criterion), or None; target_mount_mm,
    target_mount_deg: on an arm, the bounds the mount's error is to be within (the sigma
    aimed at is each over MOUNT_CONFIDENCE: :meth:`target`).
    """

    model: object
    board: np.ndarray
    constraints: PoseConstraints
    noise_px: float
    target_k_pct: float
    target_pp_px: float
    rng: np.random.Generator
    fix: tuple = None
    pose_filter: object = None
    sigma_scale: dict = None
    arm: object = None
    target_mount_mm: float = 0.1
    target_mount_deg: float = 0.02
    information: np.ndarray = field(default=None, init=False)
    common: np.ndarray = field(default=None, init=False)
    """(nf, nf) the captures' clustered information (refine.pose_information): the meat an
    error common to the views of a corner adds per unit variance."""

    def __post_init__(self):
        self.board = as_points(self.board, 'board', 3)
        if not self.noise_px > 0:
            raise InvalidInputError(f'noise_px: expected > 0, got {self.noise_px}')
        if not (self.target_k_pct > 0 and self.target_pp_px > 0):
            raise InvalidInputError(f'targets must be > 0, got {self.target_k_pct} %, '
                                    f'{self.target_pp_px} px')
        if self.arm is not None and not (self.target_mount_mm > 0 and self.target_mount_deg > 0):
            raise InvalidInputError(f'mount targets must be > 0, got {self.target_mount_mm} mm, '
                                    f'{self.target_mount_deg} deg')
        if self.fix is None:
            self.fix = tuple(n for n in DISTORTION_NAMES if getattr(self.model, n) == 0.0)
        self.names = None
        self.captures = 0
        types = self.constraints.view_types
        self.type_rays = None if types is None else np.zeros(int(types.max()) + 1, int)
        """Multi-focus: rays of each micro-lens type in the captures so far."""
        self.measured = None
        self.split_misfit = float('nan')

    @property
    def quantities(self):
        """The quantities predicted: QUANTITIES (+ MOUNT_QUANTITIES on an arm)."""
        return QUANTITIES + (MOUNT_QUANTITIES if self.arm is not None else ())

    def target(self, quantity):
        """The target of one quantity (% / px / mm / deg)."""
        if quantity in SCALES:
            return self.target_k_pct
        return {'mount_translation': self.target_mount_mm / MOUNT_CONFIDENCE,
                'mount_rotation': self.target_mount_deg / MOUNT_CONFIDENCE}.get(
                    quantity, self.target_pp_px)

    # ---- prediction ------------------------------------------------------------------------
    def rows(self, rotation_vector, translation):
        """Predicted noise-free rows of one pose: Observations, or None where not seen."""
        c = self.constraints
        rot = Rotation.from_rotvec(np.asarray(rotation_vector, float))
        cam = rot.apply(self.board) + np.asarray(translation, float)
        side = np.sign(np.mean(c.depth_range_m))    # focused: Z may count from the MLA image
        if np.any(cam[:, 2] * side <= 0):
            return None
        if self.pose_filter is not None and not self.pose_filter(rotation_vector, translation):
            return None
        views = as_points(c.views, 'views', 2)
        n, v = len(cam), len(views)
        pts = np.tile(cam, (v, 1))
        ij = np.repeat(views, n, axis=0)
        uv = self.model.project(pts, ij)
        ok = np.all(np.isfinite(uv), axis=1)
        if c.image_size is not None:
            w, h = c.image_size
            m = c.margin_px
            ok &= ((uv[:, 0] >= m) & (uv[:, 0] <= w - 1 - m)
                   & (uv[:, 1] >= m) & (uv[:, 1] <= h - 1 - m))
            if not ok.all() and c.min_corners is None:
                return None   # the whole board in every view
            if not ok.all():  # a partial view: the corners it shows in min_rays views
                ok = _partial_rows(ok.reshape(v, n), self.board, c.min_corners, c.min_rays)
                if ok is None:
                    return None
        else:
            ok &= np.einsum('nk,nk->n', uv, uv) < c.micro_image_radius ** 2
            if c.view_types is not None:          # multi-focus: the type's focus band
                band = c.type_depths_m[np.repeat(c.view_types, n)]
                ok &= (pts[:, 2] >= band[:, 0]) & (pts[:, 2] <= band[:, 1])
            point = np.tile(np.arange(n), v)
            if np.bincount(point[ok], minlength=n).min() < c.min_rays:
                return None
        point = np.tile(np.arange(n), v)[ok]
        types = None if c.view_types is None else np.repeat(c.view_types, n)[ok]
        return Observations(np.zeros(len(point), int), point, self.board[point],
                            np.column_stack([ij[ok], uv[ok]]), types)

    def pose_informations(self, rvecs, tvecs, rows=None, chains=None):
        """((P, nf, nf) unit-noise information of each pose (rows: their Observations),
        (P, nf, nf) their clustered informations, refine.pose_information, or None on an
        arm). On an arm, of the joint hand-eye problem (12 + nf; chains: the captures' robot
        chains G (w (P, 3), t (P, 3)), default from the arm's mount and board estimates)."""
        rows = [self.rows(r, t) for r, t in zip(rvecs, tvecs)] if rows is None else rows
        if self.arm is not None and chains is None:
            chains = self.arm.chains(rvecs, tvecs)
        out, common = [], []
        for start in range(0, len(rows), BATCH):
            part = rows[start:start + BATCH]
            end = start + len(part)
            if self.arm is not None:
                self.names, info = joint_informations(
                    self.model, part, (chains[0][start:end], chains[1][start:end]),
                    self.arm.mount, self.arm.board, fix=self.fix)
                out.append(info)
                continue
            obs = Observations.concatenate([
                Observations(np.full(len(o), k), o.point, o.board, o.ijuv)
                for k, o in enumerate(part)])
            self.names, info, clusters = pose_information(
                obs, self.model, rvecs[start:end], tvecs[start:end], fix=self.fix,
                clustered=True)
            out.append(info)
            common.append(clusters)
        return np.concatenate(out), (np.concatenate(common) if common else None)

    def _gradient(self):
        """(6 (+ 6 on an arm), nf): d (normalised quantity) / d (free parameter); on an arm
        the last six rows are the mount's translation (mm) and rotation vector (deg)."""
        m, names = self.model, list(self.names)
        g = np.zeros((len(QUANTITIES) + (6 if self.arm is not None else 0), len(names)))
        for q, n in enumerate(SCALES):
            if n in names:
                g[q, names.index(n)] = 100.0 / abs(getattr(m, n)) / self.target_k_pct
        for q, (off, scale) in enumerate((('u_0', 'k_u'), ('v_0', 'k_v')), start=4):
            k, o = getattr(m, scale), getattr(m, off)   # pp = -o / k
            if off in names:
                g[q, names.index(off)] = -1.0 / k / self.target_pp_px
            if scale in names:
                g[q, names.index(scale)] = o / k ** 2 / self.target_pp_px
        if self.arm is not None:
            for c in range(3):
                g[6 + c, names.index(MOUNT_NAMES[3 + c])] = \
                    1e3 / self.target('mount_translation')
                g[9 + c, names.index(MOUNT_NAMES[c])] = \
                    np.degrees(1.0) / self.target('mount_rotation')
        return g

    def set_measured(self, covariance, names, noise_px):
        """
        Count the captures added so far with a calibration's measured errors: ``covariance``
        (F, F) it reports for them over the free parameters ``names`` (its cluster-robust
        covariance: what the detector's errors shared by the views of one corner add), and
        later captures with independent noise ``noise_px`` (its residual corner noise, px per
        coordinate). Returns whether it applies (names those the planner estimates, an
        information so far; else the prediction stays at independent noise).

        The later captures' noise has the structure the calibration measured: its meat
        I0 C0 I0 fitted as a I0 + b K0 (a, b >= 0, :func:`noise_split`; K0 the captures'
        clustered information), a the variance independent across rays, b the variance
        common to the views of a corner; a later capture adds a I + b K to the meat. With
        independent noise alone the 4th and 5th captures' predictions came out 12-47 % below
        what their calibration reports (docs/planning-results.md). Where the fit does not
        describe the meat (misfit over SPLIT_MISFIT: the rendered loop's errors) a later
        capture adds s^2 I, s = ``noise_px`` (:attr:`split_applies` False).
        """
        if (self.information is None or self.names is None or self.arm is not None
                or tuple(names) != tuple(self.names)
                or np.shape(covariance) != self.information.shape
                or not np.all(np.isfinite(covariance)) or not noise_px > 0):
            return False
        info = self.information.copy()
        meat = info @ np.asarray(covariance, float) @ info
        common = None if self.common is None else self.common.copy()
        split = (float(noise_px) ** 2, 0.0, float('nan')) if common is None else \
            noise_split(meat, info, common)
        self.split_misfit = split[2]
        if not split[2] <= SPLIT_MISFIT:    # not described: the residual noise, independent
            split = (float(noise_px) ** 2, 0.0, split[2])
        self.measured = (info, meat, common, split[:2])
        self.noise_px = float(noise_px)
        return True

    @property
    def split_applies(self):
        """Whether the later captures are predicted with the calibration's noise split (its
        meat described by it, :data:`SPLIT_MISFIT`), not at independent residual noise."""
        return self.measured is not None and self.split_misfit <= SPLIT_MISFIT

    @property
    def noise_components(self):
        """(independent, common) corner noise (px per coordinate) a later capture is
        predicted with: after :meth:`set_measured` the calibration's, else (noise_px, 0)."""
        if self.measured is None:
            return self.noise_px, 0.0
        return tuple(float(np.sqrt(v)) for v in self.measured[3])

    def _covariance(self, information, common=None):
        """(nf, nf) covariance of the free parameters for a total information (corner noise
        included; after :meth:`set_measured` the refinement's sandwich with the total
        clustered information ``common``, never below the independent-noise covariance);
        raises LinAlgError when singular."""
        d = np.sqrt(np.maximum(np.diag(information), 1e-300))
        unit = np.linalg.inv(information / np.outer(d, d)) / np.outer(d, d)
        classic = unit * self.noise_px ** 2
        if self.measured is None:
            return classic
        info0, meat0, common0, (var_ind, var_common) = self.measured
        meat = meat0 + (information - info0) * var_ind
        if common is not None and common0 is not None:
            meat = meat + (common - common0) * var_common
        sandwich = unit @ meat @ unit
        up = np.sqrt(np.maximum(np.diag(classic), 0.0)
                     / np.maximum(np.diag(sandwich), 1e-300))
        up = np.maximum(up, 1.0)        # as refine's honest covariance: the larger of the two
        return sandwich * np.outer(up, up)

    def sigmas(self, information, common=None):
        """{quantity: sigma} (% / px / mm / deg) and the A criterion for a total information
        (nf, nf) (and the total clustered information, :meth:`_covariance`)."""
        quantities = self.quantities
        undetermined = {q: float('inf') for q in quantities}, float('inf')
        g = self._gradient()
        try:
            cov = self._covariance(information, common)
        except np.linalg.LinAlgError:
            return undetermined
        var = np.einsum('qa,ab,qb->q', g, cov, g)
        if self.arm is not None:      # the mount: the trace of its translation, rotation
            var = np.concatenate([var[:6], [var[6:9].sum(), var[9:12].sum()]])
        if self.sigma_scale is not None:
            var = var * np.array([self.sigma_scale.get(q, 1.0) for q in quantities]) ** 2
        if np.any(var < 0) or not np.all(np.isfinite(var)):
            return undetermined
        sig = {q: float(np.sqrt(v)) * self.target(q) for q, v in zip(quantities, var)}
        ratio = np.sqrt(var)     # the mount's terms not floored (module docstring)
        return sig, criterion(ratio[:len(QUANTITIES)]) + float(np.sum(var[len(QUANTITIES):]))

    def predicted(self):
        """{quantity: sigma} of the captures so far (inf while undetermined)."""
        if self.information is None:
            return {q: float('inf') for q in self.quantities}
        return self.sigmas(self.information, self.common)[0]

    def reached(self, sig=None):
        """Whether every sigma meets its target (and MIN_CAPTURES are in)."""
        sig = self.predicted() if sig is None else sig
        return (self.captures + (sig is not None) >= MIN_CAPTURES
                and not self.lacking_types()
                and all(sig[q] <= self.target(q) for q in self.quantities))

    def lacking_types(self):
        """Multi-focus: the micro-lens types with fewer than MIN_TYPE_RAYS rays so far."""
        if self.type_rays is None:
            return []
        return [int(t) for t in np.flatnonzero(self.type_rays < MIN_TYPE_RAYS)]

    def _count_types(self, rows):
        """Multi-focus: add the rays of one capture's rows to type_rays (lens_type column, or
        each view's type where the rows' (i, j) are the constraints' views)."""
        if self.type_rays is None:
            return
        types = rows.lens_type
        if types is None:
            views = np.asarray(self.constraints.views, float)
            lookup = {tuple(v): t for v, t in zip(views.tolist(), self.constraints.view_types)}
            types = np.array([lookup.get(tuple(v), -1) for v in rows.ijuv[:, :2].tolist()])
        types = types[(types >= 0) & (types < len(self.type_rays))]
        self.type_rays += np.bincount(types, minlength=len(self.type_rays))

    # ---- captures and candidates -----------------------------------------------------------
    def add_capture(self, rotation_vector, translation, rows=None, robot_pose=None):
        """Account for a capture (followed suggestion or not): its rows predicted, or
        ``rows`` (Observations of that one pose: the corners actually detected); on an arm,
        robot_pose (w (3,), t (3,)) base -> tool where it was measured (default: from the
        arm's mount and board estimates). A pose whose rows are predicted unseen raises."""
        rows = self.rows(rotation_vector, translation) if rows is None else rows
        if rows is None:
            raise InvalidInputError('the captured pose does not show the board where the '
                                    'constraints say it is seen')
        chains = None
        if self.arm is not None and robot_pose is not None:
            from lf_mpc_calib.camera import transforms
            g = tuple(np.asarray(v, float).reshape(1, 3) for v in robot_pose)
            chains = g if self.arm.setup == 'eye-in-hand' else transforms.invert(g)
        infos, commons = self.pose_informations(np.atleast_2d(rotation_vector),
                                                np.atleast_2d(translation), [rows], chains)
        info = infos[0]
        self.information = info if self.information is None else self.information + info
        if commons is not None:
            self.common = commons[0] if self.common is None else self.common + commons[0]
        self.captures += 1
        self._count_types(rows)

    def random_poses(self, n, at_least=None, geometry=None):
        """n random poses within the constraints: (rvecs (k, 3), tvecs (k, 3), rows), k = n,
        or at_least (default n) <= k < n when the draws find no more. geometry: a list
        that gets each pose's (depth, tilt x, tilt y, roll in deg, board-centre x, y)."""
        c = self.constraints
        near, far = c.depth_range_m
        rv, tv, rows = [], [], []
        rejected = {'depth in the excluded band': 0, 'board not seen': 0}
        if self.arm is not None:
            rejected.update({'tool outside the workspace box': 0,
                             'tool tilted over the limit': 0})
        for _ in range(MAX_DRAWS * n):
            z = float(np.exp(self.rng.uniform(np.log(near), np.log(far)))) if near > 0 \
                else float(self.rng.uniform(near, far))
            if not c.depth_allowed(z):
                rejected['depth in the excluded band'] += 1
                continue
            ax, ay = self.rng.uniform(-c.max_tilt_deg, c.max_tilt_deg, 2)
            roll = self.rng.uniform(-c.max_roll_deg, c.max_roll_deg)
            lo, hi = self._lateral_range(z)
            xy = self.rng.uniform(lo, hi)
            placed = self._placed(z, ax, ay, roll, xy)
            if isinstance(placed, str):
                rejected[placed] += 1
                continue
            rv.append(placed[0])
            tv.append(placed[1])
            rows.append(placed[2])
            if geometry is not None:
                geometry.append((z, ax, ay, roll, *xy))
            if len(rv) == n:
                return np.array(rv), np.array(tv), rows
        if rv and len(rv) >= (n if at_least is None else at_least):
            return np.array(rv), np.array(tv), rows
        arm = '' if self.arm is None else f'; {self.arm.describe()}'
        raise DegenerateConfigurationError(
            f'no pose satisfies the constraints: {len(rv)} of {n} found in {MAX_DRAWS * n} '
            f'draws (depths {c._said(near)[0]:.3f}-{c._said(far)[0]:.3f} m, tilt <= '
            f'{c.max_tilt_deg:g} deg{arm}; '
            'rejected: ' + ', '.join(f'{why} {k}' for why, k in rejected.items())
            + '); allow more depths or a smaller board'
            + ('' if self.arm is None else ', or widen the workspace box or tool-tilt limit'))

    def _placed(self, z, ax, ay, roll, xy):
        """The pose of board-centre depth z, tilts ax, ay and roll (deg), centre x, y (m):
        (rvec (3,), tvec (3,), rows), or why it is not allowed (random_poses' counts)."""
        rot = Rotation.from_euler('zyx', [roll, ay, ax], degrees=True)
        t = np.array([xy[0], xy[1], z]) - rot.apply(self.board.mean(axis=0))
        if self.arm is not None:          # discarded before its rows are predicted
            outside, tilted = self.arm.violations(*self.arm.tool_poses(rot.as_rotvec(), t))
            if outside[0] or tilted[0]:
                return ('tool outside the workspace box' if outside[0]
                        else 'tool tilted over the limit')
        r = self.rows(rot.as_rotvec(), t)
        if r is None:
            return 'board not seen'
        return rot.as_rotvec(), t, r

    def _neighbours(self, geometry, n, spread):
        """Up to n feasible poses near one pose's geometry (z, ax, ay, roll, x, y): depth
        scaled by exp(N(0, spread)), tilts and roll moved by N(0, 30 spread deg) within
        their limits, the centre by N(0, spread) of the lateral range at that depth.
        Returns (rvecs, tvecs, rows, geometries)."""
        c = self.constraints
        z0, ax0, ay0, roll0, x0, y0 = geometry
        out = ([], [], [], [])
        for _ in range(n):
            z = z0 * float(np.exp(self.rng.normal(0.0, spread))) if z0 > 0 \
                else z0 + float(self.rng.normal(0.0, spread)) * np.ptp(c.depth_range_m)
            if not c.depth_allowed(z):
                continue
            ax, ay = np.clip(np.array([ax0, ay0]) + self.rng.normal(0.0, 30.0 * spread, 2),
                             -c.max_tilt_deg, c.max_tilt_deg)
            roll = float(np.clip(roll0 + self.rng.normal(0.0, 30.0 * spread),
                                 -c.max_roll_deg, c.max_roll_deg))
            lo, hi = self._lateral_range(z)
            xy = np.array([x0, y0]) + self.rng.normal(0.0, spread, 2) * (hi - lo)
            placed = self._placed(z, ax, ay, roll, xy)
            if isinstance(placed, str):
                continue
            for part, v in zip(out, placed + ((z, ax, ay, roll, *xy),)):
                part.append(v)
        return out

    def _lateral_range(self, z):
        """(lo (2,), hi (2,)) board-centre x, y at depth z where the view sees it."""
        m, c = self.model, self.constraints
        views = as_points(c.views, 'views', 2)
        if c.image_size is not None:
            w, h = c.image_size
            u = np.array([0.0, w - 1.0])
            v = np.array([0.0, h - 1.0])
        else:
            u = v = np.array([-1.0, 1.0]) * c.micro_image_radius
        x = m.k_i * views[:, 0, None] + (m.k_u * u + m.u_0)[None] * z        # (V, 2)
        y = m.k_j * views[:, 1, None] + (m.k_v * v + m.v_0)[None] * z
        if c.image_size is not None:       # seen in every view: the views' overlap
            lo = np.array([x.min(axis=1).max(), y.min(axis=1).max()])
            hi = np.array([x.max(axis=1).min(), y.max(axis=1).min()])
        else:
            lo = np.array([x.min(), y.min()])
            hi = np.array([x.max(), y.max()])
        mid, half = (lo + hi) / 2, np.abs(hi - lo) / 2
        if c.min_corners is not None:      # partial views count: centres up to the edges
            return mid - half, mid + half
        return mid - 0.5 * half, mid + 0.5 * half

    def suggest(self, n_candidates=CANDIDATES, refine=REFINE_ROUNDS):
        """The :class:`Suggestion` among n_candidates random feasible poses, then ``refine``
        rounds of NEIGHBOURS poses around the best so far (each round half the spread of
        the one before; criterion: module docstring)."""
        geometry = []
        rv, tv, rows = self.random_poses(n_candidates, at_least=1, geometry=geometry)
        n_candidates = len(rv)
        lacking, types_note = self.lacking_types(), ''
        if lacking:            # multi-focus: a type the calibration has too few rays of
            need = MIN_TYPE_RAYS - self.type_rays[lacking]
            served = np.array([np.sum(np.bincount(r.lens_type, minlength=len(self.type_rays))
                                      [lacking] >= need) for r in rows])
            shows = list(np.flatnonzero((served == served.max()) & (served > 0)))
            types_note = (f'; lens type(s) {lacking} short of {MIN_TYPE_RAYS} rays: '
                          + (f'chosen among the {len(shows)} candidates that give '
                             f'{served.max()} of them enough' if shows
                             else 'no candidate shows them (their focus band)'))
            if shows:
                rv, tv, rows = rv[shows], tv[shows], [rows[k] for k in shows]
                geometry = [geometry[k] for k in shows]
            refine = 0         # neighbours might not show them
        infos, commons = self.pose_informations(rv, tv, rows)
        base = np.zeros_like(infos[0]) if self.information is None else self.information
        # before the set determines the camera: a ridge of 1e-9 of the candidates' scale
        if self.captures < 3:
            base = base + np.diag(1e-9 * np.diag(infos.mean(axis=0)))

        def scored(infos, commons):
            """sigmas() of the captures so far plus each candidate."""
            if commons is None or self.common is None:
                commons = [None] * len(infos)
            return [self.sigmas(base + info, None if c is None else self.common + c)
                    for info, c in zip(infos, commons)]

        scores = scored(infos, commons)
        rv, tv = list(rv), list(tv)
        best = int(np.argmin([s[1] for s in scores]))
        spread, tried = NEIGHBOUR_SPREAD, 0
        for _ in range(refine):
            nrv, ntv, nrows, ngeo = self._neighbours(geometry[best], NEIGHBOURS, spread)
            spread /= 2
            if not nrv:
                continue
            tried += len(nrv)
            scores += scored(*self.pose_informations(np.array(nrv), np.array(ntv), nrows))
            rv, tv, geometry = rv + nrv, tv + ntv, geometry + ngeo
            best = int(np.argmin([s[1] for s in scores]))
        sig, crit = scores[best]
        z, ax, ay, roll = pose_geometry(rv[best], tv[best], self.board)
        worst = max(self.quantities, key=lambda q: sig[q] / self.target(q))
        tool = None
        if self.arm is not None:
            w, t = self.arm.tool_poses(rv[best], tv[best])
            tool = (w[0], t[0])
        why = (f'of {n_candidates} poses within the constraints'
               + (f' and {tried} near the best' if tried else '')
               + ('' if tool is None else ' (tool poses inside the arm\'s limits)')
               + ', the one that most reduces sum max(sigma / target, 1)^2 (A-optimal on '
               f'what is short of its target): {_board_at(z)}, tilted {ax:.0f} / {ay:.0f} '
               f'deg about x / y; worst after it: {worst} {sig[worst]:.3g}' + types_note)
        return Suggestion(rv[best], tv[best], sig, crit, self.reached(sig), why, tool, z)
