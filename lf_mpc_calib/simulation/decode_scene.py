"""One simulated frame for the decode node (its tests and benchmarks/bench_decode_node.py):
white, frame, true corners and a truth calibration file, written where the node reads them."""

import dataclasses
from pathlib import Path

import cv2
import numpy as np

from lf_mpc_calib.io.calibration_file import default_frames, save_calibration
from lf_mpc_calib.io.images import write_image
from lf_mpc_calib.simulation.dataset import ground_truth_file, random_poses
from lf_mpc_calib.simulation.optics import default_board
from lf_mpc_calib.simulation.render import quantize, render_raw, render_white


def write_decode_scene(camera, folder, *, seed=5):
    """
    Render ``camera``'s white and one 8-bit frame of its default board at a random pose
    (``seed``); write ``folder``/truth.yaml (the ground-truth calibration, frames of
    'lf_camera') and ``folder``/white.png. Returns dict camera, board, white (H, W), raw
    (H, W), truth (CalibrationFile), folder, corners (N, 3) m: the board's corners in the MPC
    frame.
    """
    board = default_board(camera)
    rng = np.random.default_rng(seed)
    rvecs, tvecs = random_poses(camera, board, 1, rng=rng)
    white = quantize(render_white(camera), 8)
    raw = quantize(render_raw(camera, board, rvecs[0], tvecs[0], rng=rng), 8)
    truth = dataclasses.replace(ground_truth_file(camera, rvecs, tvecs),
                                frames=default_frames('lf_camera'))
    folder = Path(folder)
    save_calibration(folder / 'truth.yaml', truth)
    write_image(folder / 'white.png', white)
    corners = board.points() @ cv2.Rodrigues(rvecs[0])[0].T + tvecs[0]
    return dict(camera=camera, board=board, white=white, raw=raw, truth=truth, folder=folder,
                corners=corners)
