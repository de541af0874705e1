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
3. Candidates: one local maximum (or plateau) of the map per micro-image; first sub-pixel
   centres: the centroid of the map's peak in a window centred on the estimate itself
   (iterated); final centres: the centroid of each micro-image's half-level area in the image
   (:func:`half_level_centres`: right for peaked, flat-topped and saturated micro-images,
   touching or not). Micro-images cut by the image border are left out.
4. The lattice: hexagonal or rectangular from the nearest-neighbour distances, the rotation from
   the six- or four-fold mean angle of the neighbour vectors (the equivalent row direction
   nearest an image axis: near 90 degrees for a column-shifted lattice), lattice indices
   assigned around a central spot over growing radii (affine, then quadratic and cubic maps
   once the region is wide, so noise is not extrapolated), then a least-squares fit of origin,
   pitch, row spacing and rotation to all centres with outliers rejected.

Coordinates are raw pixels, x right, y down, origin at the centre of pixel (0, 0).
"""

import copy
import dataclasses
import hashlib
from dataclasses import dataclass

import cv2
import numpy as np
import scipy.fft
from scipy.spatial import cKDTree

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.kept_results import KeptResults
from lf_mpc_calib.lenslet.defects import dusty_micro_images
from lf_mpc_calib.lenslet.grid import (LATTICES, LatticeDeformation, LensletGrid, numbered_grid,
                                       regular_indices, row_direction)

_MIN_SPOTS = 9


@dataclass(frozen=True, eq=False)
class GridEstimate:
    """
    The fitted lattice and what it was fitted to.

    grid: the LensletGrid; centres (N, 2) measured sub-pixel micro-image centres (raw px);
    indices (N, 2) their lattice indices (k, l) in ``grid``'s convention; residuals (N, 2)
    measured minus lattice centre (px); inliers (N,) bool, the centres used in the final fit;
    rms_px the RMS residual norm over the inliers; spacing_px the spacing of step 1;
    quality the :class:`GridQuality` figures the grid was checked against.
    """

    grid: LensletGrid
    centres: np.ndarray
    indices: np.ndarray
    residuals: np.ndarray
    inliers: np.ndarray
    rms_px: float
    spacing_px: float
    quality: 'GridQuality' = None


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


def spectral_spacing(image, *, max_crop=1024, min_share=0.08):
    """
    Period (px) of the lattice's fundamental and the peak-to-median spectral ratio.

    The power spectrum of a central crop of at most ``max_crop`` pixels a side (Hann window;
    DC, vignetting and periods under 2.5 px removed) has peaks on the reciprocal lattice. The
    fundamental is the strong peak (local maximum above ``min_share`` of the strongest) of
    smallest frequency, NOT the strongest: for touching hexagonal micro-images the strongest
    ring is the sqrt(3) one (the dark gaps between three disks), at half the micro-image
    spacing. For a hexagonal lattice the period is the row spacing (pitch sqrt(3)/2), for a
    rectangular one the larger of pitch and row spacing. Returns ``(spacing_px, ratio)``;
    spacing is NaN when the image has no spectral peak.
    """
    h, w = image.shape
    n = int(min(h, w, max_crop))
    y0, x0 = (h - n) // 2, (w - n) // 2
    crop = image[y0:y0 + n, x0:x0 + n].astype(np.float32)
    # over the local (3 x 3) maximum: the micro-images of a scene's dark parts become as
    # bright as the rest, so a scene's own low frequencies do not outshine the lattice
    crop = crop / np.maximum(_local_maxima(crop, 1), 1e-3 * max(float(crop.max()), 1e-30))
    crop = crop - crop.mean()
    win = np.hanning(n).astype(np.float32)
    crop = crop * win[:, None] * win[None, :]
    spec = np.abs(np.fft.fftshift(scipy.fft.fft2(crop))).astype(np.float32) ** 2   # (n, n)
    f = np.arange(n, dtype=np.float32) - n // 2
    radius = np.hypot(f[:, None], f[None, :])
    spec[radius < 3.0] = 0.0          # DC and vignetting
    spec[radius > n / 2.5] = 0.0      # spacings below 2.5 px are not micro-images
    peak = float(spec.max())
    if peak <= 0:
        return float('nan'), 0.0
    med = float(np.median(spec[spec > 0]))
    ratio = float(peak / med) if med > 0 else float('inf')
    strong = (spec >= cv2.dilate(spec, np.ones((5, 5), np.uint8))) & (spec >= min_share * peak)
    # the fundamental of micro-images lies within 4x of the strongest peak (touching disks:
    # sqrt(3) or 2 times); stronger low frequencies are a scene, not the lattice
    r_peak = float(radius.flat[int(np.argmax(spec))])
    strong &= radius >= r_peak / 4.2
    r = float(radius[strong].min())
    return float(n / r), ratio


def _local_maxima(smooth, radius):
    """Grey dilation of ``smooth`` with a disk of ``radius`` pixels (local maximum filter)."""
    size = 2 * radius + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
    dil = cv2.dilate(smooth, kernel)
    return dil


def micro_image_map(image, spacing, *, dark_fraction=0.05, radius=1):
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
    local maximum is below ``dark_fraction`` of the bright level are 0. ``radius`` (px) of the
    local maximum: 1, or wider for soft-rimmed touching micro-images (:func:`wide_radius`).
    """
    img = as_intensity(image)
    return cv2.GaussianBlur(_bright_share(img, int(radius), dark_fraction), (0, 0),
                            max(0.6, 0.25 * spacing))


def wide_radius(spacing):
    """
    Local-maximum radius (px) for micro-images that touch with soft rims: 0.15 spacing.

    A focused camera's white image (the rim is the main-lens aperture's blurred edge; multi-focus
    presets at 16 samples per pixel) has gaps too shallow for a 3 x 3 maximum: a gap pixel's
    neighbours are barely brighter, the map is bright almost everywhere and its peaks wander by
    up to 2 px, so no lattice fits them. A maximum over 0.15 spacing reaches from the gap onto
    the rims beside it; it is a fallback only (its gradient bias is 0.05-0.1 px where the 3 x 3
    map works).
    """
    return max(2, int(round(0.15 * float(spacing))))


def _bright_share(img, radius, dark_fraction):
    """img (H, W) over its local maximum within ``radius`` px, soft-thresholded to [0, 1]."""
    local_max = _local_maxima(img, radius)
    high = float(np.percentile(local_max[::4, ::4], 99.0))
    dark = local_max < dark_fraction * high
    local_max[dark] = 1.0
    b = img / local_max
    b -= 0.35
    b *= 1.0 / 0.3
    np.clip(b, 0.0, 1.0, out=b)
    b[dark] = 0.0
    return b


def _candidates(smap, spacing, img):
    """
    Integer positions (N, 2) of one peak per micro-image of a :func:`micro_image_map`.

    Local maxima over 0.35 spacing of the map, its ties broken by the image ``img`` (H, W)
    blurred by a quarter spacing (where the map is a plateau, over a flat-topped micro-image
    or across smooth touching ones, the blurred image still peaks once per micro-image); ties
    left (quantised images) are one connected component and give one candidate, so time and
    memory stay linear in the pixels whatever the profile. Maxima closer than half a spacing
    keep the highest.
    """
    h, w = smap.shape
    rad = max(1, int(np.floor(0.35 * spacing)))
    blur = cv2.GaussianBlur(img, (0, 0), max(0.6, 0.25 * spacing))
    blur *= 0.01 / max(float(blur.max()), 1e-30)
    score = smap + blur
    del blur
    dil = _local_maxima(score, rad)
    cand = (score >= dil) & (smap > 0.25 * float(smap.max()))
    del dil, score
    edge = max(1, int(np.floor(0.25 * spacing)))
    cand[:edge] = False
    cand[h - edge:] = False
    cand[:, :edge] = False
    cand[:, w - edge:] = False
    n, _, _, cents = cv2.connectedComponentsWithStats(cand.view(np.uint8), connectivity=8)
    xy = np.rint(cents[1:n]).astype(float)                     # (N, 2) one per plateau
    if len(xy) > 1:
        vals = smap[xy[:, 1].astype(int), xy[:, 0].astype(int)]
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


def _kth(values, k, axis=1):
    """The k-th smallest (0-based, ``k`` (N,) int) of each row of values (N, P)."""
    part = np.sort(values, axis=axis)
    return np.take_along_axis(part, k[:, None], axis=axis)[:, 0]


def half_level_centres(image, xy, nn, *, iterations=12, chunk=2_000_000):
    """
    Centres (N, 2) of the micro-images near xy (N, 2): centroids of their half-level area.

    Each micro-image is thresholded (softly, from 25 to 75 % of its contrast) between its
    dark level (the 1st percentile of the disk of 0.6 ``nn`` px: the gaps to its neighbours;
    a dead pixel does not move it) and its bright level (the 80th percentile of the disk of
    0.3 nn: a hot pixel does not move it); the centroid of that bright area inside the disk of
    0.5 nn centred on the current estimate is iterated. The half-level area is point-symmetric
    about the centre for peaked, flat-topped and saturated profiles, touching or not, so the
    window's fixed point is the centre (on the real whites within 0.01-0.03 px, median, of
    an edge-circle fit). Returns ``(centres (M, 2), kept (N,) bool)``: spots whose window
    leaves the image (micro-images cut by the border) are dropped. Works in chunks of about
    ``chunk`` window pixels (memory bounded whatever the pitch).
    """
    win_ = _Windows(as_intensity(image), 0.6 * nn)
    out = np.asarray(xy, dtype=float).reshape(-1, 2).copy()
    kept = win_.inside(out)
    todo = np.flatnonzero(kept)
    per = max(1, int(chunk) // win_.flat_off.size)
    for _ in range(iterations):
        moving = [part[_half_level_step(win_, out, part, nn)]
                  for part in np.array_split(todo, max(1, int(np.ceil(todo.size / per))))
                  if part.size]
        todo = np.concatenate(moving) if moving else todo[:0]
        if todo.size == 0:
            break
    kept &= win_.inside(out)
    return out[kept], kept


def _half_level_step(win_, out, part, nn):
    """One centroid step of :func:`half_level_centres` for spots ``part``; mask still moving."""
    vals, dx, dy, dist, _ = win_.sample(out[part])              # (n, P) each
    ring = dist <= 0.6 * nn
    lo = _kth(np.where(ring, vals, np.inf), (0.01 * ring.sum(axis=1)).astype(int))
    core = dist < 0.3 * nn
    hi = _kth(np.where(core, vals, np.inf), np.maximum(0, (0.8 * core.sum(axis=1)).astype(int) - 1))
    span = np.maximum(hi - lo, 1e-12)
    wts = (vals - (lo + 0.25 * span)[:, None]) / (0.5 * span)[:, None]
    np.clip(wts, 0.0, 1.0, out=wts)
    wts *= np.clip(np.float32(0.5 * nn + 0.5) - dist, 0.0, 1.0)
    tot = wts.sum(axis=1)
    good = tot > 0
    step = np.column_stack([(wts * dx).sum(axis=1), (wts * dy).sum(axis=1)])
    step /= np.where(good, tot, 1.0)[:, None]
    new = out[part] + step
    ok = good & win_.inside(new)
    out[part[ok]] = new[ok]
    return ok & (np.abs(step).max(axis=1) > 1e-3)


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
    neighbours = (centres, sub[good], idx[good], dist[good], nn)
    if lattice == 'auto':
        # the symmetry the neighbour directions share: 6-fold (hex) or 4-fold (rect). (The
        # 6th neighbour's distance over the 1st's, tried before, is 1.2-1.27 on a hexagonal
        # array of 7 px touching micro-images, whose first candidates sit on whole pixels:
        # a 0.07 px jitter of the lenses tipped it to 'rect', and the grid was refused.)
        vec = centres[idx[good, 1:7]] - sub[good, None, :]                  # (G, 6, 2)
        ang = np.arctan2(vec[..., 1], vec[..., 0])
        six, four = (abs(np.mean(np.exp(1j * n * ang[:, :n]))) for n in (6, 4))
        lattice = 'hex' if six > four else 'rect'
    nfold = 6 if lattice == 'hex' else 4
    z, length, ang = _direction_coherence(lattice, *neighbours)
    if abs(z) < 0.5:
        raise DetectionError(
            f'no consistent {lattice} lattice: neighbour directions do not share a '
            f'{nfold}-fold symmetry (coherence {abs(z):.2f})')
    # of the nfold equivalent row directions, the one nearest an image axis: a hexagonal
    # lattice turned by 30 or 90 degrees (column-shifted, a portrait camera) is numbered along
    # its columns, so its index rectangle covers the image as a row-major one does
    rot = row_direction(lattice, float(np.angle(z) / nfold))
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


def _direction_coherence(lattice, centres, sub, idx, dist, nn):
    """(z: the mean of exp(i n angle) over the neighbour vectors, n = 6 for 'hex', 4 for
    'rect'; their lengths (M,) and angles (M,)) of spots ``sub`` (G, 2) and their 7 nearest
    ``idx``/``dist`` (G, 7) among ``centres``; nn the median nearest distance."""
    nfold = 6 if lattice == 'hex' else 4
    vec = (centres[idx[:, 1:nfold + 1]] - sub[:, None, :]).reshape(-1, 2)
    length = np.hypot(vec[:, 0], vec[:, 1])
    if lattice == 'hex':
        keep = np.abs(length - nn) < 0.2 * nn
    else:
        keep = length < 1.3 * float(np.median(dist[:, 4]))
    length, ang = length[keep], np.arctan2(vec[keep, 1], vec[keep, 0])
    return np.mean(np.exp(1j * nfold * ang)), length, ang


def _neighbour_distance(kind, pitch, row_spacing):
    """Distance (px) between nearest micro-image centres of a lattice."""
    if kind == 'hex':
        return min(pitch, float(np.hypot(0.5 * pitch, row_spacing)))
    return min(pitch, row_spacing)


def neighbour_distance(grid):
    """Distance (px) between nearest micro-image centres of a LensletGrid."""
    return _neighbour_distance(grid.lattice, grid.pitch, grid.row_spacing)


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


@dataclass(frozen=True)
class GridQuality:
    """
    How well the fitted grid explains the white image, with the limits it was held to.

    rms_px, max_px: RMS and largest residual norm (px) over the spots used in the fit;
    rms_regular_px: RMS of the same spots against the regular lattice alone (no deformation);
    explained: share of the measured whole micro-images within ``0.25 nn`` of their lattice
    position (nn the nearest-neighbour distance, px); covered: share of lattice positions on
    bright micro-image area that hold a detected spot; outside: share of grid positions whose
    centre is outside the image; deformation_degree: degree of the polynomial deformation
    (0: regular lattice); max_deformation_px: its largest displacement over the grid; spots:
    number of measured micro-images; nn_px: nearest-neighbour distance of the lattice;
    spot_scatter_px: RMS noise (norm) of the measured centres, from the second differences of
    their residuals along the rows (:func:`spot_scatter`; a smooth lattice error cancels);
    lattice_error_px: what the lattice leaves beyond that noise, sqrt(rms^2 - scatter^2);
    estimator: the centre estimator of :func:`measure_spots` the grid was fitted to.
    """

    rms_px: float
    max_px: float
    rms_regular_px: float
    explained: float
    covered: float
    outside: float
    deformation_degree: int
    max_deformation_px: float
    spots: int
    nn_px: float
    spot_scatter_px: float = float('nan')
    lattice_error_px: float = float('nan')
    estimator: str = 'map'

    # limits (fractions of nn where marked): a grid beyond any of them is refused
    MAX_RMS_NN = 0.08
    MAX_RESIDUAL_NN = 0.3
    MIN_EXPLAINED = 0.8
    MIN_COVERED = 0.85
    MAX_OUTSIDE = 0.25
    MAX_LATTICE_ERROR_NN = 0.03     # and 3 x the spot scatter

    def failures(self):
        """Reasons (list of str) why the grid is not trustworthy; empty when it is."""
        nn = self.nn_px
        out = []
        if self.rms_px > self.MAX_RMS_NN * nn:
            out.append(f'residual RMS {self.rms_px:.3f} px exceeds {self.MAX_RMS_NN} x the '
                       f'{nn:.2f} px lens spacing ({self.MAX_RMS_NN * nn:.3f} px)')
        if self.max_px > self.MAX_RESIDUAL_NN * nn:
            out.append(f'largest residual {self.max_px:.3f} px exceeds {self.MAX_RESIDUAL_NN} x '
                       f'the {nn:.2f} px lens spacing ({self.MAX_RESIDUAL_NN * nn:.3f} px)')
        if self.explained < self.MIN_EXPLAINED:
            out.append(f'the lattice explains {100 * self.explained:.1f} % of the '
                       f'{self.spots} detected micro-images, need '
                       f'{100 * self.MIN_EXPLAINED:.0f} %')
        if self.covered < self.MIN_COVERED:
            out.append(f'only {100 * self.covered:.1f} % of the lattice positions on bright '
                       f'micro-image area hold a detected micro-image, need '
                       f'{100 * self.MIN_COVERED:.0f} % (lattice finer than the micro-images?)')
        limit = max(self.MAX_LATTICE_ERROR_NN * nn, 3.0 * self.spot_scatter_px)
        if self.lattice_error_px > limit:
            out.append(f'the spots scatter {self.spot_scatter_px:.3f} px but the lattice '
                       f'explains them only to {self.lattice_error_px:.3f} px (limit '
                       f'{limit:.3f} px: {self.MAX_LATTICE_ERROR_NN} x the {nn:.2f} px lens '
                       f'spacing or 3 x the scatter): the micro-lenses are not on a smooth '
                       f'lattice')
        if self.outside > self.MAX_OUTSIDE:
            out.append(f'{100 * self.outside:.1f} % of the lattice lies outside the image, limit '
                       f'{100 * self.MAX_OUTSIDE:.0f} %')
        return out

    def as_dict(self):
        """Plain-Python figures (for YAML reports)."""
        return {k: (v if isinstance(v, str) else
                    int(v) if isinstance(v, (int, np.integer)) else float(v))
                for k, v in self.__dict__.items()}


_ADVICE = ('pass a known grid file (decode, calibrate-raw: --grid FILE), force the lattice type '
           '(grid, decode: --lattice hex|rect), or take another white image (uniformly lit, not '
           'saturated, micro-images in focus)')


def check_white(white, spacing=None, full_scale=None):
    """
    Refuse an image (H, W) float32 that is not a usable white image; returns None.

    Checks, in order: dark or uniform (brightest 0.1 % under 2 % of ``full_scale``, the
    dtype's maximum for integer images); saturated (over 95 % of the pixels at the clip level);
    low contrast (1st percentile over half the 99th: no dark gaps between micro-images);
    and, given the lattice ``spacing`` (px), not a flat field (a scene or a checkerboard: the
    brightest pixel of blocks of 1.5 micro-images, which for a white image follows a smooth
    vignetting, falls under 0.7 x a smooth fit of it in over 10 % of the blocks inside the lit
    area). Raises DetectionError naming the figure and its limit.
    """
    img = white
    h, w = img.shape
    lo, hi = float(img.min()), float(img.max())
    if hi <= 0 or hi - lo <= 1e-6 * max(abs(hi), 1.0):
        raise DetectionError(
            f'white image check: the image is dark or uniform (min {lo:g}, max {hi:g}); '
            f'expected bright micro-images on a darker background; {_ADVICE}')
    sub = img[::4, ::4]
    p1, p99, p999 = (float(x) for x in np.percentile(sub, [1, 99, 99.9]))
    if full_scale is not None and p999 < 0.02 * full_scale:
        raise DetectionError(
            f'white image check: dark, the brightest 0.1 % of the pixels reach {p999:g}, under '
            f'2 % of full scale {full_scale:g}; {_ADVICE}')
    clipped = float(np.mean(img >= hi - 0.02 * (hi - lo)))
    if clipped > 0.95:
        raise DetectionError(
            f'white image check: saturated, {100 * clipped:.1f} % of the pixels sit within 2 % '
            f'of the clip level {hi:g} (limit 95 %): the micro-image borders are lost; '
            f'{_ADVICE}')
    if p1 > 0.5 * p99:
        raise DetectionError(
            f'white image check: low contrast, the 1st percentile {p1:g} is over half the 99th '
            f'{p99:g}: no dark gaps between micro-images (over-exposed, out of focus, or not a '
            f'lenslet image); {_ADVICE}')
    if spacing is None:
        return
    b = max(16, int(np.ceil(1.75 * spacing)))
    nb_y, nb_x = h // b, w // b
    if nb_y < 5 or nb_x < 5:
        return
    y0, x0 = (h - nb_y * b) // 2, (w - nb_x * b) // 2
    blocks = img[y0:y0 + nb_y * b, x0:x0 + nb_x * b].reshape(nb_y, b, nb_x, b)
    bmax = blocks.max(axis=(1, 3)).astype(float)                        # (nb_y, nb_x)
    yy, xx = np.mgrid[0:nb_y, 0:nb_x]
    low = _dim_share(np.column_stack([xx.ravel(), yy.ravel()]) * b, bmax.ravel(), (w, h))
    if low > _MAX_DIM:
        raise DetectionError(
            f'white image check: not a flat field, {100 * low:.1f} % of the lit image blocks '
            f'are under 0.7 x the smooth brightness of a white image (limit '
            f'{100 * _MAX_DIM:.0f} %): a scene or checkerboard frame?; {_ADVICE}')


_MAX_DIM = 0.1


def check_micro_images_lit(img, centres):
    """
    Refuse a white (H, W) whose micro-images at ``centres`` (N, 2) px are not all lit.

    Every micro-image of a white image is lit, following a smooth vignetting: over 10 % of
    them under 0.7 x a smooth fit of the brightest pixel of their 3 x 3 core are a scene or a
    checkerboard. Raises DetectionError naming the share and its limit.
    """
    h, w = img.shape
    ij = np.rint(centres).astype(int)
    peak = np.max([img[np.clip(ij[:, 1] + dy, 0, h - 1), np.clip(ij[:, 0] + dx, 0, w - 1)]
                   for dy in (-1, 0, 1) for dx in (-1, 0, 1)], axis=0)
    low = _dim_share(centres, peak, (w, h), lit_fraction=0.0)
    if low > _MAX_DIM:
        raise DetectionError(
            f'white image check: {100 * low:.1f} % of the {len(centres)} micro-images are '
            f'under 0.7 x the smooth brightness of a white image (limit {100 * _MAX_DIM:.0f} '
            f'%): a scene or checkerboard frame?; {_ADVICE}')


def _dim_share(xy, values, image_size, lit_fraction=0.2):
    """
    Share of the lit samples (values (N,) at xy (N, 2) px) under 0.7 x a smooth vignetting.

    The vignetting is a robust least-squares polynomial (degree 2 plus 4th powers) of the
    position, fitted to the lit samples (over ``lit_fraction`` of the 95th percentile: a lens
    barrel leaves the corners dark). A white image gives about 0; a scene or checkerboard not.
    """
    w, h = image_size
    step = max(1, len(values) // 4000)            # a smooth trend needs no 10^4 samples
    xy, values = np.asarray(xy)[::step], np.asarray(values, dtype=float)[::step]
    lit = values > lit_fraction * float(np.percentile(values, 95))
    u = (xy[:, 0] - (w - 1) / 2.0) / (w / 2.0)
    v = (xy[:, 1] - (h - 1) / 2.0) / (h / 2.0)
    terms = np.column_stack([np.ones_like(u), u, v, u * u, u * v, v * v, u ** 4, v ** 4,
                             u * u * v * v])                            # (N, 9)
    use = lit.copy()
    for _ in range(3):                                                  # trim outliers
        if np.count_nonzero(use) < 12:
            return 0.0
        coef, *_ = np.linalg.lstsq(terms[use], values[use], rcond=None)
        trend = terms @ coef
        use = lit & (values > 0.7 * trend)
    return float(np.mean(values[lit] < 0.7 * trend[lit]))


def without_pedestal(img):
    """
    img (H, W) float32 less its pedestal: the 0.1st percentile (a black level left in, no
    dark frame subtracted; the gaps between micro-images and the unlit corners read it).

    For the spectral spacing only: over its local maximum, a gap that reads a black level of
    7 % of the white (a 10-bit pedestal of 64) was as bright as the micro-images, and the
    spectrum's fundamental was the diagonal harmonic. Not for the later stages: on a dim real
    white (seaurchin) the 0.1st percentile is light, not black, and taking it away cut the
    outer micro-images out of the fit.
    """
    floor = float(np.percentile(img[::2, ::2], 0.1))
    return np.maximum(img - floor, 0.0) if floor > 0 else img


def lattice_spacing(img, spacing=None):
    """
    Spacing (px) of the micro-image lattice of a white image (H, W) float32.

    From :func:`spectral_spacing` (the fundamental of the reciprocal lattice) unless given;
    raises DetectionError when the image has no periodic micro-image pattern.
    """
    if spacing is not None:
        spacing = float(spacing)
        if not (np.isfinite(spacing) and spacing >= 2.5):
            raise InvalidInputError(f'spacing must be a number of pixels >= 2.5, got {spacing}')
        return spacing
    spacing, ratio = spectral_spacing(img)
    if not np.isfinite(spacing) or ratio < 20.0:
        raise DetectionError(
            f'grid spacing stage: no peaks: the white image has no periodic micro-image '
            f'pattern (spectral peak {ratio:.1f} x the median, need 20); {_ADVICE}')
    return float(spacing)


@dataclass(frozen=True, eq=False)
class _Spots:
    """Spots stage output: lattice type and first lattice parameters, measured centres."""

    kind: str
    rotation: float
    pitch: float
    row_spacing: float
    nn: float
    spacing: float
    centres: np.ndarray         # (N, 2) whole micro-images, sub-pixel
    candidates: np.ndarray      # (M, 2) integer peaks of every micro-image (before tiling)
    smap: np.ndarray            # (H, W) micro-image map


def measure_spots(img, spacing, lattice, *, dark_fraction=0.05, max_spots=15000, radius=1,
                  estimator='map'):
    """
    Sub-pixel centres of whole micro-images of img (H, W), with the lattice type and spacing.

    The spacing is checked against the nearest-neighbour distance of the detected peaks and
    re-derived from it once when they disagree (a spectral fundamental that was a harmonic).
    At most about ``max_spots`` micro-images (square tiles spread over the image) are refined.
    ``radius``: of the :func:`micro_image_map`'s local maximum. ``estimator``: 'map' (the map's
    peaks, exact bright-area centroids where micro-images are separated: peaked renders) or
    'half-level' (:func:`half_level_centres`: flat-topped real micro-images). Returns a
    :class:`_Spots`.
    """
    h, w = img.shape
    for attempt in range(2):
        smap = micro_image_map(img, spacing, dark_fraction=dark_fraction, radius=radius)
        cand = _candidates(smap, spacing, img)
        if len(cand) < _MIN_SPOTS:
            raise DetectionError(
                f'grid spots stage: no peaks: found {len(cand)} micro-image spots, need at '
                f'least {_MIN_SPOTS} (spacing {spacing:.2f} px); {_ADVICE}')
        kind, rot, pitch, row_spacing = _rotation_and_type(cand, lattice)
        # the period the spectrum should have shown for this lattice
        implied = row_spacing if kind == 'hex' else max(pitch, row_spacing)
        if abs(implied / spacing - 1.0) < 0.2:
            break
        if attempt == 1:
            raise DetectionError(
                f'grid spots stage: inconsistent pitch: spots {implied:.2f} px apart, spectrum '
                f'{spacing:.2f} px; {_ADVICE}')
        spacing = implied
    all_cand = cand
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
    refined, kept = refine_centres(smap, cand, max(1.0, 0.3 * nn))
    if estimator == 'half-level':
        # starts from the map's peaks, or from the candidates where the map is flat
        centres = cand.astype(float)
        centres[kept] = refined
    else:
        centres = refined
    # micro-images cut by the image border have biased centres: only whole ones count
    whole = ((centres[:, 0] >= 0.5 * nn - 0.5) & (centres[:, 0] <= w - 0.5 - 0.5 * nn)
             & (centres[:, 1] >= 0.5 * nn - 0.5) & (centres[:, 1] <= h - 0.5 - 0.5 * nn))
    if estimator == 'half-level':
        centres, _ = half_level_centres(img, centres[whole], nn)
    else:
        centres = centroid_centres(img, centres[whole], max(1.0, 0.5 * nn))
    if len(centres) < _MIN_SPOTS:
        raise DetectionError(
            f'grid spots stage: no peaks: only {len(centres)} micro-image spots lie inside the '
            f'image, need at least {_MIN_SPOTS} (spacing {spacing:.2f} px); {_ADVICE}')
    check_micro_images_lit(img, centres)
    kind, rot, pitch, row_spacing = _rotation_and_type(centres, kind)
    nn = _neighbour_distance(kind, pitch, row_spacing)
    return _Spots(kind, rot, pitch, row_spacing, nn, spacing, centres, all_cand, smap)


def assign_indices(spots, image_size):
    """
    Lattice indices (N, 2) of the spots' centres and their inlier mask (N,) bool.

    Grown from the spot nearest the image centre over doubling radii; the map from indices
    to centres is a polynomial there (a cubic once enough spots are assigned), so a pitch
    that varies slowly across the image does not break the counting. Inliers: within five
    robust sigmas of that map, one spot per index. Raises DetectionError when a smooth
    lattice explains under half of the spots.
    """
    centres, kind, pitch = spots.centres, spots.kind, spots.pitch
    hexagonal = kind == 'hex'
    w, h = image_size
    mid = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    start = centres[int(np.argmin(np.hypot(*(centres - mid).T)))]
    r, c = _lattice_basis(pitch, spots.row_spacing, spots.rotation)
    # the growing stages use at most ~5000 spots (all of those near the start)
    dist_start = np.hypot(*(centres - start).T)
    stride = max(1, len(centres) // 5000)
    subset = (np.arange(len(centres)) % stride == 0) | (dist_start <= 20.0 * pitch)
    try:
        kl, poly = _grow_assignment(centres, centres[subset], dist_start[subset], start, r, c,
                                    6.0 * pitch, hexagonal)
    except np.linalg.LinAlgError:
        raise DetectionError(
            f'grid lattice stage: inconsistent pitch: the {len(centres)} spots do not form a '
            f'{kind} lattice (degenerate index assignment); {_ADVICE}') from None
    norm = np.hypot(*(centres - poly.predict(kl)).T)
    scale = max(1.4826 * float(np.median(norm)), 0.01 * pitch)
    inl = norm < max(5.0 * scale, 0.05 * pitch)
    # one spot per lattice index: duplicates keep the closest
    order = np.lexsort((norm, kl[:, 1], kl[:, 0]))
    same = np.all(kl[order][1:] == kl[order][:-1], axis=1)
    inl[order[1:][same]] = False
    if np.count_nonzero(inl) < 0.5 * len(centres) or np.median(norm) > 0.2 * pitch:
        raise DetectionError(
            f'grid lattice stage: inconsistent pitch: a smooth {kind} lattice explains only '
            f'{np.count_nonzero(inl)} of {len(centres)} spots (median residual '
            f'{np.median(norm):.2f} px, pitch {pitch:.2f} px); {_ADVICE}')
    return kl, inl


def fit_regular(spots, kl, inl):
    """
    Least-squares regular lattice (ox, oy, pitch, row_spacing, rotation) (5,) and its fit mask.

    Micro-images cut by the lens barrel (cat's eyes, towards the field's edge) have centres
    pulled inwards, which shrank the fitted pitch (full-size Lytro: 0.4 px mean centre error):
    the lattice is fitted to whole ones, by the area of their bright disk. Returns
    ``(params (5,), used (N,) bool)``.
    """
    area = _spot_area(spots.smap, spots.centres, 0.5 * spots.nn)
    for keep in (0.98, 0.9):
        whole = inl & (area >= keep * np.percentile(area[inl], 90))
        if np.count_nonzero(whole) >= max(_MIN_SPOTS, 0.25 * np.count_nonzero(inl)):
            inl = whole
            break
    r, _ = _lattice_basis(spots.pitch, spots.row_spacing, spots.rotation)
    hexagonal = spots.kind == 'hex'
    rot0 = float(np.arctan2(r[1], r[0]))
    p = _fit_orthogonal(spots.centres[inl], kl[inl], hexagonal, rot0)
    trusted = _unbiased_radius(spots, kl, inl, p, hexagonal, rot0)
    if trusted is not None:
        inl = inl & (_radius(spots) < trusted)
        p = _fit_orthogonal(spots.centres[inl], kl[inl], hexagonal, rot0)
    return p, inl


def _radius(spots):
    """Distance (N,) of the spots from the image centre (px)."""
    h, w = spots.smap.shape
    return np.hypot(spots.centres[:, 0] - (w - 1) / 2.0, spots.centres[:, 1] - (h - 1) / 2.0)


def _unbiased_radius(spots, kl, used, p_all, hexagonal, rot0, *, bins=16):
    """
    The radius inside which the spots' centres are free of a radial bias, or None.

    Micro-images whose centroid is pulled towards the axis (the onset of cat's eyes, where the
    barrel starts to cut them, and the vignetting gradient) bias every lattice fit that
    includes them by a scale error: at full Lytro size the pitch came out 4e-5 short, 0.05 px
    mean centre error at the border. A lattice fitted to the central third of the used spots
    is the reference; annuli of equal counts outward are kept while their mean radial residual
    stays within 3 standard errors + 0.01 px of zero. None when every annulus passes (the
    full fit stands) or too few spots.
    """
    rad = _radius(spots)
    n_used = int(np.count_nonzero(used))
    if n_used < 3 * bins * 10:
        return None
    inner = used & (rad <= np.percentile(rad[used], 33.0))
    p0 = _fit_orthogonal(spots.centres[inner], kl[inner], hexagonal, rot0)
    h, w = spots.smap.shape
    vec = spots.centres - np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    res = spots.centres - _model(kl, hexagonal, p0)
    radial = np.sum(res * vec, axis=1) / np.maximum(rad, 1.0)
    edges = np.percentile(rad[used], np.linspace(0.0, 100.0, bins + 1))
    for lo, hi in zip(edges[1:-1], edges[2:]):
        ring = used & (rad >= lo) & (rad <= hi)
        vals = radial[ring]
        if abs(vals.mean()) > 3.0 * vals.std() / np.sqrt(len(vals)) + 0.01:
            return float(lo) if lo > np.percentile(rad[used], 33.0) else None
    return None


def fit_deformation(regular_xy, residual, used, image_size, nn, *, max_degree=5,
                    min_degree=0):
    """
    The smooth deformation the residuals need, or None when the regular lattice suffices.

    regular_xy (N, 2) regular-lattice positions of the spots, residual (N, 2) measured minus
    regular, used (N,) bool the spots to fit, nn the lens spacing (px). Polynomials of degree
    1..``max_degree`` of the position (normalised to the image; at least 20 spots per term)
    are fitted. The regular lattice is kept (None) unless it leaves a systematic error
    sqrt(rms_0^2 - rms_best^2) of 1 % of the lens spacing or more (or ``min_degree`` >= 1):
    centroid biases of a few hundredths of a pixel (pixel phase, vignetting) are not a
    deformation, and a polynomial fitted to them only adds extrapolation error at the border.
    Otherwise the lowest degree within 5 % + 0.002 nn of the best RMS is taken. Returns
    ``(LatticeDeformation or None, rms_by_degree dict)``.
    """
    w, h = image_size
    centre = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    scale = np.array([w / 2.0, h / 2.0])
    xy, res = regular_xy[used], residual[used]
    step = max(1, len(xy) // 6000)               # 21 terms need no 10^4 spots
    xy, res = xy[::step], res[::step]
    rms = {0: float(np.sqrt(np.mean(np.sum(res ** 2, axis=1))))}
    fits = {}
    for degree in range(1, max_degree + 1):
        if len(xy) < 20 * (degree + 1) * (degree + 2) // 2:
            break
        d = LatticeDeformation.fit(xy, res, degree, centre, scale)
        fits[degree] = d
        rms[degree] = float(np.sqrt(np.mean(np.sum((res - d.displacement(xy)) ** 2, axis=1))))
    best = min(rms.values())
    systematic = np.sqrt(max(rms[0] ** 2 - best ** 2, 0.0))
    if min_degree < 1 and systematic < 0.01 * nn:
        return None, rms
    ok = [k for k, v in rms.items() if v <= 1.05 * best + 0.002 * nn and k >= max(1, min_degree)]
    if not ok:
        return None, rms
    return fits[min(ok)], rms


def build_grid(kind, p, deformation, image_size):
    """
    The LensletGrid (with ``deformation``) numbered by :func:`numbered_grid`'s rule.

    p (5,) = (ox, oy, pitch, row_spacing, rotation) of a lattice whose index (0, 0) is at
    (ox, oy) with hex_parity 0. Returns ``(grid, to_grid)``: to_grid maps the fit's indices
    kl (N, 2) to the grid's.
    """
    ref = LensletGrid(kind, float(p[2]), float(p[3]), float(p[4]), p[:2], (1, 1), image_size,
                      hex_parity=0)
    try:
        grid = numbered_grid(kind, float(p[2]), float(p[3]), float(p[4]), p[:2], image_size,
                             deformation)
    except InvalidInputError as exc:
        raise DetectionError(f'the fitted lattice: {exc}') from None

    def to_grid(kl):
        return regular_indices(grid, ref.centres_of(kl))
    return grid, to_grid


def spot_scatter(residuals, indices, used):
    """
    RMS noise (px, norm) of measured centres from their residuals (N, 2) against a lattice.

    The second difference r(k) - (r(k-1) + r(k+1)) / 2 along each row (indices (N, 2) (k, l),
    ``used`` (N,) bool) removes any smooth lattice error and has 1.5 x the variance of
    independent centre noise. NaN with fewer than 10 such triples.
    """
    kl = np.asarray(indices, dtype=np.int64)[used]
    res = np.asarray(residuals, dtype=float)[used]
    if len(kl) < 3:
        return float('nan')
    off = kl.min(axis=0)
    span = int(kl[:, 1].max() - off[1]) + 3
    key = (kl[:, 0] - off[0] + 1) * span + (kl[:, 1] - off[1] + 1)
    order = np.argsort(key)
    skey = key[order]

    def find(k):
        pos = np.clip(np.searchsorted(skey, k), 0, len(skey) - 1)
        return order[pos], skey[pos] == k
    left, has_l = find(key - span)
    right, has_r = find(key + span)
    both = has_l & has_r
    if np.count_nonzero(both) < 10:
        return float('nan')
    d = res[both] - 0.5 * (res[left[both]] + res[right[both]])
    return float(np.sqrt(np.mean(np.sum(d * d, axis=1)) / 1.5))


def grid_quality(grid, spots, indices, used, rms_regular, estimator='map'):
    """
    The :class:`GridQuality` of ``grid`` against the spots (indices (N, 2) in the grid's
    convention, used (N,) bool the spots of the fit).
    """
    w, h = grid.image_size
    nn = spots.nn
    res = spots.centres - grid.centres_of(indices)
    norm = np.hypot(res[:, 0], res[:, 1])
    rms = float(np.sqrt(np.mean(norm[used] ** 2)))
    explained = float(np.mean(norm < 0.25 * nn))
    xy = grid.centres()
    inside = (xy[:, 0] >= -0.5) & (xy[:, 0] <= w - 0.5) & (xy[:, 1] >= -0.5) & \
             (xy[:, 1] <= h - 0.5)
    outside = float(1.0 - np.mean(inside))
    # coverage: every lattice position well inside the image whose micro-image map is bright
    # must hold a detected peak (a lattice finer than the micro-images leaves most empty)
    m = 0.5 * nn + 1.0
    well = xy[(xy[:, 0] >= m) & (xy[:, 0] <= w - 1 - m) & (xy[:, 1] >= m)
              & (xy[:, 1] <= h - 1 - m)]
    step = max(1, len(well) // 20000)
    well = well[::step]
    bright = spots.smap[np.rint(well[:, 1]).astype(int), np.rint(well[:, 0]).astype(int)]
    well = well[bright > 0.5 * float(np.percentile(spots.smap[::4, ::4], 99))]
    if len(well):
        d, _ = cKDTree(spots.candidates).query(well, distance_upper_bound=0.3 * nn)
        covered = float(np.mean(np.isfinite(d)))
    else:
        covered = 0.0
    if grid.deformation is not None:
        degree = grid.deformation.degree
        max_def = float(np.max(np.hypot(*grid.deformation.displacement(
            grid.regular().centres()).T)))
    else:
        degree, max_def = 0, 0.0
    scatter = spot_scatter(res, indices, used)
    lattice_error = float(np.sqrt(max(rms ** 2 - scatter ** 2, 0.0))) if np.isfinite(scatter) \
        else float('nan')
    return GridQuality(rms, float(norm[used].max()), float(rms_regular), explained, covered,
                       outside, degree, max_def, int(len(norm)), float(nn), scatter,
                       lattice_error, estimator)


def _fit_grid(img, spacing, lattice, dark_fraction, max_spots, deformation, radius,
              estimator='map'):
    """
    :func:`measure_spots` (on the micro-image map of local-maximum ``radius``, centres by
    ``estimator``) ->
    :func:`assign_indices` -> :func:`fit_regular` -> :func:`fit_deformation` ->
    :func:`build_grid` -> :func:`grid_quality`; returns the unchecked :class:`GridEstimate`.
    """
    h, w = img.shape
    spots = measure_spots(img, spacing, lattice, dark_fraction=dark_fraction,
                          max_spots=max_spots, radius=radius, estimator=estimator)
    # dusty micro-images (a shadow on the lens array) have shifted centres: not fitted
    dusty = dusty_micro_images(img, spots.centres, spots.nn)
    if np.count_nonzero(~dusty) >= _MIN_SPOTS:
        spots = dataclasses.replace(spots, centres=spots.centres[~dusty])
    kl, inl = assign_indices(spots, (w, h))
    p, used = fit_regular(spots, kl, inl)
    hexagonal = spots.kind == 'hex'
    regular_xy = _model(kl, hexagonal, p)
    residual = spots.centres - regular_xy
    rms_by_degree = {0: float(np.sqrt(np.mean(np.sum(residual[used] ** 2, axis=1))))}
    deform = None
    if deformation == 'auto':
        # whether the lattice is deformed is decided on the whole micro-images; how, on every
        # inlier (a pitch that varies shrinks the micro-images towards the field's edge, where
        # the deformation is largest) but robustly (cat's eyes there are pulled inwards)
        deform, rms_by_degree = fit_deformation(regular_xy, residual, used, (w, h), spots.nn)
        if deform is not None:
            used = inl
            for _ in range(3):
                deform, rms_by_degree = fit_deformation(regular_xy, residual, used, (w, h),
                                                        spots.nn, min_degree=1)
                if deform is None:
                    used = inl
                    break
                norm = np.hypot(*(residual - deform.displacement(regular_xy)).T)
                sigma = 1.4826 * float(np.median(norm[used]))
                used = inl & (norm < max(3.0 * sigma, 0.05 * spots.nn))
    grid, to_grid = build_grid(spots.kind, p, deform, (w, h))
    indices = to_grid(kl)
    quality = grid_quality(grid, spots, indices, used, rms_by_degree[0], estimator)
    residuals = spots.centres - grid.centres_of(indices)
    est = GridEstimate(grid, spots.centres, indices, residuals, used, quality.rms_px,
                       spots.spacing, quality)
    return est


GRIDS_KEPT = 4
"""Grid estimates kept for the whites they were fitted to (:func:`estimate_grid_with_quality`);
0 fits every call afresh (a benchmark timing the estimator)."""

_GRIDS = KeptResults()


def estimate_grid_with_quality(white, **options):
    """
    Fit the micro-image lattice to a white image; returns a :class:`GridEstimate`
    (:func:`_fit_grid_to_white` has the stages and ``options``).

    The estimate of a white and options fitted before is a copy of the one kept (the last
    GRIDS_KEPT, keyed by the white's pixels, shape and type and the options): a white is fitted
    once per process however many sessions, data sets or nodes read it (1-3 s a white; full
    size 2-10 s). Refusals are not kept: each call raises them afresh.
    """
    arr = np.ascontiguousarray(white) if isinstance(white, np.ndarray) else None
    if arr is None or arr.dtype.kind not in 'biuf' or GRIDS_KEPT <= 0:   # (refused: checks)
        return _fit_grid_to_white(white, **options)
    key = (hashlib.blake2b(arr.view(np.uint8).reshape(-1), digest_size=16).hexdigest(),
           arr.shape, arr.dtype.str, repr(sorted(options.items())))
    kept = _GRIDS.get(key, lambda: _fit_grid_to_white(white, **options), GRIDS_KEPT)
    return copy.deepcopy(kept)


def _fit_grid_to_white(white, *, lattice='auto', expected_size=None, spacing=None,
                       dark_fraction=0.05, max_spots=15000, deformation='auto', check=True):
    """
    Fit the micro-image lattice to a white image; returns a :class:`GridEstimate`.

    Stages: :func:`check_white` (bad input refused first) -> :func:`lattice_spacing` ->
    :func:`measure_spots` -> :func:`assign_indices` -> :func:`fit_regular` ->
    :func:`fit_deformation` (``deformation`` 'auto', or False for a regular lattice) ->
    :func:`build_grid` -> :func:`grid_quality`, on the 3 x 3 micro-image map, and again on the
    :func:`wide_radius` one when that is refused or fails its check. With ``check`` (default)
    a grid that fails any :class:`GridQuality` limit raises DetectionError listing the figures
    and limits; ``check=False`` returns it with its figures (``.quality``) for inspection. Other
    parameters as :func:`estimate_grid`.
    """
    if lattice not in LATTICES + ('auto',):
        raise InvalidInputError(f"lattice must be 'auto', 'hex' or 'rect', got {lattice!r}")
    if deformation not in ('auto', False, None):
        raise InvalidInputError(f"deformation must be 'auto' or False, got {deformation!r}")
    img = as_intensity(white)
    h, w = img.shape
    if expected_size is not None and tuple(int(v) for v in expected_size) != (w, h):
        raise InvalidInputError(
            f'white image must be {int(expected_size[0])} x {int(expected_size[1])} '
            f'(width x height), got {w} x {h}')
    raw_dtype = np.asarray(white).dtype
    full_scale = float(np.iinfo(raw_dtype).max) if raw_dtype.kind in 'ui' else None
    check_white(img, full_scale=full_scale)
    spacing = lattice_spacing(without_pedestal(img), spacing)
    check_white(img, spacing)
    # grids from the 3 x 3 map's peaks, half-level centroids (flat-topped micro-images) and,
    # when the first does not agree with the second, the wide map's (soft-rimmed touching
    # micro-images); :func:`_preferred` picks among those that pass their checks; the first
    # refusal is raised when none passes
    first, passed, found = None, [], None
    for radius, estimator in ((1, 'map'), (1, 'half-level'), (wide_radius(spacing), 'map')):
        if radius != 1 and _preferred(passed, final=False) is not None:
            break
        try:
            est = _fit_grid(img, spacing, lattice, dark_fraction, max_spots, deformation,
                            radius, estimator)
        except DetectionError as exc:
            first = first or exc
            continue
        if est.quality.failures():
            found = found or est
            first = first or _check_failure(est)
        else:
            passed.append(est)
    if passed:
        return _preferred(passed)
    if check or found is None:
        raise first
    return found


MAX_COMMON_SHIFT_PX = 0.03      # a map grid further from the half-level one is not kept
MAX_MEDIAN_SHIFT_PX = 0.15


def _preferred(estimates, final=True):
    """
    Of grids that passed their checks, the one kept: the first map grid (3 x 3, then wide)
    that agrees with the half-level grid (common shift within 0.03 px, median distance
    within 0.15 px over the half-level spots), else the half-level grid. ``final`` False: None
    while no map grid agrees yet (the wide map's is still to try).

    The map's peaks are free of the intensity gradient across a micro-image (vignetting, the
    lens barrel's cut: at full Lytro size the half-level pitch is 1e-4 short), but on
    flat-topped micro-images (real whites) they scatter by up to 1 px and the lattice fitted
    to them moves as a whole (0.5 px on the guv white) without any residual showing it;
    half-level centroids do not depend on the profile.
    """
    half = [e for e in estimates if e.quality.estimator == 'half-level']
    maps = [e for e in estimates if e.quality.estimator == 'map']
    if not half or (maps and not np.isfinite(half[0].quality.spot_scatter_px)):
        # too few lenses in rows to judge the half-level spots
        return estimates[0] if (estimates and (final or maps)) else None
    ref = half[0].grid.centres_of(half[0].indices)                      # (N, 2)
    for e in maps:
        centres = e.grid.centres()
        dist, nearest = cKDTree(centres).query(ref)
        shift = np.hypot(*(centres[nearest] - ref).mean(axis=0))
        if shift <= MAX_COMMON_SHIFT_PX and np.median(dist) <= MAX_MEDIAN_SHIFT_PX:
            return e
    return half[0] if final else None


def _check_failure(est):
    """The DetectionError of a :class:`GridEstimate` that fails its quality limits."""
    grid = est.grid
    return DetectionError(
        f'grid check stage: the fitted {grid.lattice} grid (pitch {grid.pitch:.3f} px, '
        f'rotation {np.degrees(grid.rotation):.3f} deg, {grid.shape[0]} x '
        f'{grid.shape[1]} lenses) is not trustworthy: ' + '; '.join(est.quality.failures())
        + f'; {_ADVICE}')


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
        Approximate period of the micro-image rows (px); from the spectrum when None.
    dark_fraction : float
        Spots whose surroundings are darker than this fraction of the bright level are ignored.
    max_spots : int
        At most about this many micro-images are measured (square tiles of lenses spread over
        the image, for speed); the lattice is fitted to them.
    return_details : bool
        Return a :class:`GridEstimate` (with ``quality``) instead of the LensletGrid.

    Returns
    -------
    LensletGrid (or GridEstimate). The grid covers every lattice position whose row holds a
    micro-image centre inside the image, from the first to the last column index seen in any
    row, so a few positions at the ends of rows may fall just outside the image. Where a
    regular lattice does not explain the centres, the grid carries a LatticeDeformation.

    Raises
    ------
    InvalidInputError
        Wrong shape, dtype, size, or lattice name.
    DetectionError
        Not a white image (dark, uniform, saturated, a scene), no periodic structure, too few
        spots, inconsistent pitch, or a fit that fails the checks of :class:`GridQuality`.

    """
    est = estimate_grid_with_quality(white, lattice=lattice, expected_size=expected_size,
                                     spacing=spacing, dark_fraction=dark_fraction,
                                     max_spots=max_spots)
    return est if return_details else est.grid
