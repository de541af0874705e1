"""Tests for lf_mpc_calib.lenslet.decode (raw -> light field, micro-image indexing)."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.decode import Decoder, LightField, MicroImageIndex, mosaic
from lf_mpc_calib.lenslet.demosaic import demosaic, mosaic_bayer
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.synthetic import raw_image, white_image
from lf_mpc_calib.lenslet.views import aperture_radius, clean_views

RADIUS = 5.3


def _grid(lattice='hex', parity=1):
    # 20 x 18 lenses, all inside a 260 x 200 image
    rs = 12.0 * (np.sqrt(3) / 2 if lattice == 'hex' else 0.9)
    return LensletGrid(lattice, 12.0, rs, 0.01, [8.3, 9.2], (20, 18), (260, 200),
                       hex_parity=parity)


def _linear(u, v, i, j):
    return 0.5 + 0.01 * u - 0.007 * v + 0.03 * i + 0.02 * j


def _scene_for(grid, fn):
    m = np.column_stack([grid.row_vector, grid.column_vector])

    def scene(centres, a, b):
        uv = np.linalg.solve(m, (centres - grid.origin).T).T    # unshifted lattice coordinates
        return fn(uv[:, 0:1], uv[:, 1:2], a, b)
    return scene


@pytest.mark.parametrize('lattice,parity', [('hex', 1), ('hex', 0), ('rect', 1)])
def test_decoder_recovers_linear_scene(lattice, parity):
    g = _grid(lattice, parity)
    white = white_image(g, radius=RADIUS, edge=0.5, dtype=np.float32)
    raw = raw_image(g, _scene_for(g, _linear), radius=RADIUS, edge=0.5, dtype=np.float32)
    dec = Decoder(g, white=white, views=(9, 9))
    lf = dec.decode(raw)
    assert lf.views.shape == (9, 9, 18, 20) and lf.views.dtype == np.float32
    assert list(lf.i_values) == list(range(-4, 5))
    # the corner views (offset 5.66 px) lie outside the 5.3 px disks, the others inside
    b = dec.bright
    assert not b[0, 0] and not b[-1, -1] and b[4, 0] and b[0, 1]
    # usable views: those whose bilinear box (offset +- 1 px) stays inside the disk; (-3, -4)
    # at 5 px is bright but its box reaches 7.8 px
    radius = aperture_radius(white, g)
    assert abs(radius - RADIUS) < 0.3
    np.testing.assert_array_equal(lf.valid, b & clean_views(g, lf.i_values, lf.j_values,
                                                            radius=radius))
    assert lf.valid[4, 4] and lf.valid[4, 1] and not lf.valid[0, 1]
    assert np.array_equal(Decoder(g, white=white, views=(9, 9), strict=False).valid, b)
    vv, uu = np.mgrid[0:18, 0:20]
    scale = float(np.median(lf.views[4, 4] / _linear(uu, vv, 0, 0)))
    for jj, ii in [(4, 4), (3, 6), (7, 1), (4, 8)]:
        i, j = lf.i_values[ii], lf.j_values[jj]
        got = lf.views[jj, ii, 1:-1, 1:-1] / scale
        want = _linear(uu, vv, i, j)[1:-1, 1:-1]
        # a linear scene is exact under bilinear sampling and the hex midpoint average; the
        # fixed-point maps (1/32 px) and the anti-aliased disk edges leave < 1 %
        assert np.max(np.abs(got - want)) < 0.01, (i, j)


@pytest.mark.parametrize('parity', [0, 1])
def test_decoder_blurs_hex_rows_of_both_parities_alike(parity):
    # A shifted hex row is the mean of two lenses half a pitch either side, which adds 1/4 of
    # the second derivative along u to a curved scene; unshifted rows must get the same blur
    # (else cornerSubPix pulls corners towards one row parity: +-0.03 px in v on rendered
    # Lytro views, a bias that moves with j). Without the matching blur the two parities of
    # this scene (levels 0.3-0.7) differ by 1e-3.
    g = _grid('hex', parity)

    def curved(u, v, i, j):
        return 0.3 + 0.004 * (u - 10.0) ** 2 + 0.0 * (v + i + j)

    raw = raw_image(g, _scene_for(g, curved), radius=RADIUS, edge=0.5, vignetting=0.0,
                    peak=1.0, dtype=np.float64)
    lf = Decoder(g, views=(3, 3)).decode(raw)
    vv, uu = np.mgrid[0:18, 0:20]
    excess = (lf.views[1, 1] - curved(uu, vv, 0, 0))[:, 1:-1]       # (18, 18)
    shifted = (np.arange(18) + parity) % 2 == 1
    # both parities: + 1/4 lens^2 x the second derivative / 2 = 0.004 / 4
    np.testing.assert_allclose(excess[shifted], 0.001, atol=2e-5)
    np.testing.assert_allclose(excess[~shifted], 0.001, atol=2e-5)


def test_decoder_white_decodes_flat_and_central_view_matches():
    g = _grid()
    white = white_image(g, radius=RADIUS, edge=0.5, vignetting=0.5)
    dec = Decoder(g, white=white, views=1)
    lf = dec.decode(white)
    inner = lf.views[:, :, 1:-1, 1:-1][lf.valid]
    # devignetting: the white itself becomes uniform (8-bit rounding: < 2 %)
    assert np.std(inner) / np.mean(inner) < 0.02
    cv = dec.central_view(white)
    assert np.allclose(cv, lf.views[1, 1], atol=1e-4), 'fast path = full decode'
    jj, ii = lf.central_index
    assert (jj, ii) == (1, 1)


def test_decoder_decodes_only_the_views_asked_for():
    g = _grid()
    white = white_image(g, radius=RADIUS, edge=0.5, vignetting=0.5)
    dec = Decoder(g, white=white, views=(5, 5))
    raw = np.clip(white * (0.5 + 0.4 * np.sin(np.arange(white.shape[1]) / 7.0)), 0,
                  255).astype(np.uint8)
    full = dec.decode(raw).views
    only = np.zeros((5, 5), bool)
    only[[0, 2, 2, 4], [1, 2, 3, 4]] = True          # any pattern, not a rectangle
    part = dec.decode(raw, only=only).views
    assert np.array_equal(part[only], full[only])     # the same samples, bit for bit
    assert not part[~only].any() and full[~only][dec.bright[~only]].any()
    with pytest.raises(InvalidInputError, match=r'only must have shape \(5, 5\)'):
        dec.decode(raw, only=np.ones((3, 3), bool))


def test_lightfield_ijuv_and_mosaic():
    g = _grid('rect')
    lf = Decoder(g, views=(5, 3)).decode(white_image(g))
    assert lf.views.shape[:2] == (3, 5)
    ijuv = lf.ijuv_of(0, 4, [[1.5, 2.0], [3.0, 4.0]])
    # i from i_values[i_index], j from j_values[j_index], (u, v) passed through
    assert np.array_equal(ijuv, [[2, -1, 1.5, 2.0], [2, -1, 3.0, 4.0]])
    m = mosaic(lf)
    rows, cols = lf.view_shape
    assert m.shape == (3 * rows, 5 * cols)
    assert np.array_equal(m[rows:2 * rows, 4 * cols:], lf.views[1, 4])
    assert np.array_equal(lf.view(2, -1), lf.views[0, 4])


def test_decoder_bayer_colour():
    g = _grid()
    rgb_gain = np.array([0.9, 0.6, 0.3])
    white_m = white_image(g, radius=RADIUS, edge=0.5)
    white_rgb = np.clip(white_m[..., None] * rgb_gain, 0, 255).astype(np.uint8)
    bayer = mosaic_bayer(white_rgb, 'grbg')
    # demosaic(mosaic(x)) is x on smooth regions (bilinear OpenCV demosaic)
    back = demosaic(bayer, 'grbg').astype(float)
    assert np.median(np.abs(back[50:150, 50:150] - white_rgb[50:150, 50:150])) <= 1.0
    dec = Decoder(g, white=bayer, views=1, demosaic='grbg')
    lf = dec.decode(bayer)
    assert lf.views.shape == (3, 3, 18, 20, 3)
    centre = lf.views[1, 1, 2:-2, 2:-2].reshape(-1, 3).mean(axis=0)
    # white balance: each channel normalised to its own white level (ratios kept)
    assert np.allclose(centre / centre[0], rgb_gain / rgb_gain[0], rtol=0.05)


def test_decoder_bad_input():
    g = _grid()
    white = white_image(g)
    dec = Decoder(g, white=white, views=(9, 9))
    with pytest.raises(InvalidInputError, match=r'shape \(200, 260\).*got \(200, 250\)'):
        dec.decode(np.zeros((200, 250), np.uint8))
    with pytest.raises(InvalidInputError, match='white image\'s dtype uint8, got uint16'):
        dec.decode(np.zeros((200, 260), np.uint16))
    with pytest.raises(InvalidInputError, match='dtype uint8, uint16'):
        dec.decode(np.zeros((200, 260), np.int32))
    with pytest.raises(InvalidInputError, match='unsupported Bayer pattern'):
        Decoder(g, demosaic='rgbg')
    with pytest.raises(InvalidInputError, match='odd'):
        Decoder(g, views=(4, 5))
    with pytest.raises(InvalidInputError, match='Bayer'):
        Decoder(g, demosaic='rggb').decode(np.zeros((200, 260, 3), np.uint8))
    # a raw far larger than any real sensor still gives a clear error, not an IndexError
    with pytest.raises(InvalidInputError, match='shape'):
        dec.decode(np.zeros((4000, 6000), np.uint8))


def test_micro_image_index_lens_of_pixel_and_patches():
    g = _grid()
    idx = MicroImageIndex.from_grid(g)
    centres = g.centres()
    rng = np.random.default_rng(2)
    m = rng.integers(0, len(centres), 50)
    off = rng.uniform(-1, 1, (50, 2)) * 0.3 * g.pitch
    # a pixel within 0.43 pitch of a centre belongs to that micro-image
    assert np.array_equal(idx.lens_of_pixel(centres[m] + off), m)
    assert idx.lens_of_pixel([[-100.0, -100.0]])[0] == -1
    raw = np.arange(200 * 260, dtype=np.int64).reshape(200, 260)
    patches, corners = idx.patches(raw, half_size=3)
    assert patches.shape == (len(centres), 7, 7)
    k = 57
    x0, y0 = corners[k]
    # patch pixel (r, c) is raw pixel (x0 + c, y0 + r); the patch centre is the rounded centre
    assert patches[k, 2, 5] == raw[y0 + 2, x0 + 5]
    assert np.array_equal(corners[k] + 3, np.rint(centres[k]))
    with pytest.raises(InvalidInputError, match='radius'):
        MicroImageIndex(centres, g.indices(), 0.0)


def test_lightfield_rejects_mismatched_shapes():
    g = _grid()
    with pytest.raises(InvalidInputError, match='views must have shape'):
        LightField(np.zeros((3, 3, 4, 4)), np.arange(-2, 3), np.arange(-1, 2),
                   np.ones((3, 3), bool), g)


def test_cli_grid_and_decode_write_files(tmp_path):
    import yaml

    from lf_mpc_calib.cli import main
    from lf_mpc_calib.io.images import read_image, write_image
    g = _grid()
    white = white_image(g, noise=2.0, rng=np.random.default_rng(4))
    raw = raw_image(g, _scene_for(g, _linear))
    write_image(tmp_path / 'white.png', white)
    write_image(tmp_path / 'raw.png', raw)
    assert main(['grid', str(tmp_path / 'white.png'), '-o', str(tmp_path / 'grid.yaml'),
                 '--centres', str(tmp_path / 'c.csv'), '--plot', str(tmp_path / 'g.png')]) == 0
    doc = yaml.safe_load(open(tmp_path / 'grid.yaml'))
    est = LensletGrid.from_dict(doc['lenslet_grid'])
    # the grid's own quality figures go with it; the picture to check it by eye
    assert doc['fit']['rms_px'] < 0.15 and doc['fit']['explained'] > 0.95, doc['fit']
    assert (tmp_path / 'g.png').stat().st_size > 10_000
    xy = np.loadtxt(tmp_path / 'c.csv', delimiter=',', skiprows=1)
    assert open(tmp_path / 'c.csv').readline().strip() == 'x,y'
    # every true centre is listed to 0.05 px (noise 2 of 230)
    d = np.min(np.hypot(*(g.centres()[:, None, :] - xy[None, :, :]).transpose(2, 0, 1)), axis=1)
    assert d.max() < 0.05 and est.lattice == 'hex'
    assert main(['decode', str(tmp_path / 'raw.png'), '--white', str(tmp_path / 'white.png'),
                 '-o', str(tmp_path / 'out'), '--views', '5x3']) == 0
    assert (tmp_path / 'out' / 'view_j-1_i+2.png').is_file()
    m = read_image(tmp_path / 'out' / 'mosaic.png')
    rows, cols = est.shape[1], est.shape[0]
    assert m.shape == (3 * rows, 5 * cols)
    assert main(['decode', str(tmp_path / 'raw.png'), '--white', str(tmp_path / 'white.png'),
                 '-o', str(tmp_path / 'out'), '--views', '4x4']) == 1, 'clear error, exit 1'


def _rendered_lytro_views(z, views):
    from lf_mpc_calib.lenslet.estimate import estimate_grid
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('lytro', scale=0.25)
    board = default_board(cam)
    white = quantize(render_white(cam, samples=4), 8)
    tvec = np.array([-(board.cols - 1) * board.square / 2, -(board.rows - 1) * board.square / 2,
                     z])
    raw = quantize(render_raw(cam, board, np.zeros(3), tvec, samples=4), 8)
    grid = estimate_grid(white)
    lf = Decoder(grid, white=white, views=views).decode(raw)
    return lf, cam.ground_truth_model(grid=grid), board.points() + tvec


def _corners_near(view, uv):
    import cv2
    img = cv2.GaussianBlur(view.astype(np.float32), (0, 0), 1.0)
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_COUNT, 50, 1e-4)
    return cv2.cornerSubPix(img, uv.astype(np.float32).reshape(-1, 1, 2).copy(), (3, 3),
                            (-1, -1), crit).reshape(-1, 2)


def test_decoder_rendered_raw_board_where_ground_truth_model_puts_it():
    # board at the focus distance: views of a rendered Lytro-like raw, decoded with the grid
    # estimated from the rendered white image, show each inner corner where the optics' exact
    # MPC model (with that grid's origin) projects it
    from lf_mpc_calib.simulation.optics import preset
    z = preset('lytro').main_lens.focus_distance
    lf, model, pts = _rendered_lytro_views(z, (5, 5))
    for i, j in [(0, 0), (2, -1), (-1, 2)]:
        uv = model.project(pts, np.tile([i, j], (len(pts), 1)))
        d = np.hypot(*(_corners_near(lf.view(i, j), uv) - uv).T)
        # anti-aliased rendering, 8-bit, views of 96 x 84 px with squares of ~7 px
        assert d.max() < 0.3, (i, j, d)
    # the decoder's (i, j, u, v) give rays that meet at the board point: triangulate a corner
    # from its detections in the three views
    ijuv = []
    for i, j in [(0, 0), (2, -1), (-1, 2)]:
        uv = _corners_near(lf.view(i, j), model.project(pts[:1], [[i, j]]))
        ijuv.append([i, j, uv[0, 0], uv[0, 1]])
    p = model.triangulate_point(model.rays(np.array(ijuv)))
    assert np.linalg.norm(p[:2] - pts[0, :2]) < 2e-4, 'within a fraction of a 5.5 mm square'


def test_decoder_rendered_raw_view_indices_follow_the_model():
    # board off focus: views see it with parallax, so the decoder's view indices must be the
    # model's (a swapped or mirrored (i, j) convention moves the corners by ~2 px)
    lf, model, pts = _rendered_lytro_views(0.3, (7, 7))
    for i, j in [(3, -3), (-3, 3), (0, 3)]:
        uv = model.project(pts, np.tile([i, j], (len(pts), 1)))
        got = _corners_near(lf.view(i, j), uv)
        err = np.hypot(*(got - uv).T).mean()
        wrong = model.project(pts, np.tile([j, i], (len(pts), 1)))
        if i != j:
            assert np.hypot(*(got - wrong).T).mean() > 3 * err
        assert err < 0.3, (i, j, err)


@pytest.mark.parametrize('bayer', [None, 'rggb'])
def test_decoder_odd_sizes_and_border_lenses_give_no_index_error(bayer):
    from lf_mpc_calib.lenslet.estimate import estimate_grid
    # odd width and height, lenses cut by every border, the estimated grid reaching past them
    truth = LensletGrid('hex', 9.7, 9.7 * np.sqrt(3) / 2, -0.02, [-2.1, 1.3], (30, 27),
                        (263, 201), hex_parity=0)
    white = white_image(truth, noise=1.0, rng=np.random.default_rng(9))
    grid = estimate_grid(white)
    assert grid.image_size == (263, 201)
    raw = mosaic_bayer(np.repeat(white[..., None], 3, axis=2), bayer) if bayer else white
    lf = Decoder(grid, white=raw, views=(9, 9), demosaic=bayer).decode(raw)
    rows, cols = lf.view_shape
    # every lattice position of the grid has a (possibly dark) sample; nothing is out of range
    assert (rows, cols) == (grid.shape[1], grid.shape[0])
    assert np.all(np.isfinite(lf.views))
