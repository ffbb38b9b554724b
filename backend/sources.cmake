# Sources of the backend layer (linker, runtime, backends).
list(APPEND RG_SOURCES
  ${PROJECT_SOURCE_DIR}/backend/runtime.c
  ${PROJECT_SOURCE_DIR}/backend/node.c
  ${PROJECT_SOURCE_DIR}/backend/registry.c
  ${PROJECT_SOURCE_DIR}/backend/mirror.c
  ${PROJECT_SOURCE_DIR}/backend/cuda/gen.c
  ${PROJECT_SOURCE_DIR}/backend/cuda/nvrtc.c
  ${PROJECT_SOURCE_DIR}/backend/cuda/cuda.c
  ${PROJECT_SOURCE_DIR}/backend/cuda/transfer.c
  ${PROJECT_SOURCE_DIR}/backend/cuda/blas.c
  ${PROJECT_SOURCE_DIR}/backend/linker.c
  ${PROJECT_SOURCE_DIR}/backend/join-into.c
  ${PROJECT_SOURCE_DIR}/backend/plan.c
  ${PROJECT_SOURCE_DIR}/backend/vm.c
  ${PROJECT_SOURCE_DIR}/backend/function.c
  ${PROJECT_SOURCE_DIR}/backend/scan-compile.c
  ${PROJECT_SOURCE_DIR}/backend/verify.c)
file(GLOB RG_CPU_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/backend/cpu/*.c)
list(APPEND RG_SOURCES ${RG_CPU_SOURCES})
# The CPU kernels are loops the compiler must vectorise: -O3 for them, no
# errno from libm so that sqrt and friends can be inlined, and no
# floating-point contraction so that every instruction-set version of a
# loop (see backend/cpu/cpu-impl.h) gives the same results.
set_source_files_properties(${RG_CPU_SOURCES} PROPERTIES
  COMPILE_OPTIONS "-O3;-fno-math-errno;-ffp-contract=off")
