"""
What a real image sensor does to the light the optics deliver: a simulated camera's raw pixels.

:class:`SensorResponse` turns a rendered irradiance image (H, W) in [0, 1] (1: the white
image's brightest micro-image) into raw values as a CMOS sensor reads them out: the micro-lenses'
diffraction blur (the ray tracer draws geometric micro-images with sharp rims), dust shadows on
the micro-lens array's cover glass, photo-response non-uniformity (PRNU), photon shot noise
(Poisson, in electrons, with a full well), hot pixels (dark signal), read noise (electrons), a
black level (pedestal) and clipping at full scale; the converter's quantisation is the frame
file's (:func:`~lf_mpc_calib.simulation.render.quantize`). The fixed pattern (PRNU, hot pixels,
dust) is keyed by ``seed`` and the image size: the white, the frames and the dark frame of one
camera share it, as a real sensor's do.

Defaults and where they come from:

- ``wavelength_m`` 550 nm (green): each micro-image is blurred by the Airy core of its
  micro-lens, a Gaussian of sigma 0.42 lambda N (N = gap / lens pitch, the micro-lens's
  working f-number): 0.3 px on the Lytro preset, 2.2 px on lab-square (f/62 lenses); with it a
  rendered white's micro-image rim matches a real white's (test_sensor_response); 0: none.
- ``full_well_e`` 10 000 e-, ``white_level`` 0.8 (the white's brightest at 80 % of full scale,
  8 000 e-: shot-noise SNR 89): small-pixel CMOS sensors hold 4 500-15 000 e- (EMVA 1288
  reports); a white is exposed near, not at, saturation.
- ``read_noise_e`` 2.5 e- rms: the real guv dark frame here (Hamamatsu ORCA-Flash4.0, whose
  data sheet gives 1.4-1.6 e- median) shows 4.8 DN rms at 16 bit; CMOS read noise is 1-5 e-.
- ``prnu`` 0.6 % rms: EMVA 1288 reports of CMOS sensors give 0.3-1 %.
- ``black_level`` 64 / 1023 of full scale: the 10-bit pedestal of CMOS raw output (libcamera's
  IMX219 tuning: 4096 in 16-bit units); the real seaurchin dark frame sits at 3 of 255.
- ``hot_pixel_share`` 5e-5 of the pixels, dark signal 5-50 % of full scale: a few hundred per
  10 Mpx, as counted on consumer sensors' dark frames.
- ``dust_per_mpx`` 0.3 shadows a megapixel, radius 8-30 px, transmission 0.45-0.8: a few motes
  on the cover glass of a lens array in air.
"""

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


@dataclass(frozen=True)
class SensorResponse:
    """The sensor's response (module docstring): each field a documented default."""

    wavelength_m: float = 550e-9
    full_well_e: float = 10000.0
    white_level: float = 0.8
    read_noise_e: float = 2.5
    prnu: float = 0.006
    black_level: float = 64.0 / 1023.0
    hot_pixel_share: float = 5e-5
    dust_per_mpx: float = 0.3
    seed: int = 0

    def __post_init__(self):
        for name, lo, hi in (('wavelength_m', 0.0, 2e-5), ('full_well_e', 1.0, 1e7),
                             ('white_level', 1e-3, 1.0),
                             ('read_noise_e', 0.0, 1e4), ('prnu', 0.0, 0.5),
                             ('black_level', 0.0, 0.5), ('hot_pixel_share', 0.0, 0.01),
                             ('dust_per_mpx', 0.0, 100.0)):
            v = float(getattr(self, name))
            if not (np.isfinite(v) and lo <= v <= hi):
                raise InvalidInputError(f'sensor response {name} must be in [{lo:g}, {hi:g}], '
                                        f'got {getattr(self, name)!r}')
            object.__setattr__(self, name, v)
        object.__setattr__(self, 'seed', int(self.seed))

    def to_dict(self):
        """Plain mapping (dataset manifests)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; None stays None (an ideal sensor)."""
        if d is None:
            return None
        if not isinstance(d, dict):
            raise InvalidInputError(f'sensor response must be a mapping, got {d!r}')
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise InvalidInputError(f'sensor response has unknown keys {unknown}')
        return cls(**d)

    def fixed_pattern(self, shape):
        """(gain (H, W), hot dark signal (H, W)) in fractions of full scale, from ``seed``;
        read-only arrays, cached (the white, every frame and the dark frame of a camera share
        them: drawn afresh, they cost about 2 s a frame on full-size Lytro)."""
        return _fixed_pattern(self, (int(shape[0]), int(shape[1])))

    def blur_sigma_px(self, working_f_number, pixel_pitch):
        """Sigma (px) of the diffraction blur of micro-lenses of ``working_f_number``."""
        return 0.42 * self.wavelength_m * float(working_f_number) / float(pixel_pitch)

    def read_out(self, irradiance, rng, blur_px=0.0):
        """
        Raw values (H, W) in [0, 1] of an irradiance image (H, W) (1: the white's peak),
        blurred first by a Gaussian of ``blur_px`` (:meth:`blur_sigma_px`; under 0.05: none).
        """
        if blur_px >= 0.05:
            import cv2
            irradiance = cv2.GaussianBlur(np.asarray(irradiance, dtype=np.float64), (0, 0),
                                          float(blur_px), borderType=cv2.BORDER_REFLECT)
        gain, hot = self.fixed_pattern(irradiance.shape)
        electrons = np.clip(irradiance, 0.0, None) * gain * (self.white_level * self.full_well_e)
        electrons = rng.poisson(electrons).astype(float)
        return self._finish(electrons, hot, rng)

    def dark_frame(self, shape, rng):
        """A dark frame (H, W) in [0, 1]: black level, hot pixels, read noise."""
        return self._finish(np.zeros(shape), self.fixed_pattern(shape)[1], rng)

    def _finish(self, electrons, hot, rng):
        if self.read_noise_e > 0:
            electrons += rng.normal(0.0, self.read_noise_e, electrons.shape)
        out = electrons / self.full_well_e + hot + self.black_level
        return np.clip(out, 0.0, 1.0, out=out)


@lru_cache(maxsize=2)
def _fixed_pattern(response, shape):
    """SensorResponse.fixed_pattern: drawn from (seed, H, W)."""
    h, w = shape
    rng = np.random.default_rng([response.seed, h, w])
    gain = 1.0 + response.prnu * rng.standard_normal((h, w))
    n_dust = rng.poisson(response.dust_per_mpx * h * w / 1e6)
    if n_dust:
        yy, xx = np.ogrid[0:h, 0:w]
        for x, y, r, t in zip(rng.uniform(0, w, n_dust), rng.uniform(0, h, n_dust),
                              rng.uniform(8, 30, n_dust), rng.uniform(0.45, 0.8, n_dust)):
            d = np.hypot(xx - x, yy - y)
            gain *= 1.0 - (1.0 - t) * 0.5 * (1 - np.tanh((d - r) / 2.0))
    hot = np.zeros((h, w))
    n_hot = rng.binomial(h * w, response.hot_pixel_share)
    idx = rng.choice(h * w, size=n_hot, replace=False)
    hot.flat[idx] = rng.uniform(0.05, 0.5, n_hot)
    gain.flags.writeable = False
    hot.flags.writeable = False
    return gain, hot
