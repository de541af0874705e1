"""
The lenslet grid on real sensor whites (../shared/data/real-whites), checked against an
edge-circle reference computed here, independently of the project's estimator.

The reference: for each micro-image, the half-level crossings along 72 rays from its centre
(level half-way between the darkest sample within 0.62 pitch and the 90th percentile of the
inner third), a least-squares (Kasa) circle through them, iterated twice.
"""

from pathlib import Path

import cv2
import numpy as np
import pytest
from scipy import ndimage

from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality

REAL = Path(__file__).resolve().parents[1].parent / 'shared' / 'data' / 'real-whites'
WHITES = {'guv': ('guv/Radiometry_GUVExperim1.tif', 'guv/DarkFrame_GUVExperim1.tif'),
          'seaurchin': ('seaurchin/radiometry_frame.tif', 'seaurchin/dark_frame.tif')}


def _load(name):
    if not REAL.is_dir():
        pytest.skip(f'{REAL} is not there')
    white, dark = (cv2.imread(str(REAL / f), cv2.IMREAD_UNCHANGED) for f in WHITES[name])
    return white, dark


def edge_circle_centres(img, approx, pitch):
    """Edge-circle centres (N, 2) of the micro-images near approx (N, 2); NaN where unfit."""
    h, w = img.shape
    radius = 0.62 * pitch
    angles = np.linspace(0.0, 2.0 * np.pi, 72, endpoint=False)
    steps = np.linspace(0.0, radius, int(radius * 8))
    out = np.full((len(approx), 2), np.nan)
    for n, (cx, cy) in enumerate(approx):
        if not (radius + 2 < cx < w - radius - 3 and radius + 2 < cy < h - radius - 3):
            continue
        for _ in range(2):
            xs = cx + np.outer(np.cos(angles), steps)
            ys = cy + np.outer(np.sin(angles), steps)
            prof = ndimage.map_coordinates(img, [ys, xs], order=1)
            half = 0.5 * (np.percentile(prof[:, :len(steps) // 3], 90) + prof.min())
            pts = []
            for a, p in zip(angles, prof):
                idx = np.nonzero((p[:-1] >= half) & (p[1:] < half))[0]
                if len(idx):
                    i = idx[0]
                    r = steps[i] + (p[i] - half) / (p[i] - p[i + 1]) * (steps[1] - steps[0])
                    pts.append((cx + r * np.cos(a), cy + r * np.sin(a)))
            if len(pts) < 30:
                break
            pts = np.array(pts)
            a_ = np.column_stack([2 * pts, np.ones(len(pts))])
            cx, cy, _ = np.linalg.lstsq(a_, (pts ** 2).sum(axis=1), rcond=None)[0]
        else:
            out[n] = cx, cy
    return out


def _grid_against_reference(white, dark):
    img = white.astype(np.float32) - (0 if dark is None else dark.astype(np.float32))
    est = estimate_grid_with_quality(img)
    step = max(1, len(est.centres) // 3000)     # a few thousand micro-images suffice
    centres, indices = est.centres[::step], est.indices[::step]
    ref = edge_circle_centres(img.astype(float), centres, est.grid.pitch)
    ok = np.all(np.isfinite(ref), axis=1)
    assert ok.mean() > 0.9
    diff = est.grid.centres_of(indices)[ok] - ref[ok]
    return est, np.hypot(*diff.T), diff.mean(axis=0)


@pytest.mark.parametrize('with_dark', [True, False])
def test_guv_white_grid_on_the_edge_circles(with_dark):
    # before: the whole grid shifted by (+0.50, -0.56) px, median 0.75 px, and accepted
    white, dark = _load('guv')
    est, dist, shift = _grid_against_reference(white, dark if with_dark else None)
    assert est.grid.lattice == 'rect'
    assert abs(est.grid.pitch / (100 / 6.5) - 1) < 1e-3        # 100 um lenses, 6.5 um pixels
    assert np.median(dist) <= 0.05 and np.percentile(dist, 95) <= 0.15, \
        (np.median(dist), np.percentile(dist, 95))
    assert np.all(np.abs(shift) <= 0.03), shift
    q = est.quality
    assert q.estimator == 'half-level' and q.spot_scatter_px < 0.05, q


def test_seaurchin_white_grid_on_the_edge_circles():
    # outer micro-images not round; before: median 0.23, p95 1.46, max 3.1 px
    white, dark = _load('seaurchin')
    est, dist, shift = _grid_against_reference(white, dark)
    assert np.median(dist) <= 0.11 and np.percentile(dist, 95) <= 0.3, \
        (np.median(dist), np.percentile(dist, 95))
    assert np.all(np.abs(shift) <= 0.03), shift
    q = est.quality
    # the grid reports what it could not explain: lenses off a smooth lattice by ~0.1 px
    assert 0.05 < q.spot_scatter_px < 0.2 and q.lattice_error_px < q.rms_px, q


def test_spot_scatter_separates_noise_from_a_smooth_lattice_error():
    from lf_mpc_calib.lenslet.estimate import spot_scatter
    rng = np.random.default_rng(1)
    k, l_ = np.meshgrid(np.arange(40), np.arange(30))
    kl = np.column_stack([k.ravel(), l_.ravel()])
    smooth = np.column_stack([0.3 * np.sin(kl[:, 0] / 12.0), 0.2 * (kl[:, 1] / 30.0) ** 2])
    noise = 0.05 * rng.standard_normal(kl.shape)
    s = spot_scatter(smooth + noise, kl, np.ones(len(kl), bool))
    assert abs(s / (0.05 * np.sqrt(2)) - 1) < 0.1, s


def test_grid_command_takes_the_real_dark_frame_and_reports_scatter_apart(tmp_path):
    import subprocess
    import sys
    white, dark = (str(REAL / f) for f in WHITES['guv'])
    _load('guv')
    out = tmp_path / 'g.yaml'
    p = subprocess.run([sys.executable, '-m', 'lf_mpc_calib', 'grid', white, '--dark', dark,
                        '-o', str(out), '--plot', str(tmp_path / 'g.png')],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    picture = cv2.imread(str(tmp_path / 'g.png'))
    assert picture is not None and picture.shape[1] > 1.5 * picture.shape[0]   # two panels
    assert 'the spots scatter' in p.stdout and 'the lattice explains them to' in p.stdout
    import yaml
    fit = yaml.safe_load(out.read_text())['fit']
    assert fit['estimator'] == 'half-level' and fit['spot_scatter_px'] < 0.05


@pytest.mark.parametrize('case', ['other size', 'swapped', 'other depth'])
def test_dark_frame_that_does_not_match_is_refused_naming_the_figure(case):
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.lenslet.dark_frame import subtract_dark
    white, dark = _load('guv')
    sea_white, sea_dark = _load('seaurchin')
    img, drk, word = {'other size': (white, sea_dark.astype(white.dtype), 'shape'),
                      'swapped': (dark, white, 'not dark'),
                      'other depth': (white, dark.astype(np.uint8), 'bit depth')}[case]
    with pytest.raises(InvalidInputError, match=word):
        subtract_dark(img, drk)


def test_real_dark_frames_are_the_black_level():
    from lf_mpc_calib.lenslet.dark_frame import subtract_dark
    for name in WHITES:
        white, dark = _load(name)
        out = subtract_dark(white, dark)
        assert out.dtype == np.float32 and out.min() >= 0
        # the gaps between micro-images come down by the black level
        assert np.percentile(out, 1) == pytest.approx(
            max(np.percentile(white.astype(float) - dark, 1), 0), abs=1.0)


def test_a_frame_less_its_dark_is_the_difference_clipped_at_zero_in_its_own_type():
    """minus_dark against plain wide arithmetic, on the real frames (where the dark is
    brighter than a pixel the result is 0, not a wrapped-around bright value)."""
    from lf_mpc_calib.lenslet.dark_frame import minus_dark
    for name in WHITES:
        white, dark = _load(name)
        for img in (white, np.roll(dark, 1, axis=0)):     # the second: dimmer than the dark
            expected = np.maximum(img.astype(np.int64) - dark.astype(np.int64), 0)
            out = minus_dark(img, dark)
            assert out.dtype == img.dtype and np.array_equal(out, expected)
        assert np.any(np.roll(dark, 1, axis=0) < dark)    # the clip is exercised
    for dtype in (np.int16, np.float32):
        img, drk = np.array([[5, 1], [0, 7]], dtype), np.array([[2, 3], [1, 7]], dtype)
        assert np.array_equal(minus_dark(img, drk), np.array([[3, 0], [0, 0]], dtype))


@pytest.mark.parametrize('name', ['guv', 'seaurchin'])
def test_real_light_field_decodes_with_its_white_and_dark(tmp_path, name):
    import subprocess
    import sys
    _load(name)
    raw = {'guv': 'guv/Lightfield_GUVExperim1.tif',
           'seaurchin': 'seaurchin/light_field.tif'}[name]
    white, dark = (str(REAL / f) for f in WHITES[name])
    out = tmp_path / 'views'
    p = subprocess.run([sys.executable, '-m', 'lf_mpc_calib', 'decode', str(REAL / raw),
                        '--white', white, '--dark', dark, '-o', str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    share = float(p.stdout.split('valid samples: ')[1].split(' %')[0])
    assert share > 95 and 'vignetting corrected: gain' in p.stdout
    # the central view against the raw frame read at the lens centres (nearest pixel) over
    # the white there, both less the dark: the same picture
    import yaml
    from lf_mpc_calib.lenslet.grid import LensletGrid
    grid = LensletGrid.from_dict(yaml.safe_load((out / 'grid.yaml').read_text())['lenslet_grid'])
    rows, cols = grid.shape[1], grid.shape[0]
    l_, k = np.mgrid[0:rows, 0:cols]
    c = np.rint(grid.centres_of(np.column_stack([k.ravel(), l_.ravel()]))).astype(int)
    img = cv2.imread(str(REAL / raw), cv2.IMREAD_UNCHANGED).astype(float)
    w = cv2.imread(white, cv2.IMREAD_UNCHANGED).astype(float)
    d = cv2.imread(dark, cv2.IMREAD_UNCHANGED).astype(float)
    h_, w_ = img.shape
    inside = (c[:, 0] >= 0) & (c[:, 0] < w_) & (c[:, 1] >= 0) & (c[:, 1] < h_)
    ref = np.zeros(len(c))
    ci = c[inside]
    ref[inside] = (img - d)[ci[:, 1], ci[:, 0]] / np.maximum((w - d)[ci[:, 1], ci[:, 0]], 1)
    view = cv2.imread(str(out / 'view_j+0_i+0.png'), cv2.IMREAD_UNCHANGED).astype(float).ravel()
    corr = np.corrcoef(view[inside], ref[inside])[0, 1]
    print(name, "central view vs raw/white correlation", corr)
    assert corr > 0.9, corr


def test_calibrate_raw_takes_a_dark_frame_by_flag_and_refuses_one_that_does_not_match(tmp_path):
    from lf_mpc_calib.io.dark_corrected import DarkCorrected
    from lf_mpc_calib.io.raw_dataset import load_raw_folder
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
    from lf_mpc_calib.simulation.optics import REALISTIC_SENSOR, default_board, preset
    cam = preset('lytro', scale=0.06, sensor__response=REALISTIC_SENSOR)
    board = default_board(cam)
    rv, tv = random_poses(cam, board, 1, rng=np.random.default_rng(0))
    write_dataset(tmp_path / 'ds', cam, board, rv, tv, samples=1)
    dark = tmp_path / 'ds' / 'dark.png'
    ds = load_raw_folder(tmp_path / 'ds', dark=dark)
    assert isinstance(ds.frames[0], DarkCorrected)
    _load('guv')
    with pytest.raises(InvalidInputError, match='shape'):
        load_raw_folder(tmp_path / 'ds', dark=REAL / WHITES['guv'][1])
    with pytest.raises(InvalidInputError, match='not dark'):
        load_raw_folder(tmp_path / 'ds', dark=tmp_path / 'ds' / 'white.png')


def test_decode_with_a_dark_frame_takes_a_dim_frame(tmp_path):
    # the dark frame is checked against the white, not against the frame: a frame of a dim
    # scene (here the dark frame itself, no light at all) decodes to 0 instead of a refusal
    import subprocess
    import sys
    _load('guv')
    white, dark = (str(REAL / f) for f in WHITES['guv'])
    p = subprocess.run([sys.executable, '-m', 'lf_mpc_calib', 'decode', dark, '--white', white,
                        '--dark', dark, '-o', str(tmp_path / 'v')], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    view = cv2.imread(str(tmp_path / 'v' / 'view_j+0_i+0.png'), cv2.IMREAD_UNCHANGED)
    assert view is not None and view.max() == 0
