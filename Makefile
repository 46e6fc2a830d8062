# Two commands: `make` builds everything (CLI at build/bfp), `make test` builds
# and runs every test: the whole suite under ASan+UBSan, then built without
# the SIMD kernels (BFP_SIMD=OFF), then the normal build. Each includes the
# replay of every fuzz corpus and crash (fuzz/).
BUILD ?= build
ASAN_BUILD ?= build-asan
NOSIMD_BUILD ?= build-nosimd
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# make fuzz: every libFuzzer target for FUZZ_SECONDS each, FUZZ_JOBS at once
# (clang and libclang-rt-14-dev; docs/hardening.md).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 1200
FUZZ_JOBS ?= 2
FUZZ_TARGETS ?= npy safetensors gguf container dequant cli_args verify_layouts differential

# ---- Debian packages of issue #25 (`mpirun -n N bfp convert`; CMake's
# BFP_MPI=ON needs them): to be part of the packages `make` installs.
BFP_MPI_PACKAGES = libopenmpi-dev openmpi-bin

.PHONY: all test test-fast fuzz fuzz-build clean

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test-fast: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test: all
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBFP_SANITIZE=ON -DBFP_CUDA=OFF >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	cmake -S . -B $(NOSIMD_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBFP_SIMD=OFF -DBFP_CUDA=OFF >/dev/null
	cmake --build $(NOSIMD_BUILD) -j $(JOBS)
	cd $(NOSIMD_BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz-build:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DBFP_FUZZ=ON -DBFP_CUDA=OFF >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	rm -f $(FUZZ_BUILD)/logs/summary.txt
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(NOSIMD_BUILD) $(FUZZ_BUILD)
