# bench/link_gpu.sh - sourced by the GPU scripts: link a test program or a
# benchmark against libraries built elsewhere (PREBUILT, a variant build),
# without cmake. Run from the repository root.
#   link_test NAME OUT LIB...    tests/NAME.c with gcc (the CUDA runtime static)
#   link_bench NAME OUT LIB...   bench/NAME.cu with nvcc (sm_90a)
#   bench_dirs                   O (output) and X (scratch) folders
# LIB: libbfp_cuda.a, then libbfp.a.
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}

link_test() {
    local name=$1 out=$2
    shift 2
    gcc -O2 -std=c11 -DBFP_HAVE_CUDA -Iinclude -Isrc/core -Itests -I"$CUDA_HOME/include" \
        "tests/$name.c" "$@" -L"$CUDA_HOME/lib64" -lcublas -lcudart_static -lstdc++ -lrt \
        -lpthread -ldl -lm -o "$out"
}

link_bench() {
    local name=$1 out=$2
    shift 2
    nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -Iinclude -Itests -Ibench \
        "bench/$name.cu" "$@" -lcublas -o "$out"
}

# bench_dirs: O, the output folder ($OUT, else bench/out; created), and X, a
# scratch folder
bench_dirs() {
    O=${OUT:-$PWD/bench/out}
    mkdir -p "$O"
    X=$(mktemp -d)
}
