"""
The captures of a live calibration session on disk, written one by one as they are taken, so
that the session outlives the process that took them.

::

    SESSION_DIR/
      session.yaml      camera type, board, views, lens types; the white image's file and
                        SHA-256 (rewritten, atomically, when the white changes)
      white.png         the white image the captures were taken with (white.npy: float)
      capture_000/      frame.png (uint8/uint16; frame.npy for other dtypes),
                        observations.csv (the rays found), capture.yaml (the frame's shape
                        and dtype, rays, robot pose, the SHA-256 of every file; written last)
      .capture_001.<random>.partial/    a capture being written

A capture is written into a hidden ``.partial`` folder and renamed to ``capture_NNN`` once
complete, so a process killed or a disk full mid-write leaves no folder under a final name;
:func:`lf_mpc_calib.io.atomic.remove_partials` clears such leftovers. Reading checks every
file against the checksums and the frame against its shape and dtype, and refuses with
InvalidInputError naming the capture folder and what is wrong.
"""

from dataclasses import dataclass
import datetime
import os
from pathlib import Path
import shutil

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, LFCalibError, shorten
from lf_mpc_calib.io.atomic import (make_partial_folder, write_atomically,
                                    write_text_atomically)
from lf_mpc_calib.io.images import read_image, write_image
from lf_mpc_calib.io.observation_table import write_observations
from lf_mpc_calib.io.raw_dataset import sha256_of
from lf_mpc_calib.io.yaml_file import read_yaml

SESSION_FILE = 'session.yaml'
CAPTURE_FILE = 'capture.yaml'
OBSERVATIONS_FILE = 'observations.csv'
SESSION_FORMAT = 'lf_mpc_calib-capture-session'
CAPTURE_FORMAT = 'lf_mpc_calib-capture'
CAPTURE_PREFIX = 'capture_'


@dataclass(frozen=True, eq=False)
class StoredCapture:
    """One capture read back: name (its folder's), frame (H, W) as written, robot_pose
    ((3,), (3,)) base -> tool or None, rays: how many rays were found when it was taken."""

    name: str
    frame: np.ndarray
    robot_pose: tuple = None
    rays: int = 0


class CaptureStore:
    """The capture folders of one session folder (module docstring); ``folder`` is created
    with the first write."""

    def __init__(self, folder):
        self.folder = Path(folder)

    # ---- the session's description and white image --------------------------------------
    def read_setup(self):
        """The mapping of session.yaml, or None when there is none (InvalidInputError when it
        is unreadable)."""
        path = self.folder / SESSION_FILE
        if not path.exists():
            return None
        doc = read_yaml(path, 'session file')
        if not isinstance(doc, dict) or doc.get('format') != SESSION_FORMAT:
            raise InvalidInputError(f'{path}: expected a mapping with format {SESSION_FORMAT}, '
                                    f'got {shorten(repr(doc))}')
        return doc

    def write_setup(self, setup, white):
        """Write ``white`` (2-D array) and then session.yaml (``setup`` plus the white's file
        name and checksum), each atomically."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = _write_array(self.folder / 'white', white)
        doc = dict(setup, format=SESSION_FORMAT, white=name,
                   white_sha256=sha256_of(self.folder / name))
        write_text_atomically(self.folder / SESSION_FILE, _yaml(doc))
        other = self.folder / ('white.npy' if name.endswith('.png') else 'white.png')
        if other.exists():
            other.unlink()

    def read_white(self, setup):
        """The white image named by ``setup`` (read_setup's), checked against its checksum."""
        name = setup.get('white')
        if name not in ('white.png', 'white.npy'):
            raise InvalidInputError(f'{self.folder / SESSION_FILE}: white must be white.png or '
                                    f'white.npy, got {shorten(repr(name))}')
        path = self.folder / name
        try:
            if not path.is_file() or sha256_of(path) != setup.get('white_sha256'):
                raise InvalidInputError(f'{path}: missing or changed since it was written '
                                        '(SHA-256 differs from session.yaml)')
            return _read_array(path)
        except OSError as exc:
            raise InvalidInputError(f'{path}: cannot be read: {exc}') from None

    # ---- captures -----------------------------------------------------------------------
    def capture_folders(self):
        """The complete capture folders, in the order they were taken."""
        if not self.folder.is_dir():
            return []
        found = [p for p in self.folder.iterdir() if p.is_dir() and _capture_index(p.name)
                 is not None]
        return sorted(found, key=lambda p: _capture_index(p.name))

    def write_capture(self, frame, observations, robot_pose=None, images=None):
        """
        Write one capture as the next ``capture_NNN`` folder; returns its path.

        frame: (H, W) raw frame (lossless: PNG for uint8/uint16, else .npy); observations:
        its rays (an Observations table); robot_pose: (rotation vector (3,), translation (3,)
        m) or None; images: {file name: (H, W[, 3]) uint8/uint16 image} written beside it
        (PNG). Everything goes into a hidden ``.partial`` folder renamed into place when
        complete: on any error (OSError, a full disk, an image that cannot be written) the
        folder is removed and the error goes on, leaving no capture half-written.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        folders = self.capture_folders()
        index = _capture_index(folders[-1].name) + 1 if folders else 0
        name = f'{CAPTURE_PREFIX}{index:03d}'
        tmp = make_partial_folder(self.folder, name)
        try:
            frame = np.asarray(frame)
            files = [_write_array(tmp / 'frame', frame)]
            write_observations(tmp / OBSERVATIONS_FILE, observations)
            files.append(OBSERVATIONS_FILE)
            for image_name, image in (images or {}).items():
                if Path(image_name).name != image_name or image_name in files + [CAPTURE_FILE]:
                    raise InvalidInputError(f'capture image name {image_name!r}: expected a '
                                            'new plain file name')
                write_image(tmp / image_name, image)
                files.append(image_name)
            doc = {'format': CAPTURE_FORMAT, 'frame': files[0], 'shape': list(frame.shape),
                   'dtype': str(frame.dtype), 'rays': len(observations),
                   'robot_pose': None if robot_pose is None else {
                       'rotation_vector': [float(v) for v in robot_pose[0]],
                       'translation_m': [float(v) for v in robot_pose[1]]},
                   'sha256': {f: sha256_of(tmp / f) for f in files}}
            write_text_atomically(tmp / CAPTURE_FILE, _yaml(doc))
            os.rename(tmp, self.folder / name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.folder / name

    def read_capture(self, folder):
        """The :class:`StoredCapture` in ``folder``; InvalidInputError naming the folder and
        what is wrong (a missing or changed file, a frame of another shape or dtype, a bad
        robot pose)."""
        folder = Path(folder)
        where = f'capture {folder.name}'
        try:
            doc = read_yaml(folder / CAPTURE_FILE, 'capture file')
            if not isinstance(doc, dict) or doc.get('format') != CAPTURE_FORMAT:
                raise InvalidInputError(f'expected a mapping with format {CAPTURE_FORMAT}')
            sums = doc.get('sha256')
            if not isinstance(sums, dict) or doc.get('frame') not in sums:
                raise InvalidInputError('capture.yaml lists no checksum of its frame')
            for name, digest in sums.items():
                path = folder / str(name)
                if Path(str(name)).name != name or not path.is_file():
                    raise InvalidInputError(f'{shorten(name, 60)} is missing')
                if sha256_of(path) != digest:
                    raise InvalidInputError(f'{name} changed since it was written (SHA-256)')
            frame = _read_array(folder / doc['frame'])
            if list(frame.shape) != doc.get('shape') or str(frame.dtype) != doc.get('dtype'):
                raise InvalidInputError(
                    f'frame is {frame.dtype} {list(frame.shape)}, capture.yaml says '
                    f'{shorten(doc.get("dtype"))} {shorten(doc.get("shape"))}')
            return StoredCapture(folder.name, frame, _robot_pose(doc.get('robot_pose')),
                                 _count(doc.get('rays')))
        except (LFCalibError, OSError) as exc:
            raise InvalidInputError(f'{where}: {exc}') from None

    # ---- starting afresh ----------------------------------------------------------------
    def move_aside(self):
        """Rename the session folder to ``<name>_before_reset_<YYYYmmdd-HHMMSS>[_N]`` beside
        it (nothing is deleted); returns the new path, or None when there was nothing to
        move. OSError when it cannot be renamed (the folder is then as it was)."""
        if not self.folder.is_dir() or not any(self.folder.iterdir()):
            return None
        stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
        backup, n = self.folder.with_name(f'{self.folder.name}_before_reset_{stamp}'), 1
        while backup.exists():
            n += 1
            backup = self.folder.with_name(f'{self.folder.name}_before_reset_{stamp}_{n}')
        os.rename(self.folder, backup)
        return backup


def _capture_index(name):
    """N of a ``capture_NNN`` folder name, else None."""
    digits = name[len(CAPTURE_PREFIX):]
    if name.startswith(CAPTURE_PREFIX) and digits.isdigit() and digits.isascii():
        return int(digits)
    return None


def _write_array(stem, array):
    """Write ``array`` losslessly as ``stem``.png (2-D uint8/uint16) or ``stem``.npy (anything
    else; atomically); returns the file name."""
    array = np.asarray(array)
    stem = Path(stem)
    if array.ndim == 2 and array.dtype in (np.uint8, np.uint16):
        return write_image(stem.with_suffix('.png'), array).name
    if array.dtype == object:
        raise InvalidInputError(f'cannot store an object array ({stem.name})')

    def save(path):
        with open(path, 'wb') as f:
            np.save(f, array, allow_pickle=False)
    return write_atomically(stem.with_suffix('.npy'), save).name


def _read_array(path):
    """What :func:`_write_array` wrote (never unpickles)."""
    path = Path(path)
    if path.suffix == '.npy':
        from lf_mpc_calib.io.file_checks import load_npy
        return load_npy(path, 'captured array')        # header checked before allocating
    return read_image(path)


def _robot_pose(doc):
    """((3,), (3,)) from a capture's robot_pose mapping, or None."""
    if doc is None:
        return None
    try:
        pose = tuple(np.asarray(doc[key], dtype=float).reshape(3)
                     for key in ('rotation_vector', 'translation_m'))
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError(f'robot_pose: expected rotation_vector and translation_m of 3 '
                                f'numbers each, got {shorten(repr(doc))}') from None
    if not all(np.all(np.isfinite(v)) for v in pose):
        raise InvalidInputError(f'robot_pose holds non-finite numbers: {shorten(repr(doc))}')
    return pose


def _count(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f'rays: expected a count, got {shorten(repr(value))}')
    return value


def _yaml(doc):
    import yaml
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


__all__ = ['CaptureStore', 'StoredCapture']
