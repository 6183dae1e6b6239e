// The CPU plugin's thread pool on its own (built from plugins/cpu/thread_pool.cpp): the guard
// that runs jobs on the caller alone while a worker keeps it waiting (its core busy elsewhere).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace edgert::cpu {
namespace {

using namespace std::chrono_literals;

void busy_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// One job of 8 tasks: on the caller each takes `caller`, on the worker `worker` (slept, as a
// thread that lost its core). Returns how many tasks the worker ran.
int64_t job(std::chrono::microseconds caller, std::chrono::microseconds worker) {
  std::atomic<int64_t> on_worker{0};
  ThreadPool::instance().parallel_for(8, [&](int64_t, int thread) {
    if (thread == 0) {
      busy_for(caller);
    } else {
      on_worker.fetch_add(1);
      std::this_thread::sleep_for(worker);
    }
  });
  return on_worker.load();
}

TEST(ThreadPoolGuard, AWorkerThatKeepsTheCallerWaitingIsLeftOutForAWhileThenTriedAgain) {
  ThreadPool& pool = ThreadPool::instance();
  pool.configure(2, false);
  ASSERT_EQ(pool.num_threads(), 2);
  // A worker whose tasks take 3 ms against 20 us on the caller: each job waits on it. Within
  // a few windows of the guard (two slow ones in a row decide) the jobs run on the caller
  // alone: 60 jobs in a row (10 ms, inside the first 25 ms period) without the worker. Without
  // the guard the worker misses a job now and then (a dozen in a row seen: woken late, or its
  // core taken), not 60.
  // The worker first: a thread just started by configure takes a few milliseconds to join.
  bool joined = false;
  for (int i = 0; i < 2000 && !joined; ++i) joined = job(20us, 3ms) > 0;
  ASSERT_TRUE(joined) << "the worker never ran a task";
  int alone_in_a_row = 0;
  for (int i = 0; i < 600 && alone_in_a_row < 60; ++i) alone_in_a_row = job(20us, 3ms) == 0 ? alone_in_a_row + 1 : 0;
  EXPECT_EQ(alone_in_a_row, 60) << "the jobs kept waiting on the slow worker";
  // The period (25 ms the first time) over, a worker as fast as the caller is used again.
  std::this_thread::sleep_for(100ms);
  int64_t worker_tasks = 0;
  for (int i = 0; i < 64 && worker_tasks == 0; ++i) worker_tasks += job(200us, 200us);
  EXPECT_GT(worker_tasks, 0) << "the worker was never tried again";
  pool.configure(0, false);
}

// One job of two tasks that needs both threads: the task taken first (by the caller, or by the
// worker) waits until the other has started on another thread, up to 500 ms. True when it did:
// the second task runs on the other thread only if the worker came; on the caller it would
// start after the first gave up. Each task also works 20 us, as a kernel's would: tasks of no
// work made the straggler guard's estimate of the caller alone (its busy time times tasks over
// its share) near zero whenever the worker took the first task, and the guard then ran jobs
// alone.
bool job_with_both_threads() {
  std::atomic<int> started{0};
  std::atomic<int> first_thread{-1};
  bool both = false;
  ThreadPool::instance().parallel_for(2, [&](int64_t, int thread) {
    int expected = -1;
    const bool first = first_thread.compare_exchange_strong(expected, thread);
    started.fetch_add(1);
    busy_for(20us);
    if (first) {
      const auto until = std::chrono::steady_clock::now() + 500ms;
      while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      both = started.load() == 2;
    }
  });
  return both;
}

// Workers spin for a while after a job, then sleep on a condition variable; a job publishes its
// generation outside the pool's mutex, so a worker that checked the generation and is about to
// sleep must still be woken (ThreadPool::run). Jobs here start after gaps around the spin time,
// and each needs the worker (job_with_both_threads): a lost wake-up leaves the worker asleep.
TEST(ThreadPoolWake, AWorkerGoneToSleepJoinsTheNextJob) {
  ThreadPool& pool = ThreadPool::instance();
  pool.configure(2, false);
  ASSERT_EQ(pool.num_threads(), 2);
  int joined = 0, jobs = 0;
  for (int gap_us = 100; gap_us <= 400; gap_us += 3, ++jobs) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    joined += job_with_both_threads();
  }
  EXPECT_EQ(joined, jobs) << "the worker missed " << jobs - joined << " of " << jobs << " jobs";
  pool.configure(0, false);
}

// A worker learns the job generation it starts from when configure() makes it, not when its
// thread first runs: read by the thread, a job published before the thread got a core looked
// old to it, so the first job after every configure() (an engine load) ran without the worker.
TEST(ThreadPoolWake, ANewWorkerJoinsTheFirstJobAfterConfigure) {
  ThreadPool& pool = ThreadPool::instance();
  int joined = 0;
  constexpr int kTries = 20;
  for (int i = 0; i < kTries; ++i) {
    pool.configure(2, false);
    joined += job_with_both_threads();
  }
  EXPECT_EQ(joined, kTries) << "the new worker missed the first job " << kTries - joined << " times";
  pool.configure(0, false);
}

// A job of one task a thread runs task t on thread t (the next kernel, split alike, then reads
// what the same thread wrote); each task waits for the other to start, so both threads are in.
// With tasks taken from a shared counter, the worker took task 0 whenever it came first.
TEST(ThreadPoolAffinity, OneTaskAThreadRunsTaskTOnThreadT) {
  ThreadPool& pool = ThreadPool::instance();
  pool.configure(2, false);
  int both = 0, matched = 0;
  for (int i = 0; i < 200; ++i) {
    std::atomic<int> started{0};
    std::atomic<int> thread_of[2] = {-1, -1};
    pool.parallel_for(2, [&](int64_t task, int thread) {
      thread_of[task].store(thread);
      started.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + 500ms;
      while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
    if (thread_of[0].load() == thread_of[1].load()) continue;  // the worker came late: the caller ran both
    ++both;
    matched += thread_of[0].load() == 0 && thread_of[1].load() == 1;
  }
  ASSERT_GT(both, 100) << "the worker joined too few jobs to judge";
  EXPECT_EQ(matched, both) << "tasks ran on the other thread in " << both - matched << " of " << both << " jobs";
  pool.configure(0, false);
}

// Tasks run in one job of 8 on 2 threads, in the order each thread took them. `hold_task`, when
// >= 0, waits (up to 500 ms) until `hold_until` tasks ran on the other thread. Every task first
// waits for both threads to have started one; false when the worker never came (the caller ran
// all 8).
struct Taken {
  std::vector<int64_t> on[2];
};
bool job_of_eight(Taken& taken, int64_t hold_task = -1, int hold_until = 0) {
  std::atomic<int> started{0};
  std::mutex mutex;
  std::atomic<int> ran[2] = {0, 0};
  ThreadPool::instance().parallel_for(8, [&](int64_t task, int thread) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (taken.on[thread].empty()) started.fetch_add(1);
      taken.on[thread].push_back(task);
    }
    const auto until = std::chrono::steady_clock::now() + 500ms;
    while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (task == hold_task)
      while (ran[1 - thread].load() < hold_until && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    busy_for(20us);
    ran[thread].fetch_add(1);
  });
  return !taken.on[1].empty();
}

// Thread t owns tasks [4t, 4t + 4) of 8 and starts at the front of its range, in order; tasks
// it takes from the other range come from that range's end. With a shared counter the worker's
// first task was whichever came next (1, or 0 when it came first).
TEST(ThreadPoolOwnedRanges, EachThreadStartsAtTheFrontOfItsOwnRange) {
  ThreadPool& pool = ThreadPool::instance();
  pool.configure(2, false);
  int both = 0;
  for (int i = 0; i < 100; ++i) {
    Taken taken;
    if (!job_of_eight(taken)) continue;
    ++both;
    for (int t = 0; t < 2; ++t) {
      const std::vector<int64_t>& on = taken.on[t];
      ASSERT_EQ(on.front(), 4 * t) << "thread " << t << " started elsewhere";
      size_t own = 0;
      while (own < on.size() && on[own] / 4 == t) ++own;
      for (size_t j = 1; j < own; ++j) EXPECT_EQ(on[j], on[j - 1] + 1) << "thread " << t << "'s own tasks out of order";
      for (size_t j = own; j < on.size(); ++j)
        EXPECT_EQ(on[j], j == own ? 4 * (1 - t) + 3 : on[j - 1] - 1) << "thread " << t << " took another's tasks not from the end";
    }
  }
  ASSERT_GT(both, 50) << "the worker joined too few jobs to judge";
  pool.configure(0, false);
}

// A thread held up in its first task (its core taken) has the rest of its range done by the other
// thread, from the end: the caller runs 0-3, then 7, 6, 5 while the worker is held in task 4
// until three tasks ran on the caller... after its own four. With fixed halves the caller
// would wait; with a shared counter the worker's task would not be 4.
TEST(ThreadPoolOwnedRanges, AThreadLeftBehindHasTheEndOfItsRangeTakenByTheOther) {
  ThreadPool& pool = ThreadPool::instance();
  pool.configure(2, false);
  int judged = 0;
  for (int i = 0; i < 100 && judged < 20; ++i) {
    Taken taken;
    if (!job_of_eight(taken, 4, 7)) continue;
    if (taken.on[1].front() != 4) {
      ADD_FAILURE() << "the worker's first task was " << taken.on[1].front();
      break;
    }
    ++judged;
    EXPECT_EQ(taken.on[0], (std::vector<int64_t>{0, 1, 2, 3, 7, 6, 5}));
    EXPECT_EQ(taken.on[1], (std::vector<int64_t>{4}));
  }
  EXPECT_EQ(judged, 20) << "the worker joined too few jobs to judge";
  pool.configure(0, false);
}

}  // namespace
}  // namespace edgert::cpu
