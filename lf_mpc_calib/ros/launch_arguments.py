"""
What the launch files (``launch/*.launch.py``) pass to the nodes from their arguments.

The three launch files take the same arguments for the same things (``docs/ros-session.md``).
A node's parameters come from its own file (``calibration_params_file``,
``decode_params_file``, ``sim_params_file``), then ``params_file`` (one file for any of the
nodes, sections ``/**/<node>``; applied last) when given, then the launch arguments that name a
parameter (``camera_name``, ``optical_frame``, ``image_reliability``, ...) only when given a
value: an argument left at '' never overrides what the files say.
"""

PARAMS_FILE = 'params_file'
"""The launch argument of the parameters file applied to every node after its own."""

CHOICES = {
    'sim': ('true', 'false'),
    'image_reliability': ('', 'best_effort', 'reliable'),
}
"""The launch arguments with a fixed set of values, and the values. Each launch file declares
them with ``choices=choices_of(name)``, so that launch refuses any other value (``sim:=yes``)
before a node starts; a condition that cannot read its value fails only where it is reached,
after the nodes before it have started (and they were left running)."""


def choices_of(name):
    """The ``choices`` of launch argument ``name`` (:data:`CHOICES`)."""
    return list(CHOICES[name])


def given_parameters(context, names):
    """{name: value} of the launch arguments ``names`` whose value is not '' (``context``: the
    LaunchContext of an OpaqueFunction)."""
    conf = context.launch_configurations
    return {n: conf[n] for n in names if conf.get(n, '') != ''}


def node_parameters(context, own_file_argument, names):
    """The ``parameters`` of a launch_ros Node: the file of launch argument
    ``own_file_argument``, the ``params_file`` when given, and :func:`given_parameters`."""
    conf = context.launch_configurations
    files = [conf[own_file_argument]] + ([conf[PARAMS_FILE]] if conf.get(PARAMS_FILE) else [])
    given = given_parameters(context, names)
    return files + ([given] if given else [])
