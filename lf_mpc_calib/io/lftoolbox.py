"""
The MATLAB Light Field Toolbox's calibration file (``CalInfo.json``, v0.5 - v0.5.3) in and out.

The toolbox's model (doda42/LFToolbox, SupportFunctions/LFCalRefine.m ``FindError``,
SupportFunctions/LFMapRectifiedToMeasured.m): the 5 x 5 matrix H maps the 1-based index
[i, j, k, l, 1] of a decoded sample (LF(j, i, l, k); i, j the view, k the column and l the row
of the pixel in it) to the ray [s, t, u, v, 1]: it crosses the plane z = 0 at (s, t) with
direction (u, v, 1) (a relative two-plane parametrisation, D = 1 m). The distortion
EstCamDistortionV = [k1 k2 k3 b1 b2] then acts on the direction:
d <- (d - b) (1 + k1 r^2 + k2 r^4 + k3 r^6) + b, r^2 = |d - b|^2 (v0.5 on: r^6; v0.4 had r^8,
LFToolbox commit 208912b). Poses EstCamPosesV are rows [t, rodrigues] board -> camera.

The MPC model is a special case of H (docs/file-formats.md "LFToolbox CalInfo.json"): with our
i = i_toolbox + o_i (o_i = -(N_i + 1)/2 on import), u = k - 1,
H11 = k_i, H13 = 0, H15 = k_i o_i, H31 = k_3 k_i, H33 = k_u, H35 = u_0 - k_u + k_3 k_i o_i
(likewise j, l, v), distortion [k_1, k_2, 0, 0, 0] when k_3 = k_4 = 0 (or k_1 = k_2 = 0).

Everything here is pure (arrays and dicts in and out) except :func:`read_calinfo` and
:func:`write_calinfo`, which read and write the named file.
"""

from dataclasses import dataclass
import json
import math
import re

import numpy as np

from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES
from lf_mpc_calib.errors import InvalidInputError, shorten

VERSION = re.compile(r'^v0\.5(?:\.[0-3])?$')
"""VersionStr values accepted: v0.5.0 - v0.5.3 (LFToolboxVersion.m at the tags v0.5.0 - v0.5.3).
v0.4 ('v0.4 released 12-Feb-2015') used an r^8 term where v0.5 has r^6."""
EXPORT_VERSION = 'v0.5.3'
CROSS_TERMS = ((0, 1), (0, 3), (1, 0), (1, 2), (2, 1), (2, 3), (3, 0), (3, 2))
"""Entries of H the toolbox never estimates (LFCalRefine ``IntrinsicsToOpt``): always 0."""
DEFAULT_MAX_RAY_ERROR_MM = 0.05
"""Default tolerance of the largest ray miss (mm) between z = 0 and the working distance: a
third of the 0.15 mm RMS ray error typical of a toolbox calibration (the shipped F01 file), so
that the conversion adds less than the calibration's own error to any ray."""
PIXELS_PER_SIDE = 41
"""Pixels sampled per view side (edges included) where the rays are compared."""
FIT_PIXELS_PER_SIDE = 11
"""Pixels per view side (edges included) the least-squares fits run on (then checked on
PIXELS_PER_SIDE)."""


@dataclass(frozen=True, eq=False)
class CalInfo:
    """The fields of a CalInfo.json that the MPC conversion uses (already checked)."""

    H: np.ndarray                  # (5, 5)
    distortion: np.ndarray         # (5,) [k1 k2 k3 b1 b2]
    lf_size: tuple                 # (Nj, Ni, Nl, Nk, C)
    poses: np.ndarray              # (P, 6) rows [t, rodrigues]
    version: str
    rmse_m: float                  # ReprojectionError.RMSE (NaN when absent)
    raw: dict                      # the whole document


MAX_VIEWS_PER_SIDE = 128
"""Most views per side of an LFSize (a Lytro decodes 15 x 15; every view is sampled when the
rays are compared, so 10^5 x 10^5 views asked for terabytes)."""


def _number(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f'{field} must be a number, got {shorten(repr(value), 80)}')
    if not math.isfinite(value):
        raise InvalidInputError(f'{field} must be finite, got {value}')
    return float(value)


def _get(d, path):
    node = d
    for n, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise InvalidInputError(f'CalInfo.json lacks the field {".".join(path[:n + 1])}')
        node = node[key]
    return node


def parse_calinfo(doc):
    """
    Check a parsed CalInfo.json and return a :class:`CalInfo`.

    Raises InvalidInputError naming the field and its value: a missing field, a VersionStr
    outside v0.5 - v0.5.3, an H that is not 5 x 5 finite numbers, has a last row other than
    [0 0 0 0 1], non-zero cross terms (not a light-field H of the toolbox) or a singular (i, k)
    or (j, l) block, a distortion of other than 5 finite numbers, a bad LFSize.
    """
    if not isinstance(doc, dict):
        raise InvalidInputError(f'CalInfo.json must be a JSON object, got {type(doc).__name__}')
    version = _get(doc, ('GeneratedByInfo', 'VersionStr'))
    if not isinstance(version, str) or not VERSION.match(version):
        raise InvalidInputError(
            f'GeneratedByInfo.VersionStr is {shorten(repr(version), 80)}; only LFToolbox '
            'v0.5.0 - v0.5.3 files are read (v0.4 had another radial distortion term)')
    rows = _get(doc, ('EstCamIntrinsicsH',))
    if not (isinstance(rows, list) and len(rows) == 5
            and all(isinstance(r, list) and len(r) == 5 for r in rows)):
        raise InvalidInputError(
            f'EstCamIntrinsicsH must be 5 x 5 numbers, got {shorten(repr(rows), 120)}')
    H = np.array([[_number(rows[a][b], f'EstCamIntrinsicsH[{a}][{b}]') for b in range(5)]
                  for a in range(5)])
    if not np.array_equal(H[4], [0, 0, 0, 0, 1]):
        raise InvalidInputError(
            f'EstCamIntrinsicsH[4] must be [0, 0, 0, 0, 1], got {H[4].tolist()}')
    for a, b in CROSS_TERMS:
        if H[a, b] != 0.0:
            raise InvalidInputError(
                f'EstCamIntrinsicsH[{a}][{b}] is {H[a, b]:g}: not a light-field H of the '
                'toolbox (LFCalRefine estimates no cross terms between i, k and j, l)')
    for name, (p, q) in (('(i, k)', (0, 2)), ('(j, l)', (1, 3))):
        block = H[np.ix_((p, q), (p, q))]
        det = float(np.linalg.det(block))
        if not abs(det) > 1e-12 * max(np.abs(block).max() ** 2, 1e-300) or H[q, q] == 0.0:
            raise InvalidInputError(
                f'EstCamIntrinsicsH is singular: its {name} block {block.tolist()} has '
                f'determinant {det:g} (and H[{q}][{q}] = {H[q, q]:g} must be non-zero)')
    dist = _get(doc, ('EstCamDistortionV',))
    if dist is None or dist == []:
        dist = [0.0] * 5
    if not isinstance(dist, list) or len(dist) != 5:
        raise InvalidInputError(
            f'EstCamDistortionV must be 5 numbers [k1 k2 k3 b1 b2], got '
            f'{shorten(repr(dist), 120)}')
    dist = np.array([_number(x, f'EstCamDistortionV[{n}]') for n, x in enumerate(dist)])
    size = _get(doc, ('CalOptions', 'LFSize'))
    if not (isinstance(size, list) and len(size) in (4, 5)
            and all(not isinstance(x, bool) and isinstance(x, (int, float)) and x == int(x)
                    and 1 <= x <= 100000 for x in size) and min(size[:4]) >= 2
            and max(size[:2]) <= MAX_VIEWS_PER_SIDE):
        raise InvalidInputError(
            f'CalOptions.LFSize must be [Nj Ni Nl Nk C] whole numbers >= 2 (views Nj, Ni at '
            f'most {MAX_VIEWS_PER_SIDE}, pixels at most 100000), got {shorten(repr(size), 80)}')
    poses = doc.get('EstCamPosesV') or []
    if isinstance(poses, list) and poses and not isinstance(poses[0], list):
        poses = [poses]                       # one pose: a JSON row, not a matrix
    if not (isinstance(poses, list) and all(isinstance(p, list) and len(p) == 6
                                            for p in poses)):
        raise InvalidInputError(
            f'EstCamPosesV must be rows of 6 numbers [t rodrigues], got '
            f'{shorten(repr(poses), 120)}')
    poses = np.array([[_number(x, f'EstCamPosesV[{n}][{m}]') for m, x in enumerate(p)]
                      for n, p in enumerate(poses)]).reshape(-1, 6)
    rmse = doc.get('ReprojectionError', {}) or {}
    rmse = rmse.get('RMSE', float('nan')) if isinstance(rmse, dict) else float('nan')
    rmse = float(rmse) if isinstance(rmse, (int, float)) and not isinstance(rmse, bool) \
        else float('nan')
    return CalInfo(H=H, distortion=dist, lf_size=tuple(int(x) for x in size), poses=poses,
                   version=version, rmse_m=rmse, raw=doc)


def read_calinfo(path):
    """Read and check a CalInfo.json (:func:`parse_calinfo`); InvalidInputError names why."""
    try:
        with open(path, 'rb') as f:
            text = f.read(10_000_001)
    except IsADirectoryError:
        raise InvalidInputError(f'{path} is a folder, not a CalInfo.json') from None
    if len(text) > 10_000_000:
        raise InvalidInputError(f'{path} is larger than 10 MB: not a CalInfo.json')
    try:
        doc = json.loads(text.decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInputError(f'{path} is not JSON: {shorten(exc, 200)}') from None
    except RecursionError:
        raise InvalidInputError(f'{path}: nested too deeply to be read as JSON; expected a '
                                'CalInfo.json') from None
    try:
        return parse_calinfo(doc)
    except InvalidInputError as exc:
        raise InvalidInputError(f'{path}: {exc}') from None


# ---- the two models' rays ---------------------------------------------------------------------
def toolbox_rays(H, distortion, index):
    """
    Rays (N, 4) [s, t, u, v] of the toolbox's model for 1-based indices (N, 4) [i, j, k, l]:
    H [i j k l 1]', then the direction distortion of LFCalRefine ``FindError``.
    """
    idx = np.column_stack([np.asarray(index, dtype=float), np.ones(len(index))])
    ray = idx @ np.asarray(H, dtype=float).T
    k1, k2, k3, b1, b2 = np.asarray(distortion, dtype=float)
    if np.any(np.asarray(distortion) != 0):
        d = ray[:, 2:4] - [b1, b2]
        r2 = np.sum(d * d, axis=1)
        ray[:, 2:4] = d * (1 + k1 * r2 + k2 * r2 ** 2 + k3 * r2 ** 3)[:, None] + [b1, b2]
    return ray[:, :4]


def sample_indices(lf_size, pixels=PIXELS_PER_SIDE):
    """1-based indices (N, 4) [i, j, k, l]: every view, ``pixels`` x ``pixels`` pixels of each
    (edges included) of a light field of LFSize [Nj Ni Nl Nk ...]."""
    nj, ni, nl, nk = lf_size[:4]
    ks = np.unique(np.round(np.linspace(1, nk, min(pixels, nk))))
    ls = np.unique(np.round(np.linspace(1, nl, min(pixels, nl))))
    g = np.meshgrid(np.arange(1, ni + 1), np.arange(1, nj + 1), ks, ls, indexing='ij')
    return np.column_stack([a.ravel() for a in g]).astype(float)


def _mpc_rays_toolbox_frame(model, shift, index, offsets):
    """Rays of ``model`` in the toolbox's frame (the MPC frame's origin at ``shift`` (3,)) at
    the toolbox indices (N, 4): our ijuv = (i + o_i, j + o_j, k - 1, l - 1)."""
    ijuv = np.column_stack([index[:, 0] + offsets[0], index[:, 1] + offsets[1],
                            index[:, 2] - 1, index[:, 3] - 1])
    r = model.rays(ijuv)
    tx, ty, tz = shift
    return np.column_stack([r[:, 0] + tx - r[:, 2] * tz, r[:, 1] + ty - r[:, 3] * tz,
                            r[:, 2], r[:, 3]])


def _misses(a, b, z_work):
    """Residuals (N, 4): the miss of ray b from ray a on z = 0 and on z = z_work (m)."""
    d0 = b[:, :2] - a[:, :2]
    return np.column_stack([d0, d0 + z_work * (b[:, 2:] - a[:, 2:])])


def ray_figures(reference, rays, z_work):
    """The ray residual of ``rays`` against ``reference`` (both (N, 4) in one frame): position
    on the reference plane z = 0 (mm), direction (mrad), miss at z_work (mm), RMS and max."""
    dp = np.linalg.norm(rays[:, :2] - reference[:, :2], axis=1) * 1e3
    dd = np.linalg.norm(rays[:, 2:] - reference[:, 2:], axis=1) * 1e3
    dw = np.linalg.norm(_misses(reference, rays, z_work)[:, 2:], axis=1) * 1e3

    def rms(x):
        return float(np.sqrt(np.mean(x * x)))
    return {'samples': int(len(dp)), 'working_distance_m': float(z_work),
            'position_rms_mm': rms(dp), 'position_max_mm': float(dp.max()),
            'direction_rms_mrad': rms(dd), 'direction_max_mrad': float(dd.max()),
            'miss_at_working_distance_rms_mm': rms(dw),
            'miss_at_working_distance_max_mm': float(dw.max()),
            'max_ray_error_mm': float(max(dp.max(), dw.max()))}


def _working_distance(poses_z):
    z = np.asarray(poses_z, dtype=float)
    z = z[np.isfinite(z) & (z > 0)]
    return float(np.mean(z)) if z.size else 1.0


# ---- import: the MPC model closest to H --------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ImportResult:
    """The MPC model fitted to a CalInfo's rays, its frame and the ray residual."""

    model: MPCModel
    shift: np.ndarray              # (3,) the MPC frame's origin in the toolbox's frame (m)
    figures: dict                  # ray_figures(...) plus the planes of H
    rotation_vectors: np.ndarray   # (P, 3) poses board -> MPC frame
    translations: np.ndarray       # (P, 3)


def closed_form_mpc(H, distortion, lf_size):
    """The MPC model and frame shift read off H (exact when H is an MPC, see the module)."""
    nj, ni = lf_size[0], lf_size[1]
    ci, cj = (ni + 1) / 2.0, (nj + 1) / 2.0
    tz = 0.5 * (-H[0, 2] / H[2, 2] - H[1, 3] / H[3, 3])
    k_i = H[0, 0] + tz * H[2, 0]
    k_j = H[1, 1] + tz * H[3, 1]
    model = MPCModel(k_i=k_i, k_j=k_j, k_u=H[2, 2], k_v=H[3, 3],
                     u_0=H[2, 0] * ci + H[2, 2] + H[2, 4], v_0=H[3, 1] * cj + H[3, 3] + H[3, 4],
                     k_1=distortion[0], k_2=distortion[1],
                     k_3=H[2, 0] / k_i, k_4=H[3, 1] / k_j)
    shift = np.array([H[0, 4] + tz * H[2, 4] + k_i * ci, H[1, 4] + tz * H[3, 4] + k_j * cj, tz])
    return model, shift


def import_calinfo(cal, *, max_ray_error_mm=DEFAULT_MAX_RAY_ERROR_MM):
    """
    The MPC model that reproduces the CalInfo's rays best (least squares on the misses at
    z = 0 and at the working distance, the mean depth of its poses), over every view and a
    PIXELS_PER_SIDE square grid of pixels of each. Raises InvalidInputError with the residual
    figures when the largest miss exceeds ``max_ray_error_mm``.
    """
    from scipy.optimize import least_squares
    if not (max_ray_error_mm > 0):
        raise InvalidInputError(f'max_ray_error_mm must be > 0, got {max_ray_error_mm}')
    lf_size = cal.lf_size
    offsets = (-(lf_size[1] + 1) / 2.0, -(lf_size[0] + 1) / 2.0)
    index = sample_indices(lf_size, FIT_PIXELS_PER_SIDE)
    ref = toolbox_rays(cal.H, cal.distortion, index)
    z_work = _working_distance(cal.poses[:, 2]) if len(cal.poses) else 1.0
    model0, shift0 = closed_form_mpc(cal.H, cal.distortion, lf_size)
    x0 = np.concatenate([model0.to_vector(), shift0])

    def unpack(x):
        return MPCModel.from_vector(x[:10]), x[10:]

    def residual(x):
        model, shift = unpack(x)
        return _misses(ref, _mpc_rays_toolbox_frame(model, shift, index, offsets),
                       z_work).ravel()

    with np.errstate(over='ignore', invalid='ignore'):
        r0 = residual(x0)
    if not np.all(np.isfinite(r0)):
        raise InvalidInputError(
            f'EstCamIntrinsicsH and EstCamDistortionV {np.round(cal.distortion, 6).tolist()} '
            f'give rays that are not finite over LFSize {list(cal.lf_size)}: expected a '
            'distortion the toolbox could have estimated')
    x = x0
    if np.max(np.abs(r0)) > 1e-13:
        fit = least_squares(residual, x0, method='trf', x_scale='jac', xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200)
        if fit.cost < 0.5 * r0 @ r0:
            x = fit.x
    model, shift = unpack(x)
    index = sample_indices(lf_size)
    figures = ray_figures(toolbox_rays(cal.H, cal.distortion, index),
                          _mpc_rays_toolbox_frame(model, shift, index, offsets), z_work)
    figures['plane_x_m'] = float(-cal.H[0, 2] / cal.H[2, 2])
    figures['plane_y_m'] = float(-cal.H[1, 3] / cal.H[3, 3])
    figures['tolerance_mm'] = float(max_ray_error_mm)
    if figures['max_ray_error_mm'] > max_ray_error_mm:
        raise InvalidInputError(
            'EstCamIntrinsicsH is not close to an MPC model: '
            f'{describe_import(figures)}; the largest miss '
            f'{figures["max_ray_error_mm"]:.3g} mm > --max-ray-error-mm {max_ray_error_mm:g}'
            + (f' (the toolbox\'s own RMS ray error: {cal.rmse_m * 1e3:.3g} mm)'
               if math.isfinite(cal.rmse_m) else ''))
    rv = cal.poses[:, 3:6].copy()
    tr = cal.poses[:, 0:3] - shift
    return ImportResult(model=model, shift=shift, figures=figures, rotation_vectors=rv,
                        translations=tr)


MPC_MISS = "the MPC rays miss H's"


def describe_import(f):
    """One line of the residual figures of an import or export."""
    text = (f'over {f["samples"]} samples {MPC_MISS} by {f["position_rms_mm"]:.3g} '
            f'mm RMS ({f["position_max_mm"]:.3g} max) on the reference plane, '
            f'{f["direction_rms_mrad"]:.3g} mrad RMS ({f["direction_max_mrad"]:.3g} max) in '
            f'direction and {f["miss_at_working_distance_rms_mm"]:.3g} mm RMS '
            f'({f["miss_at_working_distance_max_mm"]:.3g} max) at the working distance '
            f'{f["working_distance_m"]:.3g} m')
    if 'plane_x_m' in f:
        text += (f'; H\'s planes of the projection centres: z = {f["plane_x_m"] * 1e3:.4g} mm '
                 f'(i, k) and {f["plane_y_m"] * 1e3:.4g} mm (j, l), '
                 f'{abs(f["plane_x_m"] - f["plane_y_m"]) * 1e3:.3g} mm apart')
    return text


# ---- export: our model as H --------------------------------------------------------------------
def mpc_to_h(model, offsets):
    """H (5, 5) of ``model`` for toolbox indices i = our i - o_i (offsets (o_i, o_j)), u = k - 1:
    exact for the linear part (the module's formulas)."""
    oi, oj = offsets
    H = np.eye(5)
    H[0, 0], H[0, 4] = model.k_i, model.k_i * oi
    H[1, 1], H[1, 4] = model.k_j, model.k_j * oj
    H[2, 0], H[2, 2] = model.k_3 * model.k_i, model.k_u
    H[2, 4] = model.u_0 - model.k_u + model.k_3 * model.k_i * oi
    H[3, 1], H[3, 3] = model.k_4 * model.k_j, model.k_v
    H[3, 4] = model.v_0 - model.k_v + model.k_4 * model.k_j * oj
    return H


H_FREE = ((0, 0), (0, 2), (0, 4), (2, 0), (2, 2), (2, 4),
          (1, 1), (1, 3), (1, 4), (3, 1), (3, 3), (3, 4))


def export_h(model, lf_size, offsets, *, poses_z=(), max_ray_error_mm=DEFAULT_MAX_RAY_ERROR_MM):
    """
    (H, distortion [k1 k2 k3 b1 b2], figures, exact) of ``model``. Exact when the toolbox can
    represent it (no radial term, or no view shear k_3 = k_4 = 0): the toolbox distorts the
    sheared direction, Eq. 18 the unsheared one. Otherwise H and the distortion are fitted to
    our rays (least squares, as the import) and refused with the figures beyond the tolerance.
    """
    from scipy.optimize import least_squares
    H = mpc_to_h(model, offsets)
    dist = np.array([model.k_1, model.k_2, 0.0, 0.0, 0.0])
    index = sample_indices(lf_size, FIT_PIXELS_PER_SIDE)
    ours = _mpc_rays_toolbox_frame(model, (0.0, 0.0, 0.0), index, offsets)
    z_work = _working_distance(poses_z)
    exact = (model.k_1 == 0 and model.k_2 == 0) or (model.k_3 == 0 and model.k_4 == 0)
    if not exact:
        def unpack(x):
            h = np.eye(5)
            for (a, b), value in zip(H_FREE, x[:12]):
                h[a, b] = value
            return h, x[12:]

        def residual(x):
            h, d = unpack(x)
            return _misses(ours, toolbox_rays(h, d, index), z_work).ravel()

        x0 = np.concatenate([[H[a, b] for a, b in H_FREE], dist])
        fit = least_squares(residual, x0, method='trf', x_scale='jac', xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200)
        H, dist = unpack(fit.x if fit.cost <= 0.5 * residual(x0) @ residual(x0) else x0)
    index = sample_indices(lf_size)
    ours = _mpc_rays_toolbox_frame(model, (0.0, 0.0, 0.0), index, offsets)
    figures = ray_figures(ours, toolbox_rays(H, dist, index), z_work)
    figures['exact'] = bool(exact)
    figures['tolerance_mm'] = float(max_ray_error_mm)
    if not exact and figures['max_ray_error_mm'] > max_ray_error_mm:
        raise InvalidInputError(
            f'the toolbox cannot represent this model (radial terms k_1 = {model.k_1:g}, '
            f'k_2 = {model.k_2:g} with view shear k_3 = {model.k_3:g}, k_4 = {model.k_4:g}): '
            'the best H: ' + describe_import(figures).replace(MPC_MISS, 'its rays miss ours') +
            f'; the largest miss {figures["max_ray_error_mm"]:.3g} mm > '
            f'--max-ray-error-mm {max_ray_error_mm:g}')
    return H, dist, figures, exact


def calinfo_document(cal, *, time_str, max_ray_error_mm=DEFAULT_MAX_RAY_ERROR_MM, version=''):
    """
    (CalInfo.json document (dict), figures) of a :class:`CalibrationFile` of a conventional
    camera with views and image_size. Raises InvalidInputError naming what is missing.
    """
    if cal.camera_type != 'conventional':
        raise InvalidInputError(
            f'camera_type is {cal.camera_type!r}: the toolbox\'s H indexes decoded sub-aperture '
            'views; only a conventional calibration can be exported')
    if cal.views is None or cal.image_size is None:
        raise InvalidInputError(
            f'the calibration lacks {"views" if cal.views is None else "image_size"} (null): '
            'the toolbox\'s LFSize and indexing need both')
    i0, i1 = cal.views['i']
    j0, j1 = cal.views['j']
    ni, nj = int(round(i1 - i0)) + 1, int(round(j1 - j0)) + 1
    nk, nl = cal.image_size
    lf_size = [nj, ni, int(nl), int(nk), 4]
    if min(lf_size[:4]) < 2:
        raise InvalidInputError(f'views {cal.views} and image_size {cal.image_size} give '
                                f'LFSize {lf_size}; each side must be >= 2')
    offsets = (i0 - 1.0, j0 - 1.0)
    H, dist, figures, exact = export_h(cal.model, lf_size, offsets,
                                       poses_z=cal.translations[:, 2],
                                       max_ray_error_mm=max_ray_error_mm)
    poses = [[float(x) for x in np.concatenate([t, r])]
             for r, t in zip(cal.rotation_vectors, cal.translations)]
    rms = cal.errors.get('rms_ray_reprojection_mm', float('nan'))
    doc = {
        'GeneratedByInfo': {'mfilename': 'lf_mpc_calib export-calibration', 'time': time_str,
                            'VersionStr': EXPORT_VERSION},
        'EstCamIntrinsicsH': [[float(x) for x in row] for row in H],
        'EstCamDistortionV': [float(x) for x in dist],
        'EstCamPosesV': poses,
        'CamInfo': _cam_info(cal.camera_metadata),
        'CalOptions': {'LFSize': lf_size, 'NPoses': len(poses)},
        'ReprojectionError': {'RMSE': float(rms) * 1e-3 if math.isfinite(rms) else None},
        'LFMPCCalib': {
            'software_version': version,
            'note': 'H indexes the light field as lf_mpc_calib decodes it: LF(j, i, l, k) = '
                    'view (i + o_i, j + o_j), pixel (k - 1, l - 1); not the toolbox\'s own '
                    'decoding (dehexed, square ST), so no LensletGridModel is written',
            'view_offsets': [float(offsets[0]), float(offsets[1])],
            'model': {n: float(getattr(cal.model, n)) for n in PARAMETER_NAMES},
            'exact': bool(exact), 'ray_residual': figures},
    }
    return doc, figures


def _cam_info(meta):
    meta = meta or {}
    info = {}
    for ours, theirs in (('serial', 'CamSerial'), ('model', 'CamModel'),
                         ('focus_step', 'FocusStep'), ('zoom_step', 'ZoomStep')):
        if meta.get(ours) is not None:
            info[theirs] = meta[ours]
    return info


def write_calinfo(path, doc):
    """Write a CalInfo.json document through a temporary name (io.atomic)."""
    from lf_mpc_calib.io.atomic import write_text_atomically
    return write_text_atomically(path, json.dumps(doc, indent='\t', allow_nan=False) + '\n')
