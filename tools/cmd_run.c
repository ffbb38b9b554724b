/*
 * cmd_run.c — `relgraph run GRAPH`: compiles a graph file and runs it.
 *
 *   relgraph run GRAPH [--input NAME=FILE.npy]... [--random SEED] [--size N]
 *                [--output-dir DIR] [--repeat N] [--profile] [--query Q]
 *                [--threads N] [--backend NAME] [--placement]
 *                [--cache-dir DIR] [--no-codegen]
 *
 * Inputs come from .npy files; with --random, inputs not given get random
 * values (dimensions of unknown size get --size, default 16).  Outputs are
 * written as DIR/out0.npy, DIR/out1.npy, ... with --output-dir, else
 * printed (large ones summarised).  --repeat N runs N times and prints the
 * compile time and the median time per call.  --backend runs the nodes it can on that backend
 * (the rest on the CPU, with transfers); --placement prints the linked
 * program: each node's backend and the transfers.  Inputs whose type
 * names that backend's device (`(input x float32 (N) cuda:0)`) get their
 * values there once, before the calls, and outputs then stay on the
 * device until the calls are done: each call is timed to the end of its
 * work on the device, with no transfer of data the program keeps there.
 * --cache-dir keeps generated kernels in DIR (else the default cache
 * directory); --no-codegen runs fused groups by the interpreter.
 *
 * Exit status: 0, 2 bad usage, 3 bad input (graph, .npy file, an input
 * missing or of the wrong type, an unwritable directory, a run-time error).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base.h"
#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "tools/cli.h"

void usage_run(void) {
  printf("usage: relgraph run [OPTIONS] GRAPH\n"
         "  --input NAME=FILE    the value of input NAME, from a .npy file; repeatable\n"
         "  --random SEED        random values for inputs not given\n"
         "  --size N             size of unknown dimensions of random inputs (default 16)\n"
         "  --output-dir DIR     write outputs as DIR/out0.npy, DIR/out1.npy, ... (DIR is made\n"
         "                       when missing, with its parents)\n"
         "  --repeat N           run N times; print the compile time and the median per call\n"
         "  --profile            print the per-node profile\n"
         "  --query Q            the rewrite query (default fast_run; none disables rewriting)\n"
         "  --threads N          kernel threads (default 1)\n"
         "  --backend NAME       run on this backend where it can (cpu, mirror, cuda[:N])\n"
         "  --placement          print where each node runs and the transfers\n"
         "  --cache-dir DIR      keep generated kernels in DIR (default: $RELGRAPH_CACHE_DIR,\n"
         "                       else $XDG_CACHE_HOME/relgraph, else ~/.cache/relgraph)\n"
         "  --no-codegen         run fused groups by the interpreter, generating no kernels\n");
}

typedef struct run_args {
  const char *graph, *outdir, *query, *backend, *cache_dir;
  const char *in_names[256], *in_files[256];
  int nin;
  bool random, profile, placement, no_codegen;
  int64_t seed, size, repeat, threads;
} run_args;

static int parse(int argc, char **argv, run_args *a) {
  memset(a, 0, sizeof *a);
  a->size = 16;
  a->repeat = 1;
  a->threads = 1;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if (!strcmp(argv[i], "--profile")) {
      a->profile = true;
    } else if (!strcmp(argv[i], "--placement")) {
      a->placement = true;
    } else if (!strcmp(argv[i], "--no-codegen")) {
      a->no_codegen = true;
    } else if ((v = cli_option(argc, argv, &i, "--input", &missing))) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1]) return cli_error("run", "--input needs NAME=FILE.npy, got '%s'", v), EXIT_USAGE;
      if (a->nin == 256) return cli_error("run", "too many inputs"), EXIT_USAGE;
      size_t len = (size_t)(eq - v);
      char *name = rg_gc_alloc(len + 1); /* collected: no free on any exit path */
      memcpy(name, v, len);
      for (int k = 0; k < a->nin; k++)
        if (!strcmp(a->in_names[k], name)) return cli_error("run", "--input %s is given twice", name), EXIT_USAGE;
      a->in_names[a->nin] = name;
      a->in_files[a->nin++] = eq + 1;
    } else if ((v = cli_option(argc, argv, &i, "--random", &missing))) {
      if (!cli_parse_int("run", "--random", v, 0, INT64_MAX, &a->seed)) return EXIT_USAGE;
      a->random = true;
    } else if ((v = cli_option(argc, argv, &i, "--size", &missing))) {
      if (!cli_parse_int("run", "--size", v, 0, 1 << 30, &a->size)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--repeat", &missing))) {
      if (!cli_parse_int("run", "--repeat", v, 1, 1 << 30, &a->repeat)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--threads", &missing))) {
      if (!cli_parse_int("run", "--threads", v, 1, 256, &a->threads)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--output-dir", &missing))) {
      if (!*v) return cli_error("run", "--output-dir: an empty name"), EXIT_USAGE;
      a->outdir = v;
    } else if ((v = cli_option(argc, argv, &i, "--query", &missing))) {
      a->query = v;
    } else if ((v = cli_option(argc, argv, &i, "--backend", &missing))) {
      a->backend = v;
    } else if ((v = cli_option(argc, argv, &i, "--cache-dir", &missing))) {
      if (!*v) return cli_error("run", "--cache-dir needs a directory"), EXIT_USAGE;
      a->cache_dir = v;
    } else if (missing) {
      return EXIT_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_error("run", "unknown option '%s'", argv[i]), EXIT_USAGE;
    } else if (a->graph) {
      return cli_error("run", "one graph file at a time"), EXIT_USAGE;
    } else {
      a->graph = argv[i];
    }
  }
  if (!a->graph) return cli_error("run", "no graph file given"), EXIT_USAGE;
  return EXIT_OK;
}

/* ------------------------------------------------------------------ inputs */

static uint64_t rng_next(uint64_t *s) { return rg_random_next(s); }

/* t with its unknown sizes at `size`. */
static const rg_type *sized(const rg_type *t, int64_t size) {
  int64_t shape[RG_MAX_NDIM];
  for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i] == RG_DIM_UNKNOWN ? size : t->shape[i];
  return rg_type_new(t->dtype, t->ndim, shape);
}

/* A random value of t (its unknown sizes at `size`), or NULL when no
 * memory holds it. */
static rg_tensor *random_value(const rg_type *t, int64_t size, uint64_t *rng) {
  t = sized(t, size);
  rg_tensor *v = t ? rg_tensor_empty(t->dtype, t->ndim, t->shape) : NULL;
  if (!v) return NULL;
  int64_t n = rg_tensor_numel(v);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next(rng);
    if (rg_dtype_is_float(t->dtype)) rg_tensor_set_f64(v, i, (double)(r >> 11) / 9007199254740992.0 * 2 - 1);
    else if (t->dtype == RG_BOOL) rg_tensor_set_i64(v, i, (int64_t)(r & 1));
    else rg_tensor_set_i64(v, i, (int64_t)(r % 10));
  }
  return v;
}

static const char *file_for(const run_args *a, const char *name) {
  for (int i = 0; i < a->nin; i++)
    if (name && !strcmp(a->in_names[i], name)) return a->in_files[i];
  return NULL;
}

static int check_names(const run_args *a, rg_fgraph *fg) {
  for (int k = 0; k < a->nin; k++) {
    bool found = false;
    for (int i = 0; i < rg_fgraph_ninputs(fg); i++) {
      const char *n = rg_fgraph_input(fg, i)->name;
      found |= n && !strcmp(n, a->in_names[k]);
    }
    if (!found) return cli_error("run", "the graph has no input named '%s'", a->in_names[k]), EXIT_INPUT;
  }
  return EXIT_OK;
}

static int load_inputs(rg_ctx *C, const run_args *a, rg_fgraph *fg, rg_tensor **vals) {
  uint64_t rng = (uint64_t)a->seed;
  for (int i = 0; i < rg_fgraph_ninputs(fg); i++) {
    rg_variable *v = rg_fgraph_input(fg, i);
    const char *file = file_for(a, v->name);
    if (file) {
      vals[i] = rg_npy_load(C, file);
      if (!vals[i]) return cli_error("run", "input %s: %s", v->name, rg_errmsg(C)), EXIT_INPUT;
    } else if (a->random) {
      vals[i] = random_value(v->type, a->size, &rng);
      if (!vals[i]) /* the only way it fails */
        return cli_error("run", "input %s: no memory for a random value of %s", v->name,
                         rg_type_str(sized(v->type, a->size) ? sized(v->type, a->size) : v->type)),
               EXIT_INPUT;
    } else {
      return cli_error("run", "missing input %s (%s): give --input %s=FILE.npy or --random SEED",
                       v->name ? v->name : "?", rg_type_str(v->type), v->name ? v->name : "NAME"),
             EXIT_INPUT;
    }
  }
  return EXIT_OK;
}

/* ------------------------------------------------------------------ outputs */

static int write_outputs(rg_ctx *C, const run_args *a, int n, rg_tensor **outs) {
  if (a->outdir) { /* made when missing, with its parents */
    struct stat st;
    if (stat(a->outdir, &st) != 0 && rg_make_dirs(a->outdir) != 0)
      return cli_error("run", "cannot create the directory %s: %s", a->outdir, strerror(errno)), EXIT_INPUT;
    if (stat(a->outdir, &st) != 0 || !S_ISDIR(st.st_mode))
      return cli_error("run", "cannot write to %s: not a directory", a->outdir), EXIT_INPUT;
  }
  for (int j = 0; j < n; j++) {
    if (a->outdir) {
      char path[4096];
      if ((size_t)snprintf(path, sizeof path, "%s/out%d.npy", a->outdir, j) >= sizeof path)
        return cli_error("run", "--output-dir %s: the path of out%d.npy is too long", a->outdir, j), EXIT_INPUT;
      if (rg_npy_save(C, path, outs[j], false) != RG_OK)
        return cli_error("run", "%s", rg_errmsg(C)), EXIT_INPUT;
    } else if (rg_tensor_numel(outs[j]) <= 1000) {
      printf("out%d = ", j);
      rg_tensor_fprint(stdout, outs[j]);
      printf("\n");
    } else {
      printf("out%d = %s (", j, rg_dtype_name(outs[j]->dtype));
      for (int d = 0; d < outs[j]->ndim; d++) printf(d ? " %lld" : "%lld", (long long)outs[j]->shape[d]);
      printf(") [%lld elements; use --output-dir to save]\n", (long long)rg_tensor_numel(outs[j]));
    }
  }
  return EXIT_OK;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Runs the function a->repeat times; the last outputs stay in outs.  With
 * a device backend b whose outputs stay on the device, each call is timed
 * to the end of its work on the device. */
static int run_calls(rg_function *f, const run_args *a, rg_backend *b, rg_tensor **ins,
                     rg_tensor **outs, int nout) {
  double *t = malloc((size_t)a->repeat * sizeof *t);
  int rc = RG_OK;
  for (int64_t r = 0; r < a->repeat && rc == RG_OK; r++) {
    if (r) for (int j = 0; j < nout; j++) rg_tensor_free(outs[j]);
    double t0 = now_s();
    rc = rg_function_call(f, ins, outs);
    if (rc == RG_OK && b && rg_backend_synchronize(b) != RG_OK) {
      cli_error("run", "%s failed", rg_backend_label(b));
      rc = RG_ERR;
    }
    t[r] = now_s() - t0;
  }
  if (rc == RG_OK && a->repeat > 1) {
    qsort(t, (size_t)a->repeat, sizeof *t, cmp_d);
    printf("median %.6f ms per call over %lld calls (min %.6f ms)\n", t[a->repeat / 2] * 1e3,
           (long long)a->repeat, t[0] * 1e3);
  }
  free(t);
  if (rc != RG_OK) cli_error("run", "%s", rg_function_errmsg(f));
  return rc == RG_OK ? EXIT_OK : EXIT_INPUT;
}

/* The backend object of --backend (NULL for the CPU or none). */
static int make_backend(const run_args *a, rg_backend **b) {
  *b = NULL;
  if (!a->backend || !strcmp(a->backend, "cpu")) return EXIT_OK;
  char why[256];
  if (!rg_backend_name_valid(a->backend, why, sizeof why)) return cli_error("run", "--backend: %s", why), EXIT_USAGE;
  *b = rg_backend_new(a->backend, why, sizeof why);
  if (!*b) return cli_error("run", "backend %s cannot run here: %s", a->backend, why), EXIT_INPUT;
  return EXIT_OK;
}

/* Values of inputs typed on b's device are put there once, before the
 * calls, as a program that keeps its data on a GPU would have them;
 * returns whether any was. */
static bool inputs_to_device(rg_backend *b, rg_fgraph *fg, rg_tensor **ins) {
  bool any = false;
  for (int i = 0; b && i < rg_fgraph_ninputs(fg); i++) {
    if (rg_fgraph_input(fg, i)->type->device != rg_backend_device(b)) continue;
    rg_tensor *d = rg_tensor_to_device(ins[i], rg_backend_buffer_type(b));
    if (!d) continue; /* the function moves it per call */
    rg_tensor_free(ins[i]);
    ins[i] = d;
    any = true;
  }
  return any;
}

/* Outputs left on a device come to the host for printing and saving. */
static int outputs_to_host(int nout, rg_tensor **outs) {
  for (int j = 0; j < nout; j++) {
    if (rg_tensor_device(outs[j]) == RG_DEVICE_HOST) continue;
    rg_tensor *h = rg_tensor_to_host(outs[j]);
    if (!h) return cli_error("run", "cannot copy output %d to the host", j), EXIT_INPUT;
    rg_tensor_free(outs[j]);
    outs[j] = h;
  }
  return EXIT_OK;
}

int cmd_run(int argc, char **argv) {
  run_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  rg_ctx *C = rg_ctx_new();
  /* a bad query is bad usage, as in rewrite and search */
  if (a.query && !rg_db_query(C, rg_std_db(C), a.query)) return cli_error("run", "%s", rg_errmsg(C)), EXIT_USAGE;
  rg_fgraph *fg = cli_load_graph(C, a.graph);
  if (!fg) return cli_error("run", "%s", rg_errmsg(C)), EXIT_INPUT;
  if ((rc = check_names(&a, fg))) return rc;
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable **vin = rg_gc_alloc((size_t)(nin + 1) * sizeof *vin);
  rg_variable **vout = rg_gc_alloc((size_t)(nout + 1) * sizeof *vout);
  for (int i = 0; i < nin; i++) vin[i] = rg_fgraph_input(fg, i);
  for (int j = 0; j < nout; j++) vout[j] = rg_fgraph_output(fg, j);
  rg_tensor **ins = calloc((size_t)nin + 1, sizeof *ins), **outs = calloc((size_t)nout + 1, sizeof *outs);
  rg_backend *b = NULL;
  rc = load_inputs(C, &a, fg, ins);
  if (!rc) rc = make_backend(&a, &b);
  bool on_device = !rc && inputs_to_device(b, fg, ins);
  rg_compile_opts o = {.mode = {.query = a.query, .backend = a.backend}, .backend = b,
                       .device_outputs = on_device, .profile = a.profile, .nthreads = (int)a.threads,
                       .cache_dir = a.cache_dir, .no_codegen = a.no_codegen};
  double t0 = now_s();
  rg_function *f = rc ? NULL : rg_compile(C, nin, vin, nout, vout, &o);
  if (!rc && !f) rc = (cli_error("run", "%s", rg_errmsg(C)), EXIT_INPUT);
  if (!rc && a.repeat > 1) printf("compiled in %.3f ms (rewrites, kernels, linking)\n", (now_s() - t0) * 1e3);
  if (!rc && a.placement) rg_function_dump(f, stdout);
  if (!rc) rc = run_calls(f, &a, on_device ? b : NULL, ins, outs, nout);
  if (!rc) rc = outputs_to_host(nout, outs);
  if (!rc) rc = write_outputs(C, &a, nout, outs);
  if (!rc && a.profile) rg_function_profile(f, stdout);
  for (int i = 0; i < nin; i++) rg_tensor_free(ins[i]);
  for (int j = 0; j < nout; j++) rg_tensor_free(outs[j]);
  free(ins);
  free(outs);
  rg_function_free(f);
  rg_backend_free(b);
  return rc;
}
