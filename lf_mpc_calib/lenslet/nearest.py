"""
The micro-image a raw point lies in: the nearest centre of a LensletGrid, found on its regular
lattice (no search tree), and the micro-images within a radius of a point.

    lattice = MicroImageLattice(grid)
    lattice.nearest(xy (N, 2)) -> (N,) index into grid.centres(), -1 outside the grid
    lattice.within(x (2,), radius) -> indices of the centres within radius px of x
    lattice.within_many(xy (N, 2), radius (N,)) -> (point (K,), centre index (K,)) pairs
    raw_pixel_ijuv(centres, xy, owner, types=, terms=) -> (N, 4) indexed pixels (i, j, u, v)
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


class MicroImageLattice:
    """Nearest micro-image of raw points, from the regular lattice of a LensletGrid."""

    def __init__(self, grid):
        self.grid = grid
        self.reg = grid.regular()
        self.basis = np.column_stack([self.reg.row_vector, self.reg.column_vector])
        self.inv = np.linalg.inv(self.basis)
        self.cols, self.rows = grid.shape
        self.centres = grid.centres()

    def nearest(self, xy):
        """(N,) index into grid.centres() of the nearest micro-image, -1 outside the grid."""
        xy = np.asarray(xy, float).reshape(-1, 2)
        a = (xy - self.reg.origin) @ self.inv.T
        best = np.full(len(xy), np.inf)
        k_best = np.zeros(len(xy), np.int64)
        l_best = np.zeros(len(xy), np.int64)
        hexa = self.grid.lattice == 'hex'
        for dl in ((0.0, 1.0) if hexa else (None,)):
            if dl is None:
                lc = np.rint(a[:, 1])
                sh = 0.0
            else:
                lc = np.floor(a[:, 1]) + dl
                sh = 0.5 * ((lc.astype(np.int64) + self.grid.hex_parity) % 2)
            kc = np.rint(a[:, 0] - sh)
            d = (a[:, 0] - kc - sh)[:, None] * self.reg.row_vector + \
                (a[:, 1] - lc)[:, None] * self.reg.column_vector
            d2 = np.einsum('ij,ij->i', d, d)
            take = d2 < best
            best = np.where(take, d2, best)
            k_best = np.where(take, kc, k_best).astype(np.int64)
            l_best = np.where(take, lc, l_best).astype(np.int64)
        inside = (k_best >= 0) & (k_best < self.cols) & (l_best >= 0) & (l_best < self.rows)
        return np.where(inside, l_best * self.cols + k_best, -1)

    def within(self, x, radius):
        """Indices of the micro-images whose centre is within ``radius`` px of x (2,)."""
        a = (np.asarray(x, float) - self.reg.origin) @ self.inv.T
        span_k = int(np.ceil(radius / self.grid.pitch)) + 2
        span_l = int(np.ceil(radius / self.grid.row_spacing)) + 2
        k0, l0 = int(np.round(a[0])), int(np.round(a[1]))
        ks = np.arange(max(k0 - span_k, 0), min(k0 + span_k + 1, self.cols))
        ls = np.arange(max(l0 - span_l, 0), min(l0 + span_l + 1, self.rows))
        if ks.size == 0 or ls.size == 0:
            return np.zeros(0, np.int64)
        ll, kk = np.meshgrid(ls, ks, indexing='ij')
        idx = (ll * self.cols + kk).ravel()
        d = np.hypot(*(self.centres[idx] - x).T)
        return idx[d <= radius]

    def within_many(self, xy, radius):
        """
        Every (point, micro-image) pair with the centre within ``radius`` (px, scalar or (N,))
        of the point: (point index (K,), centre index (K,)), ordered by point. Points that are
        not finite have none.
        """
        xy = np.asarray(xy, float).reshape(-1, 2)
        radius = np.broadcast_to(np.asarray(radius, float), (len(xy),))
        ok = np.all(np.isfinite(xy), axis=1) & np.isfinite(radius)
        if not np.any(ok):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        a = (np.where(ok[:, None], xy, 0.0) - self.reg.origin) @ self.inv.T
        top = float(radius[ok].max())
        span_k = int(np.ceil(top / self.grid.pitch)) + 2
        span_l = int(np.ceil(top / self.grid.row_spacing)) + 2
        dl, dk = np.meshgrid(np.arange(-span_l, span_l + 1), np.arange(-span_k, span_k + 1),
                             indexing='ij')
        kk = np.round(a[:, 0]).astype(np.int64)[:, None] + dk.ravel()[None]     # (N, S)
        ll = np.round(a[:, 1]).astype(np.int64)[:, None] + dl.ravel()[None]
        inside = ok[:, None] & (kk >= 0) & (kk < self.cols) & (ll >= 0) & (ll < self.rows)
        pt, slot = np.nonzero(inside)
        idx = ll[pt, slot] * self.cols + kk[pt, slot]
        near = np.hypot(*(self.centres[idx] - xy[pt]).T) <= radius[pt]
        return pt[near], idx[near]


def raw_pixel_ijuv(centres, points, owner, *, types=None, terms=None):
    """
    Indexed pixels (N, 4) (i, j, u, v) of raw pixels ``points`` (N, 2) in the micro-images
    ``owner`` (N,) int of ``centres`` (M, 2): (centre, offset from it), with the lens-type
    terms applied (types (M,) int, the lens type of every micro-image, needed with ``terms``,
    a LensTypeTerms).
    """
    c = centres[owner]
    ijuv = np.column_stack([c, np.asarray(points, dtype=float) - c])
    if terms is None:
        return ijuv
    if types is None:
        raise InvalidInputError('lens-type terms need the lens type of every micro-image '
                                '(types), got None')
    types = np.asarray(types, dtype=np.int64).reshape(-1)
    if types.shape != (len(centres),):
        raise InvalidInputError(f'types must have one entry per micro-image '
                                f'({len(centres)}), got {types.shape}')
    return terms.corrected_ijuv(ijuv, types[owner])
