"""
An interactive calibration session: capture raw frames one by one, calibrate, save.

What the calibration node (and any other front end) drives: a white image gives the lenslet
grid (estimated, unless one is given) and the decoder; each :meth:`CalibrationSession.capture`
decodes one raw frame and detects the board in its views (the same decoder, usable views and
corner detector as ``lf-mpc-calib calibrate-raw``, :mod:`lf_mpc_calib.pipeline.offline`); a frame
without a board is reported and not kept, and never disturbs earlier captures.
:meth:`~CalibrationSession.calibrate` runs the full calibration on the kept poses and
:meth:`~CalibrationSession.save` writes the calibration file, the observation table and the
captured frames with a ``manifest.yaml``, so ``lf-mpc-calib calibrate-raw OUTPUT_DIR``
re-calibrates the session offline.

On a robot arm (:meth:`~CalibrationSession.set_arm`) each capture may carry the robot's pose
(base -> tool); :meth:`~CalibrationSession.hand_eye_guidance` says whether the motions so far
determine the mount, :meth:`~CalibrationSession.solve_hand_eye` solves it after a calibration
(:mod:`lf_mpc_calib.calibration.hand_eye`) with the intrinsics refined jointly; the calibration
file then holds that joint calibration (:attr:`~CalibrationSession.published_result`) and its
``hand_eye`` key, the saved manifest the ``arm`` and ``robot_poses`` keys of
``lf-mpc-calib simulate --arm``.

A multi-focus focused camera (``lens_types`` T > 1, Raytrix-like interleaved micro-lens types)
has the type of every micro-image told from all captures at each :meth:`~CalibrationSession.
calibrate` (:func:`lf_mpc_calib.features.lens_type_inference.infer_lens_types`, refused with its
figures when the types cannot be told apart) and the per-type terms estimated jointly; the
calibration file then holds the terms and the type of every micro-image (``type_of_class``),
which the decode node applies.

Not thread-safe: a front end serialises the calls (the node holds a lock).
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DegenerateConfigurationError, DetectionError, \
    InvalidInputError, LFCalibError
from lf_mpc_calib.io.images import as_float_image
from lf_mpc_calib.io.observation_table import observations_path, write_observations
from lf_mpc_calib.io.raw_dataset import MANIFEST, MANIFEST_FORMAT, MANIFEST_VERSION, WHITE_FILE
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.white_image import make_decoder
from lf_mpc_calib.pipeline.offline import MIN_POSES, refusing_options

REPEAT_SHIFT_PX = 0.05   # a captured pose whose corners all moved less than this repeats one


@dataclass(frozen=True, eq=False)
class CaptureReport:
    """
    The outcome of one :meth:`CalibrationSession.capture`.

    accepted: the frame showed the board and was kept as pose ``pose`` (else None);
    observations: rays kept; corners_found / corners_total: board corners seen in at least one
    view; views_used / views_available; corners_per_view (n_j, n_i) int: corners found in each
    decoded view (zeros for a rejected frame); reason: why a frame was rejected ('' if kept);
    poses: kept poses after this capture; unit: 'views', or 'micro-images' for a focused
    camera (views_used / views_available then count micro-images and corners_per_view (1, C)
    holds the micro-images per board corner).
    """

    accepted: bool
    pose: int = None
    observations: int = 0
    corners_found: int = 0
    corners_total: int = 0
    views_used: int = 0
    views_available: int = 0
    corners_per_view: np.ndarray = None
    reason: str = ''
    poses: int = 0
    unit: str = 'views'

    def summary(self):
        """One line for a service answer or a log."""
        if not self.accepted:
            return f'frame rejected: {self.reason} ({self.poses} poses kept)'
        per = np.asarray(self.corners_per_view)
        used = per[per > 0]
        per_what = 'per view' if self.unit == 'views' else 'per corner'
        spread = f'{used.min()}-{used.max()} {per_what}' if used.size else f'none {per_what}'
        return (f'pose {self.pose}: {self.corners_found}/{self.corners_total} corners in '
                f'{self.views_used}/{self.views_available} {self.unit} ({spread}), '
                f'{self.observations} rays; {self.poses} poses kept')


class CalibrationSession:
    """
    Captures, calibrates and saves one light-field camera calibration.

    board: a Checkerboard (``lf_mpc_calib.camera.board`` or the simulator's); camera_type:
    'conventional' (frames decoded into views) or 'focused' (corners in the micro-images,
    :class:`lf_mpc_calib.pipeline.focused_raw.FocusedFrameDetector`; views and
    corner_options then unused); grid: a LensletGrid to decode
    with (None: estimated from the white image); white: the white image (any layout accepted
    by :meth:`set_white`), or None to give it later; views (n_i, n_j) decoded views;
    min_poses: poses needed to calibrate; calibrate_options: keyword arguments of
    :func:`lf_mpc_calib.calibration.calibrate`; corner_options: a CornerOptions;
    strict_views: take corners only from clean views (``Decoder.valid``, else every bright
    view); demosaic: Bayer pattern of the raw frames or None; lens_types: micro-lens types
    of a focused camera (1: one type; T > 1: a multi-focus camera, the types told from the
    captures at each :meth:`calibrate`, :attr:`type_estimate` the last
    :class:`~lf_mpc_calib.features.lens_type_inference.LensTypeEstimate`).
    """

    def __init__(self, board, *, camera_type='conventional', grid=None, white=None,
                 views=(9, 9), min_poses=MIN_POSES, calibrate_options=None,
                 corner_options=None, strict_views=True, demosaic=None, lens_types=1):
        if camera_type not in ('conventional', 'focused'):
            raise InvalidInputError(
                f"camera_type: expected 'conventional' or 'focused', got {camera_type!r}")
        if not isinstance(lens_types, (int, np.integer)) or lens_types < 1:
            raise InvalidInputError(f'lens_types: expected an integer >= 1, got {lens_types!r}')
        if lens_types > 1 and camera_type != 'focused':
            raise InvalidInputError(f'lens_types {lens_types}: micro-lens types are told apart '
                                    f"for a 'focused' camera only, got {camera_type!r}")
        if grid is not None and not isinstance(grid, LensletGrid):
            raise InvalidInputError(f'grid must be a LensletGrid, got {type(grid).__name__}')
        views = tuple(int(v) for v in views)
        if len(views) != 2 or any(v < 1 or v % 2 == 0 for v in views):
            raise InvalidInputError(f'views must be two odd counts >= 1, got {views}')
        if int(min_poses) < 2:
            raise InvalidInputError(f'min_poses must be >= 2, got {min_poses}')
        self.board = board
        self.camera_type = camera_type
        self.views = views
        self.min_poses = int(min_poses)
        self.calibrate_options = dict(calibrate_options or {})
        self.corner_options = corner_options
        self.strict_views = bool(strict_views)
        self.demosaic = demosaic
        self.lens_types = int(lens_types)
        self.type_estimate = None  # LensTypeEstimate of the last calibrate (lens_types > 1)
        self._given_grid = grid
        self.grid = grid
        self.white = None
        self.decoder = None
        self.use = None
        self.view_size = None
        self.frames = []          # raw frames as given, one per kept pose
        self.detections = []      # Detection per kept pose
        self.robot_poses = []     # (w (3,), t (3,)) base -> tool per kept pose, or None
        self.pictures = {}        # {pose: (H, W, 3) uint8 RGB} saved as detections_NNN.png
        self.arm = None           # {'setup', 'base_frame', 'tool_frame'} on a robot arm
        self.hand_eye = None      # HandEyeResult of the last solve_hand_eye
        self.rejected = 0
        self.result = None
        self.jackknife = None     # PoseJackknife of a focused result (calibrate)
        if white is not None:
            self.set_white(white)

    # ---- state --------------------------------------------------------------------------
    @property
    def ready(self):
        """True once a white image (and so a decoder) is set."""
        return self.decoder is not None

    @property
    def num_poses(self):
        """Kept poses."""
        return len(self.frames)

    @property
    def observations(self):
        """All kept observations (an Observations table, possibly empty), with the lens_type
        column once the types are told (:attr:`type_estimate`)."""
        if not self.detections:
            return Observations(np.zeros(0, int), np.zeros(0, int), np.zeros((0, 3)),
                                np.zeros((0, 4)))
        obs = Observations.concatenate([d.observations for d in self.detections])
        if self.type_estimate is None:
            return obs
        idx = self.decoder.detector.lattice.nearest(obs.ijuv[:, :2])
        return dataclasses.replace(obs, lens_type=self.type_estimate.types[idx])

    @property
    def micro_image_types(self):
        """(M,) lens type of every micro-image of the grid, or None (one type / not told)."""
        return None if self.type_estimate is None else self.type_estimate.types

    def _tell_lens_types(self):
        """Tell the lens types from all captures (:attr:`type_estimate`); DetectionError with
        the inference's figures when they cannot be told apart."""
        from lf_mpc_calib.features.lens_type_inference import infer_lens_types
        self.type_estimate = None
        obs = self.observations
        sharp = np.concatenate([d.diagnostics['row_saddle'] for d in self.detections])
        w = np.concatenate([d.diagnostics['w_per_corner'][d.observations.point]
                            for d in self.detections])
        self.type_estimate = infer_lens_types(obs, sharp, w, self.grid, self.lens_types)

    def _detect_again_with_types(self):
        """With the types told, detect every kept frame again: the aperture-cut correction
        (features.aperture_bias) reads each type's own aperture profile from the white. A frame
        that fails now keeps its first detection."""
        det = self.decoder.detector
        if not det.options.aperture_correction:
            return
        det.lens_types = self.type_estimate.types
        for k, raw in enumerate(self.frames):
            try:
                self.detections[k] = self._detect_frame(raw, k, self.detections[k])[1]
            except DetectionError:
                continue

    def set_white(self, white):
        """
        Set the white image: estimates the lenslet grid (unless one was given), builds the
        decoder and the usable views, and detects the frames captured before again with it.
        Returns the grid.

        The new white is checked completely before anything changes: its size (that of the
        frames already captured, and of a given grid), that a lenslet grid is found in it, that
        it gives usable views, and that every kept frame still shows the board with it. A
        white that fails any check raises an LFCalibError and leaves the session as it was
        (to change cameras, :meth:`reset` first). The calibration is cleared when it succeeds.
        """
        raw_white = np.asarray(white)
        w = as_float_image(raw_white, 'white')
        if self.frames and np.shape(self.frames[0])[:2] != w.shape[:2]:
            f_h, f_w = np.shape(self.frames[0])[:2]
            raise InvalidInputError(
                f'white image is {w.shape[1]}x{w.shape[0]} px but the {self.num_poses} '
                f'captured frames are {f_w}x{f_h} px; expected a white image of the same '
                f'camera (reset the session to change cameras)')
        if self.camera_type == 'focused':
            from lf_mpc_calib.pipeline.focused_raw import FocusedFrameDetector
            candidate = FocusedFrameDetector(self.board, raw_white, self._given_grid)
            grid, decoder, use = candidate.grid, candidate, None
        else:
            grid, decoder = make_decoder(w, views=self.views, demosaic=self.demosaic,
                                         grid=self._given_grid)
            use = decoder.valid if self.strict_views else decoder.bright
        if use is not None and not np.any(use):
            raise DetectionError(
                f'white image {w.shape[1]}x{w.shape[0]} px gives no usable view (lenslet grid '
                f'{grid.shape[0]}x{grid.shape[1]}); expected the white image of the camera '
                f'(a uniformly lit, diffuse scene)')
        if use is not None:
            candidate = _Detector(self.board, raw_white, decoder, use, self.corner_options)
        detections, view_size = [], None
        for k, raw in enumerate(self.frames):
            try:
                lf, det = candidate.detect(raw, pose=k)
            except DetectionError as exc:
                raise DetectionError(
                    f'with this white image captured pose {k} no longer shows the board '
                    f'({exc}); white image refused, session unchanged (reset the session to '
                    f'change cameras)') from exc
            detections.append(det)
            view_size = _view_size(lf, raw_white)
        self.white, self.grid, self.decoder, self.use = raw_white, grid, decoder, use
        self.detections, self.view_size = detections, view_size
        self.result = None
        self.jackknife = None
        self.type_estimate = None
        return grid

    def reset(self):
        """Forget every capture and the calibration; keep the white image and grid."""
        self.frames, self.detections, self.robot_poses = [], [], []
        self.pictures = {}
        self.rejected = 0
        self.result = None
        self.jackknife = None
        self.hand_eye = None
        self.type_estimate = None

    # ---- robot arm ----------------------------------------------------------------------
    def set_arm(self, setup, base_frame, tool_frame):
        """Captures come from a robot arm in ``setup`` ('eye-in-hand' | 'eye-to-hand')."""
        from lf_mpc_calib.calibration.hand_eye import check_setup
        if not base_frame or not tool_frame:
            raise InvalidInputError(f'an arm needs a base and a tool frame, got '
                                    f'{base_frame!r}, {tool_frame!r}')
        self.arm = {'setup': check_setup(setup), 'base_frame': str(base_frame),
                    'tool_frame': str(tool_frame)}

    def _robot_arrays(self):
        """(pose ids (R,), rotation vectors (R, 3), translations (R, 3)) of kept poses with a
        robot pose."""
        ids = [k for k, r in enumerate(self.robot_poses) if r is not None]
        rv = np.array([self.robot_poses[k][0] for k in ids]).reshape(-1, 3)
        tv = np.array([self.robot_poses[k][1] for k in ids]).reshape(-1, 3)
        return np.array(ids, dtype=int), rv, tv

    def hand_eye_guidance(self):
        """MotionDiversity of the robot poses so far (whether they determine the mount, what
        to add): :func:`lf_mpc_calib.calibration.hand_eye.motion_diversity`."""
        from lf_mpc_calib.calibration.hand_eye import motion_diversity
        return motion_diversity(self._robot_arrays()[1])

    def solve_hand_eye(self, **options):
        """
        Solve the hand-eye calibration of the last calibration with the captures' robot poses;
        returns (and keeps) the HandEyeResult. The intrinsics are refined jointly with the
        mount (the arm ties every capture's board pose to 12 parameters; not with lens-type
        terms, :func:`~lf_mpc_calib.calibration.hand_eye_joint.refines_intrinsics`): that joint
        calibration is what the session then saves and publishes (:attr:`published_result`,
        also ``extras['joint_calibration']``; ``extras['intrinsics_shift']``: how far it moved
        from the camera-only ``result``, :func:`~lf_mpc_calib.calibration.hand_eye_joint.
        intrinsics_shift`). ``options``: of
        :func:`~lf_mpc_calib.calibration.hand_eye.calibrate_hand_eye`. Raises the
        LFCalibErrors of that function (motions that do not determine the mount, poses that
        disagree), InvalidInputError when not calibrated or not on an arm.
        """
        from lf_mpc_calib.calibration.hand_eye import calibrate_hand_eye
        from lf_mpc_calib.calibration.hand_eye_joint import (
            attach_joint_calibration, refines_intrinsics)
        if self.result is None or self.arm is None:
            raise InvalidInputError('hand-eye calibration needs a calibration and an arm '
                                    '(base and tool frames) first')
        ids, rv, tv = self._robot_arrays()
        self.hand_eye = None
        options = dict({'refine_intrinsics': refines_intrinsics(self.result)}, **options)
        he = calibrate_hand_eye(self.observations, self.result, rv, tv,
                                setup=self.arm['setup'], robot_pose_ids=ids, **options)
        attach_joint_calibration(he, self.observations, self.result)
        self.hand_eye = he
        return he

    @property
    def published_result(self):
        """The CalibrationResult the session saves and publishes: the joint hand-eye one once
        the mount is solved (the mount refers to its optical frame), else ``result``."""
        from lf_mpc_calib.calibration.hand_eye_joint import published_result
        return published_result(self.result, self.hand_eye)

    @property
    def acceptance(self):
        """The verdict of the one acceptance rule (:mod:`lf_mpc_calib.calibration.acceptance`,
        calibrate-raw's) on :attr:`published_result`, against the corner noise of the captures;
        None before a calibration. The session keeps a calibration the rule does not accept:
        the node says so in its reply, on ~/status and in the saved folder's manifest."""
        if self.result is None:
            return None
        from lf_mpc_calib.calibration.acceptance import acceptance
        from lf_mpc_calib.pipeline.offline import detections_corner_noise
        noise = (detections_corner_noise(self.detections, self.camera_type)
                 if self.detections else None)
        return acceptance(self.published_result, corner_noise_px=noise)

    def hand_eye_mapping(self, optical_frame):
        """The calibration file's ``hand_eye`` mapping of the last solve, or None."""
        if self.hand_eye is None:
            return None
        return self.hand_eye.to_dict(base_frame=self.arm['base_frame'],
                                     tool_frame=self.arm['tool_frame'],
                                     optical_frame=optical_frame)

    # ---- capture and calibrate ----------------------------------------------------------
    def _detect(self, raw):
        return self._detect_frame(raw, len(self.frames))

    def detect(self, raw, *, pose=0):
        """(light field or None, Detection) of ``raw`` as :meth:`capture` finds it, nothing
        kept (held-out captures, :mod:`lf_mpc_calib.pipeline.held_out`). Raises
        InvalidInputError without a white image, DetectionError without the board."""
        if not self.ready:
            raise InvalidInputError('no white image yet: set one (white_image topic or file) '
                                    'before capturing')
        return self._detect_frame(raw, pose)

    def _detect_frame(self, raw, pose, previous=None):
        """(light field or None, Detection) of one frame; previous (focused): an earlier
        Detection of it whose board search is reused (MicroImageCornerDetector.detect)."""
        if self.camera_type == 'focused':
            return self.decoder.detect(raw, pose=pose, previous=previous)
        return _Detector(self.board, self.white, self.decoder, self.use,
                         self.corner_options).detect(raw, pose=pose)

    def _check_bit_depth(self, raw):
        """InvalidInputError when an integer frame's depth is not that of the white image and
        of the frames captured so far (a dark 16-bit frame among 8-bit ones finds no board)."""
        kind = np.asarray(raw).dtype
        if kind not in (np.uint8, np.uint16):
            return
        known = [np.asarray(a).dtype for a in [self.white] + self.frames[:1]]
        other = [d for d in known if d in (np.uint8, np.uint16) and d != kind]
        if other:
            bits = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16}
            raise InvalidInputError(
                f'frame is {bits[kind]}-bit ({kind}) but the white image'
                + (' and the frames captured so far are' if self.frames else ' is')
                + f' {bits[other[0]]}-bit ({other[0]}); expected frames of the camera\'s one '
                'bit depth (a camera or driver setting changed?)')

    def capture(self, raw, robot_pose=None):
        """
        Decode ``raw`` (uint8/uint16/float, the white image's size) and detect the board;
        ``robot_pose``: (rotation vector (3,), translation (3,) m) base -> tool at the frame,
        kept with the pose, or None.

        Returns a :class:`CaptureReport`; a frame without the board is reported (accepted
        False, with the reason) and not kept. Raises InvalidInputError when no white image is
        set or the frame does not match it.
        """
        if not self.ready:
            raise InvalidInputError('no white image yet: set one (white_image topic or file) '
                                    'before capturing')
        self._check_bit_depth(raw)
        try:
            lf, det = self._detect(raw)
            self._refuse_repeated_pose(det.observations)
        except DetectionError as exc:
            self.rejected += 1
            return CaptureReport(False, reason=str(exc), poses=self.num_poses)
        self.view_size = _view_size(lf, self.white)
        pose = len(self.frames)
        self.frames.append(np.asarray(raw))
        self.detections.append(det)
        self.robot_poses.append(None if robot_pose is None else
                                tuple(np.asarray(v, float).reshape(3) for v in robot_pose))
        self.result = None
        self.jackknife = None
        self.hand_eye = None
        self.type_estimate = None
        obs = det.observations
        d = det.diagnostics
        if lf is None:   # focused: micro-images instead of views
            used = np.unique(obs.ijuv[:, :2], axis=0)
            return CaptureReport(True, pose, len(obs), int(d['corners_found']),
                                 int(d['corners_total']), len(used),
                                 len(self.decoder.detector.centres),
                                 np.bincount(obs.point)[None], '', self.num_poses,
                                 'micro-images')
        n_j, n_i = lf.views.shape[:2]
        vi = np.searchsorted(np.asarray(lf.i_values), obs.ijuv[:, 0])
        vj = np.searchsorted(np.asarray(lf.j_values), obs.ijuv[:, 1])
        per_view = np.zeros((n_j, n_i), dtype=int)
        np.add.at(per_view, (np.clip(vj, 0, n_j - 1), np.clip(vi, 0, n_i - 1)), 1)
        return CaptureReport(True, pose, len(obs), int(d['corners_found']),
                             int(d['corners_total']), int(d['views_used']),
                             int(d['views_available']), per_view, '', self.num_poses)

    def _refuse_repeated_pose(self, obs):
        """DetectionError when ``obs`` repeats a kept pose: the same corners in the same views
        within REPEAT_SHIFT_PX (a board that has not moved adds no constraint, only weight)."""
        for k, kept in enumerate(self.detections):
            old = kept.observations
            common, a, b = np.intersect1d(_row_keys(obs), _row_keys(old), return_indices=True)
            if len(common) < 0.9 * max(len(obs), len(old)):
                continue
            shift = np.median(np.linalg.norm(obs.ijuv[a, 2:] - old.ijuv[b, 2:], axis=1))
            if shift < REPEAT_SHIFT_PX:
                raise DetectionError(
                    f'the board has not moved since pose {k}: median corner shift '
                    f'{shift:.3g} px < {REPEAT_SHIFT_PX} px over {len(common)} rays; expected '
                    f'a new board pose (move or tilt the board)')

    def calibrate(self):
        """
        Calibrate from the kept poses; returns (and keeps) the CalibrationResult (focused,
        with 4 poses or more: each intrinsic's sigma the larger of the residual and the
        leave-one-pose-out one, :attr:`jackknife`, as calibrate-raw quotes it).

        Raises DegenerateConfigurationError with fewer than ``min_poses`` poses or when the
        poses do not constrain the model, DetectionError when ``lens_types`` > 1 types cannot
        be told apart from the captures, other LFCalibErrors from the calibration.
        """
        if self.num_poses < self.min_poses:
            raise DegenerateConfigurationError(
                f'calibration needs at least {self.min_poses} captured poses showing the '
                f'board, got {self.num_poses} ({self.rejected} frames rejected)')
        from lf_mpc_calib.calibration import calibrate
        self.result, self.hand_eye, self.jackknife = None, None, None
        if self.lens_types > 1:
            self._tell_lens_types()
            self._detect_again_with_types()
        try:
            options = refusing_options(self.calibrate_options)
            if self.camera_type == 'focused':
                from lf_mpc_calib.pipeline.focused_raw import with_raw_type_terms
                options = with_raw_type_terms(self.observations, options)
            self.result = calibrate(self.observations,
                                    **{**options, 'camera_type': self.camera_type})
            if self.camera_type == 'focused':
                from lf_mpc_calib.calibration.focused import orient_focused
                self.result = orient_focused(self.result)
        except DegenerateConfigurationError as exc:
            raise DegenerateConfigurationError(f'{self.num_poses} poses: {exc}') from exc
        self.hand_eye = None
        self.jackknife = self._pose_jackknife()
        if self.jackknife is not None:
            # quoted as calibrate-raw quotes it (pipeline.focused_raw): each sigma the larger
            # of the residual and the leave-one-pose-out one, which also counts errors shared
            # by a pose's corners; the node's file and calibrate-raw's of the saved session
            # then agree, and ~/suggest judges the target on what is quoted
            self.result = self.jackknife.covering_result()
        return self.result

    def _pose_jackknife(self):
        """The leave-one-pose-out sigmas of a focused camera's result (>= 4 poses), else None
        (calibration.pose_jackknife: errors shared within a pose)."""
        from lf_mpc_calib.calibration.pose_jackknife import MIN_POSES, pose_jackknife
        if self.camera_type != 'focused' or self.num_poses < MIN_POSES:
            return None
        try:
            return pose_jackknife(self.observations, self.result)
        except LFCalibError:      # a refit that fails loses nothing of the calibration
            return None

    # ---- outputs ------------------------------------------------------------------------
    def calibration_file(self, camera_name='camera', optical_frame=None):
        """The CalibrationFile of :attr:`published_result` (frame ids from ``camera_name``; the
        hand-eye mount's child ``optical_frame``, default that of ``camera_name``)."""
        if self.result is None:
            raise InvalidInputError('not calibrated yet: calibrate before asking for the '
                                    'calibration file')
        from lf_mpc_calib.io.calibration_file import CalibrationFile, default_frames
        from lf_mpc_calib.measurement.focused import type_class_map
        lens_types = getattr(self.published_result, 'lens_types', None)
        if lens_types is not None:   # the terms, and which micro-image has which type
            types = self.micro_image_types
            lens_types = {**lens_types.to_dict(), **(
                {} if types is None else
                type_class_map(self.grid, types, lens_types.n_types) or {})}
        return CalibrationFile.from_result(
            self.published_result, camera_type=self.camera_type, image_size=self.view_size,
            lenslet_grid=self.grid, camera=camera_name, lens_types=lens_types,
            hand_eye=self.hand_eye_mapping(optical_frame or
                                           default_frames(camera_name)['optical']))

    def save(self, output_dir, camera_name='camera', extra_files=None):
        """
        Write the session into a new folder ``output_dir/<camera_name>_<YYYYmmdd-HHMMSS>``;
        returns the written paths (the manifest last). ``output_dir/latest`` links to it.

        ``<camera_name>.yaml`` (when calibrated) and ``<camera_name>_observations.csv``
        beside it; ``white.png``, ``frame_NNN.png`` (the captured raw frames, 16-bit PNG for
        float input), ``detections_NNN.png`` (the :attr:`pictures` of the captures, RGB) and
        ``manifest.yaml`` (board, white, frames, bayer, lens_types when > 1
        and the SHA-256 of every file), a data set for ``lf-mpc-calib calibrate-raw
        OUTPUT_DIR``. Atomic: the files go to a hidden temporary folder renamed into place
        once complete, so a save cut off leaves earlier saves as they were and no folder that
        looks complete. extra_files: {name: text} written beside them (e.g. the held-out
        captures' verification.yaml). Raises InvalidInputError when nothing was captured and
        nothing calibrated.
        """
        from lf_mpc_calib.io import raw_dataset as rd
        from lf_mpc_calib.io.atomic import write_text_atomically
        from lf_mpc_calib.io.calibration_file import save_calibration
        from lf_mpc_calib.io.images import write_image
        if not self.frames and self.result is None:
            raise InvalidInputError('nothing to save: no frame captured yet')
        tmp, final = rd.new_session_folder(output_dir, camera_name)
        try:
            names = self._write_files(tmp, camera_name, save_calibration, write_image)
            for name, text in (extra_files or {}).items():
                write_text_atomically(tmp / name, text)
                names.append(name)
            frames = [n for n in names if n.startswith('frame_')]
            calibration = f'{camera_name}.yaml' if self.result is not None else None
            manifest = {'format': MANIFEST_FORMAT, 'format_version': MANIFEST_VERSION,
                        'camera_type': self.camera_type,
                        'board': self.board.to_dict(), 'white': WHITE_FILE, 'frames': frames,
                        'bayer': self.demosaic, 'views': list(self.views),
                        'calibration': calibration}
            if self.result is not None:   # the one rule's verdict (calibrate-raw's)
                manifest['acceptance'] = self.acceptance.to_dict()
            if self.lens_types > 1:   # calibrate-raw tells them again
                manifest['lens_types'] = self.lens_types
            if self.arm is not None and any(r is not None for r in self.robot_poses):
                manifest['arm'] = dict(self.arm)   # the keys of simulate --arm
                manifest['robot_poses'] = [
                    {'frame': f'frame_{k:03d}.png',
                     'rotation_vector': [float(x) for x in r[0]],
                     'translation_m': [float(x) for x in r[1]]}
                    for k, r in enumerate(self.robot_poses) if r is not None]
            self._write_camera_info(tmp, camera_name)
            rd.write_manifest(tmp, manifest, names)
            rd.publish_folder(tmp, final)
        except BaseException:
            rd.discard_folder(tmp)
            raise
        return [final / n for n in names] + [final / MANIFEST]

    def _write_camera_info(self, folder, camera_name):
        """camera_info/<camera_name>.yaml: the rectified central view's pinhole calibration
        for ROS image tools (:mod:`lf_mpc_calib.io.camera_info_yaml`), conventional cameras
        once calibrated (a focused camera's central image is rendered at a chosen depth)."""
        if self.result is None or self.view_size is None or self.camera_type != 'conventional':
            return
        from lf_mpc_calib.io.camera_info_yaml import write_camera_info
        from lf_mpc_calib.measurement.live import central_view_intrinsics
        (Path(folder) / 'camera_info').mkdir(exist_ok=True)
        write_camera_info(Path(folder) / 'camera_info' / f'{camera_name}.yaml',
                          central_view_intrinsics(self.calibration_file(camera_name).model),
                          self.view_size,
                          camera_name)

    def _write_files(self, folder, camera_name, save_calibration, write_image):
        """Write every file but the manifest into ``folder`` (each via a temporary name and
        os.replace); returns their names."""
        from lf_mpc_calib.io.atomic import write_atomically
        folder = Path(folder)
        names = []

        def put(name, write):
            write_atomically(folder / name, write)
            names.append(name)

        yaml_path = folder / f'{camera_name}.yaml'
        if self.result is not None:
            cal = self.calibration_file(camera_name)
            put(yaml_path.name, lambda p: save_calibration(p, cal))
        if self.detections:
            obs = self.observations
            put(observations_path(yaml_path).name, lambda p: write_observations(p, obs))
        if self.white is not None:
            white = _as_uint(self.white)
            put(WHITE_FILE, lambda p: write_image(p, white))
        for k, raw in enumerate(self.frames):
            frame = _as_uint(raw)
            put(f'frame_{k:03d}.png', lambda p, frame=frame: write_image(p, frame))
        for k, picture in sorted(self.pictures.items()):
            if k < self.num_poses:
                put(f'detections_{k:03d}.png', lambda p, rgb=picture: write_image(p, rgb))
        return names


@dataclass(frozen=True)
class _Detector:
    """Decoding and corner detection with one white image (the session's, or a candidate)."""

    board: object
    white: np.ndarray
    decoder: object
    use: np.ndarray
    corner_options: object

    def detect(self, raw, *, pose):
        """(decoded light field, Detection) of one raw frame; DetectionError without a board."""
        from lf_mpc_calib.features.board_detection import detect_board_corners
        img = as_float_image(raw, 'raw')
        white_shape = np.shape(self.white)[:2]
        if img.shape[:2] != white_shape:
            raise InvalidInputError(
                f'raw frame is {img.shape[1]}x{img.shape[0]} px but the white image is '
                f'{white_shape[1]}x{white_shape[0]} px')
        lf = dataclasses.replace(self.decoder.decode(img), valid=self.use.copy())
        det = detect_board_corners(lf, self.board, pose=pose, options=self.corner_options)
        return lf, det


def _view_size(lf, white):
    """(width, height) of one decoded view, or of the raw image (focused: lf None)."""
    if lf is None:
        return (int(np.shape(white)[1]), int(np.shape(white)[0]))
    return (int(lf.views.shape[3]), int(lf.views.shape[2]))


def _row_keys(obs):
    """One key (N,) per ray, equal for equal (board point, i, j): the three as raw bytes."""
    rows = np.ascontiguousarray(np.column_stack([obs.point.astype(float), obs.ijuv[:, :2]]))
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * 3))).ravel()


def _as_uint(image):
    """uint8/uint16 kept as they are; float in [0, 1] to 16 bit."""
    arr = np.asarray(image)
    if arr.dtype in (np.uint8, np.uint16):
        return arr
    return np.round(np.clip(arr, 0.0, 1.0) * 65535.0).astype(np.uint16)


__all__ = ['CalibrationSession', 'CaptureReport']
