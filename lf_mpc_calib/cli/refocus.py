"""
``lf-mpc-calib refocus RAW --calibration CAL --distance M -o OUT.png``: synthetic refocus.

Decodes RAW (as ``depth`` does: --white, default white.png beside RAW) and averages the usable
views shifted by the calibrated model's exact disparity for a point at --distance metres
(:func:`lf_mpc_calib.measurement.depth.refocus`): that plane is sharp, others blur. The
image is the rectified central view's geometry, written 8- or 16-bit (--bits).
"""

from lf_mpc_calib.cli.numbers import real
from lf_mpc_calib.cli.depth import implied_inputs  # noqa: F401 - the same as depth's


def register(subparsers):
    """Add the ``refocus`` subcommand."""
    from lf_mpc_calib.cli.depth import add_decoding_arguments
    p = subparsers.add_parser(
        'refocus', help='refocus a raw frame at a metric distance (shift-and-sum)',
        description='Shift-and-sum refocusing of a raw light-field frame at a distance in '
                    'metres through the calibrated model.')
    p.add_argument('raw', help='raw frame (8/16-bit PNG or TIFF)')
    add_decoding_arguments(p)
    p.add_argument('--distance', type=real(0, 1e4, low_open=True), required=True, metavar='M',
                   help='distance in focus (metres along the optical axis)')
    p.add_argument('-o', '--output', required=True, metavar='OUT.png', help='refocused image')
    p.add_argument('--bits', type=int, choices=(8, 16), default=8, help='PNG bit depth')
    p.set_defaults(func=run)


def run(args):
    """Refocus and write the image; returns the exit code."""
    from lf_mpc_calib.cli.depth import decode_frame
    from lf_mpc_calib.io.images import to_uint, write_image
    from lf_mpc_calib.measurement.depth import refocus
    measurer, raw, meas = decode_frame(args)
    image = refocus(meas.lightfield, measurer.model, args.distance)
    top = {'uint8': 255.0, 'uint16': 65535.0}.get(str(raw.dtype), 1.0)
    write_image(args.output, to_uint(image, bits=args.bits, top=top))
    print(f'refocused {len(meas.lightfield.views[meas.lightfield.valid])} views at '
          f'{args.distance:g} m -> {args.output}')
    return 0
