"""sensor_msgs/Image <-> ndarray: round trips, padding, byte order, demosaicing, bad input."""

from types import SimpleNamespace

import numpy as np
import pytest

sensor_msgs = pytest.importorskip('sensor_msgs.msg')

from lf_mpc_calib.errors import InvalidInputError  # noqa: E402
from lf_mpc_calib.ros.image_conversion import (  # noqa: E402
    array_to_image, bayer_pattern, ENCODINGS, encoding_info, image_to_array, to_mono, to_rgb)
from ros.rclpy_helpers import MessageCollector, wait_for_subscribers  # noqa: E402


def _random_pixels(encoding, height=5, width=7, seed=0):
    dtype, channels = encoding_info(encoding)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return np.random.default_rng(seed).integers(0, np.iinfo(dtype).max, shape, endpoint=True,
                                                dtype=dtype)


def _padded_message(pixels, encoding, pad, is_bigendian=False):
    """Build an Image by hand with ``pad`` bytes of 0xAB after every row."""
    dtype, _ = encoding_info(encoding)
    height, width = pixels.shape[:2]
    rows = np.ascontiguousarray(pixels, dtype=dtype.newbyteorder('>' if is_bigendian else '<'))
    rows = rows.reshape(height, -1).view(np.uint8)
    data = np.hstack([rows, np.full((height, pad), 0xAB, np.uint8)])
    return sensor_msgs.Image(height=height, width=width, encoding=encoding,
                             is_bigendian=is_bigendian, step=rows.shape[1] + pad,
                             data=data.tobytes())


@pytest.mark.parametrize('encoding', sorted(ENCODINGS))
def test_image_conversion_roundtrip_every_encoding(encoding):
    pixels = _random_pixels(encoding, seed=len(encoding))
    msg = array_to_image(pixels, encoding)
    dtype, channels = encoding_info(encoding)
    assert isinstance(msg, sensor_msgs.Image)
    assert (msg.height, msg.width, msg.encoding) == (5, 7, encoding)
    assert msg.step == 7 * channels * dtype.itemsize
    back = image_to_array(msg)
    assert back.dtype == dtype and back.dtype.isnative
    np.testing.assert_array_equal(back, pixels)


@pytest.mark.parametrize('encoding,pad', [
    ('mono8', 1), ('mono16', 3), ('mono16', 4), ('bgr8', 5), ('rgb8', 2), ('bgra8', 8),
    ('bayer_grbg16', 1), ('bayer_rggb8', 16)])
def test_image_conversion_honours_step_padding(encoding, pad):
    pixels = _random_pixels(encoding, height=4, width=6, seed=pad)
    msg = _padded_message(pixels, encoding, pad)
    back = image_to_array(msg)
    np.testing.assert_array_equal(back, pixels)
    assert back.flags.c_contiguous


def test_image_conversion_big_endian_mono16():
    pixels = np.array([[0x0102, 0xA0B0], [0xFFFE, 0x0001]], np.uint16)
    msg = _padded_message(pixels, 'mono16', pad=1, is_bigendian=True)
    assert bytes(msg.data[:4]) == b'\x01\x02\xa0\xb0'
    np.testing.assert_array_equal(image_to_array(msg), pixels)

    big = array_to_image(pixels, 'mono16', is_bigendian=True)
    little = array_to_image(pixels, 'mono16', is_bigendian=False)
    assert big.is_bigendian and not little.is_bigendian
    assert bytes(big.data[:2]) == b'\x01\x02' and bytes(little.data[:2]) == b'\x02\x01'
    np.testing.assert_array_equal(image_to_array(big), pixels)
    np.testing.assert_array_equal(image_to_array(little), pixels)


def test_image_conversion_result_does_not_alias_message():
    msg = array_to_image(np.zeros((2, 3), np.uint8), 'mono8')
    pixels = image_to_array(msg)
    pixels[:] = 7
    assert set(msg.data) == {0}


def test_image_conversion_accepts_duck_typed_messages():
    msg = SimpleNamespace(height=2, width=2, encoding='mono8', is_bigendian=0, step=3,
                          data=[1, 2, 99, 3, 4, 99])
    np.testing.assert_array_equal(image_to_array(msg), [[1, 2], [3, 4]])


def test_image_conversion_keeps_header_and_fills_given_message():
    from std_msgs.msg import Header
    header = Header(frame_id='cam_optical_frame')
    msg = sensor_msgs.Image()
    out = array_to_image(np.ones((3, 2, 1), np.uint8), 'mono8', msg, header=header)
    assert out is msg and msg.header.frame_id == 'cam_optical_frame' and msg.height == 3


@pytest.mark.parametrize('encoding', ['yuv422', '32FC1', '', 'bayer_rgbg8', None])
def test_image_conversion_rejects_unsupported_encoding(encoding):
    msg = sensor_msgs.Image(height=1, width=1, step=1, data=b'\x00')
    msg.encoding = encoding if encoding is not None else ''
    with pytest.raises(InvalidInputError, match='unsupported image encoding'):
        image_to_array(msg)
    with pytest.raises(InvalidInputError, match='unsupported image encoding'):
        array_to_image(np.zeros((1, 1), np.uint8), encoding)


def test_image_conversion_rejects_step_too_small():
    msg = array_to_image(np.zeros((3, 4), np.uint16), 'mono16')
    msg.step = 7
    with pytest.raises(InvalidInputError, match=r'step 7 is smaller than one row .*8 bytes'):
        image_to_array(msg)


@pytest.mark.parametrize('delta', [-1, 1, -12])
def test_image_conversion_rejects_data_length_mismatch(delta):
    msg = array_to_image(np.zeros((3, 4, 3), np.uint8), 'rgb8')
    data = bytes(msg.data)
    msg.data = data[:delta] if delta < 0 else data + b'\x00' * delta
    with pytest.raises(InvalidInputError, match=r'data has \d+ bytes, expected step \* height'):
        image_to_array(msg)


@pytest.mark.parametrize('height,width', [(0, 4), (4, 0), (0, 0)])
def test_image_conversion_rejects_zero_size(height, width):
    msg = sensor_msgs.Image(height=height, width=width, encoding='mono8', step=width, data=b'')
    with pytest.raises(InvalidInputError, match='zero size'):
        image_to_array(msg)
    with pytest.raises(InvalidInputError, match='zero size'):
        array_to_image(np.zeros((height, width), np.uint8), 'mono8')


def test_image_conversion_rejects_huge_size_before_reading_data():
    # 2**20 x 2**20 pixels with no data at all: the size check must come first
    msg = sensor_msgs.Image(height=2 ** 20, width=2 ** 20, encoding='mono8', step=2 ** 20)
    with pytest.raises(InvalidInputError, match='exceeds the limit'):
        image_to_array(msg)
    small = array_to_image(np.zeros((10, 10), np.uint8), 'mono8')
    with pytest.raises(InvalidInputError, match='100 pixels exceeds the limit of 99'):
        image_to_array(small, max_pixels=99)
    assert image_to_array(small, max_pixels=100).shape == (10, 10)


@pytest.mark.parametrize('pixels,encoding,match', [
    (np.zeros((2, 3, 3), np.uint8), 'mono8', r'shape \(height, width\), got \(2, 3, 3\)'),
    (np.zeros((2, 3), np.uint8), 'rgb8', r'shape \(height, width, 3\), got \(2, 3\)'),
    (np.zeros((2, 3, 4), np.uint8), 'bgr8', r'shape \(height, width, 3\)'),
    (np.zeros((2, 3), np.float32), 'mono8', 'dtype uint8, got float32'),
    (np.zeros((2, 3), np.uint8), 'mono16', 'dtype uint16, got uint8'),
    (np.zeros((2, 3), np.int16), 'bayer_rggb16', 'dtype uint16, got int16'),
])
def test_image_conversion_rejects_wrong_array(pixels, encoding, match):
    with pytest.raises(InvalidInputError, match=match):
        array_to_image(pixels, encoding)
    with pytest.raises(InvalidInputError, match=match):
        to_mono(pixels, encoding)


def test_image_conversion_error_is_value_error():
    with pytest.raises(ValueError):
        encoding_info('yuv422')


def test_image_conversion_bayer_pattern_names():
    assert bayer_pattern('bayer_gbrg16') == 'gbrg'
    assert bayer_pattern('bayer_rggb8') == 'rggb'
    assert bayer_pattern('mono8') is None and bayer_pattern('rgb8') is None


def _mosaic(rgb, pattern):
    """Sample an (H, W, 3) RGB image with a Bayer pattern whose 2x2 block starts at (0, 0)."""
    channel = {'r': 0, 'g': 1, 'b': 2}
    out = np.empty(rgb.shape[:2], rgb.dtype)
    for dy in (0, 1):
        for dx in (0, 1):
            out[dy::2, dx::2] = rgb[dy::2, dx::2, channel[pattern[2 * dy + dx]]]
    return out


@pytest.mark.parametrize('pattern', ['rggb', 'bggr', 'gbrg', 'grbg'])
@pytest.mark.parametrize('bits', [8, 16])
def test_image_conversion_demosaic_recovers_flat_colour(pattern, bits):
    dtype = np.uint8 if bits == 8 else np.uint16
    colour = np.array([200, 100, 30], dtype) * (1 if bits == 8 else 250)
    rgb = np.broadcast_to(colour, (8, 10, 3)).astype(dtype)
    encoding = f'bayer_{pattern}{bits}'
    # through a message so the full path is covered
    mosaic = image_to_array(array_to_image(_mosaic(rgb, pattern), encoding))
    recovered = to_rgb(mosaic, encoding)
    assert recovered.shape == (8, 10, 3) and recovered.dtype == dtype
    # a flat colour is reproduced exactly by bilinear demosaicing away from the border;
    # a wrong pattern mapping would swap red and blue (200 vs 30)
    np.testing.assert_allclose(recovered[2:-2, 2:-2].reshape(-1, 3).astype(float),
                               np.tile(colour.astype(float), (6 * 4, 1)), atol=1)
    gray = to_mono(mosaic, encoding)
    expected_gray = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
    assert gray.shape == (8, 10)
    # 1 count of rounding (8 bit), 0.2 % at 16 bit
    assert abs(float(gray[4, 5]) - expected_gray) <= max(1.0, 2e-3 * expected_gray)


def test_image_conversion_colour_to_mono_and_rgb_agree_across_orders():
    rgb = _random_pixels('rgb8', seed=3)
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    rgba = np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=2)
    bgra = np.concatenate([bgr, rgba[:, :, 3:]], axis=2)
    for pixels, encoding in ((bgr, 'bgr8'), (rgba, 'rgba8'), (bgra, 'bgra8')):
        np.testing.assert_array_equal(to_rgb(pixels, encoding), rgb)
        np.testing.assert_array_equal(to_mono(pixels, encoding), to_mono(rgb, 'rgb8'))
    red = np.zeros((1, 1, 3), np.uint8)
    red[..., 0] = 255
    assert abs(int(to_mono(red, 'rgb8')[0, 0]) - round(0.299 * 255)) <= 1
    mono = _random_pixels('mono16', seed=4)
    np.testing.assert_array_equal(to_mono(mono, 'mono16'), mono)
    np.testing.assert_array_equal(to_rgb(mono, 'mono16')[:, :, 2], mono)


def test_image_conversion_survives_dds_with_padding_and_byte_order(ros_node, ros_executor):
    """A padded bgr8 frame and a big-endian mono16 frame arrive intact over real DDS."""
    pub = ros_node.create_publisher(sensor_msgs.Image, 'conversion_image', 10)
    collector = MessageCollector(ros_node, sensor_msgs.Image, 'conversion_image')
    wait_for_subscribers(ros_executor, pub)
    bgr = _random_pixels('bgr8', height=6, width=9, seed=11)
    mono16 = _random_pixels('mono16', height=5, width=3, seed=12)
    pub.publish(_padded_message(bgr, 'bgr8', pad=5))
    pub.publish(array_to_image(mono16, 'mono16', is_bigendian=True))
    first, second = collector.wait(ros_executor, count=2)[:2]
    assert first.step == 9 * 3 + 5 and second.is_bigendian
    np.testing.assert_array_equal(image_to_array(first), bgr)
    np.testing.assert_array_equal(image_to_array(second), mono16)
