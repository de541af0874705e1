"""The picture of what the calibration sees (report.detections_overlay, features.quick_corners,
pipeline.live_view): corners drawn where the rendered board's true corners are, coloured by
quality, the captured poses' outlines, and the pictures saved with the captures."""

import numpy as np
import pytest
import yaml

from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.camera.model import MPCModel
from lf_mpc_calib.features.corners import detect_corners
from lf_mpc_calib.features.quick_corners import quick_corners
from lf_mpc_calib.features.synthetic_views import render_views
from lf_mpc_calib.report.detections_overlay import (
    draw_detections, GREEN, guidance_lines, OUTLINE, picture_scale, picture_shape, RED,
    corner_quality)

# the Lytro-like camera of test_corners at half resolution (160 px views)
MODEL = MPCModel(2.4e-4, 2.5e-4, 4.0e-3, 3.8e-3, -0.32, -0.31, 0.0, 0.0, -3.3, -3.3)
BOARD = Checkerboard(7, 5, 0.005)
POSE = ([0.2, -0.3, 0.1], [-0.015, -0.01, 0.09])


@pytest.fixture(scope='module')
def rendered():
    """(central view (160, 160), true corners (35, 2) in it, its Detection) of 5 x 5 views."""
    stack, truth = render_views(MODEL, BOARD, *POSE, views=(5, 5), size=(160, 160))
    det = detect_corners(stack, BOARD)
    return stack.views[2, 2], truth[2, 2], det


def _is(picture, colour):
    """(H, W) bool: pixels of exactly ``colour``."""
    return np.all(picture == np.array(colour, np.uint8), axis=-1)


def _hue(picture, colour):
    """(H, W) bool: pixels of ``colour`` scaled by at least 0.4 (anti-aliased text on black)."""
    c = np.array(colour, float)
    p = picture.astype(float)
    k = (p @ c) / (c @ c)
    return (k >= 0.4) & np.all(np.abs(p - k[..., None] * c) <= 8, axis=-1)


def _to_picture(uv, f):
    return np.round((np.asarray(uv) + 0.5) * f - 0.5).astype(int)


def test_overlay_draws_the_corners_where_the_rendered_board_has_them(rendered):
    view, truth, det = rendered
    np.testing.assert_allclose(det.central_uv, truth, atol=0.3)     # the detector, checked
    picture = draw_detections(det.reference_image, det.central_uv,
                              board_size=(BOARD.cols, BOARD.rows), status='pose 0')
    f = picture_scale(view.shape)
    assert f == 4 and picture.shape == picture_shape(view.shape) == (4 * 160 + 128, 640, 3)
    assert picture.dtype == np.uint8
    green = _is(picture, GREEN)
    at = _to_picture(truth, f)
    # the corner colour at every true corner (the dot drawn at the detection covers it)
    assert all(green[y, x] for x, y in at)
    # ... and nowhere else in the image: every green pixel within a ring of a true corner
    yy, xx = np.nonzero(green[:f * view.shape[0]])
    dist = np.min(np.hypot(xx[:, None] - at[None, :, 0], yy[:, None] - at[None, :, 1]), axis=1)
    ring = 2 * (2 * f + 1) + 2                  # corner 0's outer ring, and anti-aliasing
    assert dist.max() <= ring
    assert len(xx) > 3 * len(at)                # rings, not only the dots
    # the status line in the corners' colour, under the image
    assert _hue(picture[f * view.shape[0]:], GREEN).any()


def test_quality_colours_a_corner_off_the_board_red(rendered):
    _, truth, det = rendered
    uv = det.central_uv.copy()
    spacing = np.linalg.norm(truth[1] - truth[0])
    uv[10] += [0.5 * spacing, 0.0]              # half a square off: not a board corner
    uv[20] = np.nan                              # not found
    q = corner_quality(uv, BOARD.cols, BOARD.rows)
    assert q[10] == 2 and q[20] == -1
    assert np.all(q[np.r_[0:10, 11:20, 21:35]] == 0)
    picture = draw_detections(det.reference_image, uv, board_size=(BOARD.cols, BOARD.rows))
    x, y = _to_picture(uv[10], 4)
    assert _is(picture, RED)[y, x]
    x, y = _to_picture(truth[20], 4)
    assert not _is(picture, GREEN)[y, x] and not _is(picture, RED)[y, x]


def test_overlay_outlines_the_captured_poses(rendered):
    view, truth, _ = rendered
    picture = draw_detections(view, None, outlines=[truth], status='no board in sight',
                              lines=['3 poses', 'next: a pose nearer than 0.32 m'])
    outline = _is(picture, OUTLINE)
    assert not _is(picture, GREEN).any()
    f = 4
    hull = _to_picture(truth[[0, BOARD.cols - 1, BOARD.n_points - 1,
                              BOARD.n_points - BOARD.cols]], f)
    # along each edge of the board's outer corners, the outline colour within 2 px
    for a, b in zip(hull, np.roll(hull, -1, axis=0)):
        for t in np.linspace(0.1, 0.9, 9):
            x, y = np.round(a + t * (b - a)).astype(int)
            assert outline[y - 2:y + 3, x - 2:x + 3].any(), (a, b, t)
    # and not inside the board (the centre of the board is clear)
    cx, cy = _to_picture(truth.mean(axis=0), f)
    assert not outline[cy - 20:cy + 21, cx - 20:cx + 21].any()
    # the status in red, the guidance in white, under the image
    assert _hue(picture[f * view.shape[0]:], RED).any()


def test_guidance_lines_say_what_the_pose_set_determines_and_what_to_add():
    status = {'summary': '2 poses; depths 0.25-0.30 m; next: a pose nearer than 0.32 m',
              'advice': ['a pose nearer than 0.32 m', 'tilt the board 30 deg about x'],
              'sufficient': False, 'flags': ['k_1 undetermined']}
    assert guidance_lines(status) == ['2 poses', 'depths 0.25-0.30 m',
                                      'next: a pose nearer than 0.32 m',
                                      'then: tilt the board 30 deg about x', 'k_1 undetermined']
    assert guidance_lines({'summary': 'no captures yet'}) == ['no captures yet']


def test_quick_corners_find_the_rendered_board(rendered):
    view, truth, _ = rendered
    look = quick_corners(view, BOARD)
    assert look.reason == ''
    np.testing.assert_allclose(look.corners, truth, atol=0.5)   # the same labelling
    nothing = quick_corners(np.full_like(view, 0.5), BOARD)
    assert nothing.corners is None and 'no 7x5 board in sight' in nothing.reason


@pytest.fixture(scope='module')
def small_session():
    """A 0.3-crop Lytro session with 2 captures and a third frame."""
    from lf_mpc_calib.pipeline.session import CalibrationSession
    from lf_mpc_calib.simulation.dataset import random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(3)
    rvecs, tvecs = random_poses(camera, board, 3, rng=rng)
    white = quantize(render_white(camera), 8)
    frames = [quantize(render_raw(camera, board, r, t, rng=rng), 8)
              for r, t in zip(rvecs, tvecs)]
    session = CalibrationSession(board, white=white)
    for frame in frames[:2]:
        assert session.capture(frame).accepted
    return session, frames


def test_live_and_capture_pictures_of_a_session(small_session):
    from lf_mpc_calib.pipeline.live_view import capture_picture, live_picture, reference_image
    session, frames = small_session
    view, step = reference_image(session, frames[0])
    assert step == 1.0
    det = session.detections[0]
    np.testing.assert_allclose(view, det.reference_image, atol=1e-6)  # the capture's view
    f = picture_scale(view.shape)
    live = live_picture(session, frames[0], ['2 poses'])
    assert live.shape == picture_shape(view.shape)
    corner_colour = _is(live, GREEN) | _is(live, (255, 255, 0))
    # the quick look's corners where the capture found them (within a pixel of the picture)
    for x, y in _to_picture(det.central_uv, f):
        assert corner_colour[y - 1:y + 2, x - 1:x + 2].any()
    # both captured poses outlined
    assert _is(live, OUTLINE).sum() > 100
    picture = capture_picture(session, 1, ['2 poses'])
    green = _is(picture, GREEN)
    assert all(green[y, x] for x, y in _to_picture(session.detections[1].central_uv, f))
    # no board in sight: no corner drawn, the status in red
    blank = live_picture(session, np.full_like(frames[2], 40), ['2 poses'])
    assert not _is(blank, GREEN).any()
    assert _hue(blank, RED).any()


def test_session_saves_the_capture_pictures_with_their_checksums(small_session, tmp_path):
    from lf_mpc_calib.io.images import read_image
    from lf_mpc_calib.io.raw_dataset import load_raw_folder
    from lf_mpc_calib.pipeline.live_view import capture_picture
    session, _ = small_session
    pictures = {k: capture_picture(session, k) for k in range(session.num_poses)}
    session.pictures.update(pictures)
    try:
        paths = session.save(tmp_path, 'cam')
    finally:
        session.pictures.clear()
    folder = paths[-1].parent
    manifest = yaml.safe_load((folder / 'manifest.yaml').read_text())
    for k, picture in pictures.items():
        name = f'detections_{k:03d}.png'
        assert name in manifest['sha256']
        np.testing.assert_array_equal(read_image(folder / name), picture)
    assert not list(folder.glob('.*'))           # written through temporary names
    dataset = load_raw_folder(tmp_path)          # the checksums hold; frames only as frames
    assert len(dataset.frames) == session.num_poses


def test_pictures_of_a_focused_session():
    """A focused camera: the image rendered from the micro-images, the capture's corners on it
    and its outline scaled into a frame rendered at another inverse virtual depth."""
    from lf_mpc_calib.pipeline.live_view import capture_picture, live_picture, reference_image
    from lf_mpc_calib.pipeline.session import CalibrationSession
    from lf_mpc_calib.simulation.focused_raw import board_pose
    from lf_mpc_calib.simulation.optics import Checkerboard as SimBoard, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0)
    board = SimBoard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    white = quantize(render_white(cam, samples=4), 8)
    frames = [quantize(render_raw(cam, board, *board_pose(cam, board, z * cam.scene_distance,
                                                          ang), samples=8, noise=0.0), 8)
              for z, ang in ((1.0, (15, -10, 3)), (1.4, (20, 8, 2)))]
    session = CalibrationSession(board, camera_type='focused', white=white)
    assert session.capture(frames[0]).accepted
    det = session.detections[0]
    picture = capture_picture(session, 0)
    f = picture_scale(det.reference_image.shape)
    assert picture.shape == picture_shape(det.reference_image.shape)
    green = _is(picture, GREEN)
    assert all(green[y, x] for x, y in _to_picture(det.central_uv, f))
    image, step = reference_image(session, frames[1])
    step0 = det.diagnostics['render_step_px']
    assert step != step0                        # another depth: another render scale
    live = live_picture(session, frames[1])
    assert live.shape == picture_shape(image.shape)
    f1 = picture_scale(image.shape)
    outline = _is(live, OUTLINE)
    # pose 0's outer corners, in raw pixels, land on its outline in the new render
    uv = det.central_uv * step0 / step
    corners = uv[[0, board.cols - 1, board.n_points - 1, board.n_points - board.cols]]
    for x, y in _to_picture(corners, f1):
        assert outline[y - 3:y + 4, x - 3:x + 4].any()
