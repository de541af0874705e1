"""
Lytro F01 and Illum raw files: raw frames and white images with the camera's metadata.

Read here, without a third-party reader (imageio's legacy ``lytro-*`` plugins assume full-size
sensors, return float64 copies of 41 Mpx frames, and fail on damaged files with bare
``RuntimeError``/``struct.error``). The formats are the ones the MATLAB Light Field Toolbox
reads (LFReadLFP, LFReadRaw, LFUtilDecodeLytroFolder):

* LFP container (``.lfr``: Illum raw pictures; ``.lfp``: F01 pictures): the 12-byte magic
  ``89 'LFP' 0D 0A 1A 0A 00 00 00 01``, a 4-byte big-endian length (0), then sections up to the
  end of the file. A section is an 8-byte magic (``89 'LFM' 0D 0A 1A 0A``: the table of
  contents, JSON; ``89 'LFC' 0D 0A 1A 0A``: content), 4 bytes of version, a 4-byte big-endian
  data length, its 45-byte name ``sha1-<40 hex digits>``, 35 null bytes, the data and null
  padding. The table of contents names the frame's sections:
  ``frames[0].frame.{imageRef, metadataRef, privateMetadataRef}`` (Illum, Lytro Desktop 4) or
  ``picture.frameArray[0].frame.{...}`` (F01).
* Bare raw (``.raw``, e.g. the cameras' white-image archives ``MOD_0000.RAW``): packed pixels
  only; the metadata is a sidecar ``<name>.txt``/``.json`` (the archive's
  ``master.picture.frameArray[0].frame.{metadata, privateMetadata}``, or the metadata mapping
  itself) or ``<name>_metadata.json`` + ``<name>_private_metadata.json`` (Lytro Desktop export).
  Without a sidecar, only a file of exactly a full F01 or Illum sensor's size is accepted.

Pixel packing: Illum 10 bit, little-endian: 5 bytes hold 4 pixels, the first four bytes their 8
high bits, the fifth their 2 low bits (pixel k in bits 2k, 2k+1). F01 12 bit, big-endian: 3 bytes
hold 2 pixels, ``p0 = b0 << 4 | b1 >> 4``, ``p1 = (b1 & 15) << 8 | b2``. Rows run top to bottom.

The Bayer pattern comes from the metadata's mosaic (``tile`` and ``upperLeftPixel``), else
from the camera model as the toolbox does (F01 'bggr', Illum 'grbg'). Pixels are normalised
with the metadata's black and white levels (green channel, as the toolbox's LevelLimits).
A white image for a frame is chosen as LFSelectFromDatabase does (:func:`select_white`).
"""

from dataclasses import dataclass
import json
from pathlib import Path
import struct

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, shorten

LYTRO_SUFFIXES = ('.lfr', '.lfp', '.raw')
CONTAINER_SUFFIXES = ('.lfr', '.lfp')
LFP_MAGIC = b'\x89LFP\r\n\x1a\n\x00\x00\x00\x01'
TOC_MAGIC = b'\x89LFM\r\n\x1a\n'
CONTENT_MAGIC = b'\x89LFC\r\n\x1a\n'
SECTION_HEADER_BYTES = 96        # magic 8 + version 4 + length 4 + name 45 + nulls 35
SENSORS = {                      # model -> (bits, endianness, width, height, bayer)
    'F01': (12, 'big', 3280, 3280, 'bggr'),
    'ILLUM': (10, 'little', 7728, 5368, 'grbg'),
}
MODEL_ALIASES = {'B01': 'ILLUM', 'ILLUM': 'ILLUM', 'F01': 'F01'}
MAX_PIXELS = 100_000_000


@dataclass(frozen=True, eq=False)
class LytroMetadata:
    """
    What a Lytro file says about the camera and its pixels.

    model ('F01' or 'ILLUM'; the white archives' 'B01' reads as 'ILLUM'), serial (camera
    serial number or None), zoom_step / focus_step (motor steps or None), exposure_s, iso
    (or None), bayer ('rggb', 'bggr', 'gbrg' or 'grbg'), bits (10 or 12), endianness,
    width / height in pixels, black_level / white_level (raw codes), file (Path).
    """

    model: str
    serial: str
    zoom_step: float
    focus_step: float
    exposure_s: float
    iso: float
    bayer: str
    bits: int
    endianness: str
    width: int
    height: int
    black_level: float
    white_level: float
    file: Path

    def to_dict(self):
        """Plain mapping for the calibration file's ``camera_metadata`` (None where unknown)."""
        return {'make': 'Lytro', 'model': self.model, 'serial': self.serial,
                'zoom_step': _plain(self.zoom_step), 'focus_step': _plain(self.focus_step),
                'exposure_s': _plain(self.exposure_s), 'iso': _plain(self.iso),
                'bayer': self.bayer, 'bits_per_pixel': int(self.bits),
                'black_level': float(self.black_level), 'white_level': float(self.white_level),
                'raw_size': [int(self.width), int(self.height)], 'file': self.file.name}


@dataclass(frozen=True, eq=False)
class LytroImage:
    """A raw frame or white image: codes (height, width) uint16 and its :class:`LytroMetadata`."""

    codes: np.ndarray
    metadata: LytroMetadata

    def normalized(self):
        """(H, W) float32: (code - black) / (white - black), clipped to [0, 1]."""
        m = self.metadata
        span = max(float(m.white_level) - float(m.black_level), 1.0)
        out = (self.codes.astype(np.float32) - np.float32(m.black_level)) / np.float32(span)
        return np.clip(out, 0.0, 1.0, out=out)

    def to_uint16(self):
        """(H, W) uint16: :meth:`normalized` scaled to 0..65535 (for the PNG/TIFF code paths)."""
        return np.rint(self.normalized() * 65535.0).astype(np.uint16)


def is_lytro_file(path):
    """Whether ``path`` names a Lytro raw file by its suffix (.lfr, .lfp, .raw; any case)."""
    return isinstance(path, (str, Path)) and Path(path).suffix.lower() in LYTRO_SUFFIXES


def read_lytro(path):
    """
    Read a Lytro .lfr/.lfp container or a .raw file (with its sidecar) as a LytroImage.

    Raises InvalidInputError naming the file and what is wrong (not a container, truncated
    section, missing or malformed metadata, pixel data of the wrong size, unsupported packing).
    """
    path = Path(path)
    meta, private, payload = _load(path, pixels=True)
    info = _metadata(meta, private, path, payload_bytes=len(payload))
    return LytroImage(_unpack(payload, info), info)


def read_lytro_metadata(path):
    """The :class:`LytroMetadata` of a Lytro file, without unpacking its pixels."""
    path = Path(path)
    meta, private, size = _load(path, pixels=False)
    return _metadata(meta, private, path, payload_bytes=size)


# ---- white image selection ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class WhiteChoice:
    """
    The white image chosen for a frame: its file, metadata, and |zoom| / |focus| step gaps
    to the frame (None where unknown).
    """

    file: Path
    metadata: LytroMetadata
    zoom_gap: float
    focus_gap: float

    def to_dict(self):
        """Plain mapping for the calibration file (``camera_metadata.white_image``)."""
        return {'file': self.file.name, 'serial': self.metadata.serial,
                'zoom_step': _plain(self.metadata.zoom_step),
                'focus_step': _plain(self.metadata.focus_step),
                'zoom_gap': _plain(self.zoom_gap), 'focus_gap': _plain(self.focus_gap)}


def select_white(whites, frame):
    """
    The white image of ``whites`` (a folder or a list of Lytro files) that fits ``frame``.

    ``frame``: LytroMetadata of the raw frame. As LFSelectFromDatabase: only whites of the
    frame's camera serial, of those the nearest zoom step, of those the nearest focus step
    (ties: the first file by name). Raises InvalidInputError with the reason when the frame
    lacks serial/zoom/focus, or no white of its serial is there (listing the serials found).
    """
    if isinstance(whites, (str, Path)):
        folder = Path(whites)
        if not folder.is_dir():
            raise InvalidInputError(f'white image folder {folder} does not exist')
        files = sorted(p for p in folder.iterdir() if p.is_file() and is_lytro_file(p))
        where = str(folder)
    else:
        files = sorted(Path(p) for p in whites)
        where = f'{len(files)} white files'
    missing = [k for k in ('serial', 'zoom_step', 'focus_step') if getattr(frame, k) is None]
    if missing:
        raise InvalidInputError(
            f'{frame.file}: its metadata has no {", ".join(missing)}; cannot choose a white '
            f'image from {where} (give the white image file instead)')
    candidates, other, unreadable = [], set(), []
    for p in files:
        try:
            m = read_lytro_metadata(p)
        except InvalidInputError as exc:
            unreadable.append(f'{p.name}: {exc}')
            continue
        if m.serial != frame.serial:
            other.add(str(m.serial))
        elif m.zoom_step is not None and m.focus_step is not None:
            candidates.append(m)
    if not candidates:
        found = f'serials found: {sorted(other)}' if other else 'no readable Lytro white images'
        extra = f'; unreadable: {unreadable}' if unreadable else ''
        raise InvalidInputError(
            f'no white image of camera serial {frame.serial!r} (the frame {frame.file.name}) '
            f'with zoom and focus steps in {where} ({found}{extra}); use the white-image '
            'archive of the camera that took the frame')
    zoom = min(abs(m.zoom_step - frame.zoom_step) for m in candidates)
    best = [m for m in candidates if abs(m.zoom_step - frame.zoom_step) == zoom]
    focus = min(abs(m.focus_step - frame.focus_step) for m in best)
    chosen = next(m for m in best if abs(m.focus_step - frame.focus_step) == focus)
    return WhiteChoice(chosen.file, chosen, float(zoom), float(focus))


def common_metadata(frames):
    """
    The one camera setting shared by Lytro frames (list of LytroMetadata): the first frame's.

    A calibration holds for one camera at one zoom and focus: raises InvalidInputError naming
    the frames whose serial, zoom step or focus step differ from the first frame's.
    """
    first = frames[0]
    for key in ('serial', 'zoom_step', 'focus_step'):
        odd = [f.file.name for f in frames if getattr(f, key) != getattr(first, key)]
        if odd:
            raise InvalidInputError(
                f'Lytro frames differ in {key}: {first.file.name} has {getattr(first, key)!r} '
                f'but {odd} do not; a calibration holds for one camera at one zoom and focus '
                '(calibrate each setting from its own folder)')
    return first


# ---- file structure -------------------------------------------------------------------------
MAX_LYTRO_BYTES = 1024 ** 3
"""Largest Lytro file read: 1 GiB (an Illum .lfr is about 55 MB)."""
MAX_SIDECAR_BYTES = 64 * 1024 ** 2
"""Largest metadata sidecar (.json, .txt) of a .raw file read: 64 MiB."""


def _load(path, *, pixels):
    """(metadata, private metadata, pixel bytes or their count) of a Lytro file."""
    from lf_mpc_calib.io.file_checks import check_input_file, file_kind
    if file_kind(path) is None:
        raise InvalidInputError(f'Lytro file {path} does not exist')
    check_input_file(path, 'Lytro file', MAX_LYTRO_BYTES)     # no device, FIFO, huge file
    suffix = path.suffix.lower()
    if suffix in CONTAINER_SUFFIXES:
        return _load_container(path, pixels=pixels)
    if suffix == '.raw':
        meta, private = _sidecar(path)
        if pixels:
            return meta, private, path.read_bytes()
        return meta, private, path.stat().st_size
    raise InvalidInputError(
        f'{path}: not a Lytro file; expected one of {LYTRO_SUFFIXES}, got {path.suffix!r}')


def _load_container(path, *, pixels):
    size = path.stat().st_size
    with open(path, 'rb') as f:
        sections = _sections(f, path, size)
        tocs = [s for s in sections if s[0] == 'toc']
        if len(tocs) != 1:
            raise InvalidInputError(
                f'{path}: expected one table-of-contents section (LFM), found {len(tocs)}')
        toc = _json(_read_section(f, tocs[0]), f'{path}: table of contents')
        refs = _frame_refs(toc)
        if not isinstance(refs, dict) or 'imageRef' not in refs:
            raise InvalidInputError(
                f'{path}: holds no raw light-field image (its table of contents names no '
                'frame imageRef; a processed picture exported for sharing?)')
        by_name = {s[1]: s for s in sections if s[0] == 'content'}

        def section(key):
            ref = refs.get(key)
            if ref not in by_name:
                raise InvalidInputError(
                    f'{path}: the table of contents names {key} section {ref!r} but the file '
                    'holds no such section (the file is corrupt or truncated)')
            return by_name[ref]

        meta = _json(_read_section(f, section('metadataRef')), f'{path}: metadata')
        private = {}
        if 'privateMetadataRef' in refs:
            private = _json(_read_section(f, section('privateMetadataRef')),
                            f'{path}: private metadata')
        image = section('imageRef')
        payload = _read_section(f, image) if pixels else image[3]
    return meta, private, payload


def _sections(f, path, size):
    """[(kind 'toc' | 'content', name, data offset, data length)] of an LFP container."""
    head = f.read(16)
    if head[:12] != LFP_MAGIC:
        raise InvalidInputError(
            f'{path}: not a Lytro LFP/LFR container: expected the magic bytes {LFP_MAGIC!r} at '
            f'the start, got {head[:12]!r}')
    if len(head) < 16:
        raise InvalidInputError(f'{path}: the file ends inside its 16-byte header (truncated)')
    sections, pos = [], 16
    while pos < size:
        f.seek(pos)
        hdr = f.read(SECTION_HEADER_BYTES)
        n = len(sections)
        if len(hdr) < SECTION_HEADER_BYTES:
            raise InvalidInputError(
                f'{path}: section {n} header at byte {pos} is cut off after {len(hdr)} of '
                f'{SECTION_HEADER_BYTES} bytes (the file is truncated)')
        kind = {TOC_MAGIC: 'toc', CONTENT_MAGIC: 'content'}.get(hdr[:8])
        if kind is None:
            raise InvalidInputError(
                f'{path}: expected a section header (\\x89LFM or \\x89LFC) at byte {pos}, got '
                f'{hdr[:8]!r} (the file is corrupt)')
        length = struct.unpack('>I', hdr[12:16])[0]
        name = hdr[16:61].split(b'\0', 1)[0].decode('ascii', 'replace')
        start = pos + SECTION_HEADER_BYTES
        if start + length > size:
            raise InvalidInputError(
                f'{path}: section {n} ({name}) declares {length} bytes from byte {start} but '
                f'the file ends at byte {size} (the file is truncated)')
        sections.append((kind, name, start, length))
        pos = _skip_nulls(f, start + length, size)
    return sections


def _skip_nulls(f, pos, size):
    """The offset of the first non-null byte at or after ``pos`` (or ``size``)."""
    f.seek(pos)
    while pos < size:
        chunk = f.read(4096)
        nonzero = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8))
        if nonzero.size:
            return pos + int(nonzero[0])
        pos += len(chunk)
    return size


def _read_section(f, section):
    f.seek(section[2])
    return f.read(section[3])


def _frame_refs(toc):
    """The frame's section references from a table of contents (Illum or F01 layout)."""
    try:
        if 'frames' in toc:
            return toc['frames'][0]['frame']
        return toc['picture']['frameArray'][0]['frame']
    except (KeyError, IndexError, TypeError):
        return None


def _json(data, what):
    try:
        doc = json.loads(data.decode('utf-8') if isinstance(data, bytes) else data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f'{what} is not valid JSON ({exc})') from exc
    if not isinstance(doc, dict):
        raise InvalidInputError(f'{what}: expected a JSON object, got {type(doc).__name__}')
    return doc


def _read_sidecar(path):
    """The bytes of a metadata sidecar file: a regular file of at most MAX_SIDECAR_BYTES."""
    from lf_mpc_calib.io.file_checks import read_bytes
    return read_bytes(path, 'Lytro metadata file', MAX_SIDECAR_BYTES)


def _sidecar(path):
    """(metadata, private metadata) of a .raw file from its sidecar files, or ({}, {})."""
    base = path.with_suffix('')
    exported = Path(f'{base}_metadata.json')
    if exported.is_file():
        private_file = Path(f'{base}_private_metadata.json')
        private = (_json(_read_sidecar(private_file), str(private_file))
                   if private_file.is_file() else {})
        return _json(_read_sidecar(exported), str(exported)), private
    for ext in ('.txt', '.TXT', '.json', '.JSON'):
        side = base.with_suffix(ext)
        if side.is_file():
            doc = _json(_read_sidecar(side), str(side))
            try:
                frame = doc['master']['picture']['frameArray'][0]['frame']
            except (KeyError, IndexError, TypeError):
                return doc, {}
            if not isinstance(frame, dict) or not isinstance(frame.get('metadata'), dict):
                raise InvalidInputError(
                    f'{side}: master.picture.frameArray[0].frame has no metadata mapping')
            private = frame.get('privateMetadata')
            return frame['metadata'], private if isinstance(private, dict) else {}
    return {}, {}


# ---- metadata -------------------------------------------------------------------------------
def _get(doc, *keys):
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _number(value, what, path):
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(f'{path}: metadata {what} must be a number, got '
                                f'{shorten(repr(value))}') from None
    if not np.isfinite(out):
        raise InvalidInputError(f'{path}: metadata {what} must be finite, got {value!r}')
    return out


def _check_mappings(meta, path):
    """Refuse a metadata section that is there but not a mapping (a JSON object): a list or a
    string where ``image``, ``camera``, ``devices`` ... belong would otherwise be ignored."""
    sections = (('camera',), ('image',), ('image', 'rawDetails'), ('image', 'pixelPacking'),
                ('image', 'pixelFormat'), ('image', 'mosaic'), ('image', 'pixelFormat', 'black'),
                ('image', 'pixelFormat', 'white'), ('image', 'rawDetails', 'pixelPacking'),
                ('image', 'rawDetails', 'pixelFormat'), ('image', 'rawDetails', 'mosaic'),
                ('devices',), ('devices', 'lens'), ('devices', 'shutter'), ('devices', 'sensor'),
                ('devices', 'sensor', 'mosaic'))
    for keys in sections:
        value = _get(meta, *keys)
        if value is not None and not isinstance(value, dict):
            raise InvalidInputError(
                f'{path}: metadata {".".join(keys)} must be a mapping (a JSON object), got '
                f'{type(value).__name__} {shorten(repr(value), 60)}')
    for keys in (('image', 'mosaic'), ('image', 'rawDetails', 'mosaic'),
                 ('devices', 'sensor', 'mosaic')):
        for key in ('tile', 'upperLeftPixel'):
            value = _get(meta, *keys, key)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(
                    f'{path}: metadata {".".join(keys)}.{key} must be a string such as '
                    f'\'r,gr:gb,b\', got {shorten(repr(value), 60)}')


def _plain(x):
    return None if x is None else float(x)


def _bayer_from_mosaic(mosaic, path):
    """'rggb'-style pattern from a mosaic {tile: 'r,gr:gb,b', upperLeftPixel: 'gr'}, or None."""
    tile, upper_left = _get(mosaic, 'tile'), _get(mosaic, 'upperLeftPixel')
    if not isinstance(tile, str) or not isinstance(upper_left, str):
        return None
    rows = [r.split(',') for r in tile.replace(';', ':').split(':')]
    cells = [c.strip().lower() for r in rows for c in r]
    if len(rows) != 2 or any(len(r) != 2 for r in rows) or upper_left.lower() not in cells:
        raise InvalidInputError(
            f'{path}: metadata mosaic tile {tile!r} / upperLeftPixel {upper_left!r} is not a '
            '2 x 2 Bayer tile holding the upper-left pixel')
    k = cells.index(upper_left.lower())
    dy, dx = divmod(k, 2)
    grid = [[cells[2 * ((y + dy) % 2) + (x + dx) % 2][0] for x in (0, 1)] for y in (0, 1)]
    pattern = ''.join(grid[0] + grid[1])
    if sorted(pattern) != ['b', 'g', 'g', 'r']:
        raise InvalidInputError(f'{path}: metadata mosaic tile {tile!r} is not a Bayer tile')
    return pattern


def _metadata(meta, private, path, *, payload_bytes):
    """LytroMetadata from the metadata mappings; checks the pixel byte count."""
    if meta is not None and not isinstance(meta, dict):
        raise InvalidInputError(f'{path}: metadata must be a mapping (a JSON object), got '
                                f'{type(meta).__name__}')
    _check_mappings(meta, path)
    model_name = _get(meta, 'camera', 'model')
    image = _get(meta, 'image') or {}
    raw_details = image.get('rawDetails') if isinstance(image.get('rawDetails'), dict) else {}
    model, bits, endianness, width, height = _packing(meta, image, raw_details, path,
                                                      payload_bytes)
    mosaic = (image.get('mosaic') or raw_details.get('mosaic')
              or _get(meta, 'devices', 'sensor', 'mosaic'))
    bayer = _bayer_from_mosaic(mosaic, path) if mosaic else None
    if bayer is None and model is not None:
        bayer = SENSORS[model][4]
    if bayer is None:
        raise InvalidInputError(
            f'{path}: metadata gives neither a mosaic (tile, upperLeftPixel) nor a camera model; '
            'the Bayer pattern is unknown')
    black, white = _levels(image.get('pixelFormat') or raw_details.get('pixelFormat') or {},
                           bits, path)
    serial = _get(private, 'camera', 'serialNumber')
    lens = _get(meta, 'devices', 'lens') or {}
    exposure = (_get(meta, 'devices', 'shutter', 'frameExposureDuration')
                or _get(meta, 'image', 'exposureDuration'))
    return LytroMetadata(
        model=model or (None if model_name is None else str(model_name)),
        serial=None if serial is None else str(serial),
        zoom_step=_number(_get(lens, 'zoomStep'), 'devices.lens.zoomStep', path),
        focus_step=_number(_get(lens, 'focusStep'), 'devices.lens.focusStep', path),
        exposure_s=_number(exposure, 'exposure duration', path),
        iso=_number(_get(meta, 'devices', 'sensor', 'iso'), 'devices.sensor.iso', path),
        bayer=bayer, bits=bits, endianness=endianness, width=width, height=height,
        black_level=black, white_level=white, file=path)


def _packing(meta, image, raw_details, path, payload_bytes):
    """(model or None, bits, endianness, width, height) of the packed pixels: from the
    metadata, the camera model's sensor, or (no metadata) the payload's byte count alone;
    InvalidInputError when they do not describe ``payload_bytes`` of a supported packing."""
    model_name = _get(meta, 'camera', 'model')
    model = MODEL_ALIASES.get(str(model_name).upper()) if model_name is not None else None
    packing = image.get('pixelPacking') or raw_details.get('pixelPacking') or {}
    bits = _number(_get(packing, 'bitsPerPixel'), 'pixelPacking.bitsPerPixel', path)
    endianness = _get(packing, 'endianness')
    width = _number(image.get('width'), 'image.width', path)
    height = _number(image.get('height'), 'image.height', path)
    if not meta:
        # no metadata at all: only a full sensor's byte count tells which camera it is
        for name, (b, e, w, h, _) in SENSORS.items():
            if payload_bytes == w * h * b // 8:
                model, bits, endianness, width, height = name, b, e, w, h
                break
        else:
            sizes = {n: s[2] * s[3] * s[0] // 8 for n, s in SENSORS.items()}
            raise InvalidInputError(
                f'{path}: no metadata (expected a sidecar {path.stem}.txt/.json or '
                f'{path.stem}_metadata.json beside it) and its {payload_bytes} bytes are not a '
                f'full sensor ({sizes})')
    if model is not None:
        b, e, w, h, _ = SENSORS[model]
        bits = b if bits is None else bits
        endianness = e if endianness is None else endianness
        width = w if width is None else width
        height = h if height is None else height
    bits, endianness, width, height = _checked_packing(bits, endianness, width, height, path)
    expected = width * height * bits // 8
    if payload_bytes != expected:
        raise InvalidInputError(
            f'{path}: the raw image holds {payload_bytes} bytes but {width}x{height} pixels at '
            f'{bits} bit need {expected} (the file is truncated or not this camera\'s)')
    return model, bits, endianness, width, height


def _checked_packing(bits, endianness, width, height, path):
    """(bits, endianness, width, height) as int/str; InvalidInputError when unknown, not a
    packed raw image or not 10-bit little / 12-bit big."""
    if bits is None or width is None or height is None:
        raise InvalidInputError(
            f'{path}: metadata gives no camera.model (F01/ILLUM/B01) and no image width, '
            'height and pixelPacking.bitsPerPixel; cannot unpack the pixels')
    if not (0 < width <= MAX_PIXELS and 0 < height <= MAX_PIXELS and 0 < bits <= 64):
        raise InvalidInputError(
            f'{path}: metadata image size {width:g}x{height:g} at {bits:g} bit is not a packed '
            f'raw image (positive, at most {MAX_PIXELS} pixels)')
    bits, width, height = int(bits), int(width), int(height)
    endianness = str(endianness).lower() if endianness is not None else None
    if (bits, endianness) not in ((10, 'little'), (12, 'big')):
        raise InvalidInputError(
            f'{path}: unsupported pixel packing {bits}-bit {endianness}; expected 10-bit little '
            '(Illum) or 12-bit big (F01)')
    if width <= 0 or height <= 0 or width * height > MAX_PIXELS or (width * bits) % 8:
        raise InvalidInputError(
            f'{path}: image size {width}x{height} at {bits} bit is not a packed raw image '
            f'(positive, at most {MAX_PIXELS} pixels, whole bytes per row)')
    return bits, endianness, width, height


def _levels(pixel_format, bits, path):
    """(black, white) levels of the green-red channel (defaults 0 and 2^bits - 1)."""
    black = _number(_get(pixel_format, 'black', 'gr'), 'pixelFormat.black.gr', path)
    white = _number(_get(pixel_format, 'white', 'gr'), 'pixelFormat.white.gr', path)
    black = 0.0 if black is None else black
    white = float(2 ** bits - 1) if white is None else white
    if not 0 <= black < white:
        raise InvalidInputError(
            f'{path}: metadata black level {black} must be >= 0 and below the white level '
            f'{white}')
    return black, white


# ---- pixel packing --------------------------------------------------------------------------
def _unpack(payload, info):
    """(height, width) uint16 codes from the packed bytes (sizes checked by _metadata)."""
    b = np.frombuffer(payload, dtype=np.uint8).astype(np.uint16)
    if info.bits == 10:
        g = b.reshape(-1, 5)
        low = g[:, 4]
        px = np.empty((g.shape[0], 4), dtype=np.uint16)
        for k in range(4):
            px[:, k] = (g[:, k] << 2) | ((low >> (2 * k)) & 3)
    else:
        g = b.reshape(-1, 3)
        px = np.empty((g.shape[0], 2), dtype=np.uint16)
        px[:, 0] = (g[:, 0] << 4) | (g[:, 1] >> 4)
        px[:, 1] = ((g[:, 1] & 15) << 8) | g[:, 2]
    return px.reshape(info.height, info.width)


def pack_raw(codes, bits):
    """
    Pack codes (H, W) into Lytro raw bytes: the inverse of the reader's unpacking.

    bits 10 (Illum, W a multiple of 4) or 12 (F01, W even). For tests and for writing
    synthetic Lytro files; codes must fit in ``bits``.
    """
    c = np.asarray(codes)
    if c.ndim != 2 or bits not in (10, 12) or c.shape[1] % (4 if bits == 10 else 2):
        raise InvalidInputError(
            f'pack_raw needs (H, W) codes with W a multiple of 4 (10 bit) or 2 (12 bit), got '
            f'{c.shape} at {bits} bit')
    if c.size and (c.min() < 0 or c.max() >= 2 ** bits):
        raise InvalidInputError(f'codes must lie in [0, {2 ** bits - 1}] for {bits} bit')
    c = c.astype(np.uint16)
    if bits == 10:
        g = c.reshape(-1, 4)
        out = np.empty((g.shape[0], 5), dtype=np.uint8)
        out[:, :4] = g >> 2
        out[:, 4] = ((g[:, 0] & 3) | ((g[:, 1] & 3) << 2) | ((g[:, 2] & 3) << 4)
                     | ((g[:, 3] & 3) << 6))
    else:
        g = c.reshape(-1, 2)
        out = np.empty((g.shape[0], 3), dtype=np.uint8)
        out[:, 0] = g[:, 0] >> 4
        out[:, 1] = ((g[:, 0] & 15) << 4) | (g[:, 1] >> 8)
        out[:, 2] = g[:, 1] & 255
    return out.tobytes()


# ---- data sets ------------------------------------------------------------------------------
def lytro_dataset(frames, white):
    """
    The Lytro side of a raw data set: (white file, Bayer pattern, camera_metadata mapping).

    frames: the data set's frame files, all Lytro files; white: a Lytro or PNG/TIFF white
    image file, or a folder of Lytro white images to choose from (:func:`select_white`).
    The frames must share camera serial, zoom and focus (:func:`common_metadata`); a white
    file of another camera serial is refused. camera_metadata: the frames' metadata
    (:meth:`LytroMetadata.to_dict` without the file name) plus ``white_image``.
    """
    frames = [Path(p) for p in frames]
    odd = [p.name for p in frames if not is_lytro_file(p)]
    if odd:
        raise InvalidInputError(
            f'a data set mixes Lytro raw frames with other images {odd}; keep one kind per '
            'folder')
    frame = common_metadata([read_lytro_metadata(p) for p in frames])
    white = Path(white)
    if white.is_dir():
        choice = select_white(white, frame)
        white, white_doc = choice.file, choice.to_dict()
    elif is_lytro_file(white):
        m = read_lytro_metadata(white)
        if None not in (m.serial, frame.serial) and m.serial != frame.serial:
            raise InvalidInputError(
                f'white image {white} is from camera serial {m.serial!r} but the frames are '
                f'from {frame.serial!r}; use the white image of the camera that took them')
        white_doc = WhiteChoice(white, m, _gap(m.zoom_step, frame.zoom_step),
                                _gap(m.focus_step, frame.focus_step)).to_dict()
    else:
        white_doc = {'file': white.name}
    doc = frame.to_dict()
    del doc['file']
    doc['frames'] = len(frames)
    doc['white_image'] = white_doc
    return white, frame.bayer, doc


def _gap(a, b):
    return None if a is None or b is None else float(abs(a - b))
