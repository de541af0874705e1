"""The simulated sensor: realistic by default, its figures checked against a real white."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality
from lf_mpc_calib.simulation.optics import IDEAL, preset
from lf_mpc_calib.simulation.render import render_white
from lf_mpc_calib.simulation.sensor_response import SensorResponse

REAL = Path(__file__).resolve().parents[1].parent / 'shared' / 'data' / 'real-whites'
BINS = np.linspace(0.0, 0.5, 11)          # radius / lens spacing: the micro-image itself


def radial_profile(img):
    """Median over micro-images of their mean level in rings of r / nn, over their core's."""
    img = np.asarray(img, dtype=np.float32)
    img = img - np.percentile(img, 0.5)
    est = estimate_grid_with_quality(img)
    nn = est.quality.nn_px
    h, w = img.shape
    rad = int(0.55 * nn) + 1
    oy, ox = np.mgrid[-rad:rad + 1, -rad:rad + 1]
    sums, counts = np.zeros(len(BINS) - 1), np.zeros(len(BINS) - 1)
    for x, y in est.centres[::max(1, len(est.centres) // 300)]:
        xi, yi = int(round(x)), int(round(y))
        if not (rad <= xi < w - rad and rad <= yi < h - rad):
            continue
        patch = img[yi - rad:yi + rad + 1, xi - rad:xi + rad + 1]
        r = np.hypot(ox + xi - x, oy + yi - y) / nn
        ring = np.digitize(r.ravel(), BINS) - 1
        keep = (ring >= 0) & (ring < len(sums))
        top = np.median(patch[r < 0.2])
        sums += np.bincount(ring[keep], patch.ravel()[keep] / top, minlength=len(sums))
        counts += np.bincount(ring[keep], minlength=len(sums))
    return sums / np.maximum(counts, 1)


def test_simulated_white_micro_image_profile_matches_a_real_white():
    # seaurchin: a real square array with a fill near 1; lytro: the preset, fill 0.96
    path = REAL / 'seaurchin' / 'radiometry_frame.tif'
    if not path.is_file():
        pytest.skip(f'{path} is not there')
    real = radial_profile(cv2.imread(str(path), cv2.IMREAD_UNCHANGED))
    sim = radial_profile(render_white(preset('lytro', scale=0.3), samples=8))
    ideal = radial_profile(render_white(preset('lytro', scale=0.3, sensor__response=None),
                                        samples=8))
    rms = float(np.sqrt(np.mean((sim - real) ** 2)))
    assert rms < 0.05, (rms, sim.round(2), real.round(2))
    assert float(np.sqrt(np.mean((ideal - real) ** 2))) > 0.0    # reported beside it
    print('profile RMS vs seaurchin: realistic', rms, 'ideal',
          float(np.sqrt(np.mean((ideal - real) ** 2))))


def test_simulate_is_realistic_by_default_and_ideal_on_request(tmp_path):
    import yaml
    from lf_mpc_calib.cli import main
    for ideal in (False, True):
        out = tmp_path / f'ds{ideal}'
        args = ['simulate', '--preset', 'lytro', '--scale', '0.05', '--poses', '1',
                '--samples', '1', '--quiet', '-o', str(out)] + (['--ideal'] if ideal else [])
        assert main(args) == 0
        sensor = yaml.safe_load((out / 'manifest.yaml').read_text())['camera']['sensor']
        assert (sensor['response'] is None) == ideal
        assert (out / 'dark.png').exists() != ideal


def test_presets_plan_and_demo_are_realistic_by_default_and_ideal_on_request():
    from lf_mpc_calib.cli import build_parser
    from lf_mpc_calib.cli.plan import ideal_override
    from lf_mpc_calib.simulation.optics import REALISTIC_SENSOR, conventional_camera
    for name in ('lytro', 'lab-square', 'focused-keplerian', 'focused-multifocus'):
        real, ideal = preset(name, scale=0.1), preset(name, scale=0.1, **IDEAL)
        assert real.sensor.response == REALISTIC_SENSOR, name
        assert (real.mla.centre_jitter, real.mla.focal_jitter) == (0.1e-6, 0.005)
        assert ideal.sensor.response is None
        assert (ideal.mla.centre_jitter, ideal.mla.focal_jitter) == (0.0, 0.0)
    assert conventional_camera('lytro', scale=0.1).sensor.response == REALISTIC_SENSOR
    parser = build_parser()
    for argv in (['plan', '--preset', 'lytro', '--target-k-sigma', '1', '--target-pp-sigma',
                  '1', '-o', 'x'], ['demo']):
        assert ideal_override(parser.parse_args(argv)) == {}
        assert ideal_override(parser.parse_args(argv + ['--ideal'])) == IDEAL


def test_sensor_figures_are_those_its_fields_state():
    resp = SensorResponse(hot_pixel_share=0.0, dust_per_mpx=0.0, prnu=0.0)
    rng = np.random.default_rng(3)
    flat = np.full((200, 200), 0.5)
    raw = resp.read_out(flat, rng)
    # shot noise: variance of electrons = their mean (0.5 x 0.8 x full well), plus read noise
    e = (raw - resp.black_level) * resp.full_well_e
    mean_e = 0.5 * resp.white_level * resp.full_well_e
    assert abs(e.mean() / mean_e - 1) < 0.01
    assert abs(e.var() / (mean_e + resp.read_noise_e ** 2) - 1) < 0.05
    dark = resp.dark_frame((200, 200), rng)
    assert abs(np.median(dark) - resp.black_level) < 1e-3
    assert abs(dark.std() * resp.full_well_e / resp.read_noise_e - 1) < 0.05
    # the fixed pattern is the same for every frame of one sensor
    a = SensorResponse(seed=5).fixed_pattern((64, 80))
    b = SensorResponse(seed=5).fixed_pattern((64, 80))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_simulated_data_set_carries_its_dark_frame_and_calibrate_raw_reads_it(tmp_path):
    from lf_mpc_calib.io.dark_corrected import DarkCorrected
    from lf_mpc_calib.io.raw_dataset import load_raw_folder
    from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
    from lf_mpc_calib.simulation.optics import default_board
    from lf_mpc_calib.simulation.optics import REALISTIC_SENSOR
    cam = preset('lytro', scale=0.06, sensor__response=REALISTIC_SENSOR)
    board = default_board(cam)
    rv, tv = random_poses(cam, board, 1, rng=np.random.default_rng(0))
    write_dataset(tmp_path / 'ds', cam, board, rv, tv, samples=1)
    ds = load_raw_folder(tmp_path / 'ds')
    assert isinstance(ds.white, DarkCorrected) and all(isinstance(f, DarkCorrected)
                                                       for f in ds.frames)
    white = ds.white.load()
    assert np.percentile(white, 1) < 4          # the pedestal (64 / 1023: 16) is gone
    ideal = preset('lytro', scale=0.06, sensor__response=None)   # no dark frame: ideal
    write_dataset(tmp_path / 'ideal', ideal, board, rv, tv, samples=1)
    assert not (tmp_path / 'ideal' / 'dark.png').exists()
    assert not isinstance(load_raw_folder(tmp_path / 'ideal').white, DarkCorrected)


def test_lab_square_white_gives_its_grid_and_decodes():
    # the lab camera's optics: square 300 um lenses at f/62 behind a 200 mm f/30 lens; its
    # realistic white (black level left in: no dark frame) gives the true grid
    from scipy.spatial import cKDTree
    from lf_mpc_calib.lenslet.decode import Decoder
    from lf_mpc_calib.simulation.optics import REALISTIC_SENSOR
    from lf_mpc_calib.simulation.render import quantize
    cam = preset('lab-square', sensor__response=REALISTIC_SENSOR)
    white = quantize(render_white(cam, samples=2), 16)
    est = estimate_grid_with_quality(white)
    truth = cam.lenslet_grid()
    assert est.grid.lattice == 'rect' and abs(est.grid.pitch / truth.pitch - 1) < 2e-4
    c = truth.centres()
    w, h = cam.sensor.size
    c = c[(c[:, 0] > 30) & (c[:, 0] < w - 30) & (c[:, 1] > 30) & (c[:, 1] < h - 30)]
    d, _ = cKDTree(est.grid.centres()).query(c)
    assert np.median(d) < 0.05 and d.max() < 0.15, (np.median(d), d.max())
    lf = Decoder(est.grid, white=white, views=15).decode(white)
    assert lf.valid.sum() >= 100 and lf.view_shape == est.grid.shape[::-1]


def test_realistic_lenses_sit_off_their_lattice_points_and_focal_lengths():
    """REALISTIC_MLA: each lens 0.1 um rms off its lattice point, its focal length 0.5 % rms
    off the nominal one, fixed per lens (the same camera twice, the same lenses), kept by the
    camera's dictionary (ground_truth.yaml)."""
    from lf_mpc_calib.simulation.optics import Camera
    real, ideal = preset('focused-keplerian', scale=0.3), preset('focused-keplerian',
                                                                 scale=0.3, **IDEAL)
    kl = real.micro_image_of(real.lenslet_grid().centres())[0]
    assert len(kl) > 300
    shift = real.lens_centres(kl) - ideal.lens_centres(kl)
    assert 0.08e-6 < np.sqrt(np.mean(shift ** 2)) < 0.12e-6
    spread = real.lens_focal_lengths(kl) / real.mla.focal_length - 1.0
    assert 0.004 < np.std(spread) < 0.006 and abs(np.mean(spread)) < 0.001
    np.testing.assert_array_equal(ideal.lens_focal_lengths(kl), ideal.mla.focal_length)
    again = Camera.from_dict(real.to_dict())
    np.testing.assert_array_equal(again.lens_focal_lengths(kl), real.lens_focal_lengths(kl))
    np.testing.assert_array_equal(again.lens_centres(kl), real.lens_centres(kl))
