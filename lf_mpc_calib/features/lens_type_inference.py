"""
Which micro-lens type is each micro-image? Told from the corners of a multi-focus camera.

The T interleaved micro-lens types of a multi-focus camera (Raytrix) are focused at different
virtual depths, and they repeat along the lattice: every T-th lens of a row, the rows of one
parity alike (the simulator's rule ((l mod 2) + k) mod 3, and any rule of that period in
another lattice indexing). So the micro-images fall into 2 x T classes (k mod T, l mod 2) of one
type each. How far a corner's inverse virtual depth w is from a type's focus decides both how
sharp the corner is in that type's micro-images (its saddle strength,
:mod:`lf_mpc_calib.features.micro_image_corners`) and whether it is found there at all (a type
far from its focus yields few corners, none at some depths). So per class and bin of w, the
number of corner rows (against the class's share of micro-images, a binomial z) and their mean
sharpness (where both classes have >= MIN_ROWS rows, a z of the means) are a profile that
classes of one type share and classes of different types do not. In each row parity the T
classes are different types; the profiles match the classes of the two parities. Types are
labels (in the order of the even-row classes); the per-type terms are estimated afterwards.
Refused (DetectionError, with the figures) unless the classes of one parity differ by at least
``min_separation`` standard errors in some bin and the matched ones agree (mean |z| <= 3).
"""

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.lenslet.nearest import MicroImageLattice

N_BINS = 5
MIN_ROWS = 5
"""Rows of a class in a w bin needed to compare its mean sharpness."""
MAX_MISMATCH = 3.0
"""Mean |z| between matched classes of the two row parities above which types are refused."""


@dataclass(frozen=True)
class LensTypeEstimate:
    """
    types (M,) per micro-image of the grid; profiles (2 T, N_BINS) mean sharpness per class
    and w bin (NaN under MIN_ROWS rows); counts (2 T, N_BINS) rows per class and bin;
    separation: the least difference (standard errors) between two classes of one parity;
    mismatch: mean |z| between matched classes of the two parities.
    """

    types: np.ndarray
    profiles: np.ndarray
    separation: float
    mismatch: float
    counts: np.ndarray = None

    def describe(self):
        """One line with the figures."""
        rows = '' if self.counts is None else f' from {int(self.counts.sum())} corner rows'
        return (f'{self.profiles.shape[0] // 2} micro-lens types told apart by sharpness and '
                f'detections{rows} (classes of one row parity differ by >= '
                f'{self.separation:.1f} standard errors, matched classes by '
                f'{self.mismatch:.1f} on average)')


def infer_lens_types(obs, sharpness, w, grid, n_types=3, *, min_separation=5.0):
    """
    Lens type (M,) of every micro-image of ``grid`` from corner observations.

    obs: Observations (focused convention, (i, j) = micro-image centres of ``grid``, any
    number of poses); sharpness (N,) the saddle strength of each row; w (N,) the inverse
    virtual depth of each row's corner. Returns a :class:`LensTypeEstimate`; raises
    DetectionError when the micro-images do not fall into ``n_types`` types.
    """
    n_types = int(n_types)
    if n_types < 2:
        raise InvalidInputError(f'n_types must be >= 2, got {n_types}')
    sharp = np.asarray(sharpness, float).reshape(-1)
    w = np.asarray(w, float).reshape(-1)
    if sharp.shape != (len(obs),) or w.shape != (len(obs),):
        raise InvalidInputError(f'sharpness and w need one value per row ({len(obs)}), got '
                                f'{sharp.shape}, {w.shape}')
    lattice = MicroImageLattice(grid)
    idx = lattice.nearest(obs.ijuv[:, :2])
    if np.any(idx < 0):
        raise InvalidInputError('observations name micro-image centres outside the grid')
    all_cls = _classes(np.arange(len(lattice.centres)), lattice.cols, n_types)
    share = np.bincount(all_cls, minlength=2 * n_types).astype(float)
    cls = all_cls[idx]
    ok = np.isfinite(sharp) & np.isfinite(w)
    if not ok.any():
        raise DetectionError('no corner rows to tell the lens types from')
    edges = np.quantile(w[ok], np.linspace(0.0, 1.0, N_BINS + 1))
    b = np.clip(np.searchsorted(edges, w, side='right') - 1, 0, N_BINS - 1)
    count = np.zeros((2 * n_types, N_BINS))
    prof = np.full((2 * n_types, N_BINS), np.nan)
    se = np.full((2 * n_types, N_BINS), np.inf)
    for k in range(2 * n_types):
        for j in range(N_BINS):
            v = sharp[ok & (cls == k) & (b == j)]
            count[k, j] = len(v)
            if len(v) >= MIN_ROWS:
                prof[k, j] = v.mean()
                se[k, j] = max(v.std(ddof=1), 1e-12) / np.sqrt(len(v))
    if np.count_nonzero(count.sum(axis=0) >= 2 * MIN_ROWS) < 2:
        raise DetectionError(f'too few corners per depth to tell {n_types} lens types apart '
                             f'({len(obs)} rows); capture more poses')

    def z(a, c):
        """(N_BINS,) |z| of classes a and c per bin: the larger of counts' and sharpness'."""
        n = count[a] + count[c]
        p = share[a] / (share[a] + share[c])
        zn = np.abs(count[a] - n * p) / np.sqrt(np.maximum(n * p * (1.0 - p), 1e-12))
        zs = np.abs(prof[a] - prof[c]) / np.hypot(se[a], se[c])
        return np.fmax(np.where(n > 0, zn, 0.0), np.nan_to_num(zs, nan=0.0))

    sep = min(z(h * n_types + a, h * n_types + c).max()
              for h in (0, 1) for a in range(n_types) for c in range(a + 1, n_types))
    best, match = np.inf, None
    for perm in permutations(range(n_types)):
        cost = np.mean([z(a, n_types + perm[a]).mean() for a in range(n_types)])
        if cost < best:
            best, match = cost, perm
    if sep < min_separation or best > MAX_MISMATCH:
        raise DetectionError(
            f'the micro-images do not fall into {n_types} lens types by sharpness and '
            f'detections ({len(obs)} corner rows): the two closest classes of one row parity '
            f'differ by {sep:.1f} standard errors (need >= {min_separation:g}), matched classes '
            f'by {best:.1f} on average (need <= {MAX_MISMATCH:g}); calibrate with one type or '
            'capture more poses over the depth range')
    type_of_class = np.zeros(2 * n_types, dtype=np.int64)
    type_of_class[:n_types] = np.arange(n_types)
    for a in range(n_types):
        type_of_class[n_types + match[a]] = a
    return LensTypeEstimate(type_of_class[all_cls], prof, float(sep), float(best), count)


def _classes(index, cols, n_types):
    """Class (k mod T) + T (l mod 2) (N,) of micro-images ``index`` (N,) of a grid with ``cols``
    micro-images per row (the order of ``grid.centres()``)."""
    index = np.asarray(index, dtype=np.int64)
    return (index % cols) % n_types + n_types * ((index // cols) % 2)
