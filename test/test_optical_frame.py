"""The optical frame of the outputs (lf_mpc_calib.camera.optical_frame) and the calibration
file's poses and mount in it: a focused camera's board in front of the camera at z > 0, the
distance from the main lens the simulator's optics give; conventional cameras unchanged."""

import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera.optical_frame import OpticalFrame, optical_origin
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.calibration_file import (CalibrationFile, OPTICAL_FRAME_VERSION, dumps,
                                              loads)
from lf_mpc_calib.simulation.dataset import ground_truth_file
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import default_board, preset


def _focused_truth(name, distances):
    """(camera, board, CalibrationFile of the truth, physical board points per pose)."""
    cam = preset(name, scale=0.3)
    board = default_board(cam)
    poses = [board_pose(cam, board, d, (10.0 * n, -8.0, 3.0), offset=(0.01 * n, -0.01))
             for n, d in enumerate(distances)]
    rv = np.array([p[0] for p in poses])
    tv = np.array([p[1] for p in poses])
    physical = []
    for r, t in poses:
        rot, trans = cam.pose_to_physical(r, t)
        physical.append(board.points() @ rot.T + trans)
    return cam, board, ground_truth_file(cam, rv, tv), physical


@pytest.mark.parametrize('name', ['focused-galilean', 'focused-keplerian'])
def test_optical_frame_of_the_truth_is_the_optics_frame(name):
    """The truth model's optical frame is the simulator's physical frame (main lens at the
    origin, on its axis): boards nearer and farther than the plane conjugate to the MLA both
    at z > 0, their z the distance from the main lens."""
    cam = preset(name, scale=0.3)
    zf = cam.main_lens.focus_distance
    cam, board, truth, physical = _focused_truth(name, [0.6 * cam.scene_distance,
                                                        1.3 * cam.scene_distance])
    frame = truth.optical_frame
    # 1/k_3 in front of the main lens: the MPC origin is at the conjugate plane
    assert frame.origin[2] == pytest.approx(-zf, rel=1e-9)
    for n, (r, t) in enumerate(zip(truth.rotation_vectors, truth.translations)):
        mpc = board.points() @ Rotation.from_rotvec(r).as_matrix().T + t
        opt = frame.points(mpc)
        assert np.all(opt[:, 2] > 0)
        np.testing.assert_allclose(opt, physical[n], atol=1e-12)
    rv, tv = truth.optical_poses()
    np.testing.assert_allclose(rv, truth.rotation_vectors)
    np.testing.assert_allclose(tv[:, 2], [p[0, 2] for p in physical], atol=1e-12)


def test_optical_frame_conventional_is_the_model_frame():
    cam = preset('lytro', scale=0.3)
    model = cam.ground_truth_model()
    frame = OpticalFrame.of(model, 'conventional')
    assert frame.is_identity
    pts = np.random.default_rng(0).normal(size=(5, 3))
    np.testing.assert_array_equal(frame.points(pts), pts)
    with pytest.raises(InvalidInputError, match="camera_type must be 'conventional' or "
                                                "'focused', got 'plenoptic'"):
        optical_origin(model, 'plenoptic')


def test_optical_frame_mount_keeps_points_in_the_parent_frame():
    """base -> tool * mount * point: the same base point with the MPC-frame mount and point as
    with the optical-frame mount and point."""
    rng = np.random.default_rng(3)
    frame = OpticalFrame(np.array([0.02, -0.015, -0.69]))
    w, t = rng.normal(size=3), rng.normal(size=3)
    point = rng.normal(size=(4, 3))
    r = Rotation.from_rotvec(w).as_matrix()
    w2, t2 = frame.mount(w, t)
    np.testing.assert_allclose(point @ r.T + t, frame.points(point) @ r.T + t2, atol=1e-14)
    back = frame.mount(w2, t2, to_model=True)
    np.testing.assert_allclose(back[1], t, atol=1e-15)
    # (P, 3) at once
    ws, ts = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    _, many = frame.mount(ws, ts)
    np.testing.assert_allclose(many[1], frame.mount(ws[1], ts[1])[1], atol=1e-15)


def test_optical_frame_depths_are_the_points_z():
    """Depths (a board-centre Z, a depth range, focus bands) move as the points' z does, and
    back; a number stays a number."""
    frame = OpticalFrame(np.array([0.02, -0.015, -0.69]))
    bands = np.array([[-0.2, -0.1], [0.05, 0.3]])
    np.testing.assert_allclose(frame.depths(bands), bands + 0.69, atol=1e-15)
    np.testing.assert_allclose(frame.depths(frame.depths(bands), to_model=True), bands,
                               atol=1e-15)
    z = frame.depths(-0.24)
    assert isinstance(z, float) and z == pytest.approx(
        frame.points(np.array([0.0, 0.0, -0.24]))[2], abs=1e-15)


def _with_mount(cal):
    from dataclasses import replace

    from lf_mpc_calib.calibration.hand_eye import hand_eye_dict
    mount = (np.array([0.1, -0.2, 0.3]), np.array([0.01, 0.02, 0.05]))
    return replace(cal, hand_eye=hand_eye_dict(
        'eye-in-hand', mount, parent_frame='tool0', child_frame='camera_optical_frame'))


def test_focused_calibration_file_holds_the_optical_frame():
    """Written: format_version 3, every board at z > 0 (the distance from the main lens), the
    mount parent -> optical frame; read back: the same calibration in memory (MPC frame)."""
    cam, board, truth, physical = _focused_truth('focused-galilean',
                                                 [0.6 * preset('focused-galilean',
                                                               scale=0.3).scene_distance])
    truth = _with_mount(truth)
    d = yaml.safe_load(dumps(truth))
    assert d['format_version'] == OPTICAL_FRAME_VERSION
    z = [p['translation_m'][2] for p in d['poses']]
    assert truth.translations[0, 2] < 0 < z[0]          # nearer than the conjugate plane
    assert z[0] == pytest.approx(physical[0][0, 2], abs=1e-12)
    frame = truth.optical_frame
    r = Rotation.from_rotvec(truth.hand_eye['rotation_vector']).as_matrix()
    mpc_point = np.array([0.01, 0.0, -0.1])
    np.testing.assert_allclose(
        r @ frame.points(mpc_point) + d['hand_eye']['translation_m'],
        r @ mpc_point + truth.hand_eye['translation_m'], atol=1e-14)
    back = loads(dumps(truth))
    np.testing.assert_allclose(back.translations, truth.translations, atol=1e-15)
    np.testing.assert_allclose(back.hand_eye['translation_m'], truth.hand_eye['translation_m'],
                               atol=1e-15)


def test_focused_calibration_file_of_version_1_keeps_its_meaning():
    """A focused file written before (version 1: poses and mount in the MPC frame) loads as
    it did, and saved again it says the same in the optical frame (version 3)."""
    _, _, truth, _ = _focused_truth('focused-keplerian',
                                    [1.3 * preset('focused-keplerian', scale=0.3).scene_distance])
    truth = _with_mount(truth)
    old = yaml.safe_load(dumps(truth))
    old['format_version'] = 1
    old['poses'] = [{'rotation_vector': [float(x) for x in r],
                     'translation_m': [float(x) for x in t]}
                    for r, t in zip(truth.rotation_vectors, truth.translations)]
    old['hand_eye'] = truth.hand_eye
    cal = loads(yaml.safe_dump(old))
    np.testing.assert_allclose(cal.translations, truth.translations, atol=1e-15)
    np.testing.assert_allclose(cal.hand_eye['translation_m'], truth.hand_eye['translation_m'],
                               atol=1e-15)
    assert yaml.safe_load(dumps(cal)) == yaml.safe_load(dumps(truth)) | {
        'software': yaml.safe_load(dumps(cal))['software']}


def test_conventional_calibration_file_is_unchanged():
    cam = preset('lytro', scale=0.3)
    board = default_board(cam)
    rv = np.array([[0.1, -0.2, 0.05]])
    tv = np.array([[0.01, -0.02, 0.3]])
    truth = ground_truth_file(cam, rv, tv)
    d = yaml.safe_load(dumps(truth))
    assert d['format_version'] == 1
    np.testing.assert_array_equal(d['poses'][0]['translation_m'], tv[0])
    assert isinstance(loads(dumps(truth)), CalibrationFile) and board.n_points > 0


def test_verify_gives_a_focused_board_its_distance_from_the_main_lens():
    """verify's "corners at N mm" (and its % of distance) for a Galilean board nearer than
    the plane conjugate to the MLA: the distance from the main lens the optics give, not the
    distance from that plane."""
    from lf_mpc_calib.calibration.verification import verify_observations
    from lf_mpc_calib.camera.model import PARAMETER_NAMES
    from lf_mpc_calib.simulation.focused_observations import focused_observations
    cam = preset('focused-galilean', scale=0.3)
    cam, board, truth, physical = _focused_truth('focused-galilean', [0.6 * cam.scene_distance])
    obs = focused_observations(cam, board, truth.rotation_vectors, truth.translations,
                               noise_px=0.05, rng=np.random.default_rng(4),
                               radius_fraction=0.8)
    v = verify_observations(obs, truth.model, noise_px=0.05,
                            stddev={n: 0.0 for n in PARAMETER_NAMES}, camera_type='focused')
    (check,) = v.poses
    expected = np.linalg.norm(physical[0][np.unique(obs.point)].mean(axis=0))
    # the triangulated centroid: within 1 % of the distance (the decode node's 2 % halved)
    assert check.distance_m == pytest.approx(expected, rel=0.01)
    assert f'corners at {check.distance_m * 1e3:.0f} mm' in check.line()
