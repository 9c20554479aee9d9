#!/usr/bin/env bash
# Fails when a C++ file differs from clang-format's output (.clang-format at the root), or when
# an if/else/for/while body has no braces (scripts/check_braces.py: clang-format 14 cannot insert
# them, so the formatted text is read instead).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' 2>/dev/null || find src include tests bench -name '*.[ch]pp')
if [ ${#files[@]} -eq 0 ]; then
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files clean"

# Braces on every body, everywhere (scripts/check_braces.py: clang-format 14 cannot insert them).
brace_roots='^(src|include|tests|bench|fuzz|examples)/'
mapfile -t brace_files < <(printf '%s\n' "${files[@]}" | grep -E "$brace_roots" || true)
if [ ${#brace_files[@]} -gt 0 ]; then
  if ! python3 scripts/check_braces.py "${brace_files[@]}"; then
    exit 1
  fi
  echo "check-format: ${#brace_files[@]} files have braces on every body"
fi
