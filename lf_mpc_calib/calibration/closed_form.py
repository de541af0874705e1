"""
Closed-form initial solution of the MPC intrinsics and the board poses (paper Sec. 4.1).

Two methods:

``'exact'`` (default, NOTES §2-3)
    Per pose, with X~ = (X_w, Y_w, 1) on the planar board, the rays satisfy
    a.X~ - u (c.X~) - i (e.X~) = 0 with e = e_3 + lambda c (the focus shear
    lambda = k_3 k_i / k_u); a homogeneous 9-unknown SVD per pose gives lambda from the tilted
    poses. With u' = u + lambda i the x-equations a.X~ - u' (c.X~) = i (and the y-equations
    b.X~ - v' (d.X~) = j, v' = v + nu j) are ordinary linear least squares whose right-hand
    side fixes the scale. d = rho c for a global rho = (k_v/k_j)/(k_u/k_i); the orthonormality
    of the first two rotation columns r_m = K g_m, g_m = (a_m, b_m, c_m), gives three absolute
    linear equations per pose in the five entries of B = K^T K, K = [[k_i, 0, u_0 alpha],
    [0, k_j, v_0 alpha], [0, 0, alpha]], alpha = k_i/k_u. All ten parameters but k_1, k_2
    (zero) follow without the paper's assumption k_u/k_i = k_v/k_j, exactly on noise-free data.
``'paper'``
    The algorithm as printed: a 12-entry H per pose (Eq. 14), B up to scale from Eq. 15,
    Cholesky, the intrinsics from ratios (Eq. 16, with the Cholesky factor as the estimate of
    A^-1, NOTES §2), the extrinsics with t_z > 0 (Eq. 17) and k_i, k_j from Eq. 18. Exact only
    when k_u/k_i = k_v/k_j and k_3 = k_4 = 0; kept as the reference.

Sign conventions. A planar board and the rays it is seen by do not fix three signs: the same
data is fitted equally well after the change of camera frame diag(s1, s2, s3) (k_i -> s1 k_i,
k_j -> s2 k_j, k_u -> s1 s3 k_u, k_v -> s2 s3 k_v, t_z -> s3 t_z, k_3, k_4 -> s3 k_3, k_4). We fix
them by three rules: (i, u) both run along +x (k_i > 0, k_u > 0; the model's convention that i
and u count image columns and x points right), and the board is seen with its z axis (into the
board, OpenCV convention) along the camera's +z (mean r_33 > 0). Everything else comes out of the
data: the sign of t_z (negative for focused cameras whose MPC frame is the conjugate inside the
camera), and which way j and v run (k_j, k_v).
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError, shorten
from lf_mpc_calib.camera.rotations import rotation_vector
from lf_mpc_calib.camera.model import MPCModel
from lf_mpc_calib.camera.observations import Observations

METHODS = ('exact', 'paper')

#: Smallest accepted ratio of the smallest to the largest singular value of the (column
#: normalised) stacked system for B: below it the pose set does not determine the intrinsics.
DEGENERACY_RCOND = 1e-7
#: The same for the paper's homogeneous system (rank 4 needed), whose per-pose H is only
#: approximate when k_u/k_i != k_v/k_j, so that parallel poses leave ~1e-5 rather than ~1e-15.
PAPER_DEGENERACY_RCOND = 1e-3


@dataclass(frozen=True, eq=False)
class InitialSolution:
    """
    The closed-form estimate: model and board poses.

    model: MPCModel (k_1 = k_2 = 0; k_3, k_4 from the shear estimate for 'exact').
    rotation_vectors (P, 3), translations (P, 3): board -> camera, X_c = R(w) X_b + t.
    pose_ids (P,): the observation table's pose index of each row.
    method: 'exact' or 'paper'. conditioning: smallest / largest singular value of the
    normalised stacked system for B (small: close to a degenerate pose set).
    """

    model: MPCModel
    rotation_vectors: np.ndarray
    translations: np.ndarray
    pose_ids: np.ndarray
    method: str = 'exact'
    conditioning: float = float('nan')


@dataclass(frozen=True, eq=False)
class _Grouped:
    """Observations sorted by pose: ``order`` (N,) permutation, ``bounds`` (P+1,) slices."""

    pose_ids: np.ndarray
    order: np.ndarray
    bounds: np.ndarray


def group_by_pose(obs):
    """Return the pose ids (P,), a stable order (N,) sorting rows by pose, and bounds (P+1,)."""
    order = np.argsort(obs.pose, kind='stable')
    sorted_pose = obs.pose[order]
    ids, starts = np.unique(sorted_pose, return_index=True)
    bounds = np.append(starts, len(order))
    return _Grouped(ids, order, bounds)


MAX_ABS_PIXEL = 1e7     # |i|, |j|, |u|, |v| beyond this are no camera's indices or pixels
MIN_PIXEL_SPAN = 1e-6  # u or v spanning no more than this over all rays measure nothing
MAX_ABS_BOARD_M = 1e4   # board coordinates beyond this are no calibration target's, in metres


def _refuse_absurd_values(obs):
    """Refuse values no camera produces before they reach the eigen-solves (where one huge u
    gave numpy's 'Eigenvalues did not converge' instead of a reason)."""
    for name, values, limit, unit in (('i, j, u, v', obs.ijuv, MAX_ABS_PIXEL, 'px'),
                                      ('X, Y, Z', obs.board, MAX_ABS_BOARD_M, 'm')):
        worst = float(np.abs(values).max())
        if not worst <= limit:
            row = int(np.argmax(np.abs(values).max(axis=1)))
            raise InvalidInputError(
                f'{name} reach {worst:.3g} {unit} (ray {row} counted from 0, pose '
                f'{obs.pose[row]}, point {obs.point[row]}); expected at most {limit:g} {unit} '
                f'(check the units and columns of the table)')


def validate_observations(obs, *, planar=False):
    """
    Check an observation table for calibration; raise InvalidInputError naming the problem.

    Needs >= 2 poses; each with >= 2 distinct views (i, j) and >= 3 non-collinear board
    points; ``planar`` also requires Z = 0 (the closed form's planar board).
    Returns the pose grouping (:func:`group_by_pose`).
    """
    if not isinstance(obs, Observations):
        raise InvalidInputError(
            f'obs must be an lf_mpc_calib.camera.observations.Observations, got '
            f'{type(obs).__name__}')
    if len(obs) == 0:
        raise InvalidInputError('obs is empty: expected rays of >= 2 board poses')
    grouped = group_by_pose(obs)
    if len(grouped.pose_ids) < 2:
        raise InvalidInputError(
            f'calibration needs >= 2 board poses, got {len(grouped.pose_ids)} '
            f'(pose ids {shorten(grouped.pose_ids.tolist())})')
    _refuse_absurd_values(obs)
    for col, name in ((2, 'u'), (3, 'v')):
        if np.ptp(obs.ijuv[:, col]) <= MIN_PIXEL_SPAN:
            raise InvalidInputError(
                f'every ray has {name} = {obs.ijuv[0, col]:g} px (spanning '
                f'{np.ptp(obs.ijuv[:, col]):.3g} px): expected the pixels to vary across the '
                f'image (one pixel for every ray measures nothing; the closed form\'s system '
                f'would be singular)')
    scale = max(float(np.abs(obs.board).max()), 1e-300)
    if planar and np.abs(obs.board[:, 2]).max() > 1e-9 * scale:
        raise InvalidInputError(
            'the closed form needs a planar board with Z = 0 in the board frame, got |Z| up to '
            f'{np.abs(obs.board[:, 2]).max():.3g} m')
    board = obs.board[grouped.order]
    ij = obs.ijuv[grouped.order, :2]
    for k, p in enumerate(grouped.pose_ids):
        sl = slice(grouped.bounds[k], grouped.bounds[k + 1])
        if not np.any(ij[sl] != ij[sl.start]):
            raise InvalidInputError(
                f'pose {p} is seen in 1 view (i, j) = {tuple(ij[sl.start])}; expected >= 2 '
                'distinct views')
        pts = board[sl]
        centred = pts - np.ones(len(pts)) @ pts / len(pts)    # the mean by BLAS: faster
        ev = np.linalg.eigvalsh(centred.T @ centred)          # ascending
        if not ev[1] > 1e-12 * max(ev[2], 1e-300):
            n_distinct = 1 if ev[2] <= 0 else '>= 2'
            raise InvalidInputError(
                f'pose {p} has board points all on one line ({n_distinct} distinct, '
                f'{sl.stop - sl.start} rows); expected >= 3 non-collinear points')
    return grouped


def _null_vector(a):
    """
    Unit vector minimising |a n| (columns normalised first); returns n and singular values.

    Tall systems (the per-pose ray equations) go through the normal equations a^T a (one
    matrix product instead of a QR of 10^4 rows); the column normalisation keeps their
    condition small enough for noise-free data to be solved to ~1e-12.
    """
    if a.shape[0] > 4 * a.shape[1]:
        ata = a.T @ a
        norms = np.sqrt(np.diag(ata))
        norms[norms == 0] = 1.0
        w, v = np.linalg.eigh(ata / np.outer(norms, norms))
        n = v[:, 0] / norms
        sv = np.sqrt(np.maximum(w[::-1], 0.0))
    else:
        norms = np.linalg.norm(a, axis=0)
        norms[norms == 0] = 1.0
        _, sv, vt = np.linalg.svd(a / norms)
        n = vt[-1] / norms
    return n / np.linalg.norm(n), sv


def _lstsq(a, b):
    """Least squares with column normalisation (the unknowns differ by orders of magnitude)."""
    if a.shape[0] > 4 * a.shape[1]:
        ata = a.T @ a
        norms = np.sqrt(np.diag(ata))
        norms[norms == 0] = 1.0
        x = np.linalg.solve(ata / np.outer(norms, norms), (a.T @ b) / norms)
    else:
        norms = np.linalg.norm(a, axis=0)
        norms[norms == 0] = 1.0
        x, *_ = np.linalg.lstsq(a / norms, b, rcond=None)
    return x / norms


def _b_entries(g, h):
    """Coefficients (5,) of b = (b11, b13, b22, b23, b33) in g^T B h (B symmetric, b12 = 0)."""
    return np.array([g[0] * h[0], g[0] * h[2] + g[2] * h[0], g[1] * h[1],
                     g[1] * h[2] + g[2] * h[1], g[2] * h[2]])


def _check_conditioning(a, what):
    norms = np.linalg.norm(a, axis=0)
    if np.any(norms == 0):
        raise DegenerateConfigurationError(
            f'{what}: a column of the stacked system is zero; the poses do not determine B '
            '(e.g. all boards parallel to the view plane)')
    sv = np.linalg.svd(a / norms, compute_uv=False)
    rc = float(sv[-1] / sv[0])
    if not rc > DEGENERACY_RCOND:
        raise DegenerateConfigurationError(
            f'{what}: the board poses do not determine the intrinsics (singular values of the '
            f'normalised system for B: smallest/largest = {rc:.2e} <= {DEGENERACY_RCOND:.0e}); '
            'use poses tilted about different axes, not all parallel')
    return rc, sv


def sign_change(model, rotations, translations, signs):
    """
    Apply the camera-frame change diag(s1, s2, s3) to a model and poses (module docstring).

    rotations (P, 3, 3), translations (P, 3); returns (model, rotations, translations). The
    third rotation column is flipped with det(S) so that R stays a rotation; a planar board's
    points (Z = 0) map exactly.
    """
    s1, s2, s3 = (float(v) for v in signs)
    m = model.replace(k_i=s1 * model.k_i, k_j=s2 * model.k_j, k_u=s1 * s3 * model.k_u,
                      k_v=s2 * s3 * model.k_v, u_0=s1 * s3 * model.u_0,
                      v_0=s2 * s3 * model.v_0, k_3=s3 * model.k_3, k_4=s3 * model.k_4)
    s = np.array([s1, s2, s3])
    r = s[None, :, None] * rotations
    r[:, :, 2] *= s1 * s2 * s3
    return m, r, translations * s[None, :]


def canonical_signs(model, rotations, translations):
    """Choose the frame signs of the module docstring: k_i > 0, k_u > 0, mean r_33 > 0."""
    s1 = 1.0 if model.k_i > 0 else -1.0
    s3 = s1 * (1.0 if model.k_u > 0 else -1.0)
    r33 = float(np.sum(rotations[:, 2, 2]))
    s2 = s1 * (1.0 if r33 >= 0 else -1.0)
    return sign_change(model, rotations, translations, (s1, s2, s3))


def canonical_frame_signs(model):
    """(s1, s2, s3): the camera-frame change (:func:`sign_change`) that takes ``model``'s frame
    to the one a calibration reports (k_i > 0, k_u > 0, boards facing +z kept facing it: s2 =
    s1). Its own inverse: poses in the calibrated frame map back with the same signs."""
    s1 = 1.0 if model.k_i > 0 else -1.0
    return s1, s1, s1 * (1.0 if model.k_u > 0 else -1.0)


def aligned_truth(truth, estimate, rotations, translations):
    """
    Express the ground truth in the calibrated camera frame.

    A planar board leaves the camera frame's axis signs to convention
    (:func:`sign_change`); this applies to ``truth`` and
    its poses (rotations (P, 3, 3), translations (P, 3)) the sign change that makes k_i, k_j,
    k_u agree in sign with ``estimate``. Returns (model, rotations, translations).
    """
    s1 = np.sign(estimate.k_i * truth.k_i)
    s2 = np.sign(estimate.k_j * truth.k_j)
    s3 = np.sign(estimate.k_u * truth.k_u) * s1
    return sign_change(truth, rotations, translations, (s1, s2, s3))


def _nearest_rotation(r1, r2):
    """Rotations (P, 3, 3) nearest to [r1, r2, r1 x r2] for column estimates (P, 3)."""
    q = np.stack([r1, r2, np.cross(r1, r2)], axis=2)
    u, _, vt = np.linalg.svd(q)
    d = np.sign(np.linalg.det(u @ vt))
    u[:, :, 2] *= d[:, None]
    return u @ vt


def _pose_blocks(obs, grouped):
    """Yield per pose (X~ (n, 3), i, j, u, v (n,)) in pose order."""
    board = obs.board[grouped.order]
    ijuv = obs.ijuv[grouped.order]
    for k in range(len(grouped.pose_ids)):
        sl = slice(grouped.bounds[k], grouped.bounds[k + 1])
        xt = np.column_stack([board[sl, 0], board[sl, 1], np.ones(sl.stop - sl.start)])
        yield xt, ijuv[sl, 0], ijuv[sl, 1], ijuv[sl, 2], ijuv[sl, 3]


def _shear(xt, idx, pix):
    """Per pose: numerator and denominator of the shear lambda (NOTES §3) from one axis."""
    a = np.empty((len(xt), 9))
    a[:, 0:3] = xt
    np.multiply(xt, -pix[:, None], out=a[:, 3:6])
    np.multiply(xt, -idx[:, None], out=a[:, 6:9])
    n, _ = _null_vector(a)
    c, e = n[3:6], n[6:9]
    return float(e[:2] @ c[:2]), float(c[:2] @ c[:2])


def _exact(obs, grouped):
    blocks = list(_pose_blocks(obs, grouped))
    # 1. the focus shear lambda (x) and nu (y), read off the tilted poses
    num = np.zeros(2)
    den = np.zeros(2)
    for xt, i, j, u, v in blocks:
        for axis, (idx, pix) in enumerate(((i, u), (j, v))):
            nu_, de_ = _shear(xt, idx, pix)
            num[axis] += nu_
            den[axis] += de_
    lam, nu = (num / den if np.all(den > 0) else np.zeros(2))
    # 2. per pose the two linear systems with absolute scale
    abcd = []
    for xt, i, j, u, v in blocks:
        up = u + lam * i
        vp = v + nu * j
        design = np.empty((len(xt), 6))
        design[:, :3] = xt
        np.multiply(xt, -up[:, None], out=design[:, 3:])
        ac = _lstsq(design, i)
        np.multiply(xt, -vp[:, None], out=design[:, 3:])
        bd = _lstsq(design, j)
        abcd.append((ac[:3], bd[:3], ac[3:], bd[3:]))
    a = np.array([q[0] for q in abcd])
    b = np.array([q[1] for q in abcd])
    c = np.array([q[2] for q in abcd])
    d = np.array([q[3] for q in abcd])
    cc, cd = float(np.sum(c * c)), float(np.sum(c * d))
    if not (cc > 0 and cd != 0 and np.isfinite(cd / cc)):
        raise DegenerateConfigurationError(
            f"closed form 'exact': the poses give no depth term (sum c.c = {cc:.3g}, c.d = "
            f'{cd:.3g}): the pixels do not change with the board points\' depth; add poses at '
            'other distances and tilts')
    rho = cd / cc
    c = 0.5 * (c + d / rho)
    # 3. B from orthonormality: g1.B.g2 = 0, g1.B.g1 = 1, g2.B.g2 = 1 per pose
    rows, rhs = [], []
    for p in range(len(abcd)):
        g1 = np.array([a[p, 0], b[p, 0], c[p, 0]])
        g2 = np.array([a[p, 1], b[p, 1], c[p, 1]])
        rows += [_b_entries(g1, g2), _b_entries(g1, g1), _b_entries(g2, g2)]
        rhs += [0.0, 1.0, 1.0]
    m = np.array(rows)
    rc, sv = _check_conditioning(m, "closed form 'exact'")
    rhs = np.array(rhs)
    bvec = _lstsq(m, rhs)
    # noise can hide a degenerate set from the singular values alone: compare the spread
    # the residuals imply along the weakest direction with the solution itself
    norms = np.linalg.norm(m, axis=0)
    dof = m.shape[0] - m.shape[1]
    if dof > 0:
        spread = np.linalg.norm(m @ bvec - rhs) / np.sqrt(dof) / sv[-1]
        if spread > 0.5 * np.linalg.norm(bvec * norms):
            raise DegenerateConfigurationError(
                "closed form 'exact': the board poses do not determine the intrinsics above "
                f'the noise (weakest direction of B uncertain by '
                f'{spread / np.linalg.norm(bvec * norms):.0%}); '
                'use poses tilted about different axes, not all parallel')
    b11, b13, b22, b23, b33 = bvec
    if not (b11 > 0 and b22 > 0):
        raise DegenerateConfigurationError(
            f'closed form: B is not positive definite (b11={b11:.3g}, b22={b22:.3g}); the '
            'poses do not determine the intrinsics')
    k_i, k_j = np.sqrt(b11), np.sqrt(b22)
    ua, va = b13 / k_i, b23 / k_j
    alpha2 = b33 - ua * ua - va * va
    if not alpha2 > 0:
        raise DegenerateConfigurationError(
            f'closed form: B is not positive definite (alpha^2 = {alpha2:.3g}); the poses do '
            'not determine the intrinsics')
    alpha = np.sqrt(alpha2)
    model = MPCModel(k_i=k_i, k_j=k_j, k_u=k_i / alpha, k_v=k_j * rho / alpha,
                     u_0=ua / alpha, v_0=va / alpha,
                     k_3=lam / alpha, k_4=nu * rho / alpha)
    kmat = np.array([[k_i, 0.0, ua], [0.0, k_j, va], [0.0, 0.0, alpha]])
    g = np.stack([a, b, c], axis=1)                       # (P, 3 rows a/b/c, 3 components)
    cols = np.einsum('rk,pkm->pmr', kmat, g)              # (P, 3 columns, 3): K g_m
    rot = _nearest_rotation(cols[:, 0], cols[:, 1])
    return model, rot, cols[:, 2], rc


def _paper(obs, grouped):
    hs = []
    for xt, i, j, u, v in _pose_blocks(obs, grouped):
        z = np.zeros_like(xt)
        ax = np.hstack([xt, z, -u[:, None] * xt, -i[:, None] * xt])
        ay = np.hstack([z, xt, -v[:, None] * xt, -j[:, None] * xt])
        h, _ = _null_vector(np.vstack([ax, ay]))
        h = h.reshape(4, 3)
        if h[3, 2] == 0:
            raise DegenerateConfigurationError('closed form \'paper\': h_43 = 0 in a pose')
        hs.append(h / h[3, 2])
    hs = np.array(hs)                                     # (P, 4, 3)
    rows = []
    for h in hs:
        g1, g2 = h[:3, 0], h[:3, 1]
        rows += [_b_entries(g1, g2), _b_entries(g1, g1) - _b_entries(g2, g2)]
    m = np.array(rows)
    bvec, sv = _null_vector(m)
    # homogeneous: B is determined (up to scale) when the rank is 4
    rc = float(sv[3] / sv[0]) if sv.size >= 4 else 0.0
    if not rc > PAPER_DEGENERACY_RCOND:
        raise DegenerateConfigurationError(
            "closed form 'paper': the board poses do not determine B (second smallest / "
            f'largest singular value {rc:.2e} <= {PAPER_DEGENERACY_RCOND:.0e}); use poses tilted '
            'about different axes, not all parallel')
    if bvec[0] < 0:
        bvec = -bvec
    b11, b13, b22, b23, b33 = bvec
    bmat = np.array([[b11, 0.0, b13], [0.0, b22, b23], [b13, b23, b33]])
    try:
        upper = np.linalg.cholesky(bmat).T
    except np.linalg.LinAlgError:
        raise DegenerateConfigurationError(
            "closed form 'paper': B is not positive definite; the poses do not determine "
            'the intrinsics') from None
    k_u = upper[0, 0] / upper[2, 2]
    k_v = upper[1, 1] / upper[2, 2]
    u_0 = upper[0, 2] / upper[2, 2]
    v_0 = upper[1, 2] / upper[2, 2]
    cols = np.einsum('rk,pkm->pmr', upper, hs[:, :3, :])  # (P, 3, 3): U g_m
    lam = 0.5 * (np.linalg.norm(cols[:, 0], axis=1) + np.linalg.norm(cols[:, 1], axis=1))
    lam = lam * np.where(cols[:, 2, 2] < 0, -1.0, 1.0)     # alpha: t_z > 0 (Eq. 17)
    cols = cols / lam[:, None, None]
    rot = _nearest_rotation(cols[:, 0], cols[:, 1])
    trans = cols[:, 2]
    # k_i, k_j from Eq. 18: i k_i = X_c - x Z_c, j k_j = Y_c - y Z_c
    num = np.zeros(2)
    den = np.zeros(2)
    for k, (xt, i, j, u, v) in enumerate(_pose_blocks(obs, grouped)):
        pc = xt[:, :2] @ rot[k][:, :2].T + trans[k]
        num += [np.sum(i * (pc[:, 0] - (k_u * u + u_0) * pc[:, 2])),
                np.sum(j * (pc[:, 1] - (k_v * v + v_0) * pc[:, 2]))]
        den += [np.sum(i * i), np.sum(j * j)]
    for name, d in zip('ij', den):
        if not d > 0:
            raise DegenerateConfigurationError(
                f"closed form 'paper': every ray has {name} = 0 (the views lie on one line): "
                f'k_{name} is not determined; use views off that line too')
    k_i, k_j = num / den
    model = MPCModel(k_i=k_i, k_j=k_j, k_u=k_u, k_v=k_v, u_0=u_0, v_0=v_0)
    return model, rot, trans, rc


def closed_form(obs, *, method='exact', grouped=None):
    """
    Closed-form intrinsics and board poses from planar-board observations.

    obs: Observations (>= 2 poses, each >= 2 views and >= 3 non-collinear points, Z = 0).
    method: 'exact' (NOTES §2 with the shear of §3; default) or 'paper' (as printed).
    grouped: what ``validate_observations(obs, planar=True)`` returned, when the caller
    has already validated ``obs`` (validated here when None).
    Returns an :class:`InitialSolution`. Raises InvalidInputError for bad input and
    DegenerateConfigurationError when the poses do not determine the intrinsics (from the
    conditioning of the stacked system for B).
    """
    if method not in METHODS:
        raise InvalidInputError(f'method must be one of {METHODS}, got {method!r}')
    if grouped is None:
        grouped = validate_observations(obs, planar=True)
    solve = _exact if method == 'exact' else _paper
    model, rot, trans, rc = solve(obs, grouped)
    model, rot, trans = canonical_signs(model, rot, trans)
    return InitialSolution(model=model, rotation_vectors=rotation_vector(rot),
                           translations=np.asarray(trans, dtype=float),
                           pose_ids=grouped.pose_ids.copy(), method=method,
                           conditioning=rc)
