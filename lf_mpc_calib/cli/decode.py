"""``lf-mpc-calib decode RAW --white WHITE -o DIR``: sub-aperture views and their mosaic."""

import re
import sys

from lf_mpc_calib.errors import InvalidInputError


def register(subparsers):
    """Add the ``decode`` subcommand."""
    p = subparsers.add_parser(
        'decode', help='decode a raw lenslet frame into sub-aperture views',
        description='Decode a raw frame of a conventional plenoptic camera into sub-aperture '
                    'views (view_j+J_i+I.png) and a mosaic (mosaic.png), devignetted by the '
                    'white image.')
    p.add_argument('raw', help='raw frame (8/16-bit PNG or TIFF, or Lytro .lfr/.lfp/.raw)')
    p.add_argument('--white', required=True,
                   help='white image of the same camera; for a Lytro frame also a folder of '
                        'Lytro white images (the one of its serial, nearest zoom and focus)')
    p.add_argument('-o', '--output', required=True, help='output folder')
    p.add_argument('--grid', help='grid YAML (from `lf-mpc-calib grid`); estimated if absent')
    p.add_argument('--views', default='9x9', help='view grid NIxNJ (odd), default 9x9')
    p.add_argument('--bayer', choices=('rggb', 'bggr', 'gbrg', 'grbg'),
                   help='Bayer pattern of raw and white (default for Lytro files: theirs)')
    p.add_argument('--lattice', choices=('auto', 'hex', 'rect'), default='auto')
    p.add_argument('--bits', type=int, choices=(8, 16), default=8, help='PNG bit depth')
    p.add_argument('--dark', metavar='FILE',
                   help='dark frame (same size and bit depth, no light): subtracted from the raw '
                        'frame and the white first; its hot pixels are left out')
    p.set_defaults(func=run)


def _parse_views(text):
    m = re.fullmatch(r'\s*(\d+)\s*[xX]\s*(\d+)\s*', text)
    if not m:
        raise InvalidInputError(f'--views must look like 9x9, got {text!r}')
    return int(m.group(1)), int(m.group(2))


def decode_figures(decoder):
    """
    One line: the share of valid samples in the usable views (gain > 0: lit, no defect) and
    the vignetting the white corrected there (5th-95th percentile of the devignetting gain;
    the white decoded by its own gains is flat by construction, so this is what to look at).
    """
    import numpy as np
    gain = decoder.gains()[decoder.valid]                        # (K, rows, cols[, C])
    ok = gain > 0
    if not ok.any():
        return 'valid samples: none in the usable views'
    p5, p95 = np.percentile(gain[ok], [5, 95])
    return (f'valid samples: {100 * float(ok.mean()):.1f} % of the usable views (the rest '
            f'unlit or defective, decoded as 0); vignetting corrected: gain {p5:.2f}-{p95:.2f} '
            f'x (5th-95th percentile)')


def run(args):
    """Decode and write the views; returns the exit code."""
    import numpy as np
    import yaml

    from lf_mpc_calib.io.images import read_image, to_uint, write_image
    from lf_mpc_calib.io.lytro import is_lytro_file
    from lf_mpc_calib.lenslet.decode import Decoder, mosaic
    from lf_mpc_calib.lenslet.estimate import estimate_grid
    views = _parse_views(args.views)
    raw = read_image(args.raw)
    white_file, camera_metadata = args.white, None
    if is_lytro_file(args.raw):
        from lf_mpc_calib.io.lytro import lytro_dataset
        white_file, bayer, camera_metadata = lytro_dataset([args.raw], args.white)
        args.bayer = args.bayer or bayer
    white = read_image(white_file)
    dark = None
    if args.dark:
        from lf_mpc_calib.lenslet.dark_frame import check_dark, minus_dark
        dark = read_image(args.dark)
        check_dark(white, dark)          # the white, not the frame: a dim scene is a frame
        raw, white = minus_dark(raw, dark, 'raw frame'), minus_dark(white, dark, 'white')
    from lf_mpc_calib.lenslet.frame_check import frame_warnings
    for warning in frame_warnings(raw, white):
        print(f'warning: {args.raw}: {warning}', file=sys.stderr)
    if args.grid:
        from lf_mpc_calib.io.raw_dataset import load_grid
        grid = load_grid(args.grid)
    else:
        grey = white
        if args.bayer:
            from lf_mpc_calib.lenslet.demosaic import demosaic
            grey = demosaic(white, args.bayer)
        grid = estimate_grid(grey, lattice=args.lattice)
    bad = None
    if args.bayer is None and white.ndim == 2:
        from lf_mpc_calib.lenslet.defects import find_defects
        from lf_mpc_calib.lenslet.estimate import neighbour_distance
        defects = find_defects(white, grid.centres(), neighbour_distance(grid), dark=dark)
        bad = defects.mask
        print(f'defects: {defects.summary()}')
    dec = Decoder(grid, white=white, views=views, demosaic=args.bayer, bad_pixels=bad)
    lf = dec.decode(raw)
    from lf_mpc_calib.cli.paths import files_output
    with files_output(args.output) as out:          # all of the views, or none of them
        top = float(np.percentile(lf.views[lf.valid], 99.9)) if lf.valid.any() else 1.0
        for jj, j in enumerate(lf.j_values):
            for ii, i in enumerate(lf.i_values):
                write_image(out / f'view_j{j:+d}_i{i:+d}.png',
                            to_uint(lf.views[jj, ii], bits=args.bits, top=top))
        write_image(out / 'mosaic.png', to_uint(mosaic(lf), bits=args.bits, top=top))
        doc = {'lenslet_grid': grid.to_dict(),
               'views': {'i': [int(v) for v in lf.i_values], 'j': [int(v) for v in lf.j_values],
                         'valid': lf.valid.astype(int).tolist()}}
        if camera_metadata is not None:
            doc['camera_metadata'] = camera_metadata
        from lf_mpc_calib.io.atomic import open_atomically
        with open_atomically(out / 'grid.yaml', 'w') as f:
            yaml.safe_dump(doc, f, sort_keys=False)
    print(f'{lf.views.shape[0] * lf.views.shape[1]} views of {lf.view_shape[1]} x '
          f'{lf.view_shape[0]} px ({int(lf.valid.sum())} usable) -> {args.output}')
    print(decode_figures(dec))
    return 0
