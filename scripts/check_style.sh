#!/usr/bin/env bash
# The style checks CI runs (ctest `style`), on a configured build's compile_commands.json:
#   1. clang-format: the lines changed since BASE are formatted as .clang-format says (git clang-format --diff, so
#      untouched code is not reformatted and clang-format releases that differ on old code do not matter);
#   2. clang-tidy: the C++ files changed since BASE raise none of .clang-tidy's checks (the list is there);
#   3. function size: no function in stack/ is longer than 120 lines (clang-tidy's readability-function-size),
#      except those listed in scripts/long_functions.txt, a list that may only shrink (issue 18).
#   scripts/check_style.sh [BUILD_DIR] [BASE]
# BUILD_DIR defaults to build/; BASE to $NPUSIM_STYLE_BASE, else the parent of HEAD (CI checks the last commit;
# before committing, pass the commit your work started from). Without git history, 1 and 2 are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
base=${2:-${NPUSIM_STYLE_BASE:-HEAD~1}}
tidy=$(command -v clang-tidy || ls /usr/bin/clang-tidy-* 2>/dev/null | sort -V | tail -1 || true)
gcf=$(command -v git-clang-format || ls /usr/bin/git-clang-format-* 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$tidy" ] || [ -z "$gcf" ]; then
  echo "check_style: clang-tidy and clang-format are needed (scripts/setup.sh installs them)" >&2
  exit 1
fi
[ -f "$build/compile_commands.json" ] || { echo "check_style: $build/compile_commands.json is missing (configure first)" >&2; exit 1; }
status=0

# Files of the C++ build changed since BASE (added, copied, modified, renamed), existing now.
changed=()
if git rev-parse -q --verify "$base^{commit}" >/dev/null 2>&1; then
  while IFS= read -r f; do
    [ -f "$f" ] && changed+=("$f")
  done < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp' '*.hpp' '*.h' | grep -v '^tests/golden/' || true)
  echo "check_style: ${#changed[@]} C++ file(s) changed since $(git rev-parse --short "$base")"
else
  echo "check_style: no commit '$base' (no history): format and tidy checks of changed files skipped"
fi

if [ ${#changed[@]} -gt 0 ]; then
  # 1. Formatting of the changed lines. The binary is found from the wrapper's own version.
  cf=$(command -v clang-format || ls /usr/bin/clang-format-* 2>/dev/null | sort -V | tail -1)
  diff=$("$gcf" --binary "$cf" --diff "$base" -- "${changed[@]}" 2>&1 || true)
  if [ -n "$diff" ] && ! grep -q "^no modified files to format\|^clang-format did not modify any files" <<<"$diff"; then
    echo "$diff"
    echo "check_style: lines changed since $base are not formatted (fix: $gcf --binary $cf $base)" >&2
    status=1
  fi
  # 2. clang-tidy on the changed translation units (headers through the files that include them); only warnings in
  #    changed files count.
  units=()
  for f in "${changed[@]}"; do
    case "$f" in *.cpp) grep -q "\"file\": \".*/$f\"" "$build/compile_commands.json" && units+=("$f") ;; esac
  done
  if [ ${#units[@]} -gt 0 ]; then
    out=$(printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet 2>/dev/null || true)
    # clang-tidy 14 (Debian 12) predates x86's _Float16, which the compiler (g++) and later clang-tidy take: its
    # "not supported on this target" is the tool's limit, not the code's.
    found=$(grep -E "^[^ ]+:[0-9]+:[0-9]+: (warning|error):" <<<"$out" | grep -F -f <(printf '%s:\n' "${changed[@]}") |
              grep -v "_Float16 is not supported on this target" | sort -u || true)
    if [ -n "$found" ]; then
      echo "$found"
      echo "check_style: clang-tidy's checks (.clang-tidy) fail in the changed files above" >&2
      status=1
    fi
  fi
fi

# 3. Function size in stack/.
long=$(ls stack/*/*.cpp stack/*/*/*.cpp | grep -v '/python/' | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
         --checks='-*,readability-function-size' \
         --config='{CheckOptions: [{key: readability-function-size.LineThreshold, value: 120}]}' 2>/dev/null |
       sed -n "s|^$PWD/\(stack/[^:]*\):[0-9]*:[0-9]*: warning: function '\([^']*\)' exceeds.*|\1 \2|p" | sort -u || true)
allowed=$( (grep -v '^#' scripts/long_functions.txt || true) | sed '/^$/d' | sort -u)
new=$(comm -23 <(echo "$long" | sed '/^$/d') <(echo "$allowed"))
gone=$(comm -13 <(echo "$long" | sed '/^$/d') <(echo "$allowed"))
if [ -n "$new" ]; then
  echo "$new"
  echo "check_style: the function(s) above in stack/ are longer than 120 lines: split them into named parts" >&2
  status=1
fi
if [ -n "$gone" ]; then
  echo "$gone"
  echo "check_style: the function(s) above are no longer over 120 lines: remove them from scripts/long_functions.txt" >&2
  status=1
fi
[ $status -eq 0 ] && echo "check_style: ok ($(echo "$allowed" | sed '/^$/d' | wc -l) function(s) in stack/ still over 120 lines, listed)"
exit $status
