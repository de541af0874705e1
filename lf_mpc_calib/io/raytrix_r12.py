"""
Real focused-camera observations of a Raytrix R12 (``shared/data/raytrix-r12a``) as an
observation table.

The dataset's CSV has one row per ray:
``frame, corner_id, board_x_m, board_y_m, lens_k, lens_l, lens_cx_px, lens_cy_px, u_px, v_px``
(the corner at raw pixel (u_px, v_px) inside micro-image (lens_k, lens_l) whose centre, detected
on a white image, is (lens_cx_px, lens_cy_px)). The conversion to the observation table follows
the focused-camera convention of :mod:`lf_mpc_calib.camera.model`:

- pose = frame number (0-3, 5-15; not renumbered), point = corner_id,
  (X, Y, Z) = (board_x_m, board_y_m, 0);
- (i, j) = the micro-image centre in raw pixels, absolute (the detected centre, or with
  ``centres='grid'`` the node of the fitted hexagonal grid of the metadata);
- (u, v) = the corner's raw pixel minus that centre.

So a reprojection error in (u, v) is an error in raw pixels. Micro-lens types (three focal
lengths) follow the metadata's formula ``((l mod (I-1)) + k) mod I``.

The observation table carries the lens types, so :func:`lf_mpc_calib.calibration.calibrate`
estimates the per-lens-type terms (:mod:`lf_mpc_calib.calibration.type_terms`) jointly.
"""

from dataclasses import dataclass
import io
import json
from pathlib import Path

import numpy as np

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.file_checks import read_bytes
from lf_mpc_calib.io.observation_table import MAX_TABLE_BYTES
from lf_mpc_calib.lenslet.grid import LensletGrid

R12_COLUMNS = ('frame', 'corner_id', 'board_x_m', 'board_y_m', 'lens_k', 'lens_l',
               'lens_cx_px', 'lens_cy_px', 'u_px', 'v_px')
CENTRES = ('detected', 'grid')
MAX_META_BYTES = 1024 ** 2       # the metadata JSON is a few kB


@dataclass(frozen=True, eq=False)
class R12Dataset:
    """
    The R12 rays with what the observation table does not hold.

    observations Observations (N rows, with its lens_type); lens_kl (N, 2) int micro-image
    index (k, l); lens_type (N,) int in 0..n_types-1; corner_px (N, 2) corner in raw pixels
    (absolute);
    image_size (width, height); lenslet_grid LensletGrid or None (from the metadata).
    """

    observations: Observations
    lens_kl: np.ndarray
    lens_type: np.ndarray
    corner_px: np.ndarray
    image_size: tuple
    lenslet_grid: LensletGrid = None


def lens_type(kl, n_types=3):
    """Micro-lens type (N,) of micro-image indices kl (N, 2): ((l mod (I-1)) + k) mod I."""
    kl = np.asarray(kl, dtype=np.int64).reshape(-1, 2)
    if n_types < 2:
        raise InvalidInputError(f'n_types must be >= 2, got {n_types}')
    return ((kl[:, 1] % (n_types - 1)) + kl[:, 0]) % n_types


def lenslet_grid_from_meta(meta):
    """
    Return the LensletGrid of the metadata's micro-image grid (``micro_images`` entry).

    The metadata's node formula c(k, l) = R [p_x (k + 0.5 [l even]), p_y l sin 60°] + t maps to
    origin = t, pitch = p_x, row_spacing = p_y sin 60°, rotation = angle of R's first column,
    hex_parity = 1 (even rows shifted).
    """
    mi = meta['micro_images']
    rows = np.array([[float(x) for x in r] for r in mi['pose_rotation_json']])
    rot = rows.T
    px, py = (float(x) for x in mi['pitch_px'])
    sensor = meta['sensor']
    return LensletGrid('hex', px, py * np.sin(np.pi / 3), float(np.arctan2(rot[1, 0], rot[0, 0])),
                       np.array(mi['pose_translation_px'], dtype=float),
                       (int(mi['width']), int(mi['height'])),
                       (int(sensor['width_px']), int(sensor['height_px'])), hex_parity=1)


def read_r12(csv_path, *, meta_path=None, centres='detected'):
    """
    Read the R12 CSV (and its ``r12a_meta.json``, by default beside it) into an R12Dataset.

    centres: 'detected' uses the micro-image centres of the CSV as (i, j); 'grid' the nodes of
    the metadata's regular hexagonal grid.
    """
    if centres not in CENTRES:
        raise InvalidInputError(f'centres must be one of {CENTRES}, got {centres!r}')
    csv_path = Path(csv_path)
    text = read_bytes(csv_path, 'R12 observation table', MAX_TABLE_BYTES).decode('utf-8', 'replace')
    header = [h.strip() for h in text.split('\n', 1)[0].split(',')]
    if tuple(header[:len(R12_COLUMNS)]) != R12_COLUMNS:
        raise InvalidInputError(
            f'{csv_path}: header must start with {",".join(R12_COLUMNS)}, got {",".join(header)}')
    a = np.loadtxt(io.StringIO(text), delimiter=',', skiprows=1, ndmin=2)
    if a.shape[1] < len(R12_COLUMNS):
        raise InvalidInputError(
            f'{csv_path}: expected {len(R12_COLUMNS)} columns, got {a.shape[1]}')
    meta_path = csv_path.with_name('r12a_meta.json') if meta_path is None else Path(meta_path)
    meta = (json.loads(read_bytes(meta_path, 'R12 metadata', MAX_META_BYTES))
            if meta_path.exists() else None)
    grid = lenslet_grid_from_meta(meta) if meta is not None else None
    n_types = int(meta['micro_lenses']['types_I']) if meta is not None else 3
    image_size = ((int(meta['sensor']['width_px']), int(meta['sensor']['height_px']))
                  if meta is not None else (4080, 3068))
    kl = a[:, 4:6].astype(np.int64)
    if centres == 'grid':
        if grid is None:
            raise InvalidInputError(f"centres='grid' needs the metadata file {meta_path}")
        centre = grid.centres_of(kl)
    else:
        centre = a[:, 6:8]
    corner = a[:, 8:10]
    board = np.column_stack([a[:, 2], a[:, 3], np.zeros(len(a))])
    types = lens_type(kl, n_types)
    obs = Observations(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), board,
                       np.column_stack([centre, corner - centre]), types)
    return R12Dataset(obs, kl, types, corner, image_size, grid)


def read_r12_observations(csv_path, *, centres='detected'):
    """Return only the observation table of :func:`read_r12`."""
    return read_r12(csv_path, centres=centres).observations
