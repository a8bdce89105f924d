# Sourced by the bench/*.sh scripts (from the repository's root): `machine_header` prints the
# machine every figure of the run was taken on (the instruction-set flags that decide which
# kernels run, cpuid family and model), the commit and the date, and what forces lower kernels.
machine_header() {
    local flags
    flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' \
        | grep -E '^(avx2|fma|f16c|avx_vnni|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_[a-z0-9]+)$' | tr '\n' ' ')
    echo "cpu flags: ${flags:-none of avx2 and above}"
    echo "cpu family$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2) model$(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2);" \
         "$(git describe --always --dirty); $(date)"
    if [ -n "${ATEN_CPU_CAPABILITY:-}${SPECD_KERNELS:-}" ]; then
        echo "forced lower: ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-} ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-} SPECD_KERNELS=${SPECD_KERNELS:-}"
    fi
}
