"""Tests of the Raytrix R12 conversion (and calibration) on the real data set, if present."""

from pathlib import Path

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.raytrix import lens_type, read_r12

DATA = Path(__file__).resolve().parents[1].parent / 'shared' / 'data' / 'raytrix-r12a'
CSV = DATA / 'r12a_observations.csv'
needs_data = pytest.mark.skipif(not CSV.is_file(), reason=f'{CSV} is not there')


def test_lens_type_pattern():
    # ((l mod 2) + k) mod 3: along a row the type cycles 0, 1, 2; the next row starts one later
    kl = np.array([[0, 0], [1, 0], [2, 0], [3, 0], [0, 1], [0, 2], [1, 1]])
    np.testing.assert_array_equal(lens_type(kl), [0, 1, 2, 0, 1, 0, 2])
    with pytest.raises(InvalidInputError, match='n_types must be >= 2'):
        lens_type(kl, n_types=1)


def test_read_r12_bad_header(tmp_path):
    p = tmp_path / 'x.csv'
    p.write_text('a,b\n1,2\n')
    with pytest.raises(InvalidInputError, match='header must start with frame,corner_id'):
        read_r12(p)
    with pytest.raises(InvalidInputError, match="centres must be one of"):
        read_r12(p, centres='fitted')


@needs_data
def test_read_r12_convention():
    d = read_r12(CSV)
    obs = d.observations
    assert len(obs) == 18390  # README: 18 390 rays
    np.testing.assert_array_equal(obs.pose_ids, [0, 1, 2, 3] + list(range(5, 16)))
    # (u, v) relative to the centre: inside a micro-image of pitch 23.3 px (radius < 11.7 px)
    assert np.abs(obs.ijuv[:, 2:]).max() < 11.7
    # absolute corner = centre + offset, exactly (the convention of lf_mpc_calib.model)
    np.testing.assert_allclose(obs.ijuv[:, :2] + obs.ijuv[:, 2:], d.corner_px, atol=1e-9)
    # corner_id = row*9 + col, 10 mm squares
    np.testing.assert_allclose(obs.board[:, 0], (obs.point % 9) * 0.01, atol=1e-9)
    np.testing.assert_allclose(obs.board[:, 1], (obs.point // 9) * 0.01, atol=1e-9)


@needs_data
def test_read_r12_grid_matches_detected_centres():
    d = read_r12(CSV)
    g = read_r12(CSV, centres='grid')
    # the metadata's hexagonal grid reproduces the detected centres to < 1 px (measured 0.76)
    diff = g.observations.ijuv[:, :2] - d.observations.ijuv[:, :2]
    assert np.abs(diff).max() < 1.0
    assert d.lenslet_grid.shape == (176, 152) and d.image_size == (4080, 3068)
