"""
Capture guidance: what the poses captured so far determine, and which pose to add next.

The counterpart of the X / Y / size / skew bars of ROS ``camera_calibration``, for the MPC
model. The view-plane parameters k_i, k_j rest on parallax across views, which vanishes for a
board at the focus distance (1 + k₃ Z ≈ 0, NOTES §3): they need boards on both sides of the
focus distance. The intrinsics need tilts about both axes (a planar board facing the camera
leaves focal length and distance confounded). So the guidance reports

- the standard deviation of k_i, k_j (and the worst other intrinsic) in % of the value,
- the depth span of the board centres relative to the focus distance (from k₃ = −1/Z_f,
  NOTES §3, when the data determine k₃; otherwise in metres),
- the spread of board tilts about the camera's x and y axes,

and turns the shortfalls into advice ("add a board nearer than 0.30 m").

Focused cameras (``camera_type='focused'``) differ in two ways. 1/|k₃| is then the plane
conjugate to the micro-lenses, where a point falls in about one micro-image: boards go on one
side of it (where the micro-lenses focus) and the advice asks for a spread of depths there
instead of boards on both sides. And their principal point rests on the board's extent and
corner count, not on where the board sits or how it is tilted (simulated Keplerian, Galilean and
multi-focus cameras, exact rows with 0.1 px noise, 6 poses: sigma 1.1-1.2 px with a 9 x 6 board
filling 0.44 of the view at the middle distance, the same with boards in the image corners or
tilted 40 instead of 20 deg; 0.25-0.6 px with a 12 x 8 board filling 0.85 of the view at the
nearest pose; benchmarks/bench_focused_raw.py): the advice asks for a larger board.

Boards that count partly out of view (``partial_views``: a ChArUco board, whose markers name
the corners it shows) change the advice of a conventional camera: no pose needs the whole
board, and a principal point still short of its target asks for boards pushed partly out of
view into the image corners (where a whole board rarely reaches, and where the principal
point and the distortion are determined; ``benchmarks/bench_charuco.py``: 0.4-0.6 x the
checkerboard's sigma over the same number of poses), naming the ``uncovered`` regions no
captured corner has reached yet.
"""

from dataclasses import dataclass, field

import numpy as np

from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.errors import InvalidInputError

MIN_POSES = 3
NEAR_FRACTION = 0.8
"""A well-conditioned set has a board nearer than this fraction of the focus distance ..."""
FAR_FRACTION = 1.25
"""... and one farther than this fraction."""
MIN_TILT_SPREAD_DEG = 20.0
"""Spread of board tilts wanted about each of the camera's x and y axes."""
TARGET_K_PCT = 1.0
"""Accuracy aimed at for k_i, k_j, k_u, k_v, in % of the value (the calibration's check,
:mod:`~lf_mpc_calib.calibration.determination`)."""
TARGET_PP_PX = 0.5
"""Accuracy aimed at for the principal point, in view pixels."""
FLAG_SIGMAS = 3.0
"""A result is flagged when this many sigma exceed the target."""
TARGET_SIGMA_PCT = 0.5
"""Relative standard deviation of k_i, k_j, k_u, k_v aimed at."""
TARGET_SIGMA_PP_PX = 0.5
"""Standard deviation of the principal point aimed at, in view pixels."""
FOCUSED_DEPTH_RATIO = 1.4
"""Focused cameras: farthest / nearest board depth wanted (bench_focused_raw's spans: 1.5-1.6)."""
DEPTH_ADVICE = {'conventional': 'nearer and farther than the focus distance',
                'focused': 'spread in depth on the side of the plane conjugate to the '
                           'micro-lenses where the micro-images show the board sharp'}
"""The generic depth advice per camera type."""
UNDETERMINED_SIGMA_PCT = 5.0
"""Above this relative sigma the estimated poses cannot be trusted for the depth/tilt figures."""
SCALES = ('k_i', 'k_j', 'k_u', 'k_v')


@dataclass(frozen=True, eq=False)
class CaptureGuidance:
    """
    What a pose set determines and what to add.

    poses: poses used; sigma_pct: {k_i, k_j, k_u, k_v: standard deviation in % of the value} (empty
    before a calibration is possible); focus_distance_m: from k₃ (None when k₃ is not
    determined; for a focused camera the plane conjugate to the micro-lenses);
    sigma_principal_point_px: (u, v) standard deviation of the principal point in view pixels
    (micro-image pixels for a focused camera); depth_m (P,): board-centre depth of each pose
    along the optical axis (focused with k₃ determined: from the main lens);
    tilt_x_deg, tilt_y_deg (P,): board tilt about the camera's x and y axes; advice: list
    of what to capture next (empty when the set is good); sufficient: True when nothing is
    advised; camera_type: 'conventional' or 'focused'.
    """

    poses: int
    sigma_pct: dict = field(default_factory=dict)
    sigma_principal_point_px: tuple = None
    focus_distance_m: float = None
    depth_m: np.ndarray = None
    tilt_x_deg: np.ndarray = None
    tilt_y_deg: np.ndarray = None
    advice: tuple = ()
    camera_type: str = 'conventional'

    @property
    def sufficient(self):
        """True when the pose set meets every target (nothing advised)."""
        return not self.advice

    def depth_span(self):
        """(nearest, farthest) board depth as a fraction of the focus distance, or None."""
        if self.focus_distance_m is None or self.depth_m is None or not len(self.depth_m):
            return None
        return (float(self.depth_m.min() / self.focus_distance_m),
                float(self.depth_m.max() / self.focus_distance_m))

    def summary(self):
        """One line: the figures and the first advice."""
        parts = [f'{self.poses} poses']
        if self.sigma_pct:
            parts.append('sigma k_i {:.2f} %, k_j {:.2f} %'.format(
                self.sigma_pct.get('k_i', float('nan')), self.sigma_pct.get('k_j', float('nan'))))
        span = self.depth_span()
        if span is not None:
            plane = 'the conjugate plane' if self.camera_type == 'focused' else 'focus'
            parts.append(f'depths {span[0]:.2f}-{span[1]:.2f} x {plane} '
                         f'({self.focus_distance_m:.3f} m)')
        elif self.depth_m is not None and len(self.depth_m):
            parts.append(f'depths {self.depth_m.min():.3f}-{self.depth_m.max():.3f} m')
        if self.tilt_x_deg is not None and len(self.tilt_x_deg):
            parts.append(f'tilt spread x {np.ptp(self.tilt_x_deg):.0f} deg, '
                         f'y {np.ptp(self.tilt_y_deg):.0f} deg')
        if not self.sufficient:
            parts.append(f'next: {self.advice[0]}')
        else:
            wide = self.wide_at_three_sigma()
            parts.append('pose set complete' if not wide else
                         'pose set sufficient, though 3 sigma of ' + ', '.join(wide)
                         + ' exceed the accuracy aimed at: more poses narrow it')
        return '; '.join(parts)

    def wide_at_three_sigma(self):
        """The figures whose 3 sigma exceed the accuracy aimed at (the calibration's warnings:
        :mod:`~lf_mpc_calib.calibration.determination`), as 'name 3-sigma unit' strings."""
        wide = [f'{n} {FLAG_SIGMAS * v:.2f} %' for n, v in self.sigma_pct.items()
                if FLAG_SIGMAS * v > TARGET_K_PCT]
        for axis, v in zip('uv', self.sigma_principal_point_px or ()):
            if FLAG_SIGMAS * v > TARGET_PP_PX:
                wide.append(f'principal point {axis} {FLAG_SIGMAS * v:.2f} px')
        return wide

    def to_dict(self):
        """Plain types, for a status message or a YAML file."""
        span = self.depth_span()
        return {
            'poses': int(self.poses),
            'sigma_pct': {k: float(v) for k, v in self.sigma_pct.items()},
            'sigma_principal_point_px': None if self.sigma_principal_point_px is None
            else [float(v) for v in self.sigma_principal_point_px],
            'focus_distance_m': None if self.focus_distance_m is None
            else float(self.focus_distance_m),
            'depth_m': [] if self.depth_m is None else [float(z) for z in self.depth_m],
            'depth_span_of_focus': None if span is None else [span[0], span[1]],
            'tilt_x_deg': [] if self.tilt_x_deg is None else [float(a) for a in self.tilt_x_deg],
            'tilt_y_deg': [] if self.tilt_y_deg is None else [float(a) for a in self.tilt_y_deg],
            'sufficient': bool(self.sufficient),
            'advice': list(self.advice),
        }


def _focus_distance(result):
    """Z_f = 1/|k₃| when the data determine k₃ (|k₃| > 5 sigma), else None."""
    k3 = float(result.model.k_3)
    sigma = float(result.stddev.get('k_3', float('nan')))
    if k3 == 0.0 or not np.isfinite(sigma) or abs(k3) < 5.0 * sigma:
        return None
    return 1.0 / abs(k3)


def _pose_geometry(result, board_points):
    """Board-centre depths (P,) and tilts about the camera x, y axes in degrees (P,), (P,)."""
    rot = rotation_matrix(np.atleast_2d(result.rotation_vectors))
    centre = (np.zeros(3) if board_points is None
              else np.asarray(board_points, dtype=float).reshape(-1, 3).mean(axis=0))
    depth = rot[:, 2, :] @ centre + np.asarray(result.translations)[:, 2]
    normal = rot[:, :, 2]
    normal = normal * np.where(normal[:, 2:3] < 0, -1.0, 1.0)   # facing the camera either way
    tilt_x = np.degrees(np.arctan2(normal[:, 1], normal[:, 2]))
    tilt_y = np.degrees(np.arctan2(normal[:, 0], normal[:, 2]))
    return depth, tilt_x, tilt_y


def capture_guidance(result=None, *, poses=None, board_points=None, focus_distance=None,
                     min_poses=MIN_POSES, camera_type='conventional', partial_views=False,
                     uncovered=()):
    """
    Guidance for the next capture.

    result: the CalibrationResult of the poses so far (None when too few poses to calibrate);
    poses: number of poses captured (default: those in ``result``); board_points (M, 3): the
    board's points in its frame (board centre depth; default the board origin);
    focus_distance: metres, when known from elsewhere (default: from k₃ when determined);
    camera_type: 'conventional' or 'focused' (module docstring); partial_views: the board
    counts partly out of view (a ChArUco board); uncovered: names of the image regions no
    captured corner has reached (report.detections_overlay.region_names). Returns a
    :class:`CaptureGuidance`.
    """
    if camera_type not in DEPTH_ADVICE:
        raise InvalidInputError(f"camera_type: expected one of {tuple(DEPTH_ADVICE)}, got "
                                f"{camera_type!r}")
    if result is None:
        n = int(poses or 0)
        more = max(min_poses - n, 1)
        shown = ('the board, whole or partly out of view (its markers name the corners it '
                 'shows)' if partial_views else 'the whole board')
        return CaptureGuidance(n, advice=(
            f'capture {more} more pose{"s" if more > 1 else ""} showing {shown} '
            f'(at least {min_poses} are needed to calibrate)',))
    if camera_type == 'focused':        # either mirror image of the rays: one answer
        from lf_mpc_calib.calibration.focused import orient_focused
        result = orient_focused(result)
    n = int(poses if poses is not None else len(result.rotation_vectors))
    sigma, pp = _relative_sigmas(result)
    zf = float(focus_distance) if focus_distance else _focus_distance(result)
    depth, tilt_x, tilt_y = _pose_geometry(result, board_points)
    if camera_type == 'focused' and zf is not None:
        depth = depth + zf   # the MPC frame's Z counts from the plane conjugate to the MLA
    worst = max(sigma.items(), key=lambda kv: kv[1], default=(None, 0.0))
    if worst[1] > UNDETERMINED_SIGMA_PCT:
        # the estimated poses are as uncertain as the intrinsics: give the generic advice
        advice = (f'the poses do not determine the camera (sigma of {worst[0]} '
                  f'{worst[1]:.1f} %): add poses',
                  'tilt the board about the camera x axis (top edge towards / away from the '
                  'camera) by 15-30 deg',
                  'tilt the board about the camera y axis (left edge towards / away from the '
                  'camera) by 15-30 deg',
                  f'place boards {DEPTH_ADVICE[camera_type]}')
        return CaptureGuidance(n, sigma, pp, None, depth, tilt_x, tilt_y, advice, camera_type)
    advice = _depth_advice(camera_type, depth, zf) + _tilt_advice(tilt_x, tilt_y)
    if not advice and worst[1] > TARGET_SIGMA_PCT:
        advice.append(f'add poses: sigma of {worst[0]} is {worst[1]:.2f} % (target '
                      f'{TARGET_SIGMA_PCT} %)')
    if not advice and max(pp) > TARGET_SIGMA_PP_PX:
        if camera_type == 'focused':
            advice.append(f'use a larger board with more corners, filling most of the view at '
                          f'the nearest pose, or add poses: principal point sigma ({pp[0]:.2f}, '
                          f'{pp[1]:.2f}) px (target {TARGET_SIGMA_PP_PX} px; it rests on the '
                          f'board\'s extent and corner count, not on where the board sits)')
        else:
            advice.append(_corner_advice(partial_views, uncovered) + f': principal point '
                          f'sigma ({pp[0]:.2f}, {pp[1]:.2f}) px (target {TARGET_SIGMA_PP_PX} '
                          'px)')
    return CaptureGuidance(n, sigma, pp, zf, depth, tilt_x, tilt_y, tuple(advice), camera_type)


def _relative_sigmas(result):
    """({scale name: sigma in % of its value} of SCALES (those with a finite sigma), the
    principal point's sigma (u, v) px)."""
    sigma = {}
    for name in SCALES:
        value = float(getattr(result.model, name))
        s = float(result.stddev.get(name, float('nan')))
        if value != 0.0 and np.isfinite(s):
            sigma[name] = 100.0 * s / abs(value)
    m = result.model
    pp = tuple(float(result.stddev.get(a, np.nan)) / abs(float(k))
               for a, k in (('u_0', m.k_u), ('v_0', m.k_v)))
    return sigma, pp


def _depth_advice(camera_type, depth, zf):
    """Advice (a list) on the boards' depths (P,) m from the main lens: focused cameras a
    spread of FOCUSED_DEPTH_RATIO; conventional ones boards nearer and farther than the focus
    distance ``zf`` (m, None: unknown), or without it a spread of 30 % of the mean depth."""
    advice = []
    if camera_type == 'focused' and zf is not None:
        ratio = float(depth.max() / depth.min()) if depth.min() > 0 else float('inf')
        if ratio < FOCUSED_DEPTH_RATIO:
            advice.append(f'spread the boards in depth: {depth.min():.2f}-{depth.max():.2f} m '
                          f'from the main lens so far (farthest / nearest {ratio:.2f}, '
                          f'{FOCUSED_DEPTH_RATIO} wanted), where the micro-images show the board '
                          f'sharp, at least 25 % away from {zf:.2f} m (the plane conjugate to '
                          'the micro-lenses)')
    elif zf is not None and camera_type != 'focused':
        near, far = NEAR_FRACTION * zf, FAR_FRACTION * zf
        if depth.min() > near:
            advice.append(f'add a board nearer than {near:.2f} m (nearest so far '
                          f'{depth.min():.2f} m, focus distance {zf:.2f} m)')
        if depth.max() < far:
            advice.append(f'add a board farther than {far:.2f} m (farthest so far '
                          f'{depth.max():.2f} m, focus distance {zf:.2f} m)')
    elif camera_type != 'focused' and np.ptp(depth) < 0.3 * float(np.mean(depth)):
        advice.append(f'vary the board distance more (depths {depth.min():.2f}-'
                      f'{depth.max():.2f} m): boards in front of and behind the focus distance')
    return advice


def _tilt_advice(tilt_x, tilt_y):
    """Advice (a list) on the tilts (P,) deg about the camera x and y axes: each should
    spread MIN_TILT_SPREAD_DEG."""
    advice = []
    for axis, tilt, how in (('x', tilt_x, 'top edge towards / away from the camera'),
                            ('y', tilt_y, 'left edge towards / away from the camera')):
        if np.ptp(tilt) < MIN_TILT_SPREAD_DEG:
            advice.append(f'tilt the board about the camera {axis} axis ({how}): spread '
                          f'{np.ptp(tilt):.0f} deg so far, {MIN_TILT_SPREAD_DEG:.0f} deg wanted')
    return advice


def _corner_advice(partial_views, uncovered):
    """What to add for the principal point of a conventional camera (module docstring)."""
    if not partial_views:
        return 'add tilted poses near the image corners'
    corners = [r for r in uncovered if '-' in r]        # 'top-left' ...: the image corners
    where = f' (no corner captured yet: {", ".join(corners)})' if corners else ''
    return 'add tilted poses with the board pushed partly out of view into the image corners' \
        + where


def guidance_so_far(observations, *, board_points=None, min_poses=MIN_POSES,
                    calibrate_options=None, camera_type='conventional', partial_views=False,
                    uncovered=()):
    """
    Calibrate the poses captured so far (quietly) and return their :class:`CaptureGuidance`.

    observations: the Observations of every kept pose; board_points (M, 3): the board;
    calibrate_options: keyword arguments of ``lf_mpc_calib.calibration.calibrate``. Fewer than
    ``min_poses`` poses, or poses that do not calibrate yet, give the advice to add poses
    (with the reason) instead of an error; partial_views, uncovered: as
    :func:`capture_guidance`. Returns (CaptureGuidance, CalibrationResult or None).
    """
    from lf_mpc_calib.calibration.refine import calibrate
    from lf_mpc_calib.errors import LFCalibError
    n = int(np.unique(observations.pose).size) if len(observations) else 0
    if n < min_poses:
        return capture_guidance(None, poses=n, min_poses=min_poses,
                                partial_views=partial_views), None
    try:
        result = calibrate(observations, **(calibrate_options or {}))
    except LFCalibError as exc:
        return CaptureGuidance(n, advice=(
            f'the {n} poses do not calibrate yet ({exc}): add poses tilted 15-30 deg about '
            f'both axes, {DEPTH_ADVICE[camera_type]}',)), None
    return capture_guidance(result, poses=n, board_points=board_points,
                            camera_type=camera_type, partial_views=partial_views,
                            uncovered=uncovered), result
