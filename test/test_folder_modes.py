"""
Folders written whole and renamed into place (a ~/save, a capture) get
the mode the umask gives, like any folder ``mkdir`` makes: ``tempfile.mkdtemp`` made them
0700 whatever the umask, so a group that shares the output folder could not read a save.
"""

import contextlib
import os
import stat

import numpy as np
import pytest

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.io.atomic import make_partial_folder, remove_partials
from lf_mpc_calib.io.capture_store import CaptureStore
from lf_mpc_calib.io.raw_dataset import new_session_folder, publish_folder


@contextlib.contextmanager
def _umask(mask):
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _save(out):
    tmp, final = new_session_folder(out, 'lf_camera')
    publish_folder(tmp, final)
    return final


def _capture(out):
    obs = Observations(pose=np.zeros(4, int), point=np.arange(4), board=np.zeros((4, 3)),
                       ijuv=np.ones((4, 4)))
    return CaptureStore(out / 'session').write_capture(np.zeros((8, 8), np.uint8), obs)


@pytest.mark.parametrize('mask, mode', [(0o022, 0o755), (0o027, 0o750), (0o077, 0o700)])
def test_folders_follow_the_umask(tmp_path, mask, mode):
    with _umask(mask):
        folders = {'a save': _save(tmp_path), 'a capture': _capture(tmp_path),
                   'a temporary folder': make_partial_folder(tmp_path, 'x')}
    for what, folder in folders.items():
        assert _mode(folder) == mode, \
            f'{what} ({folder}): expected mode {mode:o} under umask {mask:03o}, ' \
            f'got {_mode(folder):o}'


def test_partial_folders_are_found_by_remove_partials(tmp_path):
    folder = make_partial_folder(tmp_path, 'lf_camera_20260101-000000')
    assert folder.name.startswith('.lf_camera_20260101-000000.') and folder.is_dir()
    assert remove_partials(tmp_path) == [folder]
