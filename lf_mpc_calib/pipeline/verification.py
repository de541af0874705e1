"""
Verify a calibration file on held-out captures: observations in, Verification out.

    obs, frames, skipped = raw_observations(dataset, cal)      # a raw data set, decoded with
                                                               # the calibration's grid
    check_compatible(obs, cal, calibration_obs)                # other camera / board: refused
    v = verify_calibration(cal, obs, calibration_obs=..., robot=..., frames=...)

The computation is :mod:`lf_mpc_calib.calibration.verification`; this layer reads what the
calibration file holds (model, RMS, sigmas, poses, hand-eye mount) and matches robot poses to
captures. Nothing here writes.
"""

from pathlib import Path

import numpy as np

from lf_mpc_calib.calibration.verification import ROBOT_ACCURACY_MM, square_of, \
    verify_observations
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import DetectionError, InvalidInputError, LFCalibError

SQUARE_TOLERANCE = 0.01
"""Relative square-size difference between the data set's board and the calibration's that
is refused as another board."""


def raw_observations(dataset, cal, progress=None):
    """
    (Observations, frame Paths per pose id, skipped [(Path, reason)]) of a raw data set
    (:func:`lf_mpc_calib.pipeline.offline.load_raw_dataset`) detected with the lenslet grid of
    ``cal`` (a CalibrationFile): a conventional camera's frames decoded into its views, a
    focused camera's corners found in its micro-images (with its lens types). A white of
    another size than the grid's is refused (InvalidInputError naming both).
    progress(k, total, path, message).
    """
    from lf_mpc_calib.io.images import read_float_image
    if cal.lenslet_grid is None:
        raise InvalidInputError('the calibration file has no lenslet_grid to decode the raw '
                                'frames with; give an observation table instead')
    white = read_float_image(dataset.white)
    try:
        detect = (_focused_detect if cal.camera_type == 'focused' else
                  _conventional_detect)(dataset, cal, white)
    except LFCalibError as exc:
        raise InvalidInputError(f'white image {dataset.white} against the calibration\'s '
                                f'lenslet grid: {exc}') from exc
    parts, frames, skipped = [], [], []
    for k, path in enumerate(dataset.frames):
        try:
            found = detect(read_float_image(path), len(frames))
        except LFCalibError as exc:
            skipped.append((Path(path), str(exc)))
            if progress:
                progress(k, len(dataset.frames), Path(path), f'skipped: {exc}')
            continue
        parts.append(found)
        frames.append(Path(path))
        if progress:
            progress(k, len(dataset.frames), Path(path), f'{len(found)} observations')
    if not parts:
        raise DetectionError(f'the board was found in none of the {len(dataset.frames)} frames'
                             f' ({"; ".join(f"{p.name}: {r}" for p, r in skipped[:3])})')
    return Observations.concatenate(parts), frames, skipped


def _conventional_detect(dataset, cal, white):
    """detect(raw, pose) -> Observations: decoded with the calibration's grid and views."""
    from lf_mpc_calib.features.board_detection import detect_board_corners
    from lf_mpc_calib.lenslet.white_image import make_decoder
    views = None if cal.views is None else tuple(
        int(round(cal.views[k][1] - cal.views[k][0])) + 1 for k in ('i', 'j'))
    _, decoder = make_decoder(white, views=views, demosaic=dataset.demosaic,
                              grid=cal.lenslet_grid)

    def detect(raw, pose):
        lf = decoder.decode(raw)
        _check_view_size(lf, cal)
        return detect_board_corners(lf, dataset.board, pose=pose).observations
    return detect


def _focused_detect(dataset, cal, white):
    """detect(raw, pose) -> Observations: corners in the micro-images of the calibration's
    grid (not moved), labelled with its lens types."""
    from lf_mpc_calib.measurement.focused import micro_image_types
    from lf_mpc_calib.pipeline.focused_raw import focused_detector
    types = micro_image_types(cal.lenslet_grid, cal.lens_types) if cal.lens_types else None
    det = focused_detector(dataset, cal.lenslet_grid, white, types, recentre=False)

    def detect(raw, pose):
        if raw.shape != white.shape:
            raise InvalidInputError(f'the frame is {raw.shape[1]} x {raw.shape[0]} px, the '
                                    f'white {white.shape[1]} x {white.shape[0]}')
        return det.detect(raw, dataset.board, pose=pose).observations
    return detect


def _check_view_size(lf, cal):
    size = (int(lf.views.shape[3]), int(lf.views.shape[2]))
    if cal.image_size is not None and tuple(cal.image_size) != size:
        raise InvalidInputError(f'views of {size[0]} x {size[1]} px, the calibration\'s are '
                                f'{cal.image_size[0]} x {cal.image_size[1]}')


def check_compatible(obs, cal, calibration_obs=None):
    """
    Refuse (InvalidInputError with the figures) observations of another camera or board:
    view indices outside the calibration's views, pixels outside its image size (for a
    conventional camera's views), a square size off the calibration table's by more than
    SQUARE_TOLERANCE.
    """
    ij, uv = obs.ijuv[:, :2], obs.ijuv[:, 2:]
    if cal.camera_type == 'conventional' and cal.views is not None:
        for k, name in enumerate('ij'):
            lo, hi = cal.views[name]
            if ij[:, k].min() < lo - 0.5 or ij[:, k].max() > hi + 0.5:
                raise InvalidInputError(
                    f'view index {name} spans [{ij[:, k].min():g}, {ij[:, k].max():g}], the '
                    f'calibration\'s views [{lo:g}, {hi:g}]: another camera or decoding')
    if cal.camera_type == 'conventional' and cal.image_size is not None:
        w, h = cal.image_size
        if uv[:, 0].max() > w + 0.5 or uv[:, 1].max() > h + 0.5 or uv.min() < -0.5:
            raise InvalidInputError(
                f'pixels reach ({uv[:, 0].max():.1f}, {uv[:, 1].max():.1f}), outside the '
                f'calibration\'s {w} x {h} px views: another camera')
    if calibration_obs is not None and len(calibration_obs):
        ours = square_of(np.unique(obs.board, axis=0))
        theirs = square_of(np.unique(calibration_obs.board, axis=0))
        if abs(ours / theirs - 1) > SQUARE_TOLERANCE:
            raise InvalidInputError(
                f'the board\'s square is {ours * 1e3:.4g} mm, the calibration\'s '
                f'{theirs * 1e3:.4g} mm (tolerance {100 * SQUARE_TOLERANCE:g} %): another '
                'board')


def lens_corrected(obs, cal):
    """``obs`` with the calibration's lens-type terms applied to (u, v) (multi-focus focused
    cameras), so that the model alone gives its rays; ``obs`` itself otherwise."""
    if not cal.lens_types or obs.lens_type is None:
        return obs
    from lf_mpc_calib.calibration.type_terms import LensTypeTerms
    terms = LensTypeTerms.from_dict(cal.lens_types)
    return Observations(obs.pose, obs.point, obs.board,
                        terms.corrected_ijuv(obs.ijuv, obs.lens_type))


def arm_of(cal, robot, frames, pose_ids, indices=None):
    """
    (setup, mount (rv, tv), {pose id: (rv, tv) base -> tool}) for
    :func:`~lf_mpc_calib.calibration.verification.verify_observations`, or None without a
    hand-eye mount in ``cal`` or robot poses. frames: a name per pose id of ``pose_ids``;
    indices: each frame's index in its data set, matched too (RobotPoses.match), or None.
    """
    if cal.hand_eye is None or robot is None:
        return None
    idx, rv, tv = robot.match([str(f) for f in frames], indices)
    poses = {int(pose_ids[k]): (rv[n], tv[n]) for n, k in enumerate(idx)}
    mount = (np.asarray(cal.hand_eye['rotation_vector'], float),
             np.asarray(cal.hand_eye['translation_m'], float))
    return str(cal.hand_eye['setup']), mount, poses


def verify_calibration(cal, obs, *, calibration_obs=None, arm=None,
                       robot_accuracy_mm=ROBOT_ACCURACY_MM, seed=0):
    """The Verification of observations ``obs`` (pose ids 0..P-1 as captured) with the
    calibration file ``cal``; calibration_obs: the table it was calibrated on, or None."""
    check_compatible(obs, cal, calibration_obs)
    return verify_observations(
        lens_corrected(obs, cal), cal.model, noise_px=cal.errors['rms_reprojection_px'],
        stddev=cal.stddev,
        calibration_obs=None if calibration_obs is None else lens_corrected(calibration_obs,
                                                                            cal),
        calibration_poses=(cal.rotation_vectors, cal.translations), arm=arm,
        robot_accuracy_mm=robot_accuracy_mm, seed=seed, camera_type=cal.camera_type)
