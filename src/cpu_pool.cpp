// CpuPool (cpu_pool.h).
#include "cpu_pool.h"

namespace dds {

CpuPool::CpuPool(int threads) {
  workers_.reserve(threads > 1 ? (size_t)threads - 1 : 0);
  for (int part = 1; part < threads; ++part) workers_.emplace_back(&CpuPool::worker, this, part);
}

CpuPool::~CpuPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void CpuPool::run(int parts, void (*fn)(void*, int), void* ctx) {
  if (parts <= 1 || workers_.empty()) {
    fn(ctx, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    parts_ = parts;
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  std::exception_ptr mine;
  try {
    fn(ctx, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void CpuPool::worker(int part) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (part >= parts_) continue;
    void (*fn)(void*, int) = fn_;
    void* ctx = ctx_;
    lock.unlock();
    std::exception_ptr err;
    try {
      fn(ctx, part);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

}  // namespace dds
