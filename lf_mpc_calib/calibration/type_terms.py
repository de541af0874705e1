"""
Per-micro-lens-type terms of a multi-focus (focused) camera: what they are and how they act.

A multi-focus camera (Raytrix) interleaves T micro-lens types of different focal lengths; the
types image at slightly different scales and offsets. On top of the MPC model (one k_u, k_v,
u_0, v_0 for every micro-lens) type T maps the measured raw offset (u, v) of a ray to

    u' = (1 + a_T) u + d_T,   v' = (1 + a_T) v + e_T,

and the MPC model decodes (u', v'): x = k_u u' + u_0. The global part stays in k_u, k_v, u_0,
v_0 because the terms have zero ray-weighted mean, sum_T w_T a_T = sum_T w_T d_T = sum_T w_T e_T
= 0 with w_T the fraction of the calibration's rays of type T (an exact gauge: any common scale
or shift of the types moves into k_u, u_0 without changing a residual). The refinement
(:mod:`lf_mpc_calib.calibration.refine`) estimates them jointly with the model: the type with
the most rays is the reference whose terms follow from the others', so the free vector is
(a_f, d_f, e_f) of the T - 1 other types ('affine') or (d_f, e_f) ('offset').

A residual stays in raw pixels: the predicted raw offset of a board point is
u = (u'_pred - d_T) / (1 + a_T) where u'_pred is the MPC model's projection.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

LENS_TYPE_TERMS = ('none', 'offset', 'affine')


@dataclass(frozen=True, eq=False)
class LensTypeTerms:
    """
    Per-type terms of T micro-lens types.

    terms 'offset' | 'affine'; scale (T,) the a_T (0 for 'offset'); offset_px (T, 2) the
    (d_T, e_T) in raw pixels; weights (T,) the ray fractions w_T of the zero-mean gauge;
    scale_std (T,), offset_std_px (T, 2): 1-sigma from the refinement (NaN when unknown).
    """

    terms: str
    scale: np.ndarray
    offset_px: np.ndarray
    weights: np.ndarray
    scale_std: np.ndarray = None
    offset_std_px: np.ndarray = None

    def __post_init__(self):
        if self.terms not in LENS_TYPE_TERMS[1:]:
            raise InvalidInputError(
                f'lens-type terms must be one of {LENS_TYPE_TERMS[1:]}, got {self.terms!r}')
        scale = np.asarray(self.scale, dtype=float).reshape(-1)
        t = scale.size
        offset = np.asarray(self.offset_px, dtype=float).reshape(t, 2)
        weights = np.asarray(self.weights, dtype=float).reshape(t)
        if t < 2 or not (np.all(np.isfinite(scale)) and np.all(np.isfinite(offset))):
            raise InvalidInputError(
                f'lens-type terms need >= 2 types of finite numbers, got scale {self.scale!r}')
        if np.any(scale <= -1.0):
            raise InvalidInputError(f'lens-type scales must be > -1, got {scale.tolist()}')
        std_a = (np.full(t, np.nan) if self.scale_std is None
                 else np.asarray(self.scale_std, dtype=float).reshape(t))
        std_o = (np.full((t, 2), np.nan) if self.offset_std_px is None
                 else np.asarray(self.offset_std_px, dtype=float).reshape(t, 2))
        for name, value in (('scale', scale), ('offset_px', offset), ('weights', weights),
                            ('scale_std', std_a), ('offset_std_px', std_o)):
            object.__setattr__(self, name, value)

    @property
    def n_types(self):
        """Number of lens types T."""
        return self.scale.size

    @classmethod
    def zero(cls, n_types, weights, terms='affine'):
        """Terms of ``n_types`` types that change nothing."""
        return cls(terms, np.zeros(n_types), np.zeros((n_types, 2)), weights)

    def check_types(self, lens_type):
        """Return ``lens_type`` (N,) as int64, raising if a type is outside 0..T-1."""
        lt = np.asarray(lens_type)
        if lt.size and (lt.min() < 0 or lt.max() >= self.n_types):
            raise InvalidInputError(
                f'lens types must be in 0..{self.n_types - 1} (the calibration has '
                f'{self.n_types}), got {int(lt.min())}..{int(lt.max())}')
        return lt.astype(np.int64)

    def correct(self, uv, lens_type):
        """Measured raw offsets uv (N, 2) of types (N,) -> (u', v') (N, 2) the model decodes."""
        lt = self.check_types(lens_type)
        return (1.0 + self.scale[lt])[:, None] * np.asarray(uv, float) + self.offset_px[lt]

    def uncorrect(self, uv_model, lens_type):
        """Inverse of :meth:`correct`: model offsets (u', v') (N, 2) -> raw offsets (N, 2)."""
        lt = self.check_types(lens_type)
        return (np.asarray(uv_model, float) - self.offset_px[lt]) / (1.0 + self.scale[lt])[:, None]

    def corrected_ijuv(self, ijuv, lens_type):
        """ijuv (N, 4) with (u, v) replaced by :meth:`correct` (what MPCModel.rays decodes)."""
        ijuv = np.asarray(ijuv, dtype=float)
        return np.column_stack([ijuv[:, :2], self.correct(ijuv[:, 2:], lens_type)])

    def to_dict(self):
        """Plain mapping for the calibration file's ``lens_types`` key."""
        return {'terms': self.terms,
                'formula': "u' = (1 + scale) u + offset_px[0], v' = (1 + scale) v + "
                           "offset_px[1]; x = k_u u' + u_0",
                'scale': [float(x) for x in self.scale],
                'offset_px': [[float(x) for x in r] for r in self.offset_px],
                'weights': [float(x) for x in self.weights],
                'scale_std': [float(x) for x in self.scale_std],
                'offset_std_px': [[float(x) for x in r] for r in self.offset_std_px]}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (files written before weights and std: NaN / equal)."""
        try:
            scale = d['scale']
            n = len(scale)
            return cls(d.get('terms', 'affine'), scale, d['offset_px'],
                       d.get('weights', [1.0 / n] * n), d.get('scale_std'),
                       d.get('offset_std_px'))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f'bad lens_types mapping ({exc}): {d!r}') from None


class TypeParametrisation:
    """
    The free parameter vector of the per-type terms and its Jacobian columns.

    lens_type (N,) int per ray (in the refinement's row order), terms 'offset' | 'affine'.
    Free vector: (a_f for the T - 1 free types, if affine), then d_f, then e_f. ``mix`` (T, T-1)
    maps free values to all T with zero ray-weighted mean.
    """

    def __init__(self, lens_type, terms):
        if terms not in LENS_TYPE_TERMS[1:]:
            raise InvalidInputError(
                f'lens_type_terms must be one of {LENS_TYPE_TERMS}, got {terms!r}')
        self.lens_type = np.asarray(lens_type, dtype=np.int64)
        self.terms = terms
        self.n_types = int(self.lens_type.max()) + 1
        counts = np.bincount(self.lens_type, minlength=self.n_types).astype(float)
        if np.count_nonzero(counts) < 2:
            raise InvalidInputError(
                f'lens-type terms need rays of >= 2 types, got counts {counts.astype(int)}')
        if np.any(counts == 0):
            raise InvalidInputError(
                f'lens type(s) {np.flatnonzero(counts == 0).tolist()} have no ray; number the '
                f'types 0..T-1 without gaps (counts {counts.astype(int).tolist()})')
        self.weights = counts / counts.sum()
        self.reference = int(np.argmax(counts))
        self.free_types = np.array([t for t in range(self.n_types) if t != self.reference])
        mix = np.zeros((self.n_types, self.n_types - 1))
        mix[self.free_types, np.arange(self.n_types - 1)] = 1.0
        mix[self.reference] = -self.weights[self.free_types] / self.weights[self.reference]
        self.mix = mix
        self.n_blocks = 3 if terms == 'affine' else 2
        self.size = self.n_blocks * (self.n_types - 1)
        self.names = tuple(f'{p}_{t}' for p in ('a', 'd', 'e')[3 - self.n_blocks:]
                           for t in self.free_types)

    def initial(self, start=None):
        """Free vector (size,) from LensTypeTerms ``start`` (None: zeros)."""
        if start is None:
            return np.zeros(self.size)
        if start.n_types != self.n_types:
            raise InvalidInputError(
                f'initial lens-type terms have {start.n_types} types, the rays {self.n_types}')
        blocks = [start.offset_px[self.free_types, 0], start.offset_px[self.free_types, 1]]
        if self.terms == 'affine':
            blocks.insert(0, start.scale[self.free_types])
        return np.concatenate(blocks)

    def unpack(self, x):
        """Free vector -> (a (T,), d (T,), e (T,))."""
        m = self.n_types - 1
        x = np.asarray(x, dtype=float)
        blocks = [x[k * m:(k + 1) * m] for k in range(self.n_blocks)]
        if self.terms != 'affine':
            blocks.insert(0, np.zeros(m))
        return tuple(self.mix @ b for b in blocks)

    def apply(self, x, res, jac, u_obs, v_obs):
        """
        Turn the MPC residuals into raw-pixel ones in place and return the extra Jacobian rows.

        res (2, N) u'_pred - u' with u' = the observed (u, v) (uncorrected; the model
        prediction is what matters here); jac (R, 2, N) or None. The new residual is
        (u'_pred - d_T) / (1 + a_T) - u_obs; the Jacobian rows are scaled by 1 / (1 + a_T).
        Returns the (size, 2, N) rows of the free terms (None without jac).
        """
        a, d, e = self.unpack(x)
        lt = self.lens_type
        g = 1.0 / (1.0 + a[lt])
        u_raw = (res[0] + u_obs - d[lt]) * g
        v_raw = (res[1] + v_obs - e[lt]) * g
        res[0] = u_raw - u_obs
        res[1] = v_raw - v_obs
        if jac is None:
            return None
        jac *= g[None, None, :]
        m = self.n_types - 1
        w = self.mix[lt] * g[:, None]                 # (N, T-1): d(type term of ray)/d free
        extra = np.zeros((self.size, 2, lt.size))
        k = 0
        if self.terms == 'affine':
            extra[0:m, 0] = -(w * u_raw[:, None]).T
            extra[0:m, 1] = -(w * v_raw[:, None]).T
            k = m
        extra[k:k + m, 0] = -w.T
        extra[k + m:k + 2 * m, 1] = -w.T
        return extra

    def terms_with_std(self, x, cov=None):
        """LensTypeTerms of free vector x; cov (size, size) its covariance (None: NaN std)."""
        a, d, e = self.unpack(x)
        std_a = np.full(self.n_types, np.nan)
        std_o = np.full((self.n_types, 2), np.nan)
        if cov is not None:
            m = self.n_types - 1
            blocks = list(range(self.n_blocks))
            stds = []
            for b in blocks:
                c = cov[b * m:(b + 1) * m, b * m:(b + 1) * m]
                stds.append(np.sqrt(np.maximum(np.einsum('tf,fg,tg->t', self.mix, c,
                                                         self.mix), 0.0)))
            if self.terms == 'affine':
                std_a = stds.pop(0)
            std_o = np.column_stack(stds)
        return LensTypeTerms(self.terms, a, np.column_stack([d, e]), self.weights,
                             std_a if self.terms == 'affine' else np.zeros(self.n_types), std_o)
