"""
The offline pipeline of a focused (plenoptic 2.0) camera: raw frames + a white image ->
calibration, the counterpart of :func:`lf_mpc_calib.pipeline.offline.calibrate_raw`.

    run = calibrate_focused_raw(dataset, progress=...)
    write_outputs(run, 'calibration.yaml', report_dir='report')    # pipeline.offline

The micro-image grid comes from the white image, each frame's corners from the micro-images
(:class:`lf_mpc_calib.features.micro_image_corners.MicroImageCornerDetector`), and the
observation table (i, j) = micro-image centre, (u, v) = corner - centre is calibrated with the
per-lens-type terms when the lens type of each micro-image is known: told from the frames
(``n_types`` > 1, what a real camera needs), given, or taken from the simulator that wrote the
data set (``lens_types='simulated'``: ground truth, for tests and benchmarks only; the run's
``lens_type_source`` says which), oriented with
:func:`lf_mpc_calib.calibration.focused.orient_focused`. Frames where fewer than 3 corners are
seen in enough micro-images are skipped with the reason.
"""

import dataclasses
import time
from pathlib import Path

import numpy as np

from lf_mpc_calib.calibration.acceptance import check_accepted
from lf_mpc_calib.calibration.focused import orient_focused
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DetectionError, InvalidInputError, LFCalibError
from lf_mpc_calib.features.corners import check_detectable
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.io.images import read_float_image
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.lenslet.white_image import bayer_neutral, check_grid_size
from lf_mpc_calib.pipeline.offline import calibrate_kept, detect_frames, refusing_options

MIN_POSES = 3
SIMULATED = 'simulated'
"""``lens_types`` naming the simulator's true lens types (a simulated data set only)."""
RAW_LENS_TYPE_TERMS = 'affine-slope'
"""Per-type terms of raw-frame rows, whose (i, j) are the white image's lattice centres: there a
type's own view-plane scale cancels and its slope kappa_T remains (calibration.type_terms; on
rendered multi-focus frames 'affine' was 5 sigma from the optics, 'affine-slope' 2.3)."""


def truth_centres(lens_types):
    """The optics truth's ``centres`` for a result's LensTypeTerms (None: one type): 'lattice'
    with the '-slope' terms (rows at the lattice's centres), else 'true'."""
    terms = getattr(lens_types, 'terms', '')
    return 'lattice' if terms.endswith('-slope') else 'true'


def with_raw_type_terms(obs, options):
    """``options`` (calibrate keyword arguments) with ``lens_type_terms`` set to
    :data:`RAW_LENS_TYPE_TERMS` when obs holds >= 2 lens types and none was asked for."""
    options = dict(options or {})
    lt = obs.lens_type
    if lt is not None and len(np.unique(lt)) > 1:
        options.setdefault('lens_type_terms', RAW_LENS_TYPE_TERMS)
    return options


def focused_detector(dataset, grid=None, white=None, lens_types=None, options=None,
                     recentre=None):
    """
    The MicroImageCornerDetector of a data set. lens_types: None (no types), (M,) the type of
    every micro-image of the grid, or 'simulated': the true types of the simulated camera that
    wrote the data set (InvalidInputError for a data set of a real camera). recentre: move the
    grid onto the white's lit disks (features.micro_image_centres); None: only a grid
    estimated here (give True for one estimated elsewhere from the same white, e.g. by
    :func:`resolve_camera_type`; a calibration's grid must stay as it is).
    """
    white = read_float_image(dataset.white) if white is None else white
    if recentre is None:
        recentre = grid is None
    try:
        if grid is None:   # a Bayer white: each CFA phase balanced first, as the decoder does
            grid = estimate_grid(white if dataset.demosaic is None
                                 else bayer_neutral(white, dataset.demosaic))
        else:
            check_grid_size(grid, np.shape(white))
    except LFCalibError as exc:
        raise DetectionError(f'white image {dataset.white}: {exc}') from exc
    det = MicroImageCornerDetector(white, grid, options=options, recentre=recentre)
    grid = det.grid
    if isinstance(lens_types, str):
        if lens_types != SIMULATED or dataset.camera is None:
            raise InvalidInputError(
                f"lens types {lens_types!r}: expected T types to tell apart or 'simulated' "
                f'for a data set written by simulate (this one is '
                f'{"simulated" if dataset.camera is not None else "from a real camera"})')
        from lf_mpc_calib.simulation.focused_raw import lens_types_of
        lens_types = lens_types_of(dataset.camera, det.centres)
    if lens_types is not None:
        det = MicroImageCornerDetector(white, grid, lens_types=lens_types, options=options)
    return det


def calibrate_focused_raw(dataset, *, grid=None, lens_types=None, detector_options=None,
                          calibrate_options=None, min_poses=MIN_POSES, progress=None,
                          accept_uncertain=False, n_types=1, recentre=None):
    """
    Detect the board in the micro-images of every frame and calibrate; returns a
    :class:`lf_mpc_calib.pipeline.offline.RawCalibration` with camera_type 'focused'.

    lens_types (M,) per micro-image of the grid, or 'simulated' (the simulator's truth); None:
    with ``n_types`` > 1 told from the corners' sharpness and detections by
    :func:`lf_mpc_calib.features.lens_type_inference.infer_lens_types` (DetectionError when
    they do not tell), else one type; the run's ``lens_type_source`` says which ('inferred',
    'simulated', 'given' or None); progress(index, total, frame_path, message) and
    accept_uncertain as for ``calibrate_raw`` (poses that leave the intrinsics too uncertain
    are refused unless ``accept_uncertain``). Raises DetectionError when fewer than
    ``min_poses`` frames show the board. recentre: as for :func:`focused_detector`.
    The result's sigmas are the larger of the residual and the leave-one-pose-out ones
    (:func:`covering_jackknife`, the run's ``jackknife``): quoted and flagged on; the poses
    are refused on the residual ones (calibration.determination).
    """
    from lf_mpc_calib.pipeline.offline import RawCalibration
    check_detectable(dataset.board)
    timings = {'grid': 0.0, 'detect': 0.0, 'calibrate': 0.0}
    t0 = time.perf_counter()
    white = read_float_image(dataset.white)
    det = focused_detector(dataset, grid, white, lens_types, detector_options, recentre)
    source = None if lens_types is None else \
        (SIMULATED if isinstance(lens_types, str) else 'given')
    if progress and source == SIMULATED:
        progress(0, len(dataset.frames), None, 'lens types: the simulator\'s true ones (given, '
                 'not told from the frames)')
    timings['grid'] = time.perf_counter() - t0

    def detected(raw, pose):
        t0 = time.perf_counter()
        try:
            return det.detect(raw, dataset.board, pose=pose)
        finally:
            timings['detect'] += time.perf_counter() - t0

    total = len(dataset.frames)
    found = detect_frames(dataset.frames, white, detected, _micro_images_summary, min_poses,
                          progress=progress, timings=timings, read_key='detect')
    pose_frames, detections, obs = found.pose_frames, found.detections, found.observations()
    if det.lens_types is None and int(n_types) > 1:
        obs = _with_inferred_types(obs, detections, det, int(n_types), progress, total)
        source = 'inferred'
        if det.options.aperture_correction:
            t0 = time.perf_counter()
            obs, detections = _detect_again(det, detections, dataset.frames, dataset.board,
                                            progress, total)
            timings['detect'] += time.perf_counter() - t0
    if progress:
        progress(total, total, None, f'calibrating {len(pose_frames)} poses, {len(obs)} rays')
    t0 = time.perf_counter()
    result = orient_focused(calibrate_kept(
        obs, pose_frames, {**with_raw_type_terms(obs, refusing_options(calibrate_options)),
                           'camera_type': 'focused'}))
    jackknife = covering_jackknife(obs, result)
    if jackknife is not None:
        result = jackknife.covering_result()
    timings['calibrate'] = time.perf_counter() - t0
    from lf_mpc_calib.pipeline.offline import detections_corner_noise
    noise = detections_corner_noise([d for _, d in detections], 'focused')
    verdict = check_accepted(result, corner_noise_px=noise, board_points=dataset.board.points(),
                             camera_type='focused', accept_uncertain=accept_uncertain)
    truth = _focused_truth(dataset.camera, obs, result)
    return RawCalibration(result, obs, pose_frames, detections, found.skipped, det.grid,
                          tuple(det.grid.image_size), dataset.board, truth, timings,
                          dataset.name, None, noise, verdict.fit_ratio,
                          getattr(dataset, 'camera_metadata', None), dataset.white,
                          verdict.determination, camera_type='focused',
                          lens_type_rule=_type_rule(det, result),
                          lens_type_source=source if result.lens_types is not None else None,
                          frame_warnings=found.warned, jackknife=jackknife,
                          acceptance=verdict)


def _micro_images_summary(found):
    """A focused frame's progress line: rays, corners, micro-images, inverse virtual depth."""
    d = found.diagnostics
    return (f'{len(found.observations)} observations, {d["corners_found"]}/'
            f'{d["corners_total"]} corners in {d["median_views"]:.0f} micro-images '
            f'(median), inverse virtual depth {d["inverse_virtual_depth"]:+.3f}')


def _focused_truth(camera, obs, result):
    """The simulated focused ``camera``'s true model for ``result`` (its rays' true lens
    type shares as weights, at the lens-type terms' centres), or None (no such camera)."""
    if camera is None or camera.camera_type != 'focused':
        return None
    w = None   # ray fractions per TRUE type (told labels may be in another order)
    if camera.mla.n_types > 1:
        from lf_mpc_calib.simulation.focused_raw import lens_types_of
        w = np.bincount(lens_types_of(camera, obs.ijuv[:, :2]),
                        minlength=camera.mla.n_types) / len(obs)
    try:
        return camera.ground_truth_model(weights=w, centres=truth_centres(result.lens_types))
    except LFCalibError:
        return None


def covering_jackknife(obs, result):
    """The leave-one-pose-out refits (calibration.pose_jackknife) of a focused ``result``
    whose sigmas it is quoted and flagged on (the larger of the residual and the jackknife
    one: errors shared within a pose, the aperture cut's leftover on the near defocused
    boards, show only in the latter); None with fewer than MIN_POSES poses or a refit that
    fails (the residual sigmas then stand alone)."""
    from lf_mpc_calib.calibration.pose_jackknife import MIN_POSES, pose_jackknife
    if len(obs.pose_ids) < MIN_POSES:
        return None
    try:
        return pose_jackknife(obs, result)
    except LFCalibError:
        return None


def _type_rule(det, result):
    """The lens-type rule of the detector's micro-images for the file (None: one type)."""
    if det.lens_types is None or result.lens_types is None:
        return None
    from lf_mpc_calib.measurement.focused import type_class_map
    return type_class_map(det.grid, det.lens_types, result.lens_types.n_types)


def _with_inferred_types(obs, detections, det, n_types, progress, total):
    """obs with the lens_type column told from the corners' sharpness (all poses)."""
    from lf_mpc_calib.features.lens_type_inference import infer_lens_types
    sharp = np.concatenate([d.diagnostics['row_saddle'] for _, d in detections])
    w = np.concatenate([d.diagnostics['w_per_corner'][d.observations.point]
                        for _, d in detections])
    est = infer_lens_types(obs, sharp, w, det.grid, n_types)
    det.lens_types = est.types
    if progress:
        progress(total, total, None, est.describe())
    idx = det.lattice.nearest(obs.ijuv[:, :2])
    return Observations(obs.pose, obs.point, obs.board, obs.ijuv, est.types[idx])


def _detect_again(det, detections, frames, board, progress, total):
    """(obs, detections) of the kept frames detected again now that ``det`` knows the lens
    types: the aperture-cut correction (features.aperture_bias) reads each type's own aperture
    profile from the white. A frame that fails now keeps its first detection (types added).
    Each frame is read as the first detection read it, from the data set's ``frames`` (less
    their dark frame, io.dark_corrected), not from the Path kept with its detection: that
    reads the file as it is, black level and hot pixels in, against a dark-subtracted white
    (on the realistic multi-focus preset the corners near the micro-images' rims moved
    outwards by 0.03 px and the principal point by 0.9 px)."""
    if progress:
        progress(total, total, None, 'detecting again with the told lens types (each type\'s '
                 'aperture profile for the aperture-cut correction)')
    source = {Path(f): f for f in frames}
    again, parts = [], []
    for k, (path, first) in enumerate(detections):
        try:
            found = det.detect(read_float_image(source[Path(path)]), board, pose=k,
                               previous=first)
        except LFCalibError:
            o = first.observations
            found = dataclasses.replace(first, observations=dataclasses.replace(
                o, lens_type=det.lens_types[det.lattice.nearest(o.ijuv[:, :2])]))
        again.append((path, found))
        parts.append(found.observations)
    return Observations.concatenate(parts), again


def resolve_camera_type(dataset, claimed='auto', *, grid=None):
    """
    The camera type of a data set: ('conventional' | 'focused', grid or None, evidence text).

    A simulated data set's camera says it; else the white image's micro-image pitch (under
    16 px: conventional, no frame read) and the frames' micro-images decide
    (:func:`lf_mpc_calib.lenslet.camera_type.camera_type_of`). A ``claimed`` type the data
    contradicts is refused with the figures (DetectionError). The grid estimated on the way
    (from the Bayer-balanced white, as the decoder does) is returned for reuse (the given one,
    or None for a simulated data set); a focused camera's estimate is the spots' lattice, to
    be moved onto the lit disks by the detector (``recentre=True``).
    """
    from lf_mpc_calib.lenslet.camera_type import PITCH_CONVENTIONAL, camera_type_of
    cam = dataset.camera
    if cam is not None:
        if claimed not in ('auto', cam.camera_type):
            raise DetectionError(f'the data set was simulated with a {cam.camera_type} camera '
                                 f'({cam.name}), not {claimed}; give --camera-type '
                                 f'{cam.camera_type} (or auto)')
        return cam.camera_type, grid, f'simulated {cam.camera_type} camera {cam.name}'
    white = read_float_image(dataset.white)
    if dataset.demosaic is not None:
        white = bayer_neutral(white, dataset.demosaic)
    try:
        est = estimate_grid(white) if grid is None else grid
    except LFCalibError as exc:
        raise DetectionError(f'white image {dataset.white}: {exc}') from exc
    if est.pitch < PITCH_CONVENTIONAL and claimed != 'focused':
        return 'conventional', est, f'micro-image pitch {est.pitch:.1f} px'
    frames = (read_float_image(p) for p in dataset.frames)
    found, evidence = camera_type_of(white, est, frames, claimed)
    text = (f'{len(evidence)} frames: median edge share '
            f'{np.median([e.edge_share for e in evidence]):.2f}, pitch {est.pitch:.1f} px'
            if evidence else 'no frame showed the board')
    return found, est, text


class FocusedFrameDetector:
    """
    The calibration session's detector of a focused camera (:mod:`lf_mpc_calib.pipeline.
    session`): ``detect(raw, pose=k) -> (None, Detection)`` like its decoder-based one; grid
    the micro-image grid; white the white image as given.
    """

    def __init__(self, board, white, grid=None, lens_types=None):
        from lf_mpc_calib.io.images import as_float_image
        w = as_float_image(white, 'white')
        w = w.mean(axis=2) if w.ndim == 3 else w
        try:
            self.detector = MicroImageCornerDetector(w, grid, lens_types=lens_types)
        except LFCalibError as exc:
            raise DetectionError(f'white image {w.shape[1]}x{w.shape[0]} px: {exc}') from exc
        self.board = board
        self.grid = self.detector.grid
        self.white = white
        self.image_size = (int(w.shape[1]), int(w.shape[0]))

    def detect(self, raw, *, pose, previous=None):
        """(None, Detection) of one raw frame; DetectionError without a board. ``previous``:
        an earlier Detection of the frame (MicroImageCornerDetector.detect)."""
        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.io.images import as_float_image
        img = as_float_image(raw, 'raw')
        img = img.mean(axis=2) if img.ndim == 3 else img
        if (img.shape[1], img.shape[0]) != self.image_size:
            raise InvalidInputError(
                f'raw frame is {img.shape[1]}x{img.shape[0]} px but the white image is '
                f'{self.image_size[0]}x{self.image_size[1]} px')
        return None, self.detector.detect(img, self.board, pose=pose, previous=previous)
