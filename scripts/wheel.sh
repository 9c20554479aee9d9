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
# With the cross toolchain (scripts/setup.sh installs it), also the aarch64 wheel, for Debian's
# arm64 CPython 3.11, from the `aarch64` preset's cross build (built once, here), packed by that
# interpreter itself under qemu-user (scripts/aarch64-python), so that its tags and extension
# suffix are its own; the repair is the same (docs/arm.md). --cli adds the `zeus` CLI tarball of
# each machine (packaging/python/zeus_cli_tarball.py), for nodes without Python.
#   scripts/wheel.sh [--sdist] [--cli] [--arch host|aarch64|all] [--out DIR]
# Prints each file's path: the host's wheels (the release build's own Python's last), then the
# aarch64 wheel, then the tarballs.
set -euo pipefail
cd "$(dirname "$0")/.."

sdist=0
cli=0
arch=all
out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --sdist) sdist=1 ;;
    --cli) cli=1 ;;
    --arch)
      arch=${2:?--arch needs host, aarch64 or all}
      case "$arch" in
        host | aarch64 | all) ;;
        *)
          echo "wheel.sh: --arch is host, aarch64 or all, not '$arch'" >&2
          exit 2
          ;;
      esac
      shift
      ;;
    --out)
      out=${2:?--out needs a folder}
      shift
      ;;
    *)
      echo "usage: scripts/wheel.sh [--sdist] [--cli] [--arch host|aarch64|all] [--out DIR]" >&2
      exit 2
      ;;
  esac
  shift
done

tarballs=()
if ! command -v patchelf >/dev/null; then
  echo "wheel.sh: patchelf is needed to make the wheel self-contained (apt-get install patchelf)" >&2
  exit 1
fi
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
if [ "$arch" != aarch64 ]; then
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
  if [ "$cli" -eq 1 ]; then
    tarballs+=("$(/usr/bin/python3 packaging/python/zeus_cli_tarball.py build/release "$out")")
  fi
fi

# The aarch64 wheel and tarball: skipped, with what to install, where the cross toolchain is not.
if [ "$arch" != host ]; then
  if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null ||
    [ ! -e /usr/lib/aarch64-linux-gnu/libpython3.11.so.1.0 ]; then
    echo "wheel.sh: no aarch64 wheel: the cross toolchain, qemu-user or the arm64 libraries are" \
      "missing (scripts/setup.sh installs them; docs/arm.md)" >&2
    if [ "$arch" = aarch64 ]; then
      exit 1
    fi
  else
    cmake --preset aarch64 >/dev/null
    cmake --build --preset aarch64 >&2
    mkdir -p "$out"
    ZEUS_CPP_BUILD_DIR="$PWD/build/aarch64" ZEUS_CPP_WHEEL_REPAIR=yes scripts/aarch64-python -c '
import sys
sys.path.insert(0, "packaging/python")
import zeus_build_backend as backend
print(f"{sys.argv[1]}/{backend.build_wheel(sys.argv[1])}")
' "$out"
    if [ "$cli" -eq 1 ]; then
      tarballs+=("$(/usr/bin/python3 packaging/python/zeus_cli_tarball.py build/aarch64 "$out")")
    fi
  fi
fi
for tarball in "${tarballs[@]}"; do
  echo "$tarball"
done
