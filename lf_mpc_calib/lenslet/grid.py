"""
The micro-image grid of a raw light-field image.

Micro-image (k, l) — k counts along a row of lenses, l counts rows — has its centre at
``origin + (k + shift(l)) * row_vector + l * column_vector`` in raw pixels (x right, y down,
origin at the centre of pixel (0, 0)), where ``shift(l) = 0.5 * ((l + hex_parity) % 2)``
on a hexagonal lattice and 0 on a rectangular one. ``row_vector`` has length ``pitch`` and
angle ``rotation``; ``column_vector`` is ``row_vector`` turned by +90° and scaled by
``row_spacing`` (pitch * sqrt(3)/2 for a regular hexagonal lattice, pitch for a square one).

Where one regular lattice does not explain the micro-images (a pitch that varies across the
sensor, main-lens distortion), the grid carries a :class:`LatticeDeformation`: a smooth
polynomial displacement added to every regular centre, a function of that regular centre's
position. Without one (``deformation=None``, the default and what older calibration files
hold) the lattice is exactly regular.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, shorten

LATTICES = ('hex', 'rect')
LAYOUTS = ('rows', 'columns')


def layout_of(rotation):
    """
    'rows' when a lattice's lens rows (angle ``rotation`` rad) run nearer the image's x axis
    than its y axis, else 'columns' (a column-shifted lattice: rows at about +-90 degrees).
    """
    a = abs(float(np.angle(np.exp(2j * float(rotation)))) / 2.0)      # folded to [0, pi/2]
    return 'rows' if a <= np.pi / 4 else 'columns'


def row_direction(lattice, rotation):
    """
    The row angle (rad) of the lattice's canonical numbering: the equivalent row direction
    (``rotation`` + n 60 degrees on a hexagonal lattice, + n 90 on a rectangular one, + n 180)
    nearest an image axis, in (-45, 45] degrees (layout 'rows') or (45, 135] ('columns': a
    hexagonal lattice turned by 30 or 90 degrees, whose half-pitch shift runs along the image
    columns). Ties (15 degrees on a hexagonal lattice) and every rectangular lattice keep rows.
    """
    step = np.pi / 3 if lattice == 'hex' else np.pi / 2
    cands = float(rotation) + step * np.arange(int(round(np.pi / step)))
    rows = np.angle(np.exp(2j * cands)) / 2.0                    # each folded to (-90, 90]
    off_x = np.abs(rows)
    off_y = np.pi / 2 - off_x
    best_x, best_y = int(np.argmin(off_x)), int(np.argmin(off_y))
    if off_x[best_x] <= off_y[best_y] + 1e-9:
        return float(rows[best_x])
    r = float(rows[best_y])
    return r + np.pi if r <= -np.pi / 4 else r


def _monomials(u, v, degree):
    """(N, T) monomials u^i v^(d-i) for d = 0..degree, i = 0..d, T = (degree+1)(degree+2)/2."""
    return np.column_stack([u ** i * v ** (d - i) for d in range(degree + 1)
                            for i in range(d + 1)])


@dataclass(frozen=True, eq=False)
class LatticeDeformation:
    """
    A smooth displacement (px) of the micro-image centres away from the regular lattice.

    A centre whose regular-lattice position is q (N, 2) raw px moves by
    ``monomials((q - centre) / scale) @ coef`` (N, 2): a 2-D polynomial of total degree
    ``degree`` in the normalised position. centre (2,), scale (2,) px; coef (T, 2) with
    T = (degree + 1)(degree + 2) / 2, terms ordered u^i v^(d-i) for d = 0..degree, i = 0..d.
    """

    degree: int
    centre: np.ndarray
    scale: np.ndarray
    coef: np.ndarray

    def __post_init__(self):
        degree = _whole('deformation degree', self.degree, 0, MAX_DEFORMATION_DEGREE)
        n_terms = (degree + 1) * (degree + 2) // 2
        centre = _floats('deformation centre', self.centre)
        scale = _floats('deformation scale', self.scale)
        coef = _floats('deformation coef', self.coef)
        if centre.shape != (2,) or scale.shape != (2,) or not np.all(scale > 0) or \
                not np.all(np.isfinite(centre)) or not np.all(np.isfinite(scale)):
            raise InvalidInputError(f'deformation centre and scale must be 2 finite numbers each '
                                    f'(scale > 0), got {shorten(repr(self.centre))}, '
                                    f'{shorten(repr(self.scale))}')
        if coef.shape != (n_terms, 2) or not np.all(np.isfinite(coef)):
            raise InvalidInputError(f'deformation coef must be ({n_terms}, 2) finite numbers for '
                                    f'degree {degree}, got shape {coef.shape}')
        object.__setattr__(self, 'degree', degree)
        object.__setattr__(self, 'centre', centre)
        object.__setattr__(self, 'scale', scale)
        object.__setattr__(self, 'coef', coef)

    def displacement(self, xy):
        """Displacement (N, 2) px at regular-lattice positions xy (N, 2) px."""
        q = (np.asarray(xy, dtype=float).reshape(-1, 2) - self.centre) / self.scale
        return _monomials(q[:, 0], q[:, 1], self.degree) @ self.coef

    @classmethod
    def fit(cls, xy, shift, degree, centre, scale):
        """Least-squares deformation of ``degree`` moving regular positions xy (N, 2) by shift."""
        centre = np.asarray(centre, dtype=float)
        scale = np.asarray(scale, dtype=float)
        q = (np.asarray(xy, dtype=float) - centre) / scale
        a = _monomials(q[:, 0], q[:, 1], degree)
        coef, *_ = np.linalg.lstsq(a, np.asarray(shift, dtype=float), rcond=None)
        return cls(degree, centre, scale, coef)

    def to_dict(self):
        """Plain-Python mapping (``lenslet_grid.deformation`` of the calibration file)."""
        return {'degree': self.degree, 'centre': [float(x) for x in self.centre],
                'scale': [float(x) for x in self.scale],
                'coef': [[float(a), float(b)] for a, b in self.coef]}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; raises InvalidInputError naming a missing key."""
        keys = ('degree', 'centre', 'scale', 'coef')
        for key in keys:
            if key not in d:
                raise InvalidInputError(f'deformation lacks key {key!r}; expected {keys}')
        return cls(d['degree'], d['centre'], d['scale'], d['coef'])


MAX_IMAGE_SIDE = 1 << 16     # pixels (or lenses) along one side of a raw image, at most
MIN_PITCH = 2.0              # px: a micro-image narrower than 2 pixels holds no views
MAX_ROTATION = 2 * np.pi     # rad: a lattice angle is within one turn either way
MAX_DEFORMATION_DEGREE = 8   # the estimator fits degree <= 3; a stated cap


def _floats(name, value):
    """``value`` as a float array, else InvalidInputError naming ``name`` and what arrived."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f'{name} must be numbers, got {shorten(repr(value))}') from None


def _whole(name, value, lo, hi):
    """``value`` as an int in [lo, hi] (a whole float is fine), else InvalidInputError."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, str)
    ok = ok and bool(np.isfinite(value)) and float(value) == int(value) and lo <= value <= hi
    if not ok:
        raise InvalidInputError(f'{name} must be a whole number from {lo} to {hi}, got '
                                f'{shorten(repr(value))}')
    return int(value)


def _length(name, value, lo, hi):
    """``value`` as a float in [lo, hi] pixels, else InvalidInputError naming the bounds."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        x = float('nan')
    if not lo <= x <= hi:           # NaN fails too
        raise InvalidInputError(f'{name} must be a number of pixels from {lo:g} to {hi:g} (the '
                                f'image diagonal), got {shorten(repr(value))}')
    return x


def _count_pair(name, value, most):
    """``value`` as two integers in [1, most] (width/cols, height/rows), else the error."""
    try:
        pair = tuple(value)
        ok = len(pair) == 2 and all(float(x) == int(x) and 1 <= int(x) <= most for x in pair)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InvalidInputError(f'{name} must be two integers in [1, {most}], got '
                                f'{shorten(repr(value))}')
    return tuple(int(x) for x in pair)


@dataclass(frozen=True, eq=False)
class LensletGrid:
    """
    A regular micro-image lattice.

    lattice 'hex' | 'rect'; pitch, row_spacing in pixels; rotation in radians;
    origin (2,) pixels (centre of micro-image (0, 0)); shape (cols, rows) number of lenses;
    hex_parity 0 or 1 (which rows are shifted by half a pitch); image_size (width, height);
    deformation: None (a regular lattice) or a :class:`LatticeDeformation` added to every
    centre (``origin`` is then the regular position of micro-image (0, 0)).
    """

    lattice: str
    pitch: float
    row_spacing: float
    rotation: float
    origin: np.ndarray
    shape: tuple
    image_size: tuple
    hex_parity: int = 1
    deformation: LatticeDeformation = None

    def __post_init__(self):
        if self.lattice not in LATTICES:
            raise InvalidInputError(f'lattice must be one of {LATTICES}, got {self.lattice!r}')
        origin = _floats('origin', self.origin)
        if origin.shape != (2,) or not np.all(np.isfinite(origin)):
            raise InvalidInputError(f'origin must be 2 finite numbers, got {self.origin!r}')
        object.__setattr__(self, 'origin', origin)
        image_size = _count_pair('image_size', self.image_size, MAX_IMAGE_SIDE)
        shape = _count_pair('shape', self.shape, MAX_IMAGE_SIDE)
        diagonal = float(np.hypot(*image_size))
        pitch = _length('pitch', self.pitch, MIN_PITCH, diagonal)
        row_spacing = _length('row_spacing', self.row_spacing, MIN_PITCH, diagonal)
        rotation = _floats('rotation', self.rotation)
        if rotation.shape != () or not abs(float(rotation)) <= MAX_ROTATION:
            raise InvalidInputError(f'rotation must be radians within +-2 pi, got '
                                    f'{shorten(repr(self.rotation))}')
        object.__setattr__(self, 'pitch', pitch)
        object.__setattr__(self, 'row_spacing', row_spacing)
        most = (int(diagonal / self.pitch) + 2, int(diagonal / self.row_spacing) + 2)
        if shape[0] > most[0] or shape[1] > most[1]:
            raise InvalidInputError(
                f'shape {shape[0]}x{shape[1]} lenses cannot fit a {image_size[0]}x'
                f'{image_size[1]} px image at pitch {self.pitch:g} px, row spacing '
                f'{self.row_spacing:g} px (at most {most[0]}x{most[1]})')
        object.__setattr__(self, 'shape', shape)
        object.__setattr__(self, 'image_size', image_size)
        object.__setattr__(self, 'rotation', float(rotation))
        object.__setattr__(self, 'hex_parity', _whole('hex_parity', self.hex_parity, 0, 1))
        if self.deformation is not None and not isinstance(self.deformation,
                                                           LatticeDeformation):
            raise InvalidInputError(f'deformation must be None or a LatticeDeformation, got '
                                    f'{type(self.deformation).__name__}')
        w, h = image_size
        if not np.all(np.abs(origin - [w / 2, h / 2]) <= diagonal):
            raise InvalidInputError(f'origin must lie within the image diagonal ({diagonal:.0f} '
                                    f'px) of the {w}x{h} image\'s centre, got {origin.tolist()}')
        if self.deformation is not None:
            corners = np.array([[0, 0], [w, 0], [0, h], [w, h], [w / 2, h / 2]], float)
            with np.errstate(all='ignore'):
                moved = np.abs(self.deformation.displacement(corners))
            if not np.all(moved <= diagonal):       # NaN and inf fail too
                raise InvalidInputError(
                    f'deformation moves micro-images by up to '
                    f'{np.max(np.where(np.isfinite(moved), moved, np.inf)):.3g} px at the '
                    f'image corners, more than the image diagonal ({diagonal:.0f} px)')

    @property
    def row_vector(self):
        """(2,) step between neighbouring lenses of one row, in pixels."""
        return self.pitch * np.array([np.cos(self.rotation), np.sin(self.rotation)])

    @property
    def column_vector(self):
        """(2,) step from one row of lenses to the next, in pixels."""
        return self.row_spacing * np.array([-np.sin(self.rotation), np.cos(self.rotation)])

    @property
    def layout(self):
        """'rows' (lens rows along the image's x axis) or 'columns' (along y): layout_of."""
        return layout_of(self.rotation)

    def centres_of(self, kl):
        """Centres (N, 2) of micro-images with lattice indices kl (N, 2) = (k, l)."""
        kl = np.asarray(kl, dtype=float).reshape(-1, 2)
        k, l_ = kl[:, 0], kl[:, 1]
        if self.lattice == 'hex':
            k = k + 0.5 * ((l_.astype(np.int64) + self.hex_parity) % 2)
        xy = self.origin + k[:, None] * self.row_vector + l_[:, None] * self.column_vector
        if self.deformation is not None:
            xy = xy + self.deformation.displacement(xy)
        return xy

    def regular(self):
        """This grid without its deformation (the best-fitting regular lattice)."""
        if self.deformation is None:
            return self
        return LensletGrid(self.lattice, self.pitch, self.row_spacing, self.rotation,
                           self.origin, self.shape, self.image_size, self.hex_parity)

    def indices(self):
        """All lattice indices (M, 2) = (k, l), row-major (l slowest)."""
        cols, rows = self.shape
        l_, k = np.mgrid[0:rows, 0:cols]
        return np.column_stack([k.ravel(), l_.ravel()])

    def centres(self):
        """All micro-image centres (M, 2) in the order of :meth:`indices`."""
        return self.centres_of(self.indices())

    def to_dict(self):
        """Plain-Python mapping for the calibration file (``lenslet_grid``)."""
        d = {'lattice': self.lattice, 'pitch': self.pitch, 'row_spacing': self.row_spacing,
             'rotation': self.rotation, 'origin': [float(x) for x in self.origin],
             'shape': list(self.shape), 'image_size': list(self.image_size),
             'hex_parity': self.hex_parity}
        if self.deformation is not None:
            d['deformation'] = self.deformation.to_dict()
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; raises InvalidInputError naming a missing key."""
        keys = ('lattice', 'pitch', 'row_spacing', 'rotation', 'origin', 'shape', 'image_size')
        for key in keys:
            if key not in d:
                raise InvalidInputError(f'lenslet_grid lacks key {key!r}; expected {keys}')
        deformation = d.get('deformation')
        if deformation is not None:
            deformation = LatticeDeformation.from_dict(deformation)
        return cls(d['lattice'], d['pitch'], d['row_spacing'], d['rotation'], d['origin'],
                   d['shape'], d['image_size'], d.get('hex_parity', 1),
                   deformation)


def _nearest_lens(ref, xy):
    """Index (2,) of the regular lattice position of ``ref`` (hex_parity 0) nearest xy (2,)."""
    w = np.linalg.solve(np.column_stack([ref.row_vector, ref.column_vector]), xy - ref.origin)
    rows = (np.floor(w[1]), np.floor(w[1]) + 1) if ref.lattice == 'hex' else (np.rint(w[1]),)
    kl = [(np.rint(w[0] - (0.5 * (int(l_) % 2) if ref.lattice == 'hex' else 0.0)), l_)
          for l_ in rows]
    d = np.hypot(*(ref.regular().centres_of(kl) - xy).T)
    return np.asarray(kl[int(np.argmin(d))], dtype=float)


def numbered_grid(lattice, pitch, row_spacing, rotation, lens_xy, image_size,
                  deformation=None):
    """
    The LensletGrid of a lattice, numbered by the one rule of docs/file-formats.md.

    The lattice is given by its vectors (pitch, row_spacing px, rotation rad) and the regular
    centre lens_xy (2,) px of any one of its lenses. Rule: the lens whose regular centre is
    nearest the image centre ((width - 1) / 2, (height - 1) / 2) sits in an unshifted row;
    the grid spans the index rectangle of every lattice position whose centre (deformed, with
    a deformation) lies in the image, [-0.5, size - 0.5]. Lens (0, 0) is that rectangle's
    first corner and hex_parity says whether its row 0 is shifted. The numbering depends only
    on the lattice and the image size, not on which micro-images a white image shows whole:
    a truth and an estimate of one lattice number the same lenses alike.
    """
    w, h = image_size
    ref = LensletGrid(lattice, pitch, row_spacing, rotation, lens_xy, (1, 1), (w, h), 0)
    centre = ref.centres_of([_nearest_lens(ref, (np.array([w, h], float) - 1) / 2)])[0]
    ref = LensletGrid(lattice, pitch, row_spacing, rotation, centre, (1, 1), (w, h), 0,
                      deformation)
    corners = np.array([[-0.5, -0.5], [w - 0.5, -0.5], [-0.5, h - 0.5], [w - 0.5, h - 0.5]])
    ab = np.linalg.solve(np.column_stack([ref.row_vector, ref.column_vector]),
                         (corners - centre).T).T
    margin = 4 if deformation is not None else 1     # a deformed lattice reaches a bit further
    k0, k1 = int(np.floor(ab[:, 0].min())) - margin, int(np.ceil(ab[:, 0].max())) + margin
    l0, l1 = int(np.floor(ab[:, 1].min())) - margin, int(np.ceil(ab[:, 1].max())) + margin
    l_, k = np.mgrid[l0:l1 + 1, k0:k1 + 1]
    kl = np.column_stack([k.ravel(), l_.ravel()])
    xy = ref.centres_of(kl)
    inside = (xy[:, 0] >= -0.5) & (xy[:, 0] <= w - 0.5) & (xy[:, 1] >= -0.5) & \
             (xy[:, 1] <= h - 0.5)
    if not np.any(inside):
        raise InvalidInputError(f'the lattice has no micro-image inside the {w}x{h} image')
    kl = kl[inside]
    kmin, lmin = kl.min(axis=0)
    kmax, lmax = kl.max(axis=0)
    origin = centre + kmin * ref.row_vector + lmin * ref.column_vector
    return LensletGrid(lattice, pitch, row_spacing, rotation, origin,
                       (int(kmax - kmin + 1), int(lmax - lmin + 1)), (w, h),
                       int(lmin) % 2 if lattice == 'hex' else 1, deformation)


def regular_indices(grid, xy):
    """Indices (N, 2) int64 of ``grid``'s regular lattice positions xy (N, 2) px (exact)."""
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    w = np.linalg.solve(np.column_stack([grid.row_vector, grid.column_vector]),
                        (xy - grid.origin).T).T
    l_ = np.rint(w[:, 1])
    shift = 0.5 * ((l_.astype(np.int64) + grid.hex_parity) % 2) if grid.lattice == 'hex' else 0
    return np.column_stack([np.rint(w[:, 0] - shift), l_]).astype(np.int64)
