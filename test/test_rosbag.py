"""Tests of lf_mpc_calib.io.rosbag: calibrate-raw from rosbag2 frames (sqlite3 and mcap)."""

import builtins

import numpy as np
import pytest

from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import read_image as read_file
from lf_mpc_calib.io.images import read_float_image as read_image
from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset
from lf_mpc_calib.io.rosbag import BagFrame, is_bag, load_bag_dataset

rosbags = pytest.importorskip('rosbags', reason='rosbag2 input needs the rosbags package')

TOPIC = '/camera/image_raw'
WHITE_TOPIC = '/camera/white_image'
BAD = 2          # index of the malformed message on TOPIC


def _image(ts, pixels, encoding, stamp_s, *, data=None):
    Image = ts.types['sensor_msgs/msg/Image']
    Header = ts.types['std_msgs/msg/Header']
    Time = ts.types['builtin_interfaces/msg/Time']
    pixels = np.ascontiguousarray(pixels)
    h, w = pixels.shape[:2]
    step = w * pixels.itemsize * (pixels.shape[2] if pixels.ndim == 3 else 1)
    raw = pixels.view(np.uint8).ravel() if data is None else data
    return Image(Header(Time(int(stamp_s), 0), 'camera_optical_frame'), h, w, encoding, 0, step,
                 raw)


def _write_bag(path, plugin, frames, *, white=None, encoding='mono8', bad_at=None,
               extra_string=False):
    """A rosbag2 of ``frames`` on TOPIC one second apart (and a malformed one at ``bad_at``)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import get_typestore, Stores
    ts = get_typestore(Stores.ROS2_KILTED)
    image_type = 'sensor_msgs/msg/Image'
    with Writer(path, version=9, storage_plugin=getattr(StoragePlugin, plugin)) as writer:
        conn = writer.add_connection(TOPIC, image_type, typestore=ts)
        t = 0
        if white is not None:
            wconn = writer.add_connection(WHITE_TOPIC, image_type, typestore=ts)
            writer.write(wconn, t, ts.serialize_cdr(_image(ts, white, encoding, 0), image_type))
        for k, pixels in enumerate(frames):
            if k == bad_at:
                # 'jpeg' is no raw encoding: the pipeline must skip it, naming the message.
                msg = _image(ts, pixels, 'jpeg', t // 10**9)
                writer.write(conn, t, ts.serialize_cdr(msg, image_type))
                t += 10**9
            msg = _image(ts, pixels, encoding, t // 10**9)
            writer.write(conn, t, ts.serialize_cdr(msg, image_type))
            t += 10**9
        if extra_string:
            sconn = writer.add_connection('/note', 'std_msgs/msg/String', typestore=ts)
            writer.write(sconn, t, ts.serialize_cdr(ts.types['std_msgs/msg/String']('hi'),
                                                    'std_msgs/msg/String'))
    return path


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
    # Lytro optics on a 0.3 crop (984 x 984 px, 8 bit), its default board, 6 poses (4 poses
    # leave this small crop's calibration ill-posed: k_i -> 0 measured).
    from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
    from lf_mpc_calib.simulation.optics import default_board, preset
    root = tmp_path_factory.mktemp('lytro_ds')
    # an ideal sensor: the bag is compared with the folder to the digit, and a bag carries no
    # dark frame (calibrate-raw --dark is for folders), which the folder's dark.png would be
    camera = preset('lytro', scale=0.3, sensor__response=None)
    board = default_board(camera)
    rv, tv = random_poses(camera, board, 6, rng=np.random.default_rng(3), max_tilt_deg=30.0)
    write_dataset(root, camera, board, rv, tv, seed=3, samples=2)
    return root


@pytest.fixture(scope='module')
def folder_run(folder):
    # this crop leaves the intrinsics several per cent uncertain (below): accepted anyway, the
    # test compares the bag path with the folder path
    return calibrate_raw(load_raw_dataset(folder), accept_uncertain=True)


@pytest.fixture(scope='module')
def mcap_bag(folder, tmp_path_factory):
    frames = [read_file(p) for p in sorted(folder.glob('frame_*.png'))]
    white = read_file(folder / 'white.png')
    path = tmp_path_factory.mktemp('bags') / 'session'
    _write_bag(path, 'MCAP', frames, white=white, bad_at=BAD)
    return path


def test_cli_calibrate_raw_from_mcap_matches_folder(folder, folder_run, mcap_bag, tmp_path,
                                                    capsys):
    board = folder_run.board
    out = tmp_path / 'bag_cal.yaml'
    mcap = next(mcap_bag.glob('*.mcap'))
    rc = main(['calibrate-raw', str(mcap), '--topic', TOPIC, '--board',
               f'{board.cols}x{board.rows}', '--square', repr(board.square), '-o', str(out),
               '--accept-uncertain'])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    # 7 messages: 6 frames and the malformed one, skipped with a warning naming it.
    assert '[7/7] session.mcap#6 (t=6000 ms):' in captured.out
    name = f'session.mcap#{BAD} (t={BAD * 1000} ms)'
    assert (f"warning: skipped {name}: {name} on {TOPIC}: unsupported image encoding 'jpeg'"
            in captured.err), captured.err
    assert f'white session.mcap#0 (t=0 ms) on {WHITE_TOPIC}, board' in captured.out
    cal = load_calibration(out)
    assert cal.num_poses == len(folder_run.pose_frames) == 6
    # The same pixels through the same code as the PNG folder: the same calibration (white
    # from the bag's white_image topic, the grid estimated from it).
    np.testing.assert_allclose(cal.model.to_vector(), folder_run.result.model.to_vector(),
                               rtol=1e-9)
    # and a sound one against the optics' ground truth. On this crop (views of ~90 px, 5 mm
    # squares, 2 rays per pixel, boards near the focus distance) k_i..k_v are several per cent
    # uncertain (the calibration is refused without accept_uncertain): they must lie within
    # 3 sigma of the truth (measured k_u 12 % off); a frame misread (wrong bytes, dropped or
    # swapped rows) gives pixels of RMS or no detection.
    assert cal.errors['rms_reprojection_px'] < 0.4
    truth = folder_run.truth
    m = cal.model
    for name in ('k_i', 'k_j', 'k_u', 'k_v'):
        error = abs(abs(getattr(m, name)) - abs(getattr(truth, name)))
        assert error < 3 * cal.stddev[name], (name, error / cal.stddev[name])


def test_load_bag_dataset_sqlite_frames_bit_exact_and_bayer(folder, tmp_path):
    rng = np.random.default_rng(8)
    frames = [rng.integers(0, 65535, (16, 20), endpoint=True).astype(np.uint16)
              for _ in range(3)]
    bag = _write_bag(tmp_path / 'bayer_bag', 'SQLITE3', frames, encoding='bayer_grbg16',
                     extra_string=True)
    assert is_bag(bag) and is_bag(next(bag.glob('*.db3'))) and not is_bag(folder)
    ds = load_bag_dataset(bag, topic=TOPIC, board=load_raw_dataset(folder).board,
                          white=folder / 'white.png')
    # Bayer pattern from the messages' encoding; frames in time order, read lazily.
    assert ds.demosaic == 'grbg' and [f.index for f in ds.frames] == [0, 1, 2]
    assert ds.frames[1].name == 'bayer_bag#1 (t=1000 ms)'
    for frame, pixels in zip(ds.frames, frames):
        assert np.array_equal(frame.load(), pixels)     # 16-bit round trip, bit-exact
        np.testing.assert_array_equal(read_image(frame), pixels.astype(np.float32) / 65535.0)
    # A topic that holds no images: every message is a frame that fails with its type.
    note = load_bag_dataset(bag, topic='/note', board=ds.board, white=folder / 'white.png')
    with pytest.raises(InvalidInputError, match='is a std_msgs/msg/String, expected a sensor'):
        read_image(note.frames[0])


def test_load_bag_dataset_bad_input(folder, mcap_bag, tmp_path, monkeypatch):
    board = load_raw_dataset(folder).board
    with pytest.raises(InvalidInputError, match=r"no topic '/nope'; its topics: "
                                                r'/camera/image_raw \(sensor_msgs/msg/Image\)'):
        load_bag_dataset(mcap_bag, topic='/nope', board=board)
    with pytest.raises(InvalidInputError, match='give the image topic'):
        load_raw_dataset(mcap_bag, board=board)
    with pytest.raises(InvalidInputError, match='give the board'):
        load_raw_dataset(mcap_bag, topic=TOPIC)
    with pytest.raises(InvalidInputError, match='neither a file nor a topic'):
        load_bag_dataset(mcap_bag, topic=TOPIC, board=board, white='/camera/other')
    # A grid for another image size is refused before anything is decoded.
    from lf_mpc_calib.lenslet.grid import LensletGrid
    grid = LensletGrid('hex', 9.9, 8.6, 0.0, (5.0, 5.0), (90, 100), (985, 984))
    with pytest.raises(InvalidInputError, match='for 985x984 px images but the white image '
                                                'is 984x984 px'):
        load_bag_dataset(mcap_bag, topic=TOPIC, board=board, grid=grid)
    frame = BagFrame(mcap_bag, TOPIC, 'sensor_msgs/msg/Image', 9, 123)
    with pytest.raises(InvalidInputError, match='no message on /camera/image_raw at t=123 ns'):
        frame.load()
    # Without the optional package: a clear message naming it.
    real_import = builtins.__import__

    def no_rosbags(name, *args, **kwargs):
        if name.startswith('rosbags'):
            raise ImportError(f'No module named {name!r}')
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', no_rosbags)
    with pytest.raises(InvalidInputError, match='needs the Python package rosbags'):
        load_bag_dataset(mcap_bag, topic=TOPIC, board=board)
