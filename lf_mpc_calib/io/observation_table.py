"""
The observation table as CSV: one row per ray, the interchange format between feature detection
and calibration (:class:`lf_mpc_calib.camera.observations.Observations` in memory).

Columns (header required): ``pose,point,X,Y,Z,i,j,u,v``, then optionally ``lens_type`` (the
micro-lens type of a multi-focus camera, an integer per ray); other extra columns are ignored.
"""

import csv
from pathlib import Path

import numpy as np

from lf_mpc_calib.camera.observations import COLUMNS, Observations
from lf_mpc_calib.errors import InvalidInputError

LENS_TYPE_COLUMN = 'lens_type'


def observations_path(output):
    """The observation table written beside the calibration file: <stem>_observations.csv."""
    output = Path(output)
    return output.with_name(output.stem + '_observations.csv')


def write_observations(path, obs):
    """Write ``obs`` as CSV: ``pose,point,X,Y,Z,i,j,u,v`` (+ ``lens_type`` when it has one)."""
    typed = obs.lens_type is not None
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + ((LENS_TYPE_COLUMN,) if typed else ()))
        for k in range(len(obs)):
            w.writerow([int(obs.pose[k]), int(obs.point[k])]
                       + [repr(float(x)) for x in obs.board[k]]
                       + [repr(float(x)) for x in obs.ijuv[k]]
                       + ([int(obs.lens_type[k])] if typed else []))


def read_observations(path):
    """Read a CSV written by :func:`write_observations` (or any tool using its columns)."""
    with open(path, newline='') as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InvalidInputError(f'{path}: empty file, expected a header {COLUMNS}') from None
        if tuple(header[:len(COLUMNS)]) != COLUMNS:
            raise InvalidInputError(
                f'{path}: header must start with {",".join(COLUMNS)}, got {",".join(header)}')
        typed = len(header) > len(COLUMNS) and header[len(COLUMNS)] == LENS_TYPE_COLUMN
        width = len(COLUMNS) + int(typed)
        rows = []
        for line_no, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                rows.append([float(x) for x in row[:width]])
            except ValueError:
                raise InvalidInputError(
                    f'{path}:{line_no}: expected {len(COLUMNS)} numbers, got {row}') from None
            if len(rows[-1]) != width:
                raise InvalidInputError(
                    f'{path}:{line_no}: expected {width} columns, got {len(row)}')
    a = np.array(rows, dtype=float).reshape(-1, width)
    return Observations(a[:, 0], a[:, 1], a[:, 2:5], a[:, 5:9], a[:, 9] if typed else None)
