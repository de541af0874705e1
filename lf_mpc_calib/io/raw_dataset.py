"""
A raw calibration data set on disk: raw checkerboard frames, a white image, the board, and
optionally a lenslet grid file.

A folder written by ``lf-mpc-calib simulate`` or by a calibration session's ``save`` holds a
``manifest.yaml`` naming all of it; a plain folder of PNG/TIFF frames needs the board given.
A session's manifest also lists the SHA-256 of every file it names (key ``sha256``), and a
folder whose files do not match it is refused (a save cut off, a file replaced since). Saves go
to a new folder each (:func:`new_session_folder`, :func:`publish_folder`): ``OUTPUT_DIR/latest``
links to the newest, and ``OUTPUT_DIR`` itself is read as its ``latest``.
Frames from a rosbag2 are read by :mod:`lf_mpc_calib.io.rosbag` into the same
:class:`RawDataset`.
"""

from dataclasses import dataclass
import datetime
import hashlib
import os
from pathlib import Path
import shutil

import numpy as np

from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.errors import InvalidInputError, LFCalibError, shorten
from lf_mpc_calib.io.atomic import make_partial_folder
from lf_mpc_calib.io.images import read_float_image
from lf_mpc_calib.io.lytro import is_lytro_file, LYTRO_SUFFIXES, lytro_dataset
from lf_mpc_calib.io.yaml_file import read_yaml
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.white_image import check_grid_size

IMAGE_SUFFIXES = ('.png', '.tif', '.tiff', '.pgm', '.bmp') + LYTRO_SUFFIXES
MANIFEST = 'manifest.yaml'
WHITE_FILE = 'white.png'
MANIFEST_FORMAT = 'lf_mpc_calib-raw-dataset'
MANIFEST_VERSION = 1        # the manifest layout this reader knows (key format_version)
CHECKSUM_KEY = 'sha256'
LATEST = 'latest'


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


def load_raw_folder(folder, *, board=None, white=None, demosaic=None, grid=None, dark=None):
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

    dark: a dark frame file (default: the manifest's ``dark``; without a manifest, the one
    file named dark.*): subtracted from the white and every frame as they are read
    (:class:`~lf_mpc_calib.io.dark_corrected.DarkCorrected`), checked against the white first.

    Lytro raw frames (.lfr, .lfp, .raw; :mod:`lf_mpc_calib.io.lytro`) give the Bayer pattern
    (unless ``demosaic`` is given) and the camera metadata; their ``white`` may be a folder of
    Lytro white images, of which the one matching the frames' serial, zoom and focus is used.
    """
    folder = _dataset_folder(folder)
    mpath = folder / MANIFEST
    manifest = _read_manifest(folder, mpath)
    if board is None:
        board = _manifest_board(folder, manifest)
    given_white, given_dark = white, dark
    white = _white_file(folder, manifest, white)
    frames = _frame_files(folder, mpath, manifest, white)
    dark = _dark_file(folder, manifest, dark)
    if 'bit_depth' in manifest:     # the images of the folder, not a --white/--dark given
        own = [p for p, given in ((white, given_white), (dark, given_dark)) if given is None]
        check_bit_depth(mpath, manifest['bit_depth'], own + frames)
    camera_metadata = None
    if any(is_lytro_file(p) for p in frames):
        white, bayer, camera_metadata = lytro_dataset(frames, white)
        demosaic = demosaic or bayer
    elif white.is_dir():
        raise InvalidInputError(f'white image {white} is a folder; a folder of white images '
                                'is for Lytro raw frames only')
    if demosaic is None:
        demosaic = manifest.get('bayer', manifest.get('demosaic'))
    grid = checked_grid(grid, white)
    if dark is not None:
        white, frames = _dark_corrected(white, frames, dark, camera_metadata)
    return RawDataset(frames, white, board, demosaic, _camera_from(manifest), folder.name,
                      grid, camera_metadata)


def _dataset_folder(folder):
    """``folder`` as a Path, or its ``latest`` (a calibration node's output_dir);
    InvalidInputError when it is no folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(f'dataset folder {folder} does not exist')
    if not (folder / MANIFEST).exists() and (folder / LATEST / MANIFEST).is_file():
        folder = folder / LATEST
    return folder


def _read_manifest(folder, mpath):
    """The manifest dict at ``mpath`` ({} when there is none), its layout, version and
    checksums checked."""
    if not mpath.exists():
        return {}
    manifest = read_yaml(mpath, 'manifest') or {}
    if not isinstance(manifest, dict):
        raise InvalidInputError(f'manifest {mpath}: expected a mapping, got '
                                f'{type(manifest).__name__}')
    if not isinstance(manifest.get('frames', []), list):
        raise InvalidInputError(f'manifest {mpath}: frames must be a list of file names, got '
                                f'{shorten(repr(manifest["frames"]))}')
    check_manifest_version(mpath, manifest)
    if CHECKSUM_KEY in manifest:
        verify_checksums(folder, manifest)
    return manifest


def _manifest_board(folder, manifest):
    """The Checkerboard the manifest names; InvalidInputError asking for one without it."""
    if 'board' not in manifest:
        raise InvalidInputError(
            f'{folder}: no manifest.yaml with a board; give the board '
            '(--board COLSxROWS --square M)')
    return Checkerboard.from_dict(manifest['board'])


def _white_file(folder, manifest, white):
    """The white image's Path: ``white`` given, the manifest's, or the one white.* file."""
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
    return white


def _frame_files(folder, mpath, manifest, white):
    """The frames' Paths: the manifest's list (each present, each once), else every image of
    the folder but the white and dark ones; InvalidInputError when there is none."""
    if 'frames' in manifest:
        frames = [folder / _frame_file(e) for e in manifest['frames']]
        missing = [str(p) for p in frames if not p.is_file()]
        if missing:
            raise InvalidInputError(f'{mpath}: frame files missing: {shorten(missing, 300)}')
        _check_listed_once(mpath, frames)
    else:
        frames = sorted(p for p in folder.iterdir()
                        if p.suffix.lower() in IMAGE_SUFFIXES and p.resolve() != white.resolve()
                        and not p.name.lower().startswith(('white', 'dark')))
    if not frames:
        raise InvalidInputError(f'{folder}: no raw frames (PNG/TIFF/Lytro) found')
    return frames


def _dark_corrected(white, frames, dark, camera_metadata):
    """The white and frames read less the dark frame ``dark`` (checked against the white)."""
    if camera_metadata is not None:
        raise InvalidInputError(f'dark frame {dark}: Lytro raw frames carry their own black '
                                'level; a dark frame is for PNG/TIFF frames')
    from lf_mpc_calib.io.dark_corrected import DarkCorrected, dark_for
    pixels = dark_for(white, dark)
    return DarkCorrected(white, pixels), [DarkCorrected(p, pixels) for p in frames]


def _check_listed_once(mpath, frames):
    """InvalidInputError when the manifest ``mpath`` lists one frame file twice (by any
    spelling or link): its pose would be counted twice, without a word."""
    seen = {}
    for k, path in enumerate(frames):
        first = seen.setdefault(os.path.realpath(path), k)
        if first != k:
            raise InvalidInputError(f'{mpath}: frames lists {path.name} twice (entries '
                                    f'{first + 1} and {k + 1}); expected each frame once')


def manifest_files(folder):
    """
    The files the manifest.yaml of the data set folder ``folder`` (or of its ``latest``) names:
    white, dark, calibration and frames, as paths (a name such as ``../x.png`` or an absolute
    path lies outside the folder; the CLI protects them from its outputs as it protects the
    folder). [] without a manifest, or one that cannot be read (its reader says why later).
    """
    folder = Path(folder)
    if not (folder / MANIFEST).exists() and (folder / LATEST / MANIFEST).is_file():
        folder = folder / LATEST
    try:
        manifest = read_yaml(folder / MANIFEST, 'manifest') if (folder / MANIFEST).is_file() \
            else None
    except InvalidInputError:
        return []
    if not isinstance(manifest, dict):
        return []
    frames = manifest.get('frames', [])
    named = [manifest.get(key) for key in ('white', 'dark', 'calibration')]
    named += frames if isinstance(frames, list) else []
    found = []
    for entry in named:
        try:
            name = _frame_file(entry) if entry is not None else None
        except InvalidInputError:
            continue
        if isinstance(name, str) and name:
            found.append(folder / name)
    return found


def check_bit_depth(mpath, bit_depth, files):
    """
    InvalidInputError unless the manifest ``mpath``'s ``bit_depth`` is 8 or 16 and every PNG or
    TIFF of ``files`` (Paths, None skipped) says so in its header (an 8-bit frame read as
    16-bit data, or the reverse, reads as a dark or saturated board without a word).
    """
    from lf_mpc_calib.io.images import image_bit_depth
    if isinstance(bit_depth, bool) or bit_depth not in (8, 16):
        raise InvalidInputError(f'{mpath}: bit_depth must be 8 or 16, got '
                                f'{shorten(repr(bit_depth))}')
    for path in files:
        if path is None or not Path(path).is_file() or is_lytro_file(path):
            continue
        found = image_bit_depth(path)
        if found is not None and found != bit_depth:
            raise InvalidInputError(
                f'{mpath}: bit_depth is {bit_depth} but {Path(path).name} holds {found}-bit '
                f'pixels; expected every image the manifest names to hold {bit_depth}-bit ones')


def _dark_file(folder, manifest, dark):
    """The dark frame's Path (given, the manifest's ``dark``, or the one dark.*), or None."""
    if dark is None and 'dark' in manifest:
        dark = folder / _frame_file(manifest['dark'])
    if dark is None and not manifest:
        darks = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
                       and p.name.lower().startswith('dark'))
        if len(darks) > 1:
            raise InvalidInputError(f'{folder}: expected at most one dark frame named dark.* '
                                    f'(or --dark FILE), found {[p.name for p in darks]}')
        dark = darks[0] if darks else None
    if dark is not None and not Path(dark).is_file():
        raise InvalidInputError(f'dark frame {dark} does not exist')
    return None if dark is None else Path(dark)


def sha256_of(path):
    """Hex SHA-256 of the file ``path``."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def check_manifest_version(mpath, manifest):
    """
    Refuse a manifest of another format or a later layout than this reader knows.

    ``format`` (when present) must be MANIFEST_FORMAT and ``format_version`` (when present; a
    manifest without it is version 1) must be MANIFEST_VERSION.
    """
    kind = manifest.get('format', MANIFEST_FORMAT)
    if kind != MANIFEST_FORMAT:
        raise InvalidInputError(f'manifest {mpath}: format must be {MANIFEST_FORMAT!r}, got '
                                f'{shorten(repr(kind))}')
    version = manifest.get('format_version', MANIFEST_VERSION)
    if isinstance(version, bool) or version != MANIFEST_VERSION:
        raise InvalidInputError(
            f'manifest {mpath}: format_version {shorten(repr(version))} is not one this version '
            f'reads ({MANIFEST_VERSION}); a newer lf_mpc_calib wrote it, or it was edited')


def verify_checksums(folder, manifest):
    """
    Refuse (InvalidInputError) a folder whose files do not match its manifest's ``sha256``
    list: a listed file missing or changed, a file the manifest names (white, frames,
    calibration) not listed, or an image in the folder the manifest does not know.
    """
    mpath = Path(folder) / MANIFEST
    sums = manifest[CHECKSUM_KEY]
    if not isinstance(sums, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in sums.items()):
        raise InvalidInputError(f'manifest {mpath}: {CHECKSUM_KEY} must map file names to '
                                f'hex digests, got {shorten(repr(sums))}')
    named = [manifest.get('white'), manifest.get('calibration'), *manifest.get('frames', [])]
    unlisted = [str(n) for n in named if isinstance(n, str) and n not in sums]
    bad = []
    for name, digest in sums.items():
        path = Path(folder) / name
        if Path(name).name != name or not path.is_file():
            bad.append(f'{shorten(name, 60)} (missing)')
        elif sha256_of(path) != digest:
            bad.append(f'{name} (changed)')
    extra = sorted(p.name for p in Path(folder).iterdir()
                   if p.suffix.lower() in IMAGE_SUFFIXES and p.name not in sums)
    if bad or unlisted or extra:
        raise InvalidInputError(
            f'{folder}: the files do not match manifest.yaml (a save cut off, or files changed '
            f'since): ' + '; '.join(part for part in (
                'listed but ' + ', '.join(bad[:5]) if bad else '',
                'named but without checksum: ' + ', '.join(unlisted[:5]) if unlisted else '',
                'not in the manifest: ' + ', '.join(extra[:5]) if extra else '') if part)
            + '; expected a complete saved session (use another saved folder)')


def new_session_folder(output_dir, name):
    """
    (temporary folder, final folder) for one save into ``output_dir``: the files go into the
    temporary folder (hidden, in ``output_dir``) and :func:`publish_folder` renames it to the
    final ``<name>_<YYYYmmdd-HHMMSS>[_N]`` folder, so a save cut off never leaves a partial
    folder under a final name and never touches earlier saves.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    final, n = out / f'{name}_{stamp}', 1
    while final.exists():
        n += 1
        final = out / f'{name}_{stamp}_{n}'
    return make_partial_folder(out, final.name), final


def write_manifest(folder, manifest, files):
    """Write ``manifest`` + the SHA-256 of ``files`` (names in ``folder``) as manifest.yaml,
    last and atomically; returns its path."""
    import yaml
    doc = dict(manifest)
    doc[CHECKSUM_KEY] = {name: sha256_of(Path(folder) / name) for name in files}
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    from lf_mpc_calib.io.atomic import write_atomically
    return write_atomically(Path(folder) / MANIFEST, lambda p: Path(p).write_text(text))


def publish_folder(tmp, final):
    """Rename the complete temporary folder to ``final`` and point ``latest`` at it."""
    os.rename(tmp, final)
    link = final.parent / LATEST
    if link.exists() and not link.is_symlink():
        return final                            # a user's own 'latest': leave it alone
    tmp_link = final.parent / f'.{LATEST}.{os.getpid()}'
    if tmp_link.is_symlink():
        tmp_link.unlink()
    os.symlink(final.name, tmp_link)
    os.replace(tmp_link, link)
    return final


def discard_folder(tmp):
    """Remove a temporary save folder after a failure."""
    shutil.rmtree(tmp, ignore_errors=True)


def load_grid(path, image_size=None):
    """
    The LensletGrid held in a YAML file, or in a Raytrix RayCalibData XML (suffix ``.xml``).

    Accepts what the project writes: ``lf-mpc-calib grid``'s file (key ``lenslet_grid``), a
    calibration file (its ``lenslet_grid``, see :mod:`lf_mpc_calib.io.calibration_file`), or a
    bare ``LensletGrid.to_dict()`` mapping. A RayCalibData XML holds no image size: it is
    ``image_size`` (width, height), else the size of the image beside the XML with its stem
    (:func:`lf_mpc_calib.io.raytrix_xml.read_raytrix_xml`); ``image_size`` is ignored for YAML.
    """
    path = Path(path)
    if path.suffix.lower() == '.xml':
        from lf_mpc_calib.io.raytrix_xml import read_raytrix_xml
        return read_raytrix_xml(path, image_size).grid
    doc = read_yaml(path, 'grid file')
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
                                    f'{shorten(repr(doc))}')
    elif 'lattice' not in doc:
        raise InvalidInputError(
            f'grid file {path}: expected a lenslet_grid mapping (lf-mpc-calib grid or a '
            f'calibration file), got keys {shorten(sorted(map(str, doc)))}')
    try:
        return LensletGrid.from_dict(doc)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f'grid file {path}: {shorten(exc, 300)}') from None


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
