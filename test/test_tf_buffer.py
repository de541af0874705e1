"""The TF buffer of ros/tf_listener (no DDS): chains, stale and moving transforms."""

import numpy as np
import pytest

from lf_mpc_calib.camera import transforms
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.ros.tf_listener import TransformBuffer

S = 1_000_000_000


def _buffer():
    b = TransformBuffer()
    b.set_transform('base_link', 'link1', [0, 0, 0.3], [0, 0, 0.5], 0, static=True)
    for k in range(10):                                   # at rest, published at 10 Hz
        b.set_transform('link1', 'tool0', [0.1, 0.2, 0.0], [0.3, 0.0, 0.1], k * S // 10)
    return b


def test_lookup_composes_the_chain():
    b = _buffer()
    w, t = b.lookup('base_link', 'tool0', S // 2)
    ref = transforms.compose(([0, 0, 0.3], [0, 0, 0.5]), ([0.1, 0.2, 0.0], [0.3, 0.0, 0.1]))
    np.testing.assert_allclose(w, ref[0], atol=1e-12)
    np.testing.assert_allclose(t, ref[1], atol=1e-12)
    w, t = b.lookup('tool0', 'tool0', S // 2)
    assert np.allclose(w, 0) and np.allclose(t, 0)


def test_lookup_refuses_with_reasons():
    b = _buffer()
    with pytest.raises(InvalidInputError, match="target frame 'world' is unknown"):
        b.lookup('world', 'tool0', S // 2)
    with pytest.raises(InvalidInputError, match="'base_link' is not below 'tool0'"):
        b.lookup('tool0', 'base_link', S // 2)
    with pytest.raises(InvalidInputError, match=r'nearest is 1\.100 s from the frame'):
        b.lookup('base_link', 'tool0', 2 * S)
    b.set_transform('link1', 'tool0', [0.1, 0.2, 0.0], [0.31, 0.0, 0.1], S)   # moved 10 mm
    with pytest.raises(InvalidInputError, match='changes by 10.00 mm.*the arm is moving'):
        b.lookup('base_link', 'tool0', S - S // 10)
