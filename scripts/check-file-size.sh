#!/usr/bin/env bash
# Fails naming each source file over 600 lines (docs/design.md: no source file over 600 lines):
# C++, Python, shell, JavaScript and CSS under src, include, python, tests, fuzz, bench, scripts
# and examples. Generated files are not in git and are not checked.
#
# scripts/file-size-exceptions.txt lists the files still allowed over the limit, one path a line;
# the list only shrinks: the check also fails for a listed file that is no longer over the limit
# (or no longer exists), so that its line is removed when the file is split.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=600
exceptions_file=scripts/file-size-exceptions.txt
roots=(src include python tests fuzz bench scripts examples)
pattern='\.(c|cc|cpp|h|hpp|py|sh|js|css)$'

if files_text=$(git ls-files --cached --others --exclude-standard -- "${roots[@]}" 2>/dev/null); then
  mapfile -t files < <(printf '%s\n' "$files_text" | grep -E "$pattern" || true)
else
  mapfile -t files < <(find "${roots[@]}" -type f 2>/dev/null | grep -E "$pattern" | sort)
fi

exceptions=()
if [ -f "$exceptions_file" ]; then
  mapfile -t exceptions < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$exceptions_file" | grep -v '^$' || true)
fi
is_exception() {
  local file=$1 listed
  for listed in "${exceptions[@]}"; do
    if [ "$listed" = "$file" ]; then
      return 0
    fi
  done
  return 1
}

failed=0
for file in "${files[@]}"; do
  [ -f "$file" ] || continue
  lines=$(wc -l <"$file")
  if [ "$lines" -gt "$limit" ] && ! is_exception "$file"; then
    echo "check-file-size: $file has $lines lines (limit $limit): split it along a natural seam" >&2
    failed=1
  fi
done
for listed in "${exceptions[@]}"; do
  if [ ! -f "$listed" ]; then
    echo "check-file-size: $exceptions_file lists $listed, which does not exist: remove its line" >&2
    failed=1
  elif [ "$(wc -l <"$listed")" -le "$limit" ]; then
    echo "check-file-size: $listed is within $limit lines now: remove it from $exceptions_file" >&2
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "check-file-size: ${#files[@]} files within $limit lines (${#exceptions[@]} listed exceptions)"
