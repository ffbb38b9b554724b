# Sources of the base module (allocation, growable arrays, hash map, the
# cache directory of generated code),
# below every layer.
list(APPEND RG_SOURCES
  ${PROJECT_SOURCE_DIR}/base/alloc.c
  ${PROJECT_SOURCE_DIR}/base/array.c
  ${PROJECT_SOURCE_DIR}/base/map.c
  ${PROJECT_SOURCE_DIR}/base/cache.c)
