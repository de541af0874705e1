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
