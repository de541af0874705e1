"""
Checkerboard and ChArUco calibration targets.

Board frame (DESIGN.md, OpenCV's convention): origin at the first inner corner, x along the
columns, y along the rows, z into the board. Inner corner (row, col) has the point index
``row * cols + col`` and lies at (col * square, row * square, 0).

Squares: the board has (cols + 1) x (rows + 1) squares; square (a, b) covers
X in [(a - 1) square, a square], Y in [(b - 1) square, b square] for a = 0..cols, b = 0..rows.
``first_square`` is the colour of square (0, 0), the outer square diagonally before corner 0;
square (a, b) has that colour when a + b is even. Knowing it lets a detector tell a board
from the same board rotated by 180 degrees (when cols + rows is odd) and from a board whose
corners are labelled one square off (always).

:class:`CharucoBoard` is a checkerboard with ArUco markers in its white squares (OpenCV's
``cv2.aruco.CharucoBoard``: corner id = point index), ``board_type`` 'charuco'; a mapping with
``board_type: charuco`` given to :meth:`Checkerboard.from_dict` gives one.
"""

from dataclasses import dataclass
import re

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

COLOURS = ('black', 'white')


MAX_CORNERS = 1000
"""Inner corners along one side of a board, at most (a stated cap)."""
MAX_SQUARE_M = 10.0
"""A square's side in metres, at most."""


@dataclass(frozen=True, eq=False)
class Checkerboard:
    """
    A planar checkerboard of ``cols`` x ``rows`` inner corners, ``square`` metres apart.

    first_square: 'black' | 'white', the colour of the outer square before corner 0.
    """

    cols: int
    rows: int
    square: float
    first_square: str = 'black'

    def __post_init__(self):
        for name in ('cols', 'rows'):
            value = getattr(self, name)
            ok = isinstance(value, (int, float, np.integer, np.floating)) and \
                not isinstance(value, bool) and bool(np.isfinite(value))
            if not ok or int(value) != value or not 2 <= int(value) <= MAX_CORNERS:
                raise InvalidInputError(
                    f'{name} must be an integer number of inner corners from 2 to '
                    f'{MAX_CORNERS}, got {value!r}')
            object.__setattr__(self, name, int(value))
        try:
            square = float(self.square)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f'square must be a length in metres, got {self.square!r}') from None
        if not (np.isfinite(square) and 0 < square <= MAX_SQUARE_M):
            raise InvalidInputError(f'square must be a positive length in metres, at most '
                                    f'{MAX_SQUARE_M:g}, got {square}')
        object.__setattr__(self, 'square', square)
        if self.first_square not in COLOURS:
            raise InvalidInputError(
                f'first_square must be one of {COLOURS}, got {self.first_square!r}')

    @classmethod
    def from_spec(cls, spec, square, *, first_square='black'):
        """Build from a ``'COLSxROWS'`` string (inner corners) and the square size in metres."""
        m = re.fullmatch(r'\s*(\d+)\s*[xX*,]\s*(\d+)\s*', str(spec))
        if not m:
            raise InvalidInputError(
                f'board must be given as COLSxROWS inner corners (e.g. 8x6), got {spec!r}')
        return cls(int(m.group(1)), int(m.group(2)), square, first_square)

    @property
    def board_type(self):
        """'checkerboard' (:class:`CharucoBoard`: 'charuco')."""
        return 'checkerboard'

    @property
    def pattern_size(self):
        """(cols, rows): OpenCV's patternSize."""
        return (self.cols, self.rows)

    @property
    def n_points(self):
        """Number of inner corners, cols * rows."""
        return self.cols * self.rows

    @property
    def symmetric(self):
        """True when a 180-degree rotation maps the square colours onto themselves."""
        return (self.cols + self.rows) % 2 == 0

    def points(self):
        """Board points (cols*rows, 3) in metres, index row * cols + col, z = 0."""
        r, c = np.mgrid[0:self.rows, 0:self.cols]
        return np.column_stack([c.ravel() * self.square, r.ravel() * self.square,
                                np.zeros(self.n_points)])

    def point_rc(self, index):
        """Point indices (N,) -> (row, col) (N, 2)."""
        index = np.asarray(index, dtype=np.int64)
        return np.column_stack([index // self.cols, index % self.cols])

    def is_black(self, xy):
        """Board-frame points (N, 2) metres -> (N,) bool: the square there is black."""
        xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        a = np.floor(xy[:, 0] / self.square).astype(np.int64) + 1
        b = np.floor(xy[:, 1] / self.square).astype(np.int64) + 1
        even = (a + b) % 2 == 0
        return even if self.first_square == 'black' else ~even

    def to_dict(self):
        """Plain mapping {cols, rows, square, first_square}."""
        return {'cols': self.cols, 'rows': self.rows, 'square': self.square,
                'first_square': self.first_square}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; accepts ``square_m`` for ``square``."""
        if not isinstance(d, dict):
            raise InvalidInputError(f'board must be a mapping with cols, rows, square, got '
                                    f'{type(d).__name__}')
        if cls is Checkerboard and board_type_of(d) == 'charuco':
            return CharucoBoard.from_dict(d)
        for key in ('cols', 'rows'):
            if key not in d:
                raise InvalidInputError(f'board lacks key {key!r}; expected cols, rows, square')
        square = d.get('square', d.get('square_m'))
        if square is None:
            raise InvalidInputError('board lacks key \'square\' (metres)')
        return cls(d['cols'], d['rows'], square, d.get('first_square', 'black'))


BOARD_TYPES = ('checkerboard', 'charuco')
CHARUCO_LAYOUTS = ('opencv', 'legacy')
"""ChArUco square layouts: 'opencv' (OpenCV >= 4.7: square (0, 0) black, markers in the white
squares) and 'legacy' (before 4.6: square (0, 0) white when the board has an even number of
square rows, as ``CharucoBoard.setLegacyPattern(True)``)."""
DEFAULT_DICTIONARY = 'DICT_4X4_250'
MARKER_FRACTION = 0.75
"""Default marker side as a fraction of the square."""


def _dictionary(name):
    """cv2.aruco Dictionary of a predefined name ('DICT_4X4_250', ...), or InvalidInputError."""
    import cv2
    code = getattr(cv2.aruco, str(name), None) if str(name).startswith('DICT_') else None
    if not isinstance(code, int):
        raise InvalidInputError(f'dictionary must be a predefined ArUco dictionary name such as '
                                f'{DEFAULT_DICTIONARY!r}, got {name!r}')
    return cv2.aruco.getPredefinedDictionary(code)


@dataclass(frozen=True, eq=False)
class CharucoBoard(Checkerboard):
    """
    A ChArUco board: a checkerboard of ``cols`` x ``rows`` inner corners with ArUco markers
    of ``dictionary`` (side ``marker`` metres, None: 0.75 square) in its white squares.

    Its corner ids are OpenCV's (``cv2.aruco.CharucoBoard((cols + 1, rows + 1), ...)``): id
    ``row * cols + col``, the point index of the checkerboard, so a corner is named by the
    markers around it and the numbering is never ambiguous (no 180-degree flip). ``layout``:
    'opencv' | 'legacy' (:data:`CHARUCO_LAYOUTS`); ``first_square`` follows from it (a value
    given is replaced).
    """

    dictionary: str = DEFAULT_DICTIONARY
    marker: float = None
    layout: str = 'opencv'

    def __post_init__(self):
        super().__post_init__()
        if self.layout not in CHARUCO_LAYOUTS:
            raise InvalidInputError(f'layout must be one of {CHARUCO_LAYOUTS}, got '
                                    f'{self.layout!r}')
        first = 'white' if self.layout == 'legacy' and (self.rows + 1) % 2 == 0 else 'black'
        object.__setattr__(self, 'first_square', first)
        marker = MARKER_FRACTION * self.square if self.marker is None else self.marker
        try:
            marker = float(marker)
        except (TypeError, ValueError):
            raise InvalidInputError(f'marker must be a length in metres, got '
                                    f'{self.marker!r}') from None
        if not (np.isfinite(marker) and 0 < marker < self.square):
            raise InvalidInputError(f'marker must be a positive length in metres under the square '
                                    f'{self.square:g}, got {marker}')
        object.__setattr__(self, 'marker', marker)
        size = len(_dictionary(self.dictionary).bytesList)
        if self.n_markers > size:
            raise InvalidInputError(
                f'a {self.cols}x{self.rows} ChArUco board needs {self.n_markers} markers; '
                f'{self.dictionary} has {size}')

    @property
    def board_type(self):
        """'charuco'."""
        return 'charuco'

    @property
    def n_markers(self):
        """Markers on the board: one per white square, (cols + 1)(rows + 1) // 2."""
        return (self.cols + 1) * (self.rows + 1) // 2

    def cv_board(self):
        """The ``cv2.aruco.CharucoBoard`` of this board (metres, OpenCV's ids and layout)."""
        import cv2
        board = cv2.aruco.CharucoBoard((self.cols + 1, self.rows + 1), self.square,
                                       self.marker, _dictionary(self.dictionary))
        board.setLegacyPattern(self.layout == 'legacy')
        return board

    def to_dict(self):
        """Plain mapping: the checkerboard's keys and board_type, dictionary, marker, layout."""
        return {**super().to_dict(), **self._charuco_keys()}

    def _charuco_keys(self):
        return {'board_type': 'charuco', 'dictionary': self.dictionary, 'marker': self.marker,
                'layout': self.layout}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (``marker_m`` accepted for ``marker``)."""
        base = Checkerboard.from_dict({**d, 'board_type': 'checkerboard'})
        return cls(base.cols, base.rows, base.square, base.first_square,
                   **charuco_keys(d))


def charuco_keys(d):
    """{dictionary, marker, layout} of a board mapping (defaults where absent)."""
    return {'dictionary': d.get('dictionary', DEFAULT_DICTIONARY),
            'marker': d.get('marker', d.get('marker_m')), 'layout': d.get('layout', 'opencv')}


def board_type_of(d):
    """The ``board_type`` of a board mapping ('checkerboard' when absent), checked."""
    kind = d.get('board_type', 'checkerboard') if isinstance(d, dict) else 'checkerboard'
    if kind not in BOARD_TYPES:
        raise InvalidInputError(f'board_type must be one of {BOARD_TYPES}, got {kind!r}')
    return kind
