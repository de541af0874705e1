"""The planner with boards that count partly out of view (issue 42 #2): a ChArUco board's
suggestions may leave part of the board out of view, which takes fewer captures to the
target than whole-board poses of the same board, and plans for a board larger than the view,
which whole-board poses cannot place at all."""

import numpy as np
import pytest

from lf_mpc_calib.calibration.planning import PoseConstraints, PosePlanner
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.simulation.observations import (
    PAPER_IMAGE_SIZE, board_points, paper_camera, view_grid)

VIEWS = view_grid(3)


def planner(seed, board, min_corners):
    c = PoseConstraints(views=VIEWS, depth_range_m=(0.06, 0.12), image_size=PAPER_IMAGE_SIZE,
                        max_tilt_deg=30.0, min_corners=min_corners)
    return PosePlanner(paper_camera(), board, c, noise_px=0.3, target_k_pct=0.2,
                       target_pp_px=0.2, rng=np.random.default_rng(seed))


def captures_to_target(p, limit=60):
    """Suggestions followed until the target: (count, the rows of each)."""
    rows = []
    while not p.reached() and len(rows) < limit:
        s = p.suggest(n_candidates=40)
        rows.append(p.rows(s.rotation_vector, s.translation))
        p.add_capture(s.rotation_vector, s.translation)
    return len(rows), rows


def test_partial_views_reach_the_target_in_fewer_captures_than_whole_boards():
    # an 8 x 8 board of 7 mm squares just fits the view whole at these depths: measured
    # 32-33 captures to the target seen whole, 26-27 partly out of view (seeds 0, 1)
    board = board_points(8, 8, 7e-3)
    whole = [captures_to_target(planner(s, board, None))[0] for s in (0, 1)]
    part = [captures_to_target(planner(s, board, 6))[0] for s in (0, 1)]
    assert max(part) < 60 and max(whole) < 60, (whole, part)
    assert sum(part) <= 0.9 * sum(whole), (whole, part)


def test_a_board_larger_than_the_view_is_planned_partly_out_of_view():
    board = board_points(12, 12, 7e-3)      # 84 mm: never whole in the 3 x 3 views
    with pytest.raises(DegenerateConfigurationError, match='no pose satisfies'):
        planner(0, board, None).suggest(n_candidates=10)
    p = planner(0, board, 6)
    n, rows = captures_to_target(p)
    assert n < 60 and p.reached()
    for r in rows:
        counts = np.bincount(r.point, minlength=len(board))
        seen = np.flatnonzero(counts)
        # each pose partly out of view, with the corners it shows in two views or more
        assert 6 <= len(seen) < len(board) and counts[seen].min() >= 2, len(seen)


def test_partial_constraints_need_a_conventional_camera_and_four_corners():
    with pytest.raises(InvalidInputError, match='min_corners'):
        PoseConstraints(views=VIEWS, depth_range_m=(0.06, 0.12), image_size=PAPER_IMAGE_SIZE,
                        min_corners=3)
    with pytest.raises(InvalidInputError, match='min_corners'):
        PoseConstraints(views=VIEWS, depth_range_m=(0.06, 0.12), micro_image_radius=5.0,
                        min_corners=6)


def test_a_charuco_session_plans_partial_views_with_its_min_corners():
    from types import SimpleNamespace

    from lf_mpc_calib.camera.board import CharucoBoard, Checkerboard
    from lf_mpc_calib.features.corners import CornerOptions
    from lf_mpc_calib.pipeline.capture_planning import partial_view_corners
    charuco = CharucoBoard(6, 4, 0.02, dictionary='DICT_4X4_50')
    assert partial_view_corners(SimpleNamespace(board=charuco, corner_options=None)) == 6
    assert partial_view_corners(SimpleNamespace(
        board=charuco, corner_options=CornerOptions(min_corners=10))) == 10
    assert partial_view_corners(SimpleNamespace(board=Checkerboard(6, 4, 0.02),
                                                corner_options=None)) is None
