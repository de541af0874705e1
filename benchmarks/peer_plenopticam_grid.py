"""
PlenoptiCam's micro-image centre estimation on one white image, for bench_grid.py's side by side.

Runs in a separate environment that has plenopticam (never a dependency of lf_mpc_calib):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install --only-binary :all: plenopticam \
        'scipy<1.12' 'numpy<2'
    /tmp/peers/bin/python benchmarks/peer_plenopticam_grid.py WHITE.png OUT.json [--method M]

Its documented pipeline: PitchEstimator -> CentroidExtractor -> CentroidRefiner ->
CentroidSorter -> GridFitter (method 'grid-fit', PlenoptiCam's most accurate; 'area' or 'peak'
skip the grid fit). Writes {"centres_xy": [[x, y], ...], "seconds": t, "method": M} (x right,
y down, raw pixels; PlenoptiCam lists (row, column)).
"""

import argparse
import json
import time

import numpy as np
from plenopticam.cfg import PlenopticamConfig
from plenopticam.lfp_calibrator import (CentroidExtractor, CentroidRefiner, CentroidSorter,
                                        GridFitter, PitchEstimator)
from plenopticam.misc import PlenopticamStatus, load_img_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('white')
    ap.add_argument('out')
    ap.add_argument('--method', default='grid-fit', choices=('area', 'peak', 'grid-fit'))
    args = ap.parse_args()
    cfg, sta = PlenopticamConfig(), PlenopticamStatus()
    cfg.params[cfg.cal_meth] = args.method
    img = load_img_file(args.white)
    if img.ndim == 3:
        img = img[..., :3].mean(axis=2)
    t = time.perf_counter()
    pitch = PitchEstimator(img, cfg, sta)
    pitch.main()
    ext = CentroidExtractor(img, cfg, sta, pitch.M)
    ext.main()
    ref = CentroidRefiner(ext.peak_img, ext.centroids, cfg, sta, pitch.M)
    ref.main()
    srt = CentroidSorter(ref.centroids_refined, cfg, sta)
    srt.main()
    mics = srt.mic_list
    if args.method == 'grid-fit':
        cfg.calibs[cfg.pat_type] = srt.pattern
        fit = GridFitter(coords_list=mics, cfg=cfg, sta=sta, arr_shape=img.shape)
        fit.main()
        mics = fit.grid_fit
    seconds = time.perf_counter() - t
    yx = np.asarray(mics, dtype=float)[:, :2]
    with open(args.out, 'w') as f:
        json.dump({'centres_xy': yx[:, ::-1].tolist(), 'seconds': seconds,
                   'method': args.method}, f)


if __name__ == '__main__':
    main()
