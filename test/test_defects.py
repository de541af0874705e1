"""Hot and dead pixels and dust: found, kept out of the lattice fit, decoded as 0."""

import numpy as np
import pytest

from lf_mpc_calib.lenslet.decode import Decoder
from lf_mpc_calib.lenslet.defects import find_defects
from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality


def flat_topped_white(pitch=16.0, size=(400, 320), seed=0):
    """A square-lattice white (H, W) float32 of flat-topped discs (fill 0.95, soft edge),
    with shot noise and a black level; returns (white, true centres (N, 2))."""
    rng = np.random.default_rng(seed)
    w, h = size
    origin = np.array([7.3, 5.6])
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    du = (xx - origin[0]) - np.rint((xx - origin[0]) / pitch) * pitch
    dv = (yy - origin[1]) - np.rint((yy - origin[1]) / pitch) * pitch
    disc = 0.5 * (1 - np.tanh((np.hypot(du, dv) - 0.475 * pitch) / 0.8))
    img = rng.poisson(disc * 3000.0).astype(np.float32) + 100.0
    k, l_ = np.meshgrid(np.arange(-1, w / pitch + 1), np.arange(-1, h / pitch + 1))
    centres = np.column_stack([origin[0] + k.ravel() * pitch, origin[1] + l_.ravel() * pitch])
    return img, centres


def _damaged():
    white, truth = flat_topped_white()
    dark = np.full_like(white, 100.0)
    hot = np.array([[50, 40], [201, 133], [300, 250]])
    dark[hot[:, 1], hot[:, 0]] = 4000.0
    white[hot[:, 1], hot[:, 0]] += 3900.0
    dead = np.array([[119, 85], [233, 197]])         # inside lit discs
    white[dead[:, 1], dead[:, 0]] = 100.0
    dust = truth[[150, 151, 180]]                    # three micro-images in a shadow
    for x, y in dust:
        ys, xs = np.ogrid[0:white.shape[0], 0:white.shape[1]]
        shade = np.hypot(xs - x, ys - y) < 8
        white[shade] = 100.0 + 0.35 * (white[shade] - 100.0)
    return white - 100.0, dark - 100.0, truth, hot, dead, dust


def test_defects_found_by_name_and_kept_out_of_the_grid():
    white, dark, truth, hot, dead, dust = _damaged()
    est = estimate_grid_with_quality(white)
    from scipy.spatial import cKDTree
    d, _ = cKDTree(est.grid.centres()).query(truth[(truth[:, 0] > 8) & (truth[:, 0] < 392)
                                                   & (truth[:, 1] > 8) & (truth[:, 1] < 312)])
    assert np.median(d) < 0.05 and d.max() < 0.15, (np.median(d), d.max())
    # the dusty micro-images' centres are not among the fitted spots
    dist, _ = cKDTree(est.centres).query(dust)
    assert np.all(dist > 2.0), dist
    found = find_defects(white, est.grid.centres(), 16.0, dark=dark)
    assert {tuple(p) for p in found.hot} == {tuple(p) for p in hot}
    assert {tuple(p) for p in found.dead} == {tuple(p) for p in dead}
    dd, _ = cKDTree(found.dusty).query(dust)
    assert len(found.dusty) == 3 and dd.max() < 0.5
    assert '3 hot and 2 dead pixels, 3 dusty micro-images' in found.summary()


def test_decoder_leaves_defects_out_instead_of_devignetting_them():
    white, dark, truth, hot, dead, dust = _damaged()
    est = estimate_grid_with_quality(white)
    found = find_defects(white, est.grid.centres(), 16.0, dark=dark)
    raw = white.copy()
    plain = Decoder(est.grid, white=white, views=5).decode(raw).views
    dec = Decoder(est.grid, white=white, views=5, bad_pixels=found.mask)
    views = dec.decode(raw).views
    masked = dec.masked
    assert masked.any() and not np.any(views[masked])
    # elsewhere the views are those of the plain decoder
    np.testing.assert_allclose(views[~masked], plain[~masked], rtol=1e-5, atol=1e-3)
    with pytest.raises(Exception, match='bad_pixels must have shape'):
        Decoder(est.grid, white=white, views=5, bad_pixels=found.mask[:-1])


def test_hot_pixels_of_a_realistic_white_are_the_sensors_not_its_unlit_gaps():
    """lab-square (16 bit, square lenses: unlit gaps between the discs): the hot pixels found
    are the sensor's (REALISTIC_SENSOR's fixed pattern), not read noise in the gaps that is
    1.5 x its neighbours (before: 5726 'hot' of 72 on the full white)."""
    from lf_mpc_calib.lenslet.defects import defective_pixels
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import less_dark, quantize, render_white
    cam = preset('lab-square', scale=0.6)
    response = cam.sensor.response
    raw = render_white(cam, samples=2)
    white = quantize(less_dark(cam, raw), 16)
    dark = quantize(response.dark_frame(raw.shape, np.random.default_rng([0, 2])), 16)
    _, signal = response.fixed_pattern(raw.shape)
    true_hot = {(x, y) for y, x in zip(*np.nonzero(signal > 0.05))}
    for args in ((white, dark), (white,)):
        hot = {tuple(p) for p in defective_pixels(*args)[0]}
        if len(args) == 2:                      # the dark frame names every one
            assert true_hot <= hot, len(true_hot - hot)
        assert len(hot - true_hot) <= 0.2 * len(true_hot) + 3, (len(hot), len(true_hot))
