"""Corners in the micro-images of rendered raw frames of focused cameras, checked against the
optics (simulation.focused_observations): positions, and labels that are right or absent."""

import numpy as np
import pytest

from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of, match_truth
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white

pytestmark = pytest.mark.cost(43)   # s on the CI machine: scheduled early (conftest)

SCALE = 0.5
_CACHE = {}


def _setup(name):
    if name not in _CACHE:
        cam = preset(name, scale=SCALE, sensor__noise=0.0)
        # the grid from a 4-sample white (the 16-sample multi-focus white at this size trips
        # the grid estimate); the detector reads the aperture's image and the pixels' bundles
        # on it from the rims of a 16-sample one (4 samples put rho 0.7 px off)
        grid = estimate_grid(render_white(cam, samples=4))
        det = MicroImageCornerDetector(render_white(cam, samples=16), grid)
        det.lens_types = lens_types_of(cam, det.centres)
        _CACHE[name] = cam, det
    return _CACHE[name]


def _board(cam, cols=8, rows=5, first='black', fill=0.55):
    h = cam.field_of_view(cam.scene_distance)[1]
    return Checkerboard(cols, rows, fill * h / (rows + 2), first)


def _frame(cam, board, distance=1.0, angles=(10.0, -8.0, 3.0), offset=(0.0, 0.0)):
    rv, tv = board_pose(cam, board, distance * cam.scene_distance, angles, offset)
    raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
    truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
    return raw, truth


@pytest.mark.parametrize('name', ['focused-keplerian', 'focused-galilean', 'focused-multifocus'])
def test_corners_match_the_optics(name):
    cam, det = _setup(name)
    board = _board(cam)
    raw, truth = _frame(cam, board)
    found = det.detect(raw, board, pose=3)
    err, unmatched = match_truth(found.observations, truth)
    assert unmatched == 0
    assert np.all(found.observations.pose == 3)
    # 35 of 40 on the multi-focus camera since the 8-sample render covers the micro-lens disk
    # as wide in y as in x (the old pattern under-blurred y: mean ey^2 0.09 instead of 1/4)
    assert len(np.unique(found.observations.point)) >= 0.85 * board.n_points
    assert len(err) >= 3 * board.n_points
    assert np.sqrt(np.mean(np.sum(err ** 2, axis=1))) < 0.3
    assert np.abs(err).max() < 0.8
    if cam.mla.n_types > 1:
        assert set(np.unique(found.observations.lens_type)) == {0, 1, 2}
    # the inverse virtual depth has the camera's sign (inverted micro-images: Keplerian)
    w = found.diagnostics['inverse_virtual_depth']
    assert (w > 0) == (name != 'focused-galilean')


@pytest.mark.parametrize('first', ['black', 'white'])
def test_both_first_square_colours_label_right(first):
    cam, det = _setup('focused-keplerian')
    board = _board(cam, 7, 5, first)              # symmetric: colours decide the labelling
    raw, truth = _frame(cam, board, angles=(-6.0, 12.0, 170.0))
    found = det.detect(raw, board)
    err, unmatched = match_truth(found.observations, truth)
    assert unmatched == 0 and len(err) > 2 * board.n_points
    wrong = Checkerboard(7, 5, board.square, 'white' if first == 'black' else 'black')
    with pytest.raises(DetectionError):
        det.detect(raw, wrong)


def test_board_one_square_larger_is_refused():
    cam, det = _setup('focused-keplerian')
    actual = _board(cam, 9, 5)
    raw, _ = _frame(cam, actual)
    with pytest.raises(DetectionError):
        det.detect(raw, Checkerboard(8, 5, actual.square))


def test_partial_board_gives_right_labels_or_none():
    cam, det = _setup('focused-keplerian')
    board = _board(cam, fill=0.7)
    w = cam.field_of_view(cam.scene_distance)[0]
    raw, truth = _frame(cam, board, offset=(0.3 * w, 0.0))
    try:
        found = det.detect(raw, board)
    except DetectionError:
        return
    _, unmatched = match_truth(found.observations, truth)
    assert unmatched == 0


@pytest.mark.parametrize('distance', [0.6, 1.5])
def test_blurred_micro_images_give_no_wrong_corner(distance):
    cam, det = _setup('focused-multifocus')
    board = _board(cam, fill=0.45 * distance)
    raw, truth = _frame(cam, board, distance=distance)
    try:
        found = det.detect(raw, board)
    except DetectionError:
        return
    err, unmatched = match_truth(found.observations, truth)
    assert unmatched == 0
    assert np.abs(err).max() < 1.0


def test_no_board_is_refused_with_the_reason():
    cam, det = _setup('focused-keplerian')
    with pytest.raises(DetectionError, match='no texture'):
        det.detect(np.full(cam.sensor.size[::-1], 0.5), _board(cam))


@pytest.mark.parametrize('noise', [0.01, 0.03])
def test_sensor_noise_and_a_bayer_mosaic_give_no_wrong_corner(noise):
    # the raw frame divided by the white removes the mosaic's channel gains
    cam = preset('focused-keplerian', scale=SCALE, sensor__bayer='rggb')
    white = render_white(cam, samples=16)
    det = MicroImageCornerDetector(white)
    board = _board(cam)
    rv, tv = board_pose(cam, board, 1.2 * cam.scene_distance, (-12.0, 9.0, 4.0))
    raw = render_raw(cam, board, rv, tv, samples=8, noise=noise,
                     rng=np.random.default_rng(3))
    truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
    found = det.detect(raw, board)
    err, unmatched = match_truth(found.observations, truth)
    assert unmatched == 0
    assert len(np.unique(found.observations.point)) >= 0.8 * board.n_points
    assert np.abs(err).max() < 1.2


def test_corners_on_one_line_are_refused():
    # a pose whose few corners lie on one board row is useless to the calibration (it refuses
    # it): the detector says so with the reason
    cam, det = _setup('focused-keplerian')
    board = _board(cam)
    raw, _ = _frame(cam, board)
    found = det.detect(raw, board).observations
    one_row = found.point[found.point < board.cols]
    assert len(np.unique(one_row)) >= 3
    keep = np.isin(np.arange(board.n_points), np.unique(one_row))
    det_kept = det.homography_check

    def only_first_row(x_fit, b, spacing):
        return det_kept(x_fit, b, spacing) & keep
    det.homography_check = only_first_row
    try:
        with pytest.raises(DetectionError, match='on one line'):
            det.detect(raw, board)
    finally:
        del det.homography_check
