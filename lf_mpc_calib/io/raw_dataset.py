"""
A raw calibration data set on disk: raw checkerboard frames, a white image, the board, and
optionally a lenslet grid file.

A folder written by ``lf-mpc-calib simulate`` or by a calibration session's ``save`` holds a
``manifest.yaml`` naming all of it; a plain folder of PNG/TIFF frames needs the board given.
Frames from a rosbag2 are read by :mod:`lf_mpc_calib.io.rosbag` into the same
:class:`RawDataset`.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.errors import InvalidInputError, LFCalibError
from lf_mpc_calib.io.images import read_float_image
from lf_mpc_calib.io.lytro import is_lytro_file, LYTRO_SUFFIXES, lytro_dataset
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.white_image import check_grid_size

IMAGE_SUFFIXES = ('.png', '.tif', '.tiff', '.pgm', '.bmp') + LYTRO_SUFFIXES
MANIFEST = 'manifest.yaml'
WHITE_FILE = 'white.png'
MANIFEST_FORMAT = 'lf_mpc_calib-raw-dataset'


@dataclass(frozen=True, eq=False)
class RawDataset:
    """
    What calibrate-raw needs: frame files, the white image file and the board.

    frames: list of Path, or of in-memory frames (objects with ``load() -> ndarray``, a
    ``name`` and ``__fspath__`` giving a label such as ``'bag.db3#3 (t=200 ms)'``, e.g.
    :class:`lf_mpc_calib.io.rosbag.BagFrame`), read by
    :func:`~lf_mpc_calib.io.images.read_float_image`; white: the same kinds; board:
    Checkerboard; demosaic: Bayer pattern name or None; camera: the simulated camera of a data
    set written by ``simulate`` (its ground truth is computed for the lenslet grid actually
    used), else None; name: for titles; grid: a LensletGrid to decode with (checked against the
    white image's size), or None to estimate it from the white image; camera_metadata: what
    Lytro raw files say about the camera (``lytro_dataset``), for the calibration file, or None.
    """

    frames: list
    white: Path
    board: Checkerboard
    demosaic: str = None
    camera: object = None
    name: str = ''
    grid: object = None
    camera_metadata: dict = None

    def truth_for(self, grid):
        """Ground-truth MPCModel in the indexing of ``grid`` (simulated data), or None."""
        if self.camera is None:
            return None
        try:
            return self.camera.ground_truth_model(grid)
        except LFCalibError:
            return None


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


def load_raw_folder(folder, *, board=None, white=None, demosaic=None, grid=None):
    """
    Describe the raw frames in ``folder``.

    With a ``manifest.yaml`` (as written by ``lf-mpc-calib simulate``) the board, white image
    and frame list come from it (``board``/``white`` given here override it). Without one,
    every PNG/TIFF in the folder except the white image is a frame, ``board`` (a
    Checkerboard) is required and ``white`` defaults to the one file whose name starts with
    'white'.

    grid: a LensletGrid, or a file holding one (:func:`load_grid`), to decode with instead of
    estimating it from the white image; its image_size must be the white image's size
    (InvalidInputError naming both otherwise).

    Lytro raw frames (.lfr, .lfp, .raw; :mod:`lf_mpc_calib.io.lytro`) give the Bayer pattern
    (unless ``demosaic`` is given) and the camera metadata; their ``white`` may be a folder of
    Lytro white images, of which the one matching the frames' serial, zoom and focus is used.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(f'dataset folder {folder} does not exist')
    manifest = {}
    mpath = folder / MANIFEST
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
    if not white.is_file() and not white.is_dir():
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
        raise InvalidInputError(f'{folder}: no raw frames (PNG/TIFF/Lytro) found')
    camera_metadata = None
    if any(is_lytro_file(p) for p in frames):
        white, bayer, camera_metadata = lytro_dataset(frames, white)
        demosaic = demosaic or bayer
    elif white.is_dir():
        raise InvalidInputError(f'white image {white} is a folder; a folder of white images '
                                'is for Lytro raw frames only')
    if demosaic is None:
        demosaic = manifest.get('bayer', manifest.get('demosaic'))
    return RawDataset(frames, white, board, demosaic, _camera_from(manifest), folder.name,
                      checked_grid(grid, white), camera_metadata)


def load_grid(path):
    """
    The LensletGrid held in a YAML file.

    Accepts what the project writes: ``lf-mpc-calib grid``'s file (key ``lenslet_grid``), a
    calibration file (its ``lenslet_grid``, see :mod:`lf_mpc_calib.io.calibration_file`), or a
    bare ``LensletGrid.to_dict()`` mapping.
    """
    import yaml
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
        from lf_mpc_calib.io.calibration_file import load_calibration
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
    shape = np.shape(white) if isinstance(white, np.ndarray) else read_float_image(white).shape
    check_grid_size(grid, shape)
    return grid
