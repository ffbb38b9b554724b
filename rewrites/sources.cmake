# Sources of the rewrite layer.
list(APPEND RG_SOURCES
  ${PROJECT_SOURCE_DIR}/rewrites/rewriter.c
  ${PROJECT_SOURCE_DIR}/rewrites/db.c
  ${PROJECT_SOURCE_DIR}/rewrites/run.c
  ${PROJECT_SOURCE_DIR}/rewrites/driver.c
  ${PROJECT_SOURCE_DIR}/rewrites/cycle.c
  ${PROJECT_SOURCE_DIR}/rewrites/navigator.c
  ${PROJECT_SOURCE_DIR}/rewrites/rules.c
  ${PROJECT_SOURCE_DIR}/rewrites/lang.c
  ${PROJECT_SOURCE_DIR}/rewrites/std.c
  ${PROJECT_SOURCE_DIR}/rewrites/stdrules.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-backward.c
  ${PROJECT_SOURCE_DIR}/rewrites/fusion.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-savemem.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-pushout.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-inputs.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-pushadd.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-merge.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-outputs.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-inplace.c
  ${PROJECT_SOURCE_DIR}/rewrites/inplace.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-term.c
  ${PROJECT_SOURCE_DIR}/rewrites/scan-step.c
  ${PROJECT_SOURCE_DIR}/rewrites/egraph.c
  ${PROJECT_SOURCE_DIR}/rewrites/egraph-rules.c
  ${PROJECT_SOURCE_DIR}/rewrites/egraph-cost.c
  ${PROJECT_SOURCE_DIR}/rewrites/egraph-extract.c)
