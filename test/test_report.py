"""Tests of the calibration report (text summary and PNG plots)."""

from types import SimpleNamespace

import numpy as np

from lf_mpc_calib.report.calibration import summary_text, write_report
from lf_mpc_calib.simulation.observations import (
    board_points, noise_sweep_poses, paper_camera, view_grid)

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def _fake_result(rng, view_ids):
    model = paper_camera()
    board = board_points(4, 3)
    rv, tr = noise_sweep_poses(board)
    res = rng.normal(0, 0.5, (200, 2))
    return SimpleNamespace(
        model=model.replace(k_i=model.k_i * 1.001), rotation_vectors=rv, translations=tr,
        pose_ids=np.array([0, 1, 2]), residuals_px=res,
        rms_reprojection_px=float(np.sqrt((res ** 2).sum(1).mean())),
        rms_ray_reprojection_mm=0.0123, per_pose_rms_px=np.array([0.4, 0.5, 0.6]),
        view_ids=view_ids, per_view_rms_px=rng.uniform(0.3, 0.7, len(view_ids)),
        stddev={'k_i': 1.5e-7, 'k_u': 2e-6}, iterations=7, converged=True,
        message='`ftol` termination condition is satisfied.', fixed=('k_1', 'k_2'),
        method='exact'), board


def test_summary_text_lists_parameters_and_errors():
    result, _ = _fake_result(np.random.default_rng(0), view_grid(3))
    text = summary_text(result, truth=paper_camera(), title='sim')
    assert 'k_i' in text and '1.5e-07' in text
    # k_i is off by 0.1 % by construction: the relative error column says so
    assert '0.1000%' in text
    assert 'fixed' in text.splitlines()[9]  # k_1 row (title, rule, header, 6 intrinsics)
    assert f'{result.rms_reprojection_px:.6g} px' in text
    assert 'iterations: 7, converged: True' in text
    assert 'pose   2: 0.6000' in text


def test_write_report_conventional_writes_pngs(tmp_path):
    result, board = _fake_result(np.random.default_rng(1), view_grid(5))
    paths = write_report(result, tmp_path / 'r', board=board, title='conventional')
    names = sorted(p.name for p in paths)
    assert names == ['per_view_rms.png', 'poses.png', 'residuals.png', 'summary.txt']
    for p in paths:
        if p.suffix == '.png':
            data = p.read_bytes()
            # a real image, not an empty file: PNG signature and more than a few kB of pixels
            assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_write_report_focused_scatter(tmp_path):
    rng = np.random.default_rng(2)
    centres = rng.uniform(0, 4000, (300, 2))  # micro-image centres: not a small integer grid
    result, _ = _fake_result(rng, centres)
    paths = write_report(result, tmp_path, board=None)
    per_view = [p for p in paths if p.name == 'per_view_rms.png'][0]
    assert per_view.read_bytes()[:8] == PNG_MAGIC and per_view.stat().st_size > 5000
