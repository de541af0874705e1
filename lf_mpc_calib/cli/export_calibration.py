"""
``lf-mpc-calib export-calibration cal.yaml --format lftoolbox -o CalInfo.json``: our model as
the toolbox's H (exact where the toolbox can represent it, else fitted and reported).
"""


def register(subparsers):
    """Add the ``export-calibration`` subcommand."""
    from lf_mpc_calib.cli.numbers import real
    from lf_mpc_calib.io.lftoolbox import DEFAULT_MAX_RAY_ERROR_MM
    p = subparsers.add_parser(
        'export-calibration', help='a calibration file as an LFToolbox CalInfo.json',
        description='Write a conventional calibration as a MATLAB Light Field Toolbox '
                    '(v0.5.3) CalInfo.json: H, distortion, poses and LFSize.')
    p.add_argument('calibration', metavar='CAL', help='calibration file (YAML)')
    p.add_argument('--format', choices=('lftoolbox',), default='lftoolbox',
                   help='the format written (only lftoolbox)')
    p.add_argument('-o', '--output', required=True, help='CalInfo.json to write')
    p.add_argument('--max-ray-error-mm', type=real(0, 1e3, low_open=True),
                   default=DEFAULT_MAX_RAY_ERROR_MM,
                   help='where the toolbox cannot represent the model exactly (radial terms '
                        'with view shear), refuse a fitted H whose rays miss ours by more '
                        f'than this (mm, default {DEFAULT_MAX_RAY_ERROR_MM:g})')
    p.set_defaults(func=run)


def run(args):
    """Export, print whether exact (else the residual), write the file."""
    import datetime

    from lf_mpc_calib import __version__
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.io.lftoolbox import calinfo_document, describe_import, write_calinfo
    if not args.max_ray_error_mm > 0:
        raise InvalidInputError(f'--max-ray-error-mm must be > 0, got {args.max_ray_error_mm}')
    cal = load_calibration(args.calibration)
    now = datetime.datetime.now().strftime('%d%b%Y_%H%M%S')
    doc, figures = calinfo_document(cal, time_str=now, max_ray_error_mm=args.max_ray_error_mm,
                                    version=__version__)
    write_calinfo(args.output, doc)
    how = 'exact' if figures['exact'] else 'fitted: ' + describe_import(figures).replace(
        "the MPC rays miss H's", "H's rays miss ours")
    print(f'exported {args.calibration} as H ({how})')
    print(f'wrote {args.output}')
    return 0
