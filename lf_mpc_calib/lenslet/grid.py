"""
The micro-image grid of a raw light-field image.

Micro-image (k, l) — k counts along a row of lenses, l counts rows — has its centre at
``origin + (k + shift(l)) * row_vector + l * column_vector`` in raw pixels (x right, y down,
origin at the centre of pixel (0, 0)), where ``shift(l) = 0.5 * ((l + hex_parity) % 2)``
on a hexagonal lattice and 0 on a rectangular one. ``row_vector`` has length ``pitch`` and
angle ``rotation``; ``column_vector`` is ``row_vector`` turned by +90° and scaled by
``row_spacing`` (pitch * sqrt(3)/2 for a regular hexagonal lattice, pitch for a square one).
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

LATTICES = ('hex', 'rect')


@dataclass(frozen=True, eq=False)
class LensletGrid:
    """
    A regular micro-image lattice.

    lattice 'hex' | 'rect'; pitch, row_spacing in pixels; rotation in radians;
    origin (2,) pixels (centre of micro-image (0, 0)); shape (cols, rows) number of lenses;
    hex_parity 0 or 1 (which rows are shifted by half a pitch); image_size (width, height).
    """

    lattice: str
    pitch: float
    row_spacing: float
    rotation: float
    origin: np.ndarray
    shape: tuple
    image_size: tuple
    hex_parity: int = 1

    def __post_init__(self):
        if self.lattice not in LATTICES:
            raise InvalidInputError(f'lattice must be one of {LATTICES}, got {self.lattice!r}')
        if not (np.isfinite(self.pitch) and self.pitch > 0):
            raise InvalidInputError(f'pitch must be a positive number of pixels, got {self.pitch}')
        if not (np.isfinite(self.row_spacing) and self.row_spacing > 0):
            raise InvalidInputError(f'row_spacing must be positive, got {self.row_spacing}')
        origin = np.asarray(self.origin, dtype=float)
        if origin.shape != (2,) or not np.all(np.isfinite(origin)):
            raise InvalidInputError(f'origin must be 2 finite numbers, got {self.origin!r}')
        object.__setattr__(self, 'origin', origin)
        object.__setattr__(self, 'shape', tuple(int(x) for x in self.shape))
        object.__setattr__(self, 'image_size', tuple(int(x) for x in self.image_size))
        object.__setattr__(self, 'rotation', float(self.rotation))
        object.__setattr__(self, 'pitch', float(self.pitch))
        object.__setattr__(self, 'row_spacing', float(self.row_spacing))
        object.__setattr__(self, 'hex_parity', int(self.hex_parity) % 2)

    @property
    def row_vector(self):
        """(2,) step between neighbouring lenses of one row, in pixels."""
        return self.pitch * np.array([np.cos(self.rotation), np.sin(self.rotation)])

    @property
    def column_vector(self):
        """(2,) step from one row of lenses to the next, in pixels."""
        return self.row_spacing * np.array([-np.sin(self.rotation), np.cos(self.rotation)])

    def centres_of(self, kl):
        """Centres (N, 2) of micro-images with lattice indices kl (N, 2) = (k, l)."""
        kl = np.asarray(kl, dtype=float).reshape(-1, 2)
        k, l_ = kl[:, 0], kl[:, 1]
        if self.lattice == 'hex':
            k = k + 0.5 * ((l_.astype(np.int64) + self.hex_parity) % 2)
        return self.origin + k[:, None] * self.row_vector + l_[:, None] * self.column_vector

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
        return {'lattice': self.lattice, 'pitch': self.pitch, 'row_spacing': self.row_spacing,
                'rotation': self.rotation, 'origin': [float(x) for x in self.origin],
                'shape': list(self.shape), 'image_size': list(self.image_size),
                'hex_parity': self.hex_parity}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; raises InvalidInputError naming a missing key."""
        keys = ('lattice', 'pitch', 'row_spacing', 'rotation', 'origin', 'shape', 'image_size')
        for key in keys:
            if key not in d:
                raise InvalidInputError(f'lenslet_grid lacks key {key!r}; expected {keys}')
        return cls(d['lattice'], d['pitch'], d['row_spacing'], d['rotation'], d['origin'],
                   tuple(d['shape']), tuple(d['image_size']), d.get('hex_parity', 1))
