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

'affine-radial' adds each type's own radial term about the micro-image centre, applied to
the measured offsets as the MPC model's Eq. 18 is (explicit where rays are decoded):
(u', v') = (1 + a_T) h_T(rho) (u, v) + (d_T, e_T), rho = |(u, v)| / RADIAL_UNIT_PX,
h_T = 1 + q1_T rho^2 + q2_T rho^4. No gauge: the MPC model has no term that bends a micro-image.
On the real R12 data the residuals grew with the distance from the micro-image centre (0.74 px
RMS within 2 px of it, 1.49 px at 8-10 px, 0.27 px outwards on average there), a corner
detection bias towards the micro-image rim (blur and vignetting there) more than a lens
distortion; the three types' terms take the RMS from 0.9945 to 0.949 px.

'affine-view' and 'affine-radial-view' add each type's view-plane scale g_T (a per-type k_i,
k_j): the optics of a multi-focus camera put the micro-image centre of a lens of type T at
L (D + b_T) / D (b_T the type's gap), so a ray through micro-image centre (i, j) crosses the
view plane at k_i^T ((i, j) - c) with k_i^T ~ 1 / (D + b_T) and c the optical axis in raw
pixels (simulation.optics). The types' (i, j) are scaled about the optical axis

    (i', j') = (i, j) + g_T ((i, j) - (i_c, j_c)),   (i_c, j_c) = (-u_0 / (k_3 k_i),
    -v_0 / (k_4 k_j))

(the raw pixel whose ray through its micro-image centre has zero slope, the focused model's
optical axis) and the MPC model decodes s = k_i i'. Gauge: sum_T w_T g_T = 0 (a common g
is k_i and a translation of the poses). With it the optics' truth is exact (d_T = e_T = 0);
without it the fit folds the missing scale into the offsets (+-0.008 px on the multi-focus
preset, many sigmas off).

'affine-slope' and 'affine-radial-slope' are the same physics for rows whose (i, j) are the
centres of a regular lattice fitted to the white image (the raw pipeline's LensletGrid) rather
than each micro-image's own centre: the types' true centres sit (b_T - b) / (D + b) ((i, j) - c)
away from the lattice's (+-0.04 px on the multi-focus preset), so the measured (u, v) carry a
per-type term proportional to (i, j), a per-type k_3, k_4:

    u' = (1 + a_T) u + d_T + kappa_T i,   v' = (1 + a_T) v + e_T + kappa_T j

(gauge sum_T w_T kappa_T = 0: a common kappa is k_3 -> k_3 + k_u kappa / k_i, k_4 likewise).
With lattice centres it is exact: kappa_T = -(1 + a_T) (b_T - b) / (D + b) and d_T =
-kappa_T c_x before the gauge (simulation.optics, ground_truth_lens_types(centres='lattice')).
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

LENS_TYPE_TERMS = ('none', 'offset', 'affine', 'affine-radial', 'affine-view',
                   'affine-radial-view', 'affine-slope', 'affine-radial-slope')
RADIAL_UNIT_PX = 10.0
RADIAL_TERMS = 2
"""rho = |(u~, v~)| / RADIAL_UNIT_PX in the micro-lens distortion of 'affine-radial'."""


@dataclass(frozen=True, eq=False)
class LensTypeTerms:
    """
    Per-type terms of T micro-lens types.

    terms 'offset' | 'affine' | 'affine-radial'; scale (T,) the a_T (0 for 'offset');
    offset_px (T, 2) the (d_T, e_T) in raw pixels; weights (T,) the ray fractions w_T of the
    zero-mean gauge; scale_std (T,), offset_std_px (T, 2): 1-sigma from the refinement (NaN
    when unknown); radial (T, 2) the micro-lens distortion (q1_T, q2_T) (zeros unless
    'affine-radial'), radial_std (T, 2) its 1-sigma; view_scale (T,) the g_T of the '-view'
    modes (zeros otherwise), view_scale_std (T,) its 1-sigma, view_centre_px (2,) the optical
    axis (i_c, j_c) in raw pixels the types' (i, j) are scaled about; slope (T,) the kappa_T
    of the '-slope' modes (zeros otherwise), slope_std (T,) its 1-sigma.
    """

    terms: str
    scale: np.ndarray
    offset_px: np.ndarray
    weights: np.ndarray
    scale_std: np.ndarray = None
    offset_std_px: np.ndarray = None
    radial: np.ndarray = None
    radial_std: np.ndarray = None
    view_scale: np.ndarray = None
    view_scale_std: np.ndarray = None
    view_centre_px: np.ndarray = None
    slope: np.ndarray = None
    slope_std: np.ndarray = None

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
        radial = (np.zeros((t, 2)) if self.radial is None
                  else np.asarray(self.radial, dtype=float).reshape(t, 2))
        if not np.all(np.isfinite(radial)):
            raise InvalidInputError(f'lens-type radial terms must be finite, got {self.radial!r}')
        std_q = (np.full((t, 2), np.nan) if self.radial_std is None
                 else np.asarray(self.radial_std, dtype=float).reshape(t, 2))
        view = (np.zeros(t) if self.view_scale is None
                else np.asarray(self.view_scale, dtype=float).reshape(t))
        std_g = (np.full(t, np.nan) if self.view_scale_std is None
                 else np.asarray(self.view_scale_std, dtype=float).reshape(t))
        centre = (np.zeros(2) if self.view_centre_px is None
                  else np.asarray(self.view_centre_px, dtype=float).reshape(2))
        if not (np.all(np.isfinite(view)) and np.all(view > -1.0)
                and np.all(np.isfinite(centre))):
            raise InvalidInputError(f'lens-type view scales must be finite and > -1 with a finite '
                                    f'centre, got {self.view_scale!r}, {self.view_centre_px!r}')
        slope = (np.zeros(t) if self.slope is None
                 else np.asarray(self.slope, dtype=float).reshape(t))
        std_k = (np.full(t, np.nan) if self.slope_std is None
                 else np.asarray(self.slope_std, dtype=float).reshape(t))
        if not np.all(np.isfinite(slope)):
            raise InvalidInputError(f'lens-type slopes must be finite, got {self.slope!r}')
        for name, value in (('scale', scale), ('offset_px', offset), ('weights', weights),
                            ('scale_std', std_a), ('offset_std_px', std_o), ('radial', radial),
                            ('radial_std', std_q), ('view_scale', view),
                            ('view_scale_std', std_g), ('view_centre_px', centre),
                            ('slope', slope), ('slope_std', std_k)):
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

    def correct(self, uv, lens_type, ij=None):
        """
        Measured raw offsets uv (N, 2) of types (N,) -> (u', v') (N, 2) the model decodes; ij
        (N, 2) the rows' micro-image centres (needed with the '-slope' terms).
        """
        lt = self.check_types(lens_type)
        uv = np.asarray(uv, float).reshape(-1, 2)
        if np.any(self.radial):
            uv = _radial_factor(uv, self.radial[lt])[:, None] * uv
        return (1.0 + self.scale[lt])[:, None] * uv + self.offset_px[lt] \
            + self._slope_term(lt, ij)

    def _slope_term(self, lt, ij):
        """kappa_T (i, j) (N, 2) of the '-slope' terms (0 without them)."""
        if not np.any(self.slope):
            return 0.0
        if ij is None:
            raise InvalidInputError(f"{self.terms!r} lens-type terms need the micro-image "
                                    'centres (i, j) of the rows, got none')
        return self.slope[lt][:, None] * np.asarray(ij, float).reshape(-1, 2)

    def uncorrect(self, uv_model, lens_type, ij=None):
        """Inverse of :meth:`correct`: model offsets (u', v') (N, 2) -> raw offsets (N, 2)."""
        lt = self.check_types(lens_type)
        uv = (np.asarray(uv_model, float).reshape(-1, 2) - self.offset_px[lt]
              - self._slope_term(lt, ij)) / (1.0 + self.scale[lt])[:, None]
        if np.any(self.radial):
            uv = _solve_radial(uv, self.radial[lt])
        return uv

    def correct_ij(self, ij, lens_type):
        """Micro-image centres ij (N, 2) of types (N,) -> (i', j') (N, 2) the model decodes."""
        lt = self.check_types(lens_type)
        ij = np.asarray(ij, float).reshape(-1, 2)
        if not np.any(self.view_scale):
            return ij
        return ij + self.view_scale[lt][:, None] * (ij - self.view_centre_px)

    def corrected_ijuv(self, ijuv, lens_type):
        """ijuv (N, 4) with (i, j) and (u, v) corrected (what MPCModel.rays decodes)."""
        ijuv = np.asarray(ijuv, dtype=float)
        return np.column_stack([self.correct_ij(ijuv[:, :2], lens_type),
                                self.correct(ijuv[:, 2:], lens_type, ijuv[:, :2])])

    def view_text(self, t):
        """', view scale (or slope) +x +- y ppm' of type ``t`` for reports ('' without)."""
        if self.terms.endswith('-slope'):
            return (f', slope {1e6 * self.slope[t]:+.2f} +- {1e6 * self.slope_std[t]:.2f} ppm '
                    'of (i, j)')
        if not self.terms.endswith('-view'):
            return ''
        return (f', view scale {1e6 * self.view_scale[t]:+.1f} +- '
                f'{1e6 * self.view_scale_std[t]:.1f} ppm')

    def to_dict(self):
        """Plain mapping for the calibration file's ``lens_types`` key."""
        d = {'terms': self.terms,
             'formula': "u' = (1 + scale) u + offset_px[0], v' = (1 + scale) v + "
                        "offset_px[1]; x = k_u u' + u_0",
             'scale': [float(x) for x in self.scale],
             'offset_px': [[float(x) for x in r] for r in self.offset_px],
             'weights': [float(x) for x in self.weights],
             'scale_std': [float(x) for x in self.scale_std],
             'offset_std_px': [[float(x) for x in r] for r in self.offset_std_px]}
        if self.terms.startswith('affine-radial'):
            d['formula'] = ("u' = (1 + scale) h u + offset_px[0], v' = (1 + scale) h v + "
                            "offset_px[1], h = 1 + radial[0] rho^2 + radial[1] rho^4, rho = "
                            f"|(u, v)| / {RADIAL_UNIT_PX:g} px; x = k_u u' + u_0")
            d['radial'] = [[float(x) for x in r] for r in self.radial]
            d['radial_std'] = [[float(x) for x in r] for r in self.radial_std]
        if self.terms.endswith('-view'):
            d['formula'] += ("; (i', j') = (i, j) + view_scale ((i, j) - view_centre_px); "
                             "s = k_i i'")
            d['view_scale'] = [float(x) for x in self.view_scale]
            d['view_scale_std'] = [float(x) for x in self.view_scale_std]
            d['view_centre_px'] = [float(x) for x in self.view_centre_px]
        if self.terms.endswith('-slope'):
            d['formula'] += "; u' += slope i, v' += slope j"
            d['slope'] = [float(x) for x in self.slope]
            d['slope_std'] = [float(x) for x in self.slope_std]
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (files written before weights and std: NaN / equal)."""
        try:
            scale = d['scale']
            n = len(scale)
            return cls(d.get('terms', 'affine'), scale, d['offset_px'],
                       d.get('weights', [1.0 / n] * n), d.get('scale_std'),
                       d.get('offset_std_px'), d.get('radial'), d.get('radial_std'),
                       d.get('view_scale'), d.get('view_scale_std'), d.get('view_centre_px'),
                       d.get('slope'), d.get('slope_std'))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f'bad lens_types mapping ({exc}): {d!r}') from None


class TypeParametrisation:
    """
    The free parameter vector of the per-type terms and its Jacobian columns.

    lens_type (N,) int per ray (in the refinement's row order), terms 'offset' | 'affine' |
    'affine-radial' | 'affine-view' | 'affine-radial-view'. Free vector: (a_f for the T - 1
    free types, if affine), then d_f, then e_f, then (affine-radial) q1 of every type, then q2
    of every type, then ('-view') g_f. ``mix`` (T, T-1) maps free values to all T with zero
    ray-weighted mean.
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
        self.n_blocks = 2 if terms == 'offset' else 3
        self.radial = terms.startswith('affine-radial')
        self.view = terms.endswith('-view')
        self.slope = terms.endswith('-slope')
        self.n_gauged = self.n_blocks * (self.n_types - 1)
        self.n_radial = RADIAL_TERMS if self.radial else 0
        self.n_view = self.n_types - 1 if self.view else 0
        self.n_slope = self.n_types - 1 if self.slope else 0
        self.size = self.n_gauged + self.n_radial * self.n_types + self.n_slope + self.n_view
        self.names = tuple(f'{p}_{t}' for p in ('a', 'd', 'e')[3 - self.n_blocks:]
                           for t in self.free_types)
        if self.radial:
            self.names += tuple(f'{p}_{t}' for p in ('q1', 'q2')[:self.n_radial]
                                for t in range(self.n_types))
        if self.slope:
            self.names += tuple(f'kappa_{t}' for t in self.free_types)
        if self.view:
            self.names += tuple(f'g_{t}' for t in self.free_types)

    def initial(self, start=None):
        """Free vector (size,) from LensTypeTerms ``start`` (None: zeros)."""
        if start is None:
            return np.zeros(self.size)
        if start.n_types != self.n_types:
            raise InvalidInputError(
                f'initial lens-type terms have {start.n_types} types, the rays {self.n_types}')
        blocks = [start.offset_px[self.free_types, 0], start.offset_px[self.free_types, 1]]
        if self.n_blocks == 3:
            blocks.insert(0, start.scale[self.free_types])
        if self.radial:
            blocks += [start.radial[:, k] for k in range(self.n_radial)]
        if self.slope:
            blocks.append(start.slope[self.free_types])
        if self.view:
            blocks.append(start.view_scale[self.free_types])
        return np.concatenate(blocks)

    def unpack(self, x):
        """Free vector -> (a (T,), d (T,), e (T,))."""
        m = self.n_types - 1
        x = np.asarray(x, dtype=float)
        blocks = [x[k * m:(k + 1) * m] for k in range(self.n_blocks)]
        if self.n_blocks == 2:
            blocks.insert(0, np.zeros(m))
        return tuple(self.mix @ b for b in blocks)

    def unpack_radial(self, x):
        """Free vector -> the (T, 2) micro-lens distortion (q1, q2) (zeros without it)."""
        if not self.radial:
            return np.zeros((self.n_types, 2))
        q = np.asarray(x, dtype=float)[self.n_gauged:self.n_gauged + self.n_radial * self.n_types]
        out = np.zeros((self.n_types, 2))
        out[:, :self.n_radial] = q.reshape(self.n_radial, self.n_types).T
        return out

    def unpack_slope(self, x):
        """Free vector -> the (T,) slopes kappa_T (zeros without them)."""
        if not self.slope:
            return np.zeros(self.n_types)
        k0 = self.n_gauged + self.n_radial * self.n_types
        return self.mix @ np.asarray(x, dtype=float)[k0:k0 + self.n_slope]

    def unpack_view(self, x):
        """Free vector -> the (T,) view-plane scales g_T (zeros without them)."""
        if not self.view:
            return np.zeros(self.n_types)
        return self.mix @ np.asarray(x, dtype=float)[self.size - self.n_view:]

    @staticmethod
    def view_centre(theta):
        """The optical axis (i_c, j_c) (2,) raw pixels of model vector theta (10,)."""
        k_i, k_j, _, _, u_0, v_0, _, _, k_3, k_4 = (float(v) for v in theta[:10])
        if k_3 * k_i == 0.0 or k_4 * k_j == 0.0:
            raise InvalidInputError(
                f'lens-type view-plane scales need a focused model with k_3, k_4 != 0 (the '
                f'optical axis is -u_0 / (k_3 k_i)), got k_3 = {k_3}, k_4 = {k_4}')
        return np.array([-u_0 / (k_3 * k_i), -v_0 / (k_4 * k_j)])

    def view_positions(self, x, theta, i, j):
        """
        View-plane positions (s (N,), t (N,)) of rays at micro-image centres i, j (N,) each.

        s = k_i (1 + g_T) i + g_T u_0 / k_3 = k_i (i + g_T (i - i_c)) (module docstring).
        """
        k_i, k_j, u_0, v_0, k_3, k_4 = (float(theta[n]) for n in (0, 1, 4, 5, 8, 9))
        self.view_centre(theta)
        g = self.unpack_view(x)[self.lens_type]
        return (k_i * (1.0 + g) * i + g * (u_0 / k_3),
                k_j * (1.0 + g) * j + g * (v_0 / k_4))

    def view_rows(self, x, theta, i, j, d_st, jac):
        """
        Fix the model rows of jac (16, 2, N) for s, t of :meth:`view_positions` in place and
        return the (T - 1, 2, N) rows of the free g_f. d_st: (d res / d s, d res / d t), each
        (2, N) (the MPC evaluation's, holding s, t).
        """
        k_i, k_j, u_0, v_0, k_3, k_4 = (float(theta[n]) for n in (0, 1, 4, 5, 8, 9))
        g = self.unpack_view(x)[self.lens_type]
        r_s, r_t = d_st
        jac[0] = r_s * ((1.0 + g) * i)
        jac[1] = r_t * ((1.0 + g) * j)
        jac[4] += r_s * (g / k_3)
        jac[5] += r_t * (g / k_4)
        jac[8] += r_s * (-g * u_0 / (k_3 * k_3))
        jac[9] += r_t * (-g * v_0 / (k_4 * k_4))
        dg = r_s * (k_i * i + u_0 / k_3) + r_t * (k_j * j + v_0 / k_4)      # (2, N)
        return self.mix[self.lens_type].T[:, None, :] * dg[None]

    def apply(self, x, res, jac, u_obs, v_obs, i_obs=None, j_obs=None):
        """
        Turn the MPC residuals into raw-pixel ones in place and return the extra Jacobian rows.

        res (2, N) u'_pred - u' with u' = the observed (u, v) (uncorrected; the model
        prediction is what matters here); jac (R, 2, N) or None (all R rows are mapped). The
        predicted raw offset w
        solves h(|w|) w = (u'_pred - d_T) / (1 + a_T) (w = that without radial terms); the new
        residual is w - u_obs and the Jacobian rows are mapped likewise. i_obs, j_obs (N,): the
        micro-image centres (the '-slope' terms). Returns the
        (size - n_view, 2, N) rows of the free terms but the view scales (None without jac).
        """
        a, d, e = self.unpack(x)
        lt = self.lens_type
        g = 1.0 / (1.0 + a[lt])
        u_t = res[0] + u_obs - d[lt]
        v_t = res[1] + v_obs - e[lt]
        if self.slope:
            kap = self.unpack_slope(x)[lt]
            u_t = u_t - kap * i_obs
            v_t = v_t - kap * j_obs
        u_t = u_t * g                                     # h(w) w: the model's side
        v_t = v_t * g
        if self.radial:
            q = self.unpack_radial(x)[lt]
            w = _solve_radial(np.column_stack([u_t, v_t]), q)
            u_w, v_w = w[:, 0], w[:, 1]
            rho2 = (u_w * u_w + v_w * v_w) / RADIAL_UNIT_PX ** 2
            h = 1.0 + q[:, 0] * rho2 + q[:, 1] * rho2 * rho2
            dh = 2.0 * (q[:, 0] + 2.0 * q[:, 1] * rho2) / RADIAL_UNIT_PX ** 2
            # d(h w)/dw = h I + dh w w^T; its inverse maps d(u~, v~) to dw
            m00, m01, m11 = h + dh * u_w * u_w, dh * u_w * v_w, h + dh * v_w * v_w
            inv_det = 1.0 / (m00 * m11 - m01 * m01)
            i00, i01, i11 = m11 * inv_det, -m01 * inv_det, m00 * inv_det
        else:
            u_w, v_w = u_t, v_t
            i00 = i11 = np.ones_like(u_t)
            i01 = np.zeros_like(u_t)
        res[0] = u_w - u_obs
        res[1] = v_w - v_obs
        if jac is None:
            return None

        def through(du, dv):
            """Rows d(u~, v~) (K, N) each -> d(raw offset) (K, 2, N)."""
            return np.stack([i00 * du + i01 * dv, i01 * du + i11 * dv], axis=1)

        jac[:] = through(jac[:, 0] * g, jac[:, 1] * g)
        m = self.n_types - 1
        wt = (self.mix[lt] * g[:, None]).T                # (T-1, N): d(type term)/d free
        extra = np.zeros((self.size - self.n_view, 2, lt.size))
        k = 0
        if self.n_blocks == 3:
            extra[0:m] = through(-wt * u_t, -wt * v_t)
            k = m
        extra[k:k + m] = through(-wt, np.zeros_like(wt))
        extra[k + m:k + 2 * m] = through(np.zeros_like(wt), -wt)
        if self.radial:
            one = (np.arange(self.n_types)[:, None] == lt[None, :]).astype(float)   # (T, N)
            t_ = self.n_types
            power = rho2
            for j in range(self.n_radial):            # d(h w)/dq_j = rho^(2j+2) w
                base = self.n_gauged + j * t_
                extra[base:base + t_] = through(-one * power * u_w, -one * power * v_w)
                power = power * rho2
        if self.slope:
            k0 = self.n_gauged + self.n_radial * self.n_types
            extra[k0:k0 + m] = through(-wt * i_obs, -wt * j_obs)
        return extra

    def terms_with_std(self, x, cov=None, theta=None):
        """
        LensTypeTerms of free vector x; cov (size, size) its covariance (None: NaN std); theta
        (10,) the model (the optical axis of the '-view' modes).
        """
        a, d, e = self.unpack(x)
        std_a = np.full(self.n_types, np.nan)
        std_o = np.full((self.n_types, 2), np.nan)
        std_q = np.full((self.n_types, 2), np.nan)
        if cov is not None:
            m = self.n_types - 1
            stds = []
            for b in range(self.n_blocks):
                c = cov[b * m:(b + 1) * m, b * m:(b + 1) * m]
                stds.append(np.sqrt(np.maximum(np.einsum('tf,fg,tg->t', self.mix, c,
                                                         self.mix), 0.0)))
            if self.n_blocks == 3:
                std_a = stds.pop(0)
            std_o = np.column_stack(stds)
            if self.radial:
                var = np.diag(cov)[self.n_gauged:self.n_gauged + self.n_radial * self.n_types]
                std_q = np.zeros((self.n_types, 2))
                std_q[:, :self.n_radial] = np.sqrt(np.maximum(var, 0.0)).reshape(
                    self.n_radial, self.n_types).T
        radial = self.unpack_radial(x) if self.radial else None
        view = std_g = centre = None
        if self.view:
            if theta is None:
                raise InvalidInputError('the view-plane scales need the model (theta)')
            view, centre = self.unpack_view(x), self.view_centre(theta)
            std_g = np.full(self.n_types, np.nan)
            if cov is not None:
                c = cov[self.size - self.n_view:self.size, self.size - self.n_view:self.size]
                std_g = np.sqrt(np.maximum(np.einsum('tf,fg,tg->t', self.mix, c, self.mix),
                                           0.0))
        slope = std_k = None
        if self.slope:
            slope = self.unpack_slope(x)
            std_k = np.full(self.n_types, np.nan)
            if cov is not None:
                k0 = self.n_gauged + self.n_radial * self.n_types
                c = cov[k0:k0 + self.n_slope, k0:k0 + self.n_slope]
                std_k = np.sqrt(np.maximum(np.einsum('tf,fg,tg->t', self.mix, c, self.mix),
                                           0.0))
        return LensTypeTerms(self.terms, a, np.column_stack([d, e]), self.weights,
                             std_a if self.n_blocks == 3 else np.zeros(self.n_types), std_o,
                             radial, std_q if self.radial else None, view, std_g, centre,
                             slope, std_k)


def _radial_factor(uv, q):
    """h = 1 + q1 rho^2 + q2 rho^4 (N,) of offsets uv (N, 2), q (N, 2) per row."""
    rho2 = np.sum(uv * uv, axis=1) / RADIAL_UNIT_PX ** 2
    return 1.0 + q[:, 0] * rho2 + q[:, 1] * rho2 * rho2


def _solve_radial(uv, q):
    """
    Solve h(|w|) w = uv for w (N, 2) per row (q (N, 2)): Newton on the radius.

    Rows beyond the radius where h folds back (no root) come back NaN.
    """
    r_obs = np.hypot(uv[:, 0], uv[:, 1]) / RADIAL_UNIT_PX
    r = r_obs.copy()
    for _ in range(30):
        r2 = r * r
        f = r * (1.0 + q[:, 0] * r2 + q[:, 1] * r2 * r2) - r_obs
        df = 1.0 + 3.0 * q[:, 0] * r2 + 5.0 * q[:, 1] * r2 * r2
        step = f / np.where(df == 0.0, 1.0, df)
        r = r - step
        if np.all(np.abs(step) <= 1e-14 * np.maximum(1.0, r_obs)):
            break
    r2 = r * r
    ok = np.abs(r * (1.0 + q[:, 0] * r2 + q[:, 1] * r2 * r2) - r_obs) <= 1e-9 * np.maximum(
        1.0, r_obs)
    scale = np.where(r_obs > 0, r / np.where(r_obs > 0, r_obs, 1.0), 1.0)
    return uv * np.where(ok, scale, np.nan)[:, None]
