// Shared main for the GPU doctest executables (tests/gpu/*.cu).
//
// Include this header FIRST and in exactly one translation unit per test executable (each
// tests/gpu/*.cu is its own executable). It implements doctest and provides main(): when no CUDA
// device is visible it prints "skipped: no CUDA device" and returns 77, which CTest reports as
// skipped (SKIP_RETURN_CODE 77 in tests/CMakeLists.txt). GPU tests do not link dds_test_main.
//
// Helpers for the tests: DDS_CUDA_CHECK(expr) fails the current test on a CUDA error;
// CapturedGraph captures a CUDA graph and replays it.
#pragma once

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <cstdio>

#define DDS_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    cudaError_t dds_cuda_check_err_ = (expr);                                             \
    if (dds_cuda_check_err_ != cudaSuccess)                                               \
      FAIL(#expr << " failed: " << cudaGetErrorString(dds_cuda_check_err_));              \
  } while (0)

// A CUDA graph of the work fn() queues on stream `st` (captured in `mode`, then instantiated),
// launched on `st` by launch() as often as a test replays it; destroyed with the object. A CUDA
// error fails the current test. (fn's own checks run during the capture: a call whose status
// is checked after the capture assigns it in fn.)
class CapturedGraph {
 public:
  template <class F>
  CapturedGraph(cudaStream_t st, F fn, cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal)
      : st_(st) {
    DDS_CUDA_CHECK(cudaStreamBeginCapture(st, mode));
    fn();
    cudaGraph_t g = nullptr;
    DDS_CUDA_CHECK(cudaStreamEndCapture(st, &g));
    DDS_CUDA_CHECK(cudaGraphInstantiate(&exec_, g, 0));
    cudaGraphDestroy(g);  // (the executable graph keeps what it needs)
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  void launch() const { DDS_CUDA_CHECK(cudaGraphLaunch(exec_, st_)); }

 private:
  cudaStream_t st_;
  cudaGraphExec_t exec_ = nullptr;
};

int main(int argc, char** argv) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
