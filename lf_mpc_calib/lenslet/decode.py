"""
Raw lenslet frames -> 4-D light field L(i, j, u, v), and micro-image indexing.

Conventional decoding: view (i, j) samples every micro-image at
``centre + i * e_row + j * e_col`` (unit vectors along the lattice axes, raw pixels; bilinear),
so (0, 0) is the micro-image centre. View pixel (u, v) is the lattice position
``origin + u * row_vector + v * column_vector`` of the UNSHIFTED lattice: on a hexagonal lattice
a row shifted by half a pitch is resampled onto it by averaging the two neighbouring lenses of
that row (at u - 1/2 and u + 1/2; the first position of the row takes its one lens), and the
unshifted rows are blurred along u by (1/8, 3/4, 1/8) to the same blur, so corners are not
pulled towards one row parity (:func:`_match_row_blur`). A view is
an image of shape (rows, cols) = (grid.shape[1], grid.shape[0]).

The decode map is built once per grid (:class:`Decoder`): one ``cv2.remap`` map
per view, the hexagonal resampling, and the devignetting gain (the white image decoded through
the same maps). Decoding a frame is then a gather, never a search: bands of lens rows are
remapped for all views from the frame in its own 8/16-bit dtype into a small buffer that stays
in cache, and gain and hexagonal resampling are applied to it in one pass that writes the
float32 output once (about 65 ms for 9 x 9 views of a Lytro-size frame on one core; 35 ms
for the 37 usable ones only: ``Decoder.decode(raw, only=mask)``).

Focused cameras: :class:`MicroImageIndex` lists the micro-image centres and tells which
micro-image a raw pixel belongs to; observations there are (i, j) = micro-image centre
(absolute raw px) and (u, v) = raw pixel - centre.
"""

from dataclasses import dataclass

import math

import cv2
import numpy as np
from scipy.spatial import cKDTree

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.demosaic import BAYER_PATTERNS, demosaic
from lf_mpc_calib.lenslet.grid import LensletGrid, MAX_IMAGE_SIDE
from lf_mpc_calib.lenslet.views import aperture_radius, clean_views
from lf_mpc_calib.lenslet.white_weighting import white_centroid_positions, white_level_floor

RAW_DTYPES = (np.uint8, np.uint16, np.float32, np.float64)
_BAND = 16          # lens rows per remap band


@dataclass(frozen=True, eq=False)
class LightField:
    """
    Decoded sub-aperture views.

    views (n_j, n_i, rows, cols) float32, or (n_j, n_i, rows, cols, 3) RGB, indexed
    [j_index, i_index, v, u]; i_values (n_i,), j_values (n_j,) integer view indices (e.g. -4..4);
    valid (n_j, n_i) bool usable views; grid the LensletGrid it was decoded with.
    """

    views: np.ndarray
    i_values: np.ndarray
    j_values: np.ndarray
    valid: np.ndarray
    grid: LensletGrid

    def __post_init__(self):
        v = self.views
        if v.ndim not in (4, 5) or v.shape[:2] != (len(self.j_values), len(self.i_values)):
            raise InvalidInputError(
                f'views must have shape (n_j, n_i, rows, cols[, 3]) with n_j = '
                f'{len(self.j_values)}, n_i = {len(self.i_values)}, got {v.shape}')
        if np.shape(self.valid) != v.shape[:2]:
            raise InvalidInputError(f'valid must have shape {v.shape[:2]}, got '
                                    f'{np.shape(self.valid)}')

    @property
    def view_shape(self):
        """(rows, cols) of one view."""
        return self.views.shape[2:4]

    @property
    def central_index(self):
        """(j_index, i_index) of the view (0, 0)."""
        return (int(np.flatnonzero(self.j_values == 0)[0]),
                int(np.flatnonzero(self.i_values == 0)[0]))

    def view(self, i, j):
        """The view with indices i, j (values, not positions)."""
        ji = np.flatnonzero(self.j_values == j)
        ii = np.flatnonzero(self.i_values == i)
        if ji.size == 0 or ii.size == 0:
            raise InvalidInputError(
                f'no view ({i}, {j}); i in {list(self.i_values)}, j in {list(self.j_values)}')
        return self.views[ji[0], ii[0]]

    def ijuv_of(self, j_index, i_index, uv):
        """Indexed pixels (N, 4) = (i, j, u, v) of view pixels uv (N, 2) of one view."""
        uv = np.asarray(uv, dtype=float).reshape(-1, 2)
        out = np.empty((len(uv), 4))
        out[:, 0] = self.i_values[i_index]
        out[:, 1] = self.j_values[j_index]
        out[:, 2:] = uv
        return out


def mosaic(lightfield):
    """All views tiled into one image (n_j * rows, n_i * cols[, 3]); row of tiles = j."""
    v = lightfield.views
    nj, ni, rows, cols = v.shape[:4]
    rest = v.shape[4:]
    return v.swapaxes(1, 2).reshape((nj * rows, ni * cols) + rest)


MAX_VIEW_COUNT = 2 * MAX_IMAGE_SIDE + 1
"""Views a side, at most, whatever the grid (its own bound is :func:`max_views`)."""


def view_indices(views):
    """Integer view values (n,) for a count (odd) or for ``radius`` -> 2 * radius + 1 values."""
    n = int(views)
    if n < 1 or n % 2 == 0 or n > MAX_VIEW_COUNT:
        raise InvalidInputError(f'a view count must be odd, from 1 to {MAX_VIEW_COUNT}, got '
                                f'{views}')
    half = n // 2
    return np.arange(-half, half + 1)


def max_views(grid):
    """Most views a side that fall within one micro-image of ``grid`` (odd)."""
    return 2 * int(math.ceil(float(grid.pitch) / 2)) + 1


def _parse_views(views):
    if np.isscalar(views):
        r = int(views)
        if r < 0 or r != views:
            raise InvalidInputError(f'views radius must be a non-negative integer, got {views}')
        return np.arange(-r, r + 1), np.arange(-r, r + 1)
    try:
        n_i, n_j = (int(x) for x in views)
    except (TypeError, ValueError):
        raise InvalidInputError(f'views must be (n_i, n_j) or a radius, got {views!r}') from None
    return view_indices(n_i), view_indices(n_j)


def _shifted_rows(grid):
    """(the lens rows (R,) a hexagonal grid shifts by half a pitch, the first of them (0 or
    1)); a rectangular grid: (none, None)."""
    rows = grid.shape[1]
    if grid.lattice != 'hex':
        return np.zeros(0, dtype=int), None
    return (np.flatnonzero((np.arange(rows) + grid.hex_parity) % 2 == 1),
            (1 - grid.hex_parity) % 2)


class Decoder:
    """
    Reusable raw -> light-field decoder for one lenslet grid.

    Parameters
    ----------
    grid : LensletGrid
    white : (H, W) ndarray, optional
        White image of the same size (same dtype as the raw frames): devignetting gain and the
        usable views come from it. Without it the gain is 1 and a view is bright when its
        offset lies within pitch / 2 - 1 px of the centre.
    views : (n_i, n_j) odd counts, or an int radius (2 r + 1 views a side)
    demosaic : None | 'rggb' | 'bggr' | 'gbrg' | 'grbg'
        Bayer pattern of the raw frames; the views are then RGB.
    min_white : float
        A view is bright when its median white level is at least this fraction of the central
        view's; samples darker than a tenth of the white's bright level get gain 0, and views
        that are not bright are decoded as 0.
    strict : bool
        ``valid`` (the usable views, which geometry should use) keeps only the bright views
        that are :func:`~lf_mpc_calib.lenslet.views.clean_views`: their bilinear samples read
        their own micro-image and, with a white image, its bright disk only (radius
        :func:`~lf_mpc_calib.lenslet.views.aperture_radius`). Views that fail this shift
        board corners by 0.01-0.5 px on rendered Lytro data. When fewer than 5 views would
        remain (micro-images of a few pixels) ``valid`` falls back to the bright views.
        False: ``valid`` is ``bright``.
    exact : bool
        Float maps (default; measured faster at Lytro size) instead of pre-converted
        fixed-point maps. Either way OpenCV's bilinear remap quantises the weights to 1/32 px,
        so at a micro-image edge (a 200-level step over 1 px) a sample may differ from exact
        bilinear interpolation by a few levels.
    precise : bool
        Remap 8/16-bit frames in float32 (slower) instead of in their own dtype, where OpenCV
        rounds each bilinear sample to a whole level (an error of at most half a level before
        the devignetting gain).
    white_centroids : bool
        With a white image, move each sample position so that the white-weighted centroid of
        its bilinear pixels is the view's offset
        (:func:`~lf_mpc_calib.lenslet.white_weighting.white_centroid_positions`): the
        devignetting divides by the interpolated white, which otherwise pulls every view
        towards the micro-image centre (full-size Lytro: the baseline k_i, k_j about 0.2 %
        short). False: sample at the offsets as they are.
    bad_pixels : (H, W) bool, optional
        Pixels to leave out (hot, dead, dusty micro-images: :mod:`~lf_mpc_calib.lenslet.defects`):
        every view sample that reads one (or, in shifted hexagonal rows, whose neighbour lens
        does) gets gain 0 and decodes as 0, never devignetted into bright noise.

    Attributes: ``bright`` (n_j, n_i) bool views with enough light (the others decode to 0);
    ``valid`` (n_j, n_i) bool usable views (see ``strict``), passed on in each LightField.
    """

    def __init__(self, grid, *, white=None, views=(9, 9), demosaic=None, min_white=0.5,
                 strict=True, exact=True, precise=False, white_centroids=True,
                 bad_pixels=None):
        if not isinstance(grid, LensletGrid):
            raise InvalidInputError(f'grid must be a LensletGrid, got {type(grid).__name__}')
        if demosaic is not None and demosaic not in BAYER_PATTERNS:
            raise InvalidInputError(
                f'unsupported Bayer pattern {demosaic!r}; expected one of {BAYER_PATTERNS}')
        self.grid = grid
        self.bayer = demosaic
        self.i_values, self.j_values = _parse_views(views)
        most = max_views(grid)
        if max(len(self.i_values), len(self.j_values)) > most:
            raise InvalidInputError(
                f'views {len(self.i_values)}x{len(self.j_values)} reach beyond the micro-images '
                f'(pitch {grid.pitch:.3g} px): at most {most} a side')
        self.exact = bool(exact)
        self._integer_remap = not bool(precise)
        w, h = grid.image_size
        if w > 32767 or h > 32767:
            raise InvalidInputError(f'image size {w} x {h} exceeds 32767 px (OpenCV remap)')
        self._dtype = None
        cols, rows = grid.shape
        self._rows, self._cols = rows, cols
        source = None
        if white is not None:
            white = self._check_raw(white, 'white', check_dtype=False)
            source = self._prepare(white)       # demosaicked once: for the maps and the gain
        pos = self._sample_positions(source if white_centroids else None)
        self._maps = {key: self._remap_map(pos[key]) for key in np.ndindex(pos.shape[:2])}
        self._shifted, self._s0 = _shifted_rows(grid)
        self._gain = None
        self._central_gain = None
        if white is not None:
            self._dtype = white.dtype
            self.bright, gain, radius = self._white_gains(source, min_white)
            self._gain = gain
        else:
            self.bright, gain, radius = self._uniform_gains()
        self.masked = None
        if bad_pixels is not None:
            gain = self._mask_bad(gain, bad_pixels)
        self.valid = self.bright.copy()
        if strict:
            clean = self.bright & clean_views(grid, self.i_values, self.j_values, radius=radius)
            if np.count_nonzero(clean) >= 5:
                self.valid = clean
        self._gain_a, self._gain_b = self._fused_gain(gain)
        self._gain_cache = {}

    def _sample_positions(self, white):
        """
        Raw (x, y) px (n_j, n_i, rows, cols, 2) float32 of every view's sample of every lens
        (lens k = u of row v; shifted rows: the lens right of u): the lens centre plus the
        view's offset along the row and column vectors, moved by the (demosaicked) ``white``
        so that its weighting is undone (white_weighting), or not (None).
        """
        grid, rows, cols = self.grid, self._rows, self._cols
        l_, k = np.mgrid[0:rows, 0:cols]
        centres = grid.centres_of(np.column_stack([k.ravel(), l_.ravel()])).reshape(rows, cols, 2)
        e_r = grid.row_vector / grid.pitch
        e_c = grid.column_vector / grid.row_spacing
        pos = (centres[None, None] + self.i_values[None, :, None, None, None] * e_r
               + self.j_values[:, None, None, None, None] * e_c).astype(np.float32)
        if white is None:
            return pos
        plain = np.ascontiguousarray(white if white.ndim == 2 else white.mean(axis=2))
        return np.stack(white_centroid_positions(plain, pos[..., 0], pos[..., 1],
                                                 floor=white_level_floor(plain)), axis=-1)

    def _remap_map(self, pos):
        """OpenCV remap maps of one view's sample positions (rows, cols, 2): float (exact) or
        fixed-point."""
        mx, my = pos[..., 0], pos[..., 1]
        if self.exact:
            return np.ascontiguousarray(mx), np.ascontiguousarray(my)
        return cv2.convertMaps(mx, my, cv2.CV_16SC2)

    def _white_gains(self, source, min_white):
        """(bright (n_j, n_i) bool, devignetting gains (n_j, n_i, rows, cols[, C]) float32, the
        micro-images' aperture radius px) from the demosaicked white ``source``: a view is
        bright at min_white of the central view's median level; a sample's gain brings it to
        the central view's 99th percentile, 0 below a tenth of it or in a dark view."""
        wl = self._resample_hex(self._remap_all(source))
        central = wl[self._central_position()]
        bright = float(np.percentile(central, 99)) if central.size else 0.0
        if bright <= 0:
            raise InvalidInputError('white image decodes to a dark central view; is it a '
                                    'white image of this grid?')
        level = np.median(wl, axis=tuple(range(2, wl.ndim)))
        lit = level >= min_white * float(np.median(central))
        ref = np.percentile(central.reshape(-1, *wl.shape[4:]), 99, axis=0)
        ref = np.asarray(ref, dtype=np.float32)
        with np.errstate(divide='ignore', invalid='ignore'):
            gain = np.where(wl > 0.1 * ref, ref / wl, 0.0).astype(np.float32)
        gain[~lit] = 0.0
        radius = aperture_radius(source if source.ndim == 2 else source.mean(axis=2), self.grid)
        return lit, gain, radius

    def _uniform_gains(self):
        """(bright, gains 1 in a bright view and 0 elsewhere, radius None) without a white:
        a view is bright when its offset lies within pitch / 2 - 1 px of the centre."""
        ii, jj = np.meshgrid(self.i_values, self.j_values)
        bright = np.hypot(ii, jj) <= 0.5 * self.grid.pitch - 1.0
        gain = np.zeros((len(self.j_values), len(self.i_values), self._rows, self._cols),
                        np.float32)
        gain[bright] = 1.0
        return bright, gain, None

    def gains(self):
        """Devignetting gains (n_j, n_i, rows, cols[, C]) of every sample (0: left out)."""
        a = np.array(self._gain_a)
        if self._gain_b is not None:            # shifted rows: the two halves of the fuse
            a[:, :, self._s0::2, 1:] *= 2.0
        return a

    def _mask_bad(self, gain, bad_pixels):
        """gain (n_j, n_i, rows, cols) with 0 at every sample touching ``bad_pixels``."""
        w, h = self.grid.image_size
        bad_pixels = np.asarray(bad_pixels, dtype=bool)
        if bad_pixels.shape != (h, w):
            raise InvalidInputError(f'bad_pixels must have shape {(h, w)}, got '
                                    f'{bad_pixels.shape}')
        bad = self._remap_all(bad_pixels.astype(np.float32)) > 0
        s = self._shifted
        if s.size:
            bad[:, :, s, 1:] |= bad[:, :, s, :-1]
        gain = np.array(gain, dtype=np.float32)
        gain[bad] = 0.0
        self.masked = bad                   # (n_j, n_i, rows, cols) samples left out
        return gain

    def _central_position(self):
        return (int(np.flatnonzero(self.j_values == 0)[0]),
                int(np.flatnonzero(self.i_values == 0)[0]))

    @property
    def view_shape(self):
        """(rows, cols) of one view."""
        return self._rows, self._cols

    def _check_raw(self, raw, name='raw', check_dtype=True):
        raw = np.asarray(raw)
        w, h = self.grid.image_size
        if raw.dtype not in RAW_DTYPES:
            raise InvalidInputError(
                f'{name} must have dtype uint8, uint16, float32 or float64, got {raw.dtype}')
        want = (h, w) if (self.bayer is not None or raw.ndim == 2) else (h, w, 3)
        if raw.shape != want:
            extra = ' (a Bayer mosaic, 2-D)' if self.bayer is not None else ''
            raise InvalidInputError(
                f'{name} must have shape {want}{extra} to match the grid\'s image size '
                f'{w} x {h}, got {raw.shape}')
        if check_dtype and self._dtype is not None and raw.dtype != self._dtype:
            raise InvalidInputError(
                f'{name} must have the white image\'s dtype {self._dtype}, got {raw.dtype}')
        if raw.dtype.kind == 'f' and not np.all(np.isfinite(raw)):
            raise InvalidInputError(f'{name} contains NaN or inf')
        return raw

    def _prepare(self, raw):
        if self.bayer is not None:
            raw = demosaic(raw, self.bayer)
        return np.ascontiguousarray(raw, dtype=np.float32)

    def _resample_hex(self, views):
        """Shifted rows: average the lenses at u - 1/2 and u + 1/2 (in place)."""
        s = self._shifted
        if s.size == 0:
            return views
        sub = views[:, :, s]                       # copy: (n_j, n_i, S, cols[, 3])
        views[:, :, s, 1:] = 0.5 * (sub[:, :, :, 1:] + sub[:, :, :, :-1])
        return views

    def _remap_all(self, src):
        """All views at the lens centres, (n_j, n_i, rows, cols[, C]) float32, no resampling."""
        nj, ni = len(self.j_values), len(self.i_values)
        out = np.empty((nj, ni, self._rows, self._cols) + src.shape[2:], dtype=np.float32)
        # bands of lens rows: the raw rows one band reads stay in cache across the views
        for r0 in range(0, self._rows, _BAND):
            r1 = min(r0 + _BAND, self._rows)
            for jj in range(nj):
                for ii in range(ni):
                    m1, m2 = self._maps[jj, ii]
                    cv2.remap(src, m1[r0:r1], m2[r0:r1], cv2.INTER_LINEAR,
                              dst=out[jj, ii, r0:r1], borderMode=cv2.BORDER_CONSTANT,
                              borderValue=0)
        return out

    def _fused_gain(self, gain):
        """Gains (a, b) so that views = a * A + b * A shifted by one lens (hex rows)."""
        a = np.array(gain, dtype=np.float32)
        s0 = self._s0
        if s0 is None:
            return a, None
        b = np.ascontiguousarray(0.5 * a[:, :, s0::2, 1:])
        a[:, :, s0::2, 1:] *= 0.5
        return a, b

    def _source(self, raw):
        """The frame to remap: 8/16-bit frames as they are (less memory to read), else float32."""
        if self.bayer is not None:
            raw = demosaic(raw, self.bayer)
        if raw.dtype in (np.uint8, np.uint16) and self._integer_remap:
            return np.ascontiguousarray(raw)
        return np.ascontiguousarray(raw, dtype=np.float32)

    def _gains(self, pairs):
        """Gains (a, b) (K, rows, cols) of the views (j_index, i_index) pairs (K, 2); cached."""
        key = pairs.tobytes()
        if key not in self._gain_cache:
            ga, gb = self._gain_a, self._gain_b
            if len(pairs) == ga.shape[0] * ga.shape[1] and np.array_equal(
                    pairs, np.argwhere(np.ones(ga.shape[:2], bool))):      # all, in order
                ga = ga.reshape((-1,) + ga.shape[2:])
                gb = None if gb is None else gb.reshape((-1,) + gb.shape[2:])
            else:
                ga = ga[pairs[:, 0], pairs[:, 1]]
                gb = None if gb is None else gb[pairs[:, 0], pairs[:, 1]]
            if len(self._gain_cache) >= 4:
                self._gain_cache.clear()
            self._gain_cache[key] = (ga, gb)
        return self._gain_cache[key]

    def _views(self, src, pairs):
        """
        Views (K, rows, cols[, C]) float32 of the (j_index, i_index) pairs (K, 2), devignetted
        and hex-resampled.

        Bands of lens rows: all views of one band are remapped into a small buffer (in cache,
        in the frame's own dtype), then the gain and the hexagonal resampling are applied to it
        in one vectorised pass that writes the output once.
        """
        pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
        k = len(pairs)
        rows, cols = self._rows, self._cols
        extra = src.shape[2:]
        out = np.empty((k, rows, cols) + extra, dtype=np.float32)
        buf = np.empty((k, _BAND, cols) + extra, dtype=src.dtype)
        ga, gb = self._gains(pairs)
        s0 = self._s0
        if extra and ga.ndim == 3:
            ga = ga[..., None]
            gb = None if gb is None else gb[..., None]
        maps = [self._maps[jj, ii] for jj, ii in pairs.tolist()]
        for r0 in range(0, rows, _BAND):
            r1 = min(r0 + _BAND, rows)
            b = buf[:, :r1 - r0]
            for n, (m1, m2) in enumerate(maps):
                cv2.remap(src, m1[r0:r1], m2[r0:r1], cv2.INTER_LINEAR, dst=b[n],
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            o = out[:, r0:r1]
            np.multiply(b, ga[:, r0:r1], out=o)
            if gb is not None:
                # shifted rows (global index s0, s0 + 2, ...): + the lens to the left
                first = (s0 - r0) % 2
                g0 = (r0 + first - s0) // 2
                n = len(range(first, r1 - r0, 2))
                o[:, first::2, 1:] += b[:, first::2, :-1] * gb[:, g0:g0 + n]
                _match_row_blur(o[None, :, 1 - first::2])
        return out

    def decode(self, raw, *, only=None):
        """
        Decode one raw frame (H, W) (or a Bayer mosaic) into a :class:`LightField`.

        only: (n_j, n_i) bool, decode just these views and leave the others 0 (a live
        measurement that reads the usable views only: half the work at Lytro size); None: all.
        """
        raw = self._check_raw(raw)
        nj, ni = len(self.j_values), len(self.i_values)
        src = self._source(raw)
        if only is None:
            views = self._views(src, np.argwhere(np.ones((nj, ni), bool)))
            views = views.reshape((nj, ni) + views.shape[1:])
        else:
            only = np.asarray(only, dtype=bool)
            if only.shape != (nj, ni):
                raise InvalidInputError(f'only must have shape ({nj}, {ni}), got {only.shape}')
            pairs = np.argwhere(only)
            some = self._views(src, pairs)
            views = np.zeros((nj, ni) + some.shape[1:], dtype=np.float32)
            views[pairs[:, 0], pairs[:, 1]] = some
        return LightField(views, self.i_values.copy(), self.j_values.copy(), self.valid.copy(),
                          self.grid)

    def central_view(self, raw):
        """Only the view (0, 0): (rows, cols[, 3]) float32, devignetted when a white was given."""
        raw = self._check_raw(raw)
        return self._views(self._source(raw), [self._central_position()])[0]


def _match_row_blur(rows):
    """
    Blur unshifted hex rows (n_j, n_i, R, cols[, C]) along u by (1/8, 3/4, 1/8), in place.

    A shifted row is the mean of two lenses half a pitch either side (a blur of variance 1/4
    lens^2 along u); an unshifted row is its lens alone. Left so, the rows differ in blur and
    cornerSubPix pulls board corners towards the blurrier rows: on rendered Lytro views the
    corners' v error was +-0.03 px depending on which pair of rows they fell between, a bias
    that moves with the view index j. This kernel has the same variance (1/4) and removes it.
    The first and last column are left as they are.
    """
    if rows.shape[3] < 3:
        return
    side = 0.125 * (rows[:, :, :, :-2] + rows[:, :, :, 2:])
    mid = rows[:, :, :, 1:-1]
    mid *= 0.75
    mid += side


def decode(raw, grid, *, white=None, views=(9, 9), demosaic=None):
    """One-off decoding (builds a :class:`Decoder`; reuse one for several frames)."""
    return Decoder(grid, white=white, views=views, demosaic=demosaic).decode(raw)


@dataclass(frozen=True, eq=False)
class MicroImageIndex:
    """
    Micro-image centres of a (focused) plenoptic raw image.

    centres (M, 2) raw px (x, y); indices (M, 2) lattice indices (k, l); radius: the radius in
    px of the disk that belongs to each micro-image.
    """

    centres: np.ndarray
    indices: np.ndarray
    radius: float

    def __post_init__(self):
        c = np.asarray(self.centres, dtype=float)
        k = np.asarray(self.indices)
        if c.ndim != 2 or c.shape[1] != 2 or len(c) == 0 or not np.all(np.isfinite(c)):
            raise InvalidInputError(f'centres must be finite with shape (M, 2), got {c.shape}')
        if k.shape != c.shape:
            raise InvalidInputError(f'indices must have shape {c.shape}, got {k.shape}')
        if not (np.isfinite(self.radius) and self.radius > 0):
            raise InvalidInputError(f'radius must be positive, got {self.radius}')
        object.__setattr__(self, 'centres', c)
        object.__setattr__(self, 'indices', k.astype(np.int64))
        object.__setattr__(self, 'radius', float(self.radius))
        object.__setattr__(self, '_tree', cKDTree(c))

    @classmethod
    def from_grid(cls, grid, *, radius=None):
        """All micro-images of ``grid``; default radius: half the nearest-neighbour distance."""
        if radius is None:
            nn = grid.pitch
            if grid.lattice == 'hex':
                nn = min(nn, float(np.hypot(0.5 * grid.pitch, grid.row_spacing)))
            else:
                nn = min(nn, grid.row_spacing)
            radius = 0.5 * nn
        return cls(grid.centres(), grid.indices(), radius)

    def lens_of_pixel(self, xy):
        """Index (N,) into ``centres`` of the micro-image of each pixel xy (N, 2); -1 outside."""
        xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        dist, idx = self._tree.query(xy, distance_upper_bound=self.radius)
        idx = np.where(np.isfinite(dist), idx, -1)
        return idx.astype(np.int64)

    def patches(self, raw, *, half_size=None, fill=0):
        """
        The square patch of every micro-image of a raw frame.

        Returns ``(patches (M, 2h+1, 2h+1[, C]), corners (M, 2) int)``: patch pixel (r, c)
        of micro-image m is raw pixel (x, y) = corners[m] + (c, r); its (u, v) is that minus
        ``centres[m]``. Pixels outside the image are ``fill``. h defaults to ceil(radius).
        """
        raw = np.asarray(raw)
        if raw.ndim not in (2, 3):
            raise InvalidInputError(f'raw must have shape (H, W) or (H, W, C), got {raw.shape}')
        hs = int(np.ceil(self.radius)) if half_size is None else int(half_size)
        if hs < 0:
            raise InvalidInputError(f'half_size must be >= 0, got {half_size}')
        h, w = raw.shape[:2]
        pad = hs + 1
        padded = np.pad(raw, ((pad, pad), (pad, pad)) + ((0, 0),) * (raw.ndim - 2),
                        constant_values=fill)
        rc = np.rint(self.centres).astype(np.int64)
        rc = np.clip(rc, [-pad + hs, -pad + hs], [w - 1 + pad - hs, h - 1 + pad - hs])
        corners = rc - hs
        off = np.arange(2 * hs + 1)
        ys = corners[:, 1, None, None] + pad + off[None, :, None]
        xs = corners[:, 0, None, None] + pad + off[None, None, :]
        return padded[ys, xs], corners
