"""``python -m lf_mpc_calib``: the ``lf-mpc-calib`` command."""

import sys

from lf_mpc_calib.cli import main

sys.exit(main())
