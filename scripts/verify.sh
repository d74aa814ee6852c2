#!/usr/bin/env bash
# Model-checks the protocols under verify/ with spin (docs/verification.md):
# every model must pass with 0 errors, every mutation (and every known
# counterexample listed in FINDINGS) must be reported as a violation.
# Builds in a temporary directory, never in the repository. Prints each
# run's states explored and time.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v spin >/dev/null || { echo "verify: spin is not installed (apt-get install spin, or make services)" >&2; exit 1; }
CC=${CC:-gcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# model: mutations that must be caught
declare -A MUTANTS=(
	[lease]="MUTANT_TAKEOVER_NO_SKIP MUTANT_RESERVE_BEFORE_ACK MUTANT_REPLICA_WORD MUTANT_NO_LOSS_MARGIN MUTANT_NO_REGRESSION_CHECK"
	[lanes]="MUTANT_JOIN_MIDSECOND MUTANT_RETIRE_EARLY MUTANT_TAKEOVER_NO_SKIP MUTANT_LANE_NO_D1"
	[segments]="MUTANT_GIVEBACK_NO_CAS MUTANT_TAKE_NO_CAS MUTANT_NO_HIGH_WATER MUTANT_NO_SETTLE MUTANT_NO_LOSS_DETECTION MUTANT_DETECT_NO_SETTLE MUTANT_NO_YOUNG_EPOCH_SETTLE MUTANT_TAKE_BESIDE_CHECK"
	[blocks]="MUTANT_USE_REDELIVERY MUTANT_NO_CREATED_CHECK MUTANT_PUBLISH_RETRY MUTANT_HOLD_UNKNOWN MUTANT_NO_BLOCK_MEMORY"
	[fleet]="MUTANT_NO_HORIZON MUTANT_NO_REVOKE MUTANT_NO_SEAL MUTANT_REPLICA_SEAL MUTANT_LANE_NO_CHECK MUTANT_NO_FLOOR"
	[disposable]="MUTANT_ACCEPT_REUSED MUTANT_NO_DURABLE_ROW"
	[rangechain]="MUTANT_ADD_NOT_ATOMIC MUTANT_PUBLISH_BEFORE_LINK MUTANT_NO_RECHECK"
	[reserve]="MUTANT_RESERVE_BEFORE_RING_EMPTY MUTANT_NO_ADVANCE MUTANT_TAKE_NOT_CAS MUTANT_NO_LAST_USED"
)
# model: configurations outside the stated assumptions that spin shows
# to fail (docs/verification.md, "Findings"): run so that a change which
# makes them pass is noticed.
declare -A FINDINGS=(
	[lease]="DESIGN_CLAIM_MARGIN"
	[segments]="DESIGN_SETTLE_AT_START"
	[blocks]="DESIGN_MEMORY_AGE"
)
# model: further runs that must pass as the model does (another bound,
# e.g. the protocol without the store's loss at a larger bound).
declare -A VARIANTS=(
	[segments]="WITHOUT_LOSS SILENT_LOSS UNTOLD_LOSS"
	[blocks]="WITHOUT_LOSS"
	[fleet]="WITH_LANE"
)
MODELS=(lease lanes segments blocks disposable fleet rangechain reserve)
# scripts/verify.sh MODEL...: only those models (and their mutations).
if [ $# -gt 0 ]; then MODELS=("$@"); fi

failed=0
# run MODEL [DEFINE]: prints "<errors> <states> <seconds>"
run() {
	local model=$1 def=${2:-} dir
	dir=$work/$model${def:+-$def}
	mkdir -p "$dir"
	cp "verify/$model.pml" "$dir/"
	(cd "$dir" && spin ${def:+-D$def} -a "$model.pml" >spin.out 2>&1 &&
		$CC -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c &&
		./pan -m1000000 -E >pan.out 2>&1) || { cat "$dir/spin.out" "$dir/pan.out" 2>/dev/null >&2; echo "x 0 0"; return; }
	if grep -q "max search depth too small\|out of memory" "$dir/pan.out"; then
		grep "max search depth too small\|out of memory" "$dir/pan.out" >&2
		echo "x 0 0"; return
	fi
	local errors states secs
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | tail -1)
	states=$(awk '/states, stored/ {print $1}' "$dir/pan.out" | tail -1)
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\).*/\1/p' "$dir/pan.out" | tail -1)
	echo "${errors:-x} ${states:-0} ${secs:-0}"
}

printf '%-10s %-28s %-9s %12s %9s\n' model run result states seconds
for m in "${MODELS[@]}"; do
	read -r errors states secs < <(run "$m")
	if [ "$errors" = 0 ]; then result=pass; else result=FAIL; failed=1; fi
	printf '%-10s %-28s %-9s %12s %9s\n' "$m" model "$result" "$states" "$secs"
	for v in ${VARIANTS[$m]:-}; do
		read -r errors states secs < <(run "$m" "$v")
		if [ "$errors" = 0 ]; then result=pass; else result=FAIL; failed=1; fi
		printf '%-10s %-28s %-9s %12s %9s\n' "$m" "$v" "$result" "$states" "$secs"
	done
	for mut in ${MUTANTS[$m]:-} ${FINDINGS[$m]:-}; do
		read -r errors states secs < <(run "$m" "$mut")
		caught=caught
		case " ${FINDINGS[$m]:-} " in *" $mut "*) caught=found ;; esac
		if [ "$errors" != x ] && [ "$errors" -gt 0 ]; then result=$caught; else result=MISSED; failed=1; fi
		printf '%-10s %-28s %-9s %12s %9s\n' "$m" "$mut" "$result" "$states" "$secs"
	done
done
if [ "$failed" != 0 ]; then
	echo "verify: a model has errors or a mutation was not caught" >&2
	exit 1
fi
echo "verify: every model passes, every mutation is caught"
