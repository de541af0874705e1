"""
Raw frames from a rosbag2 (sqlite3 or mcap) for calibrate-raw.

    dataset = load_bag_dataset('session_bag', topic='/camera/image_raw', board=board,
                               white='white.png')
    run = calibrate_raw(dataset)          # the same code as for a folder of PNG files

Every message on the topic is one frame, a :class:`BagFrame`: it reads its message when the
pipeline asks for its pixels (so a bag of large frames is not held in memory) and goes through
:func:`lf_mpc_calib.io.images.read_float_image` like a file. A message that is not a
sensor_msgs/Image, or an Image that cannot be read (unsupported encoding, wrong data size),
raises InvalidInputError naming the message when read: calibrate_raw skips that frame and lists
it with the reason, as it does a frame without the board.

Bags are read with the pure-Python ``rosbags`` package (optional: imported only when a bag is
opened; ``pip install rosbags``). Bags without embedded message definitions (sqlite3 bags
before rosbag2 format 9) are read with the ROS 2 Kilted message types.
"""

from dataclasses import dataclass
from pathlib import Path

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import bayer_pattern, image_to_array
from lf_mpc_calib.io.raw_dataset import checked_grid, IMAGE_SUFFIXES, RawDataset

BAG_SUFFIXES = ('.db3', '.mcap')
IMAGE_TYPE = 'sensor_msgs/msg/Image'
WHITE_TOPIC_NAMES = ('white_image', 'white')
"""Last name component of topics taken as the white image when none is given."""


def _rosbags():
    """Import the parts of ``rosbags`` used here; InvalidInputError naming it when missing."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import get_typestore, Stores
    except ImportError as exc:
        raise InvalidInputError(
            'reading a rosbag2 needs the Python package rosbags (pip install rosbags; '
            f'scripts/requirements.txt pins it): {exc}') from exc
    return AnyReader, get_typestore(Stores.ROS2_KILTED)


def is_bag(path):
    """True for a rosbag2 folder (metadata.yaml, or .db3/.mcap files) or a .db3/.mcap file."""
    path = Path(path)
    if path.is_file():
        return path.suffix.lower() in BAG_SUFFIXES
    if not path.is_dir():
        return False
    return (path / 'metadata.yaml').is_file() or any(
        p.suffix.lower() in BAG_SUFFIXES for p in path.iterdir())


def _open(bag):
    """An AnyReader (not yet opened) of the bag folder or file ``bag``."""
    AnyReader, typestore = _rosbags()
    return AnyReader([Path(bag)], default_typestore=typestore)


def _bag_errors():
    """The exceptions ``rosbags`` raises for unreadable bags and messages."""
    errors = [OSError, KeyError, ValueError, TypeError, IndexError]
    try:
        from rosbags.highlevel import AnyReaderError
        errors.append(AnyReaderError)
    except ImportError:
        pass
    try:
        from rosbags.serde import SerdeError
        errors.append(SerdeError)
    except ImportError:
        pass
    return tuple(errors)


@dataclass(frozen=True, eq=False)
class BagFrame:
    """
    One message of a bag topic, read when its pixels are asked for.

    bag: the bag folder or file; topic; msgtype: the connection's message type; index: of the
    message among the topic's messages (0-based, time order); timestamp: the bag's receive
    time (ns); occurrence: which of the topic's messages at that timestamp (0 unless several
    share it); offset_ns: timestamp minus the bag's start, for the label. ``name`` (also its
    ``os.fspath``, so ``Path(frame).name`` labels it) reads ``'<bag name>#<index> (t=<ms
    since start> ms)'``; ``str`` adds ``' on <topic>'``.
    """

    bag: Path
    topic: str
    msgtype: str
    index: int
    timestamp: int
    occurrence: int = 0
    offset_ns: int = 0

    @property
    def name(self):
        """Label naming the bag, the message index and its time since the bag's start."""
        return f'{Path(self.bag).name}#{self.index} (t={self.offset_ns // 1_000_000} ms)'

    def __fspath__(self):
        return self.name

    def __str__(self):
        return f'{self.name} on {self.topic}'

    def message(self):
        """The deserialised message (rosbags' dataclass with sensor_msgs/Image's fields)."""
        errors = _bag_errors()
        try:
            with _open(self.bag) as reader:
                conns = [c for c in reader.connections if c.topic == self.topic]
                seen = 0
                for conn, t, raw in reader.messages(connections=conns, start=self.timestamp,
                                                    stop=self.timestamp + 1):
                    if t != self.timestamp:
                        continue
                    if seen == self.occurrence:
                        return reader.deserialize(raw, conn.msgtype)
                    seen += 1
        except errors as exc:
            raise InvalidInputError(f'{self}: cannot read the message '
                                    f'({type(exc).__name__}: {exc})') from exc
        raise InvalidInputError(f'{self.name}: no message on {self.topic} at t={self.timestamp} '
                                'ns (was the bag changed?)')

    def load(self):
        """
        The image's pixels: (H, W) or (H, W, 3|4) uint8/uint16 (see lf_mpc_calib.io.images).

        Raises InvalidInputError naming the message when it is not a sensor_msgs/Image or
        its pixels cannot be read.
        """
        if self.msgtype != IMAGE_TYPE:
            raise InvalidInputError(f'{self} is a {self.msgtype}, expected a {IMAGE_TYPE}')
        msg = self.message()
        try:
            return image_to_array(msg)
        except InvalidInputError as exc:
            raise InvalidInputError(f'{self}: {exc}') from exc

    def encoding(self):
        """The message's encoding string (None for a message that is not an Image)."""
        if self.msgtype != IMAGE_TYPE:
            return None
        return str(self.message().encoding)


def bag_frames(bag, topic):
    """
    Every message on ``topic`` of the bag as a :class:`BagFrame`, in time order.

    Raises InvalidInputError when the bag cannot be read or has no such topic (naming the
    topics it has, with their types).
    """
    bag = Path(bag)
    if not bag.exists():
        raise InvalidInputError(f'rosbag2 {bag} does not exist')
    errors = _bag_errors()
    try:
        with _open(bag) as reader:
            topics = {c.topic: c.msgtype for c in reader.connections}
            conns = [c for c in reader.connections if c.topic == topic]
            if not conns:
                have = ', '.join(f'{t} ({m})' for t, m in sorted(topics.items())) or 'none'
                raise InvalidInputError(f'rosbag2 {bag} has no topic {topic!r}; its topics: '
                                        f'{have}')
            start = int(reader.start_time)
            frames, seen = [], {}
            for conn, t, _ in reader.messages(connections=conns):
                occurrence = seen.get(t, 0)
                seen[t] = occurrence + 1
                frames.append(BagFrame(bag, topic, conn.msgtype, len(frames), int(t),
                                       occurrence, int(t) - start))
    except InvalidInputError:
        raise
    except errors as exc:
        raise InvalidInputError(
            f'{bag} is not a readable rosbag2 ({type(exc).__name__}: {exc})') from exc
    return frames


def bag_topics(bag):
    """{topic: message type} of a bag."""
    errors = _bag_errors()
    try:
        with _open(bag) as reader:
            return {c.topic: c.msgtype for c in reader.connections}
    except errors as exc:
        raise InvalidInputError(
            f'{bag} is not a readable rosbag2 ({type(exc).__name__}: {exc})') from exc


def _bag_dir(bag):
    bag = Path(bag)
    return bag if bag.is_dir() else bag.parent


def _find_white(bag, topics, topic):
    """The white image of a bag: the last message of its white topic, or white.* beside it."""
    candidates = sorted(t for t, m in topics.items() if t != topic and m == IMAGE_TYPE
                        and t.rstrip('/').rsplit('/', 1)[-1] in WHITE_TOPIC_NAMES)
    if len(candidates) == 1:
        return bag_frames(bag, candidates[0])[-1]
    folder = _bag_dir(bag)
    whites = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
                    and p.name.lower().startswith('white'))
    if len(whites) == 1 and not candidates:
        return whites[0]
    raise InvalidInputError(
        f'rosbag2 {bag}: give the white image (--white FILE or --white /TOPIC); found white '
        f'topics {candidates} and white files {[p.name for p in whites]} beside it')


def load_bag_dataset(bag, *, topic, board, white=None, demosaic=None, grid=None):
    """
    A :class:`lf_mpc_calib.io.raw_dataset.RawDataset` of the image messages on ``topic``.

    bag: a rosbag2 folder, or its .db3/.mcap file; board: a Checkerboard (required: a bag
    has no manifest); white: an image file, a topic of the bag (its last message, e.g. the
    simulated camera's latched ``white_image``), or None: the bag's one topic named
    ``white_image``/``white``, else the one ``white.*`` file beside the bag; demosaic: Bayer
    pattern, None: taken from the first image message's encoding (bayer_*); grid: as for
    :func:`lf_mpc_calib.io.raw_dataset.load_raw_folder`.
    """
    bag = Path(bag)
    if topic is None:
        raise InvalidInputError(f'{bag} is a rosbag2: give the image topic (--topic '
                                '/camera/image_raw)')
    if board is None:
        raise InvalidInputError(f'rosbag2 {bag}: give the board (--board COLSxROWS --square M)')
    frames = bag_frames(bag, topic)
    if not frames:
        raise InvalidInputError(f'rosbag2 {bag}: no messages on {topic}')
    topics = bag_topics(bag)
    if white is None:
        white = _find_white(bag, topics, topic)
    elif isinstance(white, str) and white.startswith('/') and white in topics:
        white = bag_frames(bag, white)[-1]
    else:
        white = Path(white)
        if not white.is_file():
            raise InvalidInputError(f'white image {white} is neither a file nor a topic of '
                                    f'{bag} (topics: {sorted(topics)})')
    if demosaic is None:
        for frame in frames:
            if frame.msgtype == IMAGE_TYPE:
                try:
                    demosaic = bayer_pattern(frame.encoding())
                except InvalidInputError:
                    continue
                break
    return RawDataset(frames, white, board, demosaic, None, bag.name, checked_grid(grid, white))
