"""Raytrix RayCalibData XML as a lenslet grid (issue 43 #1): the shipped file, `--grid FILE.xml`,
`grid --import` / `grid --check`, and bad files refused by field and value."""

from pathlib import Path
import re

import cv2

import numpy as np
import pytest
from scipy.ndimage import map_coordinates
import yaml

from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.raw_dataset import load_grid
from lf_mpc_calib.io.raytrix_xml import read_raytrix_xml
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.measurement.focused import micro_image_types

DATA = Path(__file__).resolve().parents[2] / 'shared' / 'data' / 'raytrix-xml'
XML = DATA / 'sc2_klein.xml'
IMAGE = DATA / 'sc2_klein.png'
real = pytest.mark.skipif(not XML.is_file(), reason=f'{DATA} (test data) is absent')

TEMPLATE = """<RayCalibData version="1.0">
  <offset units="pix"><x>{ox}</x><y>{oy}</y></offset>
  <diameter units="pix">{d}</diameter>
  <rotation units="rad">{rot}</rotation>
  <lens_border units="pix">1.0</lens_border>
  <tcp units="virtual_depth">2.18</tcp>
  <lens_base_x units="lens"><x>1.0</x><y>0.0</y></lens_base_x>
  <lens_base_y units="lens"><x>0.5</x><y>-0.866025388241</y></lens_base_y>
  <sub_grid_base units="lens"><x>3.0</x><y>-1.732050776482</y></sub_grid_base>
  <distortion type="radial"><function>{fn}</function><parameter count="0">0</parameter>
    <offset units="pix"><x>0</x><y>0</y></offset></distortion>
  <lens_type id="0"><offset units="lens"><x>0</x><y>0</y></offset>
    <depth_range units="virtual_depth"><min>1</min><max>3</max></depth_range></lens_type>
  <lens_type id="1"><offset units="lens"><x>1</x><y>0</y></offset>
    <depth_range units="virtual_depth"><min>2.8</min><max>4</max></depth_range></lens_type>
  <lens_type id="2"><offset units="lens"><x>-1</x><y>0</y></offset>
    <depth_range units="virtual_depth"><min>3.8</min><max>100</max></depth_range></lens_type>
</RayCalibData>
"""


def _xml(tmp_path, name='cam.xml', **kw):
    values = dict(ox=17.76, oy=14.905, d=34.8647, rot=0.0, fn='constant')
    values.update(kw)
    path = tmp_path / name
    path.write_text(TEMPLATE.format(**values))
    return path


def test_raytrix_xml_places_the_central_lens_as_the_public_readers_do(tmp_path):
    # PlenopticToolbox2.0 (imgIO.MLACalibration, lens_grid.hex_lens_grid): central lens at
    # ((w - 1) / 2 + x, (h - 1) / 2 - y); rotation counter-clockwise with y up
    rt = read_raytrix_xml(_xml(tmp_path, rot=0.05), (964, 670))
    assert np.allclose(rt.centre, [481.5 + 17.76, 334.5 - 14.905])
    d = np.hypot(*(rt.grid.centres() - rt.centre).T)
    assert d.min() < 1e-9                                     # the central lens is on the grid
    assert rt.grid.rotation == pytest.approx(-0.05)           # clockwise in raw px (y down)
    assert rt.grid.pitch == pytest.approx(34.8647)
    assert rt.grid.row_spacing == pytest.approx(34.8647 * np.sqrt(3) / 2)


def test_raytrix_lens_types_follow_the_offsets_and_form_the_type_map(tmp_path):
    rt = read_raytrix_xml(_xml(tmp_path), (964, 670))
    c = rt.grid.centres()
    k0 = int(np.argmin(np.hypot(*(c - rt.centre).T)))
    right = int(np.argmin(np.hypot(*(c - rt.centre - [34.8647, 0]).T)))
    left = int(np.argmin(np.hypot(*(c - rt.centre + [34.8647, 0]).T)))
    assert (rt.types[k0], rt.types[right], rt.types[left]) == (0, 1, 2)
    # no two neighbours share a type (the 3-type pattern)
    from scipy.spatial import cKDTree
    pairs = cKDTree(c).query_pairs(34.8647 * 1.01)
    assert pairs and all(rt.types[a] != rt.types[b] for a, b in pairs)
    # the grid file's rule gives back every lens's type (measurement.focused reads it)
    assert np.array_equal(micro_image_types(rt.grid, rt.lens_types), rt.types)
    assert rt.lens_types['virtual_depth_range'] == [[1.0, 3.0], [2.8, 4.0], [3.8, 100.0]]


def _boundary_shift(gray, centres, pitch):
    """The shift (2,) px of the true micro-image centres from ``centres``, measured from the
    image alone: along each of the six neighbour directions, the mean directional gradient
    across all micro-images peaks at their common boundary; a lens at the true centre has it
    at pitch / 2 each way. Also the six boundary distances (px)."""
    g = cv2.GaussianBlur(gray, (0, 0), 0.7)
    gx, gy = cv2.Sobel(g, cv2.CV_64F, 1, 0), cv2.Sobel(g, cv2.CV_64F, 0, 1)
    h, w = gray.shape
    t, lateral = np.arange(0, pitch, 0.25), np.arange(-5.0, 5.01)
    dirs, dist = [], []
    for phi in np.radians(np.arange(0, 360, 60)):
        u = np.array([np.cos(phi), np.sin(phi)])
        n = np.array([-u[1], u[0]])
        pts = (centres[:, None, None] + t[None, :, None, None] * u
               + lateral[None, None, :, None] * n)
        ok = np.all((pts[..., 0] > 1) & (pts[..., 0] < w - 2) & (pts[..., 1] > 1) &
                    (pts[..., 1] < h - 2), axis=(1, 2))
        p = pts[ok]
        prof = np.abs(map_coordinates(gx, [p[..., 1], p[..., 0]], order=1) * u[0] +
                      map_coordinates(gy, [p[..., 1], p[..., 0]], order=1) * u[1])
        prof = prof.mean(axis=(0, 2))
        k = int(np.argmax(prof))
        a, b, c = prof[k - 1], prof[k], prof[k + 1]
        dirs.append(u)
        dist.append(t[k] + 0.25 * 0.5 * (a - c) / (a - 2 * b + c))      # parabolic peak
    dirs, dist = np.array(dirs), np.array(dist)
    shift, *_ = np.linalg.lstsq(dirs, dist - pitch / 2, rcond=None)
    return shift, dist


@real
def test_shipped_xml_lattice_matches_the_images_micro_image_boundaries():
    rt = read_raytrix_xml(XML)                         # size from sc2_klein.png beside it
    assert rt.grid.image_size == (964, 670) and rt.grid.lattice == 'hex'
    gray = cv2.imread(str(IMAGE), cv2.IMREAD_GRAYSCALE).astype(float)
    shift, dist = _boundary_shift(gray, rt.grid.centres(), rt.grid.pitch)
    # pitch and rotation: the boundaries on opposite sides of every lens are one pitch apart
    # (measured 34.86 px each way against the file's 34.8647), and one shift explains all six
    # (measured residual 0.02 px)
    assert np.allclose(dist[:3] + dist[3:], rt.grid.pitch, atol=0.3)
    resid = dist - rt.grid.pitch / 2 - np.array(
        [[np.cos(a), np.sin(a)] for a in np.radians(np.arange(0, 360, 60))]) @ shift
    assert np.abs(resid).max() < 0.3
    # the offset: measured (3.03, 2.45) px from the micro-images' centres in this crop; the
    # readers' convention (PlenopticToolbox2.0, the tinyxml reader: y up, from the image centre)
    # is followed as written, so this is recorded, not corrected
    assert shift == pytest.approx([3.03, 2.45], abs=0.3)


@real
def test_shipped_xml_aligned_to_its_image_sits_on_its_micro_images_within_0_3_px(tmp_path,
                                                                                 capsys):
    # the crop's micro-images sit ~(3, 2.5) px from where the XML's offset puts them (see the
    # test above); grid --import --align measures that on the image and moves the lattice
    out = tmp_path / 'g.yaml'
    assert main(['grid', '--import', str(XML), '--align', '-o', str(out)]) == 0
    text = capsys.readouterr().out
    measured = [float(v) for v in re.search(r"sit \(([-+.\d]+), ([-+.\d]+)\) px", text).groups()]
    assert measured == pytest.approx([3.03, 2.45], abs=0.3) and 'moved onto them' in text
    grid = load_grid(out)
    gray = cv2.imread(str(IMAGE), cv2.IMREAD_GRAYSCALE).astype(float)
    shift, _ = _boundary_shift(gray, grid.centres(), grid.pitch)       # the test's own measure
    assert np.hypot(*shift) < 0.3, shift
    doc = yaml.safe_load(out.read_text())
    assert doc['imported']['aligned']
    assert np.allclose(doc['imported']['measured_shift_px'], measured, atol=0.006)


def test_lattice_shift_finds_a_known_shift_in_a_synthetic_image():
    from lf_mpc_calib.lenslet.lattice_shift import lattice_shift
    grid = LensletGrid('hex', 20.0, 20.0 * np.sqrt(3) / 2, 0.01, [12.0, 11.0], (30, 26),
                       (600, 460), 1)
    true = grid.centres() + [2.6, -1.7]
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:460, 0:600].astype(float)
    from scipy.spatial import cKDTree
    dist, k = cKDTree(true).query(np.column_stack([x.ravel(), y.ravel()]))
    tex = cv2.GaussianBlur(rng.random((460, 600)), (0, 0), 1.5).ravel()
    disk = np.clip((9.0 - dist) / 1.5, 0, 1)             # lit disks with soft rims, dark gaps
    img = (disk * (60 + 120 * tex + 60 * rng.random(len(true))[k])).reshape(460, 600)
    found = lattice_shift(img + rng.normal(0, 2, img.shape), grid)
    assert found.shift == pytest.approx([2.6, -1.7], abs=0.1) and found.symmetry > 0.8


def test_boundary_measure_finds_a_known_shift_in_a_synthetic_image():
    # the measure the real-image test uses, checked: micro-images of random texture around
    # centres 1.3, -0.7 px off the grid it is given
    grid = LensletGrid('hex', 34.8647, 34.8647 * np.sqrt(3) / 2, 0.0, [20.0, 20.0], (26, 20),
                       (930, 620), 1)
    true = grid.centres() + [1.3, -0.7]
    rng = np.random.default_rng(3)
    h, w = 620, 930
    y, x = np.mgrid[0:h, 0:w].astype(float)
    from scipy.spatial import cKDTree
    _, k = cKDTree(true).query(np.column_stack([x.ravel(), y.ravel()]))
    tex = cv2.GaussianBlur(rng.random((h, w)), (0, 0), 2.0)
    img = (rng.random(len(true)) * 100)[k].reshape(h, w) + 200 * tex
    shift, _ = _boundary_shift(img, grid.centres(), grid.pitch)
    assert shift == pytest.approx([1.3, -0.7], abs=0.15)


@real
def test_grid_import_writes_a_grid_file_that_every_grid_reader_takes(tmp_path, capsys):
    out, centres = tmp_path / 'g.yaml', tmp_path / 'c.csv'
    assert main(['grid', '--import', str(XML), '-o', str(out), '--centres', str(centres)]) == 0
    text = capsys.readouterr().out
    assert 'pitch 34.8647 px' in text and 'virtual depth 3.8..100' in text
    doc = yaml.safe_load(out.read_text())
    assert doc['lens_types']['n_types'] == 3 and len(doc['lens_types']['type_of_class']) == 6
    g_yaml, g_xml = load_grid(out), load_grid(XML)
    assert np.allclose(g_yaml.centres(), g_xml.centres())
    assert np.allclose(np.loadtxt(centres, delimiter=',', skiprows=1), g_xml.centres(),
                       atol=1e-4)


def test_load_grid_takes_xml_by_suffix_with_a_size_or_a_sibling_image(tmp_path):
    path = _xml(tmp_path)
    with pytest.raises(InvalidInputError, match='holds no image size'):
        load_grid(path)
    assert load_grid(path, image_size=(964, 670)).image_size == (964, 670)
    cv2.imwrite(str(tmp_path / 'cam.png'), np.zeros((300, 400), np.uint8))
    assert load_grid(path).image_size == (400, 300)


def test_grid_check_reports_how_far_the_files_centres_are_from_the_whites(tmp_path, capsys):
    from lf_mpc_calib.lenslet.synthetic import white_image
    path = _xml(tmp_path, d=24.0, ox=0.0, oy=0.0)
    truth = read_raytrix_xml(path, (600, 480)).grid
    moved = LensletGrid(truth.lattice, truth.pitch, truth.row_spacing, truth.rotation,
                        truth.origin + [0.6, 0.0], truth.shape, truth.image_size,
                        truth.hex_parity)
    white = tmp_path / 'white.png'
    cv2.imwrite(str(white), white_image(moved, radius=11.0, vignetting=0.0, dtype=np.uint8))
    out = tmp_path / 'g.yaml'
    assert main(['grid', str(white), '--check', str(path), '-o', str(out)]) == 0
    text = capsys.readouterr().out
    check = yaml.safe_load(out.read_text())['check']
    assert check['rms_px'] == pytest.approx(0.6, abs=0.05), text
    assert '--check' in text and 'px RMS' in text
    assert main(['grid', str(white), '--check', str(path)]) == 0     # no -o needed


def test_grid_cli_refuses_mixed_or_missing_inputs(tmp_path, capsys):
    path = _xml(tmp_path)
    assert main(['grid', '--import', str(path)]) == 2
    assert main(['grid', 'w.png', '--import', str(path), '-o', str(tmp_path / 'g.yaml')]) == 2
    assert main(['grid', '--import', str(path), '-o', str(path)]) == 2     # over its input
    err = capsys.readouterr().err
    assert 'not both' in err and 'would overwrite' in err


@pytest.mark.parametrize('change, match', [
    (lambda t: t.replace('RayCalibData', 'OtherCalib'), "root element must be 'RayCalibData'"),
    (lambda t: t.replace('version="1.0"', 'version="2.0"'), "version must be one of .*'2.0'"),
    (lambda t: t.replace('<diameter units="pix">34.8647</diameter>', ''),
     "field 'diameter' is missing"),
    (lambda t: t.replace('>34.8647<', '>abc<'), "'diameter' must be a finite number, got 'abc'"),
    (lambda t: t.replace('>17.76<', '>nan<'), "'offset/x' must be a finite number, got 'nan'"),
    (lambda t: t.replace('<rotation units="rad">', '<rotation units="deg">'),
     "'rotation' must be in units 'rad', got units='deg'"),
    (lambda t: t.replace('<x>0.5</x>', '<x>0.0</x>').replace('-0.866025388241', '-1.0'),
     'must be 60 or 120 degrees apart'),
    (lambda t: t.replace('<x>1</x><y>0</y></offset>', '<x>0.5</x><y>0</y></offset>'),
     r'lens_type\[1\]/offset .* is not a lattice step'),
    (lambda t: t.replace('<x>-1</x><y>0</y>', '<x>3</x><y>0</y>'),
     'three different lens types'),
    (lambda t: t.replace('<function>constant</function>', '<function>polynomial</function>'),
     "distortion type='radial' function='polynomial'"),
    (lambda t: t.replace('<parameter count="0">0</parameter>', '<parameter count="1">0.01'
                         '</parameter>'), r"parameters \[0.01\]"),
    (lambda t: t.replace('<min>2.8</min>', '<min>5</min>'),
     r'lens_type\[1\]/depth_range must have 0 < min < max, got \[5, 4\]'),
    (lambda t: '<!DOCTYPE x [<!ENTITY a "b">]>' + t, 'DOCTYPE or entities'),
    (lambda t: t[:200], 'is not XML'),
])
def test_bad_raytrix_xml_is_refused_naming_the_field_and_value(tmp_path, change, match):
    path = _xml(tmp_path)
    path.write_text(change(path.read_text()))
    with pytest.raises(InvalidInputError, match=match):
        read_raytrix_xml(path, (964, 670))
