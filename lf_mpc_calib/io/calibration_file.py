"""
The calibration file: a versioned YAML document (DESIGN.md "The calibration file").

Layout (format_version 1; 2 when the lenslet grid carries a deformation; 3 for a focused camera,
whose poses and mount are in the optical frame, below)::

    format_version: 1
    camera_type: conventional | focused
    intrinsics: {k_i, k_j, k_u, k_v, u_0, v_0}
    distortion: {k_1, k_2, k_3, k_4}
    stddev: {k_i: .., ..., k_4: ..}          # 1-sigma from the final Jacobian; 0 for fixed ones
    errors: {rms_reprojection_px, rms_ray_reprojection_mm}
    poses:                                   # board -> optical (camera) frame
      - {rotation_vector: [rx, ry, rz], translation_m: [tx, ty, tz]}
    views: {i: [min, max], j: [min, max]}    # the range of (i, j) used by the calibration:
                                             # view indices (conventional) or micro-image
                                             # centres in raw pixels (focused); null if unknown
    image_size: [width, height]              # of one view (conventional) or the raw image
                                             # (focused); null if unknown
    lenslet_grid: {...} | null               # LensletGrid.to_dict(), for decoding raw frames
    frames: {optical: <camera>_optical_frame, board_prefix: <camera>_board_}
    software: {name: lf_mpc_calib, version: .., date: ISO 8601}
    lens_types: {...} | null                 # optional: per-micro-lens-type terms of a
                                             # multi-focus camera (lf_mpc_calib.io.raytrix_r12)
    camera_metadata: {...}                   # optional, absent when unknown: what the raw
                                             # files said about the camera (Lytro: make,
                                             # model, serial, zoom_step, focus_step,
                                             # exposure_s, bayer, ..., white_image: {file,
                                             # serial, zoom_step, focus_step, ...})
    covariance: {parameters: [k_i, ...],     # optional: the covariance (F x F) of the free
                 matrix: [[..], ..]}         # parameters (the stddev's source; absent: only
                                             # the stddevs are known, as independent)
    held: {k_1: reason, ...}                 # optional (absent: none): distortion terms held
                                             # at 0 because the data did not determine them
    hand_eye: {...}                          # optional (absent: no robot): the mount of the
                                             # camera on / beside a robot arm, versioned on its
                                             # own (lf_mpc_calib.calibration.hand_eye):
                                             # {format_version, setup, parent_frame,
                                             # child_frame, rotation_vector, translation_m
                                             # (parent -> child), stddev, board_in_base |
                                             # board_in_tool, errors}

Optional keys keep format_version 1: a file without them loads as before (None), and a reader
that does not know a key ignores it.

Frames: ``poses`` and the ``hand_eye`` mount are in the optical frame ``frames.optical``
(:mod:`lf_mpc_calib.camera.optical_frame`). For a conventional camera it is the model's MPC
frame. For a focused camera its origin is the main lens' centre, not the MPC frame's (the
plane conjugate to the micro-lenses): such files are written as format_version 3, so that a
reader of versions 1-2 refuses them instead of placing the mount 1/k_3 off. A focused file of
version 1 or 2 (written before) has its poses and mount in the MPC frame and loads with the
same meaning. In memory (:class:`CalibrationFile`) poses and mount are always in the model's
MPC frame, the frame the model computes in; :meth:`CalibrationFile.optical_poses` and
:meth:`CalibrationFile.optical_hand_eye` give them in the optical frame.

Every number is written as a plain Python float (``yaml.safe_dump``). Reading a file of another
format version, or one lacking a key, raises :class:`CalibrationFileError` naming the key.
"""

from dataclasses import dataclass, field, replace
import datetime

import numpy as np
import yaml

from lf_mpc_calib import __version__
from lf_mpc_calib.errors import CalibrationFileError, LFCalibError, shorten
from lf_mpc_calib.lenslet.grid import LensletGrid, MAX_IMAGE_SIDE
from lf_mpc_calib.camera.model import DISTORTION_NAMES, INTRINSIC_NAMES, MPCModel, PARAMETER_NAMES
from lf_mpc_calib.camera.plausibility import check_plausible

FORMAT_VERSION = 1
DEFORMED_GRID_VERSION = 2
"""Written instead of 1 when the lenslet grid carries a deformation (a smooth displacement of the
lattice, :class:`~lf_mpc_calib.lenslet.grid.LatticeDeformation`): a format-1 reader would drop
it without a word and decode with the regular lattice, so it must refuse such a file."""
OPTICAL_FRAME_VERSION = 3
"""Written for every focused camera: its poses and mount are in the optical frame (origin at the
main lens), where versions 1 and 2 had them in the MPC frame (origin in the plane conjugate to
the micro-lenses); a version 1-2 reader must refuse it. May carry a deformed grid."""
SUPPORTED_VERSIONS = (FORMAT_VERSION, DEFORMED_GRID_VERSION, OPTICAL_FRAME_VERSION)
CAMERA_TYPES = ('conventional', 'focused')
ERROR_KEYS = ('rms_reprojection_px', 'rms_ray_reprojection_mm')
REQUIRED_KEYS = ('format_version', 'camera_type', 'intrinsics', 'distortion', 'stddev',
                 'errors', 'poses', 'views', 'image_size', 'lenslet_grid', 'frames', 'software')


def default_frames(camera='camera'):
    """Return the frame ids {optical: <camera>_optical_frame, board_prefix: <camera>_board_}."""
    return {'optical': f'{camera}_optical_frame', 'board_prefix': f'{camera}_board_'}


def _software():
    return {'name': 'lf_mpc_calib', 'version': __version__,
            'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}


@dataclass(frozen=True, eq=False)
class CalibrationFile:
    """
    The content of a calibration file.

    model MPCModel; stddev {name: float} over PARAMETER_NAMES; errors {rms_reprojection_px,
    rms_ray_reprojection_mm}; rotation_vectors (P, 3) and translations (P, 3) in metres
    (board -> camera); views {'i': [min, max], 'j': [min, max]} or None; image_size
    (width, height) or None; lenslet_grid LensletGrid or None; frames {optical, board_prefix};
    software {name, version, date}; lens_types optional plain mapping of per-micro-lens-type
    terms (written as is; absent in a file = None); camera_metadata optional plain mapping of
    what the raw files said about the camera (:mod:`lf_mpc_calib.io.lytro`; written only when
    given); hand_eye optional mapping of the robot mount (:func:`hand_eye_transform`; parent
    -> the model's MPC frame in memory, :meth:`optical_hand_eye` in the optical frame).
    """

    camera_type: str
    model: MPCModel
    stddev: dict
    errors: dict
    rotation_vectors: np.ndarray
    translations: np.ndarray
    views: dict = None
    image_size: tuple = None
    lenslet_grid: LensletGrid = None
    frames: dict = field(default_factory=default_frames)
    software: dict = field(default_factory=_software)
    format_version: int = FORMAT_VERSION
    lens_types: dict = None
    camera_metadata: dict = None
    hand_eye: dict = None
    held: dict = None
    covariance: dict = None

    def __post_init__(self):
        if self.camera_type not in CAMERA_TYPES:
            raise CalibrationFileError(
                f'camera_type must be one of {CAMERA_TYPES}, got {self.camera_type!r}')
        if not isinstance(self.model, MPCModel):
            raise CalibrationFileError(f'model must be an MPCModel, got {type(self.model)}')
        rv = np.asarray(self.rotation_vectors, dtype=float).reshape(-1, 3) \
            if np.size(self.rotation_vectors) else np.zeros((0, 3))
        tr = np.asarray(self.translations, dtype=float).reshape(-1, 3) \
            if np.size(self.translations) else np.zeros((0, 3))
        if rv.shape != tr.shape:
            raise CalibrationFileError(
                f'rotation_vectors {rv.shape} and translations {tr.shape} must both be (P, 3)')
        if not (np.all(np.isfinite(rv)) and np.all(np.isfinite(tr))):
            raise CalibrationFileError('poses: rotation_vector and translation_m must be finite '
                                       'numbers')
        object.__setattr__(self, 'rotation_vectors', rv)
        object.__setattr__(self, 'translations', tr)
        stddev = {n: float(self.stddev.get(n, 0.0)) for n in PARAMETER_NAMES}
        object.__setattr__(self, 'stddev', stddev)
        missing = [k for k in ERROR_KEYS if k not in self.errors]
        if missing:
            raise CalibrationFileError(f'errors lack {missing}; expected {ERROR_KEYS}')
        object.__setattr__(self, 'errors', {k: float(self.errors[k]) for k in ERROR_KEYS})
        if self.image_size is not None:
            object.__setattr__(self, 'image_size', _image_size(self.image_size))
        if self.views is not None:
            object.__setattr__(self, 'views', _check_views(self.views))
        if self.held is not None and not isinstance(self.held, dict):
            raise CalibrationFileError(
                f'held must be a mapping of parameter names to reasons, got {self.held!r}')
        if self.camera_metadata is not None and not isinstance(self.camera_metadata, dict):
            raise CalibrationFileError(
                f'camera_metadata must be a mapping, got {type(self.camera_metadata).__name__}')
        if self.hand_eye is not None:
            _check_hand_eye(self.hand_eye)
        if self.covariance is not None:
            object.__setattr__(self, 'covariance', _checked_covariance(self.covariance))

    def covariance_matrix(self):
        """(names (F,), (F, F) ndarray) of the free parameters, or None when not stored."""
        if self.covariance is None:
            return None
        return tuple(self.covariance['parameters']), np.array(self.covariance['matrix'])

    @property
    def optical_frame(self):
        """The :class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame` of this calibration:
        where ``frames.optical`` lies in the model's frame."""
        from lf_mpc_calib.camera.optical_frame import OpticalFrame
        return OpticalFrame.of(self.model, self.camera_type)

    def optical_poses(self):
        """Board -> optical frame poses (rotation vectors (P, 3), translations (P, 3) m)."""
        return self.optical_frame.poses(self.rotation_vectors, self.translations)

    def optical_hand_eye(self):
        """The ``hand_eye`` mapping with its mount parent -> optical frame (as TF and the file
        have it), or None."""
        return self.optical_frame.hand_eye(self.hand_eye)

    @property
    def num_poses(self):
        """Number of board poses P."""
        return self.rotation_vectors.shape[0]

    @classmethod
    def from_result(cls, result, *, camera_type, image_size=None, lenslet_grid=None,
                    camera='camera', views=None, lens_types=None, camera_metadata=None,
                    hand_eye=None):
        """
        Build from a :class:`~lf_mpc_calib.calibration.CalibrationResult`.

        ``views`` defaults to the (i, j) range of ``result.view_ids`` (V, 2).
        """
        if views is None:
            view_ids = np.asarray(getattr(result, 'view_ids', np.zeros((0, 2))), dtype=float)
            views = views_from_ids(view_ids) if view_ids.size else None
        return cls(camera_type=camera_type, model=result.model, stddev=dict(result.stddev),
                   errors={'rms_reprojection_px': result.rms_reprojection_px,
                           'rms_ray_reprojection_mm': result.rms_ray_reprojection_mm},
                   rotation_vectors=result.rotation_vectors, translations=result.translations,
                   views=views, image_size=image_size, lenslet_grid=lenslet_grid,
                   frames=default_frames(camera), lens_types=lens_types,
                   camera_metadata=camera_metadata, hand_eye=hand_eye,
                   held=dict(getattr(result, 'held', {}) or {}) or None,
                   covariance=_covariance_of(result))

    def to_dict(self):
        """Plain-Python mapping (only dicts, lists, str, int, float, None) in the file layout."""
        deformed = self.lenslet_grid is not None and self.lenslet_grid.deformation is not None
        version = DEFORMED_GRID_VERSION if deformed else int(self.format_version)
        if self.camera_type == 'focused':
            version = OPTICAL_FRAME_VERSION
        rotation_vectors, translations = self.optical_poses()
        d = {
            'format_version': version,
            'camera_type': self.camera_type,
            'intrinsics': self.model.intrinsics_dict(),
            'distortion': self.model.distortion_dict(),
            'stddev': {n: float(self.stddev[n]) for n in PARAMETER_NAMES},
            'errors': {k: float(self.errors[k]) for k in ERROR_KEYS},
            'poses': [{'rotation_vector': [float(x) for x in r],
                       'translation_m': [float(x) for x in t]}
                      for r, t in zip(rotation_vectors, translations)],
            'views': None if self.views is None else {
                k: [float(x) for x in v] for k, v in self.views.items()},
            'image_size': None if self.image_size is None else [int(x) for x in self.image_size],
            'lenslet_grid': None if self.lenslet_grid is None else self.lenslet_grid.to_dict(),
            'frames': {k: str(v) for k, v in self.frames.items()},
            'software': {k: str(v) for k, v in self.software.items()},
            'lens_types': self.lens_types,
        }
        if self.camera_metadata is not None:
            d['camera_metadata'] = self.camera_metadata
        if self.held:
            d['held'] = {str(k): str(v) for k, v in self.held.items()}
        if self.hand_eye is not None:
            d['hand_eye'] = self.optical_hand_eye()
        if self.covariance is not None:
            d['covariance'] = self.covariance
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; raises CalibrationFileError naming a missing key."""
        if not isinstance(d, dict):
            raise CalibrationFileError(
                f'calibration file must be a mapping at top level, got {type(d).__name__}')
        if 'format_version' not in d:
            raise CalibrationFileError("calibration file lacks key 'format_version'")
        if d['format_version'] not in SUPPORTED_VERSIONS:
            raise CalibrationFileError(
                f'format_version must be one of {SUPPORTED_VERSIONS}, got '
                f'{d["format_version"]!r}')
        for key in REQUIRED_KEYS:
            if key not in d:
                raise CalibrationFileError(f'calibration file lacks key {key!r}')
        _require(d, 'intrinsics', INTRINSIC_NAMES)
        _require(d, 'distortion', DISTORTION_NAMES)
        _require(d, 'stddev', PARAMETER_NAMES)
        _require(d, 'errors', ERROR_KEYS)
        _require(d, 'frames', ('optical', 'board_prefix'))
        try:
            model = MPCModel.from_dict(d['intrinsics'], d['distortion'])
            poses = d['poses'] or []
            for n, p in enumerate(poses):
                for key in ('rotation_vector', 'translation_m'):
                    if not isinstance(p, dict) or key not in p:
                        raise CalibrationFileError(f'poses[{n}] lacks key {key!r}')
            rv = np.array([p['rotation_vector'] for p in poses], dtype=float).reshape(-1, 3)
            tr = np.array([p['translation_m'] for p in poses], dtype=float).reshape(-1, 3)
            grid = None if d['lenslet_grid'] is None else LensletGrid.from_dict(d['lenslet_grid'])
            cal = cls(camera_type=d['camera_type'], model=model, stddev=d['stddev'],
                      errors=d['errors'], rotation_vectors=rv, translations=tr,
                      views=d['views'], image_size=d['image_size'], lenslet_grid=grid,
                      frames=dict(d['frames']), software=dict(d['software']),
                      format_version=d['format_version'], lens_types=d.get('lens_types'),
                      camera_metadata=d.get('camera_metadata'),
                      hand_eye=d.get('hand_eye'), held=d.get('held'),
                      covariance=d.get('covariance'))
            if cal.camera_type == 'focused' and d['format_version'] == OPTICAL_FRAME_VERSION:
                frame = cal.optical_frame          # the file's poses and mount: optical frame
                cal = replace(cal, translations=frame.points(tr, to_model=True),
                              hand_eye=frame.hand_eye(cal.hand_eye, to_model=True))
        except CalibrationFileError:
            raise
        except (LFCalibError, ValueError, TypeError) as exc:
            raise CalibrationFileError(f'malformed calibration file: {exc}') from exc
        try:
            check_plausible(cal.model, cal.camera_type, image_size=cal.image_size,
                            views=cal.views, grid=cal.lenslet_grid)
        except LFCalibError as exc:
            raise CalibrationFileError(f'implausible calibration: {exc}') from None
        return cal


def _covariance_of(result):
    """The result's covariance as the file's mapping, or None (none, or not its free names)."""
    cov = getattr(result, 'covariance', None)
    names = result.free_names() if hasattr(result, 'free_names') else ()
    if cov is None or not len(names) or np.shape(cov) != (len(names), len(names)):
        return None
    cov = np.asarray(cov, dtype=float)
    cov = 0.5 * (cov + cov.T)               # the sandwich's rounding leaves it a hair off
    if not np.all(np.isfinite(cov)) or np.any(np.diag(cov) < 0):
        return None                         # not a covariance to keep: the stddevs stand
    return {'parameters': list(names), 'matrix': [[float(x) for x in row] for row in cov]}


def _checked_covariance(value):
    """``value`` {parameters: [F names], matrix: F x F} as plain types, or
    CalibrationFileError: unknown or repeated names, a matrix not F x F, not finite, not
    symmetric or with a negative variance."""
    if not isinstance(value, dict) or set(value) != {'parameters', 'matrix'}:
        raise CalibrationFileError(f'covariance must be a mapping of parameters and matrix, got '
                                   f'{shorten(repr(value))}')
    names = value['parameters']
    if (not isinstance(names, list) or len(set(map(str, names))) != len(names)
            or any(n not in PARAMETER_NAMES for n in names)):
        raise CalibrationFileError(f'covariance parameters must be distinct names from '
                                   f'{PARAMETER_NAMES}, got {shorten(repr(names))}')
    try:
        m = np.array(value['matrix'], dtype=float)
    except (TypeError, ValueError):
        m = np.full((0,), np.nan)
    f = len(names)
    if m.shape != (f, f) or not np.all(np.isfinite(m)):
        raise CalibrationFileError(f'covariance matrix must be {f} x {f} finite numbers for '
                                   f'{names}, got shape {m.shape}')
    scale = float(np.max(np.abs(np.diag(m)), initial=0.0))
    if np.any(np.diag(m) < 0) or np.max(np.abs(m - m.T), initial=0.0) > 1e-9 * max(scale, 1e-300):
        raise CalibrationFileError('covariance matrix must be symmetric with variances >= 0')
    return {'parameters': [str(n) for n in names],
            'matrix': [[float(x) for x in row] for row in m]}


def _image_size(value):
    """(width, height) whole pixels from 1 to MAX_IMAGE_SIDE, else CalibrationFileError."""
    try:
        size = tuple(value)
        ok = len(size) == 2 and all(
            not isinstance(x, (bool, str)) and float(x) == int(x) and 1 <= x <= MAX_IMAGE_SIDE
            for x in size)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise CalibrationFileError(f'image_size must be (width, height) whole pixels from 1 to '
                                   f'{MAX_IMAGE_SIDE}, got {shorten(repr(value))}')
    return tuple(int(x) for x in size)


def _require(d, key, names):
    sub = d[key]
    if not isinstance(sub, dict):
        raise CalibrationFileError(f'{key} must be a mapping with keys {names}, got {sub!r}')
    for name in names:
        if name not in sub:
            raise CalibrationFileError(f'calibration file lacks key {key}.{name}')


HAND_EYE_KEYS = ('format_version', 'setup', 'parent_frame', 'child_frame', 'rotation_vector',
                 'translation_m')


def _check_hand_eye(hand_eye):
    if not isinstance(hand_eye, dict):
        raise CalibrationFileError(f'hand_eye must be a mapping, got {hand_eye!r}')
    for key in HAND_EYE_KEYS:
        if key not in hand_eye:
            raise CalibrationFileError(f'calibration file lacks key hand_eye.{key}')
    if hand_eye['format_version'] != 1:
        raise CalibrationFileError(
            f'hand_eye.format_version must be 1, got {hand_eye["format_version"]!r}')
    for key in ('rotation_vector', 'translation_m'):
        v = hand_eye[key]
        if not (isinstance(v, (list, tuple)) and len(v) == 3
                and all(isinstance(x, (int, float)) and np.isfinite(x) for x in v)):
            raise CalibrationFileError(f'hand_eye.{key} must be 3 finite numbers, got {v!r}')


def hand_eye_transform(cal):
    """
    The hand-eye mount of a calibration file: (parent_frame, child_frame, rotation_vector (3,),
    translation (3,)) mapping child (the optical frame) to parent coordinates, or None when
    the file has none.
    """
    h = cal.optical_hand_eye()
    if h is None:
        return None
    return (str(h['parent_frame']), str(h['child_frame']),
            np.asarray(h['rotation_vector'], float), np.asarray(h['translation_m'], float))


def _check_views(views):
    if not isinstance(views, dict) or set(views) != {'i', 'j'}:
        raise CalibrationFileError(
            f"views must be {{'i': [min, max], 'j': [min, max]}}, got {views!r}")
    out = {}
    for k in ('i', 'j'):
        v = [float(x) for x in views[k]]
        if len(v) != 2:
            raise CalibrationFileError(f'views.{k} must be [min, max], got {views[k]!r}')
        out[k] = v
    return out


def views_from_ids(view_ids):
    """Return ``{'i': [min, max], 'j': [min, max]}`` of view ids (V, 2)."""
    ids = np.asarray(view_ids, dtype=float).reshape(-1, 2)
    return {'i': [float(ids[:, 0].min()), float(ids[:, 0].max())],
            'j': [float(ids[:, 1].min()), float(ids[:, 1].max())]}


def dumps(cal):
    """Return the YAML text of ``cal`` (what the ROS node publishes as std_msgs/String)."""
    return yaml.safe_dump(cal.to_dict(), sort_keys=False, default_flow_style=None)


def loads(text, what='calibration file'):
    """Parse YAML text written by :func:`dumps` into a CalibrationFile (errors start with
    ``what`` and are shortened: a malformed file must not echo a huge value into a log)."""
    from lf_mpc_calib.io.yaml_file import load_yaml
    try:
        d = load_yaml(text, what)
    except LFCalibError as exc:
        raise CalibrationFileError(str(exc)) from None
    try:
        return CalibrationFile.from_dict(d)
    except CalibrationFileError as exc:
        raise CalibrationFileError(f'{what}: {shorten(exc, 400)}') from None


def save_calibration(path, cal):
    """
    Write ``cal`` to ``path`` as YAML (through a temporary name: io.atomic), once the text
    passes the checks :func:`load_calibration` applies: a file its own loader would refuse is
    refused (CalibrationFileError, nothing written).
    """
    from lf_mpc_calib.io.atomic import open_atomically
    text = dumps(cal)
    loads(text, f'calibration for {path} (not written)')
    with open_atomically(path, 'w') as f:
        f.write(text)


def load_calibration(path):
    """Read a calibration file; raises CalibrationFileError naming the file and a missing key,
    the version, or why it cannot be read (missing, a folder, binary, not YAML)."""
    from lf_mpc_calib.io.yaml_file import read_text
    try:
        text = read_text(path, 'calibration file')
    except LFCalibError as exc:
        raise CalibrationFileError(str(exc)) from None
    return loads(text, f'calibration file {path}')
