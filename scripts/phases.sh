# Timed phases for .ci/run and scripts/test.sh (sourced, not run).
#
# `phase NAME COMMAND...` runs one step, records its wall time and exit status
# and returns that status (so under `set -e` a failed phase stops the script).
# The script that sources this first owns the record ($PHASE_TIMES) and prints
# the summary when it exits, failed or not; a script it calls adds its own
# phases to the same record, so .ci/run's summary includes scripts/test.sh's.
# Adding a phase is one line: `phase "my phase" my-command --its args`.
if [ -z "${PHASE_TIMES:-}" ]; then
  PHASE_TIMES=$(mktemp "${TMPDIR:-/tmp}/phases.XXXXXX")
  export PHASE_TIMES
  _phases_started=$(date +%s)
  _phases_summary() {
    local status=$?
    echo "== phase timings (s)"
    awk -F'\t' '{ printf "  %-26s %6d%s\n", $1, $2, ($3 == 0 ? "" : "  FAILED (exit " $3 ")") }' \
      "$PHASE_TIMES"
    printf '  %-26s %6d\n' "total" "$(( $(date +%s) - _phases_started ))"
    rm -f "$PHASE_TIMES"
    return "$status"
  }
  trap _phases_summary EXIT
fi

phase() {
  local name=$1 started status=0
  shift
  echo "== $name: $*"
  started=$(date +%s)
  "$@" || status=$?
  printf '%s\t%s\t%s\n' "$name" "$(( $(date +%s) - started ))" "$status" >> "$PHASE_TIMES"
  return "$status"
}
