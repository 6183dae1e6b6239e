#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace edgert::cpu {

namespace {

// Spinning this long before sleeping keeps the wake-up cost off back-to-back nodes (tens of
// microseconds through a futex) without burning a core between inferences.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// An aarch64 build that reads an x86 host's /proc/cpuinfo runs under user-mode emulation
// (qemu-aarch64-static, as the cross-build tests do), where qemu 7.2 hangs in pthread_create
// for dynamically linked guests: there the pool never starts a worker, whatever is asked.
bool emulated_on_another_architecture() {
#if defined(__aarch64__)
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[256];
  bool x86 = false;
  for (int i = 0; i < 8 && std::fgets(line, sizeof line, f); ++i)
    x86 = x86 || std::strncmp(line, "vendor_id", 9) == 0;
  std::fclose(f);
  return x86;
#else
  return false;
#endif
}

}  // namespace

int default_thread_count() {
  if (const char* env = std::getenv("EDGERT_CPU_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  int n = static_cast<int>(affinity_cpus().size());
  if (n < 1) n = static_cast<int>(std::thread::hardware_concurrency());
  return n < 1 ? 1 : n;
}

struct ThreadPool::State {
  std::mutex mutex;
  // Held by the caller whose job the workers run. The pool is process-wide and hosts may run
  // several engines at once (edgertd: one worker per pipeline, plus a swap's warm-up), so a
  // caller that finds it taken runs its tasks itself instead of waiting or racing.
  std::mutex owner;
  std::condition_variable wake;
  std::vector<std::thread> workers;
  std::vector<int> cpus;  // the affinity mask at creation, for pinning
  bool stopping = false;

  // The current job; rewritten only under `mutex` while no worker is checked in (busy == 0).
  std::atomic<uint64_t> generation{0};
  void (*fn)(void*, int64_t, int) = nullptr;
  void* ctx = nullptr;
  int64_t count = 0;
  int max_threads = 1;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> remaining{0};
  std::atomic<int> busy{0};

  void run_tasks(int thread) {
    for (;;) {
      const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= count) return;
      fn(ctx, t, thread);
      remaining.fetch_sub(1, std::memory_order_release);
    }
  }

  void worker_loop(int thread) {
    uint64_t seen = generation.load(std::memory_order_acquire);
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      while (generation.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until)
        for (int i = 0; i < 64; ++i) cpu_relax();
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation.load(std::memory_order_relaxed) != seen; });
        if (stopping) return;
        seen = generation.load(std::memory_order_relaxed);
        if (thread >= max_threads) continue;
        busy.fetch_add(1, std::memory_order_relaxed);
      }
      run_tasks(thread);
      busy.fetch_sub(1, std::memory_order_release);
    }
  }
};

ThreadPool& ThreadPool::instance() {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

ThreadPool::ThreadPool() : state_(new State) {
  state_->cpus = affinity_cpus();
  start_workers(default_thread_count(), false);
}

void ThreadPool::configure(int num_threads, bool pin) {
  if (num_threads <= 0) num_threads = default_thread_count();
  // Waits for a job in flight: its workers must not be stopped under it.
  std::lock_guard<std::mutex> owner(state_->owner);
  stop_workers();
  start_workers(num_threads, pin);
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  for (std::thread& t : state_->workers) t.join();
  state_->workers.clear();
  state_->stopping = false;
}

void ThreadPool::start_workers(int count, bool pin) {
  static const bool emulated = emulated_on_another_architecture();
  num_threads_ = count < 1 || emulated ? 1 : count;
  for (int i = 1; i < num_threads_; ++i) {
    state_->workers.emplace_back([this, i] { state_->worker_loop(i); });
    if (pin && !state_->cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(state_->cpus[static_cast<size_t>(i) % state_->cpus.size()], &set);
      pthread_setaffinity_np(state_->workers.back().native_handle(), sizeof set, &set);
    }
  }
}

void ThreadPool::run(int64_t count, int max_threads, void (*fn)(void*, int64_t, int), void* ctx) {
  State& s = *state_;
  std::unique_lock<std::mutex> owner(s.owner, std::try_to_lock);
  if (!owner.owns_lock()) {
    for (int64_t t = 0; t < count; ++t) fn(ctx, t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    // A worker that checked in late for the previous job may still be leaving it.
    while (s.busy.load(std::memory_order_acquire) != 0) cpu_relax();
    s.fn = fn;
    s.ctx = ctx;
    s.count = count;
    s.max_threads = max_threads;
    s.next.store(0, std::memory_order_relaxed);
    s.remaining.store(count, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.wake.notify_all();
  s.run_tasks(0);
  // The last tasks are running on workers. Spin briefly, then yield: on an oversubscribed
  // machine the worker being waited for may need this very core.
  for (int spins = 0; s.remaining.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace edgert::cpu
