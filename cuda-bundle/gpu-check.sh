#!/usr/bin/env bash
# GPU check of the cuda backend (issue 16): the GPU suite (JUnit tag "gpu": the pool-testkit
# contract suites and CudaDeviceGpuTest on cuda:0) and the GPU benchmark (GpuBenchmark: pool
# allocation against cuMemAlloc/cuMemFree, H2D/D2H from pinned, pageable and heap memory against
# raw cuMemcpy), every result in one folder.
#
#   cuda-bundle/gpu-check.sh kit        build here (Maven, JDK 25) a self-contained kit in
#                                       cuda-bundle/target/gpu-kit: a jlinked Java 25 runtime (tgz),
#                                       the jars and classes of the suite and the benchmark
#   cuda-bundle/gpu-check.sh run [DIR]  on the GPU machine: run the suite and the benchmark from the
#                                       kit, results in DIR (default cuda-bundle/target/gpu-check)
#   cuda-bundle/gpu-check.sh [DIR]      both, on a machine that has Maven and a GPU
#
# A GPU machine lent to a session has neither Java nor Maven nor a network: build the kit here, then
# run there with the kit carried (about 40 MB), in one call of at most 7.5 minutes:
#   run(command="bash cuda-bundle/gpu-check.sh run $OUT", carry=["cuda-bundle/target/gpu-kit"], timeout_s=480)
# Without a CUDA driver or device, run stops at once with one "no GPU" line and exit code 3.
#
# run ends within GPU_CHECK_SECONDS (default 450): the suite gets up to 180 s, the benchmark what is
# left, in three parts with the targets' rows first (gpu-bench-N.txt and .json). A part cut short
# keeps each finished trial's result in its gpu-bench-N.txt and the report.
#
# Exit code of run: 0 when the GPU suite passed; else the suite's (1: a test failed, 3: none ran,
# 124: out of time), once the benchmark ran too. gpu-check.txt is written as it goes, so it holds
# whatever ran also when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=cuda-bundle/target/gpu-kit

no_gpu() {
    # grep reads the whole listing: with -q it would stop at the first match, and ldconfig, cut off
    # by SIGPIPE, would fail the pipeline (pipefail), so a listed driver would count as missing.
    if ! ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1' >/dev/null && [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] \
        && [ ! -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
        echo "no GPU: libcuda.so.1 (the CUDA driver) is not installed on $(hostname); nothing to check"
        return 0
    fi
    if command -v nvidia-smi >/dev/null && ! nvidia-smi -L >/dev/null 2>&1; then
        echo "no GPU: the CUDA driver is installed but nvidia-smi lists no device; nothing to check"
        return 0
    fi
    return 1
}

make_kit() {
    rm -rf "$kit"
    mkdir -p "$kit/lib" "$kit/suite" "$kit/bench"
    ./ferrum mvn -q -Dstyle.color=never -DskipTests install \
        -pl api-bundle,pool-bundle,pool-testkit,jcuda-bundle,cuda-bundle,cpu-bundle,monitor-bundle,strategy-bundles/best-fit
    ./ferrum mvn -q -Dstyle.color=never -Pbenchmarks -DskipTests install -pl benchmarks
    ./ferrum mvn -q -Dstyle.color=never dependency:copy-dependencies -pl cuda-bundle -Dmdep.includeScope=test \
        -DoutputDirectory="$PWD/$kit/lib"
    ./ferrum mvn -q -Dstyle.color=never -Pbenchmarks dependency:copy-dependencies -pl benchmarks -Dmdep.includeScope=runtime \
        -DexcludeGroupIds=io.netty,org.apache.arrow,org.apache.felix,com.fasterxml.jackson.core,com.google.flatbuffers \
        -DoutputDirectory="$PWD/$kit/lib"
    cp -r cuda-bundle/target/classes "$kit/suite/classes"
    cp -r cuda-bundle/target/test-classes "$kit/suite/test-classes"
    cp -r benchmarks/target/classes "$kit/bench/classes"
    # Only the driver API's JNI library is used: drop the other natives (about 25 MB).
    for j in "$kit"/lib/io.ferrum.memory.jcuda*.jar "$kit"/lib/jcuda-natives*.jar; do
        [ -e "$j" ] && zip -q -d "$j" 'lib/libJNvPTXCompiler*' 'lib/libJNvrtc*' 'lib/libJCudaRuntime*' >/dev/null 2>&1 || true
    done
    local jdk
    jdk="$(./ferrum java-home)"
    # jdk.zipfs: JUnit scans the jars on the class path for the suite's package (a warning and a stack
    # trace in the report without it).
    "$jdk/bin/jlink" --add-modules java.base,java.management,jdk.management,jdk.unsupported,java.logging,java.xml,java.naming,java.sql,jdk.zipfs \
        --strip-debug --no-header-files --no-man-pages --compress=zip-9 --output "$kit/jre"
    tar -C "$kit" -czf "$kit/jre.tgz" jre
    rm -rf "$kit/jre"
    du -sh "$kit"
}

run_kit() {
    local out="$1"
    local budget="${GPU_CHECK_SECONDS:-450}"
    mkdir -p "$out"
    local report="$out/gpu-check.txt"
    if msg="$(no_gpu)"; then
        echo "$msg" | tee "$report"
        exit 3
    fi
    [ -d "$kit/lib" ] || { echo "error: no kit in $kit: run 'cuda-bundle/gpu-check.sh kit' first (here, with Maven)" >&2; exit 2; }
    local java=java
    if [ -e "$kit/jre.tgz" ]; then
        tar -C "$kit" -xzf "$kit/jre.tgz"
        java="$kit/jre/bin/java"
    fi
    {
        echo "# gpu-check $(date -u +%FT%TZ) on $(hostname)"
        # Under set -e a failing query here would end run before the suite.
        if command -v nvidia-smi >/dev/null; then
            nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
        fi
        "$java" -version 2>&1 | head -1
    } > "$report"
    # JCuda's JNI library links libcuda.so.1: where the driver is mounted outside the linker's path.
    [ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH="/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local opts=(--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow)
    echo "## GPU suite" >> "$report"
    set +e
    # A crash in the driver or JCuda's JNI code ends the JVM: its error log goes with the results
    # (by default it is written to the working directory, which does not come back from the machine).
    timeout 180 "$java" "${opts[@]}" -XX:ErrorFile="$out/hs_err_suite.log" \
        -cp "$kit/suite/test-classes:$kit/suite/classes:$kit/lib/*" io.ferrum.memory.cuda.GpuSuite >> "$report" 2>&1
    local suite=$?
    echo "suite exit code: $suite" >> "$report"
    # The benchmark in three parts, the targets' rows first, so that a run cut by the budget keeps
    # them: (1) allocation and the pinned copies with their raw peers, (2) heap to device at 64 MiB,
    # (3) the pageable and heap rows. Each part gets what is left of the budget, less 15 s for the
    # report: JMH writes its JSON and summary only at its end, so a part cut short by the caller's
    # own time limit would leave neither.
    local parts=("GpuBenchmark -p host=pinned"
                 "GpuBenchmark\\.ferrumHostToDevice\$ -p host=heap -p size=67108864"
                 "GpuBenchmark\\.(ferrum|raw)(HostToDevice|DeviceToHost)\$ -p host=pageable,heap")
    local k json=()
    for k in 0 1 2; do
        local left=$((budget - SECONDS - 15))
        echo "## GPU benchmark, part $((k + 1)) of 3: ${parts[$k]} (ns/op; JSON in gpu-bench-$((k + 1)).json; ${left} s left)" >> "$report"
        if [ "$left" -lt 10 ]; then
            echo "skipped: no time left" >> "$report"
            continue
        fi
        local txt="$out/gpu-bench-$((k + 1)).txt"
        # shellcheck disable=SC2086 # the part's words are JMH's arguments
        timeout "$left" "$java" "${opts[@]}" -cp "$kit/bench/classes:$kit/lib/*" \
            org.openjdk.jmh.Main ${parts[$k]} -jvm "$java" -rf json -rff "$out/gpu-bench-$((k + 1)).json" > "$txt" 2>&1
        echo "benchmark exit code: $?" >> "$report"
        if ! grep -E '^(Benchmark|GpuBenchmark)' "$txt" >> "$report"; then
            # Cut short (no summary table): each finished trial's result, as JMH printed it.
            echo "no summary; the trials that finished:" >> "$report"
            awk '/^# Benchmark: /{b=$3} /^# Parameters: /{p=$0; sub(/^# Parameters: /, "", p)}
                 /^Result "/{getline r; sub(/^ +/, "", r); print b, p, r}' "$txt" >> "$report"
            tail -5 "$txt" >> "$report"
        fi
        [ -s "$out/gpu-bench-$((k + 1)).json" ] && json+=("$out/gpu-bench-$((k + 1)).json")
    done
    set -e
    if [ "${#json[@]}" -gt 0 ] && command -v python3 >/dev/null; then
        python3 cuda-bundle/gpu-bench-summary.py "${json[@]}" >> "$report" || true
    fi
    echo "results: $out"
    cat "$report"
    return "$suite"
}

case "${1:-}" in
    kit) make_kit ;;
    run) run_kit "${2:-cuda-bundle/target/gpu-check}" ;;
    *)
        if msg="$(no_gpu)"; then
            out="${1:-cuda-bundle/target/gpu-check}"
            mkdir -p "$out"
            echo "$msg" | tee "$out/gpu-check.txt"
            exit 3
        fi
        make_kit
        run_kit "${1:-cuda-bundle/target/gpu-check}"
        ;;
esac
