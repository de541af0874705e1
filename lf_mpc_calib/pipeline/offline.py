"""
The offline pipeline: a folder of raw checkerboard frames + a white image -> a calibration.

    dataset = load_raw_dataset(folder)            # manifest.yaml (from `simulate`) or options
    run = calibrate_raw(dataset, progress=...)    # decode, detect, calibrate
    write_outputs(run, 'calibration.yaml', report_dir='report')

Each frame is decoded into sub-aperture views with the lenslet grid estimated from the white
image, the board's corners are found across views (:mod:`lf_mpc_calib.features.corners`), and
the observation table of all poses is calibrated. A frame whose board is not found is skipped
and listed in ``run.skipped`` with the reason; the run fails only when fewer than
``min_poses`` frames remain. Pose indices in the observation table and the result count the
frames that were kept, in dataset order (``run.pose_frames`` names them).
"""

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
import time

import numpy as np

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.acceptance import check_accepted
from lf_mpc_calib.calibration.fit_check import corner_noise_px
from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import (DegenerateConfigurationError, DetectionError, InvalidInputError,
                                 LFCalibError)
from lf_mpc_calib.features.board_detection import detect_board_corners
from lf_mpc_calib.features.corners import check_detectable
from lf_mpc_calib.io.calibration_file import CalibrationFile, save_calibration
from lf_mpc_calib.io.images import read_float_image
from lf_mpc_calib.lenslet.frame_check import frame_warnings
from lf_mpc_calib.io.observation_table import observations_path, write_observations
from lf_mpc_calib.io.raw_dataset import load_raw_folder
from lf_mpc_calib.io.rosbag import is_bag, load_bag_dataset
from lf_mpc_calib.lenslet.white_image import make_decoder

MIN_POSES = 3


@dataclass(frozen=True, eq=False)
class RawCalibration:
    """
    The outcome of :func:`calibrate_raw`.

    result: CalibrationResult; observations: the table of all kept poses; pose_frames: frame
    Path per pose index; detections: list of (Path, Detection) of kept poses; skipped: list
    of (Path, reason); grid: the LensletGrid; view_size (width, height); board; truth (or
    None); timings: seconds per stage {'grid', 'decode', 'detect', 'calibrate'};
    usable_views: (n_j, n_i) bool views the corners were taken from (``Decoder.valid``);
    corner_noise_px: the detector's own corner noise (line residuals across views);
    fit_ratio: RMS reprojection / corner noise (checked by
    :mod:`~lf_mpc_calib.calibration.fit_check`); camera_metadata: the data set's (Lytro
    files), for the calibration file, or None; white: the white image's file (or in-memory
    frame) the grid came from, for the report; determination: how well the poses determine
    the camera (:class:`~lf_mpc_calib.calibration.determination.Determination`); camera_type:
    'conventional' (views decoded by the grid) or 'focused'
    (:mod:`lf_mpc_calib.pipeline.focused_raw`; view_size is then the raw image's and
    usable_views None); lens_type_rule: which micro-image has which lens type
    (:func:`lf_mpc_calib.measurement.focused.type_class_map`), written into ``lens_types``;
    lens_type_source: where the lens types came from ('inferred' from the frames, 'given',
    'simulated': the simulator's truth) or None (one type); frame_warnings: (Path, message)
    of kept frames that look like the white image or transposed against it
    (:func:`~lf_mpc_calib.lenslet.frame_check.frame_warnings`; a skipped frame's reason says
    it); jackknife: the PoseJackknife whose larger sigmas a focused result carries
    (:func:`lf_mpc_calib.pipeline.focused_raw.covering_jackknife`) or None; acceptance: the
    verdict of the one acceptance rule (:mod:`lf_mpc_calib.calibration.acceptance`; not
    accepted only when run with ``accept_uncertain``).
    """

    result: object
    observations: Observations
    pose_frames: list
    detections: list
    skipped: list
    grid: object
    view_size: tuple
    board: Checkerboard
    truth: object = None
    timings: dict = field(default_factory=dict)
    name: str = ''
    usable_views: np.ndarray = None
    corner_noise_px: float = float('nan')
    fit_ratio: float = float('nan')
    camera_metadata: dict = None
    white: object = None
    determination: object = None
    camera_type: str = 'conventional'
    lens_type_rule: dict = None
    lens_type_source: str = None
    frame_warnings: list = field(default_factory=list)
    jackknife: object = None
    acceptance: object = None


# ---- input ----------------------------------------------------------------------------------
def load_raw_dataset(folder, *, board=None, white=None, demosaic=None, grid=None, topic=None,
                     dark=None):
    """
    The :class:`~lf_mpc_calib.io.raw_dataset.RawDataset` in ``folder``.

    A rosbag2 (its folder, or its .db3/.mcap file) or a ``topic`` given reads the frames from
    the bag (:func:`lf_mpc_calib.io.rosbag.load_bag_dataset`); anything else is a folder of
    image files (:func:`lf_mpc_calib.io.raw_dataset.load_raw_folder`). The keyword arguments
    are theirs.
    """
    if topic is not None or is_bag(folder):
        if dark is not None:
            raise InvalidInputError('a dark frame (--dark) is for a folder of image files; a '
                                    'rosbag2 input takes none')
        return load_bag_dataset(folder, topic=topic, board=board, white=white,
                                demosaic=demosaic, grid=grid)
    return load_raw_folder(folder, board=board, white=white, demosaic=demosaic, grid=grid,
                           dark=dark)


# ---- calibration ----------------------------------------------------------------------------
def refusing_options(calibrate_options):
    """``calibrate_options`` with ``raise_on_failure`` on unless stated: a pipeline refuses a
    refinement that stopped without converging (ConvergenceError with its iterations and RMS)
    instead of writing or publishing it."""
    options = dict(calibrate_options or {})
    options.setdefault('raise_on_failure', True)
    return options


def check_enough_poses(pose_frames, total, skipped, min_poses):
    """DetectionError unless the board was found in ``min_poses`` of the ``total`` frames
    (pose_frames the kept ones; skipped (path, reason) pairs, named in the error)."""
    if len(pose_frames) < min_poses:
        reasons = '; '.join(f'{p.name}: {r}' for p, r in skipped) or 'none'
        raise DetectionError(
            f'the board was found in {len(pose_frames)} of {total} frames, at least '
            f'{min_poses} are needed (skipped: {reasons})')


@dataclass(eq=False)
class FrameDetections:
    """
    What :func:`detect_frames` found: pose_frames, the Path of each kept frame (pose index
    order); parts, their Observations; detections, (Path, Detection) of each; skipped,
    (Path, reason) of the others; warned, (Path, message) of kept frames that look wrong
    (:func:`~lf_mpc_calib.lenslet.frame_check.frame_warnings`).
    """

    pose_frames: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    detections: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    warned: list = field(default_factory=list)

    def observations(self):
        """The kept frames' Observations, one table."""
        return Observations.concatenate(self.parts)


def detect_frames(frames, white, detect, summary, min_poses, *, progress=None, timings=None,
                  read_key='detect'):
    """
    Read each of ``frames`` and find the board in it: detect(raw (H, W) float, pose index)
    -> Detection; an LFCalibError skips the frame, its reason joined by what
    frame_warnings suspects of it against ``white`` (H, W). progress(index, total, Path,
    message) after each frame: summary(Detection) -> message, or 'skipped: reason'. The
    reading time is added to timings[read_key]. Returns a :class:`FrameDetections`;
    DetectionError naming the skipped frames when fewer than ``min_poses`` were kept.
    """
    found = FrameDetections()
    total = len(frames)
    for k, path in enumerate(frames):
        suspicions = []
        try:
            t0 = time.perf_counter()
            raw = read_float_image(path)
            suspicions = frame_warnings(raw, white)
            if timings is not None:
                timings[read_key] += time.perf_counter() - t0
            det = detect(raw, len(found.pose_frames))
        except LFCalibError as exc:
            reason = '; '.join([str(exc)] + suspicions)
            found.skipped.append((Path(path), reason))
            if progress:
                progress(k, total, Path(path), f'skipped: {reason}')
            continue
        found.warned += [(Path(path), w) for w in suspicions]
        found.pose_frames.append(Path(path))
        found.parts.append(det.observations)
        found.detections.append((Path(path), det))
        if progress:
            progress(k, total, Path(path), summary(det))
    check_enough_poses(found.pose_frames, total, found.skipped, min_poses)
    return found


def calibrate_kept(obs, pose_frames, options):
    """calibrate(obs, **options); a DegenerateConfigurationError names the kept poses'
    frames (pose_frames, Paths) before its own figures."""
    try:
        return calibrate(obs, **options)
    except DegenerateConfigurationError as exc:
        raise DegenerateConfigurationError(
            f'{len(pose_frames)} poses kept ({", ".join(p.name for p in pose_frames)}): '
            f'{exc}') from exc


def _views_summary(det):
    """A conventional frame's progress line: rays, corners, views, line residual."""
    d = det.diagnostics
    return (f'{len(det.observations)} observations, {d["corners_found"]}/'
            f'{d["corners_total"]} corners in {d["views_used"]}/'
            f'{d["views_available"]} views, line residual '
            f'{d["line_residual_rms_px"]:.3f} px')


def calibrate_raw(dataset, *, views=None, grid=None, corner_options=None,
                  calibrate_options=None, min_poses=MIN_POSES, strict_views=True,
                  progress=None, accept_uncertain=False):
    """
    Decode every frame, detect the board, calibrate.

    views (n_i, n_j) sub-aperture views to decode (None: the decoder's default); corners are
    taken from the decoder's usable views (``Decoder.valid``: clean views only;
    ``strict_views`` False: every bright view, ``Decoder.bright``); grid: a LensletGrid to
    decode with (None: estimated from the white image); calibrate_options: keyword
    arguments of ``lf_mpc_calib.calibration.calibrate``;
    progress(index, total, frame_path, message) is called after each frame (message
    starts with 'skipped: ' for a skipped frame) and with frame_path None before
    calibrating. Raises DetectionError when fewer than ``min_poses`` frames show the board,
    or when the calibrated model does not explain the detections (RMS reprojection far above
    the corner noise the detector measured, :mod:`lf_mpc_calib.calibration.fit_check`).
    Raises DegenerateConfigurationError, with the figures and the poses to add, when the
    poses leave the intrinsics too uncertain for the accuracy aimed at
    (:mod:`lf_mpc_calib.calibration.determination`), unless ``accept_uncertain`` (then
    ``run.determination.refusals`` lists the shortfalls); ``run.determination.warnings``
    flags figures whose 3 sigma exceed the accuracy aimed at.
    """
    check_detectable(dataset.board)
    timings = {'grid': 0.0, 'decode': 0.0, 'detect': 0.0, 'calibrate': 0.0}
    t0 = time.perf_counter()
    white = read_float_image(dataset.white)
    try:
        grid, decoder = make_decoder(white, views=views, demosaic=dataset.demosaic, grid=grid)
    except LFCalibError as exc:
        raise DetectionError(f'white image {dataset.white}: {exc}') from exc
    use = decoder.valid if strict_views else decoder.bright
    timings['grid'] = time.perf_counter() - t0
    view_size = None

    def decoded_and_detected(raw, pose):
        nonlocal view_size
        t0 = time.perf_counter()
        lf = dataclasses.replace(decoder.decode(raw), valid=use.copy())
        t1 = time.perf_counter()
        timings['decode'] += t1 - t0
        det = detect_board_corners(lf, dataset.board, pose=pose, options=corner_options)
        timings['detect'] += time.perf_counter() - t1
        view_size = (int(lf.views.shape[3]), int(lf.views.shape[2]))
        return det

    total = len(dataset.frames)
    found = detect_frames(dataset.frames, white, decoded_and_detected, _views_summary,
                          min_poses, progress=progress, timings=timings, read_key='decode')
    pose_frames, detections, obs = found.pose_frames, found.detections, found.observations()
    if progress:
        progress(total, total, None, f'calibrating {len(pose_frames)} poses, {len(obs)} rays')
    t0 = time.perf_counter()
    result = calibrate_kept(obs, pose_frames, {**refusing_options(calibrate_options),
                                               'camera_type': 'conventional'})
    timings['calibrate'] = time.perf_counter() - t0
    noise = detections_corner_noise([d for _, d in detections])
    verdict = check_accepted(result, corner_noise_px=noise, board_points=dataset.board.points(),
                             accept_uncertain=accept_uncertain)
    return RawCalibration(result, obs, pose_frames, detections, found.skipped, grid, view_size,
                          dataset.board, dataset.truth_for(grid), timings, dataset.name,
                          use, noise, verdict.fit_ratio,
                          getattr(dataset, 'camera_metadata', None), dataset.white,
                          verdict.determination, frame_warnings=found.warned,
                          acceptance=verdict)


def detections_corner_noise(detections, camera_type='conventional'):
    """The corner noise (px) the detector measured itself over Detections (kept poses), that
    the acceptance rule (:mod:`lf_mpc_calib.calibration.acceptance`) holds the RMS
    reprojection against: conventional cameras the line residuals across views (RMS over
    poses weighted by observations), focused cameras the median micro-image fit residual."""
    if camera_type == 'focused':
        return float(np.median([d.diagnostics['fit_residual_rms_px'] for d in detections]))
    return corner_noise_px([d.diagnostics['line_residual_rms_px'] for d in detections],
                           [len(d.observations) for d in detections])


# ---- outputs --------------------------------------------------------------------------------
def write_outputs(run, output, *, report_dir=None, camera='camera', hand_eye=None,
                  hand_eye_result=None, jackknife=None):
    """
    Write the calibration file, the observation table beside it and (optionally) the report.

    hand_eye: the calibration file's ``hand_eye`` mapping (or None); hand_eye_result: the
    HandEyeResult it came from: the file holds its joint calibration (intrinsics refined with
    the mount, :func:`~lf_mpc_calib.calibration.hand_eye_joint.published_result`), the report
    the camera-only ``run.result`` beside it; jackknife: a PoseJackknife of ``run.result`` for
    the report. Returns a list of written paths.
    """
    from lf_mpc_calib.calibration.hand_eye_joint import published_result
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    result = published_result(run.result, hand_eye_result)
    lens_types = getattr(result, 'lens_types', None)
    cal = CalibrationFile.from_result(result, camera_type=run.camera_type,
                                      image_size=run.view_size, lenslet_grid=run.grid,
                                      camera=camera, camera_metadata=run.camera_metadata,
                                      hand_eye=hand_eye,
                                      lens_types=None if lens_types is None
                                      else {**lens_types.to_dict(),
                                            **(run.lens_type_rule or {})})
    # the report and the table first, the calibration file last: a run that fails midway
    # leaves the previous calibration file as it was (each file goes through a temporary name)
    written = []
    if report_dir is not None:
        from lf_mpc_calib.report.raw_calibration import write_raw_report
        written += write_raw_report(run, report_dir, jackknife=jackknife)
        if hand_eye_result is not None:
            from lf_mpc_calib.camera.optical_frame import OpticalFrame
            from lf_mpc_calib.report.hand_eye import write_hand_eye_report
            shown = hand_eye_result.in_optical_frame(   # the mount as the file has it
                OpticalFrame.of(hand_eye_result.model, run.camera_type))
            written += write_hand_eye_report(shown, report_dir,
                                             board_points=run.board.points(),
                                             calibration=run.result, title=run.name)
    obs_path = observations_path(output)
    write_observations(obs_path, run.observations)
    save_calibration(output, cal)
    written = [output, obs_path] + written
    return written
