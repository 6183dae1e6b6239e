// The CPU plugin's process-wide thread pool: persistent workers that kernels split their work
// over, the calling thread included (it runs tasks too, so 1 thread means no worker at all).
//
// Callers on several threads at once are fine: the first gets the workers, the others run their
// tasks on their own thread (thread index 0 of their own workspace); configure() is never
// called while a kernel runs (plugin ABI: the host calls configure between runs).
// parallel_for does not allocate, so execute() may call it. Workers live until the process
// exits: the pool is never destroyed, as the plugin is never dlclosed (plugin_entry.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

namespace edgert::cpu {

class ThreadPool {
 public:
  // The pool every kernel uses. Built on first use with the default thread count: the
  // EDGERT_CPU_THREADS environment variable when set (> 0), else the number of CPUs in the
  // process's affinity mask. Never destroyed (see edgert_plugin_entry).
  static ThreadPool& instance();

  // Threads a kernel may use, the caller's included; 0 = the default above (always 1 for an
  // aarch64 build under x86 user-mode emulation: see thread_pool.cpp). pin: worker i is
  // pinned to the i-th CPU of the affinity mask the process had when the pool was created (the
  // caller, thread 0, is left alone: it belongs to the host).
  void configure(int num_threads, bool pin);
  int num_threads() const { return num_threads_; }

  // Calls fn(ctx, task, thread) once for every task in [0, count), spread over at most
  // max_threads threads; thread is in [0, min(num_threads(), max_threads)) and tells which
  // per-thread scratch a task may use (a kernel sized its workspace for some thread count in
  // prepare; the pool may have grown since). Thread t of the P taking part owns tasks
  // [t count / P, (t + 1) count / P) and runs them in order; tasks of a range its owner has not
  // reached yet are taken from the range's end by threads done with their own. A kernel that
  // splits its data alike from one job to the next (same count) so finds on each thread what
  // that thread wrote; one that wants its parts to end at given places makes count a multiple
  // of P. Returns when every task has finished. While the
  // workers keep the caller waiting longer than it would take alone (their cores busy with
  // other processes), jobs run on the caller alone for a while (thread_pool.cpp: the guard).
  void run(int64_t count, int max_threads, void (*fn)(void* ctx, int64_t task, int thread), void* ctx);

  template <typename Fn>
  void parallel_for(int64_t count, Fn&& fn, int max_threads = 1 << 30) {
    if (count <= 0) return;
    if (count == 1 || num_threads_ == 1 || max_threads <= 1) {
      for (int64_t t = 0; t < count; ++t) fn(t, 0);
      return;
    }
    using F = std::remove_reference_t<Fn>;
    run(count, max_threads, [](void* ctx, int64_t task, int thread) { (*static_cast<F*>(ctx))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // parallel_for over [0, count) cut into at most kRangesPerThread ranges a thread (or
  // `per_thread`, when > 0): calls fn(begin, end, thread). For many small items (a 7x7 plane
  // each): every task is one claim on a shared counter, and with a task per item two threads
  // spent their time passing that counter's cache line back and forth.
  template <typename Fn>
  void parallel_ranges(int64_t count, Fn&& fn, int max_threads = 1 << 30, int per_thread = 0) {
    const int64_t threads = num_threads_ < max_threads ? num_threads_ : max_threads;
    const int64_t rpt = per_thread > 0 ? per_thread : kRangesPerThread;
    const int64_t tasks = count < rpt * threads ? count : rpt * threads;
    parallel_for(
        tasks, [&](int64_t t, int thread) { fn(t * count / tasks, (t + 1) * count / tasks, thread); }, max_threads);
  }
  // A few ranges a thread, so one that loses its core holds up less of the work.
  static constexpr int64_t kRangesPerThread = 4;

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  ThreadPool();
  ~ThreadPool() = delete;
  struct State;
  void stop_workers();
  void start_workers(int count, bool pin);

  State* state_;
  int num_threads_ = 1;
};

// The default thread count described at ThreadPool::instance().
int default_thread_count();

}  // namespace edgert::cpu
