"""
``lf-mpc-calib grid WHITE -o grid.yaml [--centres centres.csv]``: the micro-image lattice.

``grid --import FILE.xml -o grid.yaml``: a Raytrix RayCalibData file as a grid file (with its
lens-type map); ``grid WHITE --check FILE.xml``: how far that file's centres are from the
white's grid.
"""

import os
import sys


def register(subparsers):
    """Add the ``grid`` subcommand."""
    p = subparsers.add_parser(
        'grid', help='fit the micro-image lattice to a white image',
        description='Fit the micro-image lattice to a white image; write its parameters '
                    '(YAML) and optionally every micro-image centre (CSV x,y in raw pixels, '
                    'x right, y down, origin at the centre of pixel (0, 0)).')
    p.add_argument('white', nargs='?',
                   help='white image (8/16-bit PNG or TIFF, or Lytro .lfr/.lfp/.raw: '
                        'its CFA channels balanced by the file\'s Bayer pattern)')
    p.add_argument('-o', '--output', help='output YAML file (required, except with --check)')
    p.add_argument('--import', dest='grid', metavar='FILE.xml',
                   help='read the grid from a Raytrix RayCalibData XML instead of a white image '
                        '(with its lens types and their virtual-depth ranges)')
    p.add_argument('--image', dest='raw', metavar='RAW',
                   help='with --import: a raw image of the camera, for the image size the XML '
                        'does not hold (default: the image beside the XML with its stem)')
    p.add_argument('--align', action='store_true',
                   help='with --import: move the lattice onto the micro-images of the raw '
                        'image (--image or the one beside the XML): a crop or region of '
                        'interest of the sensor shifts them from the file\'s offset')
    p.add_argument('--check', metavar='FILE.xml',
                   help='with WHITE: report how far the RayCalibData file\'s centres are from '
                        'the white\'s grid (px)')
    p.add_argument('--centres', help='CSV file for all micro-image centres (columns x,y)')
    p.add_argument('--lattice', choices=('auto', 'hex', 'rect'), default='auto')
    p.add_argument('--dark', metavar='FILE',
                   help='dark frame (same size and bit depth, no light): its black level is '
                        'subtracted from the white before anything else')
    p.add_argument('--plot', metavar='PNG',
                   help='picture of the grid over a crop of the white image, to check by eye')
    p.set_defaults(func=run)


def _usage(args):
    from lf_mpc_calib.errors import UsageError
    if args.grid and args.white:
        raise UsageError('give a WHITE image or --import FILE.xml, not both')
    if not args.grid and not args.white:
        raise UsageError('give a WHITE image, or --import FILE.xml')
    if args.grid and args.check:
        raise UsageError('--check compares a RayCalibData file with a WHITE image\'s grid; '
                         'give WHITE, not --import')
    if args.raw and not args.grid:
        raise UsageError('--image gives the image size for --import; without --import the '
                         'size is the white\'s')
    if args.align and not args.grid:
        raise UsageError('--align moves an imported lattice (--import FILE.xml) onto a raw '
                         'image; a WHITE\'s grid is measured on it already')
    if not args.output and not args.check:
        raise UsageError('-o/--output is required (except with --check)')
    if args.check and args.output and os.path.exists(args.output) and \
            os.path.samefile(args.check, args.output):
        raise UsageError(f'--output {args.output} would overwrite the input --check '
                         f'{args.check}; write the result elsewhere')


def _image_size(path):
    from lf_mpc_calib.io.images import read_image
    img = read_image(path)
    return int(img.shape[1]), int(img.shape[0])


def run_import(args):
    """``grid --import FILE.xml``: the RayCalibData file as a grid file."""
    import numpy as np
    import yaml

    from lf_mpc_calib.io.atomic import open_atomically
    from lf_mpc_calib.io.raytrix_xml import read_raytrix_xml
    size = _image_size(args.raw) if args.raw else None
    rt = read_raytrix_xml(args.grid, size)
    grid = rt.grid
    imported = {'format': 'Raytrix RayCalibData', 'file': os.path.basename(args.grid),
                'central_lens_px': [float(x) for x in rt.centre],
                'lens_border_px': rt.lens_border, 'tcp_virtual_depth': rt.tcp}
    image = _raw_image(args)
    if args.align and image is None:
        from lf_mpc_calib.errors import UsageError
        raise UsageError('--align needs a raw image: give --image RAW (none lies beside '
                         f'{args.grid})')
    if image is not None:
        grid = _aligned(grid, image, args.align, imported)
    doc = {'lenslet_grid': grid.to_dict(), 'lens_types': rt.lens_types, 'imported': imported}
    if args.plot:
        from lf_mpc_calib.report.grid import plot_grid
        shown = np.zeros(grid.image_size[::-1]) if image is None else image
        plot_grid(shown.mean(axis=2) if shown.ndim == 3 else shown, grid, args.plot)
    if args.centres:
        with open_atomically(args.centres, 'w') as f:
            np.savetxt(f, grid.centres(), delimiter=',', header='x,y', comments='', fmt='%.4f')
    with open_atomically(args.output, 'w') as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    counts = np.bincount(rt.types, minlength=len(rt.depth_ranges))
    print(f'RayCalibData {args.grid}: hex lattice, {grid.shape[0]} x {grid.shape[1]} lenses in '
          f'{grid.image_size[0]} x {grid.image_size[1]} px, pitch {grid.pitch:.4f} px, rotation '
          f'{np.degrees(grid.rotation):.4f} deg, central lens at ({rt.centre[0]:.3f}, '
          f'{rt.centre[1]:.3f}) px -> {args.output}', file=sys.stdout)
    print('lens types: ' + ', '.join(
        f'{t}: {int(n)} lenses, virtual depth {a:g}..{b:g}'
        for t, (n, (a, b)) in enumerate(zip(counts, rt.depth_ranges))), file=sys.stdout)
    return 0


def _raw_image(args):
    """The raw image of ``--image``, else the one beside the XML with its stem, or None."""
    from pathlib import Path
    from lf_mpc_calib.io.images import read_image
    from lf_mpc_calib.io.raytrix_xml import IMAGE_SUFFIXES
    if args.raw:
        return read_image(args.raw)
    near = [Path(args.grid).with_suffix(s) for s in IMAGE_SUFFIXES]
    near = [p for p in near if p.is_file()]
    return read_image(near[0]) if near else None


def _aligned(grid, image, align, imported):
    """``grid``, moved onto ``image``'s micro-images when ``align``; the measured shift goes
    into ``imported`` and is printed (with advice when over ALIGNED_PX and not aligned)."""
    import numpy as np
    from lf_mpc_calib.lenslet.lattice_shift import lattice_shift, shifted
    found = lattice_shift(image, grid)
    dx, dy = (float(v) for v in found.shift)
    imported['measured_shift_px'] = [dx, dy]
    text = (f'the file\'s centres sit ({dx:+.2f}, {dy:+.2f}) px from the image\'s micro-images '
            f'(their mean edge is point-symmetric to {found.symmetry:.2f}, {found.lenses} '
            'micro-images)')
    if align:
        imported['aligned'] = True
        print(f'{text}: moved onto them', file=sys.stdout)
        return shifted(grid, found.shift)
    advice = ('; --align moves them onto them' if np.hypot(dx, dy) > ALIGNED_PX else '')
    print(f'{text}{advice}', file=sys.stdout)
    return grid


ALIGNED_PX = 0.3
"""A file's centres this far from the image's micro-images are reported with advice."""


def check_against(grid, path):
    """(distances (N,) px of the RayCalibData file's centres inside the image from the nearest
    centre of ``grid``, the file's RaytrixGrid)."""
    from scipy.spatial import cKDTree

    from lf_mpc_calib.io.raytrix_xml import read_raytrix_xml
    rt = read_raytrix_xml(path, grid.image_size)
    theirs = rt.grid.centres()
    d, _ = cKDTree(grid.centres()).query(theirs)
    w, h = grid.image_size
    margin = grid.pitch
    inside = (theirs[:, 0] > margin) & (theirs[:, 0] < w - 1 - margin) & \
        (theirs[:, 1] > margin) & (theirs[:, 1] < h - 1 - margin)
    return d[inside], rt


def run(args):
    """Estimate the grid and write the files; returns the exit code."""
    _usage(args)
    if args.grid:
        return run_import(args)
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
    if args.check:
        d, rt = check_against(grid, args.check)
        doc['check'] = {'file': os.path.basename(args.check), 'lenses': int(len(d)),
                        'rms_px': float(np.sqrt(np.mean(d ** 2))) if len(d) else None,
                        'max_px': float(d.max()) if len(d) else None}
    if args.plot:
        from lf_mpc_calib.report.grid import plot_grid
        plot_grid(white, grid, args.plot, measured=est.centres, estimate=est)
    if args.centres:
        with open_atomically(args.centres, 'w') as f:
            np.savetxt(f, grid.centres(), delimiter=',', header='x,y', comments='', fmt='%.4f')
    if args.output:
        with open_atomically(args.output, 'w') as f:     # last: written only when all else was
            yaml.safe_dump(doc, f, sort_keys=False)
    layout = '' if grid.layout == 'rows' else ' (column-shifted: lens rows run down the image)'
    print(f'{grid.lattice} lattice{layout}: {grid.shape[0]} x {grid.shape[1]} lenses, pitch '
          f'{grid.pitch:.4f} px, row spacing {grid.row_spacing:.4f} px, rotation '
          f'{np.degrees(grid.rotation):.4f} deg; {len(est.centres)} spots, rms residual '
          f'{est.rms_px:.3f} px' + (f' -> {args.output}' if args.output else ''),
          file=sys.stdout)
    q = est.quality
    print(f'centres: {q.estimator} (map peaks, or half-level centroids for flat-topped '
          f'micro-images); the spots scatter {q.spot_scatter_px:.3f} px about a smooth lattice '
          f'(row second differences); the lattice explains them to {q.lattice_error_px:.3f} px '
          f'beyond that', file=sys.stdout)
    print(f'defects: {defects.summary()}', file=sys.stdout)
    if args.check:
        c = doc['check']
        if c['lenses']:
            print(f'--check {args.check}: its {c["lenses"]} centres inside the image are '
                  f'{c["rms_px"]:.3f} px RMS, {c["max_px"]:.3f} px at most, from the nearest '
                  f'centre of the white\'s grid (pitch {grid.pitch:.4f} px against the file\'s '
                  f'{rt.grid.pitch:.4f} px)', file=sys.stdout)
        else:
            print(f'--check {args.check}: none of its centres lies inside the image',
                  file=sys.stdout)
    return 0
