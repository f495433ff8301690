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
