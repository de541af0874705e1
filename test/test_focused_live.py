"""The cached live renderer of focused frames against today's path (MicroImageCornerDetector's
normalise / estimate_w / render) on small renders."""

import numpy as np
import pytest

from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.measurement.focused_live import LiveCenterRenderer
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


@pytest.fixture(scope='module')
def scene():
    cam = preset('focused-keplerian', scale=0.4, sensor__noise=0.0)
    det = MicroImageCornerDetector(render_white(cam, samples=4))
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    raws = []
    for k in range(2):
        rv, tv = board_pose(cam, board, (1.25 + 0.003 * k) * cam.scene_distance,
                            (12.0, -9.0, 4.0))
        raws.append(render_raw(cam, board, rv, tv, samples=4, noise=0.0).astype(np.float32))
    return det, raws


def test_rendered_image_is_todays(scene):
    det, raws = scene
    fast = LiveCenterRenderer(det)
    for raw in raws:
        norm = det.normalise(raw)
        w = det.estimate_w(norm)
        ref = np.clip(det.render(norm, w)[0], 0, 1)
        img, w_fast = fast.render(raw)
        assert abs(w_fast - w) <= 0.0026          # w on the search's own 0.005 grid
        assert img.shape == ref.shape
        # the same maps; the normalising scale from a subsample of the lit pixels
        assert np.abs(img - ref).mean() < 2e-3 and np.abs(img - ref).max() < 0.02
    # the second frame barely moved: its w and maps came from the cache
    assert fast.w_estimates == 1 and len(fast._maps) == 1


def test_w_estimated_again_when_the_frame_changes(scene):
    det, raws = scene
    fast = LiveCenterRenderer(det, w_every=3)
    for _ in range(4):
        fast.render(raws[0])
    # the first frame searched, the 4th (w_every) walked from the cached w
    assert (fast.w_estimates, fast.w_refines) == (1, 1)
    # a uniform frame changed the thumbnail: w searched again, and refused (no texture)
    with pytest.raises(DetectionError, match='no texture'):
        fast.render(np.full_like(raws[0], raws[0].mean()))


def test_frame_of_another_size_is_refused(scene):
    det, raws = scene
    with pytest.raises(InvalidInputError, match='the white and calibration are'):
        LiveCenterRenderer(det).render(raws[0][:-4])
