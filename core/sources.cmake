# Sources of the core layer (the tensor graph IR).
list(APPEND RG_SOURCES
  ${PROJECT_SOURCE_DIR}/core/type.c
  ${PROJECT_SOURCE_DIR}/core/tensor.c
  ${PROJECT_SOURCE_DIR}/core/npy.c
  ${PROJECT_SOURCE_DIR}/core/op.c
  ${PROJECT_SOURCE_DIR}/core/graph.c
  ${PROJECT_SOURCE_DIR}/core/elemwise.c
  ${PROJECT_SOURCE_DIR}/core/shape.c
  ${PROJECT_SOURCE_DIR}/core/infer.c
  ${PROJECT_SOURCE_DIR}/core/reduce.c
  ${PROJECT_SOURCE_DIR}/core/blas.c
  ${PROJECT_SOURCE_DIR}/core/control.c
  ${PROJECT_SOURCE_DIR}/core/walk.c
  ${PROJECT_SOURCE_DIR}/core/order.c
  ${PROJECT_SOURCE_DIR}/core/fgraph.c
  ${PROJECT_SOURCE_DIR}/core/merge.c
  ${PROJECT_SOURCE_DIR}/core/check.c
  ${PROJECT_SOURCE_DIR}/core/inner.c
  ${PROJECT_SOURCE_DIR}/core/scan.c
  ${PROJECT_SOURCE_DIR}/core/scan-build.c
  ${PROJECT_SOURCE_DIR}/core/gfile.c
  ${PROJECT_SOURCE_DIR}/core/gfile-scan.c
  ${PROJECT_SOURCE_DIR}/core/pprint.c
  ${PROJECT_SOURCE_DIR}/core/export.c
  ${PROJECT_SOURCE_DIR}/core/bridge.c
  ${PROJECT_SOURCE_DIR}/core/grad.c
  ${PROJECT_SOURCE_DIR}/core/grad-ops.c)
