"""
Grid estimation on rendered lenslet cameras unlike the presets: touching micro-images, other
pitches, rotations, rectangular lattices, Bayer mosaics. Every case must either recover the
true lattice (from the simulator's optics) or refuse with DetectionError: never a wrong grid.

The helpers here (:func:`sweep_camera`, :func:`grid_errors`) are also used by
``benchmarks/bench_grid.py``.
"""

import math

import numpy as np
import pytest
from scipy.spatial import cKDTree

from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality
from lf_mpc_calib.simulation.optics import preset
from lf_mpc_calib.simulation.render import less_dark, quantize, render_white

#: the sweep's tolerances: mean / max centre error (px) at matched positions
MEAN_TOL_PX = 0.1
MAX_TOL_PX = 0.3


def sweep_camera(fill, pitch_px, rotation_deg, lattice, size, *, offset_px=(0.37, -0.61),
                 bayer=None, distortion=(0.0, 0.0)):
    """
    A conventional camera (Lytro optics) of ``size`` x ``size`` px whose micro-images are
    ``fill`` x their spacing across, about ``pitch_px`` px apart, lattice 'hex' | 'rect'.
    """
    base = preset('lytro')
    pixel = base.sensor.pixel_pitch
    pitch = pitch_px * pixel
    ra = base.main_lens.aperture_radius
    d = base.D
    rs = pitch * (math.sqrt(3.0) / 2.0 if lattice == 'hex' else 1.0)
    # micro-image diameter 2 R_a b / D = fill x the smallest centre distance (D + b) / D
    nn = min(pitch, math.hypot(0.5 * pitch, rs)) if lattice == 'hex' else min(pitch, rs)
    b = fill * nn * d / (2.0 * ra - fill * nn)
    return preset('lytro', scale=size / base.sensor.width, gap=b, mla__pitch=pitch,
                  mla__lattice=lattice, mla__row_spacing=rs,
                  mla__rotation=math.radians(rotation_deg),
                  mla__offset=(offset_px[0] * pixel, offset_px[1] * pixel),
                  mla__focal_length=b, sensor__bayer=bayer,
                  main_lens__distortion=distortion)


def true_centres(camera):
    """Every true micro-image centre (N, 2) inside the raw image (raw px) where the lattice
    puts it: a multi-focus camera's types have their own (Camera.micro_image_centres); each
    lens's own offset (REALISTIC_MLA's centre_jitter, 0.07 px here) is no lattice's to follow."""
    from lf_mpc_calib.simulation.optics import apply_overrides
    camera = apply_overrides(camera, mla__centre_jitter=0.0)
    q0, r, c, _ = camera.image_lattice()
    w, h = camera.sensor.size
    # (2 px beyond the image, so that strays at the border are judged against the truth)
    inv = np.linalg.inv(np.column_stack([r, c]))
    corners = (np.array([[0, 0], [w, 0], [0, h], [w, h]], float) - q0) @ inv.T
    lo = np.floor(corners.min(axis=0)).astype(int) - 2
    hi = np.ceil(corners.max(axis=0)).astype(int) + 2
    ll, kk = np.mgrid[lo[1]:hi[1] + 1, lo[0]:hi[0] + 1]
    xy = camera.micro_image_centres(np.column_stack([kk.ravel(), ll.ravel()]))
    return _inside(xy, w, h, -2.0)


def _inside(xy, w, h, margin=-0.5):
    return xy[(xy[:, 0] >= margin) & (xy[:, 0] <= w - 1 - margin) & (xy[:, 1] >= margin)
              & (xy[:, 1] <= h - 1 - margin)]


def grid_errors(grid, truth_xy):
    """
    (errors (N,), matched share, stray share) of a grid against true centres (N, 2).

    errors: distance from every true centre inside the image to the nearest grid centre;
    matched: share of them within a third of the pitch; stray: share of the grid's centres
    inside the image with no true centre within a third of the pitch (a lattice too fine, or
    shifted).
    """
    w, h = grid.image_size
    truth = _inside(truth_xy, w, h)
    est = _inside(grid.centres(), w, h)
    # against every grid centre: a true centre just inside the border may have its estimate
    # just outside (multi-focus turned 2.5 deg: counted a whole pitch off among the inside ones)
    d, _ = cKDTree(grid.centres()).query(truth)
    # strays: grid centres clearly inside the image (half a pitch) and among the true centres (a
    # grid covers the image; where a white has no micro-images, e.g. a black border, its
    # positions have no truth to compare with), against every true centre near the image
    near = _inside(truth_xy, w, h, -1.5)
    lo, hi = truth.min(axis=0), truth.max(axis=0)
    inner = est[np.all((est >= lo - 0.5) & (est <= hi + 0.5), axis=1)]
    # (centres within half a pitch of the border are cut micro-images, which a truth list may
    # omit: synth-spots d lists none along part of its right edge where the image shows them)
    back, _ = cKDTree(near).query(_inside(inner, w, h, 0.5 * grid.pitch))
    tol = grid.pitch / 3.0
    return d, float(np.mean(d < tol)), float(np.mean(back >= tol))


def render(camera, samples=2):
    """An 8-bit white image of ``camera`` (dark frame subtracted and Bayer phases balanced, as
    the pipeline does)."""
    white = quantize(less_dark(camera, render_white(camera, samples=samples)), 8)
    if camera.sensor.bayer is not None:
        from lf_mpc_calib.lenslet.white_image import bayer_neutral
        white = bayer_neutral(white, camera.sensor.bayer)
    return white


def run_case(camera, samples=2, **kwargs):
    """(estimate or None, error message or None, errors, matched, stray) for one camera."""
    white = render(camera, samples)
    truth = true_centres(camera)
    try:
        est = estimate_grid_with_quality(white, **kwargs)
    except DetectionError as exc:
        return None, str(exc), None, 0.0, 0.0
    d, matched, stray = grid_errors(est.grid, truth)
    return est, None, d, matched, stray


def _assert_right_or_refused(camera, lattice):
    est, err, d, matched, stray = run_case(camera)
    if est is None:
        assert 'stage' in err and ('limit' in err or 'need' in err or 'no peaks' in err), err
        return
    assert est.grid.lattice == lattice
    # every true micro-image found, no extra lattice positions, to a fraction of a pixel
    assert matched == 1.0 and stray == 0.0, (matched, stray)
    assert d.mean() <= MEAN_TOL_PX and d.max() <= MAX_TOL_PX, (d.mean(), d.max())
    truth = camera.lenslet_grid()
    assert abs(est.grid.pitch / truth.pitch - 1.0) < 1e-3
    assert abs(est.grid.rotation - truth.rotation) < 2e-3


# a representative subset of fill 0.80 / 0.9 / 1.0 x pitch 7 / 10 / 14 / 16 x rotation
# -3 / 0 / +3 deg x hex / rect, on 640 px sensors (the benchmark runs the full product)
CASES = [
    (1.0, 7.0, -3.0, 'hex'), (1.0, 10.0, 0.4, 'hex'), (1.0, 16.0, 3.0, 'hex'),
    (0.9, 14.0, 3.0, 'hex'), (0.8, 7.0, 0.0, 'hex'),
    (1.0, 9.0, -3.0, 'rect'), (0.9, 7.0, 3.0, 'rect'), (0.8, 16.0, -1.5, 'rect'),
    (1.0, 14.0, 0.0, 'rect'),
]


@pytest.mark.parametrize('fill,pitch,rotation,lattice', CASES)
def test_grid_sweep_right_or_refused(fill, pitch, rotation, lattice):
    _assert_right_or_refused(sweep_camera(fill, pitch, rotation, lattice, 640), lattice)


def test_grid_touching_hex_issue_camera_is_right():
    # the issue's camera (fill 0.99, ~9 px, rotated 0.3 deg): the strongest spectral ring is
    # the sqrt(3) one, which gave half the spacing, a rect lattice and a 32 px RMS fit
    cam = sweep_camera(0.99, 9.0, 0.3, 'hex', 720)
    est, err, d, matched, stray = run_case(cam)
    assert err is None, err
    assert est.grid.lattice == 'hex' and matched == 1.0 and stray == 0.0
    assert d.mean() < 0.05, d.mean()


def test_grid_bayer_mosaic():
    # a Bayer white balanced by the pipeline's bayer_neutral
    _assert_right_or_refused(sweep_camera(1.0, 11.0, -2.0, 'hex', 640, bayer='rggb'), 'hex')


def test_grid_soft_rimmed_touching_micro_images_multifocus():
    # the multi-focus preset's white at 16 samples per pixel: touching micro-images whose rims
    # are the main lens's blurred aperture; the 3 x 3 map's peaks wandered by up to 2 px and
    # the grid was refused ("a smooth hex lattice explains only 1608 of 1625 spots"); the
    # wide-maximum fallback fits it (measured: mean 0.049 px, max 0.16 px)
    from lf_mpc_calib.simulation.optics import preset
    cam = preset('focused-multifocus', scale=0.5)
    est, err, d, matched, stray = run_case(cam, samples=16)
    assert err is None, err
    assert est.grid.lattice == 'hex' and matched == 1.0 and stray == 0.0, (matched, stray)
    assert d.mean() <= MEAN_TOL_PX and d.max() <= MAX_TOL_PX, (d.mean(), d.max())


def test_grid_soft_rimmed_rotated_noisy_multifocus():
    # unlike the preset: lattice rotated 2.5 deg and 1 % sensor noise; the 3 x 3 map's grid fit
    # the lattice stage but failed its check (residual RMS 1.88 px against 1.68 px allowed);
    # the wide map's passes (measured: mean 0.045 px, max 0.15 px)
    from lf_mpc_calib.simulation.optics import preset
    cam = preset('focused-multifocus', scale=0.5, mla__rotation=math.radians(2.5))
    white = less_dark(cam, render_white(cam, samples=16))      # as calibrate-raw sees it
    white = np.clip(white + 0.01 * np.random.default_rng(0).standard_normal(white.shape), 0, 1)
    est = estimate_grid_with_quality(white)
    d, matched, stray = grid_errors(est.grid, true_centres(cam))
    assert matched == 1.0 and stray == 0.0, (matched, stray)
    assert d.mean() <= MEAN_TOL_PX and d.max() <= MAX_TOL_PX, (d.mean(), d.max())
