"""Frames rendered ahead in a worker process are the frames rendered in-process."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.dataset import capture_board, capture_poses
from lf_mpc_calib.simulation.frame_pool import FramePool, render_frame
from lf_mpc_calib.simulation.optics import preset


def test_the_worker_renders_the_same_frames_in_order_and_refuses_other_indices():
    cam = preset('focused-keplerian', scale=0.15)
    board = capture_board(cam)
    rvecs, tvecs = capture_poses(cam, board, 2, rng=np.random.default_rng(3))
    pool = FramePool(cam, board, rvecs, tvecs, samples=2, seed=5, noise=None, bits=8)
    try:
        assert len(pool) == 2
        for k in range(2):
            here = render_frame(cam, board, rvecs[k], tvecs[k], samples=2, seed=5, index=k,
                                noise=None, bits=8)
            there = pool.frame(k, timeout=60)
            assert there.dtype == np.uint8 and there.shape == (cam.sensor.height,
                                                               cam.sensor.width)
            assert np.array_equal(there, here)
        # the noise is drawn per pose: the two poses' frames differ
        assert not np.array_equal(pool.frame(0), pool.frame(1))
        with pytest.raises(InvalidInputError, match='pose index 2: expected 0 to 1'):
            pool.frame(2)
    finally:
        pool.close()


def test_poses_of_other_shapes_are_refused():
    cam = preset('focused-keplerian', scale=0.15)
    with pytest.raises(InvalidInputError, match=r'both be \(P, 3\)'):
        FramePool(cam, capture_board(cam), np.zeros((2, 3)), np.zeros((3, 3)), samples=1,
                  seed=0, noise=None, bits=8)


def test_a_queued_loop_is_the_loop_rendered_in_process_queued_once():
    cam = preset('focused-keplerian', scale=0.15)
    board = capture_board(cam)
    rvecs, tvecs = capture_poses(cam, board, 2, rng=np.random.default_rng(3))
    pool = FramePool(cam, board, rvecs[:1], tvecs[:1], samples=2, seed=5, noise=None, bits=8)
    try:
        assert pool.loop('live') is None
        pool.queue_loop('live', rvecs, tvecs, samples=2, index=0)
        pool.queue_loop('live', rvecs[:1], tvecs[:1], samples=2, index=0)   # queued once
        frames = pool.loop('live', timeout=60)
        assert len(frames) == 2
        for n in range(2):
            here = render_frame(cam, board, rvecs[n], tvecs[n], samples=2, seed=5,
                                index=(0, n), noise=None, bits=8)
            assert np.array_equal(frames[n], here)
    finally:
        pool.close()
