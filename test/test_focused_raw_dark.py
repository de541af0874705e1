"""A multi-focus data set with a dark frame: the detection repeated once the lens types are
told (pipeline.focused_raw) reads each frame less its dark frame, as the first one did.

It read the frame files as they are (black level and hot pixels in) against the dark-subtracted
white: on the realistic focused-multifocus preset the corners near the micro-images' rims moved
outwards by about 0.03 px and the principal point by 0.9 px (k 1 % off)."""

from pathlib import Path

import numpy as np
import pytest

from lf_mpc_calib.io.images import read_float_image
from lf_mpc_calib.pipeline.focused_raw import calibrate_focused_raw, focused_detector
from lf_mpc_calib.pipeline.offline import load_raw_dataset
from lf_mpc_calib.simulation.dataset import capture_board, capture_poses, write_dataset
from lf_mpc_calib.simulation.focused_raw import lens_types_of
from lf_mpc_calib.simulation.optics import preset

pytestmark = pytest.mark.cost(40)   # s on the CI machine: scheduled early (conftest)


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    """A small realistic multi-focus data set (black level, hot pixels, dark frame) and its
    calibration with the lens types told from the frames."""
    cam = preset('focused-multifocus', scale=0.35)
    assert cam.sensor.response is not None and cam.sensor.response.black_level > 0
    board = capture_board(cam)
    rv, tv = capture_poses(cam, board, 4, rng=np.random.default_rng(1))
    root = tmp_path_factory.mktemp('multifocus_dark')
    write_dataset(root, cam, board, rv, tv, seed=1, samples=8)
    ds = load_raw_dataset(root)
    assert ds.camera.mla.n_types == 3
    return ds, calibrate_focused_raw(ds, n_types=3, accept_uncertain=True)


def test_typed_detection_reads_the_frames_less_their_dark(run):
    ds, result = run
    assert result.lens_type_source == 'inferred' and len(result.detections) >= 3
    # a detector that knows the types (the run's labels: the true types relabelled)
    obs = result.observations
    true = lens_types_of(ds.camera, obs.ijuv[:, :2])
    told = [np.bincount(true[obs.lens_type == t], minlength=3).argmax() for t in range(3)]
    assert sorted(told) == [0, 1, 2]
    label_of_true = np.argsort(told)
    det = focused_detector(ds)               # as the run made it: the same grid, radius
    np.testing.assert_array_equal(det.centres, result.grid.centres())
    det.lens_types = label_of_true[lens_types_of(ds.camera, det.centres)]
    rows = []
    frames = {Path(f): f for f in ds.frames}
    for k, (path, found) in enumerate(result.detections):
        frame = frames[path]
        raw, as_file = read_float_image(frame), read_float_image(path)
        assert np.mean(as_file - raw) > 0.03     # the file holds the black level
        again = det.detect(raw, ds.board, pose=k, previous=found).observations
        np.testing.assert_array_equal(again.point, found.observations.point)
        np.testing.assert_allclose(again.ijuv, found.observations.ijuv, atol=1e-9)
        np.testing.assert_array_equal(again.lens_type, found.observations.lens_type)
        rows.append(len(again))
    assert sum(rows) == len(obs)
