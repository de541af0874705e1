"""
The micro-image lattice from a white image.

Steps (all vectorised; a Lytro-size 3280 x 3280 white image takes under a second):

1. The spacing of the lattice from the strongest peak of the power spectrum of a central crop
   (Hann window, lowest frequencies ignored so vignetting does not count).
2. A micro-image map: the image over its local maximum, thresholded softly at half and smoothed
   by a quarter spacing. Thresholding removes vignetting and the intensity gradient inside each
   micro-image (the cos^4 falloff is centred on the micro-lens, not on its micro-image, and
   pulls intensity centroids towards the optical axis); the bright area is point-symmetric
   about the centre even where neighbouring micro-images touch, so the map peaks there.
3. Candidates: one local maximum of the map per micro-image; sub-pixel centres: the centroid
   of the map's peak in a window centred on the estimate itself (iterated); micro-images with
   dark all round then take their exact (anti-aliased) bright-area centroid. Micro-images cut
   by the image border are left out.
4. The lattice: hexagonal or rectangular from the nearest-neighbour distances, the rotation from
   the six- or four-fold mean angle of the neighbour vectors, lattice indices assigned around a
   central spot over growing radii (affine, then quadratic and cubic maps once the region is
   wide, so noise is not extrapolated), then a least-squares fit of origin, pitch, row spacing
   and rotation to all centres with outliers rejected.

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


def micro_image_map(image, spacing, *, dark_fraction=0.05):
    """
    A vignetting-free image (H, W) float32 that peaks at every micro-image centre.

    The image over its local maximum (the pixel and its 3 x 3 disk of neighbours) is
    thresholded softly at half (from 0.35 to 0.65: 0 outside the micro-images, 1 inside), which
    removes vignetting and the intensity gradient inside each micro-image (the cos^4 falloff is
    centred on the micro-lens, not on its micro-image; a wider maximum let the dim side of
    each disk fall under the threshold, pulling centres towards the axis by up to 0.14 px at
    full Lytro size), then smoothed by a Gaussian of a quarter spacing. The bright area
    of a micro-image is point-symmetric about its centre even when neighbours touch (the dark
    gaps between them are), so the smoothed map is too: its peaks are the centres. Pixels whose
    local maximum is below ``dark_fraction`` of the bright level are 0.
    """
    img = as_intensity(image)
    local_max = _local_maxima(img, 1)
    high = float(np.percentile(local_max[::4, ::4], 99.0))
    dark = local_max < dark_fraction * high
    local_max[dark] = 1.0
    b = img / local_max
    b -= 0.35
    b *= 1.0 / 0.3
    np.clip(b, 0.0, 1.0, out=b)
    b[dark] = 0.0
    return cv2.GaussianBlur(b, (0, 0), max(0.6, 0.25 * spacing))


def _candidates(smap, spacing):
    """Integer positions (N, 2) of one peak per micro-image of a :func:`micro_image_map`."""
    h, w = smap.shape
    rad = max(1, int(np.floor(0.35 * spacing)))
    dil = _local_maxima(smap, rad)
    cand = (smap >= dil) & (smap > 0.25 * float(dil.max()))
    edge = max(1, int(np.floor(0.25 * spacing)))
    cand[:edge] = False
    cand[h - edge:] = False
    cand[:, :edge] = False
    cand[:, w - edge:] = False
    ys, xs = np.nonzero(cand)
    vals = smap[ys, xs]
    xy = np.column_stack([xs, ys]).astype(float)
    if len(xy) > 1:
        # plateaus (ties) give several maxima per micro-image: keep the first of each cluster
        pairs = cKDTree(xy).query_pairs(0.5 * spacing, output_type='ndarray')
        if len(pairs):
            i, j = pairs[:, 0], pairs[:, 1]
            drop = np.where(vals[i] >= vals[j], j, i)
            ok = np.ones(len(xy), bool)
            ok[drop] = False
            xy = xy[ok]
    return xy


class _Windows:
    """
    Pixels of an image in windows around sub-pixel positions, for iterated centroids.

    Each window is the square of half-side ceil(radius) + 1 px around the pixel nearest a
    position, weighted by a disk of ``radius`` px (one-pixel soft edge) centred on the
    position itself, so the window is symmetric about a symmetric spot.
    """

    def __init__(self, image, radius):
        self.h, self.w = image.shape
        self.hw = hw = int(np.ceil(float(radius))) + 1
        oy, ox = np.mgrid[-hw:hw + 1, -hw:hw + 1]
        self.ox = ox.ravel().astype(np.float32)
        self.oy = oy.ravel().astype(np.float32)
        self.idx_type = np.int32 if self.h * self.w < 2 ** 31 else np.int64
        self.flat_off = (oy.ravel().astype(np.int64) * self.w
                         + ox.ravel().astype(np.int64)).astype(self.idx_type)   # (P,)
        self.flat = image.ravel()
        self.r_soft = np.float32(float(radius) + 0.5)

    def inside(self, xy):
        """(N,) bool: the window at each position xy (N, 2) lies within the image."""
        hw = self.hw
        return ((xy[:, 0] >= hw) & (xy[:, 0] <= self.w - 1 - hw) & (xy[:, 1] >= hw)
                & (xy[:, 1] <= self.h - 1 - hw))

    def sample(self, xy):
        """(values, dx, dy, distance from xy, soft-disk weight), each (N, P), at xy (N, 2)."""
        base = np.rint(xy).astype(np.int64)
        frac = (xy - base).astype(np.float32)
        gather = ((base[:, 1] * self.w + base[:, 0]).astype(self.idx_type)[:, None]
                  + self.flat_off[None, :])
        dx = self.ox[None, :] - frac[:, 0:1]
        dy = self.oy[None, :] - frac[:, 1:2]
        dist = np.sqrt(dx * dx + dy * dy)
        return self.flat[gather], dx, dy, dist, np.clip(self.r_soft - dist, 0.0, 1.0)


def refine_centres(smap, xy, radius, *, iterations=8):
    """
    Sub-pixel peaks of a :func:`micro_image_map` near the initial positions xy (N, 2).

    Each peak is the centroid of the map above its window minimum inside a window of
    ``radius`` px centred on the current estimate itself (sub-pixel, one-pixel soft edge), so
    the window is symmetric about a symmetric peak; re-centred up to ``iterations`` times.
    Returns ``(centres (M, 2), kept (N,) bool)``: spots whose window leaves the image are
    dropped.
    """
    win_ = _Windows(np.ascontiguousarray(smap, dtype=np.float32), radius)
    xy = np.asarray(xy, dtype=float).reshape(-1, 2).copy()
    kept = win_.inside(xy)
    todo = np.flatnonzero(kept)
    for _ in range(iterations):
        if todo.size == 0:
            break
        vals, dx, dy, _, win = win_.sample(xy[todo])               # (n, P) each
        lo = np.where(win > 0, vals, np.inf).min(axis=1)
        wts = (vals - lo[:, None]) * win
        tot = wts.sum(axis=1)
        good = tot > 0
        tot[~good] = 1.0
        step = np.column_stack([(wts * dx).sum(axis=1), (wts * dy).sum(axis=1)]) / tot[:, None]
        new = xy[todo] + step
        ok = good & win_.inside(new)
        kept[todo[~ok]] = False
        xy[todo[ok]] = new[ok]
        todo = todo[ok & (np.abs(step).max(axis=1) > 1e-4)]
    return xy[kept], kept


def centroid_centres(image, xy, radius, *, threshold=0.25, iterations=3):
    """
    Intensity centroids of separated micro-images around xy (N, 2), where that is exact.

    The window (``radius`` px, one-pixel soft edge) is centred on the current estimate; the
    weights rise from ``threshold`` to ``threshold + 0.25`` of the window's contrast and are
    flat above (a gradient across the micro-image hardly moves them). When the window holds the
    whole micro-image with dark all round, its centroid is the centre whatever the window's
    position, anti-aliased edges included. Spots whose window rim (its outer pixel) is not dark
    (micro-images that touch their neighbours) keep ``xy``. Returns centres (N, 2).
    """
    win_ = _Windows(as_intensity(image), radius)
    out = np.asarray(xy, dtype=float).reshape(-1, 2).copy()
    todo = np.flatnonzero(win_.inside(out))
    for it in range(iterations):
        if todo.size == 0:
            break
        vals, dx, dy, dist, win = win_.sample(out[todo])
        lo = np.where(win > 0, vals, np.inf).min(axis=1)
        hi = np.where(win > 0, vals, -np.inf).max(axis=1)
        span = np.maximum(hi - lo, 1e-12)
        wts = np.clip((vals - (lo + threshold * span)[:, None]) / (0.25 * span)[:, None],
                      0.0, 1.0)
        if it == 0:
            rim = (dist > radius - 0.5) & (win > 0)
            rim_level = (wts * rim).sum(axis=1) / np.maximum(rim.sum(axis=1), 1)
            sep = rim_level < 0.05
            todo = todo[sep]
            wts, win, dx, dy = wts[sep], win[sep], dx[sep], dy[sep]
        wts *= win
        tot = wts.sum(axis=1)
        good = tot > 0
        step = np.column_stack([(wts * dx).sum(axis=1), (wts * dy).sum(axis=1)])
        step = step[good] / tot[good, None]
        todo = todo[good]
        new = out[todo] + step
        inb = win_.inside(new)
        out[todo[inb]] = new[inb]
        todo = todo[inb]
    return out


def detect_spots(white, spacing, *, dark_fraction=0.05, window=None):
    """
    Sub-pixel centres (N, 2) of the bright micro-images of a white image.

    ``spacing`` is the lattice spacing in pixels (e.g. from :func:`spectral_spacing`): the peaks
    of :func:`micro_image_map`, refined by :func:`refine_centres` in a window of radius
    ``window`` (default 0.3 spacing). Micro-images too close to the border are left out.
    """
    smap = micro_image_map(white, float(spacing), dark_fraction=dark_fraction)
    window = 0.3 * spacing if window is None else float(window)
    centres, _ = refine_centres(smap, _candidates(smap, float(spacing)), max(1.0, window))
    return centres


def _spot_area(smap, xy, radius):
    """Sum (N,) of a :func:`micro_image_map` in the square of half-side ``radius`` at xy."""
    h, w = smap.shape
    integral = cv2.integral(np.ascontiguousarray(smap, dtype=np.float32), sdepth=cv2.CV_64F)
    r = max(1, int(np.floor(radius)))
    x = np.clip(np.rint(xy[:, 0]).astype(int), r, w - 1 - r)
    y = np.clip(np.rint(xy[:, 1]).astype(int), r, h - 1 - r)
    x0, x1, y0, y1 = x - r, x + r + 1, y - r, y + r + 1
    return integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0]


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


def _neighbour_distance(kind, pitch, row_spacing):
    """Distance (px) between nearest micro-image centres of a lattice."""
    if kind == 'hex':
        return min(pitch, float(np.hypot(0.5 * pitch, row_spacing)))
    return min(pitch, row_spacing)


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
    pitch = float(np.hypot(*r))
    while True:
        sel = dist_start <= radius
        kl = poly.assign(sub_centres[sel])
        # the degree grows with the region: a noisy cubic fitted over a few lenses would
        # extrapolate wildly to the next ring, an affine map cannot follow a pitch that drifts
        # over hundreds of lenses
        span = radius / pitch
        degree = 1 if span < 20 or np.count_nonzero(sel) < 60 else (2 if span < 60 else 3)
        poly = _LatticePolynomial.fit(sub_centres[sel], kl, hexagonal, degree)
        if np.all(sel):
            break
        radius *= 2.0
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
                  dark_fraction=0.05, max_spots=15000, return_details=False):
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
    max_spots : int
        At most about this many micro-images are measured (square tiles of lenses spread over
        the image, for speed); the lattice is fitted to them.
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
    smap = micro_image_map(img, spacing, dark_fraction=dark_fraction)
    cand = _candidates(smap, spacing)
    if len(cand) < _MIN_SPOTS:
        raise DetectionError(
            f'no peaks: found {len(cand)} micro-image spots, need at least {_MIN_SPOTS} '
            f'(spacing {spacing:.2f} px)')
    # the neighbour distance from the integer peaks sizes the sub-pixel window
    kind, rot, pitch, row_spacing = _rotation_and_type(cand, lattice)
    if len(cand) > max_spots:
        # five parameters need no 10^5 centres: square tiles of lenses (neighbours kept), one
        # on the image centre, on a square grid over the image. Tiles, not bands of rows: the
        # index assignment grows from the centre through them, and a band a few rows tall let
        # its polynomial extrapolate wildly across the next gap (full-size Lytro: misassigned)
        tile = 6.0 * spacing
        period = max(tile, tile * np.sqrt(len(cand) / max_spots))
        rel = cand - np.array([(w - 1) / 2.0, (h - 1) / 2.0]) + tile / 2.0
        cand = cand[np.all((rel % period) < tile, axis=1)]
    nn = _neighbour_distance(kind, pitch, row_spacing)
    centres, _ = refine_centres(smap, cand, max(1.0, 0.3 * nn))
    # micro-images cut by the image border have biased centres: only whole ones count
    whole = ((centres[:, 0] >= 0.5 * nn - 0.5) & (centres[:, 0] <= w - 0.5 - 0.5 * nn)
             & (centres[:, 1] >= 0.5 * nn - 0.5) & (centres[:, 1] <= h - 0.5 - 0.5 * nn))
    centres = centroid_centres(img, centres[whole], max(1.0, 0.5 * nn))
    if len(centres) < _MIN_SPOTS:
        raise DetectionError(
            f'no peaks: only {len(centres)} micro-image spots lie inside the image, need '
            f'at least {_MIN_SPOTS} (spacing {spacing:.2f} px)')
    kind, rot, pitch, row_spacing = _rotation_and_type(centres, kind)
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
    # micro-images cut by the lens barrel (cat's eyes, towards the field's edge) have centres
    # pulled inwards, which shrank the fitted pitch (full-size Lytro: 0.4 px mean centre error):
    # the lattice is fitted to whole ones, by the area of their bright disk
    area = _spot_area(smap, centres, 0.5 * nn)
    for keep in (0.98, 0.9):
        whole = inl & (area >= keep * np.percentile(area[inl], 90))
        if np.count_nonzero(whole) >= max(_MIN_SPOTS, 0.25 * np.count_nonzero(inl)):
            inl = whole
            break
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
