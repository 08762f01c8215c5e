/*
 * A cotune predictor plugin in plain C99: ridge linear regression on standardised features.
 *
 * It shows everything a C plugin needs: the entry point, a descriptor with one component, a
 * function table, errors made through the host, and state saved to bytes. Build it alone with
 * the CMakeLists.txt beside it against an installed SDK, or in-tree.
 */
#include <cotune/cotune.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cotune_host* g_host;

struct cotune_predictor_instance {
  double lambda;     /* ridge regularisation on standardised features */
  size_t d;          /* features seen at fit; 0 before fit */
  double* mean;      /* per feature */
  double* scale;     /* per feature (1 for constant features) */
  double* weight;    /* per feature */
  double intercept;  /* mean target */
};

static cotune_error* fail(int32_t code, const char* message) {
  cotune_str s;
  s.data = message;
  s.len = strlen(message);
  return g_host->error_new(code, s);
}

static void release_model(cotune_predictor_instance* p) {
  free(p->mean);
  free(p->scale);
  free(p->weight);
  p->mean = p->scale = p->weight = NULL;
  p->d = 0;
}

static int allocate_model(cotune_predictor_instance* p, size_t d) {
  release_model(p);
  p->mean = (double*)calloc(d ? d : 1, sizeof(double));
  p->scale = (double*)calloc(d ? d : 1, sizeof(double));
  p->weight = (double*)calloc(d ? d : 1, sizeof(double));
  if (!p->mean || !p->scale || !p->weight) {
    release_model(p);
    return 0;
  }
  p->d = d;
  return 1;
}

static cotune_error* linear_create(const cotune_host* host, cotune_str options, cotune_predictor_instance** out) {
  cotune_predictor_instance* p;
  double lambda = 1e-3;
  cotune_error* err;
  cotune_str pointer;
  pointer.data = "/lambda";
  pointer.len = 7;
  (void)host;
  err = g_host->json_get_number(options, pointer, &lambda);
  if (err != NULL) {
    int32_t code = err->code;
    err->destroy(err);
    if (code != COTUNE_ERR_NOT_FOUND) return fail(COTUNE_ERR_INVALID_ARGUMENT, "options: /lambda: expected a number");
  }
  if (!(lambda >= 0)) return fail(COTUNE_ERR_INVALID_ARGUMENT, "options: /lambda: expected a number >= 0");
  p = (cotune_predictor_instance*)calloc(1, sizeof(*p));
  if (p == NULL) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->lambda = lambda;
  *out = p;
  return NULL;
}

static void linear_destroy(cotune_predictor_instance* p) {
  if (p == NULL) return;
  release_model(p);
  free(p);
}

/* Solves the symmetric positive definite system a x = b (n x n, row-major) by Cholesky; a is
 * overwritten. Returns 0 when a is not positive definite. */
static int solve_spd(double* a, double* b, size_t n) {
  size_t i, j, k;
  for (j = 0; j < n; ++j) {
    double s = a[j * n + j];
    for (k = 0; k < j; ++k) s -= a[j * n + k] * a[j * n + k];
    if (s <= 0) return 0;
    a[j * n + j] = sqrt(s);
    for (i = j + 1; i < n; ++i) {
      double t = a[i * n + j];
      for (k = 0; k < j; ++k) t -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = t / a[j * n + j];
    }
  }
  for (i = 0; i < n; ++i) { /* forward: L y = b */
    double t = b[i];
    for (k = 0; k < i; ++k) t -= a[i * n + k] * b[k];
    b[i] = t / a[i * n + i];
  }
  for (i = n; i-- > 0;) { /* backward: L^T x = y */
    double t = b[i];
    for (k = i + 1; k < n; ++k) t -= a[k * n + i] * b[k];
    b[i] = t / a[i * n + i];
  }
  return 1;
}

static cotune_error* linear_fit(cotune_predictor_instance* p, const double* x, size_t n, size_t d, const double* y,
                                const double* w) {
  size_t i, j, k;
  double wsum = 0, ymean = 0;
  double *a, *b;
  if (n == 0) return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: no training rows");
  for (i = 0; i < n * d; ++i)
    if (!isfinite(x[i])) return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: a feature is NaN or infinite");
  for (i = 0; i < n; ++i) {
    if (!isfinite(y[i])) return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: a target is NaN or infinite");
    if (w != NULL && !(w[i] >= 0 && isfinite(w[i]))) return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: a weight is negative or not finite");
  }
  if (!allocate_model(p, d)) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (i = 0; i < n; ++i) {
    double wi = w ? w[i] : 1.0;
    wsum += wi;
    ymean += wi * y[i];
    for (j = 0; j < d; ++j) p->mean[j] += wi * x[i * d + j];
  }
  if (wsum <= 0) return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: the weights sum to zero");
  ymean /= wsum;
  for (j = 0; j < d; ++j) p->mean[j] /= wsum;
  for (i = 0; i < n; ++i)
    for (j = 0; j < d; ++j) {
      double c = x[i * d + j] - p->mean[j];
      p->scale[j] += (w ? w[i] : 1.0) * c * c;
    }
  for (j = 0; j < d; ++j) {
    p->scale[j] = sqrt(p->scale[j] / wsum);
    if (p->scale[j] < 1e-12) p->scale[j] = 1.0; /* a constant feature carries no signal */
  }
  p->intercept = ymean;
  if (d == 0) return NULL;
  a = (double*)calloc(d * d, sizeof(double));
  b = (double*)calloc(d, sizeof(double));
  if (!a || !b) {
    free(a);
    free(b);
    return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (i = 0; i < n; ++i) {
    double wi = w ? w[i] : 1.0;
    for (j = 0; j < d; ++j) {
      double zj = (x[i * d + j] - p->mean[j]) / p->scale[j];
      b[j] += wi * zj * (y[i] - ymean);
      for (k = 0; k <= j; ++k) a[j * d + k] += wi * zj * (x[i * d + k] - p->mean[k]) / p->scale[k];
    }
  }
  for (j = 0; j < d; ++j) {
    for (k = 0; k < j; ++k) a[k * d + j] = a[j * d + k];
    a[j * d + j] += p->lambda * wsum + 1e-12;
  }
  if (!solve_spd(a, b, d)) {
    free(a);
    free(b);
    return fail(COTUNE_ERR_INVALID_ARGUMENT, "fit: the system is singular (set options.lambda > 0)");
  }
  memcpy(p->weight, b, d * sizeof(double));
  free(a);
  free(b);
  return NULL;
}

static cotune_error* linear_predict(cotune_predictor_instance* p, const double* x, size_t n, size_t d,
                                    double* out_mean, double* out_std) {
  size_t i, j;
  (void)out_std;
  if (p->mean == NULL) return fail(COTUNE_ERR_FAILED_PRECONDITION, "predict: not fitted");
  if (d != p->d) return fail(COTUNE_ERR_INVALID_ARGUMENT, "predict: feature count differs from fit");
  for (i = 0; i < n; ++i) {
    double s = p->intercept;
    for (j = 0; j < d; ++j) s += p->weight[j] * (x[i * d + j] - p->mean[j]) / p->scale[j];
    out_mean[i] = s;
  }
  return NULL;
}

/* Saved state: "cotune-linear 1 d intercept lambda" then d triples, as text (portable, exact with %.17g). */
static cotune_error* linear_save(cotune_predictor_instance* p, const cotune_sink* out) {
  char line[128];
  size_t j;
  int len;
  if (p->mean == NULL) return fail(COTUNE_ERR_FAILED_PRECONDITION, "save: not fitted");
  len = snprintf(line, sizeof line, "cotune-linear 1 %lu %.17g %.17g\n", (unsigned long)p->d, p->intercept, p->lambda);
  if (out->write(out->ctx, line, (size_t)len) != 0) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "save: sink refused");
  for (j = 0; j < p->d; ++j) {
    len = snprintf(line, sizeof line, "%.17g %.17g %.17g\n", p->mean[j], p->scale[j], p->weight[j]);
    if (out->write(out->ctx, line, (size_t)len) != 0) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "save: sink refused");
  }
  return NULL;
}

/* Reads the number at *cursor (after white space) and moves past it; 0 when there is none or it
 * overflows. strtod and strtoul rather than sscanf, which has undefined behaviour for a number out
 * of range. */
static int read_double(const char** cursor, double* out) {
  char* end;
  errno = 0;
  *out = strtod(*cursor, &end);
  if (end == *cursor || (errno == ERANGE && fabs(*out) == HUGE_VAL)) return 0;
  *cursor = end;
  return 1;
}

static int read_count(const char** cursor, unsigned long* out) {
  char* end;
  errno = 0;
  *out = strtoul(*cursor, &end, 10);
  if (end == *cursor || errno == ERANGE) return 0;
  *cursor = end;
  return 1;
}

static cotune_error* linear_load(cotune_predictor_instance* p, const void* data, size_t len) {
  static const char kMagic[] = "cotune-linear";
  char* text;
  const char* cursor;
  unsigned long version, d;
  size_t j;
  text = (char*)malloc(len + 1);
  if (text == NULL) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(text, data, len);
  text[len] = '\0';
  cursor = text + sizeof kMagic - 1;
  if (strncmp(text, kMagic, sizeof kMagic - 1) != 0 || !read_count(&cursor, &version) || version != 1 ||
      !read_count(&cursor, &d) || !read_double(&cursor, &p->intercept) || !read_double(&cursor, &p->lambda) ||
      d > 1000000 || !allocate_model(p, (size_t)d)) {
    free(text);
    release_model(p);
    return fail(COTUNE_ERR_INVALID_ARGUMENT, "load: not a saved cotune-linear model");
  }
  for (j = 0; j < d; ++j) {
    if (!read_double(&cursor, &p->mean[j]) || !read_double(&cursor, &p->scale[j]) ||
        !read_double(&cursor, &p->weight[j])) {
      free(text);
      release_model(p);
      return fail(COTUNE_ERR_INVALID_ARGUMENT, "load: truncated cotune-linear model");
    }
  }
  free(text);
  return NULL;
}

static cotune_error* linear_describe_fit(cotune_predictor_instance* p, const cotune_sink* out) {
  char json[96];
  int len = snprintf(json, sizeof json, "{\"lambda\": %.17g, \"d\": %lu}", p->lambda, (unsigned long)p->d);
  if (out->write(out->ctx, json, (size_t)len) != 0) return fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "sink refused");
  return NULL;
}

static const cotune_predictor_api kApi = {
    COTUNE_STRUCT_SIZE(cotune_predictor_api, describe_fit),
    linear_create, linear_destroy, linear_fit, linear_predict, linear_save, linear_load, linear_describe_fit};

static const cotune_component kComponent = {
    COTUNE_STRUCT_SIZE(cotune_component, api),
    COTUNE_KIND_PREDICTOR,
    COTUNE_CAP_SAVE_STATE,
    {"org.cotune.example.predictor.linear", 35},
    {"c-linear", 8},
    {"Ridge linear regression, written in plain C99.", 46},
    {"1.0.0", 5},
    &kApi};

static const cotune_component* const kComponents[] = {&kComponent};

static const cotune_plugin kPlugin = {COTUNE_STRUCT_SIZE(cotune_plugin, num_components), COTUNE_ABI_MAJOR,
                                      COTUNE_ABI_MINOR, kComponents, 1};

COTUNE_EXPORT const cotune_plugin* cotune_plugin_entry_v1(const cotune_host* host) {
  if (host == NULL || host->abi_major != COTUNE_ABI_MAJOR || !COTUNE_HAS_FIELD(host, error_new) ||
      !COTUNE_HAS_FIELD(host, json_get_number))
    return NULL;
  g_host = host;
  return &kPlugin;
}
