"""
Ray-traced raw light-field frames and white images of a simulated plenoptic camera.

Public API::

    render_raw(camera, board, rvec, tvec, *, samples=4, rng=None, noise=None,
               progress=None) -> (H, W) float64 in [0, 1]
    render_white(camera, *, samples=4, progress=None) -> (H, W) float64 in [0, 1]
    render_scene(camera, scene, *, samples=4, rng=None, noise=None,
                 progress=None) -> (H, W) float64 in [0, 1]
    quantize(image, bit_depth) -> (H, W) uint8 | uint16
    sample_pattern(samples) -> (S, 4)
    pixel_turns(xs, ys) -> (cos, sin) (n,) (n,)

Every pixel belongs to the micro-lens whose micro-image contains its centre (the nearest
micro-image centre, :meth:`Camera.micro_image_of`). Each of ``samples`` rays per pixel leaves a
sub-pixel position, passes a point of that micro-lens (its centre for pinhole MLAs; a point of
its aperture disk of radius pitch / 2, refracted by the thin micro-lens, when the MLA has a
focal length), crosses the main lens (blocked outside the aperture disk and the barrel stop),
and meets the board plane; the pixel value is the mean over its samples of reflectance x
transmission x cos^4 falloff (:meth:`Camera.trace` is the reference of that optics; the loop
here is the same maths on component arrays, for speed). The falloff is the textbook cos^4 law
of the chief ray (sample point -> micro-lens centre), one factor for the whole bundle through
the micro-lens: weighting each ray of the bundle by its own angle would move the bundle's
weighted mean ray off the chief ray (by ~3 % of the bundle's footprint on the board), and the
chief ray is what the ground truth (and the MPC model) assigns to the pixel. Defocus, the
aperture disk of each micro-image and the vignetting of border micro-images follow from the
geometry. The white image is the same tracing against a uniform white scene (reflectance 1).

On focused cameras each pixel turns its lens points by its own angle (:func:`pixel_turns`, keyed
by the pixel, so a frame and its white keep the same rays). The aperture's cut of a defocused
micro-image's bundles keeps only some of a pixel's lens points; with the same points in every
pixel, the same quadrature error of that cut repeats in every micro-image and moves the
corners the same way (at 64 rays the rendered cut moved corners about 0.8 x as far as a
continuous aperture, features.aperture_bias). Turned per pixel, the error of each pixel has
zero mean over pixels (up to the equal-area rings' radial quadrature) and averages out. The
turn keeps each pixel's pattern centred and isotropic (``sample_pattern``'s quadruples turn
together). Conventional cameras keep the shared pattern: their views are read pixel by pixel.

``render_scene`` traces the same rays to a :class:`lf_mpc_calib.simulation.scene.Scene` of
finite planes (textured planes and boards): each ray takes the nearest surface it meets
(:func:`lf_mpc_calib.simulation.scene.surface_hits`), the scene's background level where it
meets none; the board-only path of ``render_raw`` is left as it was.

Board poses (rvec, tvec) map board to the MPC (optical) camera frame, the frame of the ground
truth (:meth:`Camera.pose_to_physical`). The optional Bayer mosaic multiplies each pixel by the
sensor's channel gain of its colour (the scene is grey); noise is Gaussian (sigma a fraction of
full scale) and the result is clipped to [0, 1]. Work goes in chunks of rows to bound memory
(about 40 float64 temporaries of ``CHUNK_PIXELS`` each). The pixels' rays (set up from the
optics alone) and the last two whites are kept for a camera's next images, so the frames of a
data set or a camera node after the first trace rays only (RAYS_KEPT_BYTES bounds the memory).
"""

import dataclasses
import math
import threading
from collections import OrderedDict

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.kept_results import KeptResults
from lf_mpc_calib.simulation.optics import Camera, Checkerboard
from lf_mpc_calib.simulation.scene import Scene, surface_hits, surface_poses

CHUNK_PIXELS = 1 << 15
_R4 = 1.0 / 1.1673039782614187 ** np.arange(1, 5)   # Kronecker (R_4) sequence steps
_R2 = 1.0 / 1.3247179572447460 ** np.arange(1, 3)   # Kronecker (R_2) steps: the pixel turns


def pixel_turns(xs, ys):
    """
    (cos, sin) (n,) of each pixel's turn of its lens points: the angle 2 pi frac(x a_1 + y a_2)
    of the R_2 sequence over the pixel's column x and row y (n,), so angles spread evenly
    over any few neighbouring pixels and a pixel keeps its angle in every render.
    """
    a = (2.0 * np.pi) * ((np.asarray(xs, np.float64) * _R2[0]
                          + np.asarray(ys, np.float64) * _R2[1]) % 1.0)
    return np.cos(a), np.sin(a)


def sample_pattern(samples):
    """
    Return (S, 4) samples: sub-pixel offsets (dx, dy) in (-0.5, 0.5) and unit-disk points (ex, ey).

    The pattern is centred exactly (its mean is zero), so anti-aliasing does not displace the
    image, and for S a multiple of 4 it is isotropic: samples come in quadruples (p, -p, Rp, -Rp),
    R the 90 degree turn of both (dx, dy) and (ex, ey), so x and y are integrated alike. Base
    points p: for S = 4 a rotated-grid pixel offset (1/8, 3/8) and a lens point at radius
    sqrt(1/2) (the second moments of a uniform pixel and disk); otherwise pixel offsets from a
    4-D low-discrepancy (R_4) sequence and lens points on equal-area rings (:func:`_r4_points`).
    Other counts use antithetic pairs (p, -p) of the R_4 sequence (lens radii from it; not
    isotropic); an odd count adds the pixel and lens centre. The lens point sets the footprint
    of a view pixel on the scene, so its spread must be the disk's in both axes. (Measured on
    full-size Lytro, 6 default poses: the old 4-sample pairs had mean ey^2 0.09 vs ex^2 0.36,
    the old 16 had 0.32 vs 0.14; the corners' v error was 0.14 px RMS against 0.05 px in u and
    k_j came out 1.7 % off. With 16 samples whose lens radii all but missed the rim (mean r^2
    0.32 instead of 1/2) corners locked towards the middle between lens rows by up to 0.065 px.)
    """
    if int(samples) != samples or samples < 1:
        raise InvalidInputError(f'samples must be a positive integer, got {samples!r}')
    samples = int(samples)
    centre = np.zeros((samples % 2, 4))
    if samples == 4:
        a = np.pi / 8
        base = np.array([[0.125, 0.375, np.sqrt(0.5) * np.cos(a), np.sqrt(0.5) * np.sin(a)]])
    else:
        base = _r4_points(samples // 4 if samples % 4 == 0 else samples // 2,
                          rings=samples % 4 == 0)
    if samples % 4 == 0:
        turned = np.column_stack([-base[:, 1], base[:, 0], -base[:, 3], base[:, 2]])
        return np.concatenate([base, -base, turned, -turned])
    return np.concatenate([centre, base, -base])


def _r4_points(n, rings):
    """
    (n, 4) base points: pixel offsets in (-0.5, 0.5) from the R_4 sequence; unit-disk points
    at angles from the sequence and radii on equal-area rings (``rings``: sqrt((k + 1/2) / n),
    so the mean squared radius is the disk's 1/2) or from the sequence (equal-area map).
    """
    u = (0.5 + np.arange(1, n + 1)[:, None] * _R4[None, :]) % 1.0
    r = np.sqrt((np.arange(n) + 0.5) / n) if rings else np.sqrt(u[:, 2])
    phi = 2.0 * np.pi * u[:, 3]
    return np.column_stack([u[:, 0] - 0.5, u[:, 1] - 0.5, r * np.cos(phi), r * np.sin(phi)])


WHITE_SAMPLES = 64
"""Fewest rays per pixel of a simulated camera's white image (datasets, the camera node): a real
white is the mean of many exposures, and its micro-image rims are the aperture's, which the
focused detector reads (features.aperture_bias); a 16-ray white's rims are coarse. Full-size
Lytro's takes 10 s (kept afterwards: :func:`render_white`)."""


def render_white(camera, *, samples=4, progress=None):
    """
    Render the white image (H, W) of ``camera``: a uniform scene of reflectance 1.

    progress(done_rows, total_rows) is called after each chunk (once, with the image done,
    when the white comes from the cache). The white depends on the optics and ``samples``
    only (its noise is keyed by the image), so the last two are kept: every data set and
    camera node of one camera reads the same white, which at WHITE_SAMPLES costs several
    times a frame (full-size Lytro: 10 s against 3.6 s for a 4-ray frame).
    """
    _check_camera(camera)
    white = _cached_white(_optics_key(camera), camera, int(samples))
    if progress is not None:
        progress(white.shape[0], white.shape[0])
    return white.copy()


def _optics_key(camera):
    """Every field of ``camera`` (nested dataclasses: lenses, sensor, response) as a string:
    equal for cameras that render alike (Camera compares by identity)."""
    return repr(dataclasses.astuple(camera))


_WHITES = KeptResults()
"""(optics key, samples) -> the white (read-only): the last WHITES_KEPT rendered."""

WHITES_KEPT = 2


def _cached_white(key, camera, samples):
    """render_white's image (read-only) for the camera of ``key``, rendered when not kept."""
    def rendered():
        white = _finish(camera, _render(camera, None, samples, None), None, 0.0)
        white.flags.writeable = False
        return white
    return _WHITES.get((key, samples), rendered, WHITES_KEPT)


def render_raw(camera, board, rvec, tvec, *, samples=4, rng=None, noise=None, progress=None):
    """
    Render a raw frame (H, W) float64 in [0, 1] of ``board`` at pose (rvec, tvec).

    rvec (3,) Rodrigues vector and tvec (3,) metres map board to the MPC camera frame.
    noise: Gaussian sigma (fraction of full scale; None: the sensor's), added to the sensor
    response's; rng: a numpy Generator for both (None: the response's noise is keyed by the
    rendered image, so the same scene reads out the same; the Gaussian's is fresh).
    progress(done_rows, total_rows) is called after each chunk.
    """
    _check_camera(camera)
    if not isinstance(board, Checkerboard):
        raise InvalidInputError(
            f'board must be a simulation.optics.Checkerboard, got {type(board).__name__}')
    rvec = np.asarray(rvec, dtype=float)
    tvec = np.asarray(tvec, dtype=float)
    if rvec.shape != (3,) or tvec.shape != (3,) or not (
            np.all(np.isfinite(rvec)) and np.all(np.isfinite(tvec))):
        raise InvalidInputError(
            f'rvec and tvec must be 3 finite numbers each, got shapes {rvec.shape}, {tvec.shape}')
    rmat, t = camera.pose_to_physical(rvec, tvec)
    sigma = camera.sensor.noise if noise is None else float(noise)
    if not (np.isfinite(sigma) and sigma >= 0):
        raise InvalidInputError(f'noise must be a sigma >= 0, got {noise!r}')
    image = _render(camera, (board, rmat, t), samples, progress)
    return _finish(camera, image, rng, sigma)


def render_scene(camera, scene, *, samples=4, rng=None, noise=None, progress=None):
    """
    Render a raw frame (H, W) float64 in [0, 1] of a :class:`Scene` (surfaces in the MPC frame).

    noise, rng, progress as in :func:`render_raw`.
    """
    _check_camera(camera)
    if not isinstance(scene, Scene):
        raise InvalidInputError(f'scene must be a simulation.scene.Scene, got '
                                f'{type(scene).__name__}')
    sigma = camera.sensor.noise if noise is None else float(noise)
    if not (np.isfinite(sigma) and sigma >= 0):
        raise InvalidInputError(f'noise must be a sigma >= 0, got {noise!r}')
    rm, tm = camera.mpc_frame()
    surfaces = [scene.surfaces, surface_poses(scene, rm, tm), scene.background]
    image = _render(camera, surfaces, samples, progress)
    return _finish(camera, image, rng, sigma)


def dark_frame(camera, shape, seed=0):
    """A dark frame (H, W) of ``camera``'s sensor in fractions of full scale (black level, hot
    pixels, read noise), the one a data set's dark.png and the sim node's ~/dark_image hold
    for ``seed``; None for an ideal sensor (no response)."""
    response = camera.sensor.response
    if response is None:
        return None
    return response.dark_frame(tuple(shape), np.random.default_rng([int(seed), 2]))


def less_dark(camera, image, seed=0):
    """
    ``image`` (H, W) as calibrate-raw hands it on: less a dark frame of ``camera``'s sensor
    (:func:`dark_frame` of ``seed``: the data set's dark.png), clipped at 0. An ideal
    sensor's (no response): ``image`` itself.
    """
    dark = dark_frame(camera, np.shape(image), seed)
    return image if dark is None else np.clip(image - dark, 0.0, None)


def quantize(image, bit_depth):
    """Float image in [0, 1] -> uint8 (bit_depth 8) or uint16 (16), rounded and clipped."""
    if bit_depth not in (8, 16):
        raise InvalidInputError(f'bit_depth must be 8 or 16, got {bit_depth!r}')
    top = 255 if bit_depth == 8 else 65535
    out = np.rint(np.clip(np.asarray(image, dtype=float), 0.0, 1.0) * top)
    return out.astype(np.uint8 if bit_depth == 8 else np.uint16)


def bayer_gains(camera):
    """(H, W) per-pixel colour-filter gains of the sensor's Bayer mosaic (ones if none)."""
    s = camera.sensor
    gains = np.ones((s.height, s.width))
    if s.bayer is None:
        return gains
    g = dict(zip('rgb', s.channel_gains))
    for n, colour in enumerate(s.bayer):
        gains[n // 2::2, n % 2::2] = g[colour]
    return gains


def _check_camera(camera):
    if not isinstance(camera, Camera):
        raise InvalidInputError(
            f'camera must be a simulation.optics.Camera, got {type(camera).__name__}')


def _finish(camera, image, rng, sigma):
    if camera.sensor.bayer is not None:
        image *= bayer_gains(camera)
    response = camera.sensor.response
    if response is not None:
        if rng is None:         # reproducible: the same scene reads out the same noise
            import zlib
            rng = np.random.default_rng([response.seed, zlib.crc32(image.tobytes())])
        blur = response.blur_sigma_px(camera.gap / camera.mla.pitch, camera.sensor.pixel_pitch)
        image = response.read_out(image, rng, blur)
    if sigma > 0:
        rng = np.random.default_rng() if rng is None else rng
        image += rng.normal(0.0, sigma, image.shape)
    return np.clip(image, 0.0, 1.0, out=image)


def _render(camera, scene, samples, progress):
    pattern = sample_pattern(samples)
    W, H = camera.sensor.size
    out = np.empty((H, W))
    rows_per_chunk = max(1, CHUNK_PIXELS // W)
    rays = _CameraRays(camera)
    for y0 in range(0, H, rows_per_chunk):
        y1 = min(H, y0 + rows_per_chunk)
        out[y0:y1] = _render_rows(rays.rows(y0, y1), scene, pattern).reshape(y1 - y0, W)
        if progress is not None:
            progress(y1, H)
    rays.keep()
    return out


RAYS_KEPT_BYTES = 400 << 20
"""Most memory the pixels' rays of recent cameras may keep (:class:`_CameraRays`, 32-40 bytes
a pixel): full-size Lytro's (10.7 Mpx, 0.34 GB) are kept, a camera whose rays need more (a
4080 x 3068 focused sensor: 0.5 GB) sets them up for every image."""

_RAYS = OrderedDict()
"""optics key -> {first row: _PixelRays of a chunk}, the most recent camera last."""
_RAYS_LOCK = threading.Lock()


class _CameraRays:
    """
    The chunks' :class:`_PixelRays` of one camera, set up once and kept for its next images
    while they fit in RAYS_KEPT_BYTES: they depend on the optics only, and setting them up
    (lens lookup, jitter normals, per-pixel turns) costs as much as tracing 4 to 6 ray
    samples a pixel (full-size Lytro: 1.8 s of a 3.6 s 4-ray frame).
    """

    def __init__(self, camera):
        self.camera, self.key = camera, _optics_key(camera)
        with _RAYS_LOCK:
            self.chunks = _RAYS.pop(self.key, None) or {}

    def rows(self, y0, y1):
        """The _PixelRays of raw rows y0..y1-1."""
        rays = self.chunks.get(y0)
        if rays is None:
            W = self.camera.sensor.width
            ys, xs = np.mgrid[y0:y1, 0:W]
            rays = _PixelRays(self.camera, np.column_stack([xs.ravel(), ys.ravel()]).astype(
                float))
            self.chunks[y0] = rays
        return rays

    def keep(self):
        """Keep this camera's rays (most recent), dropping the oldest cameras' beyond
        RAYS_KEPT_BYTES; none when this camera's alone exceed it."""
        size = sum(r.nbytes for r in self.chunks.values())
        if size > RAYS_KEPT_BYTES:
            return
        with _RAYS_LOCK:
            _RAYS[self.key] = self.chunks
            while sum(r.nbytes for c in _RAYS.values() for r in c.values()) > RAYS_KEPT_BYTES:
                _RAYS.popitem(last=False)


def _render_rows(rays, scene, pattern):
    """Pixel values (n,) of the pixels of ``rays`` (:class:`_PixelRays`): the sum over
    samples / count."""
    shade = _scene_shader(scene)
    total = np.zeros(rays.n, np.float32)
    for dx, dy, ex, ey in pattern.tolist():
        ox, oy, dxs, dys, weight = rays.sample(dx, dy, ex, ey)
        if shade is None:
            total += weight
        else:
            total += weight * shade(ox, oy, dxs, dys)
    return total.astype(np.float64) / pattern.shape[0]


class _PixelRays:
    """
    The rays of pixels q (n, 2) px through their micro-lenses and the main lens, per sample
    linear in the sample's offset: a ray leaves sensor point s = s0 + step d and lens point
    l + a (a = lens_r x the turned lens point, 0 for a pinhole): slope i = (l + a - s) / b,
    refracted g = i - a / f, on the main lens o = l + a + D g. All linear in d and a, so per
    pixel o = o0 - D step d / b + a (1 + D / b - D / f), the field slope -(l + a) / D and the
    chief ray's (l - s) / b. The per-pixel terms are float32 (half the memory traffic; ~1e-8
    m on the board, 1e-9 m on the main lens, far under a pixel's footprint), the scalars
    Python floats so that NumPy's promotion keeps the arrays float32.
    """

    def __init__(self, camera, q):
        kl, centres = camera.micro_image_of(q)
        mla = camera.mla
        # each lens's jitter normals, looked up once for its centre and its focal length
        normals = camera.lens_normals(kl) if mla.centre_jitter or mla.focal_jitter else None
        lens = camera.lens_centres(kl, centres=centres, normals=normals)
        sensor_xy = camera.pixel_to_sensor(q)
        lx, ly = lens[:, 0].copy(), lens[:, 1].copy()
        sx0, sy0 = sensor_xy[:, 0].copy(), sensor_xy[:, 1].copy()
        D = camera.D
        # per-pixel gap and micro-lens focal length (multi-focus arrays differ per lens type)
        b = camera.gap if camera.mla.n_types == 1 else camera.lens_gaps(kl)
        step = camera.sigma * camera.sensor.pixel_pitch
        f_m = mla.focal_length if mla.n_types == 1 and mla.focal_jitter == 0 else \
            camera.lens_focal_lengths(kl, normals=normals)
        self.lens_r = 0.5 * camera.mla.pitch if f_m is not None else 0.0
        ml = camera.main_lens
        self.barrel = math.isfinite(ml.barrel_radius)
        self.natural = camera.sensor.natural_vignetting
        inv_b = 1.0 / b
        inv_f = 0.0 if f_m is None else 1.0 / f_m
        gain = 1.0 + D * inv_b - D * inv_f
        if self.lens_r > 0.0 and camera.camera_type == 'focused':   # per-pixel turn
            cr, sr = pixel_turns(q[:, 0], q[:, 1])                    # (module docstring)
            cr *= self.lens_r
            sr *= self.lens_r
        else:
            cr, sr = self.lens_r, 0.0
        o_cr, o_sr = cr * gain, sr * gain              # a's share of o
        f_cr, f_sr = cr * (-1.0 / D), sr * (-1.0 / D)  # a's share of the field slope
        ox0, oy0 = lx + D * inv_b * (lx - sx0), ly + D * inv_b * (ly - sy0)
        fx0, fy0 = lx * (-1.0 / D), ly * (-1.0 / D)
        o_step = D * step * inv_b
        if self.natural:
            cx0, cy0 = (lx - sx0) * inv_b, (ly - sy0) * inv_b
            c_step = step * inv_b
        else:
            cx0 = cy0 = c_step = 0.0
        (self.ox0, self.oy0, self.fx0, self.fy0, self.o_cr, self.o_sr, self.f_cr, self.f_sr,
         self.o_step, self.cx0, self.cy0, self.c_step) = (
            _single(v) for v in (ox0, oy0, fx0, fy0, o_cr, o_sr, f_cr, f_sr, o_step, cx0, cy0,
                                 c_step))
        self.inv_z, self.d1, self.d2, self.ra2, self.rb2, self.zb = (float(v) for v in (
            ml.inverse_focus, *ml.distortion, ml.aperture_radius ** 2, ml.barrel_radius ** 2,
            ml.barrel_distance))
        self.n = len(q)
        self.nbytes = sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))

    def sample(self, dx, dy, ex, ey):
        """
        The sample ray of every pixel at sensor offset (dx, dy) and lens point (ex, ey):
        (ox, oy (n,) m where it leaves the main lens (z = 0), its slopes dxs, dys (n,) after
        the main lens, its weight (n,) float32: inside the aperture and the barrel, times
        cos^4 of the chief ray with natural vignetting).
        """
        if self.lens_r > 0.0 and (ex != 0.0 or ey != 0.0):
            ox = (self.ox0 - self.o_step * dx) + (self.o_cr * ex - self.o_sr * ey)
            oy = (self.oy0 - self.o_step * dy) + (self.o_sr * ex + self.o_cr * ey)
            x0 = self.fx0 + (self.f_cr * ex - self.f_sr * ey)       # chief-ray (field) slope
            y0_ = self.fy0 + (self.f_sr * ex + self.f_cr * ey)
        else:
            ox, oy = self.ox0 - self.o_step * dx, self.oy0 - self.o_step * dy
            x0, y0_ = self.fx0, self.fy0
        if self.d1 != 0.0 or self.d2 != 0.0:
            rr = x0 * x0 + y0_ * y0_
            rho = 1.0 + rr * (self.d1 + self.d2 * rr)
            x0, y0_ = x0 * rho, y0_ * rho
        dxs, dys = x0 - ox * self.inv_z, y0_ - oy * self.inv_z   # slopes after the main lens
        weight = (ox * ox + oy * oy <= self.ra2).astype(np.float32)
        if self.barrel:
            bx, by = ox + self.zb * dxs, oy + self.zb * dys
            weight *= bx * bx + by * by <= self.rb2
        if self.natural:   # cos^4 of the chief ray (sample point -> lens centre), docstring
            cx, cy = self.cx0 - self.c_step * dx, self.cy0 - self.c_step * dy
            weight /= np.square(1.0 + cx * cx + cy * cy)
        return ox, oy, dxs, dys, weight


def _scene_shader(scene):
    """
    shade(ox, oy, dxs, dys) -> (n,): what the rays from (ox, oy, 0) along (dxs, dys, 1) see
    of ``scene``: the textured planes (a list: surfaces, their poses, the background) or the
    board (board, rmat (3, 3), t (3,)); None for no scene (the white image).
    """
    if scene is None:
        return None
    if isinstance(scene, list):
        surfaces, poses, background = scene

        def planes(ox, oy, dxs, dys):
            index, _, hx, hy = surface_hits(surfaces, poses, (ox, oy, 0.0), (dxs, dys, 1.0))
            shade = np.full(index.shape, background)
            for k, surf in enumerate(surfaces):
                on = index == k
                if np.any(on):
                    shade[on] = surf.shade(hx[on], hy[on])
            return shade
        return planes
    board, rmat, t = scene
    nx, ny, nz = (float(v) for v in rmat[:, 2])
    n_t = float(rmat[:, 2] @ t)
    t, r0, r1 = ([float(v) for v in a] for a in (t, rmat[:, 0], rmat[:, 1]))

    def board_plane(ox, oy, dxs, dys):
        # board plane n . X = n . t; ray X = (ox, oy, 0) + lam (dxs, dys, 1)
        denom = nx * dxs + ny * dys + nz
        with np.errstate(divide='ignore', invalid='ignore'):
            lam = (n_t - nx * ox - ny * oy) / denom
        px = ox + lam * dxs - t[0]
        py = oy + lam * dys - t[1]
        pz = lam - t[2]
        bxs = r0[0] * px + r0[1] * py + r0[2] * pz
        bys = r1[0] * px + r1[1] * py + r1[2] * pz
        ok = (lam > 0) & np.isfinite(lam)
        return board.shade(np.where(ok, bxs, 1e9), np.where(ok, bys, 1e9))
    return board_plane


def _single(value):
    """A per-pixel array as float32, a scalar as a Python float (see _render_rows)."""
    return float(value) if np.ndim(value) == 0 else np.asarray(value, np.float32)
