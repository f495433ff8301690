// A small persistent pool of worker threads for the CPU backend (created at dds_create, joined at
// dds_destroy): run(parts, fn) calls fn(ctx, part) for part in [0, parts), part 0 on the calling
// thread, and returns when every part has finished. One run at a time (a sampler serves one call
// at a time); no allocation per run.
#ifndef DDS_SRC_CPU_POOL_H_
#define DDS_SRC_CPU_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dds {

class CpuPool {
 public:
  // `threads` >= 1 participants: the caller and threads - 1 workers.
  explicit CpuPool(int threads);
  ~CpuPool();
  CpuPool(const CpuPool&) = delete;
  CpuPool& operator=(const CpuPool&) = delete;

  int threads() const { return (int)workers_.size() + 1; }
  // Runs fn(ctx, part) for every part in [0, parts), 1 <= parts <= threads(). An exception in a
  // part is rethrown here (the first one) after all parts have finished.
  void run(int parts, void (*fn)(void*, int), void* ctx);

 private:
  void worker(int part);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int parts_ = 0;
  int pending_ = 0;
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace dds

#endif  // DDS_SRC_CPU_POOL_H_
