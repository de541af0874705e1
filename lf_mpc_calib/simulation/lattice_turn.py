"""
Cameras whose micro-lens array is laid out or mounted otherwise than a preset's.

    camera = turn_lattice(preset('lytro', scale=0.15), layout='columns', degrees=3.0)
    camera = turn_lattice(preset('illum', scale=0.1), portrait=True)

``layout='columns'`` turns the array by 90 degrees on the same sensor: a hexagonal lattice whose
half-pitch shift runs along the image columns (a hex lattice turned by 30 or 90 degrees, as on
some Raytrix arrays). ``degrees`` turns it further by a few degrees either way (at most
:data:`MAX_TURN_DEG`). ``portrait=True`` turns the whole camera by 90 degrees (a camera mounted
in portrait): the sensor's width and height swap and the array turns with it, so a row-major
preset becomes column-shifted (and a column-shifted one row-major). The array's rotation is
kept in the range the grid estimator numbers lattices in (:func:`~lf_mpc_calib.lenslet.grid.
row_direction`), so the simulated truth and an estimated grid number the same lenses alike.
"""

from dataclasses import replace
import math

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.grid import LAYOUTS

MAX_TURN_DEG = 10.0
"""Largest extra turn (degrees, either way) of a simulated array; beyond it the layout changes."""


def turn_lattice(camera, *, layout='rows', degrees=0.0, portrait=False):
    """
    ``camera`` (a simulation Camera) with its micro-lens array in ``layout`` ('rows': as the
    preset; 'columns': turned by 90 degrees), turned by ``degrees`` more, on a sensor turned by
    90 degrees when ``portrait``. Raises InvalidInputError naming a bad layout or angle.
    """
    if layout not in LAYOUTS:
        raise InvalidInputError(f'lattice layout must be one of {LAYOUTS}, got {layout!r}')
    try:
        deg = float(degrees)
    except (TypeError, ValueError):
        deg = float('nan')
    if not abs(deg) <= MAX_TURN_DEG:                   # NaN fails too
        raise InvalidInputError(f'lattice rotation must be degrees from {-MAX_TURN_DEG:g} to '
                                f'{MAX_TURN_DEG:g} (more changes the layout: use the layout '
                                f'option), got {degrees!r}')
    mla, sensor = camera.mla, camera.sensor
    turn = math.radians(deg) + (math.pi / 2 if layout == 'columns' else 0.0)
    offset = np.asarray(mla.offset, float)
    if portrait:
        turn += math.pi / 2
        sensor = replace(sensor, width=sensor.height, height=sensor.width)
        offset = np.array([-offset[1], offset[0]])          # the array turns with the camera
    rotation = mla.rotation + turn
    # a half turn (r, c -> -r, -c) keeps every lens and row parity: keep the rotation within
    # (-45, 135] degrees, the range the estimator numbers lattices in
    rotation -= math.pi * math.floor((rotation + math.pi / 4) / math.pi)
    mla = replace(mla, rotation=rotation, offset=tuple(offset.tolist()))
    return replace(camera, mla=mla, sensor=sensor)
