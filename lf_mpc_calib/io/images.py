"""
Reading and writing raw and view images (8/16-bit PNG or TIFF) with OpenCV.

Arrays are mono (H, W) or RGB (H, W, 3) — RGB order, not OpenCV's BGR — of dtype uint8 or
uint16. A Bayer raw frame is a mono array; demosaic it with :mod:`lf_mpc_calib.lenslet.demosaic`.

Image messages (sensor_msgs/Image, or any object with its fields: rosbag2 messages read with
``rosbags``) become arrays with :func:`image_to_array`, pure numpy on the fields: the core reads
recorded frames with it and the ROS layer can share it. Encodings (REP 118 names):

=====================================  ===========  ===============================
encoding                               dtype        array shape
=====================================  ===========  ===============================
mono8, bayer_{rggb,bggr,gbrg,grbg}8    uint8        (height, width)
mono16, bayer_{rggb,bggr,gbrg,grbg}16  uint16       (height, width), native byte order
rgb8, bgr8                             uint8        (height, width, 3), channels as named
rgba8, bgra8                           uint8        (height, width, 4), channels as named
=====================================  ===========  ===============================

Lytro raw files (.lfr, .lfp, .raw: :mod:`lf_mpc_calib.io.lytro`) read through the same
functions: their 10/12-bit codes normalised by the file's black and white levels, as uint16
(:func:`read_image`) or float (:func:`read_float_image`); the Bayer mosaic is left as it is.
"""

from pathlib import Path

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.lytro import is_lytro_file, read_lytro

SUFFIXES = ('.png', '.tif', '.tiff')

DEFAULT_MAX_PIXELS = 100_000_000
"""Largest accepted height * width of an image message (a Lytro Illum raw frame is 41 Mpx)."""
MAX_IMAGE_PIXELS = DEFAULT_MAX_PIXELS
"""Largest height * width an image file's header may claim (checked before decoding)."""
MAX_IMAGE_BYTES = 2 * 1024 ** 3
"""Largest image file read (2 GiB; a 16-bit 100 Mpx TIFF is 0.2 GB uncompressed)."""

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'

# encoding -> (dtype, channels)
ENCODINGS = {
    'mono8': (np.dtype(np.uint8), 1),
    'mono16': (np.dtype(np.uint16), 1),
    'rgb8': (np.dtype(np.uint8), 3),
    'bgr8': (np.dtype(np.uint8), 3),
    'rgba8': (np.dtype(np.uint8), 4),
    'bgra8': (np.dtype(np.uint8), 4),
}
BAYER_PATTERNS = ('rggb', 'bggr', 'gbrg', 'grbg')
for _pattern in BAYER_PATTERNS:
    ENCODINGS[f'bayer_{_pattern}8'] = (np.dtype(np.uint8), 1)
    ENCODINGS[f'bayer_{_pattern}16'] = (np.dtype(np.uint16), 1)
del _pattern


def read_image(path):
    """
    Read an 8/16-bit mono or colour PNG/TIFF as (H, W) or (H, W, 3) RGB uint8/uint16.

    A Lytro raw file (.lfr, .lfp, .raw) reads as its (H, W) uint16 Bayer mosaic, black..white
    level mapped to 0..65535 (:meth:`lf_mpc_calib.io.lytro.LytroImage.to_uint16`).
    """
    path = Path(path)
    if is_lytro_file(path):
        return read_lytro(path).to_uint16()
    from lf_mpc_calib.io.file_checks import file_kind
    if file_kind(path) is None:
        raise InvalidInputError(f'image file {str(path)!r} does not exist')
    check_image_file(path)
    try:
        img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:      # e.g. a header claiming more pixels than OpenCV's limit
        why = ('its header claims more pixels than OpenCV reads (CV_IO_MAX_IMAGE_PIXELS)'
               if 'CV_IO_MAX_IMAGE_PIXELS' in str(exc) else str(exc).strip().splitlines()[-1])
        raise InvalidInputError(f'{str(path)!r}: OpenCV refuses to read it: {why}') from None
    if img is None:
        raise InvalidInputError(f'{str(path)!r} is not an image OpenCV can read; expected an '
                                '8/16-bit PNG or TIFF')
    if img.dtype not in (np.uint8, np.uint16):
        raise InvalidInputError(f'{str(path)!r} must hold 8- or 16-bit pixels, got {img.dtype}')
    if img.ndim == 3:
        if img.shape[2] == 4:
            img = img[:, :, :3]
        if img.shape[2] == 3:
            img = np.ascontiguousarray(img[:, :, ::-1])
        elif img.shape[2] == 1:
            img = img[:, :, 0]
    return img


def check_image_file(path, max_pixels=MAX_IMAGE_PIXELS):
    """
    Refuse (InvalidInputError) before decoding it an image file ``path`` that is not a regular
    file, is larger than MAX_IMAGE_BYTES, whose header (PNG, TIFF, BMP, PGM/PPM) claims
    more than ``max_pixels`` pixels (a PNG of a few kB can claim 2^31 x 2^31), or a PNG cut off
    before its IEND chunk (libpng would print its own error line before OpenCV gives up).
    Other formats are left to OpenCV's own limit (2^30 pixels).
    """
    from lf_mpc_calib.io.file_checks import check_input_file
    file_size = check_input_file(path, 'image file', MAX_IMAGE_BYTES)
    with open(path, 'rb') as f:
        head = f.read(1 << 16)
        size = image_size_from_header(head, f)
        f.seek(max(file_size - 4096, 0))
        cut_png = head[:8] == PNG_SIGNATURE and b'IEND' not in f.read()
    if size is not None and size[0] * size[1] > max_pixels:
        raise InvalidInputError(f'image file {str(path)!r}: its header claims {size[0]} x '
                                f'{size[1]} pixels, expected at most {max_pixels} pixels')
    if cut_png:
        raise InvalidInputError(f'image file {str(path)!r}: expected a complete PNG (ending in '
                                f'its IEND chunk), got {file_size} bytes that stop before it '
                                '(cut off?)')


def image_size_from_header(head, f=None):
    """(width, height) an image file's header claims (``head``: its first bytes; ``f``: the
    open file, for a TIFF whose first directory lies further on), or None when unknown."""
    import re
    import struct
    if head[:8] == PNG_SIGNATURE and len(head) >= 24 and head[12:16] == b'IHDR':
        return struct.unpack('>II', head[16:24])
    if head[:2] == b'BM' and len(head) >= 26:
        w, h = struct.unpack('<ii', head[18:26])
        return abs(w), abs(h)
    m = re.match(rb'P[1-6](?:\s+(?:#[^\n]*\n\s*)*)(\d+)\s+(?:#[^\n]*\n\s*)*(\d+)', head)
    if m:
        return int(m.group(1)), int(m.group(2))
    if head[:4] in (b'II*\x00', b'MM\x00*') and f is not None:
        return _tiff_size(f, '<' if head[:2] == b'II' else '>')
    return None


def _tiff_size(f, order):
    """(width, height) of a TIFF's first image directory, or None when unreadable."""
    tags = _tiff_tags(f, order, (256, 257))
    return (tags[256], tags[257]) if len(tags) == 2 else None


def _tiff_tags(f, order, wanted):
    """{tag: value} of the ``wanted`` tags of a TIFF's first image directory that hold one
    inline SHORT or LONG ({} when unreadable)."""
    import struct
    tags = {}
    try:
        f.seek(4)
        f.seek(struct.unpack(order + 'I', f.read(4))[0])
        count = struct.unpack(order + 'H', f.read(2))[0]
        for _ in range(min(count, 4096)):
            tag, kind, n, value = struct.unpack(order + 'HHI4s', f.read(12))
            if tag in wanted and n == 1 and kind in (3, 4):
                fmt = 'H' if kind == 3 else 'I'
                tags[tag] = struct.unpack(order + fmt, value[:struct.calcsize(fmt)])[0]
    except (struct.error, OSError, ValueError):
        return {}
    return tags


def image_bit_depth(path):
    """Bits per sample a PNG's or single-channel TIFF's header claims (8, 16, ...), or None
    for other formats, a colour TIFF, or a header it cannot read."""
    with open(path, 'rb') as f:
        head = f.read(32)
        if head[:8] == PNG_SIGNATURE and len(head) >= 25 and head[12:16] == b'IHDR':
            return head[24]
        if head[:4] in (b'II*\x00', b'MM\x00*'):
            return _tiff_tags(f, '<' if head[:2] == b'II' else '>', (258,)).get(258)
    return None


def write_image(path, image):
    """Write (H, W) or (H, W, 3) RGB uint8/uint16 as PNG or TIFF (by suffix); returns the path."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise InvalidInputError(f'image file must end in one of {SUFFIXES}, got {path.name!r}')
    img = np.asarray(image)
    if img.dtype not in (np.uint8, np.uint16):
        raise InvalidInputError(f'image must have dtype uint8 or uint16, got {img.dtype}')
    if not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] == 3)):
        raise InvalidInputError(f'image must have shape (H, W) or (H, W, 3), got {img.shape}')
    if img.ndim == 3:
        img = np.ascontiguousarray(img[:, :, ::-1])
    return write_encoded(path, img)


def write_encoded(path, img):
    """
    Write the array ``img`` as ``cv2.imwrite`` would (colour in BGR order; the format by the
    suffix of ``path``) through a temporary name; returns the path.

    The image is encoded in memory and its bytes written by Python, so that a full disk or
    another refusal of the file system is an OSError naming ``path`` and its reason (No space
    left on device): ``cv2.imwrite`` answers only False, after libpng printed its own line.
    """
    path = Path(path)
    ok, data = cv2.imencode(path.suffix, img)
    if not ok:
        raise InvalidInputError(f'could not encode {str(path)!r} as {path.suffix} '
                                f'({img.dtype}, shape {img.shape})')

    def write(tmp):
        try:
            with open(tmp, 'wb') as f:
                f.write(data)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    from lf_mpc_calib.io.atomic import write_atomically
    return write_atomically(path, write)


def to_uint(image, *, bits=8, top=None):
    """
    Scale a float image to uint8/uint16 for writing: ``top`` (default the 99.9th percentile of
    finite values) maps to the largest code; negatives and NaN become 0.
    """
    if bits not in (8, 16):
        raise InvalidInputError(f'bits must be 8 or 16, got {bits}')
    a = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    if top is None:
        top = float(np.percentile(a, 99.9)) if a.size else 1.0
    top = top if top > 0 else 1.0
    big = 255 if bits == 8 else 65535
    out = np.clip(np.rint(a / top * big), 0, big)
    return out.astype(np.uint8 if bits == 8 else np.uint16)


def as_float_image(image, name='raw'):
    """
    A 2-D (or (H, W, 3)) float32 image in [0, 1] from uint8, uint16 or float pixels.

    uint8 is divided by 255 and uint16 by 65535 (as calibrate-raw reads PNG files); floats are
    taken as they are.
    """
    arr = np.asarray(image)
    if arr.ndim not in (2, 3) or arr.size == 0 or (arr.ndim == 3 and arr.shape[2] != 3):
        raise InvalidInputError(f'{name} image must be (H, W) or (H, W, 3), got {arr.shape}')
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    if arr.dtype == np.uint16:
        return arr.astype(np.float32) / 65535.0
    if arr.dtype.kind == 'f':
        return arr.astype(np.float32)
    raise InvalidInputError(f'{name} image must be uint8, uint16 or float, got {arr.dtype}')


def read_float_image(path):
    """
    Read an 8/16-bit PNG/TIFF (mono or Bayer raw) as a 2-D float array in [0, 1].

    ``path`` may also be an in-memory frame (an object with ``load()`` returning the pixels,
    e.g. a rosbag2 message): its pixels go through the same conversion as a file's.
    """
    if hasattr(path, 'load'):
        img = np.asarray(path.load())
    elif is_lytro_file(path):
        return read_lytro(path).normalized()
    else:
        img = np.asarray(read_image(path))
    if img.ndim == 3:
        img = img[..., :3].mean(axis=2) if img.shape[2] >= 3 else img[..., 0]
    if img.dtype == np.uint8:
        return img.astype(np.float32) / 255.0
    if img.dtype == np.uint16:
        return img.astype(np.float32) / 65535.0
    return img.astype(np.float32)


# ---- image messages -------------------------------------------------------------------------
def encoding_info(encoding):
    """
    Return ``(dtype, channels)`` of a supported image encoding.

    Raises InvalidInputError naming the supported encodings.
    """
    try:
        return ENCODINGS[encoding]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f'unsupported image encoding {encoding!r}; expected one of '
            f'{", ".join(sorted(ENCODINGS))}') from None


def bayer_pattern(encoding):
    """Return the Bayer pattern ('rggb', 'bggr', 'gbrg' or 'grbg') of an encoding, or None."""
    if isinstance(encoding, str) and encoding.startswith('bayer_'):
        pattern = encoding[len('bayer_'):].rstrip('0123456789')
        if pattern in BAYER_PATTERNS:
            return pattern
    return None


def image_to_array(msg, *, max_pixels=DEFAULT_MAX_PIXELS):
    """
    Return the pixels of an image message as a new ndarray.

    ``msg``: any object with the fields of sensor_msgs/Image (height, width, encoding,
    is_bigendian, step, data). Returns ``(height, width)`` or ``(height, width, channels)``
    uint8/uint16 in native byte order (module table), owning its memory, row padding removed.
    Raises InvalidInputError for an unsupported encoding, a zero or too large size (checked
    before the data is touched), ``step`` smaller than a row, or a data length other than
    ``step * height``.
    """
    encoding = msg.encoding
    dtype, channels = encoding_info(encoding)
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise InvalidInputError(f'image has zero size: height={height}, width={width}')
    if height * width > max_pixels:
        raise InvalidInputError(
            f'image of {width}x{height} = {height * width} pixels exceeds the limit of '
            f'{max_pixels} pixels')
    row_bytes = width * channels * dtype.itemsize
    if step < row_bytes:
        raise InvalidInputError(
            f'step {step} is smaller than one row of {width} {encoding} pixels '
            f'({row_bytes} bytes)')
    try:
        raw = np.frombuffer(msg.data, dtype=np.uint8)
    except (TypeError, ValueError):
        raw = np.asarray(msg.data, dtype=np.uint8).ravel()
    if raw.size != step * height:
        raise InvalidInputError(
            f'data has {raw.size} bytes, expected step * height = {step} * {height} = '
            f'{step * height}')
    rows = raw.reshape(height, step)[:, :row_bytes]
    wire = dtype.newbyteorder('>' if msg.is_bigendian else '<')
    # ascontiguousarray drops the padding (and aligns odd steps) so the bytes can be viewed as
    # pixels; astype copies into native byte order, so the result never aliases msg.data.
    pixels = np.ascontiguousarray(rows).view(wire).astype(dtype, copy=True)
    return pixels.reshape((height, width) if channels == 1 else (height, width, channels))
