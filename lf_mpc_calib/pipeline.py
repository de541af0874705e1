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

from lf_mpc_calib.board import Checkerboard
from lf_mpc_calib.errors import (DegenerateConfigurationError, DetectionError,
                                 InvalidInputError, LFCalibError)
from lf_mpc_calib.features.corners import detect_corners
from lf_mpc_calib.observations import Observations, write_observations

IMAGE_SUFFIXES = ('.png', '.tif', '.tiff', '.pgm', '.bmp')
MIN_POSES = 3


@dataclass(frozen=True, eq=False)
class RawDataset:
    """
    What calibrate-raw needs: frame files, the white image file and the board.

    frames: list of Path, or of in-memory frames (objects with ``load() -> ndarray``, a
    ``name`` and ``__fspath__`` giving a label such as ``'bag.db3#3 (t=200 ms)'``, e.g.
    :class:`lf_mpc_calib.rosbag_input.BagFrame`), read by :func:`read_image`; white: the same
    kinds; board: Checkerboard; demosaic: Bayer pattern name or None; camera: the simulated
    camera of a data set written by ``simulate`` (its ground truth is computed for the lenslet
    grid actually used), else None; name: for titles; grid: a LensletGrid to decode with
    (checked against the white image's size), or None to estimate it from the white image.
    """

    frames: list
    white: Path
    board: Checkerboard
    demosaic: str = None
    camera: object = None
    name: str = ''
    grid: object = None

    def truth_for(self, grid):
        """Ground-truth MPCModel in the indexing of ``grid`` (simulated data), or None."""
        if self.camera is None:
            return None
        try:
            return self.camera.ground_truth_model(grid)
        except LFCalibError:
            return None


@dataclass(frozen=True, eq=False)
class RawCalibration:
    """
    The outcome of :func:`calibrate_raw`.

    result: CalibrationResult; observations: the table of all kept poses; pose_frames: frame
    Path per pose index; detections: list of (Path, Detection) of kept poses; skipped: list
    of (Path, reason); grid: the LensletGrid; view_size (width, height); board; truth (or
    None); timings: seconds per stage {'grid', 'decode', 'detect', 'calibrate'};
    usable_views: (n_j, n_i) bool views the corners were taken from (``Decoder.valid``).
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


# ---- reading --------------------------------------------------------------------------------
def read_image(path):
    """
    Read an 8/16-bit PNG/TIFF (mono or Bayer raw) as a 2-D float array in [0, 1].

    ``path`` may also be an in-memory frame (an object with ``load()`` returning the pixels,
    e.g. a rosbag2 message): its pixels go through the same conversion as a file's.
    """
    if hasattr(path, 'load'):
        img = np.asarray(path.load())
    else:
        from lf_mpc_calib.imageio import read_image as read_file
        img = np.asarray(read_file(path))
    if img.ndim == 3:
        img = img[..., :3].mean(axis=2) if img.shape[2] >= 3 else img[..., 0]
    if img.dtype == np.uint8:
        return img.astype(np.float32) / 255.0
    if img.dtype == np.uint16:
        return img.astype(np.float32) / 65535.0
    return img.astype(np.float32)


def _frame_file(entry):
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        for key in ('file', 'path', 'image', 'raw', 'name'):
            if key in entry:
                return entry[key]
    raise InvalidInputError(f'manifest frame entry must be a file name, got {entry!r}')


def _camera_from(manifest):
    """The simulated Camera described by a ``simulate`` manifest, or None."""
    if 'camera' not in manifest:
        return None
    try:
        from lf_mpc_calib.simulation.optics import Camera
        return Camera.from_dict(manifest['camera'])
    except (ImportError, LFCalibError):
        return None


def load_raw_dataset(folder, *, board=None, white=None, demosaic=None, grid=None, topic=None):
    """
    Describe the raw frames in ``folder``.

    With a ``manifest.yaml`` (as written by ``lf-mpc-calib simulate``) the board, white image
    and frame list come from it (``board``/``white`` given here override it). Without one,
    every PNG/TIFF in the folder except the white image is a frame, ``board`` (a
    Checkerboard) is required and ``white`` defaults to the one file whose name starts with
    'white'. A rosbag2 (its folder, or its .db3/.mcap file) or a ``topic`` given reads the
    frames from the bag instead (:func:`lf_mpc_calib.rosbag_input.load_bag_dataset`).

    grid: a LensletGrid, or a file holding one (:func:`load_grid`), to decode with instead of
    estimating it from the white image; its image_size must be the white image's size
    (InvalidInputError naming both otherwise).
    """
    from lf_mpc_calib.rosbag_input import is_bag
    if topic is not None or is_bag(folder):
        from lf_mpc_calib.rosbag_input import load_bag_dataset
        return load_bag_dataset(folder, topic=topic, board=board, white=white,
                                demosaic=demosaic, grid=grid)
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(f'dataset folder {folder} does not exist')
    manifest = {}
    mpath = folder / 'manifest.yaml'
    if mpath.is_file():
        import yaml
        manifest = yaml.safe_load(mpath.read_text()) or {}
        if not isinstance(manifest, dict):
            raise InvalidInputError(f'{mpath}: expected a mapping, got {type(manifest)}')
    if board is None:
        if 'board' not in manifest:
            raise InvalidInputError(
                f'{folder}: no manifest.yaml with a board; give the board '
                '(--board COLSxROWS --square M)')
        board = Checkerboard.from_dict(manifest['board'])
    if white is None and 'white' in manifest:
        white = folder / _frame_file(manifest['white'])
    if white is None:
        whites = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
                        and p.name.lower().startswith('white'))
        if len(whites) != 1:
            raise InvalidInputError(
                f'{folder}: expected one white image named white.* (or --white FILE), found '
                f'{[p.name for p in whites]}')
        white = whites[0]
    white = Path(white)
    if not white.is_file():
        raise InvalidInputError(f'white image {white} does not exist')
    if 'frames' in manifest:
        frames = [folder / _frame_file(e) for e in manifest['frames']]
        missing = [str(p) for p in frames if not p.is_file()]
        if missing:
            raise InvalidInputError(f'{mpath}: frame files missing: {missing}')
    else:
        frames = sorted(p for p in folder.iterdir()
                        if p.suffix.lower() in IMAGE_SUFFIXES and p.resolve() != white.resolve()
                        and not p.name.lower().startswith('white'))
    if not frames:
        raise InvalidInputError(f'{folder}: no raw frames (PNG/TIFF) found')
    if demosaic is None:
        demosaic = manifest.get('bayer', manifest.get('demosaic'))
    return RawDataset(frames, white, board, demosaic, _camera_from(manifest), folder.name,
                      checked_grid(grid, white))


def load_grid(path):
    """
    The LensletGrid held in a YAML file.

    Accepts what the project writes: ``lf-mpc-calib grid``'s file (key ``lenslet_grid``), a
    calibration file (its ``lenslet_grid``, see :mod:`lf_mpc_calib.calibration_file`), or a
    bare ``LensletGrid.to_dict()`` mapping.
    """
    import yaml
    from lf_mpc_calib.lenslet.grid import LensletGrid
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f'grid file {path} does not exist')
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InvalidInputError(f'grid file {path}: not readable YAML ({exc})') from exc
    if not isinstance(doc, dict):
        raise InvalidInputError(f'grid file {path}: expected a mapping, got {type(doc).__name__}')
    if 'format_version' in doc and 'intrinsics' in doc:
        from lf_mpc_calib.calibration_file import load_calibration
        grid = load_calibration(path).lenslet_grid
        if grid is None:
            raise InvalidInputError(f'calibration file {path} holds no lenslet_grid')
        return grid
    if 'lenslet_grid' in doc:
        doc = doc['lenslet_grid']
        if not isinstance(doc, dict):
            raise InvalidInputError(f'grid file {path}: lenslet_grid must be a mapping, got '
                                    f'{doc!r}')
    elif 'lattice' not in doc:
        raise InvalidInputError(
            f'grid file {path}: expected a lenslet_grid mapping (lf-mpc-calib grid or a '
            f'calibration file), got keys {sorted(doc)}')
    try:
        return LensletGrid.from_dict(doc)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f'grid file {path}: {exc}') from exc


def checked_grid(grid, white):
    """
    ``grid`` (a LensletGrid, a file for :func:`load_grid`, or None) checked against the white.

    ``white`` is the white image (array, file or in-memory frame); raises InvalidInputError
    naming both sizes when the grid's image_size is not the white image's (width, height).
    """
    if grid is None:
        return None
    if not hasattr(grid, 'image_size'):
        grid = load_grid(grid)
    shape = np.shape(white) if isinstance(white, np.ndarray) else read_image(white).shape
    _check_grid_size(grid, shape)
    return grid


def _check_grid_size(grid, shape):
    size = (int(shape[1]), int(shape[0]))
    if tuple(grid.image_size) != size:
        raise InvalidInputError(
            f'the lenslet grid is for {grid.image_size[0]}x{grid.image_size[1]} px images but '
            f'the white image is {size[0]}x{size[1]} px')


# ---- decoding -------------------------------------------------------------------------------
def make_decoder(white_image, *, views=None, demosaic=None, grid=None):
    """
    Estimate the lenslet grid from the white image (unless given); return (grid, decoder).

    With ``demosaic`` (a Bayer pattern) the grid is estimated from the white image with each
    CFA channel divided by its own bright level (:func:`bayer_neutral`): the raw mosaic's
    channel gains put a 2 x 2 pixel pattern on every micro-image that pulls the centres
    (measured on rendered Lytro/Illum whites: mean centre error 0.086/0.077 px raw, 0.074/
    0.052 px demosaiced, 0.038/0.025 px balanced = as good as the mono white). A given grid
    must be for the white image's size (InvalidInputError naming both).
    """
    from lf_mpc_calib.lenslet.decode import Decoder
    if grid is None:
        from lf_mpc_calib.lenslet.estimate import estimate_grid
        grid = estimate_grid(white_image if demosaic is None
                             else bayer_neutral(white_image, demosaic))
    else:
        _check_grid_size(grid, np.shape(white_image))
    kwargs = {'white': white_image, 'demosaic': demosaic}
    if views is not None:
        kwargs['views'] = tuple(int(v) for v in views)
    return grid, Decoder(grid, **kwargs)


def bayer_neutral(image, pattern):
    """
    A Bayer mosaic (H, W) with each of its four CFA phases divided by its own bright level.

    The bright level of a phase is its 99th percentile (a white image's micro-image
    plateau), so a white of uniform colour becomes a mono white. Returns float32 (H, W).
    """
    from lf_mpc_calib.lenslet.demosaic import BAYER_PATTERNS
    if pattern not in BAYER_PATTERNS:
        raise InvalidInputError(
            f'unsupported Bayer pattern {pattern!r}; expected one of {BAYER_PATTERNS}')
    out = np.array(image, dtype=np.float32)
    if out.ndim != 2 or min(out.shape) < 2:
        raise InvalidInputError(f'a Bayer mosaic must have shape (H, W), got {out.shape}')
    for dy in (0, 1):
        for dx in (0, 1):
            phase = out[dy::2, dx::2]
            level = float(np.percentile(phase, 99))
            if level > 0:
                phase /= level
    return out


def _calibrate(obs, calibrate_options):
    from lf_mpc_calib.calibration import calibrate
    return calibrate(obs, **(calibrate_options or {}))


def calibrate_raw(dataset, *, views=None, grid=None, corner_options=None,
                  calibrate_options=None, min_poses=MIN_POSES, strict_views=True,
                  progress=None):
    """
    Decode every frame, detect the board, calibrate.

    views (n_i, n_j) sub-aperture views to decode (None: the decoder's default); corners are
    taken from the decoder's usable views (``Decoder.valid``: clean views only;
    ``strict_views`` False: every bright view, ``Decoder.bright``); grid: a LensletGrid to
    decode with (None: estimated from the white image); calibrate_options: keyword
    arguments of ``lf_mpc_calib.calibration.calibrate``;
    progress(index, total, frame_path, message) is called after each frame (message
    starts with 'skipped: ' for a skipped frame) and with frame_path None before
    calibrating. Raises DetectionError when fewer than ``min_poses`` frames show the board.
    """
    timings = {'grid': 0.0, 'decode': 0.0, 'detect': 0.0, 'calibrate': 0.0}
    t0 = time.perf_counter()
    white = read_image(dataset.white)
    try:
        grid, decoder = make_decoder(white, views=views, demosaic=dataset.demosaic, grid=grid)
    except LFCalibError as exc:
        raise DetectionError(f'white image {dataset.white}: {exc}') from exc
    use = decoder.valid if strict_views else decoder.bright
    timings['grid'] = time.perf_counter() - t0
    parts, detections, skipped, pose_frames = [], [], [], []
    view_size = None
    total = len(dataset.frames)
    for k, path in enumerate(dataset.frames):
        try:
            t0 = time.perf_counter()
            raw = read_image(path)
            lf = dataclasses.replace(decoder.decode(raw), valid=use.copy())
            t1 = time.perf_counter()
            timings['decode'] += t1 - t0
            det = detect_corners(lf, dataset.board, pose=len(pose_frames),
                                 options=corner_options)
            timings['detect'] += time.perf_counter() - t1
        except LFCalibError as exc:
            skipped.append((Path(path), str(exc)))
            if progress:
                progress(k, total, Path(path), f'skipped: {exc}')
            continue
        view_size = (int(lf.views.shape[3]), int(lf.views.shape[2]))
        pose_frames.append(Path(path))
        parts.append(det.observations)
        detections.append((Path(path), det))
        if progress:
            d = det.diagnostics
            progress(k, total, Path(path),
                     f'{len(det.observations)} observations, {d["corners_found"]}/'
                     f'{d["corners_total"]} corners in {d["views_used"]}/'
                     f'{d["views_available"]} views, line residual '
                     f'{d["line_residual_rms_px"]:.3f} px')
    if len(pose_frames) < min_poses:
        reasons = '; '.join(f'{p.name}: {r}' for p, r in skipped) or 'none'
        raise DetectionError(
            f'the board was found in {len(pose_frames)} of {total} frames, at least '
            f'{min_poses} are needed (skipped: {reasons})')
    obs = Observations.concatenate(parts)
    if progress:
        progress(total, total, None, f'calibrating {len(pose_frames)} poses, {len(obs)} rays')
    t0 = time.perf_counter()
    try:
        result = _calibrate(obs, calibrate_options)
    except DegenerateConfigurationError as exc:
        raise DegenerateConfigurationError(
            f'{len(pose_frames)} poses kept ({", ".join(p.name for p in pose_frames)}): '
            f'{exc}') from exc
    timings['calibrate'] = time.perf_counter() - t0
    return RawCalibration(result, obs, pose_frames, detections, skipped, grid, view_size,
                          dataset.board, dataset.truth_for(grid), timings, dataset.name,
                          use)


# ---- outputs --------------------------------------------------------------------------------
def observations_path(output):
    """The observation table written beside the calibration file: <stem>_observations.csv."""
    output = Path(output)
    return output.with_name(output.stem + '_observations.csv')


def detection_summary(run):
    """Multi-line text: per frame, kept (pose index, counts) or skipped (reason)."""
    lines = [f'Frames: {len(run.pose_frames)} kept, {len(run.skipped)} skipped']
    for k, (path, det) in enumerate(run.detections):
        d = det.diagnostics
        lines.append(f'  pose {k}: {path.name}: {len(det.observations)} observations, '
                     f'{d["corners_found"]}/{d["corners_total"]} corners, '
                     f'{d["views_used"]}/{d["views_available"]} views, line residual RMS '
                     f'{d["line_residual_rms_px"]:.3f} px, dropped {d["off_line"]} off-line, '
                     f'{d["low_contrast"]} low-contrast, {d["moved_too_far"]} unstable')
    for path, reason in run.skipped:
        lines.append(f'  skipped {path.name}: {reason}')
    t = run.timings
    lines.append('Timings: ' + ', '.join(f'{k} {v:.2f} s' for k, v in t.items()))
    return '\n'.join(lines) + '\n'


def plot_detections(image, central_uv, board, path, *, title=''):
    """Save the central view with the detected corners, corner 0 and the board axes marked."""
    from lf_mpc_calib.report import _pyplot
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 6 * image.shape[0] / image.shape[1]))
    ax.imshow(image, cmap='gray')
    uv = np.asarray(central_uv)
    ok = np.isfinite(uv[:, 0])
    ax.plot(uv[ok, 0], uv[ok, 1], 'o', ms=4, mfc='none', mec='lime')
    if ok[0]:
        ax.plot(uv[0, 0], uv[0, 1], 'o', ms=8, mfc='none', mec='red')
        for other, colour, name in ((1, 'red', 'x'), (board.cols, 'cyan', 'y')):
            if ok[other]:
                d = uv[other] - uv[0]
                ax.annotate('', xy=uv[0] + 2 * d, xytext=uv[0],
                            arrowprops={'arrowstyle': '->', 'color': colour})
                ax.text(*(uv[0] + 2.3 * d), name, color=colour)
    ax.set_title(title or f'{int(ok.sum())}/{len(uv)} corners')
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def write_outputs(run, output, *, report_dir=None, camera='camera'):
    """
    Write the calibration file, the observation table beside it and (optionally) the report.

    Returns a list of written paths.
    """
    from lf_mpc_calib.calibration_file import CalibrationFile, save_calibration
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    cal = CalibrationFile.from_result(run.result, camera_type='conventional',
                                      image_size=run.view_size, lenslet_grid=run.grid,
                                      camera=camera)
    save_calibration(output, cal)
    written = [output]
    obs_path = observations_path(output)
    write_observations(obs_path, run.observations)
    written.append(obs_path)
    if report_dir is not None:
        written += write_report(run, report_dir)
    return written


def write_report(run, report_dir):
    """B's report plus detection overlays (one PNG per pose) and detections.txt."""
    from lf_mpc_calib import report
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    title = run.name or 'calibrate-raw'
    paths = list(report.write_report(run.result, out, board=run.board.points(), title=title,
                                     truth=run.truth))
    text = detection_summary(run)
    det_txt = out / 'detections.txt'
    det_txt.write_text(text)
    paths.append(det_txt)
    summary = out / 'summary.txt'
    if summary.is_file():
        summary.write_text(summary.read_text() + '\n' + text)
    for k, (path, det) in enumerate(run.detections):
        if det.reference_image is None:
            continue
        paths.append(plot_detections(det.reference_image, det.central_uv, run.board,
                                     out / f'detections_{k:03d}_{path.stem}.png',
                                     title=f'pose {k}: {path.name}'))
    return paths
