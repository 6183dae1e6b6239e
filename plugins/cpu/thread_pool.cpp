#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
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

// The straggler guard (ThreadPool::run). A worker that claimed a task and then lost its core to
// another process holds its job up until the scheduler runs it again: with the other core busy
// (a compiler), two threads ran mobilenet_v2 in 7-8 ms where one thread takes 5. Over a window
// of jobs the caller adds up the jobs' real time and an estimate of their time on the caller
// alone (its busy time over its share of the tasks); when alone would have been faster by the
// margin in two windows in a row (one alone is a worker's wake-up, not a busy core), jobs run on
// the caller alone for a while, then the workers are tried again; each time they fail again
// the while doubles.
constexpr int kGuardWindow = 32;         // jobs per decision
constexpr double kAloneMargin = 0.85;    // alone must be at least 15% faster
constexpr auto kFirstAlonePeriod = std::chrono::milliseconds(25);
constexpr auto kLongestAlonePeriod = std::chrono::milliseconds(800);

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

  // The current job: its fields rewritten only under `mutex` while no worker is checked in
  // (busy == 0), then its generation published (ThreadPool::run). Spinning workers read
  // `generation` all the time, every thread claims tasks from its range (or `next`) and the
  // caller waits on `remaining`: each on a cache line of its own, so one thread's polling does
  // not take the line another is writing.
  alignas(64) std::atomic<uint64_t> generation{0};
  void (*fn)(void*, int64_t, int) = nullptr;
  void* ctx = nullptr;
  int64_t count = 0;
  int max_threads = 1;
  // Tasks are dealt out in owned ranges: participating thread t owns [t count / P, (t + 1) count
  // / P) of the P threads the job may use, runs it from the front, then takes tasks still
  // unclaimed from the back of the others' ranges. A kernel's thread keeps to its part of the
  // data, split alike from one kernel to the next (a tall tile's rows, then the depthwise over
  // the same channels), and reads what it wrote from its own cache; a thread whose core is taken
  // by another process (a shared vCPU runs at half speed) has the end of its range done by the
  // others. With a shared counter either thread could take any task; with fixed halves a slow
  // core held every job up. More than kMaxOwners threads use the counter (`next`).
  static constexpr int kMaxOwners = 64;
  int owners = 0;
  alignas(64) std::atomic<int64_t> next{0};
  // One range a thread, each on a cache line of its own: the next task from the front in the
  // low 32 bits, the end (exclusive) in the high 32. The owner moves the front with one
  // fetch_add; others move the end down by compare-exchange. Both halves in one word, a task is
  // taken once: whichever change comes first leaves front >= end for the other.
  struct alignas(64) OwnedRange {
    std::atomic<uint64_t> span{0};
  };
  OwnedRange ranges[kMaxOwners];
  alignas(64) std::atomic<int64_t> remaining{0};
  alignas(64) std::atomic<int> busy{0};
  // Workers inside the mutex on their way to (or in) the condition variable's wait: the caller
  // publishes a job's generation outside the mutex and passes through the mutex only when one
  // may be there (see ThreadPool::run).
  std::atomic<int> sleepers{0};

  // The straggler guard's window; only the caller holding `owner` touches these.
  int window_jobs = 0, slow_windows = 0;
  double window_real = 0, window_alone = 0;  // nanoseconds
  std::chrono::steady_clock::time_point alone_until{};
  std::chrono::milliseconds alone_period = kFirstAlonePeriod;

  static constexpr uint64_t kEndOne = uint64_t{1} << 32;
  static uint64_t span_of(int64_t begin, int64_t end) {
    return static_cast<uint64_t>(end) << 32 | static_cast<uint64_t>(begin);
  }
  // The next task of `owner`'s range from the front, or -1 when none is left. (A failed take
  // moves the front past the end; each thread fails once a job, far from the end's bits.)
  int64_t take_front(int owner) {
    const uint64_t v = ranges[owner].span.fetch_add(1, std::memory_order_acq_rel);
    const uint64_t front = v & 0xFFFFFFFFu, end = v >> 32;
    return front < end ? static_cast<int64_t>(front) : -1;
  }
  // The last unclaimed task of `owner`'s range, or -1.
  int64_t take_back(int owner) {
    uint64_t v = ranges[owner].span.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t front = v & 0xFFFFFFFFu, end = v >> 32;
      if (front >= end) return -1;
      if (ranges[owner].span.compare_exchange_weak(v, v - kEndOne, std::memory_order_acq_rel))
        return static_cast<int64_t>(end - 1);
    }
  }
  void run_task(int64_t t, int thread) {
    fn(ctx, t, thread);
    remaining.fetch_sub(1, std::memory_order_release);
  }

  // Runs tasks until none is left to claim; returns how many this thread ran.
  int64_t run_tasks(int thread) {
    int64_t ran = 0;
    if (owners == 0) {
      for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < count; ++ran) run_task(t, thread);
      return ran;
    }
    if (thread < owners)
      for (int64_t t; (t = take_front(thread)) >= 0; ++ran) run_task(t, thread);
    for (int i = 1; i < owners; ++i) {
      const int victim = (thread + i) % owners;
      for (int64_t t; (t = take_back(victim)) >= 0; ++ran) run_task(t, thread);
    }
    return ran;
  }

  // One finished job: `tasks` in all, `mine` of them on the caller, which was busy for `own` of
  // the job's `real` time.
  void account(int64_t tasks, int64_t mine, std::chrono::nanoseconds own, std::chrono::nanoseconds real,
               std::chrono::steady_clock::time_point end) {
    if (mine <= 0) return;
    window_real += static_cast<double>(real.count());
    window_alone += static_cast<double>(own.count()) * static_cast<double>(tasks) / static_cast<double>(mine);
    if (++window_jobs < kGuardWindow) return;
    if (window_alone >= kAloneMargin * window_real) {
      slow_windows = 0;
      alone_period = kFirstAlonePeriod;
    } else if (++slow_windows == 2) {
      alone_until = end + alone_period;
      alone_period = std::min(2 * alone_period, std::chrono::milliseconds(kLongestAlonePeriod));
      slow_windows = 0;
    }
    window_jobs = 0;
    window_real = window_alone = 0;
  }

  // `seen`: the generation when the worker was made. Read by the thread itself once it ran, a
  // job published between configure() and the thread's first instructions looked old to it,
  // and that job went without it.
  void worker_loop(int thread, uint64_t seen) {
    for (;;) {
      // The generation is looked at after every pause (28 ns on this project's x86 machines; 64
      // of them between looks kept a job waiting 0.9 us on average for its worker, 2.2 us a job
      // in all), the clock only every 64.
      const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      for (int i = 1; generation.load(std::memory_order_acquire) == seen; ++i) {
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() >= spin_until) break;
      }
      {
        std::unique_lock<std::mutex> lock(mutex);
        // seq_cst with the caller's generation increment and sleepers load: either this wait
        // sees the new generation or the caller sees this sleeper and notifies under the mutex.
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        wake.wait(lock, [&] { return stopping || generation.load(std::memory_order_seq_cst) != seen; });
        sleepers.fetch_sub(1, std::memory_order_relaxed);
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
    const uint64_t generation = state_->generation.load(std::memory_order_acquire);  // no job runs now
    state_->workers.emplace_back([this, i, generation] { state_->worker_loop(i, generation); });
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
  const auto start = std::chrono::steady_clock::now();
  if (!owner.owns_lock() || start < s.alone_until) {
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
    const int participants = std::min(max_threads, num_threads_);
    s.owners = participants <= State::kMaxOwners && count < (int64_t{1} << 31) ? participants : 0;
    s.next.store(0, std::memory_order_relaxed);
    for (int t = 0; t < s.owners; ++t)
      s.ranges[t].span.store(State::span_of(t * count / s.owners, (t + 1) * count / s.owners),
                             std::memory_order_relaxed);
    s.remaining.store(count, std::memory_order_relaxed);
  }
  // Published after the mutex is free: a spinning worker that saw the new generation while the
  // caller still held it went to sleep in the futex of that mutex, microseconds per job. A
  // worker between its check of the generation and its wait holds the mutex: passing through it
  // before notifying means that worker is waiting by then (no lost wake-up).
  s.generation.fetch_add(1, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> pass(s.mutex);
  }
  s.wake.notify_all();
  const int64_t mine = s.run_tasks(0);
  const auto own_done = std::chrono::steady_clock::now();
  // The last tasks are running on workers. Spin briefly, then yield: on an oversubscribed
  // machine the worker being waited for may need this very core.
  for (int spins = 0; s.remaining.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  const auto end = std::chrono::steady_clock::now();
  s.account(count, mine, own_done - start, end - start, end);
}

}  // namespace edgert::cpu
