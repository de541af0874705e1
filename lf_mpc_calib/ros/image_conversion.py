"""
sensor_msgs/Image <-> numpy arrays, without cv_bridge.

Honours ``step`` (row padding, also odd padding of 16-bit rows) and ``is_bigendian``; every
malformed message raises :class:`lf_mpc_calib.errors.InvalidInputError` naming what was expected
and what arrived, so a node can log it and keep serving.

Encodings (REP 118 / sensor_msgs image_encodings names):

=====================================  ===========  ===============================
encoding                               dtype        array shape
=====================================  ===========  ===============================
mono8, bayer_{rggb,bggr,gbrg,grbg}8    uint8        (height, width)
mono16, bayer_{rggb,bggr,gbrg,grbg}16  uint16       (height, width), native byte order
rgb8, bgr8                             uint8        (height, width, 3), channels as named
rgba8, bgra8                           uint8        (height, width, 4), channels as named
=====================================  ===========  ===============================

Bayer images stay raw mosaics in :func:`image_to_array`; :func:`to_mono` and :func:`to_rgb` turn
any supported layout into the intensity or RGB image the core wants.
"""

import array as _array
import sys

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError
# the message -> array half is pure numpy and shared with rosbag2 input (core, no ROS)
from lf_mpc_calib.io.images import (  # noqa: F401  (re-exported)
    BAYER_PATTERNS, DEFAULT_MAX_PIXELS, ENCODINGS, bayer_pattern, encoding_info, image_to_array)

# OpenCV names Bayer codes after the 2x2 block at row 1, column 1; these map the ROS pattern
# (block at the origin) to the matching code, as cv_bridge does.
_CV_BAYER = {'rggb': 'BG', 'bggr': 'RG', 'gbrg': 'GR', 'grbg': 'GB'}


def _check_size(height, width, max_pixels):
    if height <= 0 or width <= 0:
        raise InvalidInputError(f'image has zero size: height={height}, width={width}')
    if height * width > max_pixels:
        raise InvalidInputError(
            f'image of {width}x{height} = {height * width} pixels exceeds the limit of '
            f'{max_pixels} pixels')


def array_to_image(pixels, encoding, msg=None, *, header=None, is_bigendian=None,
                   max_pixels=DEFAULT_MAX_PIXELS):
    """
    Fill a sensor_msgs/Image with an array's pixels (no row padding).

    Parameters
    ----------
    pixels : array_like
        Shape and dtype as in the module's table for ``encoding``; ``(height, width, 1)`` is
        accepted for single-channel encodings.
    encoding : str
        One of :data:`ENCODINGS`.
    msg : sensor_msgs.msg.Image, optional
        The message to fill (its header is kept); a new ``sensor_msgs.msg.Image`` by default.
    header : std_msgs.msg.Header, optional
        Replaces the message's header.
    is_bigendian : bool, optional
        Byte order of 16-bit data in the message; defaults to this machine's.
    max_pixels : int
        Largest accepted ``height * width``.

    Returns
    -------
    sensor_msgs.msg.Image
        ``msg`` (or the new message) with height, width, encoding, is_bigendian, step and data
        set.

    Raises
    ------
    InvalidInputError
        Unsupported encoding, or an array whose shape or dtype does not fit it.

    """
    dtype, channels = encoding_info(encoding)
    pixels = np.asarray(pixels)
    if channels == 1 and pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    pixels = _check_layout(pixels, encoding)
    height, width = pixels.shape[:2]
    _check_size(height, width, max_pixels)
    if is_bigendian is None:
        is_bigendian = sys.byteorder == 'big'
    out = np.ascontiguousarray(pixels, dtype=dtype.newbyteorder('>' if is_bigendian else '<'))
    if msg is None:
        from sensor_msgs.msg import Image
        msg = Image()
    if header is not None:
        msg.header = header
    msg.height = int(height)
    msg.width = int(width)
    msg.encoding = encoding
    msg.is_bigendian = bool(is_bigendian)
    msg.step = int(width * channels * dtype.itemsize)
    data = _array.array('B')
    data.frombytes(memoryview(out).cast('B'))
    msg.data = data
    return msg


def _check_layout(pixels, encoding):
    """Check shape and dtype against the encoding; return a C-contiguous native array."""
    dtype, channels = encoding_info(encoding)
    pixels = np.asarray(pixels)
    if channels == 1:
        shape_ok, expected = pixels.ndim == 2, '(height, width)'
    else:
        shape_ok = pixels.ndim == 3 and pixels.shape[2] == channels
        expected = f'(height, width, {channels})'
    if not shape_ok:
        raise InvalidInputError(
            f'pixels for {encoding} must have shape {expected}, got {pixels.shape}')
    if pixels.dtype.kind != dtype.kind or pixels.dtype.itemsize != dtype.itemsize:
        raise InvalidInputError(
            f'pixels for {encoding} must have dtype {dtype.name}, got {pixels.dtype}')
    return np.ascontiguousarray(pixels, dtype=dtype)


def to_mono(pixels, encoding):
    """
    Return the intensity image of an array in ``encoding``'s layout.

    Mono images come back as they are; colour images are converted with the ITU-R 601 weights;
    Bayer mosaics are demosaiced (OpenCV, bilinear) and converted. Same dtype as the input,
    shape ``(height, width)``.
    """
    pixels = _check_layout(pixels, encoding)
    pattern = bayer_pattern(encoding)
    if pattern is not None:
        return cv2.cvtColor(pixels, getattr(cv2, f'COLOR_Bayer{_CV_BAYER[pattern]}2GRAY'))
    code = {
        'rgb8': cv2.COLOR_RGB2GRAY, 'bgr8': cv2.COLOR_BGR2GRAY,
        'rgba8': cv2.COLOR_RGBA2GRAY, 'bgra8': cv2.COLOR_BGRA2GRAY,
    }.get(encoding)
    return pixels if code is None else cv2.cvtColor(pixels, code)


def to_rgb(pixels, encoding):
    """
    Return an ``(height, width, 3)`` RGB image of an array in ``encoding``'s layout.

    Bayer mosaics are demosaiced (OpenCV, bilinear); mono images are repeated in the three
    channels; alpha is dropped. Same dtype as the input.
    """
    pixels = _check_layout(pixels, encoding)
    pattern = bayer_pattern(encoding)
    if pattern is not None:
        return cv2.cvtColor(pixels, getattr(cv2, f'COLOR_Bayer{_CV_BAYER[pattern]}2RGB'))
    if pixels.ndim == 2:
        return np.repeat(pixels[:, :, None], 3, axis=2)
    if encoding.startswith('bgr'):
        return np.ascontiguousarray(pixels[:, :, 2::-1])
    return np.ascontiguousarray(pixels[:, :, :3])


def load_dark(path):
    """The dark frame (H, W) of the ``dark_image_file`` parameter, or None when it is empty."""
    if not path:
        return None
    from lf_mpc_calib.io.images import read_image
    dark = read_image(path)
    return dark if dark.ndim == 2 else dark.mean(axis=2).astype(dark.dtype)


def less_dark(pixels, dark, what):
    """``pixels`` less ``dark`` (None: as they are), in their dtype; InvalidInputError naming
    ``what`` when the two differ in size or bit depth."""
    if dark is None or pixels is None:
        return pixels
    from lf_mpc_calib.lenslet.dark_frame import minus_dark
    return minus_dark(pixels, dark, f'{what} image')
