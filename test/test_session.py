"""Tests of lf_mpc_calib.pipeline.session: capture, calibrate, save on small rendered frames."""

import numpy as np
import pytest
import yaml

from lf_mpc_calib.calibration.closed_form import aligned_truth
from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.io.images import as_float_image
from lf_mpc_calib.pipeline.session import CalibrationSession

POSES = 6


@pytest.fixture(scope='module')
def scene():
    """A 0.3-crop Lytro camera (984 px square), its white image and 6 rendered frames."""
    from lf_mpc_calib.simulation.dataset import random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(3)
    rvecs, tvecs = random_poses(camera, board, POSES, rng=rng)
    white = quantize(render_white(camera), 8)
    frames = [quantize(render_raw(camera, board, r, t, rng=rng), 8)
              for r, t in zip(rvecs, tvecs)]
    return camera, board, white, frames, rvecs, tvecs


@pytest.fixture(scope='module')
def calibrated(scene):
    camera, board, white, frames, _, _ = scene
    session = CalibrationSession(board, white=white)
    reports = [session.capture(f) for f in frames]
    session.calibrate()
    return session, reports


def test_as_float_image_scales_integer_types():
    img = as_float_image(np.array([[0, 255]], np.uint8))
    assert img.dtype == np.float32 and img[0, 1] == 1.0  # uint8 full scale -> 1
    assert as_float_image(np.array([[65535]], np.uint16))[0, 0] == 1.0
    with pytest.raises(InvalidInputError, match='must be uint8, uint16 or float'):
        as_float_image(np.array([[1]], np.int32))
    with pytest.raises(InvalidInputError, match=r'\(H, W\)'):
        as_float_image(np.zeros((0, 3)))


def test_session_capture_without_white_raises(scene):
    session = CalibrationSession(scene[1])
    with pytest.raises(InvalidInputError, match='no white image'):
        session.capture(scene[3][0])


def test_session_rejects_bad_options(scene):
    with pytest.raises(InvalidInputError, match='views must be two odd'):
        CalibrationSession(scene[1], views=(8, 9))
    with pytest.raises(InvalidInputError, match='min_poses'):
        CalibrationSession(scene[1], min_poses=1)
    with pytest.raises(InvalidInputError, match="expected 'conventional' or 'focused'"):
        CalibrationSession(scene[1], camera_type='plenoptic3')


def test_session_capture_reports_corners(calibrated, scene):
    session, reports = calibrated
    board = scene[1]
    assert all(r.accepted for r in reports)
    assert [r.pose for r in reports] == list(range(POSES))
    for r in reports:
        # every inner corner is in view (random_poses keeps the board inside the image)
        assert r.corners_found == r.corners_total == board.cols * board.rows
        assert r.corners_per_view.sum() == r.observations
        assert r.views_used >= 5 and 'corners in' in r.summary()


def test_session_calibrate_recovers_ground_truth(calibrated, scene):
    camera, _, _, _, rvecs, tvecs = scene
    session, _ = calibrated
    result = session.result
    truth = camera.ground_truth_model(session.grid)
    truth, _, _ = aligned_truth(truth, result.model, rotation_matrix(rvecs), tvecs)
    # rendered 8-bit frames: corners to ~0.05 px, so the reprojection RMS stays well under 1
    assert result.rms_reprojection_px < 0.5
    # 6 poses on a 0.3 crop (a narrow field of view, 6 x 6 corners) constrain the model
    # loosely: measured k_i, k_u within 0.2 %, k_j 4.9 %, k_v 1.3 % here (4-5 poses: up to
    # 17 %), so 10 % on the focal terms; the principal point is left out (30 % on v_0)
    for name in ('k_i', 'k_j', 'k_u', 'k_v'):
        est, true = getattr(result.model, name), getattr(truth, name)
        assert abs(est - true) < 0.10 * abs(true), name
    cal = session.calibration_file('cam')
    assert cal.frames['optical'] == 'cam_optical_frame'
    assert cal.num_poses == POSES and cal.image_size == session.view_size


def test_session_rejected_frame_keeps_earlier_captures(scene):
    camera, board, white, frames, _, _ = scene
    session = CalibrationSession(board, white=white, min_poses=2)
    assert session.capture(frames[0]).accepted
    blank = np.full_like(frames[0], 40)
    report = session.capture(blank)
    assert not report.accepted and report.pose is None and report.reason
    assert 'rejected' in report.summary()
    assert session.num_poses == 1 and session.rejected == 1
    with pytest.raises(DegenerateConfigurationError,
                       match='at least 2 captured poses showing the board, got 1'):
        session.calibrate()
    with pytest.raises(InvalidInputError, match='white image is'):
        session.capture(frames[0][:100, :100])
    assert session.num_poses == 1  # a malformed frame does not disturb the session
    other = np.uint16 if frames[0].dtype == np.uint8 else np.uint8
    with pytest.raises(InvalidInputError, match=r'frame is \d+-bit .* the white image and the '
                       r'frames captured so far are \d+-bit'):
        session.capture(frames[1].astype(other))
    assert session.num_poses == 1 and session.rejected == 1
    session.reset()
    assert session.num_poses == 0 and session.result is None and session.ready
    with pytest.raises(InvalidInputError, match='not calibrated yet'):
        session.calibration_file()


def test_session_refuses_a_refinement_that_did_not_converge_and_keeps_the_captures(calibrated):
    from lf_mpc_calib.errors import ConvergenceError
    session, _ = calibrated
    options = session.calibrate_options
    try:
        session.calibrate_options = {'max_iterations': 2}
        with pytest.raises(ConvergenceError, match='did not converge after 2 iterations'):
            session.calibrate()
        assert session.result is None and session.num_poses == POSES
    finally:   # the module's calibrated session as it was
        session.calibrate_options = options
        assert session.calibrate().converged


def test_session_save_round_trips_through_calibrate_raw(calibrated, tmp_path):
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset
    session, _ = calibrated
    paths = session.save(tmp_path, 'lf_camera')
    names = {p.name for p in paths}
    assert {'lf_camera.yaml', 'lf_camera_observations.csv', 'white.png', 'manifest.yaml',
            'frame_000.png'} <= names
    saved = tmp_path / 'latest'                 # the new folder of this save
    assert {p.parent for p in paths} == {saved.resolve()}
    manifest = yaml.safe_load((saved / 'manifest.yaml').read_text())
    assert len(manifest['frames']) == POSES
    assert sorted(manifest['sha256']) == sorted(names - {'manifest.yaml'})
    cal = load_calibration(saved / 'lf_camera.yaml')
    np.testing.assert_allclose(cal.model.to_vector(), session.result.model.to_vector(),
                               rtol=1e-9)  # the YAML holds full precision
    # camera_info/lf_camera.yaml in camera_calibration's layout: the central view's pinhole,
    # K = [1/k_u, 0, c_x; 0, 1/k_v, c_y; 0 0 1] (computed here from the saved model)
    info = yaml.safe_load((saved / 'camera_info' / 'lf_camera.yaml').read_text())
    m = cal.model
    k = np.array(info['camera_matrix']['data']).reshape(3, 3)
    np.testing.assert_allclose(k, [[1 / m.k_u, 0, m.principal_point[0]],
                                   [0, 1 / m.k_v, m.principal_point[1]], [0, 0, 1]])
    assert (info['image_width'], info['image_height']) == session.view_size
    assert info['distortion_model'] == 'plumb_bob' and info['camera_name'] == 'lf_camera'
    assert info['projection_matrix']['rows'] == 3 and info['projection_matrix']['cols'] == 4
    # offline re-calibration from the saved frames gives the same model (same decoder,
    # detector and frames; only float summation order may differ)
    offline = calibrate_raw(load_raw_dataset(tmp_path), views=session.views,
                            accept_uncertain=True)
    np.testing.assert_allclose(offline.result.model.to_vector(),
                               session.result.model.to_vector(), rtol=1e-6, atol=1e-12)


def test_session_save_without_captures_raises(scene, tmp_path):
    session = CalibrationSession(scene[1], white=scene[2])
    with pytest.raises(InvalidInputError, match='nothing to save'):
        session.save(tmp_path)


def test_session_refused_white_leaves_the_session_unchanged(scene):
    """Fuzz issue 13 #5.1: a wrong white image once emptied the captured poses."""
    from lf_mpc_calib.errors import DetectionError, LFCalibError
    camera, board, white, frames, _, _ = scene
    session = CalibrationSession(board, white=white, min_poses=2)
    assert all(session.capture(f).accepted for f in frames[:2])
    result = session.calibrate()
    before = (session.white, session.grid, session.decoder, list(session.frames),
              list(session.detections), session.result)
    half = white[::2, ::2]
    with pytest.raises(InvalidInputError,
                       match=r'white image is \d+x\d+ px but the 2 captured frames are'):
        session.set_white(half)
    with pytest.raises(LFCalibError):           # not a white image: no lenslet grid in it
        session.set_white(np.full_like(white, 200))
    with pytest.raises(DetectionError, match='not a flat field'):
        session.set_white(frames[0])            # a raw frame is not the camera's white
    after = (session.white, session.grid, session.decoder, list(session.frames),
             list(session.detections), session.result)
    assert all(a is b for a, b in zip(before[:3], after[:3]))
    assert [a is b for a, b in zip(before[3], after[3])] == [True, True]
    assert [a is b for a, b in zip(before[4], after[4])] == [True, True]
    assert after[5] is result and session.num_poses == 2
    # the right white again: poses kept, detected again, calibration redone on demand
    assert session.set_white(white) is session.grid and session.num_poses == 2
    assert session.result is None
    np.testing.assert_allclose(session.calibrate().model.to_vector(),
                               result.model.to_vector(), rtol=1e-12)


def test_session_refuses_a_repeated_pose(scene):
    """Fuzz issue 13 #5: six identical poses were captured without a word."""
    camera, board, white, frames, _, _ = scene
    session = CalibrationSession(board, white=white, min_poses=2)
    assert session.capture(frames[0]).accepted
    report = session.capture(frames[0].copy())
    assert not report.accepted and 'has not moved since pose 0' in report.reason
    assert session.num_poses == 1 and session.rejected == 1
    assert session.capture(frames[1]).accepted


def test_session_save_is_atomic_and_never_touches_earlier_saves(scene, tmp_path, monkeypatch):
    """Fuzz issue 13 #5.2: a save cut off once left new and old files mixed under one
    manifest, and calibrate-raw calibrated 'five poses' from two sessions."""
    from lf_mpc_calib.io import images
    from lf_mpc_calib.pipeline.offline import load_raw_dataset
    camera, board, white, frames, _, _ = scene
    first = CalibrationSession(board, white=white, min_poses=2)
    for f in frames[:3]:
        assert first.capture(f).accepted
    first_dir = first.save(tmp_path, 'cam')[-1].parent
    before = {p.name: p.read_bytes() for p in first_dir.iterdir()}
    assert (tmp_path / 'latest').resolve() == first_dir.resolve()

    second = CalibrationSession(board, white=white, min_poses=2)
    for f in frames[3:5]:
        assert second.capture(f).accepted
    calls = []

    def dies_on_the_second_frame(path, image):
        calls.append(path)
        if len(calls) == 3:                     # white, frame 0, then the "kill"
            raise OSError(28, 'No space left on device')
        return real(path, image)

    real = images.write_image
    monkeypatch.setattr(images, 'write_image', dies_on_the_second_frame)
    with pytest.raises(OSError, match='No space'):
        second.save(tmp_path, 'cam')
    monkeypatch.setattr(images, 'write_image', real)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(['latest', first_dir.name])
    assert {p.name: p.read_bytes() for p in first_dir.iterdir()} == before
    assert len(load_raw_dataset(tmp_path).frames) == 3   # 'latest': still the first save

    second_dir = second.save(tmp_path, 'cam')[-1].parent
    assert second_dir != first_dir and (tmp_path / 'latest').resolve() == second_dir.resolve()
    assert len(load_raw_dataset(tmp_path).frames) == 2
    assert len(load_raw_dataset(first_dir).frames) == 3


def test_calibrate_raw_refuses_a_folder_not_matching_its_manifest(scene, tmp_path):
    import shutil
    from lf_mpc_calib.pipeline.offline import load_raw_dataset
    camera, board, white, frames, _, _ = scene
    session = CalibrationSession(board, white=white, min_poses=2)
    for f in frames[:2]:
        assert session.capture(f).accepted
    saved = session.save(tmp_path / 'out', 'cam')[-1].parent

    def copy(name):
        folder = tmp_path / name
        shutil.copytree(saved, folder)
        return folder

    changed = copy('changed')
    shutil.copy(changed / 'frame_000.png', changed / 'frame_001.png')
    with pytest.raises(InvalidInputError,
                       match=r'do not match manifest.*frame_001.png \(changed\)'):
        load_raw_dataset(changed)
    extra = copy('extra')
    shutil.copy(extra / 'frame_000.png', extra / 'frame_002.png')
    with pytest.raises(InvalidInputError, match='not in the manifest: frame_002.png'):
        load_raw_dataset(extra)
    missing = copy('missing')
    (missing / 'frame_001.png').unlink()
    with pytest.raises(InvalidInputError, match='frame_001.png'):
        load_raw_dataset(missing)
    truncated = copy('truncated')
    text = (truncated / 'manifest.yaml').read_text()
    (truncated / 'manifest.yaml').write_text(text[:len(text) // 2] + '\n  - [')
    with pytest.raises(InvalidInputError, match='manifest .*: not valid YAML'):
        load_raw_dataset(truncated)
    binary = copy('binary')
    (binary / 'manifest.yaml').write_bytes(bytes(range(256)))
    with pytest.raises(InvalidInputError, match='manifest .*: not UTF-8 text'):
        load_raw_dataset(binary)


def test_session_on_an_arm_guides_solves_and_saves_the_mount(scene, tmp_path):
    from lf_mpc_calib.camera import transforms
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.pipeline.hand_eye import robot_poses_for_dataset
    from lf_mpc_calib.simulation.arm import default_arm
    camera, board, white, frames, rvecs, tvecs = scene
    arm = default_arm('eye-in-hand')
    robot = arm.robot_poses(rvecs, tvecs)
    session = CalibrationSession(board, white=white)
    with pytest.raises(InvalidInputError, match='needs a base and a tool frame'):
        session.set_arm('eye-in-hand', '', 'tool0')
    session.set_arm('eye-in-hand', 'base_link', 'tool0')
    guides = []
    for k, f in enumerate(frames):
        assert session.capture(f, robot_pose=(robot[0][k], robot[1][k])).accepted
        guides.append(session.hand_eye_guidance())
    assert not guides[1].determined and 'capture 1 more' in guides[1].message
    assert guides[-1].determined and guides[-1].n_captures == POSES
    with pytest.raises(InvalidInputError, match='needs a calibration'):
        session.solve_hand_eye()
    session.calibrate()
    he = session.solve_hand_eye()
    # the intrinsics are refined jointly with the mount, and that joint calibration is the
    # published one: the mount refers to its optical frame
    published = session.published_result
    assert published is he.extras['joint_calibration'] and published is not session.result
    np.testing.assert_array_equal(published.model.to_vector(), he.model.to_vector())
    truth = arm.in_calibrated_frame(camera.ground_truth_model(session.grid),
                                    published.model).mount
    err_deg, err_t = transforms.difference(he.mount, truth)
    print(f'mount error {1e3 * np.linalg.norm(err_t):.3f} mm, {err_deg[0]:.4f} deg; '
          f'{he.extras["intrinsics_shift"].summary()}')
    # with the intrinsics held at the camera-only calibration's the mount inherited its depth
    # scale error (6 random poses at one distance: 13 mm along the optical axis, 0.2 deg)
    assert np.linalg.norm(err_t) < 2e-3 and err_deg[0] < 0.5, (err_t, err_deg)
    assert he.to_dict(base_frame='b', tool_frame='t', optical_frame='o')['errors'][
        'intrinsics'] == 'joint'
    session.save(tmp_path, 'lf_camera')
    cal = load_calibration(tmp_path / 'latest' / 'lf_camera.yaml')
    assert cal.hand_eye['parent_frame'] == 'tool0'
    assert cal.hand_eye['child_frame'] == 'lf_camera_optical_frame'
    np.testing.assert_allclose(cal.hand_eye['translation_m'], he.mount[1], atol=1e-12)
    np.testing.assert_allclose(cal.model.to_vector(), he.model.to_vector(), rtol=1e-12)
    saved = robot_poses_for_dataset(tmp_path / 'latest')
    assert saved.setup == 'eye-in-hand' and saved.base_frame == 'base_link'
    assert saved.frames == tuple(f'frame_{k:03d}.png' for k in range(POSES))
    np.testing.assert_allclose(saved.rotation_vectors, robot[0], atol=1e-12)
    session.reset()
    assert session.robot_poses == [] and session.hand_eye is None
