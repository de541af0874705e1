"""``lf-mpc-calib grid WHITE -o grid.yaml [--centres centres.csv]``: the micro-image lattice."""

import sys


def register(subparsers):
    """Add the ``grid`` subcommand."""
    p = subparsers.add_parser(
        'grid', help='fit the micro-image lattice to a white image',
        description='Fit the micro-image lattice to a white image; write its parameters '
                    '(YAML) and optionally every micro-image centre (CSV x,y in raw pixels, '
                    'x right, y down, origin at the centre of pixel (0, 0)).')
    p.add_argument('white', help='white image (8/16-bit PNG or TIFF, or Lytro .lfr/.lfp/.raw: '
                                 'its CFA channels balanced by the file\'s Bayer pattern)')
    p.add_argument('-o', '--output', required=True, help='output YAML file')
    p.add_argument('--centres', help='CSV file for all micro-image centres (columns x,y)')
    p.add_argument('--lattice', choices=('auto', 'hex', 'rect'), default='auto')
    p.add_argument('--dark', metavar='FILE',
                   help='dark frame (same size and bit depth, no light): its black level is '
                        'subtracted from the white before anything else')
    p.add_argument('--plot', metavar='PNG',
                   help='picture of the grid over a crop of the white image, to check by eye')
    p.set_defaults(func=run)


def run(args):
    """Estimate the grid and write the files; returns the exit code."""
    import numpy as np
    import yaml

    from lf_mpc_calib.io.images import read_image
    from lf_mpc_calib.io.lytro import is_lytro_file
    from lf_mpc_calib.lenslet.estimate import estimate_grid_with_quality
    white = read_image(args.white)
    camera_metadata = None
    if is_lytro_file(args.white):
        from lf_mpc_calib.io.lytro import read_lytro_metadata
        from lf_mpc_calib.lenslet.white_image import bayer_neutral
        camera_metadata = read_lytro_metadata(args.white).to_dict()
        white = bayer_neutral(white, camera_metadata['bayer'])
    dark = None
    if args.dark:
        from lf_mpc_calib.lenslet.dark_frame import subtract_dark
        dark = read_image(args.dark)
        white = subtract_dark(white, dark)
    est = estimate_grid_with_quality(white, lattice=args.lattice)
    grid = est.grid
    from lf_mpc_calib.lenslet.defects import find_defects
    defects = find_defects(white if white.ndim == 2 else white.mean(axis=2), grid.centres(),
                           est.quality.nn_px, dark=None if dark is None or dark.ndim != 2
                           else dark)
    doc = {'lenslet_grid': grid.to_dict(),
           'fit': {'spots': int(len(est.centres)), 'inliers': int(est.inliers.sum()),
                   'rms_residual_px': float(est.rms_px), **est.quality.as_dict()},
           'defects': {'hot_pixels': defects.hot.tolist(), 'dead_pixels': defects.dead.tolist(),
                       'dusty_micro_images': defects.dusty.round(2).tolist()}}
    if camera_metadata is not None:
        doc['camera_metadata'] = camera_metadata
    from lf_mpc_calib.io.atomic import open_atomically
    if args.plot:
        from lf_mpc_calib.report.grid import plot_grid
        plot_grid(white, grid, args.plot, measured=est.centres)
    if args.centres:
        with open_atomically(args.centres, 'w') as f:
            np.savetxt(f, grid.centres(), delimiter=',', header='x,y', comments='', fmt='%.4f')
    with open_atomically(args.output, 'w') as f:     # last: written only when all else was
        yaml.safe_dump(doc, f, sort_keys=False)
    layout = '' if grid.layout == 'rows' else ' (column-shifted: lens rows run down the image)'
    print(f'{grid.lattice} lattice{layout}: {grid.shape[0]} x {grid.shape[1]} lenses, pitch '
          f'{grid.pitch:.4f} px, row spacing {grid.row_spacing:.4f} px, rotation '
          f'{np.degrees(grid.rotation):.4f} deg; {len(est.centres)} spots, rms residual '
          f'{est.rms_px:.3f} px -> {args.output}', file=sys.stdout)
    q = est.quality
    print(f'centres: {q.estimator} (map peaks, or half-level centroids for flat-topped '
          f'micro-images); the spots scatter {q.spot_scatter_px:.3f} px about a smooth lattice '
          f'(row second differences); the lattice explains them to {q.lattice_error_px:.3f} px '
          f'beyond that', file=sys.stdout)
    print(f'defects: {defects.summary()}', file=sys.stdout)
    return 0
