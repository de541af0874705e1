"""
The next capture of a calibration session: the planner fed with the session's captures.

:func:`suggest_next` takes a :class:`~lf_mpc_calib.pipeline.session.CalibrationSession`, the
model to plan with (the session's calibration once there is one, else a nominal model, e.g.
a previous calibration or the design of the camera) and :class:`PlanSettings`; it accounts
for every capture so far with the rows actually detected (its board pose from the
calibration where the calibration has it, else fitted under the model:
:func:`~lf_mpc_calib.calibration.board_pose.fit_board_pose`) and asks
:class:`~lf_mpc_calib.calibration.planning.PosePlanner` for the next board pose (A-optimal on
sigma / target). Conventional cameras: the candidates' rows are predicted in the decoder's
usable views, a view's size from the white image; a checkerboard whole in every view (its
squares inside each), a ChArUco board also partly out of view with the corners it shows
(:func:`partial_view_corners`: the session's min_corners, which a capture needs too).
Focused cameras: in every micro-image of
the lenslet grid, a corner seen where it falls within FOCUSED_RADIUS_FRACTION of half the
pitch of the centre (in >= 2 micro-images), outside the band ``focus_band_m`` around the
plane conjugate to the micro-lenses (Z = 0 of the MPC frame). The planner computes in the
model's MPC frame; what goes in (the settings' depths and focus bands) and what comes out (the
pose, the depth its reason names, the depth range, the focus bands) is in the optical frame
users are given (:mod:`lf_mpc_calib.camera.optical_frame`: a focused camera's origin at the
main lens, so that every board is at Z > 0; the same frame for a conventional camera), mapped
where :func:`suggest_next` takes and returns them. Multi-focus cameras (lens_types
T > 1): once a calibration has told each micro-image's type, a ray counts only in micro-images
whose type's focus band (``type_depths_m``) holds its corner (every depth without bands),
each type is asked for until it has rays for its terms, and the type terms are held fixed in
the prediction (:mod:`~lf_mpc_calib.calibration.planning`); before that every micro-image
counts. On an arm with the mount solved the
planner gets :class:`~lf_mpc_calib.calibration.arm_planning.ArmConstraints` (the settings'
workspace box and tool-tilt limit, the solved mount and board pose): every suggested tool
pose is inside them and the mount's sigma is in the criterion.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.calibration.arm_planning import ArmConstraints
from lf_mpc_calib.calibration.board_pose import fit_board_pose
from lf_mpc_calib.calibration.closed_form import canonical_frame_signs, sign_change
from lf_mpc_calib.calibration.planning import QUANTITIES, SCALES, PoseConstraints, PosePlanner
from lf_mpc_calib.errors import InvalidInputError, LFCalibError

DEPTH_WIDENING = 1.25
"""Without a depth range: the captures' nearest / farthest board widened by this factor."""
FOCUSED_RADIUS_FRACTION = 0.9
"""Focused: part of a micro-image (radius: half the pitch) where a corner counts as seen."""
DETERMINED_CAPTURES = 5
"""Captures a calibration needs before a prediction from it is trusted where its errors are
not described by independent plus per-corner common noise (PosePlanner.split_applies False:
the rendered loop). Measured there (docs/planning-results.md): from 3 captures 3 of 8 seeds
missed by 34-53 %, the reported sigma itself growing with the 4th capture; from 4 captures
on within 25 %. Where the split applies the prediction holds from 3 captures on (observation
level, 59 of 60 within 25 %)."""


@dataclass(frozen=True)
class PlanSettings:
    """
    What is asked and where the board may go. target_k_pct (% of k_i..k_v), target_pp_px;
    corner_noise_px: assumed before a calibration measures it; depth_range_m (near, far)
    board-centre Z in the optical frame, or None (from the captures so far); max_tilt_deg,
    max_roll_deg; candidates: poses drawn per suggestion; focus_band_m: focused cameras, the
    half-width (m) of the band kept clear around the plane conjugate to the micro-lenses
    (Z = 0 of the MPC frame, Z = 1/k_3 of the optical frame), 0: only the model's test of each
    corner in >= 2 micro-images.
    On an arm: workspace_box (6,)
    [x_min, y_min, z_min, x_max, y_max, z_max] m of the tool's origin in the base frame or
    None; tilt_reference (3,) base-frame direction the tool's z axis is measured from,
    max_tool_tilt_deg its limit; target_mount_mm, target_mount_deg: bounds on the mount's
    error at 95 % (planning.MOUNT_CONFIDENCE). Multi-focus: type_depths_m ((lo, hi),) * T:
    the corner depths (Z, optical frame) each micro-lens type images sharply, in the
    calibration's type numbering, or None (every depth).
    """

    target_k_pct: float = 0.3
    target_pp_px: float = 0.3
    corner_noise_px: float = 0.15
    depth_range_m: tuple = None
    max_tilt_deg: float = 30.0
    max_roll_deg: float = 15.0
    candidates: int = 120
    focus_band_m: float = 0.0
    workspace_box: tuple = None
    tilt_reference: tuple = (0.0, 0.0, -1.0)
    max_tool_tilt_deg: float = 180.0
    target_mount_mm: float = 0.1
    target_mount_deg: float = 0.02
    type_depths_m: tuple = None


@dataclass(frozen=True, eq=False)
class SessionSuggestion:
    """
    suggestion: the planner's :class:`~lf_mpc_calib.calibration.planning.Suggestion` in the
    optical frame (:meth:`~lf_mpc_calib.calibration.planning.Suggestion.in_frame`);
    now: {quantity: sigma} of the captures so far (inf while undetermined); reached: whether
    they already meet the targets; model_source: 'calibration' or 'nominal'; noise_px: the
    corner noise used (after a calibration: its residual noise; on an arm the RMS of the
    per-quantity effective noise); captures: captures accounted for; depth_range_m: the
    board-centre depths searched (optical frame); arm: on an arm,
    {'setup', 'tool_pose_in_base': {frame_id, child_frame_id, rotation_vector,
    translation_m} or None, 'tool_tilt_deg', 'limits', 'note'} (the base -> tool pose that
    brings the camera, or the board, there: ArmConstraints.tool_poses); central_uv (C, 2):
    the suggested board's corners in the central view (px, the model's projection; drawn on
    ~/detections); lens_types: multi-focus, {'types', 'told', 'focus_bands_m' (optical frame),
    'rays_per_type', 'type_terms', 'note'}, else None; prediction_note: why the predicted
    sigmas are not to be trusted to 25 % (:func:`prediction_note`), or None.
    """

    suggestion: object
    now: dict
    reached: bool
    model_source: str
    noise_px: float
    captures: int
    depth_range_m: tuple
    arm: dict = None
    central_uv: np.ndarray = None
    lens_types: dict = None
    prediction_note: str = None

    def to_dict(self, frame_id):
        """Plain types: the Trigger reply's JSON (the pose in ``frame_id``; None for a sigma
        not determined yet)."""
        s = self.suggestion

        def finite(sig):
            return {k: (float(v) if np.isfinite(v) else None) for k, v in sig.items()}
        return {'board_pose': {'frame_id': frame_id,
                               'rotation_vector': [float(v) for v in s.rotation_vector],
                               'translation_m': [float(v) for v in s.translation]},
                'predicted_sigma_after': finite(s.predicted),
                'sigma_now': finite(self.now), 'reached': bool(self.reached),
                'reached_after': bool(s.reached),
                'why': s.why + (f'; {self.prediction_note}' if self.prediction_note else ''),
                'prediction_note': self.prediction_note,
                'model': self.model_source, 'corner_noise_px': float(self.noise_px),
                'captures': int(self.captures),
                'depth_range_m': [float(v) for v in self.depth_range_m],
                **({} if self.arm is None else {'arm': self.arm}),
                **({} if self.lens_types is None else {'lens_types': self.lens_types})}


def reported_sigmas(result):
    """{quantity: sigma} a CalibrationResult reports (k_i..k_v in % of the value, the
    principal point in px; its cluster-robust covariance)."""
    out = {n: 100.0 * result.stddev[n] / abs(getattr(result.model, n)) for n in SCALES}
    out.update(zip(QUANTITIES[4:], (float(v) for v in result.principal_point_stddev())))
    return out


def reported_mount_sigmas(hand_eye):
    """{'mount_translation': mm, 'mount_rotation': deg}: the root of the trace of a
    HandEyeResult's mount translation and rotation-vector variances."""
    return {'mount_translation': 1e3 * float(np.linalg.norm(hand_eye.mount_stddev[1])),
            'mount_rotation': float(np.degrees(np.linalg.norm(hand_eye.mount_stddev[0])))}


def sigma_scale(result, unit_sigmas, hand_eye=None):
    """
    {quantity: factor} that makes the planner's prediction for the captures so far
    (``unit_sigmas``: at unit corner noise) equal the sigmas the calibration ``result``
    (and on an arm its ``hand_eye``: the mount) reports. Each factor is that quantity's
    effective corner noise (px): it folds in what independent noise misses (the detector's
    error shared by the views of one corner, which the reported cluster-robust sigmas count),
    so the target is judged on what the calibration reports. Quantities without a finite
    ratio take the RMS of the others.
    """
    rep = reported_sigmas(result)
    if hand_eye is not None:
        rep.update(reported_mount_sigmas(hand_eye))
    ratio = {q: rep[q] / unit_sigmas[q] for q in unit_sigmas
             if q in rep and np.isfinite(rep[q]) and np.isfinite(unit_sigmas[q])
             and unit_sigmas[q] > 0}
    fallback = (float(np.sqrt(np.mean(np.square(list(ratio.values()))))) if ratio
                else float(result.rms_reprojection_px) / np.sqrt(2.0))
    return {q: float(ratio.get(q, fallback)) for q in unit_sigmas}


def prediction_note(model_source, calibrated_captures, noise_px, split_applies=False):
    """Why a suggestion's predicted sigmas miss what the calibration with it will report by
    more than 25 %, or None (a calibration whose errors the noise split describes, or of >=
    DETERMINED_CAPTURES captures)."""
    if model_source == 'nominal':
        return (f'prediction not to trust: from the nominal model with {noise_px:g} px of '
                'corner noise independent across views, before any calibration; the '
                "calibration's sigmas also count the detector's error common to a corner's "
                'views (rendered Lytro loop: the prediction 63-77 % below them)')
    if calibrated_captures < DETERMINED_CAPTURES and not split_applies:
        return (f'prediction not to trust: from a calibration of {calibrated_captures} '
                'captures whose errors are not independent plus common to a corner\'s views '
                '(the covariance it reports is itself uncertain, and may grow with the next '
                f'capture); predictions are within 25 % from {DETERMINED_CAPTURES} captures on')
    return None


def in_calibrated_frame(model):
    """``model`` (conventional MPCModel) in the camera frame a calibration reports
    (:func:`~lf_mpc_calib.calibration.closed_form.canonical_frame_signs`). A nominal model of
    another sign convention (a design's) would otherwise put the suggestions made before the
    first calibration in another frame than those after it: a board moved there is shown at
    another pose than the one planned (measured: the closed loop's prediction missed the
    reported sigmas by 37 %)."""
    signs = canonical_frame_signs(model)
    return sign_change(model, np.eye(3)[None], np.zeros((1, 3)), signs)[0]


def residual_noise(result):
    """The corner noise (px per coordinate) a CalibrationResult's residuals measure: the root
    of their sum of squares over the degrees of freedom (2 N rows less the free parameters
    and six per pose)."""
    r = np.asarray(result.residuals_px, float)
    dof = 2 * len(r) - len(result.free_names()) - 6 * len(result.pose_ids)
    return float(np.sqrt(np.sum(r * r) / max(dof, 1)))


def capture_poses(session, model, result=None):
    """(rvecs (P, 3), tvecs (P, 3)) of the session's captures: ``result``'s poses (a
    CalibrationResult of ``model``) where it has them, the others fitted under ``model``."""
    rv, tv = [], []
    known = {} if result is None else {int(p): k for k, p in enumerate(result.pose_ids)}
    for k, det in enumerate(session.detections):
        if k in known and len(known) == session.num_poses:
            rv.append(result.rotation_vectors[known[k]])
            tv.append(result.translations[known[k]])
            continue
        try:
            r, t, _ = fit_board_pose(det.observations, model)
        except LFCalibError as exc:
            raise type(exc)(f'capture {k}: {exc}') from None
        rv.append(r)
        tv.append(t)
    return np.array(rv).reshape(-1, 3), np.array(tv).reshape(-1, 3)


def session_constraints(session, depth_range_m, settings, poses=None, band_notes=None,
                        frame=None):
    """:class:`PoseConstraints` of a session (model frame: ``depth_range_m`` and the poses
    there): conventional, its usable views and a view's size; focused, the grid's
    micro-images and the focus band (multi-focus: each type's band from the captures at
    ``poses`` (rvecs, tvecs) where they tell it, :func:`type_bands`, its lines appended to the
    list ``band_notes``; the settings' bands and those lines in ``frame``, the OpticalFrame
    of the model, None: the model's frame)."""
    if not session.ready:
        raise InvalidInputError('no white image yet: the views the board must be seen in are '
                                'not known')
    if session.camera_type == 'focused':
        band = float(settings.focus_band_m)
        return PoseConstraints(
            message_origin_z=0.0 if frame is None else float(frame.origin[2]),
            views=session.grid.centres(), depth_range_m=tuple(depth_range_m),
            micro_image_radius=FOCUSED_RADIUS_FRACTION * session.grid.pitch / 2,
            excluded_depths_m=(-band, band) if band > 0 else None,
            max_tilt_deg=settings.max_tilt_deg, max_roll_deg=settings.max_roll_deg,
            **_type_constraints(session, settings, poses, band_notes, frame))
    dec = session.decoder
    jj, ii = np.nonzero(session.use)
    views = np.column_stack([np.asarray(dec.i_values)[ii], np.asarray(dec.j_values)[jj]])
    size = session.view_size
    if size is None:
        from lf_mpc_calib.io.images import as_float_image
        lf = dec.decode(as_float_image(session.white, 'white'))
        size = (int(lf.views.shape[3]), int(lf.views.shape[2]))
    return PoseConstraints(views=views.astype(float), depth_range_m=tuple(depth_range_m),
                           image_size=tuple(size), max_tilt_deg=settings.max_tilt_deg,
                           max_roll_deg=settings.max_roll_deg,
                           min_corners=partial_view_corners(session))


def partial_view_corners(session):
    """The fewest corners a partial view of the session's board counts with (a ChArUco
    board: its corner options' min_corners, default 6), or None: the whole board (a
    checkerboard)."""
    if getattr(session.board, 'board_type', 'checkerboard') != 'charuco':
        return None
    from lf_mpc_calib.features.corners import CornerOptions
    return int((session.corner_options or CornerOptions()).min_corners)


def _type_constraints(session, settings, poses=None, band_notes=None, frame=None):
    """Multi-focus: {view_types, type_depths_m (model frame)} once the session has told the
    types (each type's band from the captures where they tell it, else from the settings,
    else every depth; where each came from appended to ``band_notes``; the settings' bands and
    the notes in ``frame``, OpticalFrame or None: the model's), {} before or for one type."""
    n_types = int(getattr(session, 'lens_types', 1))
    types = getattr(session, 'micro_image_types', None)
    if n_types < 2 or types is None:
        return {}
    fallback = settings.type_depths_m
    if fallback is None:
        fallback = ((-np.inf, np.inf),) * n_types
    elif np.shape(fallback) != (n_types, 2):
        raise InvalidInputError(f'type focus bands: expected (near, far) m for each of the '
                                f'{n_types} lens types, got {np.asarray(fallback).tolist()}')
    depths, row_types = (np.zeros(0), np.zeros(0, int)) if poses is None else \
        _row_depths_and_types(session, *poses, np.asarray(types, int))
    if frame is not None:           # the bands are told and named in the optical frame
        depths = frame.depths(depths)
    bands, sources = type_bands(depths, row_types, fallback,
                                'plan_type_focus_bands' if settings.type_depths_m is not None
                                else 'every depth')
    if band_notes is not None:
        band_notes.extend(sources)
    if frame is not None:
        bands = tuple(tuple(float(v) for v in b)
                      for b in frame.depths(np.asarray(bands, float), to_model=True))
    return dict(view_types=np.asarray(types, int), type_depths_m=bands)


BAND_QUANTILES = (0.02, 0.98)
"""Quantiles of a type's corner depths taken as its focus band (a stray detection or two
outside it do not widen it)."""


def type_bands(depths, row_types, fallback, fallback_name):
    """
    ((lo, hi),) * T: each micro-lens type's focus band (Z, the frame of ``depths``) from the
    depths (N,)
    of the corners its micro-images detected (row_types (N,)): the BAND_QUANTILES of its
    rows' depths where it has >= MIN_TYPE_RAYS of them, else ``fallback``'s band (the
    parameter or every depth, named ``fallback_name``). Also returns one line per type
    saying where its band came from. The captures' own depths bound an estimated band (it
    may reach beyond them).
    """
    from lf_mpc_calib.calibration.planning import MIN_TYPE_RAYS
    bands, sources = [], []
    for t, band in enumerate(fallback):
        z = np.asarray(depths, float)[np.asarray(row_types) == t]
        if len(z) >= MIN_TYPE_RAYS:
            lo, hi = np.quantile(z, BAND_QUANTILES)
            bands.append((float(lo), float(hi)))
            sources.append(f'type {t}: {lo:.3f}-{hi:.3f} m from {len(z)} corner rows of the '
                           'captures')
        else:
            bands.append(tuple(float(v) for v in band))
            sources.append(f'type {t}: {fallback_name} ({len(z)} corner rows in the captures, '
                           f'{MIN_TYPE_RAYS} needed to tell its band)')
    return tuple(bands), sources


def _row_depths_and_types(session, rvecs, tvecs, types):
    """(depths (N,), types (N,)) of every corner row of the session's captures: its corner's
    Z (MPC frame) at the capture's pose, the type of its micro-image."""
    from scipy.spatial.transform import Rotation

    from lf_mpc_calib.lenslet.nearest import MicroImageLattice
    lattice = MicroImageLattice(session.grid)
    board = session.board.points()
    depths, row_types = [], []
    for det, r, t in zip(session.detections, rvecs, tvecs):
        obs = det.observations
        depths.append(Rotation.from_rotvec(r).apply(board[obs.point])[:, 2] + t[2])
        idx = lattice.nearest(obs.ijuv[:, :2])
        row_types.append(np.where(idx >= 0, types[np.maximum(idx, 0)], -1))
    if not depths:
        return np.zeros(0), np.zeros(0, int)
    return np.concatenate(depths), np.concatenate(row_types)


def _types_part(session, planner, band_notes=(), frame=None):
    """The ``lens_types`` of a SessionSuggestion (None for one type); band_notes: where each
    type's focus band came from; the bands in ``frame`` (OpticalFrame of the planner's model,
    None: the model's frame)."""
    n_types = int(getattr(session, 'lens_types', 1))
    if n_types < 2:
        return None
    c = planner.constraints
    told = c.view_types is not None
    bands = c.type_depths_m if told else None
    if bands is not None and frame is not None:
        bands = frame.depths(bands)
    return {'types': n_types, 'told': told,
            'focus_bands_m': (None if bands is None or not np.all(np.isfinite(bands))
                              else np.asarray(bands).tolist()),
            'rays_per_type': (None if planner.type_rays is None
                              else [int(v) for v in planner.type_rays]),
            'type_terms': 'held fixed in the prediction',
            'focus_band_sources': list(band_notes) if told else None,
            'note': ('each micro-image counts where its type\'s focus band holds the corner'
                     if told else 'lens types not told yet (the first ~/calibrate tells them): '
                     'every micro-image counts')}


def arm_constraints(session, settings):
    """:class:`ArmConstraints` of a session on an arm with its mount solved, else None."""
    he = session.hand_eye
    if session.arm is None or he is None:
        return None
    return ArmConstraints(he.setup, he.mount, he.board, workspace_box=settings.workspace_box,
                          tilt_reference=settings.tilt_reference,
                          max_tool_tilt_deg=settings.max_tool_tilt_deg)


def _arm_part(session, suggestion, arm):
    """The ``arm`` of a SessionSuggestion (None off an arm)."""
    if session.arm is None:
        return None
    out = {'setup': session.arm['setup'], 'tool_pose_in_base': None}
    if arm is None:
        out['note'] = ('the mount is not solved yet: ~/calibrate with robot poses that '
                       'determine it; the board pose above is in the optical frame, the '
                       'workspace box and tool-tilt limit not checked')
        return out
    w, t = suggestion.tool_pose
    out['tool_pose_in_base'] = {'frame_id': session.arm['base_frame'],
                                'child_frame_id': session.arm['tool_frame'],
                                'rotation_vector': [float(v) for v in w],
                                'translation_m': [float(v) for v in t]}
    out['tool_tilt_deg'] = float(arm.tool_tilt_deg(w)[0])
    out['limits'] = arm.describe()
    out['note'] = ('from the solved mount; inside the limits; the mount\'s predicted sigma '
                   '(mount_translation mm, mount_rotation deg) is in predicted_sigma_after')
    return out


def squares_outline(board):
    """(4, 3) the outer corners of the board's squares (board frame): the corner detector
    needs the outer row of squares in view, one square beyond the inner corners."""
    s = board.square
    x0, y0, x1, y1 = -s, -s, board.cols * s, board.rows * s
    return np.array([[x0, y0, 0.0], [x1, y0, 0.0], [x1, y1, 0.0], [x0, y1, 0.0]])


def outline_filter(model, board, constraints):
    """pose_filter(rvec, tvec) -> bool: the board's squares inside every view (1 px in)."""
    from scipy.spatial.transform import Rotation
    outline = squares_outline(board)
    views = np.asarray(constraints.views, float)
    w, h = constraints.image_size
    ij = np.repeat(views, len(outline), axis=0)

    def inside(rvec, tvec):
        pts = Rotation.from_rotvec(rvec).apply(outline) + tvec
        if np.any(pts[:, 2] <= 0):
            return False
        uv = model.project(np.tile(pts, (len(views), 1)), ij)
        return bool(np.all(np.isfinite(uv)) and np.all(
            (uv[:, 0] >= 1) & (uv[:, 0] <= w - 2) & (uv[:, 1] >= 1) & (uv[:, 1] <= h - 2)))
    return inside


def _depth_range(settings, tvecs, rvecs, board, frame):
    """(near, far) board-centre depths in the optical frame ``frame``: the settings', else
    the captures' (poses in the model frame) widened by DEPTH_WIDENING (in the optical frame,
    where every board is at Z > 0: a focused camera's MPC frame has boards at Z < 0)."""
    if settings.depth_range_m is not None:
        return tuple(float(v) for v in settings.depth_range_m)
    if len(tvecs) == 0:
        raise InvalidInputError('no depth range to plan in: set one (the working distances, '
                                'optical frame) or capture a board first')
    from scipy.spatial.transform import Rotation
    centre = board.mean(axis=0)
    z = frame.depths(np.array([Rotation.from_rotvec(r).apply(centre)[2] + t[2]
                               for r, t in zip(rvecs, tvecs)]))
    return float(z.min() / DEPTH_WIDENING), float(z.max() * DEPTH_WIDENING)


def suggest_next(session, settings, *, nominal=None, rng=None):
    """
    The next board pose for ``session`` (conventional): a :class:`SessionSuggestion`.

    Plans with the session's published calibration when it has one (the captures so far
    counted with the covariance it reports, the candidate with the corner noise it measured:
    split into what is independent across views and what is common to a corner's views
    where that describes its errors, else its residual noise,
    :meth:`PosePlanner.set_measured`; on an arm each quantity's noise set so the prediction
    matches the sigmas it and the hand-eye solve report: :func:`sigma_scale`), else
    with ``nominal`` (MPCModel; conventional: in the calibrated frame, :func:`in_calibrated_frame`)
    and ``settings.corner_noise_px``. The planner computes in that model's MPC frame; the
    settings' depths and bands are taken from, and the suggestion (its pose, the depth its
    reason names), the depth range and the focus bands returned in, the model's optical frame
    (:class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame`: a focused camera's board at
    its distance from the main lens), the frame of ~/points and of the calibration's poses. Raises
    InvalidInputError without either model, LFCalibError when a capture cannot be placed
    under the model or no pose satisfies the constraints.
    """
    rng = np.random.default_rng() if rng is None else rng
    result = session.published_result if session.result is not None else None
    if result is not None:
        model, source, noise = result.model, 'calibration', 1.0   # set from the result below
    elif nominal is not None:
        model, source = nominal, 'nominal'
        if session.camera_type == 'conventional':
            model = in_calibrated_frame(nominal)
        noise = float(settings.corner_noise_px)
    else:
        raise InvalidInputError('no model to plan with: calibrate first or give a nominal '
                                'model (a calibration file of this camera or its design)')
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    frame = OpticalFrame.of(model, session.camera_type)
    board = session.board.points()
    rvecs, tvecs = capture_poses(session, model, result)
    depth = _depth_range(settings, tvecs, rvecs, board, frame)      # optical frame
    band_notes = []
    constraints = session_constraints(session, tuple(frame.depths(depth, to_model=True)),
                                      settings, (rvecs, tvecs), band_notes, frame)
    arm = arm_constraints(session, settings) if result is not None else None
    planner = PosePlanner(model, board, constraints, noise_px=noise,
                          target_k_pct=settings.target_k_pct,
                          target_pp_px=settings.target_pp_px, rng=rng,
                          pose_filter=(outline_filter(model, session.board, constraints)
                                       if constraints.image_size is not None
                                       and constraints.min_corners is None else None),
                          arm=arm, target_mount_mm=settings.target_mount_mm,
                          target_mount_deg=settings.target_mount_deg)
    robot = session.robot_poses if arm is not None else [None] * len(rvecs)
    for r, t, det, g in zip(rvecs, tvecs, session.detections, robot):
        planner.add_capture(r, t, rows=det.observations, robot_pose=g)
    if result is not None and planner.set_measured(result.covariance, result.free_names(),
                                                   residual_noise(result)):
        noise = planner.noise_px
    elif result is not None:      # on an arm: the joint problem's sigmas, scaled
        planner.sigma_scale = sigma_scale(result, planner.predicted(),
                                          None if arm is None else session.hand_eye)
        noise = float(np.sqrt(np.mean(np.square(
            [planner.sigma_scale[q] for q in QUANTITIES]))))
    now = planner.predicted()
    suggestion = planner.suggest(n_candidates=settings.candidates)
    reached = planner.reached(now)
    if session.arm is not None and arm is None:
        # on an arm the mount is part of the target: not reached while it is not solved
        # (the demo's loop stopped on the intrinsics alone, the mount unsolved)
        from dataclasses import replace
        reached = False
        suggestion = replace(suggestion, reached=False)
    from scipy.spatial.transform import Rotation
    corners = Rotation.from_rotvec(suggestion.rotation_vector).apply(board) + \
        suggestion.translation
    central = (model.project(corners, np.zeros((len(corners), 2)))
               if session.camera_type == 'conventional' else None)   # focused: no views
    note = prediction_note(source, 0 if result is None else len(result.pose_ids), noise,
                           planner.split_applies)
    # the planner's output, in its model's frame, given in the optical frame
    return SessionSuggestion(suggestion.in_frame(frame), now, reached, source, noise,
                             planner.captures, depth, _arm_part(session, suggestion, arm),
                             central, _types_part(session, planner, band_notes, frame), note)
