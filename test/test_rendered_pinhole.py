"""The pinhole of the image rendered from a focused camera's micro-images: the true board
corners projected through it fall where OpenCV finds them in the rendered image."""

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.measurement.focused import FocusedMeasurer, rendered_pinhole
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


@pytest.mark.parametrize('name, distance', [('focused-keplerian', 1.25),
                                            ('focused-keplerian', 1.5),
                                            ('focused-galilean', 0.8)])
def test_true_corners_project_onto_the_rendered_board(name, distance):
    cam = preset(name, scale=0.5, sensor__noise=0.0)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, distance * cam.scene_distance, (12.0, -9.0, 4.0))
    raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
    model = cam.ground_truth_model()
    meas = FocusedMeasurer(model, cam.lenslet_grid(), white=render_white(cam, samples=4)) \
        .measure(raw, points=False)
    pin = meas.pinhole
    assert pin.size == meas.center.shape[::-1] and pin.K[0, 0] > 0 and pin.K[1, 1] > 0
    found, corners = cv2.findChessboardCornersSB(
        np.clip(meas.center * 255, 0, 255).astype(np.uint8), (board.cols, board.rows))
    assert found
    corners = corners.reshape(-1, 2)
    # true corners in the pinhole's frame: optical = R(rotation_vector) pinhole + centre
    points = board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
    rot = Rotation.from_rotvec(pin.rotation_vector).as_matrix()
    local = (points - pin.centre) @ rot
    assert np.all(local[:, 2] > 0)                       # in front of the pinhole
    proj = local @ pin.K.T
    proj = proj[:, :2] / proj[:, 2:]
    dist = np.linalg.norm(corners[:, None] - proj[None], axis=2).min(axis=1)
    # measured median 0.06-0.21 px, max 0.26-0.41 px (rendered px, 5 raw px each); the
    # main lens as the centre, not the MPC origin (that one: max 1.1-5.8 px)
    assert np.median(dist) < 0.35 and dist.max() < 0.8, dist


def test_rendered_pinhole_refuses_what_has_none():
    model = preset('focused-keplerian', scale=0.5).ground_truth_model()
    with pytest.raises(InvalidInputError, match='w != 0'):
        rendered_pinhole(model, 0.0, (10, 10))
    with pytest.raises(InvalidInputError, match='mirrored'):
        rendered_pinhole(model.replace(k_j=-model.k_j), 0.2, (10, 10))
