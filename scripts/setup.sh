#!/usr/bin/env bash
# Build .venv at the repository root: ROS 2 Kilted wheels from PyPI, tf2_msgs built from its
# one-line definition with the wheels' own rosidl generators, the project's Python dependencies,
# and lf_mpc_calib itself (editable), so `lf-mpc-calib` and the nodes are on .venv/bin.
#
# Idempotent: a stamp holding a hash of every input lets a second run return in about a second.
# Environment: PYTHON (interpreter to build the venv from, default python3, >= 3.10),
#              LF_SETUP_FORCE=1 (redo every step).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STAMP="$VENV/.lf_mpc_calib-setup.stamp"
TF2_STAMP="$VENV/.lf_mpc_calib-tf2_msgs.stamp"
REQ_ROS="$ROOT/scripts/requirements-ros.txt"
REQ="$ROOT/scripts/requirements.txt"
LOCK="$ROOT/scripts/constraints-py311.txt"
TF2_SRC="$ROOT/ros_interfaces/tf2_msgs"
START=$SECONDS

log() { printf '[setup %3ds] %s\n' "$((SECONDS - START))" "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# pip prints one warning per package for this machine's extra local indexes; drop that noise.
pip_quiet() {
  "$PY" -m pip install --disable-pip-version-check -q "$@" 2>&1 \
    | { grep -v -e 'is ignored: it is neither a file nor a directory' || true; }
}

hash_inputs() {
  # Everything that changes what is installed. setup.py/setup.cfg: entry points.
  cat "$ROOT/scripts/setup.sh" "$REQ_ROS" "$REQ" "$LOCK" "$ROOT/setup.py" "$ROOT/setup.cfg" \
    "$ROOT/package.xml" 2>/dev/null | sha256sum | cut -d' ' -f1
  hash_tf2
}
hash_tf2() {
  (cd "$TF2_SRC" && cat package.xml CMakeLists.txt msg/*.msg) | sha256sum | cut -d' ' -f1
}

# ---- fast path -------------------------------------------------------------------------------
HASH="$(hash_inputs | sha256sum | cut -d' ' -f1)"
if [[ "${LF_SETUP_FORCE:-0}" != 1 && -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]] \
    && "$PY" -c 'import rclpy, tf2_msgs.msg, lf_mpc_calib' 2>/dev/null; then
  log "reusing $VENV (inputs unchanged); done in $((SECONDS - START)) s"
  exit 0
fi

# ---- system tools (fresh Debian/Ubuntu): only what is missing ---------------------------------
PYTHON="${PYTHON:-python3}"
apt_pkgs=()
command -v "$PYTHON" >/dev/null 2>&1 || apt_pkgs+=(python3 python3-venv python3-dev)
command -v cmake >/dev/null 2>&1 || apt_pkgs+=(cmake)
command -v make >/dev/null 2>&1 || apt_pkgs+=(make)
command -v g++ >/dev/null 2>&1 || apt_pkgs+=(g++)
command -v gcc >/dev/null 2>&1 || apt_pkgs+=(gcc)
if command -v "$PYTHON" >/dev/null 2>&1; then
  "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || apt_pkgs+=(python3-venv)
  "$PYTHON" -c 'import os, sysconfig, sys
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' \
    || apt_pkgs+=(python3-dev)
fi
if ((${#apt_pkgs[@]})); then
  log "installing system packages: ${apt_pkgs[*]}"
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "$PYTHON is $("$PYTHON" --version 2>&1); Python >= 3.10 is needed (set PYTHON=...)"

# ---- venv ------------------------------------------------------------------------------------
if [[ ! -x "$PY" ]] || ! "$PY" -c 'import pip' 2>/dev/null; then
  log "creating $VENV with $("$PYTHON" --version 2>&1)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
else
  log "updating $VENV"
fi
rm -f "$STAMP"
# keep `colcon build` in the repository (or a workspace holding it) out of the venv's share/
touch "$VENV/COLCON_IGNORE" "$VENV/AMENT_IGNORE"

# The exact lock was made on CPython 3.11 (CI); other versions use the top-level pins only.
CONSTRAINTS=()
if "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  CONSTRAINTS=(-c "$LOCK")
else
  log "note: $("$PY" --version) is not 3.11; using top-level pins without the full lock"
fi

log "installing ROS 2 Kilted wheels and Python dependencies"
pip_quiet "${CONSTRAINTS[@]}" -r "$REQ_ROS" -r "$REQ"

# ---- fix the wheels' CMake files -------------------------------------------------------------
# The message wheels were built in a manylinux image; their exported CMake targets name that
# image's Python and NumPy include folders. Point them at this venv's, after every install.
PYINC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NPINC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
mapfile -t cmake_files < <(grep -rlE '/opt/python/cp[0-9]+-cp[0-9]+' "$VENV/share" \
  --include='*.cmake' 2>/dev/null || true)
if ((${#cmake_files[@]})); then
  log "pointing ${#cmake_files[@]} CMake files at $PYINC and $NPINC"
  sed -i -E \
    -e "s#/opt/python/cp[0-9]+-cp[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/(_core|core)/include#$NPINC#g" \
    -e "s#/opt/python/cp[0-9]+-cp[0-9]+/include/python3\.[0-9]+#$PYINC#g" \
    "${cmake_files[@]}"
fi

# ---- tf2_msgs from its definition ------------------------------------------------------------
TF2_HASH="$(hash_tf2)"
if [[ "${LF_SETUP_FORCE:-0}" == 1 || ! -f "$TF2_STAMP" || "$(cat "$TF2_STAMP")" != "$TF2_HASH" ]] \
    || ! "$PY" -c 'from tf2_msgs.msg import TFMessage' 2>/dev/null; then
  log "building tf2_msgs with the wheels' rosidl generators"
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  (
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
    cmake -S "$TF2_SRC" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$VENV" \
      -DPython3_EXECUTABLE="$PY" >"$build/log.txt" 2>&1 \
      && cmake --build "$build" -j"$(nproc)" >>"$build/log.txt" 2>&1 \
      && cmake --install "$build" >>"$build/log.txt" 2>&1
  ) || { tail -40 "$build/log.txt" >&2; die "building tf2_msgs failed"; }
  echo "$TF2_HASH" >"$TF2_STAMP"
fi

# ---- the package -----------------------------------------------------------------------------
# setup.cfg sends console scripts to lib/lf_mpc_calib (where `ros2 run` looks in a ROS
# workspace), and setuptools honours that for editable installs too; in the venv they belong
# on .venv/bin. An extra distutils config file, read after setup.cfg, overrides it here only.
log "installing lf_mpc_calib (editable)"
scripts_cfg="$VENV/.lf_mpc_calib-scripts.cfg"
printf '[develop]\nscript_dir=$base/bin\n[install]\ninstall_scripts=$base/bin\n' >"$scripts_cfg"
rm -rf "$VENV/lib/lf_mpc_calib"
DIST_EXTRA_CONFIG="$scripts_cfg" pip_quiet --no-deps --no-build-isolation -e "$ROOT"

# ---- checks ----------------------------------------------------------------------------------
log "checking imports and a publish/subscribe round trip over DDS"
for exe in lf-mpc-calib calibration_node decode_node sim_camera_node; do
  [[ -x "$VENV/bin/$exe" ]] || die "console script $exe missing from $VENV/bin"
done
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="$(( $$ % 100 + 1 ))" \
  "$PY" - <<'EOF' || die "the venv cannot publish/subscribe over DDS"
import time

import cv2  # noqa: F401
import matplotlib  # noqa: F401
import numpy  # noqa: F401
import rclpy
from rclpy.executors import SingleThreadedExecutor
import scipy  # noqa: F401
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import Image  # noqa: F401
from std_srvs.srv import Trigger  # noqa: F401
from tf2_msgs.msg import TFMessage
import yaml  # noqa: F401

rclpy.init()
try:
    node = rclpy.create_node('lf_mpc_calib_setup_check')
    got = []
    node.create_subscription(TFMessage, 'setup_check', got.append, 10)
    pub = node.create_publisher(TFMessage, 'setup_check', 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    deadline = time.monotonic() + 20.0
    while not got and time.monotonic() < deadline:
        pub.publish(TFMessage(transforms=[TransformStamped(child_frame_id='check')]))
        executor.spin_once(timeout_sec=0.1)
    assert got and got[0].transforms[0].child_frame_id == 'check', 'no message received'
    executor.shutdown()
    node.destroy_node()
finally:
    rclpy.try_shutdown()
EOF

echo "$HASH" >"$STAMP"
log "done in $((SECONDS - START)) s: activate with 'source .venv/bin/activate' or call .venv/bin/..."
