#!/usr/bin/env bash
# Builds the self-contained zeus_cpp wheels into dist/ (and, with --sdist, the source archive too),
# from the `release` preset's build folder: the extension and the CLI's objects are the ones that
# build already made (only the wheel's CLI, `zeus_wheel_cli`, is linked on top), then the in-tree
# PEP 517 backend (packaging/python/zeus_build_backend.py) ships the non-system shared libraries
# under zeus_cpp.libs/ with patchelf and tags the wheel manylinux_2_X from the symbol versions the
# files need (docs/python.md, "Installing the wheel").
# One wheel per CPython version from 3.10 to 3.13 that this machine has with its headers
# (packaging/python/zeus_pythons.py: Debian's python3.X or pyenv's; a missing one is skipped with
# a message): only the extension is compiled once per version (src/python's
# ZEUS_PYTHON_EXTRA_INTERPRETERS); the libraries under it, the CLI and the shipped libraries are
# the same build's (docs/python.md, "Python versions").
#   scripts/wheel.sh [--sdist] [--out DIR]
# Prints each wheel's path, the release build's own Python's last.
set -euo pipefail
cd "$(dirname "$0")/.."

sdist=0
out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --sdist) sdist=1 ;;
    --out)
      out=${2:?--out needs a folder}
      shift
      ;;
    *)
      echo "usage: scripts/wheel.sh [--sdist] [--out DIR]" >&2
      exit 2
      ;;
  esac
  shift
done

if ! command -v patchelf >/dev/null; then
  echo "wheel.sh: patchelf is needed to make the wheel self-contained (apt-get install patchelf)" >&2
  exit 1
fi
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake --preset release >/dev/null
# The interpreter the release build's extension is for (src/python/CMakeLists.txt), then the
# other versions' (packaging/python/zeus_pythons.py says on stderr which ones are missing).
python=$(sed -n 's/^_\?Python_EXECUTABLE:[A-Z]*=//p' build/release/CMakeCache.txt | head -1)
python=${python:-/usr/bin/python3}
own=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
others=()
while read -r version interpreter; do
  if [ "$interpreter" != "-" ] && [ "$version" != "$own" ]; then
    others+=("$interpreter")
  fi
done < <("$python" packaging/python/zeus_pythons.py)
extra=$(IFS=';' && echo "${others[*]}")
cmake --preset release -DZEUS_PYTHON_EXTRA_INTERPRETERS="$extra" >/dev/null
# Build output on stderr: stdout carries only the paths of what was built.
cmake --build --preset release >&2
mkdir -p "$out"
# The backend builds the package targets (up to date by now) and packs the wheel for the
# interpreter that runs it; the sdist once, with the build's own.
for interpreter in "${others[@]}" "$python"; do
  with_sdist=0
  if [ "$interpreter" = "$python" ]; then
    with_sdist=$sdist
  fi
  ZEUS_CPP_BUILD_DIR="$PWD/build/release" ZEUS_CPP_WHEEL_REPAIR=yes "$interpreter" -c '
import sys
sys.path.insert(0, "packaging/python")
import zeus_build_backend as backend
out = sys.argv[1]
names = [backend.build_wheel(out)]
if sys.argv[2] == "1":
    names.append(backend.build_sdist(out))
for name in names:
    print(f"{out}/{name}")
' "$out" "$with_sdist"
done
