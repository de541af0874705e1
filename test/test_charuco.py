"""ChArUco boards: the board model, its rendering, detection by id, partial views, bad input."""

import cv2
import numpy as np
import pytest

from lf_mpc_calib.camera.board import CharucoBoard, Checkerboard
from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.board_detection import detect_board_corners as detect_corners
from lf_mpc_calib.features.charuco import BoardMismatchError, find_charuco
from lf_mpc_calib.features.corners import CornerOptions
from lf_mpc_calib.features.synthetic_views import ViewStack

BOARD = CharucoBoard(6, 4, 0.02, dictionary='DICT_4X4_50')
PX = 40            # texture pixels per square of the synthetic images


def _image(board=BOARD, size=(420, 320), warp=None, px=PX):
    """A board image (H, W) float32 drawn by OpenCV, placed by a homography, and the
    homography (3, 3) from the board frame (metres) to its pixels."""
    tex = board.cv_board().generateImage(((board.cols + 1) * px, (board.rows + 1) * px),
                                         marginSize=0).astype(np.float32)
    # board metres -> texture px (pixel centres at whole numbers: edges at k px - 0.5)
    scale, o = px / board.square, px - 0.5
    to_tex = np.array([[scale, 0, o], [0, scale, o], [0, 0, 1.0]])
    place = np.array([[0.75, 0.08, 30], [-0.05, 0.8, 40], [1e-4, 2e-4, 1]]) \
        if warp is None else warp
    out = cv2.warpPerspective(tex, place, size, flags=cv2.INTER_AREA, borderValue=255.0)
    return cv2.GaussianBlur(out / 255.0, (0, 0), 0.8), place @ to_tex


def _project(h, pts):
    return cv2.perspectiveTransform(pts[:, None, :2].astype(np.float64), h).reshape(-1, 2)


def _stack(image, shift=0.4):
    """3 x 3 views of ``image`` moved by ``shift`` px per view index (a light field)."""
    views = np.empty((3, 3) + image.shape, np.float32)
    for a, j in enumerate((-1, 0, 1)):
        for b, i in enumerate((-1, 0, 1)):
            m = np.float32([[1, 0, shift * i], [0, 1, shift * j]])
            views[a, b] = cv2.warpAffine(image, m, image.shape[::-1], flags=cv2.INTER_CUBIC,
                                         borderMode=cv2.BORDER_REPLICATE)
    return ViewStack(views, np.array([-1, 0, 1]), np.array([-1, 0, 1]), np.ones((3, 3), bool))


def test_board_round_trip_and_layouts():
    d = BOARD.to_dict()
    assert d['board_type'] == 'charuco' and d['dictionary'] == 'DICT_4X4_50'
    again = Checkerboard.from_dict(d)            # dispatches on board_type
    assert isinstance(again, CharucoBoard)
    assert (again.cols, again.rows, again.marker, again.layout) == \
        (BOARD.cols, BOARD.rows, BOARD.marker, BOARD.layout)
    assert type(Checkerboard.from_dict(Checkerboard(6, 4, 0.02).to_dict())) is Checkerboard
    for layout in ('opencv', 'legacy'):
        for rows in (4, 5):                       # 5 and 6 square rows
            b = CharucoBoard(6, rows, 0.02, dictionary='DICT_4X4_50', layout=layout)
            tex = b.cv_board().generateImage((7 * 20, (rows + 1) * 20), marginSize=0)
            seen = 'white' if tex[10, 10] > 127 else 'black'
            assert b.first_square == seen, (layout, rows)


def test_board_refuses_what_it_cannot_be():
    with pytest.raises(InvalidInputError, match='dictionary'):
        CharucoBoard(6, 4, 0.02, dictionary='DICT_NONE')
    with pytest.raises(InvalidInputError, match='marker'):
        CharucoBoard(6, 4, 0.02, marker=0.02)
    with pytest.raises(InvalidInputError, match='needs 96 markers; DICT_4X4_50 has 50'):
        CharucoBoard(15, 11, 0.02, dictionary='DICT_4X4_50')
    with pytest.raises(InvalidInputError, match='board_type'):
        Checkerboard.from_dict({'cols': 6, 'rows': 4, 'square': 0.02, 'board_type': 'aruco'})


def test_ids_name_the_same_corners_under_a_180_degree_turn():
    image, h = _image()
    ids, uv = find_charuco(image, BOARD)
    assert len(ids) >= 12
    # ids, not precision, here: corners 25 px apart
    np.testing.assert_allclose(uv, _project(h, BOARD.points()[ids]), atol=0.5)
    turned = image[::-1, ::-1].copy()             # the board turned by 180 degrees
    ids2, uv2 = find_charuco(turned, BOARD)
    w, hgt = image.shape[1], image.shape[0]
    expected = np.array([w - 1, hgt - 1]) - _project(h, BOARD.points()[ids2])
    np.testing.assert_allclose(uv2, expected, atol=0.5)   # ids, not precision: corners 25 px apart
    # a symmetric checkerboard (cols + rows even) is the case a 180-degree flip hides in
    assert BOARD.symmetric


def test_light_field_detection_matches_by_id_and_keeps_partial_views():
    image, h = _image()
    stack = _stack(image)
    det = detect_corners(stack, BOARD)
    obs = det.observations
    centre = obs.ijuv[:, 0] ** 2 + obs.ijuv[:, 1] ** 2 == 0
    truth = _project(h, BOARD.points()[obs.point[centre]])
    assert np.sqrt(np.mean((obs.ijuv[centre, 2:] - truth) ** 2)) < 0.1
    # a moved view sees the corner moved by its view index (matched across views by id)
    side = (obs.ijuv[:, 0] == 1) & (obs.ijuv[:, 1] == 0)
    moved = _project(h, BOARD.points()[obs.point[side]]) + [0.4, 0.0]
    assert np.sqrt(np.mean((obs.ijuv[side, 2:] - moved) ** 2)) < 0.1
    # half the board cut off: the corners shown still count, under their own ids
    cut = image.copy()
    cut[:, 200:] = 1.0
    det2 = detect_corners(_stack(cut), BOARD, options=CornerOptions(min_corners=6))
    seen = np.unique(det2.observations.point)
    assert 6 <= len(seen) < BOARD.n_points
    xy = _project(h, BOARD.points()[seen])
    assert np.all(xy[:, 0] < 200)


def test_too_few_corners_refused():
    image, _ = _image()
    cut = image.copy()
    cut[:, 130:] = 1.0
    with pytest.raises(DetectionError, match='need 12'):
        detect_corners(_stack(cut), BOARD, options=CornerOptions(min_corners=12))


def test_bad_input_refused_with_the_reason():
    image, _ = _image()
    other_dict = CharucoBoard(6, 4, 0.02, dictionary='DICT_5X5_50')
    with pytest.raises(BoardMismatchError, match=r'DICT_5X5_50.*DICT_4X4'):
        find_charuco(image, other_dict)
    bigger = CharucoBoard(7, 6, 0.02, dictionary='DICT_4X4_50')     # another size
    with pytest.raises(BoardMismatchError, match='not where|not on'):
        find_charuco(_image(bigger)[0], BOARD)
    two = np.hstack([image, image])                                  # two boards in one view
    with pytest.raises(BoardMismatchError, match='seen twice'):
        find_charuco(two, BOARD)
    # a ChArUco board given to a checkerboard configuration: the error says so
    with pytest.raises(DetectionError, match='ArUco markers'):
        detect_corners(_stack(image), Checkerboard(6, 4, 0.02))


def test_rendered_board_shades_its_texture():
    from lf_mpc_calib.simulation.optics import CharucoBoard as Rendered
    b = Rendered(6, 4, 0.02, dictionary='DICT_4X4_50')
    tex = b.cv_board().generateImage((7 * 50, 5 * 50), marginSize=0) > 127
    x, y = np.meshgrid(np.arange(7 * 50) + 0.5, np.arange(5 * 50) + 0.5)
    shade = b.shade(x.ravel() / 50 * 0.02 - 0.02, y.ravel() / 50 * 0.02 - 0.02)
    light = (shade.reshape(x.shape) == b.light)
    assert np.mean(light == tex) > 0.97      # the marker bits resampled at another size
    assert b.shade(np.array([-0.03]), np.array([0.0]))[0] == b.light     # the margin
    assert b.shade(np.array([1.0]), np.array([1.0]))[0] == b.background
    assert Checkerboard.from_dict(b.to_dict()).marker == b.marker


def test_focused_partial_board_corners_carry_their_ids():
    from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
    from lf_mpc_calib.lenslet.estimate import estimate_grid
    from lf_mpc_calib.simulation.focused_observations import focused_observations
    from lf_mpc_calib.simulation.focused_raw import board_pose, match_truth
    from lf_mpc_calib.simulation.optics import CharucoBoard as Rendered, preset
    from lf_mpc_calib.simulation.render import render_raw, render_white
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0)
    det = MicroImageCornerDetector(render_white(cam, samples=16),
                                   estimate_grid(render_white(cam, samples=4)))
    h = cam.field_of_view(cam.scene_distance)[1]
    board = Rendered(8, 5, 0.55 * h / 7, dictionary='DICT_4X4_50')
    # the board's centre off by half the view's height: a third of it out of view, turned
    # by 180 degrees (numbered from the markers, not from where the grid starts)
    rv, tv = board_pose(cam, board, cam.scene_distance, (10.0, -8.0, 183.0),
                        (-0.5 * h, 0.35 * h))
    raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
    truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
    found = det.detect(raw, board)
    err, unmatched = match_truth(found.observations, truth)
    seen = np.unique(found.observations.point)
    assert unmatched == 0 and 6 <= len(seen) < board.n_points
    assert np.sqrt(np.mean(np.sum(err ** 2, axis=1))) < 0.4


def test_calibrate_raw_options_describe_a_charuco_board():
    from lf_mpc_calib.cli import build_parser
    from lf_mpc_calib.cli.calibrate_raw import board_from_args
    args = build_parser().parse_args(
        ['calibrate-raw', 'DIR', '--board', '6x5', '--square', '0.02', '--board-type',
         'charuco', '--dictionary', 'DICT_5X5_100', '--charuco-layout', 'legacy'])
    board = board_from_args(args)
    assert board.board_type == 'charuco' and board.dictionary == 'DICT_5X5_100'
    assert board.layout == 'legacy' and board.first_square == 'white'    # 6 square rows
    plain = build_parser().parse_args(['calibrate-raw', 'DIR', '--board', '6x4', '--square',
                                       '0.02'])
    assert board_from_args(plain).board_type == 'checkerboard'


def test_partial_pose_set_pushes_boards_out_into_the_corners():
    from lf_mpc_calib.simulation.dataset import capture_board
    from lf_mpc_calib.simulation.optics import CharucoBoard as Rendered, preset
    from lf_mpc_calib.simulation.partial_poses import out_of_view_share, partial_poses
    cam = preset('lytro', scale=0.3)
    base = capture_board(cam)
    board = Rendered(2 * base.cols + 1, 2 * base.rows + 1, base.square)   # twice the side
    rvecs, tvecs = partial_poses(cam, board, 6, rng=np.random.default_rng(0), base_board=base)
    w, h = cam.sensor.size
    quadrants = set()
    for rv, tv in zip(rvecs, tvecs):
        rmat, t = cam.pose_to_physical(rv, tv)
        assert 0.29 <= out_of_view_share(cam, board, rmat, t) <= 0.61
        centre = cam.project_chief((board.points().mean(0) @ rmat.T + t)[None])[0]
        quadrants.add((centre[0] > w / 2, centre[1] > h / 2))
    assert len(quadrants) == 4        # every image corner is reached
