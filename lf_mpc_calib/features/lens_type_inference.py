"""
Which micro-lens type is each micro-image? Told from the corners of a multi-focus camera.

The T interleaved micro-lens types of a multi-focus camera (Raytrix) are focused at different
virtual depths, and they repeat along the lattice: every T-th lens of a row, the rows of one
parity alike (the simulator's rule ((l mod 2) + k) mod 3, and any rule of that period in
another lattice indexing). So the micro-images fall into 2 x T classes (k mod T, l mod 2) of one
type each. A corner's sharpness in a micro-image (its saddle strength,
:mod:`lf_mpc_calib.features.micro_image_corners`) depends on how far its inverse virtual depth
w is from the type's focus, so the mean sharpness per class in bins of w is a profile that
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


@dataclass(frozen=True)
class LensTypeEstimate:
    """
    types (M,) per micro-image of the grid; profiles (2 T, N_BINS) mean sharpness per class
    and w bin; separation: the least difference (standard errors) between two classes of one
    parity; mismatch: mean |z| between matched classes of the two parities.
    """

    types: np.ndarray
    profiles: np.ndarray
    separation: float
    mismatch: float

    def describe(self):
        """One line with the figures."""
        return (f'{self.profiles.shape[0] // 2} micro-lens types told apart by sharpness '
                f'(classes of one row parity differ by >= {self.separation:.1f} standard '
                f'errors, matched classes by {self.mismatch:.1f} on average)')


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
    cls = (idx % lattice.cols) % n_types + n_types * ((idx // lattice.cols) % 2)
    ok = np.isfinite(sharp) & np.isfinite(w)
    edges = np.quantile(w[ok], np.linspace(0.0, 1.0, N_BINS + 1)) if ok.any() else None
    if edges is None:
        raise DetectionError('no corner rows to tell the lens types from')
    b = np.clip(np.searchsorted(edges, w, side='right') - 1, 0, N_BINS - 1)
    prof = np.full((2 * n_types, N_BINS), np.nan)
    se = np.full((2 * n_types, N_BINS), np.inf)
    for k in range(2 * n_types):
        for j in range(N_BINS):
            v = sharp[ok & (cls == k) & (b == j)]
            if len(v) >= 5:
                prof[k, j] = v.mean()
                se[k, j] = v.std(ddof=1) / np.sqrt(len(v))
    usable = np.all(np.isfinite(prof), axis=0)
    if usable.sum() < 2:
        raise DetectionError(f'too few corners per micro-image class and depth to tell '
                             f'{n_types} lens types apart ({len(obs)} rows)')
    p, s = prof[:, usable], se[:, usable]

    def z(a, c):
        return np.abs(p[a] - p[c]) / np.hypot(s[a], s[c])

    sep = min(z(h * n_types + a, h * n_types + c).max()
              for h in (0, 1) for a in range(n_types) for c in range(a + 1, n_types))
    best, match = np.inf, None
    for perm in permutations(range(n_types)):
        cost = np.mean([z(a, n_types + perm[a]).mean() for a in range(n_types)])
        if cost < best:
            best, match = cost, perm
    if sep < min_separation or best > 3.0:
        raise DetectionError(
            f'the micro-images do not fall into {n_types} lens types by sharpness: the two '
            f'closest classes of one row parity differ by {sep:.1f} standard errors (need >= '
            f'{min_separation:g}), matched classes by {best:.1f} on average (need <= 3); '
            'calibrate with one type')
    type_of_class = np.zeros(2 * n_types, dtype=np.int64)
    type_of_class[:n_types] = np.arange(n_types)
    for a in range(n_types):
        type_of_class[n_types + match[a]] = a
    all_idx = np.arange(len(lattice.centres))
    all_cls = (all_idx % lattice.cols) % n_types + n_types * ((all_idx // lattice.cols) % 2)
    return LensTypeEstimate(type_of_class[all_cls], prof, float(sep), float(best))
