#!/usr/bin/env bash
# Run the libFuzzer harnesses built by `make fuzz-build` (see docs/fuzzing.md).
#
#   tests/fuzz/run.sh BUILD SECONDS TARGET...          fuzz each target SECONDS, one at a time
#   tests/fuzz/run.sh --repro BUILD 0 TARGET...        replay tests/fuzz/crashes/<target>/*
#
# Per target: the committed seeds (tests/fuzz/corpus/<target>, plus BUILD/seeds/<target> when
# the Makefile put some there) are read-only; new inputs go to BUILD/corpus/<target>, which
# grows from run to run; findings are written to BUILD/artifacts/<target>/ and the log to
# BUILD/logs/<target>.log. Prints executions, exec/s and coverage per target; exits 1 when any
# target found something (a crash, sanitizer report, leak, timeout or out-of-memory), after
# running all of them.
set -uo pipefail
cd "$(dirname "$0")/../.."

repro=0
if [ "${1:-}" = "--repro" ]; then repro=1; shift; fi
if [ $# -lt 3 ]; then
    echo "usage: $0 [--repro] BUILD SECONDS TARGET..." >&2
    exit 2
fi
B=$1
S=$2
shift 2

# Per-target settings: max input length (bytes), per-input timeout (s), JSON dictionary too.
max_len() {
    case $1 in
    model) echo 100000 ;;   # the seeds are <= 83 KB model files
    audio | textgrid | model_content) echo 8192 ;;
    normalizer) echo 1024 ;;
    *) echo 4096 ;;
    esac
}
timeout_s() {
    case $1 in
    model | model_content | audio) echo 20 ;;
    *) echo 10 ;;
    esac
}
is_json() { case $1 in config | manifest | timeline | model_content) return 0 ;; *) return 1 ;; esac; }

# Scratch space for the harnesses' temporary files (a RAM disk when there is one).
if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmp_base=/dev/shm; else tmp_base=${TMPDIR:-/tmp}; fi
SRKIT_FUZZ_TMP=$(mktemp -d "$tmp_base/srkit-fuzz-run.XXXXXX")
export SRKIT_FUZZ_TMP
trap 'rm -rf "$SRKIT_FUZZ_TMP"' EXIT

# Readable stacks: clang's own llvm-symbolizer (Debian names it llvm-symbolizer-14 on PATH).
sym=$("${FUZZ_CC:-clang-14}" -print-prog-name=llvm-symbolizer 2>/dev/null || true)
if [ -n "$sym" ] && [ -x "$sym" ]; then export ASAN_SYMBOLIZER_PATH=$sym; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# leaks inside third-party libraries srkit cannot free (each one explained in the file)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export SRKIT_FUZZ_STATS=1 # harnesses with counters of their own print them at exit

mkdir -p "$B/logs" "$B/dict"
failed=()
rows=()
for t in "$@"; do
    bin=$B/fuzz_$t
    if [ ! -x "$bin" ]; then
        echo "== fuzz $t: $bin missing (make fuzz-build)" >&2
        failed+=("$t")
        continue
    fi
    log=$B/logs/$t.log
    if [ $repro -eq 1 ]; then
        files=()
        if [ -d "tests/fuzz/crashes/$t" ]; then
            while IFS= read -r -d '' f; do files+=("$f"); done \
                < <(find "tests/fuzz/crashes/$t" -type f ! -name '*.md' -print0 | sort -z)
        fi
        if [ ${#files[@]} -eq 0 ]; then continue; fi
        if "$bin" -timeout="$(timeout_s "$t")" -rss_limit_mb=2048 "${files[@]}" >"$log" 2>&1; then
            echo "== repro $t: ${#files[@]} input(s) pass"
        else
            echo "== repro $t: FAILS (log $log)"
            grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*FUZZ_CHECK)' "$log" | head -5
            failed+=("$t")
        fi
        continue
    fi

    work=$B/corpus/$t
    art=$B/artifacts/$t
    mkdir -p "$work" "$art"
    dirs=("$work")
    [ -d "tests/fuzz/corpus/$t" ] && dirs+=("tests/fuzz/corpus/$t")
    [ -d "$B/seeds/$t" ] && dirs+=("$B/seeds/$t")
    dict=$B/dict/$t.dict
    : >"$dict"
    [ -f "tests/fuzz/dict/$t.dict" ] && cat "tests/fuzz/dict/$t.dict" >>"$dict"
    is_json "$t" && cat tests/fuzz/dict/json.dict >>"$dict"
    dict_opt=()
    [ -s "$dict" ] && dict_opt=(-dict="$dict")

    echo "== fuzz $t: ${S} s, max_len $(max_len "$t"), corpus ${dirs[*]}"
    start=$(date +%s)
    timeout -k 10 $((S + 120)) "$bin" -max_total_time="$S" -max_len="$(max_len "$t")" \
        -timeout="$(timeout_s "$t")" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "${dict_opt[@]}" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
    grep -E '^fuzz_[a-z]+: ' "$log" | tail -1 | sed 's/^/   /'
    if [ $rc -eq 0 ]; then
        result=ok
    else
        result="FOUND (exit $rc)"
        failed+=("$t")
        echo "== fuzz $t: finding, exit $rc; log $log"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*FUZZ_CHECK|ALARM|.*out-of-memory|ParseDictionaryFile)' \
            "$log" | head -5
        ls -1 "$art" | sed "s|^|   artifact: $art/|" | tail -5
    fi
    rows+=("$(printf '%-13s %5s %10s %8s %6s %7s %10s  %s' "$t" "$secs" "${execs:-?}" \
        "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result")")
done

if [ $repro -eq 0 ] && [ ${#rows[@]} -gt 0 ]; then
    echo
    printf '%-13s %5s %10s %8s %6s %7s %10s  %s\n' target s execs exec/s cov ft corpus result
    printf '%s\n' "${rows[@]}"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "== fuzz: findings or failures in: ${failed[*]} (logs and artifacts under $B/)"
    exit 1
fi
exit 0
