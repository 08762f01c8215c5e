/*
 * ABI test fixture: one C source built into several libraries, each breaking (or stretching) the
 * contract in one way chosen by a FIXTURE_* definition. tests/abi/abi_test.cpp loads them all.
 *
 *  FIXTURE_GOOD         a plain, valid plugin: predictor "abi-mean" (predicts the mean target)
 *  FIXTURE_OLDER        built as if against an older minor: tables end at the last required field
 *  FIXTURE_NEWER        built against a newer minor: larger structs with fields this host does not know
 *  FIXTURE_MAJOR2       claims ABI major 2
 *  FIXTURE_NO_ENTRY     exports no entry symbol
 *  FIXTURE_NULL_ENTRY   the entry point returns NULL
 *  FIXTURE_SMALL_STRUCT the component's struct_size is smaller than ABI 1.0's
 *  FIXTURE_ZERO_SIZE    the plugin descriptor's struct_size is 0
 *  FIXTURE_NULL_API     the component has no function table
 *  FIXTURE_MISSING_FN   the predictor table lacks predict()
 *  FIXTURE_BAD_UTF8     the component name is not UTF-8
 *  FIXTURE_UNTERMINATED strings are not NUL-terminated (valid: lengths are what count)
 *  FIXTURE_DUP_INSIDE   two components with one id
 *  FIXTURE_HUGE_COUNT   claims (size_t)-1 components (a negative count seen as unsigned)
 *  FIXTURE_ZERO_COUNT   declares no components
 *  FIXTURE_NULL_LIST    one component, but the component list is NULL
 *  FIXTURE_NULL_ITEM    the component list holds a NULL entry
 *  FIXTURE_COMPONENT_ZERO_SIZE  the component's struct_size is 0
 *  FIXTURE_API_ZERO_SIZE        the function table's struct_size is 0
 *  FIXTURE_NEGATIVE_KIND        the component's kind is -1
 *  FIXTURE_NULL_STRING  the id is NULL with a non-zero length
 *  FIXTURE_LONG_STRING  the name claims (size_t)-1 bytes (a negative length seen as unsigned)
 *  FIXTURE_EMPTY_ID     the id has length 0
 *  FIXTURE_NUL_INSIDE   the name holds a NUL byte within its stated length
 *  FIXTURE_SWAPPED_VERSION  the description and the version swapped (the C++ helper's old order)
 *  FIXTURE_BAD_ID       the id is not reverse-DNS ("not an id")
 *  FIXTURE_BAD_NAME     the name holds a space ("abi mean"), which no study file can name
 *  FIXTURE_SHORT_VERSION  the version is "1.0"
 */
#include <cotune/cotune.h>

#include <stdlib.h>
#include <string.h>

#ifndef FIXTURE_ID
#define FIXTURE_ID "org.cotune.test.abi-mean"
#endif

static const cotune_host* g_host;

struct cotune_predictor_instance {
  double mean;
  int fitted;
};

static cotune_error* fail(int32_t code, const char* m) {
  cotune_str s;
  s.data = m;
  s.len = strlen(m);
  return g_host->error_new(code, s);
}

static cotune_error* mean_create(const cotune_host* h, cotune_str o, cotune_predictor_instance** out) {
  (void)h;
  (void)o;
  *out = (cotune_predictor_instance*)calloc(1, sizeof(cotune_predictor_instance));
  return *out ? NULL : fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
}
static void mean_destroy(cotune_predictor_instance* p) { free(p); }
static cotune_error* mean_fit(cotune_predictor_instance* p, const double* x, size_t n, size_t d, const double* y,
                              const double* w) {
  size_t i;
  double s = 0;
  (void)x;
  (void)d;
  (void)w;
  if (n == 0) return fail(COTUNE_ERR_INVALID_ARGUMENT, "no rows");
  for (i = 0; i < n; ++i) s += y[i];
  p->mean = s / (double)n;
  p->fitted = 1;
  return NULL;
}
static cotune_error* mean_predict(cotune_predictor_instance* p, const double* x, size_t n, size_t d, double* mean,
                                  double* sd) {
  size_t i;
  (void)x;
  (void)d;
  if (!p->fitted) return fail(COTUNE_ERR_FAILED_PRECONDITION, "not fitted");
  for (i = 0; i < n; ++i) {
    mean[i] = p->mean;
    if (sd) sd[i] = 0;
  }
  return NULL;
}
static cotune_error* mean_save(cotune_predictor_instance* p, const cotune_sink* out) {
  return out->write(out->ctx, (const char*)&p->mean, sizeof p->mean) ? fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "sink") : NULL;
}
static cotune_error* mean_load(cotune_predictor_instance* p, const void* data, size_t len) {
  if (len != sizeof p->mean) return fail(COTUNE_ERR_INVALID_ARGUMENT, "bad state");
  memcpy(&p->mean, data, sizeof p->mean);
  p->fitted = 1;
  return NULL;
}
static cotune_error* mean_describe(cotune_predictor_instance* p, const cotune_sink* out) {
  (void)p;
  return out->write(out->ctx, "{}", 2) ? fail(COTUNE_ERR_RESOURCE_EXHAUSTED, "sink") : NULL;
}

#ifdef FIXTURE_NEWER
/* What a newer minor might look like: every struct grew at its end. */
typedef struct {
  cotune_predictor_api base;
  cotune_error* (*future_function)(cotune_predictor_instance*, double*);
  double future_number;
} newer_api;
typedef struct {
  cotune_component base;
  uint32_t future_flags;
  cotune_str future_string;
} newer_component;
static const newer_api kApi = {{sizeof(newer_api), mean_create, mean_destroy, mean_fit, mean_predict, mean_save,
                                mean_load, mean_describe},
                               NULL, 42.0};
#else
static const cotune_predictor_api kApi = {
#if defined(FIXTURE_OLDER)
    COTUNE_STRUCT_SIZE(cotune_predictor_api, predict),
#elif defined(FIXTURE_API_ZERO_SIZE)
    0,
#else
    COTUNE_STRUCT_SIZE(cotune_predictor_api, describe_fit),
#endif
    mean_create, mean_destroy, mean_fit,
#if defined(FIXTURE_MISSING_FN)
    NULL,
#else
    mean_predict,
#endif
    mean_save, mean_load, mean_describe};
#endif

#if defined(FIXTURE_UNTERMINATED)
/* Names cut out of longer buffers: only the stated lengths are the strings. */
static const char kIdBuffer[] = FIXTURE_ID "XXXX";
static const char kNameBuffer[] = "abi-meanYYYY";
#define ID_STR {kIdBuffer, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {kNameBuffer, 8}
#elif defined(FIXTURE_BAD_UTF8)
#define ID_STR {FIXTURE_ID, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi-\xff\xfe", 6}
#elif defined(FIXTURE_NULL_STRING)
#define ID_STR {NULL, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi-mean", 8}
#elif defined(FIXTURE_LONG_STRING)
#define ID_STR {FIXTURE_ID, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi-mean", (size_t)-1}
#elif defined(FIXTURE_EMPTY_ID)
#define ID_STR {FIXTURE_ID, 0}
#define NAME_STR {"abi-mean", 8}
#elif defined(FIXTURE_NUL_INSIDE)
#define ID_STR {FIXTURE_ID, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi\0mean", 8}
#elif defined(FIXTURE_BAD_ID)
#define ID_STR {"not an id", 9}
#define NAME_STR {"abi-mean", 8}
#elif defined(FIXTURE_BAD_NAME)
#define ID_STR {FIXTURE_ID, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi mean", 8}
#else
#define ID_STR {FIXTURE_ID, sizeof(FIXTURE_ID) - 1}
#define NAME_STR {"abi-mean", 8}
#endif

#if defined(FIXTURE_SWAPPED_VERSION)
#define DESCRIPTION_STR {"1.0.0", 5}
#define VERSION_STR {"ABI fixture: predicts the mean target.", 38}
#elif defined(FIXTURE_SHORT_VERSION)
#define DESCRIPTION_STR {"ABI fixture: predicts the mean target.", 38}
#define VERSION_STR {"1.0", 3}
#else
#define DESCRIPTION_STR {"ABI fixture: predicts the mean target.", 38}
#define VERSION_STR {"1.0.0", 5}
#endif

#if defined(FIXTURE_SMALL_STRUCT)
#define COMPONENT_SIZE COTUNE_STRUCT_SIZE(cotune_component, version)
#elif defined(FIXTURE_COMPONENT_ZERO_SIZE)
#define COMPONENT_SIZE 0
#else
#define COMPONENT_SIZE COTUNE_STRUCT_SIZE(cotune_component, api)
#endif

#if defined(FIXTURE_NULL_API)
#define API_PTR NULL
#else
#define API_PTR &kApi
#endif

#ifdef FIXTURE_NEWER
static const newer_component kNewer = {
    {sizeof(newer_component), COTUNE_KIND_PREDICTOR, COTUNE_CAP_SAVE_STATE, ID_STR, NAME_STR,
     DESCRIPTION_STR, VERSION_STR, API_PTR},
    7u,
    {"from the future", 15}};
#define COMPONENT (&kNewer.base)
#else
#if defined(FIXTURE_NEGATIVE_KIND)
#define KIND (-1)
#else
#define KIND COTUNE_KIND_PREDICTOR
#endif
static const cotune_component kComponent = {COMPONENT_SIZE, KIND, COTUNE_CAP_SAVE_STATE, ID_STR,
                                            NAME_STR, DESCRIPTION_STR, VERSION_STR, API_PTR};
#define COMPONENT (&kComponent)
#endif

#if defined(FIXTURE_DUP_INSIDE)
static const cotune_component* const kComponents[] = {COMPONENT, COMPONENT};
#elif defined(FIXTURE_NULL_ITEM)
static const cotune_component* const kComponents[] = {COMPONENT, NULL};
#else
static const cotune_component* const kComponents[] = {COMPONENT};
#endif

#if defined(FIXTURE_MAJOR2)
#define MAJOR 2
#else
#define MAJOR COTUNE_ABI_MAJOR
#endif
#if defined(FIXTURE_OLDER)
#define MINOR 0
#elif defined(FIXTURE_NEWER)
#define MINOR (COTUNE_ABI_MINOR + 1)
#else
#define MINOR COTUNE_ABI_MINOR
#endif

static const cotune_plugin kPlugin = {
#if defined(FIXTURE_ZERO_SIZE)
    0,
#else
    COTUNE_STRUCT_SIZE(cotune_plugin, num_components),
#endif
    MAJOR, MINOR,
#if defined(FIXTURE_NULL_LIST)
    NULL,
#else
    kComponents,
#endif
#if defined(FIXTURE_HUGE_COUNT)
    (size_t)-1
#elif defined(FIXTURE_ZERO_COUNT)
    0
#else
    sizeof(kComponents) / sizeof(kComponents[0])
#endif
};

#if !defined(FIXTURE_NO_ENTRY)
COTUNE_EXPORT const cotune_plugin* cotune_plugin_entry_v1(const cotune_host* host) {
  g_host = host;
#if defined(FIXTURE_NULL_ENTRY)
  return NULL;
#else
  return &kPlugin;
#endif
}
#else
/* Exports something, so the library itself loads; just not the entry point. */
COTUNE_EXPORT const cotune_plugin* some_other_symbol(const cotune_host* host) {
  g_host = host;
  return &kPlugin;
}
#endif
