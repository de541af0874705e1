"""
``lf-mpc-calib import-calibration CalInfo.json -o cal.yaml``: an LFToolbox calibration as the
MPC model that reproduces its rays best (refused beyond ``--max-ray-error-mm``).
"""


def register(subparsers):
    """Add the ``import-calibration`` subcommand."""
    from lf_mpc_calib.cli.numbers import real
    from lf_mpc_calib.io.lftoolbox import DEFAULT_MAX_RAY_ERROR_MM
    p = subparsers.add_parser(
        'import-calibration', help='an LFToolbox CalInfo.json as a calibration file',
        description='Read a MATLAB Light Field Toolbox (v0.5 - v0.5.3) CalInfo.json and write '
                    'the MPC calibration whose rays are closest to those of its H and '
                    'distortion over the decoded samples of its LFSize.')
    p.add_argument('calibration', metavar='CalInfo.json', help='the toolbox\'s file')
    p.add_argument('-o', '--output', required=True, help='calibration file to write (YAML)')
    p.add_argument('--max-ray-error-mm', type=real(0, 1e3, low_open=True),
                   default=DEFAULT_MAX_RAY_ERROR_MM,
                   help='refuse when the MPC rays miss H\'s by more than this anywhere '
                        'between the reference plane and the working distance (mm, default '
                        f'{DEFAULT_MAX_RAY_ERROR_MM:g}: a third of a toolbox calibration\'s '
                        'typical 0.15 mm RMS ray error)')
    p.set_defaults(func=run)


def run(args):
    """Import, print the ray residual, write the file."""
    import numpy as np

    from lf_mpc_calib.io.calibration_file import CalibrationFile, save_calibration
    from lf_mpc_calib.io.lftoolbox import describe_import, import_calinfo, read_calinfo
    cal = read_calinfo(args.calibration)
    result = import_calinfo(cal, max_ray_error_mm=args.max_ray_error_mm)
    nj, ni, nl, nk = cal.lf_size[:4]
    rmse = cal.rmse_m * 1e3 if np.isfinite(cal.rmse_m) else float('nan')
    meta = {'source': 'LFToolbox CalInfo.json', 'toolbox_version': cal.version,
            'serial': (cal.raw.get('CamInfo') or {}).get('CamSerial'),
            'model': (cal.raw.get('CamInfo') or {}).get('CamModel'),
            'zoom_step': (cal.raw.get('CamInfo') or {}).get('ZoomStep'),
            'focus_step': (cal.raw.get('CamInfo') or {}).get('FocusStep'),
            'lftoolbox_import': {
                'lf_size': [int(x) for x in cal.lf_size],
                'frame_origin_in_toolbox_frame_m': [float(x) for x in result.shift],
                'ray_residual': result.figures,
                'note': 'intrinsics index the toolbox\'s decoding (dehexed, square ST), not '
                        'lf_mpc_calib decode\'s: lenslet_grid is null on purpose; the '
                        'toolbox\'s grid is kept here under lftoolbox_lenslet_grid_model, '
                        'not for decoding'},
            'lftoolbox_lenslet_grid_model': cal.raw.get('LensletGridModel')}
    out = CalibrationFile(
        camera_type='conventional', model=result.model, stddev={},
        errors={'rms_reprojection_px': float('nan'), 'rms_ray_reprojection_mm': rmse},
        rotation_vectors=result.rotation_vectors, translations=result.translations,
        views={'i': [-(ni - 1) / 2.0, (ni - 1) / 2.0], 'j': [-(nj - 1) / 2.0, (nj - 1) / 2.0]},
        image_size=(nk, nl), lenslet_grid=None,
        camera_metadata={k: v for k, v in meta.items() if v is not None})
    save_calibration(args.output, out)
    print(f'imported {args.calibration}: {describe_import(result.figures)}')
    print(f'wrote {args.output}')
    return 0
