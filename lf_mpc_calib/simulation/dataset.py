"""
Simulated raw datasets on disk: rendered frames, white image, manifest and ground truth.

Public API::

    random_poses(camera, board, n, *, rng, max_tilt_deg=30.0) -> (rvecs (n, 3), tvecs (n, 3))
    capture_poses(camera, board, n, *, rng) -> (rvecs (n, 3), tvecs (n, 3)): well-conditioned
    capture_depth_range(camera) -> (near, far) x the scene distance capture_poses spans
    board_in_view(camera, board, rvec, tvec, *, margin_px=None) -> bool
    load_poses(path, camera=None) -> (rvecs (P, 3), tvecs (P, 3))
    ground_truth_file(camera, rvecs, tvecs) -> CalibrationFile
    write_dataset(directory, camera, board, rvecs, tvecs, *, seed=0, samples=4, noise=None,
                  progress=None) -> Path of manifest.yaml
    append_frames(directory, rvecs, tvecs, *, progress=None) -> Path of manifest.yaml
    read_dataset(directory) -> Dataset

Layout of a dataset folder::

    manifest.yaml      format, preset, camera_type, camera (all optics), board {cols, rows,
                       square_m, ...}, image_size [W, H], bayer, bit_depth, noise, seed,
                       white, dark (with a sensor response), frames [file names], ground_truth
    white.png          the white image, same bit depth, mosaic and sensor response as the frames
    dark.png           a dark frame (black level, hot pixels, read noise) of a camera with a
                       sensor response (the presets'); none for an ideal sensor
    frame_000.png ...  raw frames (PNG, 8 or 16 bit, one channel; Bayer mosaic if any)
    ground_truth.yaml  calibration-file format (lf_mpc_calib.io.calibration_file): the exact MPC
                       model of the optics, the board poses in the optical frame (as every
                       calibration file: a focused camera's from the main lens, format_version
                       3), the view range, the view / raw size and the ground-truth lenslet grid

Poses in memory (the functions' rvecs, tvecs) map board to the optics' MPC camera frame (see
:mod:`lf_mpc_calib.simulation.optics`; a focused camera's z counts from the plane conjugate to
its micro-lenses). A poses file (:func:`load_poses`, ``simulate --poses-file``) holds them in
the optical frame, as a calibration file does (a focused camera's z from the main lens, > 0).
"""

from dataclasses import dataclass
import math
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation
import yaml

from lf_mpc_calib.io.atomic import open_atomically
from lf_mpc_calib.io.calibration_file import (
    CalibrationFile, default_frames, load_calibration, save_calibration)
from lf_mpc_calib.errors import InvalidInputError, shorten
from lf_mpc_calib.io.images import check_image_file
from lf_mpc_calib.io.raw_dataset import check_bit_depth, MANIFEST_FORMAT, MANIFEST_VERSION
from lf_mpc_calib.io.yaml_file import read_yaml
from lf_mpc_calib.simulation.optics import Camera, Checkerboard
from lf_mpc_calib.simulation.render import (
    WHITE_SAMPLES, dark_frame, quantize, render_raw, render_white)

FORMAT = MANIFEST_FORMAT
FORMAT_VERSION = MANIFEST_VERSION
MANIFEST = 'manifest.yaml'
GROUND_TRUTH = 'ground_truth.yaml'
WHITE = 'white.png'
DARK = 'dark.png'


@dataclass(frozen=True, eq=False)
class Dataset:
    """
    A dataset folder read back.

    root Path; manifest dict; camera Camera; board Checkerboard; white (H, W) uint8|uint16;
    frames list of (H, W) uint8|uint16 in manifest order; ground_truth CalibrationFile.
    """

    root: Path
    manifest: dict
    camera: Camera
    board: Checkerboard
    white: np.ndarray
    frames: list
    ground_truth: CalibrationFile


def board_in_view(camera, board, rvec, tvec, *, margin_px=None):
    """
    Whether the whole board (with its margin) is seen, ``margin_px`` inside the raw image.

    The outline is projected by the chief rays of the main lens (Camera.project_chief);
    margin_px defaults to one micro-image pitch. Points behind the camera, or not 5 % beyond
    its focal length (the main lens images them nowhere near the sensor), are out of view.
    """
    rmat, t = camera.pose_to_physical(rvec, tvec)
    pts = board.outline() @ rmat.T + t
    if np.any(pts[:, 2] <= camera.main_lens.focal_length * 1.05):
        return False
    q = camera.project_chief(pts)
    m = camera.micro_image_pitch if margin_px is None else float(margin_px)
    W, H = camera.sensor.size
    return bool(np.all((q[:, 0] >= m) & (q[:, 0] <= W - 1 - m)
                       & (q[:, 1] >= m) & (q[:, 1] <= H - 1 - m)))


def random_poses(camera, board, n, *, rng, max_tilt_deg=30.0, distance_range=(0.85, 1.15),
                 max_roll_deg=15.0, max_tries=2000):
    """
    Random board poses (MPC frame) that keep the board in view.

    Tilts about the board's x and y axes uniform in +-max_tilt_deg, roll about its normal in
    +-max_roll_deg, board centre at a distance uniform in distance_range x scene_distance and
    shifted sideways at random within the field of view; rejected until board_in_view (and,
    for a focused camera, while within 25 % of the plane conjugate to its micro-lenses).
    Returns rvecs (n, 3), tvecs (n, 3).
    """
    if int(n) != n or n < 1:
        raise InvalidInputError(f'number of poses must be a positive integer, got {n!r}')
    centre = np.array([(board.cols - 1) * board.square / 2,
                       (board.rows - 1) * board.square / 2, 0.0])
    rvecs, tvecs = [], []
    tries = 0
    while len(rvecs) < n:
        tries += 1
        if tries > max_tries * n:
            raise InvalidInputError(
                f'could not place a {board.cols}x{board.rows} board of {board.square} m squares '
                f'in view of {camera.name} after {tries - 1} tries; use a smaller board')
        ax, ay = np.radians(rng.uniform(-max_tilt_deg, max_tilt_deg, 2))
        roll = math.radians(rng.uniform(-max_roll_deg, max_roll_deg))
        rmat = Rotation.from_euler('zyx', [roll, ay, ax]).as_matrix()
        z = camera.scene_distance * rng.uniform(*distance_range)
        if _near_conjugate_plane(camera, z):
            continue
        w, h = camera.field_of_view(z)
        xy = rng.uniform(-0.25, 0.25, 2) * np.array([w, h])
        t = np.array([xy[0], xy[1], z]) - rmat @ centre
        rvec, tvec = camera.pose_from_physical(rmat, t)
        if board_in_view(camera, board, rvec, tvec):
            rvecs.append(rvec)
            tvecs.append(tvec)
    return np.array(rvecs), np.array(tvecs)


def _near_conjugate_plane(camera, z, band=0.25):
    """True for a focused camera's board at ``z`` within ``band`` of the plane conjugate to
    its micro-lenses: there a corner falls in one or two micro-images (no detection)."""
    if camera.camera_type != 'focused' or camera.main_lens.inverse_focus <= 0:
        return False
    z_f = 1.0 / camera.main_lens.inverse_focus
    return abs(z - z_f) < band * z_f


CAPTURE_DEPTHS = (0.6, 1.5)
"""Board depths of :func:`capture_poses` for a conventional camera, as fractions of the
camera's focus distance."""
CAPTURE_TILT_DEG = 30.0
"""Tilt of the board in :func:`capture_poses`."""
_TILT_PATTERN = ((1, 0), (0, 1), (-1, 0), (0, -1), (0.7, 0.7), (-0.7, -0.7), (0.7, -0.7),
                 (-0.7, 0.7))
"""Tilt directions (about the board's x, y axes) cycled through by :func:`capture_poses`."""


def capture_depth_range(camera):
    """
    (near, far) board depths of :func:`capture_poses` as fractions of ``camera.scene_distance``.

    Conventional: CAPTURE_DEPTHS. Focused: the side of the plane conjugate to the micro-lenses
    (z_f) where they focus, within 0.6-1.5 x the scene distance. Keplerian (z_f nearer): from
    1.25 z_f on. Galilean (z_f farther): up to 0.65 z_f, where a corner is still seen in 3 or
    more micro-images (simulated Galilean preset, inverse virtual depth -0.34 at 0.65 z_f,
    -0.45 at 0.72 z_f with a corner in about 2 micro-images; near 0.5 x the scene distance the
    board blurs out of the micro-lenses' focus: 1 corner found).
    """
    if camera.camera_type != 'focused':
        # CAPTURE_DEPTHS of the distance beyond the main lens's focal length (the magnification
        # spread they give): the same for a lens focused far beyond it (lytro, illum: F under
        # 3 % of the focus distance); lab-square's 200 mm lens focused at 0.33 m would put
        # the nearest board at 0.198 m, inside the focal length, where it images nowhere
        f = camera.main_lens.focal_length / camera.scene_distance
        if f < 0.05:
            return CAPTURE_DEPTHS
        return tuple(f + d * (1.0 - f) for d in CAPTURE_DEPTHS)
    zf = 1.0 / camera.main_lens.inverse_focus / camera.scene_distance
    return (max(0.6, 1.25 * zf), 1.5) if zf < 1.0 else (0.65, min(1.5, 0.65 * zf))


FOCUSED_BOARD_FILL = 0.9
"""Share of the view (its tighter side) a focused camera's capture board fills at the nearest
capture depth: its principal point rests on the board's extent and corner count."""
FOCUSED_OUTLINE_FILL = 0.97
"""Largest share of the view the board's outline (with its margins) takes at the nearest
depth: beyond it no tilt keeps the whole board in view."""
FOCUSED_BOARD_MAX = (16, 11)
"""Most inner corners of a focused camera's capture board (20 x 14 at 0.95 of the view, the
benchmark's board for a Galilean's principal point, does not fit in view with its margin once
tilted)."""
FOCUSED_CAPTURE_POSES = 10
"""Poses of a focused camera's default capture (``simulate``): the corners of one pose share a
depth- and tilt-dependent detection bias, so the principal point averages over poses (Galilean
seed 0 at 64 rays: 6 poses left it 0.60 px off, sigma 0.40 px, its leave-one-pose-out spread
1.1 px)."""
FOCUSED_SAMPLES = 64
"""Rays per pixel of a focused camera's default frames: the detector reads defocused
micro-images up to their rims, where the main lens's aperture cuts the bundle; too few rays
there move the corners (Galilean seed 0, 6 poses: 16 rays gave k_u 3.3 % and the principal point
8.5 px off with corner noise 0.16 px; 64 rays 0.27 %, 0.60 px, 0.095 px; 4 x the render time).
With the same lens points in every pixel the 64-ray cut fell 6-19 % short of the continuous
aperture's that the detector's correction models, which left a Galilean's principal point
0.2-1.05 px off at the default capture (seeds 0-2); the renderer now turns each pixel's lens
points (simulation.render.pixel_turns): seed 1 0.37 px (benchmarks/bench_focused_defaults.py,
bench_aperture_cut.py)."""
FOCUSED_SQUARE_PX = 55.0
"""Fewest raw pixels a square spans at the farthest capture depth (the detector renders the
board from the micro-images at about a third of the raw resolution)."""


def capture_board(camera, *, square_px=None):
    """
    The board a careful user captures ``camera`` with. Conventional: :func:`default_board`.
    Focused: as many corners as keep squares of ``square_px`` (None: FOCUSED_SQUARE_PX) raw
    pixels at the farthest capture depth (at most FOCUSED_BOARD_MAX), its squares filling
    FOCUSED_BOARD_FILL of the view at the nearest (:func:`capture_depth_range`) and its
    outline at most FOCUSED_OUTLINE_FILL, as the guidance for focused cameras asks; never
    cols + rows even (a board that looks the same turned by 180 degrees, whose corners a
    detector may number turned round: a row less); at least 4 x 3 inner corners (3 x 3 and
    fewer rows are what small sensors gave: OpenCV's detectors refuse fewer than 3 a side).
    """
    from lf_mpc_calib.simulation.optics import default_board
    if camera.camera_type != 'focused':
        return default_board(camera)
    near, far = capture_depth_range(camera)
    w_px, h_px = camera.sensor.size
    square_px = FOCUSED_SQUARE_PX if square_px is None else float(square_px)
    squares = FOCUSED_BOARD_FILL * w_px * (near / far) / square_px
    cols = int(np.clip(np.floor(squares) - 1, 3, FOCUSED_BOARD_MAX[0]))
    rows = int(np.clip(np.floor((cols + 1) * h_px / w_px) - 1, 3, FOCUSED_BOARD_MAX[1]))
    if (cols + rows) % 2 == 0:   # looks the same turned by 180 degrees: corner ids ambiguous
        # a row or a column less, never below 3 (OpenCV's detectors want 3 x 3 or more):
        # 3 x 3 becomes 4 x 3, its squares a little smaller
        rows, cols = ((rows - 1, cols) if rows > 3 else (rows, cols - 1) if cols > 3
                      else (rows, cols + 1))
    w, h = camera.field_of_view(near * camera.scene_distance)
    square = FOCUSED_BOARD_FILL * min(w / (cols + 1), h / (rows + 1))
    # the board's outline (a one-square margin each side) must stay in view once tilted,
    # a micro-image pitch inside the image (board_in_view)
    inner = 1.0 - 2.0 * camera.micro_image_pitch / np.array([w_px, h_px])
    square = min(square, FOCUSED_OUTLINE_FILL * min(w * inner[0] / (cols + 3),
                                                    h * inner[1] / (rows + 3)))
    return Checkerboard(cols, rows, float(square))


def capture_poses(camera, board, n, *, rng, depth_range=None,
                  tilt_deg=CAPTURE_TILT_DEG, max_tries=400):
    """
    Board poses (MPC frame) as a careful user captures them: well-conditioned by design.

    The board centres lie at depths spread over depth_range x the focus distance
    (``camera.scene_distance``; None: :func:`capture_depth_range`), alternating near and far,
    so both sides of the focus distance are seen (k_i, k_j rest on parallax, which vanishes at
    the focus distance); the tilts of tilt_deg cycle about the board's x and y axes, both
    signs, then diagonally, so both axes are covered. rng jitters depth (+-5 %), tilt (+-5
    deg), roll (+-10 deg) and the sideways position; a pose that does not keep the board in
    view is drawn again, its tilt and offsets reduced after every 25 tries. Returns rvecs
    (n, 3), tvecs (n, 3).
    """
    if int(n) != n or n < 1:
        raise InvalidInputError(f'number of poses must be a positive integer, got {n!r}')
    n = int(n)
    depth_range = capture_depth_range(camera) if depth_range is None else depth_range
    fractions = np.geomspace(depth_range[0], depth_range[1], n) if n > 1 else np.ones(1)
    order = np.array([k // 2 if k % 2 == 0 else n - 1 - k // 2 for k in range(n)])
    centre = np.array([(board.cols - 1) * board.square / 2,
                       (board.rows - 1) * board.square / 2, 0.0])
    rvecs, tvecs = [], []
    for k in range(n):
        dx, dy = _TILT_PATTERN[k % len(_TILT_PATTERN)]
        for attempt in range(max_tries):
            shrink = 0.8 ** (attempt // 25)
            tilt = tilt_deg * shrink
            ax = math.radians(dx * tilt + shrink * rng.uniform(-5.0, 5.0))
            ay = math.radians(dy * tilt + shrink * rng.uniform(-5.0, 5.0))
            roll = math.radians(shrink * rng.uniform(-10.0, 10.0))
            rmat = Rotation.from_euler('zyx', [roll, ay, ax]).as_matrix()
            z = camera.scene_distance * fractions[order[k]] * rng.uniform(0.95, 1.05)
            w, h = camera.field_of_view(z)
            xy = shrink * rng.uniform(-0.15, 0.15, 2) * np.array([w, h])
            t = np.array([xy[0], xy[1], z]) - rmat @ centre
            rvec, tvec = camera.pose_from_physical(rmat, t)
            if board_in_view(camera, board, rvec, tvec):
                rvecs.append(rvec)
                tvecs.append(tvec)
                break
        else:
            raise InvalidInputError(
                f'could not place a {board.cols}x{board.rows} board of {board.square} m squares '
                f'in view of {camera.name} at {fractions[order[k]]:.2f} x the focus distance; '
                'use a smaller board')
    return np.array(rvecs), np.array(tvecs)


MAX_BOARD_DISTANCE_M = 1000.0
"""A board pose's distance along the optical axis, at most."""


def load_poses(path, camera=None):
    """
    Read poses from YAML: a list of {rotation_vector, translation_m}, or a calibration file
    (its ``poses``), board -> the optical frame (a focused camera's z from the main lens; a
    calibration file's as it loads: a focused file of format_version 1-2 holds the MPC frame's
    and is mapped). Returns rvecs (P, 3), tvecs (P, 3): in the optics' MPC frame of
    ``camera`` (a focused simulation Camera: t + C of its truth,
    :class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame`), as given for a conventional
    camera or None.
    """
    d = read_yaml(path, 'poses file')
    if isinstance(d, dict) and 'format_version' in d and 'intrinsics' in d:
        from lf_mpc_calib.io.calibration_file import load_calibration
        rv, tv = load_calibration(path).optical_poses()
        d = [{'rotation_vector': r.tolist(), 'translation_m': t.tolist()}
             for r, t in zip(rv, tv)]
    rv, tv = _checked_poses(d, path)
    if camera is not None and camera.camera_type == 'focused':
        from lf_mpc_calib.camera.optical_frame import OpticalFrame
        return OpticalFrame.of(camera.ground_truth_model(), 'focused').poses(rv, tv,
                                                                             to_model=True)
    return rv, tv


def _checked_poses(d, path):
    """rvecs, tvecs (P, 3) of a poses file's YAML ``d`` (a list, or a mapping with it under
    ``poses``), each checked (finite, in front of the camera, a rotation of <= 360 deg)."""
    poses = d.get('poses') if isinstance(d, dict) else d
    if not isinstance(poses, list) or not poses:
        raise InvalidInputError(
            f'{path}: expected a list of {{rotation_vector, translation_m}} (or one under '
            f"'poses'), got {type(poses).__name__}")
    rv, tv = [], []
    for n, p in enumerate(poses):
        if not isinstance(p, dict) or 'rotation_vector' not in p or 'translation_m' not in p:
            raise InvalidInputError(
                f'{path}: poses[{n}] must have rotation_vector and translation_m, got {p!r}')
        try:
            r = np.asarray(p['rotation_vector'], dtype=float)
            t = np.asarray(p['translation_m'], dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(f'{path}: poses[{n}] must hold numbers, got '
                                    f'{shorten(repr(p))}') from None
        if r.shape != (3,) or t.shape != (3,):
            raise InvalidInputError(
                f'{path}: poses[{n}] needs 3 numbers each, got {r.shape} and {t.shape}')
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(t))):
            raise InvalidInputError(f'{path}: poses[{n}] must be finite numbers, got '
                                    f'{shorten(repr(p))}')
        if not 0 < t[2] <= MAX_BOARD_DISTANCE_M or np.linalg.norm(r) > 2 * np.pi:
            raise InvalidInputError(
                f'{path}: poses[{n}] puts the board at z = {t[2]:g} m with a rotation of '
                f'{np.degrees(np.linalg.norm(r)):.4g} degrees; expected the board in front of '
                f'the camera (0 < z <= {MAX_BOARD_DISTANCE_M:g} m) and a rotation vector of at '
                f'most 360 degrees')
        rv.append(r)
        tv.append(t)
    return np.array(rv), np.array(tv)


def ground_truth_file(camera, rvecs, tvecs):
    """
    The ground truth of a dataset as a CalibrationFile (errors and stddev zero).

    views: the usable view range +-floor(r - 1/2) (r the micro-image radius in px) for a
    conventional camera, the range of micro-image centres (raw px) for a focused one;
    image_size: the view size (lenslet grid shape) or the raw size.
    """
    grid = camera.lenslet_grid()
    model = camera.ground_truth_model(grid)
    if camera.camera_type == 'conventional':
        half = float(math.floor(camera.micro_image_radius - 0.5))
        views = {'i': [-half, half], 'j': [-half, half]}
        size = grid.shape
    else:
        c = grid.centres()
        views = {'i': [float(c[:, 0].min()), float(c[:, 0].max())],
                 'j': [float(c[:, 1].min()), float(c[:, 1].max())]}
        size = camera.sensor.size
    return CalibrationFile(
        camera_type=camera.camera_type, model=model, stddev={},
        errors={'rms_reprojection_px': 0.0, 'rms_ray_reprojection_mm': 0.0},
        rotation_vectors=np.asarray(rvecs, float).reshape(-1, 3),
        translations=np.asarray(tvecs, float).reshape(-1, 3),
        views=views, image_size=size, lenslet_grid=grid, frames=default_frames('camera'))


def write_dataset(directory, camera, board, rvecs, tvecs, *, seed=0, samples=4, noise=None,
                  progress=None):
    """
    Render and write a dataset folder (module docstring); returns the manifest path.

    rvecs, tvecs (P, 3): board poses in the MPC frame; seed: of the sensor noise; noise:
    sigma (None: the sensor's); progress(done_frames, total_frames) after the white image
    (done 0) and after each frame.
    """
    if not isinstance(camera, Camera) or not isinstance(board, Checkerboard):
        raise InvalidInputError(
            f'camera and board must be simulation.optics Camera and Checkerboard, got '
            f'{type(camera).__name__} and {type(board).__name__}')
    rvecs, tvecs = _poses(rvecs, tvecs)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    bits = camera.sensor.bit_depth
    truth = ground_truth_file(camera, rvecs, tvecs)
    dark_entry = write_white_and_dark(root, camera, samples, seed)
    if progress is not None:
        progress(0, len(rvecs))
    names = _render_frames(root, camera, board, rvecs, tvecs, 0, np.random.default_rng(seed),
                           samples, noise, progress)
    save_calibration(root / GROUND_TRUTH, truth)
    manifest = {
        'format': FORMAT, 'format_version': FORMAT_VERSION,
        'preset': camera.name, 'scale': float(camera.scale),
        'camera_type': camera.camera_type,
        'image_size': [camera.sensor.width, camera.sensor.height],
        'bayer': camera.sensor.bayer, 'bit_depth': bits,
        'noise': float(camera.sensor.noise if noise is None else noise),
        'seed': int(seed), 'samples': int(samples),
        'board': board.to_dict(), 'white': WHITE, 'frames': names,
        **dark_entry,
        'ground_truth': GROUND_TRUTH, 'camera': camera.to_dict(),
    }
    if camera.camera_type == 'focused' and camera.mla.n_types > 1:
        # the count a user knows of a multi-focus camera (calibrate-raw tells the types apart
        # from the frames), as a calibration session records it
        manifest['lens_types'] = int(camera.mla.n_types)
    return _write_manifest(root, manifest)


def write_white_and_dark(root, camera, samples, seed):
    """
    Write white.png (at least WHITE_SAMPLES rays) and, for a sensor with a response, dark.png
    (black level, hot pixels, read noise: as a real camera's users record it); returns the
    manifest entries ({'dark': 'dark.png'} or {}).
    """
    bits = camera.sensor.bit_depth
    white = render_white(camera, samples=max(samples, WHITE_SAMPLES))
    _imwrite(root / WHITE, quantize(white, bits))
    dark = dark_frame(camera, white.shape, seed)
    if dark is None:
        return {}
    _imwrite(root / DARK, quantize(dark, bits))
    return {'dark': DARK}


def _poses(rvecs, tvecs):
    """rvecs, tvecs as float (P, 3) arrays; InvalidInputError unless both are, P >= 1."""
    rvecs = np.asarray(rvecs, dtype=float).reshape(-1, 3)
    tvecs = np.asarray(tvecs, dtype=float).reshape(-1, 3)
    if rvecs.shape != tvecs.shape or len(rvecs) == 0:
        raise InvalidInputError(
            f'rvecs and tvecs must both be (P, 3) with P >= 1, got {rvecs.shape}, {tvecs.shape}')
    return rvecs, tvecs


def _render_frames(root, camera, board, rvecs, tvecs, first, rng, samples, noise, progress):
    """Render and write frame_<first + n>.png for each pose n (sensor noise from ``rng``);
    progress(n + 1, P) after each. Returns the file names."""
    names = []
    for n, (rv, tv) in enumerate(zip(rvecs, tvecs)):
        raw = render_raw(camera, board, rv, tv, samples=samples, rng=rng, noise=noise)
        name = f'frame_{first + n:03d}.png'
        _imwrite(root / name, quantize(raw, camera.sensor.bit_depth))
        names.append(name)
        if progress is not None:
            progress(n + 1, len(rvecs))
    return names


def _read_manifest(root):
    """The manifest dict of a dataset folder; InvalidInputError when it is not one or lacks a
    key every reader needs."""
    path = root / MANIFEST
    manifest = read_yaml(path, 'dataset manifest')
    if not isinstance(manifest, dict) or manifest.get('format') != FORMAT:
        raise InvalidInputError(f'{path} is not a {FORMAT} manifest')
    for key in ('camera', 'board', 'white', 'frames', 'ground_truth'):
        if key not in manifest:
            raise InvalidInputError(f'{path} lacks key {key!r}')
    if not isinstance(manifest['frames'], list):
        raise InvalidInputError(f'{path}: frames must be a list of file names, got '
                                f'{shorten(repr(manifest["frames"]))}')
    return manifest


def _write_manifest(root, manifest):
    path = root / MANIFEST
    with open_atomically(path, 'w') as f:
        yaml.safe_dump(manifest, f, sort_keys=False, default_flow_style=None)
    return path


def append_frames(directory, rvecs, tvecs, *, progress=None):
    """
    Render more board poses into a dataset folder written by :func:`write_dataset`: the
    frames appended after its last one, ground_truth.yaml and the manifest rewritten with
    every pose (the manifest last); returns the manifest path. The added frames' sensor
    noise is drawn from (the manifest's seed, the index of the first added frame), so an
    append does not repeat the noise of the frames before. rvecs, tvecs (P, 3): board poses
    in the MPC frame; progress(done, total) after each added frame.
    """
    root = Path(directory)
    manifest = _read_manifest(root)
    rvecs, tvecs = _poses(rvecs, tvecs)
    camera = Camera.from_dict(manifest['camera'])
    before = load_calibration(root / manifest['ground_truth'])
    first = len(manifest['frames'])
    names = list(manifest['frames']) + _render_frames(
        root, camera, Checkerboard.from_dict(manifest['board']), rvecs, tvecs, first,
        np.random.default_rng([int(manifest['seed']), first]), int(manifest['samples']),
        float(manifest['noise']), progress)
    save_calibration(root / manifest['ground_truth'], ground_truth_file(
        camera, np.concatenate([before.rotation_vectors, rvecs]),
        np.concatenate([before.translations, tvecs])))
    return _write_manifest(root, {**manifest, 'frames': names})


def read_dataset(directory):
    """Read a dataset folder written by :func:`write_dataset` into a :class:`Dataset`."""
    root = Path(directory)
    manifest = _read_manifest(root)
    camera = Camera.from_dict(manifest['camera'])
    board = Checkerboard.from_dict(manifest['board'])
    if 'bit_depth' in manifest:
        check_bit_depth(root / MANIFEST, manifest['bit_depth'],
                        [root / name for name in [manifest['white']] + manifest['frames']])
    white = _imread(root / manifest['white'])
    frames = [_imread(root / name) for name in manifest['frames']]
    truth = load_calibration(root / manifest['ground_truth'])
    return Dataset(root, manifest, camera, board, white, frames, truth)


def _imwrite(path, image):
    from lf_mpc_calib.io.images import write_encoded
    write_encoded(path, image)


def _imread(path):
    check_image_file(path)          # a regular file whose header claims a sane size
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise InvalidInputError(f'cannot read image {path}')
    return image
