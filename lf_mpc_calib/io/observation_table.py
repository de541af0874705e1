"""
The observation table as CSV: one row per ray, the interchange format between feature detection
and calibration (:class:`lf_mpc_calib.camera.observations.Observations` in memory).

Columns (header required): ``pose,point,X,Y,Z,i,j,u,v``, then optionally ``lens_type`` (the
micro-lens type of a multi-focus camera, an integer per ray); other extra columns are ignored.
"""

import csv
import io
from pathlib import Path
import warnings

import numpy as np

from lf_mpc_calib.camera.observations import COLUMNS, Observations
from lf_mpc_calib.errors import InvalidInputError, shorten

LENS_TYPE_COLUMN = 'lens_type'
MAX_TABLE_BYTES = 2 * 1024 ** 3
"""Largest observation table read: 2 GiB (about 20 million rays; 148 720 rays are 15 MB)."""


def observations_path(output):
    """The observation table written beside the calibration file: <stem>_observations.csv."""
    output = Path(output)
    return output.with_name(output.stem + '_observations.csv')


def write_observations(path, obs):
    """Write ``obs`` as CSV: ``pose,point,X,Y,Z,i,j,u,v`` (+ ``lens_type`` when it has one)."""
    typed = obs.lens_type is not None
    from lf_mpc_calib.io.atomic import open_atomically
    with open_atomically(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + ((LENS_TYPE_COLUMN,) if typed else ()))
        for k in range(len(obs)):
            w.writerow([int(obs.pose[k]), int(obs.point[k])]
                       + [repr(float(x)) for x in obs.board[k]]
                       + [repr(float(x)) for x in obs.ijuv[k]]
                       + ([int(obs.lens_type[k])] if typed else []))


def read_observations(path):
    """
    Read a CSV written by :func:`write_observations` (or any tool using its columns).

    The body is parsed at once by NumPy's C parser, from the file's bytes (no list of lines:
    a 148 720-ray table is parsed in ~0.11 s); only when that fails is the file split into rows
    and read again row by row, to name the row and column of the first bad cell. Refused: a
    missing path, a folder, a file that is not UTF-8 text, a bad header or cell, and rays
    listed twice (the same pose, point and (i, j)).
    """
    data, encoding = _read_text(path)
    if b'\r' in data and b'\n' not in data:
        data = data.replace(b'\r', b'\n')             # old Mac line ends
    first_line = data.split(b'\n', 1)[0].decode(encoding).strip('\r\ufeff')
    if not first_line.strip() and not data.strip():
        raise InvalidInputError(f'{path}: empty file, expected a header {",".join(COLUMNS)}')
    header = [h.strip() for h in next(csv.reader([first_line]), [])]
    if tuple(header[:len(COLUMNS)]) != COLUMNS:
        raise InvalidInputError(
            f'{path}: header must start with {",".join(COLUMNS)}, got '
            f'{shorten(",".join(header))}')
    typed = len(header) > len(COLUMNS) and header[len(COLUMNS)] == LENS_TYPE_COLUMN
    names = COLUMNS + ((LENS_TYPE_COLUMN,) if typed else ())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)   # 'no data': refused below
            a = np.loadtxt(io.BytesIO(data), delimiter=',', usecols=range(len(names)),
                           dtype=float, ndmin=2, comments=None, skiprows=1, encoding=encoding)
    except ValueError:
        a = _parse_rows(path, data.decode(encoding).splitlines(), names)
    a = a.reshape(-1, len(names))
    if not len(a):
        raise InvalidInputError(f'{path}: no rows after the header; expected one row per ray '
                                f'({",".join(names)})')
    _check_ids(path, a, names)
    pose, point = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64)
    # contiguous board and ijuv: the calibration gathers and reduces them many times
    ijuv = np.ascontiguousarray(a[:, 5:9])
    _refuse_repeated_rays(path, (pose, point, ijuv[:, 0], ijuv[:, 1]))
    return Observations(pose, point, np.ascontiguousarray(a[:, 2:5]), ijuv,
                        a[:, 9].astype(np.int64) if typed else None)


def _read_text(path):
    """The file's bytes and their encoding ('ascii' or 'utf-8'), or InvalidInputError saying
    why it cannot be read as an observation table."""
    from lf_mpc_calib.io.file_checks import file_kind, read_bytes
    if file_kind(path) is None:
        raise InvalidInputError(f'{path}: no such file, expected an observation table (CSV)')
    if file_kind(path) == 'a folder':
        raise InvalidInputError(f'{path}: is a folder, expected an observation table (CSV)')
    data = read_bytes(path, 'observation table (CSV)', MAX_TABLE_BYTES)
    encoding = 'ascii' if data.isascii() else 'utf-8'
    if encoding != 'ascii':
        try:
            data.decode('utf-8')
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f'{path}: not UTF-8 text (byte {exc.start}); expected an '
                                    f'observation table (CSV), got a binary or UTF-16 file'
                                    ) from None
    if b'\0' in data:
        raise InvalidInputError(f'{path}: holds NUL bytes; expected an observation table '
                                f'(CSV text), got a binary file')
    return data, encoding


def _parse_rows(path, lines, names):
    """The slow path: parse row by row and name the first bad cell (row, column, value)."""
    rows = []
    for line_no, row in enumerate(csv.reader(lines[1:]), start=2):
        if not row or not ''.join(row).strip():
            continue
        if len(row) < len(names):
            raise InvalidInputError(f'{path}:{line_no}: expected {len(names)} columns '
                                    f'({",".join(names)}), got {len(row)}')
        values = []
        for name, cell in zip(names, row):
            try:
                values.append(float(cell))
            except ValueError:
                raise InvalidInputError(f'{path}:{line_no}: column {name}: expected a number, '
                                        f'got {shorten(cell)!r}') from None
        rows.append(values)
    return np.array(rows, dtype=float).reshape(-1, len(names))


MAX_ID = 2 ** 53
"""Pose and point ids are whole numbers below this (exact in a float, far below 2^63)."""
MAX_LENS_TYPES = 64
"""lens_type ids are whole numbers from 0 to this - 1 (a stated cap: arrays have 1-3)."""


def _check_ids(path, a, names):
    """Refuse pose / point ids that are not whole numbers in [0, MAX_ID), lens types past
    MAX_LENS_TYPES (they would wrap or allocate without bound)."""
    limits = {'pose': MAX_ID, 'point': MAX_ID, LENS_TYPE_COLUMN: MAX_LENS_TYPES}
    for col, name in enumerate(names):
        if name not in limits:
            continue
        v = a[:, col]
        if v.min() >= 0 and v.max() < limits[name] and np.all(v == np.floor(v)):
            continue                        # (NaN fails the first test)
        bad = ~(np.isfinite(v) & (v >= 0) & (v < limits[name]) & (v == np.round(v)))
        if bad.any():
            k = int(np.argmax(bad))
            raise InvalidInputError(
                f'{path}: row {k + 2}: column {name}: expected a whole number from 0 to '
                f'{limits[name] - 1}, got {float(v[k]):g}')


def _refuse_repeated_rays(path, columns):
    """
    Refuse a table listing one ray (pose, point, i, j) twice: it would weigh it double.
    columns: (pose, point, i, j), each (N,).
    """
    if len(columns[0]) < 2:
        return
    counts = _dense_key_counts(columns)
    if counts is not None and counts.max() < 2:
        return          # the common case, without sorting; else the sort names a repeat
    key = np.column_stack(columns).astype(float)
    order = np.lexsort(key.T[::-1])
    ordered = key[order]
    repeated = np.all(ordered[1:] == ordered[:-1], axis=1)
    if repeated.any():
        p, q, i, j = key[int(order[np.argmax(repeated)])]
        raise InvalidInputError(
            f'{path}: {int(repeated.sum())} row(s) repeat a ray already listed (same pose, '
            f'point, i, j), e.g. pose {p:g} point {q:g} (i, j) = ({i:g}, {j:g}); expected each '
            f'ray once (remove the duplicated rows)')


def _dense_key_counts(columns):
    """
    How often each (pose, point, i, j) occurs, counted over their box of whole numbers:
    (n_keys,) counts, or None when a column is not whole numbers or the box is large (over
    DENSE_KEYS_PER_ROW times the rows; then the caller sorts). columns: 4 arrays (N,).
    """
    low = [c.min() for c in columns]
    span = [float(c.max()) - float(lo) + 1.0 for c, lo in zip(columns, low)]
    size = float(np.prod(span))
    if not size <= DENSE_KEYS_PER_ROW * len(columns[0]) + 1024:
        return None
    flat = 0
    for c, lo, n in zip(columns, low, span):
        offset = c - lo
        if offset.dtype.kind == 'f':
            if not np.all(offset == np.floor(offset)):
                return None
            offset = offset.astype(np.int64)
        flat = flat * int(n) + offset
    return np.bincount(flat, minlength=int(size))


DENSE_KEYS_PER_ROW = 8
"""Repeated rays are counted in a dense array when the ids' box holds at most this many keys
per row (a calibration table's poses, points and views fill most of theirs), else sorted."""
