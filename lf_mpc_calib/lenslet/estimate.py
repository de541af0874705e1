"""
The micro-image lattice from a white image.

Steps (all vectorised; a Lytro-size 3280 x 3280 white image takes a fraction of a second):

1. The spacing of the lattice from the strongest peak of the power spectrum of a central crop
   (Hann window, lowest frequencies ignored so vignetting does not count).
2. Candidate micro-image centres: local maxima of the image smoothed at a quarter of that
   spacing, brighter than the local mean (which normalises vignetting) and than a dark level.
3. Sub-pixel centres: intensity centroid, in a disk of half the spacing, of the part of each
   micro-image above half its local contrast.
4. The lattice: hexagonal or rectangular from the nearest-neighbour distances, the rotation from
   the six- or four-fold mean angle of the neighbour vectors, lattice indices assigned around a
   central spot over growing radii, then a least-squares fit of origin, pitch, row spacing and
   rotation to all centres with outliers rejected.

Coordinates are raw pixels, x right, y down, origin at the centre of pixel (0, 0).
"""

from dataclasses import dataclass

import cv2
import numpy as np
from scipy.spatial import cKDTree

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.lenslet.grid import LATTICES, LensletGrid

_MIN_SPOTS = 9


@dataclass(frozen=True, eq=False)
class GridEstimate:
    """
    The fitted lattice and what it was fitted to.

    grid: the LensletGrid; centres (N, 2) measured sub-pixel micro-image centres (raw px);
    indices (N, 2) their lattice indices (k, l) in ``grid``'s convention; residuals (N, 2)
    measured minus lattice centre (px); inliers (N,) bool, the centres used in the final fit;
    rms_px the RMS residual norm over the inliers; spacing_px the spectral spacing of step 1.
    """

    grid: LensletGrid
    centres: np.ndarray
    indices: np.ndarray
    residuals: np.ndarray
    inliers: np.ndarray
    rms_px: float
    spacing_px: float


def as_intensity(image, name='white'):
    """
    Return a 2-D float32 intensity image from a mono (H, W) or colour (H, W, 3|4) array.

    Raises InvalidInputError for other shapes, non-numeric dtypes or NaN/inf.
    """
    a = np.asarray(image)
    if a.dtype.kind not in 'uif' or a.dtype == bool:
        raise InvalidInputError(f'{name} must be a numeric image, got dtype {a.dtype}')
    if a.ndim == 3 and a.shape[2] in (3, 4):
        a = a[:, :, :3].astype(np.float32).mean(axis=2)
    if a.ndim != 2:
        raise InvalidInputError(f'{name} must have shape (H, W) or (H, W, 3), got {a.shape}')
    if a.shape[0] < 8 or a.shape[1] < 8:
        raise InvalidInputError(f'{name} must be at least 8 x 8 pixels, got {a.shape}')
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype.kind == 'f' and not np.all(np.isfinite(a)):
        raise InvalidInputError(f'{name} contains NaN or inf')
    return a


def spectral_spacing(image, *, max_crop=1024):
    """
    Dominant period (px) of a periodic image and its peak-to-median spectral ratio.

    Uses a central crop of at most ``max_crop`` pixels a side with a Hann window; if half the
    frequency of the strongest peak also carries a strong peak, that fundamental is taken.
    Returns ``(spacing_px, ratio)``.
    """
    h, w = image.shape
    n = int(min(h, w, max_crop))
    y0, x0 = (h - n) // 2, (w - n) // 2
    crop = image[y0:y0 + n, x0:x0 + n].astype(np.float32)
    crop = crop - crop.mean()
    win = np.hanning(n).astype(np.float32)
    crop = crop * win[:, None] * win[None, :]
    spec = np.abs(np.fft.rfft2(crop)) ** 2
    fy = np.fft.fftfreq(n)[:, None] * n
    fx = np.arange(spec.shape[1])[None, :]
    radius = np.hypot(fy, fx)
    spec[radius < 3.0] = 0.0          # DC and vignetting
    spec[radius > n / 2.5] = 0.0      # spacings below 2.5 px are not micro-images
    flat = int(np.argmax(spec))
    peak = spec.flat[flat]
    med = float(np.median(spec[spec > 0])) if np.any(spec > 0) else 0.0
    if peak <= 0:
        return float('nan'), 0.0
    r = radius.flat[flat]
    # prefer a sub-harmonic (a third or half the frequency) when it is strong: the fundamental
    for div in (2.0, 3.0):
        rr = r / div
        if rr < 3.0:
            break
        near = np.abs(radius - rr) < 1.5
        if np.any(near) and spec[near].max() > 0.25 * peak:
            r = rr
            break
    ratio = float(peak / med) if med > 0 else float('inf')
    return float(n / r), ratio


def _local_maxima(smooth, radius):
    """Grey dilation of ``smooth`` with a disk of ``radius`` pixels (local maximum filter)."""
    size = 2 * radius + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
    dil = cv2.dilate(smooth, kernel)
    return dil


def detect_spots(white, spacing, *, dark_fraction=0.05, threshold=0.25, window=None):
    """
    Sub-pixel centres (N, 2) of the bright micro-images of a white image.

    ``spacing`` is the lattice spacing in pixels (e.g. from :func:`spectral_spacing`). Each
    centre is the intensity centroid, in a disk of radius spacing / 2, of the image above
    ``threshold`` of the way from the smoothed minimum to the smoothed maximum of that disk.
    Micro-images whose disk is cut by the image border are left out. ``window`` overrides the
    radius of that disk (half the nearest-neighbour distance is best).
    """
    img = as_intensity(white)
    h, w = img.shape
    sigma = max(0.6, spacing / 6.0)
    smooth = cv2.GaussianBlur(img, (0, 0), sigma)
    rad = max(1, int(np.floor(0.35 * spacing)))
    dil = _local_maxima(smooth, rad)
    window = 0.5 * spacing if window is None else float(window)
    win = max(1, int(np.floor(window)))
    # candidates: local maxima whose whole centroid window lies inside the image (a micro-image
    # cut by the border has a biased centroid)
    cand = smooth >= dil
    cand[:win + 1] = False
    cand[h - win - 1:] = False
    cand[:, :win + 1] = False
    cand[:, w - win - 1:] = False
    ys, xs = np.nonzero(cand)
    # brighter than the local mean (normalises vignetting) and than the dark level
    f = max(1, int(round(spacing)))
    coarse = cv2.resize(smooth, (max(1, w // f), max(1, h // f)), interpolation=cv2.INTER_AREA)
    coarse = cv2.blur(coarse, (3, 3))
    high = float(np.percentile(smooth[::4, ::4], 99.5))
    cy_c = np.minimum(ys // f, coarse.shape[0] - 1)
    cx_c = np.minimum(xs // f, coarse.shape[1] - 1)
    local_mean = coarse[cy_c, cx_c]
    keep = (smooth[ys, xs] > local_mean) & (local_mean > dark_fraction * high)
    xs, ys = xs[keep], ys[keep]
    if xs.size == 0:
        return np.zeros((0, 2))
    # sub-pixel: centroid of the part above ``threshold`` of the local contrast, in a disk
    oy, ox = np.mgrid[-win:win + 1, -win:win + 1]
    disk = (ox ** 2 + oy ** 2) <= window ** 2
    ox, oy = ox[disk], oy[disk]
    idx_type = np.int32 if h * w < 2 ** 31 else np.int64
    flat_off = (oy * w + ox).astype(idx_type)
    oxf, oyf = ox.astype(np.float32), oy.astype(np.float32)
    cx, cy = xs.astype(np.int64), ys.astype(np.int64)
    gather = (cy * w + cx).astype(idx_type)[:, None] + flat_off[None, :]      # (N, P)
    svals = smooth.ravel()[gather]
    lo = svals.min(axis=1)
    span = svals.max(axis=1) - lo
    cut = (lo + threshold * span)[:, None]
    # weights saturate at a quarter of the contrast above the cut: flat-topped, so an intensity
    # gradient across a micro-image (vignetting) hardly pulls the centroid
    inv_sat = (1.0 / np.maximum(0.25 * span, 1e-12))[:, None].astype(np.float32)
    del svals
    flat_img = img.ravel()
    centres = np.empty((len(cx), 2))
    ok = np.ones(len(cx), bool)
    todo = np.arange(len(cx))
    for it in range(3):
        if it > 0:
            gather = (cy[todo] * w + cx[todo]).astype(idx_type)[:, None] + flat_off[None, :]
        wts = np.clip((flat_img[gather] - cut[todo]) * inv_sat[todo], 0.0, 1.0)
        tot = wts.sum(axis=1)
        ok[todo] = tot > 0
        tot[tot <= 0] = 1.0
        fx = cx[todo] + (wts @ oxf) / tot
        fy = cy[todo] + (wts @ oyf) / tot
        centres[todo, 0] = fx
        centres[todo, 1] = fy
        # re-centre the window on spots whose centroid moved to another pixel
        nx = np.clip(np.rint(fx).astype(np.int64), win, w - 1 - win)
        ny = np.clip(np.rint(fy).astype(np.int64), win, h - 1 - win)
        moved = (nx != cx[todo]) | (ny != cy[todo])
        cx[todo], cy[todo] = nx, ny
        todo = todo[moved]
        if todo.size == 0:
            break
    return centres[ok]


def _rotation_and_type(centres, lattice):
    """Lattice type, rotation (rad), pitch and row spacing from nearest neighbours."""
    tree = cKDTree(centres)
    step = max(1, len(centres) // 20000)
    sub = centres[::step]
    dist, idx = tree.query(sub, k=7)
    d1 = dist[:, 1]
    nn = float(np.median(d1))
    good = np.abs(d1 - nn) < 0.2 * nn
    if np.count_nonzero(good) < 0.5 * len(d1):
        raise DetectionError(
            f'inconsistent pitch: only {np.count_nonzero(good)} of {len(d1)} spots have their '
            f'nearest neighbour within 20 % of the median distance {nn:.2f} px')
    if lattice == 'auto':
        ratio6 = float(np.median(dist[good, 6] / d1[good]))
        lattice = 'hex' if ratio6 < 1.25 else 'rect'
    nfold = 6 if lattice == 'hex' else 4
    vec = centres[idx[good, 1:nfold + 1]] - sub[good, None, :]           # (G, nfold, 2)
    vec = vec.reshape(-1, 2)
    length = np.hypot(vec[:, 0], vec[:, 1])
    if lattice == 'hex':
        keep = np.abs(length - nn) < 0.2 * nn
    else:
        keep = length < 1.3 * float(np.median(dist[good, 4]))
    vec, length = vec[keep], length[keep]
    ang = np.arctan2(vec[:, 1], vec[:, 0])
    z = np.mean(np.exp(1j * nfold * ang))
    if abs(z) < 0.5:
        raise DetectionError(
            f'no consistent {lattice} lattice: neighbour directions do not share a '
            f'{nfold}-fold symmetry (coherence {abs(z):.2f})')
    rot = float(np.angle(z) / nfold)
    # angle of each vector relative to the row direction, folded to [-90, 90)
    rel = np.angle(np.exp(1j * (ang - rot)))
    along = (np.abs(rel) < np.pi / 12) | (np.abs(rel) > np.pi - np.pi / 12)
    pitch = float(np.median(length[along])) if np.any(along) else nn
    if lattice == 'hex':
        row_spacing = pitch * np.sqrt(3.0) / 2.0
    else:
        across = np.abs(np.abs(rel) - np.pi / 2) < np.pi / 12
        row_spacing = float(np.median(length[across])) if np.any(across) else pitch
    return lattice, rot, pitch, row_spacing


def _lattice_basis(pitch, row_spacing, rot):
    r = pitch * np.array([np.cos(rot), np.sin(rot)])
    c = row_spacing * np.array([-np.sin(rot), np.cos(rot)])
    return r, c


def _assign(centres, origin, r, c, hexagonal):
    """Integer (k, l) of each centre relative to a lattice with row/column vectors r, c."""
    m = np.column_stack([r, c])                       # columns r, c
    ab = np.linalg.solve(m, (centres - origin).T).T   # (N, 2) fractional (k + shift, l)
    l_ = np.rint(ab[:, 1])
    shift = 0.5 * (l_.astype(np.int64) % 2) if hexagonal else 0.0
    k = np.rint(ab[:, 0] - shift)
    return np.column_stack([k, l_]).astype(np.int64)


def _design(kl, hexagonal):
    k = kl[:, 0].astype(float)
    l_ = kl[:, 1].astype(float)
    if hexagonal:
        k = k + 0.5 * (kl[:, 1] % 2)
    return k, l_


def _fit_affine(centres, kl, hexagonal):
    """Least-squares origin, r, c of centres = origin + kk r + l c; returns (o, r, c)."""
    k, l_ = _design(kl, hexagonal)
    a = np.column_stack([np.ones_like(k), k, l_])
    sol = np.linalg.solve(a.T @ a, a.T @ centres)
    return sol[0], sol[1], sol[2]


class _LatticePolynomial:
    """Centres as polynomials of the (shifted) lattice coordinates, for index assignment."""

    def __init__(self, coef, degree, hexagonal, scale):
        self.coef, self.degree, self.hexagonal, self.scale = coef, degree, hexagonal, scale

    @staticmethod
    def _terms(kk, ll, degree, scale):
        a, b = kk / scale, ll / scale
        return np.column_stack([a ** i * b ** (d - i) for d in range(degree + 1)
                                for i in range(d + 1)])

    @classmethod
    def affine(cls, origin, r, c, hexagonal):
        # terms of degree 1: 1, b, a  ->  origin, c, r
        return cls(np.array([origin, c, r], dtype=float), 1, hexagonal, 1.0)

    @classmethod
    def fit(cls, centres, kl, hexagonal, degree):
        step = max(1, len(kl) // 5000)
        kl, centres = kl[::step], centres[::step]
        kk, ll = _design(kl, hexagonal)
        scale = max(1.0, float(np.max(np.abs(np.concatenate([kk, ll])))))
        a = cls._terms(kk, ll, degree, scale)
        coef, *_ = np.linalg.lstsq(a, centres, rcond=None)
        return cls(coef, degree, hexagonal, scale)

    def predict(self, kl):
        kk, ll = _design(kl, self.hexagonal)
        return self._terms(kk, ll, self.degree, self.scale) @ self.coef

    def assign(self, centres):
        """Nearest lattice indices (N, 2): affine guess, then corrections by the residual."""
        r, c = self.coef[2] / self.scale, self.coef[1] / self.scale
        kl = _assign(centres, self.coef[0], r, c, self.hexagonal)
        if self.degree == 1:
            return kl
        inv = np.linalg.inv(np.column_stack([r, c]))
        for _ in range(3):
            dab = (centres - self.predict(kl)) @ inv.T
            kk, ll = _design(kl, self.hexagonal)
            ll_new = np.rint(ll + dab[:, 1])
            shift = 0.5 * (ll_new.astype(np.int64) % 2) if self.hexagonal else 0.0
            kl_new = np.empty_like(kl)
            kl_new[:, 0] = np.rint(kk + dab[:, 0] - shift)
            kl_new[:, 1] = ll_new
            if np.array_equal(kl_new, kl):
                break
            kl = kl_new
        return kl


def _grow_assignment(centres, sub_centres, dist_start, start, r, c, radius, hexagonal):
    """Lattice indices (N, 2) of all centres and the polynomial lattice map behind them."""
    poly = _LatticePolynomial.affine(start, r, c, hexagonal)
    while True:
        sel = dist_start <= radius
        kl = poly.assign(sub_centres[sel])
        degree = 3 if np.count_nonzero(sel) > 60 else 1
        poly = _LatticePolynomial.fit(sub_centres[sel], kl, hexagonal, degree)
        if np.all(sel):
            break
        radius *= 3.0
    kl = poly.assign(centres)
    return kl, poly


def _fit_orthogonal(centres, kl, hexagonal, rot0):
    """Gauss-Newton fit of (ox, oy, pitch, row_spacing, rotation); returns the 5 values."""
    k, l_ = _design(kl, hexagonal)
    o, r, c = _fit_affine(centres, kl, hexagonal)
    p = np.array([o[0], o[1], np.hypot(*r), np.hypot(*c), rot0])
    for _ in range(10):
        ox, oy, pitch, rs, th = p
        ct, st = np.cos(th), np.sin(th)
        mx = ox + k * pitch * ct - l_ * rs * st
        my = oy + k * pitch * st + l_ * rs * ct
        res = np.concatenate([centres[:, 0] - mx, centres[:, 1] - my])
        n = len(k)
        jac = np.zeros((2 * n, 5))
        jac[:n, 0] = 1.0
        jac[n:, 1] = 1.0
        jac[:n, 2] = k * ct
        jac[n:, 2] = k * st
        jac[:n, 3] = -l_ * st
        jac[n:, 3] = l_ * ct
        jac[:n, 4] = -k * pitch * st - l_ * rs * ct
        jac[n:, 4] = k * pitch * ct - l_ * rs * st
        step = np.linalg.solve(jac.T @ jac, jac.T @ res)
        p = p + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return p


def _model(kl, hexagonal, p):
    k, l_ = _design(kl, hexagonal)
    ox, oy, pitch, rs, th = p
    ct, st = np.cos(th), np.sin(th)
    return np.column_stack([ox + k * pitch * ct - l_ * rs * st,
                            oy + k * pitch * st + l_ * rs * ct])


def estimate_grid(white, *, lattice='auto', expected_size=None, spacing=None,
                  dark_fraction=0.05, return_details=False):
    """
    Fit the micro-image lattice to a white image.

    Parameters
    ----------
    white : (H, W) or (H, W, 3) ndarray
        White (flat-field) image; any numeric dtype.
    lattice : 'auto' | 'hex' | 'rect'
        Lattice type; 'auto' decides from the nearest-neighbour distances.
    expected_size : (width, height), optional
        Raise InvalidInputError when the image has another size.
    spacing : float, optional
        Approximate spacing of micro-image rows (px); estimated from the spectrum when None.
    dark_fraction : float
        Spots whose surroundings are darker than this fraction of the bright level are ignored.
    return_details : bool
        Return a :class:`GridEstimate` instead of the LensletGrid.

    Returns
    -------
    LensletGrid (or GridEstimate). The grid covers every lattice position whose row holds a
    micro-image centre inside the image, from the first to the last column index seen in any
    row, so a few positions at the ends of rows may fall just outside the image.

    Raises
    ------
    InvalidInputError
        Wrong shape, dtype, size, or lattice name.
    DetectionError
        Dark image, no periodic structure, too few spots, inconsistent pitch, or centres that a
        regular lattice does not fit.

    """
    if lattice not in LATTICES + ('auto',):
        raise InvalidInputError(f"lattice must be 'auto', 'hex' or 'rect', got {lattice!r}")
    img = as_intensity(white)
    h, w = img.shape
    if expected_size is not None and tuple(int(v) for v in expected_size) != (w, h):
        raise InvalidInputError(
            f'white image must be {int(expected_size[0])} x {int(expected_size[1])} '
            f'(width x height), got {w} x {h}')
    lo, hi = float(img.min()), float(img.max())
    if hi <= 0 or hi - lo <= 1e-6 * max(abs(hi), 1.0):
        raise DetectionError(
            f'white image is dark or uniform (min {lo:g}, max {hi:g}); expected bright '
            f'micro-images on a darker background')
    if spacing is None:
        spacing, ratio = spectral_spacing(img)
        if not np.isfinite(spacing) or ratio < 20.0:
            raise DetectionError(
                f'no peaks: the white image has no periodic micro-image pattern (spectral '
                f'peak only {ratio:.1f} x the median)')
    spacing = float(spacing)
    centres = detect_spots(img, spacing, dark_fraction=dark_fraction)
    if len(centres) < _MIN_SPOTS:
        raise DetectionError(
            f'no peaks: found {len(centres)} micro-image spots, need at least {_MIN_SPOTS} '
            f'(spacing {spacing:.2f} px)')
    kind, rot, pitch, row_spacing = _rotation_and_type(centres, lattice)
    nn = min(pitch, row_spacing if kind == 'rect' else pitch)
    if np.floor(0.5 * nn) > np.floor(0.5 * spacing):
        # a hexagonal lattice: the centroid window can grow to half the neighbour distance
        centres = detect_spots(img, spacing, dark_fraction=dark_fraction, window=0.5 * nn)
    hexagonal = kind == 'hex'
    # index assignment from the spot nearest the image centre over growing radii; the map
    # from indices to centres is a polynomial there (a cubic once enough spots are assigned) so
    # a pitch that varies slowly across the image does not break the counting
    mid = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    start = centres[int(np.argmin(np.hypot(*(centres - mid).T)))]
    r, c = _lattice_basis(pitch, row_spacing, rot)
    # the growing stages use at most ~5000 spots (all of those near the start)
    dist_start = np.hypot(*(centres - start).T)
    stride = max(1, len(centres) // 5000)
    subset = (np.arange(len(centres)) % stride == 0) | (dist_start <= 20.0 * pitch)
    sub_centres, dist_start = centres[subset], dist_start[subset]
    radius = 6.0 * pitch
    try:
        kl, poly = _grow_assignment(centres, sub_centres, dist_start, start, r, c, radius,
                                    hexagonal)
    except np.linalg.LinAlgError:
        raise DetectionError(
            f'inconsistent pitch: the {len(centres)} spots do not form a {kind} lattice '
            f'(degenerate index assignment)') from None
    local = centres - poly.predict(kl)
    norm = np.hypot(local[:, 0], local[:, 1])
    scale = max(1.4826 * float(np.median(norm)), 0.01 * pitch)
    inl = norm < max(5.0 * scale, 0.05 * pitch)
    # one spot per lattice index: duplicates keep the closest
    order = np.lexsort((norm, kl[:, 1], kl[:, 0]))
    same = np.all(kl[order][1:] == kl[order][:-1], axis=1)
    inl[order[1:][same]] = False
    if np.count_nonzero(inl) < 0.5 * len(centres) or np.median(norm) > 0.2 * pitch:
        raise DetectionError(
            f'inconsistent pitch: a smooth {kind} lattice explains only '
            f'{np.count_nonzero(inl)} of {len(centres)} spots (median residual '
            f'{np.median(norm):.2f} px, pitch {pitch:.2f} px)')
    p = _fit_orthogonal(centres[inl], kl[inl], hexagonal, float(np.arctan2(r[1], r[0])))
    pitch_fit, rs_fit = float(p[2]), float(p[3])
    ref = LensletGrid(kind, pitch_fit, rs_fit, float(p[4]), p[:2], (1, 1), (w, h),
                      hex_parity=0)
    # lattice positions inside the image
    kmin, kmax, lmin, lmax = _extent(ref, w, h)
    origin = ref.origin + kmin * ref.row_vector + lmin * ref.column_vector
    grid = LensletGrid(kind, pitch_fit, rs_fit, float(p[4]),
                       origin, (kmax - kmin + 1, lmax - lmin + 1),
                       (w, h), hex_parity=(lmin % 2) if hexagonal else 1)
    if not return_details:
        return grid
    indices = kl - np.array([kmin, lmin])
    residuals = centres - grid.centres_of(indices)
    rms = float(np.sqrt(np.mean(np.sum(residuals[inl] ** 2, axis=1))))
    return GridEstimate(grid, centres, indices, residuals, inl, rms, spacing)


def _extent(ref, w, h):
    """Index ranges (kmin, kmax, lmin, lmax) of lattice positions with centres in the image."""
    corners = np.array([[-0.5, -0.5], [w - 0.5, -0.5], [-0.5, h - 0.5], [w - 0.5, h - 0.5]])
    m = np.column_stack([ref.row_vector, ref.column_vector])
    ab = np.linalg.solve(m, (corners - ref.origin).T).T
    k0, k1 = int(np.floor(ab[:, 0].min())) - 1, int(np.ceil(ab[:, 0].max())) + 1
    l0, l1 = int(np.floor(ab[:, 1].min())) - 1, int(np.ceil(ab[:, 1].max())) + 1
    l_, k = np.mgrid[l0:l1 + 1, k0:k1 + 1]
    kl = np.column_stack([k.ravel(), l_.ravel()])
    xy = ref.centres_of(kl)
    inside = (xy[:, 0] >= -0.5) & (xy[:, 0] <= w - 0.5) & (xy[:, 1] >= -0.5) & \
             (xy[:, 1] <= h - 0.5)
    if not np.any(inside):
        raise DetectionError('the fitted lattice has no micro-image inside the image')
    kl = kl[inside]
    return int(kl[:, 0].min()), int(kl[:, 0].max()), int(kl[:, 1].min()), int(kl[:, 1].max())
