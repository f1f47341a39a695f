#!/usr/bin/env bash
# Applies the seeded bugs of scripts/mutants.txt one at a time to a copy of the tree and reports
# which test suite caught each and how fast. Run by hand; each suite runs under a time limit.
# A suite that hits it with no test failed counts as catching the bug only by hanging (`hang`);
# one in which a test had already failed an assertion counts as caught by it (`fail+limit`).
#
#   scripts/mutants.sh [--all] [--only M03,M07] [--limit SECONDS] [--no-control]
#
#   --all         run every suite on every mutant (default: stop at the first that catches it)
#   --only        the mutants to run (comma separated ids)
#   --limit       time limit of one suite (default 300 s)
#   --no-control  skip the run of every suite on the unmodified copy first
#   --check       only apply each mutant and say whether it still applies; run nothing
#
# The copy and its build live under target/mutants/ (kept between runs, so rebuilds are
# incremental; MUTANTS_WORK=DIR puts them elsewhere, so two runs can go side by side). A mutant's
# optional `first:` line names the suites to run before the others (the ones expected to catch
# it), and the report names the tests that failed in the suite that caught it. Suites, in
# order: rules (scheduler_rules, reliability, submit_waiting, hand_back, hardening), unit
# (--lib), churn, differential, soak (their small defaults), graph (the graph's key, follow and
# fault tests, the embedding and idle-executor tests), loom (the models, release).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ALL=0 ONLY="" LIMIT=300 CONTROL=1 CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --all) ALL=1 ;;
    --only) ONLY="$2"; shift ;;
    --limit) LIMIT="$2"; shift ;;
    --no-control) CONTROL=0 ;;
    --check) CHECK=1; CONTROL=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

WORK=${MUTANTS_WORK:-$ROOT/target/mutants}
TREE=$WORK/tree
export CARGO_TARGET_DIR=$WORK/target
mkdir -p "$TREE" "$WORK/logs"
# A clean copy of the tracked and untracked-but-not-ignored files (one tar: xargs would split a
# long list into several archives, and the reader stops at the end of the first).
rm -rf "$TREE" && mkdir -p "$TREE"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar xf - -C "$TREE"

SUITES=(rules unit churn differential soak graph loom)
suite_cmd() {
  case "$1" in
    rules) echo "cargo test --locked --test scheduler_rules --test reliability --test submit_waiting --test hand_back --test hardening" ;;
    unit) echo "cargo test --locked --lib" ;;
    churn) echo "cargo test --locked --test churn" ;;
    differential) echo "cargo test --locked --test differential" ;;
    soak) echo "cargo test --locked --test soak" ;;
    graph) echo "cargo test --locked --test graph_follow --test graph_keys --test graph_keys_differential --test graph_faults --test embedding --test idle_executors" ;;
    loom) echo "env RUSTFLAGS=--cfg\ loom LOOM_MAX_PREEMPTIONS=2 cargo test --locked --release --lib --target-dir $WORK/loom -- loom" ;;
  esac
}

# Applies mutant $1 to the copy; prints "applied" or "did not apply (why)".
apply() {
  python3 - "$ROOT/scripts/mutants.txt" "$1" "$TREE" <<'PY'
import sys, pathlib
spec, want, tree = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == '\\' and i + 1 < len(s) and s[i + 1] in 'n\\':
            out.append('\n' if s[i + 1] == 'n' else '\\'); i += 2
        else:
            out.append(s[i]); i += 1
    return ''.join(out)
entry, cur = None, None
for line in open(spec):
    line = line.rstrip('\n')
    if line.startswith('## '):
        cur = {'id': line[3:].split()[0]}
        if cur['id'] == want:
            entry = cur
    elif cur is not None and ':' in line and not line.startswith('#'):
        k, v = line.split(':', 1)
        cur[k.strip()] = v[1:] if v.startswith(' ') else v
if entry is None:
    print('did not apply (no such mutant)'); sys.exit(0)
path = tree / entry['file']
if not path.exists():
    print(f"did not apply ({entry['file']} is gone)"); sys.exit(0)
text = path.read_text()
find, repl = unescape(entry['find']), unescape(entry['replace'])
n = text.count(find)
if n != 1:
    print(f"did not apply (search text found {n} times in {entry['file']})"); sys.exit(0)
path.write_text(text.replace(find, repl))
print('applied')
PY
}

restore() {
  (cd "$ROOT" && git ls-files -co --exclude-standard -z -- src | tar --null -T - -cf -) | tar xf - -C "$TREE"
}

# The suites in the order a mutant runs them: those of its `first:` line, then the rest.
suite_order() {
  local first w order=""
  first=$(awk -v id="$1" '/^## /{cur=$2} cur==id && /^first:/{sub(/^first: */,""); print}' \
    "$ROOT/scripts/mutants.txt")
  for w in $first; do order="$order $w"; done
  for w in "${SUITES[@]}"; do case " $order " in *" $w "*) ;; *) order="$order $w" ;; esac; done
  echo "$order"
}

# The tests that failed in a suite's log, comma separated (libtest's `test NAME ... FAILED`
# lines, and a panic without a test name as `panic: FIRST LINE`).
failed_tests() {
  local names
  names=$(grep -Eo '^test [^ ]+ \.\.\. FAILED' "$1" | awk '{print $2}' | sort -u | paste -sd, -)
  if [ -z "$names" ]; then
    names=$(grep -m1 -E "panicked at|error\[" "$1" | cut -c1-80)
    [ -n "$names" ] && names="panic: $names"
  fi
  echo "${names:-no test named}"
}

# Runs the suites on the copy; prints "suite:result:seconds" words, stopping at the first catch
# unless --all. The debug test binaries are built once, before the first suite that needs them
# (so a mutant that loom catches first builds none).
run_suites() {
  local tag="$1" out="" built=0
  for s in $(suite_order "$tag"); do
    if [ "$s" != loom ] && [ "$built" = 0 ]; then
      (cd "$TREE" && cargo test --locked --no-run --lib --tests >"$WORK/logs/$tag-build.log" 2>&1)
      if [ $? -ne 0 ]; then echo "$out build:failed-to-build:0"; return; fi
      built=1
    fi
    local t0 rc secs res
    t0=$(date +%s)
    (cd "$TREE" && eval "timeout --kill-after=10 $LIMIT $(suite_cmd "$s")") \
      >"$WORK/logs/$tag-$s.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    # A suite that reaches its limit after a test failed an assertion caught the bug by that
    # assertion (other tests may loop under the same bug): `fail`, with the note `+limit`.
    case $rc in
      0) res=pass ;;
      124|137)
        if grep -qE '^test [^ ]+ \.\.\. FAILED' "$WORK/logs/$tag-$s.log"; then res=fail+limit; else res=hang; fi ;;
      *) res=fail ;;
    esac
    out="$out $s:$res:$secs"
    if [ "$res" != pass ] && [ "$ALL" = 0 ]; then break; fi
  done
  echo "$out"
}

if [ "$CONTROL" = 1 ]; then
  echo "control run on the unmodified copy..."
  r=$(run_suites control)
  echo "control: $r"
  case "$r" in *fail*|*hang*) echo "the unmodified tree does not pass every suite; fix that first" >&2; exit 1 ;; esac
fi

IDS=$(grep -o '^## M[0-9]*' scripts/mutants.txt | cut -c4-)
[ -n "$ONLY" ] && IDS=$(echo "$ONLY" | tr ',' ' ')
declare -a ROWS=()
for id in $IDS; do
  restore
  desc=$(grep "^## $id " scripts/mutants.txt | cut -d' ' -f3-)
  status=$(apply "$id")
  if [ "$status" != applied ]; then
    ROWS+=("$(printf '%-4s %-70s %s' "$id" "$desc" "$status")")
    echo "$id: $status"
    continue
  fi
  if [ "$CHECK" = 1 ]; then
    (cd "$TREE" && cargo check --locked --lib --tests >"$WORK/logs/$id-check.log" 2>&1) &&
      status="applies, builds" || status="applies, DOES NOT BUILD (see $WORK/logs/$id-check.log)"
    ROWS+=("$(printf '%-4s %-70s %s' "$id" "$desc" "$status")")
    echo "$id: $status"
    continue
  fi
  echo "$id: applied; running suites..."
  r=$(run_suites "$id")
  caught="not caught"
  for w in $r; do
    IFS=: read -r s res secs <<<"$w"
    if [ "$res" != pass ]; then
      what="$s ($res, ${secs}s"
      case "$res" in fail*) what="$what: $(failed_tests "$WORK/logs/$id-$s.log")" ;; esac
      what="$what)"
      if [ "$caught" = "not caught" ]; then caught="$what"; else caught="$caught, $what"; fi
    fi
  done
  ROWS+=("$(printf '%-4s %-70s %s' "$id" "$desc" "$caught")")
  echo "$id: $caught   [$r ]"
done
restore

echo
echo "== seeded bugs: which suite caught each (suite time) =="
for row in "${ROWS[@]}"; do echo "$row"; done
