/*
 * std.c — the standard rewrite database.
 *
 * In order: merge, canonicalize (with the Scan rewrites: scan-backward.c,
 * scan-pushout.c, scan-inputs.c, scan-outputs.c, scan-pushadd.c,
 * scan-merge.c, scan-savemem.c),
 * stabilize, specialize, elementwise fusion (fusion.c), merge again (all tagged fast_run; canonicalize also
 * fast_compile), and the relational dot
 * distribution under its own tags (distribute, gather), not in fast_run.
 * Rules written in the relational language live in std.kn (compiled into
 * the library); rules that need types or values to decide are written in C
 * here and in stdrules.c.
 */
#include "rewrites/rewrite-impl.h"

#include <stdio.h>

extern const char rgr_std_rules_text[];
extern const char rgr_scan_rules_text[];

/* Each rule joins the database of std its tags name (rgr_db_named_by,
 * as rule files' rules do), else `rel`. */
static int load_std_rules(rg_ctx *C, rg_rewrite_db *std, rg_rewrite_db *rel) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_rule_set *rs = rg_rule_set_new(I);
  int rc = rg_rule_set_load_string(rs, "<std rules>", rgr_std_rules_text);
  if (rc) return rc;
  rc = rg_rule_set_load_string(rs, "<scan rules>", rgr_scan_rules_text);
  if (rc) return rc;
  for (int i = 0; i < rg_rule_set_count(rs); i++) {
    const char *tags = rg_rule_set_tags(rs, i);
    rg_rewrite_db *db = rgr_db_named_by(std, tags);
    rc = rg_db_register(db ? db : rel, rg_rule_set_rule(rs, i)->name, rg_rule_set_rule(rs, i), 0, tags);
    if (rc) return rc;
  }
  return RG_OK;
}

void rgr_register_c_rules(rg_rewrite_db *canon, rg_rewrite_db *stab, rg_rewrite_db *spec);
void rgr_register_scan_rules(rg_rewrite_db *canon);
void rgr_register_scan_pushout(rg_rewrite_db *canon, rg_rewrite_db *rel);
void rgr_register_scan_inputs(rg_rewrite_db *canon);
void rgr_register_scan_pushadd(rg_rewrite_db *canon);
void rgr_register_scan_outputs(rg_rewrite_db *canon);
rg_rewriter *rgr_scan_inplace_rewriter(void);
rg_rewriter *rgr_inplace_rewriter(void);
rg_rewriter *rgr_fusion_rewriter(void);
rg_rewriter *rgr_scan_save_mem_rewriter(void);
rg_rewriter *rgr_scan_merge_rewriter(void);

static rg_rewrite_db *build_std_db(rg_ctx *C) {
  rg_rewrite_db *std = rg_db_sequence("std");
  rg_rewrite_db *canon = rg_db_equilibrium("canonicalize");
  rg_rewrite_db *stab = rg_db_equilibrium("stabilize");
  rg_rewrite_db *spec = rg_db_equilibrium("specialize");
  rg_rewrite_db *rel = rg_db_equilibrium("relational");
  rg_db_register(canon, "constant_folding", rgr_constant_folding(), 0, "fast_run fast_compile");
  rgr_register_c_rules(canon, stab, spec);
  rgr_register_scan_rules(canon);
  rgr_register_scan_pushout(canon, rel);
  rgr_register_scan_inputs(canon);
  rgr_register_scan_pushadd(canon);
  rgr_register_scan_outputs(canon);
  /* in the same equilibrium: keeping only a trace's last row is what lets
   * push_out_scan_output fire, which then leaves other rewrites to do */
  rg_db_register(canon, "scan_save_mem", rgr_scan_save_mem_rewriter(), 0, "fast_run fast_compile canonicalize scan scan_save_mem");
  rg_db_register(canon, "scan_merge", rgr_scan_merge_rewriter(), 0, "fast_run fast_compile canonicalize scan scan_merge");
  /* merging equal expressions when the worklist drains (as Aesara's
   * canonicalize ends with its merge): rewrites that build the same value
   * twice (two push-outs of one product) hand it on as one, and the Scan
   * rewrites that compare inputs by identity see it */
  rg_db_register(canon, "merge_canonicalize", rgr_merge_rewriter("merge_canonicalize"), 0,
                 "fast_run fast_compile canonicalize merge");
  rg_db_register(std, "merge1", rgr_merge_rewriter("merge1"), 0, "fast_run fast_compile merge");
  rg_db_register_db(std, "canonicalize", canon, 1, "fast_run fast_compile");
  rg_db_register_db(std, "stabilize", stab, 2, "fast_run stable"); /* stable: the tag Aesara's FAST_RUN_STABLE query requires */
  rg_db_register_db(std, "specialize", spec, 3, "fast_run");
  rg_db_register(std, "fusion", rgr_fusion_rewriter(), 4, "fast_run fusion");
  rg_db_register(std, "merge2", rgr_merge_rewriter("merge2"), 5, "fast_run merge");
  rg_db_register_db(std, "relational", rel, 6, "");
  rg_db_register(std, "scan_inplace", rgr_scan_inplace_rewriter(), 7, "fast_run inplace scan");
  rg_db_register(std, "inplace_elemwise", rgr_inplace_rewriter(), 8, "fast_run inplace");
  if (load_std_rules(C, std, rel) != RG_OK) {
    fprintf(stderr, "relgraph: the standard rules failed to load: %s\n", rg_errmsg(C));
    return NULL;
  }
  return std;
}

rg_rewrite_db *rg_std_db(rg_ctx *C) {
  void **slot = rg_ctx_slot(C, RG_SLOT_REWRITE_DB);
  if (!*slot) *slot = build_std_db(C);
  return *slot;
}
