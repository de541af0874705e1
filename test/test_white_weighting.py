"""White-weighted view samples: the decoder's sample positions undo the white's falloff."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.decode import Decoder
from lf_mpc_calib.lenslet.white_weighting import white_centroid, white_centroid_positions
from lf_mpc_calib.simulation.optics import preset
from lf_mpc_calib.simulation.render import render_white

CAMERA = preset('lytro', scale=0.1)     # the full-size optics (cos^4 over the micro-image)


@pytest.fixture(scope='module')
def white():
    return render_white(CAMERA, samples=16).astype(np.float32)


def lens_centres(grid):
    cols, rows = grid.shape
    l_, k = np.mgrid[2:rows - 2, 2:cols - 2]
    return grid.centres_of(np.column_stack([k.ravel(), l_.ravel()]))


@pytest.mark.parametrize('offset', [-3, 3])
def test_corrected_positions_put_the_white_weighted_centroid_on_the_offset(white, offset):
    c = lens_centres(CAMERA.lenslet_grid())
    x, y = c[:, 0] + offset, c[:, 1]
    before, _, _ = white_centroid(white.astype(np.float64), x, y)
    px, py = white_centroid_positions(white, x, y)
    after, after_y, _ = white_centroid(white.astype(np.float64), px.astype(float),
                                       py.astype(float))
    # the white falls off from the micro-image centre: the plain sample leans inwards
    assert np.sign(offset) * np.mean(before - x) < -0.004
    assert np.median(np.abs(after - x)) < 1e-4 and np.median(np.abs(after_y - y)) < 1e-4


def test_decoded_views_of_a_ramp_read_the_ramp_at_their_offsets(white):
    # a scene whose value is linear in raw x: a view sample reads it where its rays are
    grid = CAMERA.lenslet_grid()
    h, w = white.shape
    frame = (white * (2.0 + 0.01 * np.arange(w, dtype=np.float32)[None, :])).astype(np.float32)
    cols, rows = grid.shape
    v, u = np.mgrid[0:rows, 0:cols]
    e_r = grid.row_vector / grid.pitch
    slopes = {}
    for corrected in (False, True):
        dec = Decoder(grid, white=white, views=(7, 7), white_centroids=corrected)
        with np.errstate(divide='ignore', invalid='ignore'):     # dark border samples
            ratio = dec.decode(frame).views / dec.decode(white).views
        errors = []
        for i in (-3, -2, 2, 3):
            ii, jj = list(dec.i_values).index(i), list(dec.j_values).index(0)
            assert dec.valid[jj, ii]
            x = grid.origin[0] + u * grid.row_vector[0] + v * grid.column_vector[0] + i * e_r[0]
            errors.append(np.mean(((ratio[jj, ii] - 2.0) / 0.01 - x)[2:-2, 2:-2]))
        slopes[corrected] = np.polyfit([-3, -2, 2, 3], errors, 1)[0]      # px per view
    assert slopes[False] < -0.0015                  # 0.2 % of the offset, inwards
    assert abs(slopes[True]) < 0.35 * abs(slopes[False])


def test_bad_input_is_refused(white):
    with pytest.raises(InvalidInputError, match='2-D'):
        white_centroid_positions(white[None], np.zeros(2), np.zeros(2))
    with pytest.raises(InvalidInputError, match='one shape'):
        white_centroid_positions(white, np.zeros(2), np.zeros(3))
