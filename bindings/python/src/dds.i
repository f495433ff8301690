/* SWIG interface of the raw extension module dds._dds over include/dds/dds.h and
 * include/dds/dds_shard.h (vocabulary-parallel sampling, docs/vocab_parallel.md).
 *
 * Kept thin on purpose; the Pythonic layer is the `dds` package (src/dds/*.py). Rules:
 *  - every function returning dds_status raises dds._dds.Error (or its ArgumentError subclass,
 *    which is also a ValueError) when the status is not DDS_OK; str(exception) is
 *    dds_last_error() read right after the call, .status / .status_name the code;
 *  - every array / buffer pointer (struct fields and arguments alike) is a Python int (uintptr):
 *    data_ptr() of a torch tensor, .data.ptr of a CuPy array, ctypes.data of a numpy array;
 *  - dds_stream is a Python int (cudaStream_t value; 0 or None = the legacy default stream);
 *  - the sampler handle is an opaque SWIG pointer returned by dds_create(config);
 *  - struct constructors call the matching dds_*_init(), so a new struct holds the defaults;
 *  - dds_sample, dds_stash_logprobs, dds_sample_partial and dds_sample_finish release the GIL
 *    while they run;
 *  - dds_shard_plan's fixed arrays (round_kind, row_bytes, ...) read as tuples (read-only);
 *    dds_sample_record_bytes(sampler, args, shard, round) returns the byte count.
 * Built with `swig -python -builtin`: the whole module is the C extension (no proxy .py needed).
 */
%module(threads="1") dds

%{
#include <stdlib.h>
#include "dds/dds.h"
#include "dds/dds_shard.h"

static PyObject* dds_py_Error = NULL;          /* dds._dds.Error(RuntimeError) */
static PyObject* dds_py_ArgumentError = NULL;  /* dds._dds.ArgumentError(Error, ValueError) */

/* Raises Error / ArgumentError: str(e) is dds_last_error(), e.status the dds_status value and
 * e.status_name its name ("DDS_ERR_INVALID_ARGUMENT", ...). */
static void dds_py_raise(dds_status st) {
  const char* msg = dds_last_error();
  const char* name = dds_status_string(st);
  PyObject* cls = dds_py_Error;
  if (st == DDS_ERR_INVALID_ARGUMENT || st == DDS_ERR_NULL_POINTER || st == DDS_ERR_CAPACITY ||
      st == DDS_ERR_STRUCT_SIZE || st == DDS_ERR_INVALID_VALUE)
    cls = dds_py_ArgumentError;
  PyObject* exc = PyObject_CallFunction(cls, "s", (msg && msg[0]) ? msg : name);
  if (!exc) return;
  PyObject* code = PyLong_FromLong((long)st);
  PyObject* sname = PyUnicode_FromString(name);
  if (code) PyObject_SetAttrString(exc, "status", code);
  if (sname) PyObject_SetAttrString(exc, "status_name", sname);
  Py_XDECREF(code);
  Py_XDECREF(sname);
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
}

static int dds_py_as_ptr(PyObject* o, void** out) {
  if (o == Py_None) {
    *out = NULL;
    return 0;
  }
  if (!PyLong_Check(o)) {
    PyErr_Format(PyExc_TypeError, "expected an integer address (uintptr) or None, got %s",
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  void* p = PyLong_AsVoidPtr(o);
  if (p == NULL && PyErr_Occurred()) return -1;
  *out = p;
  return 0;
}
%}

%nothread;
%thread dds_sample;
%thread dds_stash_logprobs;
%thread dds_sample_partial;
%thread dds_sample_finish;

%init %{
  dds_py_Error = PyErr_NewExceptionWithDoc(
      "dds._dds.Error", "A dds call failed. str(e) is dds_last_error(); e.status is the dds_status value, "
      "e.status_name its name.", PyExc_RuntimeError, NULL);
  if (dds_py_Error) {
    PyObject* bases = PyTuple_Pack(2, dds_py_Error, PyExc_ValueError);
    if (bases) {
      dds_py_ArgumentError = PyErr_NewExceptionWithDoc(
          "dds._dds.ArgumentError",
          "A dds call rejected an argument (DDS_ERR_INVALID_ARGUMENT, NULL_POINTER, CAPACITY, "
          "STRUCT_SIZE, INVALID_VALUE).", bases, NULL);
      Py_DECREF(bases);
    }
    Py_INCREF(dds_py_Error);
    PyModule_AddObject(m, "Error", dds_py_Error);
    if (dds_py_ArgumentError) {
      Py_INCREF(dds_py_ArgumentError);
      PyModule_AddObject(m, "ArgumentError", dds_py_ArgumentError);
    }
  }
%}

%include <stdint.i>

/* dds_status results: raise on failure, return None on success. */
%typemap(out) dds_status {
  if ($1 != DDS_OK) {
    dds_py_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}

/* Pointers to array data: Python ints. */
%typemap(in) void*, const void*, int32_t*, const int32_t*, uint32_t*, const uint32_t*,
    uint64_t*, const uint64_t*, float*, const float*, uint8_t*, const uint8_t* {
  void* p_;
  if (dds_py_as_ptr($input, &p_) != 0) SWIG_fail;
  $1 = ($1_ltype)p_;
}
%typemap(out) void*, const void*, int32_t*, const int32_t*, uint32_t*, const uint32_t*,
    uint64_t*, const uint64_t*, float*, const float*, uint8_t*, const uint8_t* {
  $result = PyLong_FromVoidPtr((void*)$1);
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_POINTER) void*, const void*, int32_t*,
    const int32_t*, uint32_t*, const uint32_t*, uint64_t*, const uint64_t*, float*, const float*,
    uint8_t*, const uint8_t* {
  $1 = (PyLong_Check($input) || $input == Py_None) ? 1 : 0;
}

/* Streams: Python ints (cudaStream_t), None = 0. */
%typemap(in) dds_stream {
  void* p_;
  if (dds_py_as_ptr($input, &p_) != 0) SWIG_fail;
  $1 = (dds_stream)p_;
}
%typemap(out) dds_stream {
  $result = PyLong_FromVoidPtr((void*)$1);
}

/* dds_create(config) -> sampler handle. */
%typemap(in, numinputs=0) dds_sampler** out (dds_sampler* tmp_ = NULL) {
  $1 = &tmp_;
}
/* The status typemap left $result = None: replace it by the one output (no AppendOutput, whose
 * signature and None handling changed in SWIG 4.3). */
%typemap(argout) dds_sampler** out {
  Py_XDECREF($result);
  $result = SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $descriptor(dds_sampler*), 0);
}

/* dds_sampler_backend(sampler) -> int. */
%typemap(in, numinputs=0) int32_t* out (int32_t tmp_ = 0) {
  $1 = &tmp_;
}
%typemap(argout) int32_t* out {
  Py_XDECREF($result);
  $result = PyLong_FromLong((long)*$1);
}

/* The *_init functions take sizeof(struct) through the constructors below. */
%extend dds_sampler_config {
  dds_sampler_config() {
    dds_sampler_config* c = (dds_sampler_config*)calloc(1, sizeof(dds_sampler_config));
    if (c) dds_sampler_config_init(c, sizeof(dds_sampler_config));
    return c;
  }
  ~dds_sampler_config() { free($self); }
}
%extend dds_sample_args {
  dds_sample_args() {
    dds_sample_args* a = (dds_sample_args*)calloc(1, sizeof(dds_sample_args));
    if (a) dds_sample_args_init(a, sizeof(dds_sample_args));
    return a;
  }
  ~dds_sample_args() { free($self); }
  /* Back to the defaults of dds_sample_args_init: Sampler.sample reuses one struct. */
  void reset() { dds_sample_args_init($self, sizeof(dds_sample_args)); }
}
%extend dds_stash_args {
  dds_stash_args() {
    dds_stash_args* a = (dds_stash_args*)calloc(1, sizeof(dds_stash_args));
    if (a) dds_stash_args_init(a, sizeof(dds_stash_args));
    return a;
  }
  ~dds_stash_args() { free($self); }
}

%extend dds_reveal_args {
  dds_reveal_args() {
    dds_reveal_args* a = (dds_reveal_args*)calloc(1, sizeof(dds_reveal_args));
    if (a) dds_reveal_args_init(a, sizeof(dds_reveal_args));
    return a;
  }
  ~dds_reveal_args() { free($self); }
}
%extend dds_verify_args {
  dds_verify_args() {
    dds_verify_args* a = (dds_verify_args*)calloc(1, sizeof(dds_verify_args));
    if (a) dds_verify_args_init(a, sizeof(dds_verify_args));
    return a;
  }
  ~dds_verify_args() { free($self); }
}

/* Address of the first element of a buffer-protocol object (a numpy array): faster than
 * __array_interface__ on the per-call path. */
%inline %{
PyObject* dds_py_address(PyObject* obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_STRIDES) != 0) return NULL;
  void* p = view.buf;
  PyBuffer_Release(&view);
  return PyLong_FromVoidPtr(p);
}
%}

/* dds_shard.h: the plan's fixed arrays read as tuples of ints; dds_sample_record_bytes returns
 * its size_t output. */
%typemap(out) int32_t [ANY] {
  $result = PyTuple_New($1_dim0);
  if (!$result) SWIG_fail;
  for (Py_ssize_t i_ = 0; i_ < $1_dim0; ++i_)
    PyTuple_SET_ITEM($result, i_, PyLong_FromLong((long)$1[i_]));
}
%typemap(out) int64_t [ANY] {
  $result = PyTuple_New($1_dim0);
  if (!$result) SWIG_fail;
  for (Py_ssize_t i_ = 0; i_ < $1_dim0; ++i_)
    PyTuple_SET_ITEM($result, i_, PyLong_FromLongLong((long long)$1[i_]));
}
%immutable dds_shard_plan::round_kind;
%immutable dds_shard_plan::row_bytes;
%immutable dds_shard_plan::record_bytes;
%immutable dds_shard_plan::gathered_offset;
%typemap(in, numinputs=0) size_t* bytes (size_t tmp_ = 0) {
  $1 = &tmp_;
}
%typemap(argout) size_t* bytes {
  Py_XDECREF($result);
  $result = PyLong_FromSize_t(*$1);
}
%extend dds_shard_args {
  dds_shard_args() {
    dds_shard_args* a = (dds_shard_args*)calloc(1, sizeof(dds_shard_args));
    if (a) dds_shard_args_init(a, sizeof(dds_shard_args));
    return a;
  }
  ~dds_shard_args() { free($self); }
}
%extend dds_shard_plan {
  dds_shard_plan() {
    dds_shard_plan* p = (dds_shard_plan*)calloc(1, sizeof(dds_shard_plan));
    if (p) p->struct_size = sizeof(dds_shard_plan);
    return p;
  }
  ~dds_shard_plan() { free($self); }
}

/* Sizes of the structs as this module was compiled (for tests and struct_size checks). */
%inline %{
size_t dds_py_sizeof_sampler_config(void) { return sizeof(dds_sampler_config); }
size_t dds_py_sizeof_sample_args(void) { return sizeof(dds_sample_args); }
size_t dds_py_sizeof_stash_args(void) { return sizeof(dds_stash_args); }
size_t dds_py_sizeof_shard_args(void) { return sizeof(dds_shard_args); }
size_t dds_py_sizeof_shard_plan(void) { return sizeof(dds_shard_plan); }
%}

%ignore dds_sampler;
%include "dds/dds.h"
%include "dds/dds_shard.h"

/* ---- The planned fast path of Sampler.sample (dds/_sample.py: make_plan, Sampler.sample) ----
 * A plan is what a successful call left in its dds_sample_args, plus how each argument of the
 * call was read. Sampler.sample passes its 26 arguments (logits, then its keywords in signature
 * order) as one tuple; each slot of a plan either
 *   EQ    must equal a recorded value (None, a str, a tuple of str, a torch dtype, a bool, an
 *         int or float of the same type and bits; a list of str equals the tuple of its
 *         items): outputs, stats, dtype, stream, ...;
 *   NUM   is a Python int (or float for float fields) converted into a scalar field with the
 *         checks of the Python layer (out of range or another type: no match);
 *   TORCH is an exact torch.Tensor with the recorded dtype and device, NUMPY an exact
 *         numpy.ndarray with the recorded buffer format (and writable for outputs); its
 *         address goes into a pointer field.
 * Array shapes follow the call's rows and requests: the logits give num_rows (1..max_rows),
 * row_offsets num_requests (1..max_requests; one per row without them); each dimension of an
 * array is recorded as fixed, "rows" or "requests", vectors must be contiguous, matrices have
 * unit column stride and their row stride (>= the row length) is patched. Host row_offsets are
 * checked as the Python layer checks them (0 first, non-decreasing, num_rows last); uncond_logits
 * have any number of rows (at least num_rows without uncond_row_offsets). Outputs the plan
 * allocates come from recorded callables given the shape: np.empty / torch.empty with the
 * dtype and device for one output, or one callable for several outputs of the same shape (torch
 * row vectors of 4-byte elements: one allocation, its rows as the outputs; a tuple back).
 * dds_py_sample_planned tries the sampler's plans in order: the first that matches every slot
 * is patched and run (the GIL released) and the 8 outputs returned in SampleResult order; no
 * match returns None and nothing ran: Sampler.sample then takes the full Python path, with its
 * checks and messages.
 */
%{
#include <float.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if PY_VERSION_HEX < 0x03090000
#define PyObject_CallNoArgs(f) PyObject_CallFunctionObjArgs((f), NULL)
#define PyObject_CallOneArg(f, a) PyObject_CallFunctionObjArgs((f), (a), NULL)
#define PyObject_CallMethodNoArgs(o, n) PyObject_CallMethodObjArgs((o), (n), NULL)
#endif

enum { DDS_PY_EQ = 0, DDS_PY_TORCH = 1, DDS_PY_NUMPY = 2, DDS_PY_NUM = 3 };
enum { DDS_PY_F32 = 0, DDS_PY_I32 = 1, DDS_PY_U32 = 2, DDS_PY_U64 = 3 };
/* dimension kinds: fixed, the rows (defined by the logits), the requests (by row_offsets) */
enum { DDS_PY_FIXED = 0, DDS_PY_ROWS_DEF = 1, DDS_PY_ROWS = 2, DDS_PY_REQS_DEF = 3,
       DDS_PY_REQS = 4, DDS_PY_UNCOND_MIN = 5, DDS_PY_UNCOND_ANY = 6 };
#define DDS_PY_MAX_SLOTS 32
#define DDS_PY_MAX_ALLOCS 8

typedef struct {
  int kind;
  PyObject* value;  /* EQ: the value; TORCH: the dtype object; NUMPY: the format (str) */
  PyObject* type;   /* TORCH / NUMPY: the exact type */
  Py_ssize_t off;   /* offset of the field in dds_sample_args */
  int ctype;        /* NUM: DDS_PY_F32 ... */
  long long lo, hi; /* NUM (i32, u32): accepted range */
  Py_ssize_t itemsize; /* NUMPY */
  int ndim;            /* 1 or 2 */
  int dimk[2];         /* DDS_PY_FIXED ... */
  Py_ssize_t shape[2]; /* fixed dimensions */
  Py_ssize_t col_stride; /* matrices: the recorded column stride (elements) */
  Py_ssize_t rs_off;   /* matrices: offset of the row stride field, or -1: none (fixed) */
  Py_ssize_t row_stride; /* ... the fixed row stride when rs_off < 0 */
  int device;          /* TORCH: -1 cpu, >= 0 the CUDA ordinal */
  int writable;        /* NUMPY outputs */
  int out_index;       /* position in the result (an out_* array), or -1 */
  int offsets;         /* host row_offsets: checked */
} dds_py_slot;

typedef struct {
  int k;              /* outputs made by one factory call */
  Py_ssize_t off[8];  /* their fields */
  int out_index[8];   /* their positions in the result */
  int is_torch;
  int ndim;
  Py_ssize_t dims[2]; /* >= 0 fixed; -1 rows; -2 requests */
  PyObject* factory;  /* factory(shape) -> the array, or a tuple of k arrays when k > 1 */
} dds_py_alloc;

typedef struct {
  dds_sample_args tmpl;
  dds_sampler* handle;
  int32_t max_rows, max_requests;
  int nslots, nallocs;
  dds_py_slot slots[DDS_PY_MAX_SLOTS];
  dds_py_alloc allocs[DDS_PY_MAX_ALLOCS];
  PyObject* stream_fn;  /* torch's current raw stream getter, or NULL: stream_const */
  PyObject* stream_dev; /* its argument */
  void* stream_const;
} dds_py_plan;

typedef struct {
  char* base; /* the args being patched */
  Py_ssize_t n, R;
} dds_py_call;

static PyObject *dds_py_s_dtype, *dds_py_s_shape, *dds_py_s_stride, *dds_py_s_is_cpu,
    *dds_py_s_is_cuda, *dds_py_s_get_device, *dds_py_s_data_ptr;

static int dds_py_strings(void) {
  if (dds_py_s_data_ptr) return 0;
  dds_py_s_dtype = PyUnicode_InternFromString("dtype");
  dds_py_s_shape = PyUnicode_InternFromString("shape");
  dds_py_s_stride = PyUnicode_InternFromString("stride");
  dds_py_s_is_cpu = PyUnicode_InternFromString("is_cpu");
  dds_py_s_is_cuda = PyUnicode_InternFromString("is_cuda");
  dds_py_s_get_device = PyUnicode_InternFromString("get_device");
  dds_py_s_data_ptr = PyUnicode_InternFromString("data_ptr");
  return dds_py_s_data_ptr ? 0 : -1;
}

static Py_ssize_t dds_py_field_offset(PyObject* name_obj) {
  const char* name = PyUnicode_Check(name_obj) ? PyUnicode_AsUTF8(name_obj) : NULL;
  if (!name) return -1;
#define DDS_PY_F(f) if (strcmp(name, #f) == 0) return (Py_ssize_t)offsetof(dds_sample_args, f);
  DDS_PY_F(logits) DDS_PY_F(row_offsets) DDS_PY_F(positions) DDS_PY_F(uncond_logits)
  DDS_PY_F(uncond_row_offsets) DDS_PY_F(guidance_scales) DDS_PY_F(guidance_scale)
  DDS_PY_F(temperatures) DDS_PY_F(temperature) DDS_PY_F(top_ks) DDS_PY_F(top_k)
  DDS_PY_F(top_ps) DDS_PY_F(top_p) DDS_PY_F(min_ps) DDS_PY_F(min_p) DDS_PY_F(seeds)
  DDS_PY_F(seed) DDS_PY_F(steps) DDS_PY_F(step) DDS_PY_F(banned_token) DDS_PY_F(tokens)
  DDS_PY_F(logprobs) DDS_PY_F(argmax) DDS_PY_F(confidence) DDS_PY_F(margin) DDS_PY_F(entropy)
  DDS_PY_F(probs) DDS_PY_F(request_status) DDS_PY_F(row_stride) DDS_PY_F(uncond_row_stride)
  DDS_PY_F(probs_row_stride)
#undef DDS_PY_F
  return -1;
}

static void dds_py_plan_free(PyObject* cap) {
  dds_py_plan* p = (dds_py_plan*)PyCapsule_GetPointer(cap, "dds_py_plan");
  if (!p) return;
  for (int i = 0; i < p->nslots; ++i) {
    Py_XDECREF(p->slots[i].value);
    Py_XDECREF(p->slots[i].type);
  }
  for (int i = 0; i < p->nallocs; ++i) Py_XDECREF(p->allocs[i].factory);
  Py_XDECREF(p->stream_fn);
  Py_XDECREF(p->stream_dev);
  free(p);
}

/* A tuple of <= 2 ints into out[]; its length, or -1 (no Python error left). */
static int dds_py_ints(PyObject* t, Py_ssize_t* out) {
  if (!t) { PyErr_Clear(); return -1; }
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > 2) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
    if (out[i] == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
  }
  return (int)n;
}

/* Like dds_py_ints, consuming the reference. */
static int dds_py_ints_steal(PyObject* t, Py_ssize_t* out) {
  int n = dds_py_ints(t, out);
  Py_XDECREF(t);
  return n;
}

static int dds_py_eq(PyObject* v, PyObject* want) {
  if (v == want) return 1;
  if (PyList_CheckExact(v) && PyTuple_CheckExact(want)) { /* outputs=[...]: its items now */
    Py_ssize_t n = PyList_GET_SIZE(v);
    if (n != PyTuple_GET_SIZE(want)) return 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* x = PyList_GET_ITEM(v, i);
      if (!PyUnicode_CheckExact(x)) return 0;
      int r = PyUnicode_Compare(x, PyTuple_GET_ITEM(want, i));
      if (r == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
      if (r != 0) return 0;
    }
    return 1;
  }
  if (Py_TYPE(v) != Py_TYPE(want)) return 0;
  if (PyFloat_CheckExact(v)) {
    double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(want);
    return memcmp(&a, &b, sizeof a) == 0;
  }
  if (PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyTuple_CheckExact(v)) {
    int r = PyObject_RichCompareBool(v, want, Py_EQ);
    if (r < 0) { PyErr_Clear(); return 0; }
    return r;
  }
  return 0;
}

/* NUM: the value into the scalar field, with the Python layer's checks; 0 if it does not fit. */
static int dds_py_num(PyObject* v, const dds_py_slot* s, char* args) {
  if (s->ctype == DDS_PY_F32) {
    double d;
    if (PyFloat_CheckExact(v)) d = PyFloat_AS_DOUBLE(v);
    else if (PyLong_CheckExact(v)) {
      d = PyLong_AsDouble(v);
      if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else return 0;
    if (d < -FLT_MAX || d > FLT_MAX) return 0; /* SWIG's float conversion raises: full path */
    *(float*)(args + s->off) = (float)d;
    return 1;
  }
  if (!PyLong_CheckExact(v)) return 0;
  if (s->ctype == DDS_PY_U64) {
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    *(uint64_t*)(args + s->off) = (uint64_t)u;
    return 1;
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
  if (x < s->lo || x > s->hi) return 0;
  if (s->ctype == DDS_PY_U32) *(uint32_t*)(args + s->off) = (uint32_t)x;
  else *(int32_t*)(args + s->off) = (int32_t)x;
  return 1;
}

/* The Python layer's checks of host row_offsets (Sampler._row_offsets). */
static int dds_py_offsets_ok(const int32_t* o, Py_ssize_t n, Py_ssize_t num_rows) {
  if (n < 2 || o[0] != 0 || o[n - 1] != num_rows) return 0;
  for (Py_ssize_t i = 1; i < n; ++i)
    if (o[i] < o[i - 1]) return 0;
  return 1;
}

/* Shape and strides (elements) of an array against its slot; defines the rows / requests of
 * the call and patches the row stride. */
static int dds_py_dims_ok(const dds_py_plan* p, const dds_py_slot* s, int ndim,
                          const Py_ssize_t* shape, const Py_ssize_t* st, dds_py_call* c) {
  if (ndim != s->ndim) return 0;
  for (int i = 0; i < ndim; ++i) {
    Py_ssize_t want = s->shape[i];
    switch (s->dimk[i]) {
      case DDS_PY_ROWS_DEF:
        if (shape[i] < 1 || shape[i] > p->max_rows) return 0;
        want = c->n = c->R = shape[i];
        break;
      case DDS_PY_ROWS: want = c->n; break;
      case DDS_PY_REQS_DEF:
        if (shape[i] < 2 || shape[i] - 1 > p->max_requests) return 0;
        want = shape[i];
        c->R = shape[i] - 1;
        break;
      case DDS_PY_REQS: want = c->R; break;
      case DDS_PY_UNCOND_MIN: /* uncond rows mirroring the logits rows: at least num_rows */
      case DDS_PY_UNCOND_ANY: { /* uncond rows addressed by uncond_row_offsets */
        if (shape[i] < (s->dimk[i] == DDS_PY_UNCOND_MIN ? c->n : 1) || shape[i] > INT32_MAX)
          return 0;
        int32_t u = (int32_t)shape[i];
        memcpy(c->base + offsetof(dds_sample_args, uncond_num_rows), &u, sizeof u);
        want = shape[i];
        break;
      }
      default: break;
    }
    if (shape[i] != want) return 0;
  }
  if (ndim == 1) return st[0] == 1;
  if (st[1] != s->col_stride) return 0;
  if (s->rs_off < 0) return st[0] == s->row_stride;
  int64_t rs = shape[0] > 1 ? (int64_t)st[0] : (int64_t)shape[1];
  if (rs < shape[1]) return 0;
  memcpy(c->base + s->rs_off, &rs, sizeof rs);
  return 1;
}

static void* dds_py_torch_ptr(PyObject* o) {
  PyObject* r = PyObject_CallMethodNoArgs(o, dds_py_s_data_ptr);
  if (!r) return NULL;
  void* p = PyLong_AsVoidPtr(r);
  Py_DECREF(r);
  return p;
}

static int dds_py_torch_match(const dds_py_plan* p, PyObject* o, const dds_py_slot* s,
                              void** ptr, dds_py_call* c) {
  if ((PyObject*)Py_TYPE(o) != s->type) return 0;
  PyObject* t = PyObject_GetAttr(o, dds_py_s_dtype);
  if (!t) { PyErr_Clear(); return 0; }
  Py_DECREF(t);
  if (t != s->value) return 0;
  t = PyObject_GetAttr(o, s->device < 0 ? dds_py_s_is_cpu : dds_py_s_is_cuda);
  if (!t) { PyErr_Clear(); return 0; }
  Py_DECREF(t);
  if (t != Py_True) return 0;
  if (s->device >= 0) {
    t = PyObject_CallMethodNoArgs(o, dds_py_s_get_device);
    if (!t) { PyErr_Clear(); return 0; }
    long dev = PyLong_AsLong(t);
    Py_DECREF(t);
    if (dev != s->device) { PyErr_Clear(); return 0; }
  }
  Py_ssize_t shape[2], st[2];
  int nd = dds_py_ints_steal(PyObject_GetAttr(o, dds_py_s_shape), shape);
  if (nd != s->ndim ||
      dds_py_ints_steal(PyObject_CallMethodNoArgs(o, dds_py_s_stride), st) != nd ||
      !dds_py_dims_ok(p, s, nd, shape, st, c))
    return 0;
  *ptr = dds_py_torch_ptr(o);
  if (!*ptr && PyErr_Occurred()) { PyErr_Clear(); return 0; }
  return 1;
}

static int dds_py_numpy_match(const dds_py_plan* p, PyObject* o, const dds_py_slot* s,
                              void** ptr, dds_py_call* c) {
  if ((PyObject*)Py_TYPE(o) != s->type) return 0;
  Py_buffer v;
  if (PyObject_GetBuffer(o, &v, PyBUF_RECORDS_RO | (s->writable ? PyBUF_WRITABLE : 0)) != 0) {
    PyErr_Clear();
    return 0;
  }
  int ok = v.ndim == s->ndim && v.itemsize == s->itemsize && v.format &&
           PyUnicode_CompareWithASCIIString(s->value, v.format) == 0;
  Py_ssize_t st[2] = {0, 0};
  for (int i = 0; ok && i < v.ndim; ++i) {
    st[i] = v.strides[i] / v.itemsize;
    ok = st[i] * v.itemsize == v.strides[i];
  }
  ok = ok && dds_py_dims_ok(p, s, v.ndim, v.shape, st, c);
  *ptr = v.buf;
  PyBuffer_Release(&v);
  return ok;
}
%}

%inline %{
/* A plan (a capsule) from the args a successful call ran with; see the comment above.
 * slots: tuple of (EQ, value) | (NUM, field, ctype, lo, hi) | (TORCH or NUMPY, field, type,
 * dtype or format, itemsize, dimension kinds, shape, strides (elements), row stride field or
 * None, device, writable, out_index, offsets); allocs: tuple of (field, out_index, is_torch,
 * dims (>= 0 fixed, -1 rows, -2 requests), factory), or of (fields, out_indices, ...) with
 * tuples of k >= 2 fields and indices for a factory that returns k arrays of that shape. */
PyObject* dds_py_plan_new(dds_sampler* handle, dds_sample_args* tmpl, int max_rows,
                          int max_requests, PyObject* slots, PyObject* allocs,
                          PyObject* stream_fn, PyObject* stream_dev, PyObject* stream_const) {
  if (dds_py_strings() != 0) return NULL;
  if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) > DDS_PY_MAX_SLOTS ||
      !PyTuple_Check(allocs) || PyTuple_GET_SIZE(allocs) > DDS_PY_MAX_ALLOCS) {
    PyErr_SetString(PyExc_ValueError, "dds_py_plan_new: slots / allocs");
    return NULL;
  }
  dds_py_plan* p = (dds_py_plan*)calloc(1, sizeof(dds_py_plan));
  if (!p) return PyErr_NoMemory();
  PyObject* cap = PyCapsule_New(p, "dds_py_plan", dds_py_plan_free);
  if (!cap) { free(p); return NULL; }
  memcpy(&p->tmpl, tmpl, sizeof p->tmpl);
  p->handle = handle;
  p->max_rows = max_rows;
  p->max_requests = max_requests;
  if (dds_py_as_ptr(stream_const, &p->stream_const) != 0) goto fail;
  if (stream_fn != Py_None) {
    Py_INCREF(stream_fn); p->stream_fn = stream_fn;
    Py_INCREF(stream_dev); p->stream_dev = stream_dev;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slots); ++i) {
    PyObject* t = PyTuple_GET_ITEM(slots, i);
    dds_py_slot* s = &p->slots[i];
    p->nslots = (int)i + 1;
    s->out_index = -1;
    s->rs_off = -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2) goto bad;
    s->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    if (s->kind == DDS_PY_EQ) {
      s->value = PyTuple_GET_ITEM(t, 1); Py_INCREF(s->value);
      continue;
    }
    s->off = dds_py_field_offset(PyTuple_GET_ITEM(t, 1));
    if (s->off < 0) goto bad;
    if (s->kind == DDS_PY_NUM && PyTuple_GET_SIZE(t) == 5) {
      s->ctype = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 2));
      s->lo = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3));
      s->hi = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 4));
    } else if ((s->kind == DDS_PY_TORCH || s->kind == DDS_PY_NUMPY) &&
               PyTuple_GET_SIZE(t) == 13) {
      Py_ssize_t dimk[2], st[2];
      s->type = PyTuple_GET_ITEM(t, 2); Py_INCREF(s->type);
      s->value = PyTuple_GET_ITEM(t, 3); Py_INCREF(s->value);
      if (s->kind == DDS_PY_NUMPY && !PyUnicode_Check(s->value)) goto bad;
      s->itemsize = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4));
      s->ndim = dds_py_ints(PyTuple_GET_ITEM(t, 5), dimk);
      if (s->ndim < 1 || dds_py_ints(PyTuple_GET_ITEM(t, 6), s->shape) != s->ndim ||
          dds_py_ints(PyTuple_GET_ITEM(t, 7), st) != s->ndim)
        goto bad;
      for (int d = 0; d < s->ndim; ++d) s->dimk[d] = (int)dimk[d];
      if (s->ndim == 2) {
        s->row_stride = st[0];
        s->col_stride = st[1];
        if (PyTuple_GET_ITEM(t, 8) != Py_None) {
          s->rs_off = dds_py_field_offset(PyTuple_GET_ITEM(t, 8));
          if (s->rs_off < 0) goto bad;
        }
      } else if (st[0] != 1) {
        goto bad; /* vectors are contiguous */
      }
      s->device = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 9));
      s->writable = PyObject_IsTrue(PyTuple_GET_ITEM(t, 10));
      s->out_index = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 11));
      s->offsets = PyObject_IsTrue(PyTuple_GET_ITEM(t, 12));
      if (s->out_index >= 8 ||
          (s->offsets && (s->ndim != 1 || (s->kind == DDS_PY_TORCH && s->device >= 0))))
        goto bad;
    } else {
      goto bad;
    }
    if (PyErr_Occurred()) goto fail;
  }
  if (p->nslots < 1 || p->slots[0].kind == DDS_PY_EQ || p->slots[0].kind == DDS_PY_NUM)
    goto bad; /* the logits come first */
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(allocs); ++i) {
    PyObject* t = PyTuple_GET_ITEM(allocs, i);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) goto bad;
    dds_py_alloc* al = &p->allocs[i];
    PyObject *fields = PyTuple_GET_ITEM(t, 0), *idx = PyTuple_GET_ITEM(t, 1);
    al->factory = PyTuple_GET_ITEM(t, 4); Py_INCREF(al->factory);
    p->nallocs = (int)i + 1;
    if (PyTuple_Check(fields)) { /* several outputs of one factory call */
      al->k = (int)PyTuple_GET_SIZE(fields);
      if (al->k < 2 || al->k > 8 || !PyTuple_Check(idx) || PyTuple_GET_SIZE(idx) != al->k)
        goto bad;
      for (int j = 0; j < al->k; ++j) {
        al->off[j] = dds_py_field_offset(PyTuple_GET_ITEM(fields, j));
        al->out_index[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(idx, j));
      }
    } else {
      al->k = 1;
      al->off[0] = dds_py_field_offset(fields);
      al->out_index[0] = (int)PyLong_AsLong(idx);
    }
    al->is_torch = PyObject_IsTrue(PyTuple_GET_ITEM(t, 2));
    al->ndim = dds_py_ints(PyTuple_GET_ITEM(t, 3), al->dims);
    if (al->ndim < 1) goto bad;
    for (int j = 0; j < al->k; ++j)
      if (al->off[j] < 0 || al->out_index[j] < 0 || al->out_index[j] >= 8) goto bad;
    if (PyErr_Occurred()) goto fail;
  }
  return cap;
bad:
  PyErr_SetString(PyExc_ValueError, "dds_py_plan_new: malformed slot or alloc");
fail:
  Py_DECREF(cap);
  return NULL;
}

/* Runs the first of `plans` (a list of dds_py_plan_new capsules) that matches `vals` (the call's
 * arguments); returns the 8 outputs, or None when no plan matches (nothing ran). */
PyObject* dds_py_sample_planned(PyObject* plans, PyObject* vals) {
  if (!PyList_Check(plans) || !PyTuple_Check(vals)) {
    PyErr_SetString(PyExc_TypeError, "dds_py_sample_planned: (list, tuple)");
    return NULL;
  }
  Py_ssize_t nplans = PyList_GET_SIZE(plans), nvals = PyTuple_GET_SIZE(vals);
  for (Py_ssize_t k = 0; k < nplans; ++k) {
    dds_py_plan* p =
        (dds_py_plan*)PyCapsule_GetPointer(PyList_GET_ITEM(plans, k), "dds_py_plan");
    if (!p) return NULL;
    if (p->nslots != nvals) continue;
    dds_sample_args a;
    memcpy(&a, &p->tmpl, sizeof a);
    dds_py_call c = {(char*)&a, a.num_rows, a.num_requests};
    PyObject* outs[8] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int ok = 1;
    for (int i = 0; ok && i < p->nslots; ++i) {
      const dds_py_slot* s = &p->slots[i];
      PyObject* v = PyTuple_GET_ITEM(vals, i);
      void* ptr = NULL;
      switch (s->kind) {
        case DDS_PY_EQ: ok = dds_py_eq(v, s->value); continue;
        case DDS_PY_NUM: ok = dds_py_num(v, s, c.base); continue;
        case DDS_PY_TORCH: ok = dds_py_torch_match(p, v, s, &ptr, &c); break;
        default: ok = dds_py_numpy_match(p, v, s, &ptr, &c); break;
      }
      if (!ok) break;
      if (s->offsets) ok = dds_py_offsets_ok((const int32_t*)ptr, c.R + 1, c.n);
      memcpy(c.base + s->off, &ptr, sizeof ptr);
      if (s->out_index >= 0) outs[s->out_index] = v;
    }
    if (!ok) continue;
    a.num_rows = (int32_t)c.n;
    a.num_requests = (int32_t)c.R;
    /* Matched: borrowed references for the given outputs, new ones for the allocated. */
    for (int j = 0; j < 8; ++j) Py_XINCREF(outs[j]);
    void* stream = p->stream_const;
    PyObject* result = NULL;
    for (int i = 0; i < p->nallocs; ++i) {
      const dds_py_alloc* al = &p->allocs[i];
      PyObject* shape = PyTuple_New(al->ndim);
      if (!shape) goto done;
      for (int d = 0; d < al->ndim; ++d) {
        Py_ssize_t n = al->dims[d] >= 0 ? al->dims[d] : al->dims[d] == -1 ? c.n : c.R;
        PyObject* nobj = PyLong_FromSsize_t(n);
        if (!nobj) { Py_DECREF(shape); goto done; }
        PyTuple_SET_ITEM(shape, d, nobj);
      }
      PyObject* made = PyObject_CallOneArg(al->factory, shape);
      Py_DECREF(shape);
      if (!made) goto done;
      if (al->k > 1 && (!PyTuple_Check(made) || PyTuple_GET_SIZE(made) != al->k)) {
        Py_DECREF(made);
        PyErr_SetString(PyExc_RuntimeError, "dds_py_sample_planned: a grouped factory's result");
        goto done;
      }
      for (int j = 0; j < al->k; ++j) {
        PyObject* o = made;
        if (al->k > 1) { o = PyTuple_GET_ITEM(made, j); Py_INCREF(o); }
        outs[al->out_index[j]] = o;
        void* ptr;
        if (al->is_torch) {
          ptr = dds_py_torch_ptr(o);
          if (!ptr && PyErr_Occurred()) { if (al->k > 1) Py_DECREF(made); goto done; }
        } else {
          Py_buffer v;
          if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE | PyBUF_WRITABLE) != 0) {
            if (al->k > 1) Py_DECREF(made);
            goto done;
          }
          ptr = v.buf;
          PyBuffer_Release(&v);
        }
        memcpy(c.base + al->off[j], &ptr, sizeof ptr);
      }
      if (al->k > 1) Py_DECREF(made);
    }
    if (p->stream_fn) {
      PyObject* r = PyObject_CallOneArg(p->stream_fn, p->stream_dev);
      if (!r) goto done;
      stream = PyLong_AsVoidPtr(r);
      Py_DECREF(r);
      if (!stream && PyErr_Occurred()) goto done;
    }
    if (k > 0) { /* most recently used first */
      PyObject* cap = PyList_GET_ITEM(plans, k);
      Py_INCREF(cap);
      if (PySequence_DelItem(plans, k) != 0 || PyList_Insert(plans, 0, cap) != 0) {
        Py_DECREF(cap);
        goto done;
      }
      Py_DECREF(cap);
    }
    dds_status st;
    Py_BEGIN_ALLOW_THREADS
    st = dds_sample(p->handle, &a, (dds_stream)stream);
    Py_END_ALLOW_THREADS
    if (st != DDS_OK) {
      dds_py_raise(st);
      goto done;
    }
    result = PyTuple_New(8);
    if (!result) goto done;
    for (int j = 0; j < 8; ++j) {
      PyObject* o = outs[j] ? outs[j] : Py_None;
      Py_INCREF(o);
      PyTuple_SET_ITEM(result, j, o);
    }
  done:
    for (int j = 0; j < 8; ++j) Py_XDECREF(outs[j]);
    return result;
  }
  Py_RETURN_NONE;
}
%}
