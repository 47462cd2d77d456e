#!/usr/bin/env bash
# Sets everything up and runs npusim's main job on the built-in default config (910b).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/npusim info "$@"
