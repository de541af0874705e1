"""
Robot poses (base -> tool) per captured frame, read from a file or a dataset manifest.

Formats (all poses T_base_tool: X_base = R(rotation_vector) X_tool + translation, metres and
radians, as TF's base -> tool transform):

- CSV with the header ``frame,tx,ty,tz,rx,ry,rz`` (more columns may follow and are ignored);
  ``frame`` is a frame's file name (or its stem), or its 0-based index in the data set (for
  an observation table: the pose id).
- YAML: a list of ``{frame, rotation_vector: [3], translation_m: [3]}``, or a mapping with that
  list under ``robot_poses`` (a dataset manifest written by ``lf-mpc-calib simulate --arm``,
  whose ``arm: {setup, base_frame, tool_frame}`` is read too).
"""

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, shorten
from lf_mpc_calib.io.file_checks import check_input_file, read_bytes

MAX_REACH_M = 1000.0
MAX_POSES_BYTES = 64 * 1024 ** 2     # a pose table of a million captures is ~100 MB less
"""A robot pose's translation component, at most (metres)."""
CSV_COLUMNS = ('frame', 'tx', 'ty', 'tz', 'rx', 'ry', 'rz')


@dataclass(frozen=True, eq=False)
class RobotPoses:
    """
    frames: tuple of str labels (P,); rotation_vectors, translations (P, 3) base -> tool;
    setup, base_frame, tool_frame: from a manifest's ``arm`` (None when the file has none).
    """

    frames: tuple
    rotation_vectors: np.ndarray
    translations: np.ndarray
    setup: str = None
    base_frame: str = None
    tool_frame: str = None

    def __post_init__(self):
        rv = np.asarray(self.rotation_vectors, float).reshape(-1, 3)
        tv = np.asarray(self.translations, float).reshape(-1, 3)
        if rv.shape != tv.shape or len(rv) != len(self.frames):
            raise InvalidInputError(
                f'robot poses need one rotation vector and translation per frame, got '
                f'{len(self.frames)} frames, {rv.shape}, {tv.shape}')
        if not (np.all(np.isfinite(rv)) and np.all(np.isfinite(tv))):
            raise InvalidInputError('robot poses contain NaN or inf')
        reach = float(np.abs(tv).max(initial=0.0))
        turn = float(np.linalg.norm(rv, axis=1).max(initial=0.0))
        if reach > MAX_REACH_M or turn > 2 * np.pi:
            raise InvalidInputError(
                f'robot poses reach {reach:.3g} m and turn by {np.degrees(turn):.4g} degrees; '
                f'expected translations within {MAX_REACH_M:g} m (metres, not millimetres) and '
                'rotation vectors of at most 360 degrees (radians)')
        labels = tuple(str(f) for f in self.frames)
        dup = sorted({f for f in labels if labels.count(f) > 1})
        if dup:
            raise InvalidInputError(f'robot poses name frame(s) {dup} more than once')
        object.__setattr__(self, 'frames', labels)
        object.__setattr__(self, 'rotation_vectors', rv)
        object.__setattr__(self, 'translations', tv)

    def match(self, names, indices=None):
        """
        Robot poses of the frames ``names`` (list of str or Path, in capture order).

        A label matches a frame by its name or their stems, or by the frame's index in the data set
        (``indices``, one int per name; None: no matching by index). Returns (positions (K,) in
        names that have a pose, rotation_vectors (K, 3), translations (K, 3)).
        """
        lookup = {f: k for k, f in enumerate(self.frames)}
        for k, f in enumerate(self.frames):
            lookup.setdefault(Path(f).stem, k)
        idx, rows = [], []
        for n, name in enumerate(names):
            p = Path(str(name))
            keys = (p.name, p.stem) + (() if indices is None else (str(int(indices[n])),))
            for key in keys:
                if key in lookup:
                    idx.append(n)
                    rows.append(lookup[key])
                    break
        rows = np.array(rows, dtype=int)
        return (np.array(idx, dtype=int), self.rotation_vectors[rows].reshape(-1, 3),
                self.translations[rows].reshape(-1, 3))


def _from_list(entries, where, arm=None):
    frames, rv, tv = [], [], []
    for n, e in enumerate(entries):
        if not isinstance(e, dict) or not {'frame', 'rotation_vector', 'translation_m'} <= set(e):
            raise InvalidInputError(
                f'{where}: robot_poses[{n}] must have frame, rotation_vector and translation_m, '
                f'got {e!r}')
        try:
            r = np.asarray(e['rotation_vector'], dtype=float)
            t = np.asarray(e['translation_m'], dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(f'{where}: robot_poses[{n}] must hold numbers, got '
                                    f'{shorten(repr(e))}') from None
        if r.shape != (3,) or t.shape != (3,):
            raise InvalidInputError(
                f'{where}: robot_poses[{n}] needs 3 numbers each, got {r.shape} and {t.shape}')
        frames.append(e['frame'])
        rv.append(r)
        tv.append(t)
    arm = arm if isinstance(arm, dict) else {}
    return RobotPoses(tuple(frames), np.array(rv).reshape(-1, 3), np.array(tv).reshape(-1, 3),
                      arm.get('setup'), arm.get('base_frame'), arm.get('tool_frame'))


def robot_poses_from_mapping(doc, where='robot poses'):
    """RobotPoses of a parsed YAML document (a list, or a mapping with ``robot_poses``)."""
    if isinstance(doc, dict):
        if 'robot_poses' not in doc:
            raise InvalidInputError(
                f'{where}: expected a robot_poses list, got keys {sorted(doc)}')
        return _from_list(doc['robot_poses'] or [], where, doc.get('arm'))
    if isinstance(doc, list):
        return _from_list(doc, where)
    raise InvalidInputError(f'{where}: expected a list of robot poses, got {type(doc).__name__}')


def _read_csv(path):
    text = read_bytes(path, 'robot pose table (CSV)', MAX_POSES_BYTES).decode('utf-8', 'replace')
    rows = list(csv.reader(io.StringIO(text, newline='')))
    if not rows:
        raise InvalidInputError(f'{path}: empty; expected the header {",".join(CSV_COLUMNS)}')
    header = [h.strip() for h in rows[0]]
    if tuple(header[:7]) != CSV_COLUMNS:
        raise InvalidInputError(
            f'{path}: header must start with {",".join(CSV_COLUMNS)}, got {",".join(header)}')
    frames, values = [], []
    for n, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        try:
            values.append([float(c) for c in row[1:7]])
        except ValueError:
            raise InvalidInputError(f'{path}:{n}: tx..rz must be numbers, got {row}') from None
        if len(values[-1]) != 6:
            raise InvalidInputError(f'{path}:{n}: expected 7 columns, got {len(row)}')
        frames.append(row[0].strip())
    if not frames:
        raise InvalidInputError(f'{path}: no robot poses')
    v = np.array(values)
    return RobotPoses(tuple(frames), v[:, 3:], v[:, :3])


def read_robot_poses(path):
    """Read robot poses from a CSV or YAML file (module docstring); returns RobotPoses."""
    path = Path(path)
    check_input_file(path, 'robot poses file')      # missing, a folder, a device, a FIFO
    if path.suffix.lower() == '.csv':
        return _read_csv(path)
    from lf_mpc_calib.io.yaml_file import read_yaml
    doc = read_yaml(path, 'robot poses file')
    return robot_poses_from_mapping(doc, str(path))


def write_robot_poses_csv(path, frames, rotation_vectors, translations):
    """Write the CSV format (header ``frame,tx,ty,tz,rx,ry,rz``)."""
    from lf_mpc_calib.io.atomic import open_atomically
    with open_atomically(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for name, r, t in zip(frames, np.reshape(rotation_vectors, (-1, 3)),
                              np.reshape(translations, (-1, 3))):
            w.writerow([str(name)] + [repr(float(x)) for x in (*t, *r)])
