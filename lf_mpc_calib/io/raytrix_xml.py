"""
A Raytrix ``RayCalibData`` XML (the lens-grid calibration Raytrix software writes) as a
:class:`~lf_mpc_calib.lenslet.grid.LensletGrid` and a multi-focus lens-type map.

The meaning of each field is what the public readers of the format do with it (see
docs/file-formats.md, "Raytrix RayCalibData XML", for the readers): ``diameter`` is the lens
pitch in pixels; ``offset`` (pixels) places the lens nearest the image centre at
``((width - 1) / 2 + x, (height - 1) / 2 - y)`` (the XML's y axis points up); ``rotation``
(radians, counter-clockwise in that y-up frame) turns the lattice, which is a clockwise turn
of ``-rotation`` in raw pixels (x right, y down); ``lens_base_x`` / ``lens_base_y`` (lens
units, y up) are the two lattice steps; each ``lens_type`` has an ``offset`` (lens units) from
the central lens to a lens of that type and a ``depth_range`` of virtual depths;
``sub_grid_base`` is a step of the lens-type pattern; ``lens_border`` (px) the rim of a
micro-image not to use; ``tcp`` a virtual depth. The file holds no image size: it is given, or
taken from the image beside the XML with the same stem (PlenopticToolbox2.0's convention).

    read_raytrix_xml(path, image_size) -> RaytrixGrid (grid, lens types, the file's extras)
"""

from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, shorten
from lf_mpc_calib.io.file_checks import read_bytes
from lf_mpc_calib.lenslet.grid import LensletGrid, numbered_grid, row_direction

ROOT_TAG = 'RayCalibData'
VERSIONS = ('1.0',)
IMAGE_SUFFIXES = ('.png', '.bmp', '.tif', '.tiff')
"""Suffixes of the image looked for beside an XML (same stem) when no image size is given."""
MAX_XML_BYTES = 1 << 20
"""A RayCalibData file is about 2 kB; anything over 1 MiB is not one."""
LATTICE_TOL = 1e-4
"""Lens units: how far a base vector, a type offset or the sub-grid base may be from the
exact hexagonal lattice (the file writes 12 digits; single-precision values agree to 1e-7)."""
UNITS = {'offset': 'pix', 'diameter': 'pix', 'rotation': 'rad', 'lens_border': 'pix',
         'tcp': 'virtual_depth', 'lens_base_x': 'lens', 'lens_base_y': 'lens',
         'sub_grid_base': 'lens'}


@dataclass(frozen=True, eq=False)
class RaytrixGrid:
    """
    What a RayCalibData file says about the micro-lens array.

    grid: the LensletGrid (numbered by the project's rule, docs/file-formats.md); types (M,)
    int: the lens type of each micro-image in ``grid.indices()`` order (0 for a one-type
    array); depth_ranges (T, 2): each type's virtual-depth range [min, max]; centre (2,) px:
    the file's central lens; lens_border px, tcp virtual depth (None when absent);
    lens_types: the mapping for a grid or calibration file (``n_types``, ``classes``,
    ``type_of_class`` as :func:`lf_mpc_calib.measurement.focused.type_class_map` writes it,
    ``virtual_depth_range``).
    """

    grid: LensletGrid
    types: np.ndarray
    depth_ranges: np.ndarray
    centre: np.ndarray
    lens_border: float = None
    tcp: float = None

    @property
    def lens_types(self):
        """The lens-type map as a plain mapping (the ``lens_types`` key of a grid file)."""
        n = len(self.depth_ranges)
        cols = self.grid.shape[0]
        idx = np.arange(len(self.types))
        cls = (idx % cols) % n + n * ((idx // cols) % 2)
        rule = []
        for k in range(2 * n):
            values = np.unique(self.types[cls == k])
            rule.append(int(values[0]) if len(values) else k % n)
        return {'n_types': int(n),
                'classes': f'(k mod {n}) + {n} (l mod 2) of lenslet_grid indices',
                'type_of_class': rule,
                'virtual_depth_range': [[float(a), float(b)] for a, b in self.depth_ranges],
                'source': 'RayCalibData lens_type'}


def _text(path, node, field):
    """The stripped text of ``node`` (field ``field`` of ``path``), refused when absent."""
    if node is None:
        raise InvalidInputError(f'RayCalibData {path}: field {field!r} is missing')
    text = (node.text or '').strip()
    if not text:
        raise InvalidInputError(f'RayCalibData {path}: field {field!r} is empty')
    return text


def _number(path, node, field):
    """The finite number in ``node``, else InvalidInputError naming the field and value."""
    text = _text(path, node, field)
    try:
        value = float(text)
    except ValueError:
        value = float('nan')
    if not np.isfinite(value):
        raise InvalidInputError(f'RayCalibData {path}: field {field!r} must be a finite number, '
                                f'got {shorten(repr(text), 60)}')
    return value


def _units(path, node, field, want=None):
    want = want or UNITS.get(field.split('/')[0])
    got = node.attrib.get('units') if node is not None else None
    if want is not None and got is not None and got != want:
        raise InvalidInputError(f'RayCalibData {path}: field {field!r} must be in units '
                                f'{want!r}, got units={got!r}')


def _scalar(path, root, field, required=True):
    node = root.find(field)
    if node is None and not required:
        return None
    _units(path, node, field)
    return _number(path, node, field)


def _pair(path, root, field, names=('x', 'y'), units=None, label=None):
    node = root.find(field)
    label = label or field
    if node is None:
        raise InvalidInputError(f'RayCalibData {path}: field {label!r} is missing')
    _units(path, node, label, units)
    return np.array([_number(path, node.find(n), f'{label}/{n}') for n in names])


def _lattice_coords(basis, vector, what, path):
    """Integer coordinates (2,) of ``vector`` in the lens-unit ``basis`` (2x2 columns)."""
    ab = np.linalg.solve(basis, vector)
    if np.max(np.abs(ab - np.rint(ab))) > LATTICE_TOL:
        raise InvalidInputError(
            f'RayCalibData {path}: {what} {vector.tolist()} (lens units) is not a lattice step '
            f'of lens_base_x, lens_base_y (coordinates {np.round(ab, 4).tolist()})')
    return np.rint(ab).astype(np.int64)


def _check_distortion(path, root):
    """Honour the distortion entry when it is the identity; refuse any other by name."""
    node = root.find('distortion')
    if node is None:
        return
    kind = node.attrib.get('type', '')
    function = (node.findtext('function') or '').strip()
    params = node.findall('parameter')
    count = [p.attrib.get('count') for p in params]
    values = []
    for n, p in enumerate(params):
        values.append(_number(path, p, f'distortion/parameter[{n}]'))
    offset = node.find('offset')
    off = [0.0, 0.0] if offset is None else [
        _number(path, offset.find(k), f'distortion/offset/{k}') for k in 'xy']
    identity = function == 'constant' and all(c in (None, '0') for c in count) and \
        all(v == 0 for v in values)
    if not identity:
        raise InvalidInputError(
            f'RayCalibData {path}: distortion type={kind!r} function={function!r} with '
            f'parameters {values} (count {count}) is not supported: only function '
            f'\'constant\' with no parameters (no distortion) is; the lens centres would be '
            f'wrong without it')
    if any(v != 0 for v in off):
        raise InvalidInputError(f'RayCalibData {path}: distortion/offset {off} must be 0 with '
                                f'function \'constant\'')


def sibling_image_size(path):
    """(width, height) of the image beside ``path`` with its stem, or None when there is none."""
    path = Path(path)
    for suffix in IMAGE_SUFFIXES:
        for candidate in (path.with_suffix(suffix), path.with_suffix(suffix.upper())):
            if candidate.is_file():
                from PIL import Image
                try:
                    with Image.open(candidate) as img:
                        return tuple(int(x) for x in img.size)
                except (OSError, ValueError) as exc:
                    raise InvalidInputError(f'{candidate}: cannot read its size ({exc})') \
                        from None
    return None


def _parse(path):
    path = Path(path)
    text = read_bytes(path, 'RayCalibData file (a few kB)', MAX_XML_BYTES)
    if b'<!ENTITY' in text or b'<!DOCTYPE' in text:
        raise InvalidInputError(f'RayCalibData file {path} declares a DOCTYPE or entities; a '
                                'RayCalibData file has none')
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise InvalidInputError(f'{path} is not XML: {exc}') from None
    if root.tag != ROOT_TAG:
        raise InvalidInputError(f'{path}: root element must be {ROOT_TAG!r} (a Raytrix '
                                f'calibration file), got {shorten(repr(root.tag), 60)}')
    version = root.attrib.get('version')
    if version is not None and version not in VERSIONS:
        raise InvalidInputError(f'{path}: RayCalibData version must be one of {VERSIONS}, got '
                                f'{version!r}')
    return root


def read_raytrix_xml(path, image_size=None):
    """
    The RaytrixGrid of the RayCalibData file ``path``.

    image_size (width, height) px of the raw image the file describes; None: the size of the
    image beside the file with the same stem (``sc2_klein.xml`` -> ``sc2_klein.png``).
    Raises InvalidInputError naming the field and value of a file of another schema or
    version, a missing or non-numeric field, a lattice that is not hexagonal, type offsets off
    the lattice, a distortion entry other than none, or no image size.
    """
    root = _parse(path)
    w, h = _image_size(path, image_size)
    offset = _pair(path, root, 'offset')
    diameter = _scalar(path, root, 'diameter')
    rotation = _scalar(path, root, 'rotation')
    lens_border = _scalar(path, root, 'lens_border', required=False)
    tcp = _scalar(path, root, 'tcp', required=False)
    bx = _pair(path, root, 'lens_base_x')
    by = _pair(path, root, 'lens_base_y')
    _check_hexagonal_lattice(path, diameter, bx, by, np.hypot(w, h))
    _check_distortion(path, root)
    basis = np.column_stack([bx, by])
    classes, ranges = _lens_types(path, root, basis)
    # lens units (y up) -> raw pixels (x right, y down), turned by -rotation
    c, s = np.cos(rotation), np.sin(rotation)
    to_px = diameter * np.array([[c, s], [-s, c]]) @ np.diag([1.0, -1.0])
    centre = np.array([(w - 1) / 2.0 + offset[0], (h - 1) / 2.0 - offset[1]])
    row = to_px @ bx
    angle = row_direction('hex', float(np.arctan2(row[1], row[0])))
    grid = numbered_grid('hex', diameter, diameter * np.sqrt(3) / 2, angle, centre, (w, h))
    ab = np.rint(np.linalg.solve(to_px @ basis, (grid.centres() - centre).T).T).astype(np.int64)
    pattern = (ab[:, 0] - ab[:, 1]) % 3 if len(classes) == 3 else np.zeros(len(ab), np.int64)
    type_of_pattern = np.zeros(3, np.int64)
    for t, k in enumerate(classes):
        type_of_pattern[k] = t
    return RaytrixGrid(grid, type_of_pattern[pattern], np.asarray(ranges, float), centre,
                       lens_border, tcp)


def _image_size(path, image_size):
    """(width, height) px: ``image_size`` given, else that of the image beside the file
    ``path`` with its stem (InvalidInputError when there is none)."""
    if image_size is None:
        image_size = sibling_image_size(path)
        if image_size is None:
            raise InvalidInputError(
                f'RayCalibData {path} holds no image size: give it (--image RAW) or put the raw '
                f'image beside the file with the same stem ({Path(path).stem}.png)')
    w, h = (int(x) for x in image_size)
    return w, h


def _check_hexagonal_lattice(path, diameter, bx, by, diagonal):
    """InvalidInputError unless the file ``path``'s lens diameter is from 2 px to the image
    ``diagonal`` and its lens_base_x, lens_base_y (2,) are unit steps (lens units) 60 or 120
    degrees apart."""
    if not 2.0 <= diameter <= diagonal:
        raise InvalidInputError(f'RayCalibData {path}: field \'diameter\' must be from 2 px to '
                                f'the image diagonal, got {diameter:g}')
    for name, b in (('lens_base_x', bx), ('lens_base_y', by)):
        if abs(np.hypot(*b) - 1.0) > LATTICE_TOL:
            raise InvalidInputError(f'RayCalibData {path}: field {name!r} must be a unit step '
                                    f'(lens units), got {b.tolist()} (length '
                                    f'{np.hypot(*b):.6f})')
    cos_angle = float(bx @ by)
    if abs(abs(cos_angle) - 0.5) > LATTICE_TOL:
        raise InvalidInputError(
            f'RayCalibData {path}: lens_base_x {bx.tolist()} and lens_base_y {by.tolist()} '
            f'must be 60 or 120 degrees apart (a hexagonal lattice), got '
            f'{np.degrees(np.arccos(np.clip(cos_angle, -1, 1))):.4f} degrees')


def _lens_types(path, root, basis):
    """
    (the 3-type pattern class (0-2) of each lens type, by id; its depth range [min, max])
    of the file's lens_type entries (none: one type of any depth); InvalidInputError for ids
    other than 0..T-1, T other than 1 or 3, offsets off the lattice (``basis`` (2, 2), lens
    units), an empty depth range, or three types not of the three classes.
    """
    types = sorted(root.findall('lens_type'), key=lambda e: e.attrib.get('id', ''))
    ids = [e.attrib.get('id') for e in types]
    if ids != [str(n) for n in range(len(ids))]:
        raise InvalidInputError(f'RayCalibData {path}: lens_type ids must be 0..{len(ids) - 1}, '
                                f'got {ids}')
    if len(types) not in (0, 1, 3):
        raise InvalidInputError(f'RayCalibData {path}: {len(types)} lens_type entries; a '
                                'hexagonal array has 1 or 3 lens types')
    classes, ranges = [], []
    for n, e in enumerate(types):
        off = _pair(path, e, 'offset', units='lens', label=f'lens_type[{n}]/offset')
        ab = _lattice_coords(basis, off, f'lens_type[{n}]/offset', path)
        classes.append(int((ab[0] - ab[1]) % 3))
        lo = _number(path, e.find('depth_range/min'), f'lens_type[{n}]/depth_range/min')
        hi = _number(path, e.find('depth_range/max'), f'lens_type[{n}]/depth_range/max')
        if not 0 < lo < hi:
            raise InvalidInputError(f'RayCalibData {path}: lens_type[{n}]/depth_range must have '
                                    f'0 < min < max, got [{lo:g}, {hi:g}]')
        ranges.append([lo, hi])
    if len(types) == 3:
        if sorted(classes) != [0, 1, 2]:
            raise InvalidInputError(
                f'RayCalibData {path}: the lens_type offsets must name three different lens '
                f'types of the hexagonal 3-type pattern, got pattern classes {classes}')
        if root.find('sub_grid_base') is not None:
            sg = _pair(path, root, 'sub_grid_base')
            ab = _lattice_coords(basis, sg, 'sub_grid_base', path)
            if (ab[0] - ab[1]) % 3:
                raise InvalidInputError(
                    f'RayCalibData {path}: sub_grid_base {sg.tolist()} must join two lenses of '
                    f'one type (a step of the 3-type pattern)')
    if not ranges:
        return [0], [[0.0, float('inf')]]
    return classes, ranges


__all__ = ['RaytrixGrid', 'read_raytrix_xml', 'sibling_image_size']
