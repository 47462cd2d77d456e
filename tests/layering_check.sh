#!/usr/bin/env bash
# Fails when a source file includes a header of a layer it may not depend on (DESIGN.md: stack -> firmware -> hw;
# every layer may use traces/ and common/; traces/ and common/ use nothing of the simulator).
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
status=0
check() {  # folder, forbidden include prefixes...
  local dir=$1; shift
  [ -d "$dir" ] || return 0
  for bad in "$@"; do
    hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]${bad}/" "$dir" --include='*.hpp' --include='*.cpp' --include='*.h' || true)
    if [ -n "$hits" ]; then
      echo "layering violation: $dir must not include $bad/:"
      echo "$hits"
      status=1
    fi
  done
}
check common hw firmware stack traces cli
check traces hw firmware stack cli
check hw firmware stack cli
check firmware stack cli
check stack cli
# Inside stack, top to bottom: framework -> graph -> ops -> runtime -> driver.
check stack/graph stack/framework
check stack/ops stack/graph stack/framework
check stack/runtime stack/ops stack/graph stack/framework
check stack/driver stack/runtime stack/ops stack/graph stack/framework
# Inside firmware: platform (the chip with its firmware) -> ts (the task scheduler) -> kernel (the kernel API).
check firmware/ts firmware/platform
check firmware/kernel firmware/ts firmware/platform
[ $status -eq 0 ] && echo "layering: ok"
exit $status
