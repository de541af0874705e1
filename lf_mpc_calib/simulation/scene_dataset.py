"""
Simulated raw datasets of textured planes with ground-truth depth (``simulate --scene planes``).

Public API::

    write_planes_dataset(directory, camera, board, n, *, seed=0, samples=4, noise=None,
                         progress=None) -> Path of manifest.yaml
    focused_depth_truth(camera, scene, w) -> (rows, cols) f32 in the image rendered at w

Layout: the dataset folder of :mod:`lf_mpc_calib.simulation.dataset` (manifest.yaml,
white.png, frame_NNN.png, ground_truth.yaml with the board pose of each frame), plus beside
each frame ``depth_NNN.npy``: the ground-truth depth of its rectified central view
((rows, cols) float32, metres along the optical axis, NaN where no surface;
:func:`lf_mpc_calib.simulation.scene.depth_truth`); for a focused camera, of the image
rendered from the micro-images at the manifest's ``render_w`` (the scene distance's inverse
virtual depth, :func:`focused_depth_truth`; ``lf-mpc-calib depth --render-w`` renders there)
with planes from :func:`lf_mpc_calib.simulation.scene.focused_planes_scene` and no board
(ground_truth.yaml then holds the back wall's pose, and a multi-focus camera's lens types).
The manifest adds ``scene: planes``, ``depth`` (the depth file names) and ``scenes`` (each
frame's surfaces), so :func:`lf_mpc_calib.simulation.dataset.read_dataset` reads it like any
other dataset.
"""

from pathlib import Path

import numpy as np
import yaml

from lf_mpc_calib.io.atomic import open_atomically
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.calibration_file import save_calibration
from lf_mpc_calib.simulation.dataset import (
    FORMAT, FORMAT_VERSION, GROUND_TRUTH, ground_truth_file, MANIFEST, WHITE,
    write_white_and_dark)
from lf_mpc_calib.simulation.optics import Camera, Checkerboard
from lf_mpc_calib.simulation.render import quantize, render_scene
from lf_mpc_calib.simulation.scene import depth_truth, focused_planes_scene, planes_scene


def _write_png(path, image):
    from lf_mpc_calib.io.images import write_encoded
    write_encoded(path, image)


def focused_depth_truth(camera, scene, w):
    """Depth truth (rows, cols) float32 of a focused camera's ``scene`` in the pixels of the
    image rendered at inverse virtual depth ``w`` with the camera's true model (metres along
    the rendered pinhole's axis, NaN where no surface; the size LiveCenterRenderer gives)."""
    from lf_mpc_calib.measurement.focused import rendered_pinhole
    from lf_mpc_calib.simulation.focused_raw import scene_depth_truth
    width, height = camera.sensor.size
    size = (int(np.ceil(width * abs(w))), int(np.ceil(height * abs(w))))
    return scene_depth_truth(rendered_pinhole(camera.ground_truth_model(), w, size), scene)


def _with_lens_types(truth, camera):
    """The ground truth CalibrationFile with a multi-focus camera's lens types (the terms of
    its model and which micro-image has which type: what ``depth`` needs to compare only
    micro-images of one type and scale them by the type's terms)."""
    import dataclasses
    from lf_mpc_calib.measurement.focused import type_class_map
    from lf_mpc_calib.simulation.focused_raw import lens_types_of
    if camera.camera_type != 'focused' or camera.mla.n_types == 1:
        return truth
    grid = truth.lenslet_grid
    rule = type_class_map(grid, lens_types_of(camera, grid.centres()), camera.mla.n_types)
    return dataclasses.replace(truth, lens_types={
        **camera.ground_truth_lens_types().to_dict(), **(rule or {})})


def write_planes_dataset(directory, camera, board, n, *, seed=0, samples=4, noise=None,
                         progress=None):
    """
    Render ``n`` frames of :func:`planes_scene` (with ``board``) and write the dataset folder.

    seed: of the scenes and the noise; noise: sigma (None: the sensor's); progress(done, total)
    after the white image (done 0) and after each frame. Returns the manifest path.
    """
    if not isinstance(camera, Camera):
        raise InvalidInputError(f'a planes dataset needs a simulation.optics.Camera, got '
                                f'{type(camera).__name__}')
    focused = camera.camera_type == 'focused'
    if not isinstance(board, Checkerboard):
        raise InvalidInputError(f'board must be a simulation.optics.Checkerboard, got '
                                f'{type(board).__name__}')
    if int(n) != n or n < 1:
        raise InvalidInputError(f'number of frames must be a positive integer, got {n!r}')
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    bits = camera.sensor.bit_depth
    dark_entry = write_white_and_dark(root, camera, samples, seed)
    if progress is not None:
        progress(0, n)
    rng = np.random.default_rng(seed)
    names, depths, scenes, rvecs, tvecs = [], [], [], [], []
    render_w = None
    for k in range(int(n)):
        if focused:
            scene, render_w = focused_planes_scene(camera, rng)
            truth = focused_depth_truth(camera, scene, render_w)
        else:
            scene = planes_scene(camera, rng, board=board)
            truth = depth_truth(camera, scene)
        raw = render_scene(camera, scene, samples=samples, rng=rng, noise=noise)
        name, dname = f'frame_{k:03d}.png', f'depth_{k:03d}.npy'
        _write_png(root / name, quantize(raw, bits))
        with open_atomically(root / dname, 'wb') as f:
            np.save(f, truth)
        names.append(name)
        depths.append(dname)
        scenes.append(scene.to_dict())
        pose = scene.board or scene.surfaces[-1]        # focused: the back wall's pose
        rvecs.append(pose.rvec)
        tvecs.append(pose.tvec)
        if progress is not None:
            progress(k + 1, n)
    save_calibration(root / GROUND_TRUTH, _with_lens_types(
        ground_truth_file(camera, rvecs, tvecs), camera))
    manifest = {
        'format': FORMAT, 'format_version': FORMAT_VERSION, 'scene': 'planes',
        'preset': camera.name, 'scale': float(camera.scale),
        'camera_type': camera.camera_type,
        'image_size': [camera.sensor.width, camera.sensor.height],
        'bayer': camera.sensor.bayer, 'bit_depth': bits,
        'noise': float(camera.sensor.noise if noise is None else noise),
        'seed': int(seed), 'samples': int(samples),
        'board': board.to_dict(), 'white': WHITE, 'frames': names, 'depth': depths,
        'ground_truth': GROUND_TRUTH, 'camera': camera.to_dict(), 'scenes': scenes,
        **dark_entry,
    }
    if focused:
        manifest['render_w'] = float(render_w)
    path = root / MANIFEST
    with open_atomically(path, 'w') as f:
        yaml.safe_dump(manifest, f, sort_keys=False, default_flow_style=None)
    return path


__all__ = ['focused_depth_truth', 'write_planes_dataset']
