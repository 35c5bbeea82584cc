#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run), in two steps that together take about 14 minutes on a 2-core
# machine (plain `.venv/bin/python -m pytest` runs the same tests one at a time, which takes much longer). Run it
# after ./setup.sh, as root (the lab and the confinement tests need namespaces, FUSE and TUN). A part of it:
# `.venv/bin/python -m pytest tests/unit` (or contract, integration, lab).
set -euo pipefail
cd "$(dirname "$0")"
trap 'exit 130' INT  # Ctrl-C ends the suite: pytest stops at it, and the next step must not start
# Everything but the lab and the serial tests first, then those on their own: the lab's figures and the serial
# tests' timers are timing-sensitive and nothing else runs beside them. Together the two steps are the whole
# suite; each lists its slowest tests.
# Both steps always run, so one report shows every failure; the run fails if either did.
# The first step runs three tests at a time (pytest-xdist): most of them wait on servers, subprocesses and
# timeouts rather than on a core. Each worker has its own servers, free ports, temporary folders and results
# database; a check for leftover processes counts only its own worker's (tests/helpers.py). The lab stays
# one test at a time: its tests measure.
# A step whose tests failed (pytest's exit 1, nothing else: not an interrupt, an internal or a usage error) runs the
# failed ones once more, one at a time, from the step's own record of failures: two loaded cores can starve a
# server's reply past a deadline, and the lab's figures come from two cores shared by the client, the server and
# the delay line. A test that fails twice fails the run; the first failure stays in the log above.
status=0
run_step() {  # run_step NAME MARKERS [FIRST-RUN ARGS...]
  local cache=".pytest_cache/step-$1" markers="$2" rc=0
  shift 2
  .venv/bin/python -m pytest -o cache_dir="$cache" --cache-clear -m "$markers" --durations=25 "$@" || rc=$?
  if [ "$rc" -eq 1 ]; then
    echo "test.sh: tests failed; running the failed ones once more, one at a time"
    rc=0
    .venv/bin/python -m pytest -o cache_dir="$cache" -m "$markers" --last-failed --last-failed-no-failures none \
      --durations=25 || rc=$?
  fi
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
}
run_step parallel "not lab and not serial" -n 3 --dist worksteal
# Then, one test at a time in one session, the tests that need the machine to themselves: the lab's, and those
# that race a server's stop or kill against a copy by a few milliseconds (beside other workers their timers fire
# late and a 64 MiB loopback copy can end first). The racing ones (tests/integration) come first, before the lab's
# pool of concurrent labs starts (tests/lab/conftest.py).
run_step alone "lab or serial"
exit "$status"
