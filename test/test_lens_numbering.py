"""One lens numbering (docs/file-formats.md): a grid estimated from a simulated white and the
simulator's truth give the same lens the same (k, l), on every preset."""

import numpy as np
import pytest

from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality
from lf_mpc_calib.lenslet.grid import LensletGrid, numbered_grid
from lf_mpc_calib.simulation.optics import PRESETS, preset
from lf_mpc_calib.simulation.render import render_white

SCALES = {'lytro': 0.15, 'illum': 0.08}     # the rest at 0.3: a few hundred lenses each


@pytest.mark.parametrize('name', PRESETS)
def test_estimated_grid_numbers_lenses_as_the_truth(name):
    cam = preset(name, scale=SCALES.get(name, 0.3))
    truth = cam.lenslet_grid()
    est = estimate_grid_with_quality(render_white(cam, samples=1))
    grid = est.grid
    assert grid.shape == truth.shape and grid.hex_parity == truth.hex_parity
    # each detected micro-image's (k, l) in the estimate is the truth lens at that place
    # (a multi-focus type's white centre sits off the lattice by L (b_T - b) / D: < 0.5 px)
    used = est.inliers
    off = np.hypot(*(truth.centres_of(est.indices[used]) - est.centres[used]).T)
    assert off.max() < 0.25 * truth.pitch, off.max()
    assert np.hypot(*(grid.origin - truth.origin)) < 0.05
    # the principal point from either grid: no offset left to compensate
    a, b = cam.ground_truth_model(truth), cam.ground_truth_model(grid)
    scale = abs(a.k_i) if cam.camera_type == 'conventional' else 1.0
    assert abs(a.u_0 - b.u_0) < 0.05 * scale and abs(a.v_0 - b.v_0) < 0.05 * scale


def test_numbering_ignores_which_lens_describes_the_lattice():
    # any lens of one lattice, described with either hex row parity, yields the same grid
    rs = 10.0 * np.sqrt(3) / 2
    lenses = [LensletGrid('hex', 10.0, rs, 0.01, (153.2, 97.9), (1, 1), (301, 211), parity)
              .centres_of([kl])[0] for parity in (0, 1)
              for kl in [(0, 0), (3, 1), (-7, -5), (2, 4)]]
    grids = [numbered_grid('hex', 10.0, rs, 0.01, xy, (301, 211)) for xy in lenses]
    # parity 1 moves row 0's lenses by half a pitch: a different lattice, numbered alike
    for group in (grids[:4], grids[4:]):
        for g in group[1:]:
            assert g.shape == group[0].shape and g.hex_parity == group[0].hex_parity
            np.testing.assert_allclose(g.centres(), group[0].centres(), atol=1e-6)


def test_a_file_numbered_by_the_old_rule_still_loads_and_gives_the_same_rays(tmp_path):
    # before the one rule, an estimated grid started at the first whole micro-image (here 1
    # lens and 2 rows in): such a file loads as written, and its rays are the new file's
    import dataclasses

    from lf_mpc_calib.io.calibration_file import load_calibration, save_calibration
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    cam = preset('lytro', scale=0.15)
    new = cam.lenslet_grid()
    old = dataclasses.replace(new, origin=tuple(new.centres_of([[1, 2]])[0]),
                              shape=(new.shape[0] - 2, new.shape[1] - 3))
    base = ground_truth_file(cam, np.zeros((1, 3)), np.array([[0.0, 0.0, 0.4]]))
    files = {}
    for name, grid in (('new', new), ('old', old)):
        cal = dataclasses.replace(base, lenslet_grid=grid, model=cam.ground_truth_model(grid))
        save_calibration(tmp_path / f'{name}.yaml', cal)
        files[name] = load_calibration(tmp_path / f'{name}.yaml')
    loaded = files['old'].lenslet_grid
    np.testing.assert_allclose(loaded.origin, old.origin, atol=1e-9)
    assert loaded.shape == old.shape and loaded.hex_parity == old.hex_parity
    ijuv = np.array([[1.0, -2.0, 10.0, 12.0], [0.0, 3.0, 5.0, 7.0], [-3.0, 1.0, 30.0, 20.0]])
    np.testing.assert_allclose(files['old'].model.rays(ijuv - [0, 0, 1, 2]),
                               files['new'].model.rays(ijuv), rtol=0, atol=1e-12)
