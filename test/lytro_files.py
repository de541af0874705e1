"""
Writers of synthetic Lytro files in the documented formats, for the tests (no camera data is
shipped): the LFP container (.lfr Illum / .lfp F01 layouts) and bare .raw with sidecars.
"""

import hashlib
import json
import struct

from lf_mpc_calib.io.lytro import (CONTENT_MAGIC, LFP_MAGIC, pack_raw, TOC_MAGIC)


def illum_metadata(width, height, *, zoom=100, focus=500, exposure=0.01, black=64.0,
                   white=1023.0, mosaic=True):
    """Illum picture metadata (Lytro Desktop 4 layout: image.pixelPacking etc.)."""
    image = {'width': width, 'height': height,
             'pixelPacking': {'bitsPerPixel': 10, 'endianness': 'little'},
             'pixelFormat': {'black': {'r': black, 'gr': black, 'gb': black, 'b': black},
                             'white': {'r': white, 'gr': white, 'gb': white, 'b': white},
                             'rightShift': 0}}
    if mosaic:
        image['mosaic'] = {'tile': 'r,gr:gb,b', 'upperLeftPixel': 'gr'}
    return {'camera': {'make': 'Lytro, Inc.', 'model': 'ILLUM'}, 'image': image,
            'devices': {'lens': {'zoomStep': zoom, 'focusStep': focus},
                        'shutter': {'frameExposureDuration': exposure},
                        'sensor': {'iso': 200}}}


def f01_metadata(width, height, *, zoom=10, focus=20, black=168.0, white=4095.0):
    """F01 picture metadata (image.rawDetails layout)."""
    fmt = {'black': {'r': black, 'gr': black, 'gb': black, 'b': black},
           'white': {'r': white, 'gr': white, 'gb': white, 'b': white}, 'rightShift': 0}
    return {'camera': {'make': 'Lytro, Inc.', 'model': 'F01'},
            'image': {'width': width, 'height': height,
                      'rawDetails': {'pixelPacking': {'bitsPerPixel': 12, 'endianness': 'big'},
                                     'pixelFormat': fmt,
                                     'mosaic': {'tile': 'r,g:g,b', 'upperLeftPixel': 'b'}}},
            'devices': {'lens': {'zoomStep': zoom, 'focusStep': focus}}}


def private(serial):
    return {'camera': {'serialNumber': serial}, 'sensor': {'sensorSerial': 'S' + serial}}


def _section(magic, data):
    name = ('sha1-' + hashlib.sha1(data).hexdigest()).encode('ascii')
    head = magic + b'\x00\x00\x00\x00' + struct.pack('>I', len(data)) + name + b'\x00' * 35
    pad = b'\x00' * (-len(data) % 16)
    return head + data + pad, name.decode('ascii')


def write_lfp(path, codes, metadata, private_metadata, *, bits, layout='illum', image=True):
    """An LFP container: table of contents, then metadata, private metadata, image sections."""
    meta, meta_ref = _section(CONTENT_MAGIC, json.dumps(metadata, indent=2).encode())
    priv, priv_ref = _section(CONTENT_MAGIC, json.dumps(private_metadata).encode())
    img, img_ref = _section(CONTENT_MAGIC, pack_raw(codes, bits))
    frame = {'metadataRef': meta_ref, 'privateMetadataRef': priv_ref}
    if image:
        frame['imageRef'] = img_ref
    toc = ({'frames': [{'frame': frame}]} if layout == 'illum'
           else {'picture': {'frameArray': [{'frame': frame}]}})
    toc_section, _ = _section(TOC_MAGIC, json.dumps(toc, indent=2).encode())
    path.write_bytes(LFP_MAGIC + b'\x00' * 4 + toc_section + meta + priv + (img if image else b''))
    return path


def write_raw(path, codes, bits, metadata=None, private_metadata=None, *, sidecar='archive'):
    """A bare .raw and its sidecar: 'archive' (<name>.TXT as in the white-image archives),
    'export' (<name>_metadata.json + _private_metadata.json) or None."""
    path.write_bytes(pack_raw(codes, bits))
    if sidecar == 'archive':
        doc = {'master': {'picture': {'frameArray': [{'frame': {
            'metadata': metadata, 'privateMetadata': private_metadata}}]}}}
        path.with_suffix('.TXT').write_text(json.dumps(doc))
    elif sidecar == 'export':
        base = path.with_suffix('')
        (base.parent / f'{base.name}_metadata.json').write_text(json.dumps(metadata))
        (base.parent / f'{base.name}_private_metadata.json').write_text(
            json.dumps(private_metadata))
    return path
