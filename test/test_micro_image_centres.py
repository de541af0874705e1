"""The focused detector's lattice sits on the white's lit disks, not on its vignetted spots."""

import numpy as np
import pytest

from lf_mpc_calib.features.micro_image_centres import recentred_grid
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.simulation.optics import preset
from lf_mpc_calib.simulation.render import less_dark, render_white


def _scale_error(cam, centres):
    """Affine scale (x, y) and RMS px of centres (M, 2) against the optics' micro-images."""
    kl, _ = cam.micro_image_of(centres)
    d = centres - cam.micro_image_centres(kl)
    x = np.column_stack([centres - cam.sensor.centre, np.ones(len(centres))])
    a = np.linalg.lstsq(x, d, rcond=None)[0]
    return np.array([a[0, 0], a[1, 1]]), np.sqrt((d ** 2).mean())


@pytest.mark.parametrize('name', ['focused-keplerian', 'focused-galilean'])
def test_lattice_on_the_lit_disks(name):
    cam = preset(name, scale=0.6, sensor__noise=0.0)
    white = less_dark(cam, render_white(cam, samples=64))   # as calibrate-raw hands it on
    spots = estimate_grid(white)
    det = MicroImageCornerDetector(white)
    # the cos^4 falloff inside each micro-image (peaked under its micro-lens) pulls the spots'
    # lattice towards the axis (measured here: -1.7e-4 / -0.9e-4 Keplerian, -1.0e-4 / -1.1e-4
    # Galilean, 0.048 / 0.035 px RMS); the lit disks' is right to (0.7..1.6)e-5, 0.003-0.005 px
    before, _ = _scale_error(cam, spots.centres())
    after, rms = _scale_error(cam, det.grid.centres())
    assert np.all(before < -5e-5), before
    assert np.all(np.abs(after) < 3e-5) and rms < 0.03, (after, rms)
    # a given grid is used as it is (a calibration's centres are its (i, j))
    assert MicroImageCornerDetector(white, spots).grid is spots
    # idempotent: a recentred grid moves no further
    again = recentred_grid(white / np.percentile(white, 99.5), det.grid, det.radius)
    assert np.abs(again.centres() - det.grid.centres()).max() < 0.01
