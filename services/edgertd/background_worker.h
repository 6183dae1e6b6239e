// One thread for the slow parts of control commands (copying, hashing and loading engines,
// warm-up and self-test runs), so that the event loop keeps feeding frames meanwhile. Jobs run
// in the order given; each job's continuation runs back on the loop thread.
#pragma once

#include <systemd/sd-event.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace edgert::daemon {

class BackgroundWorker {
 public:
  using Work = std::function<void()>;
  // Receives what `work` threw, or null.
  using Then = std::function<void(std::exception_ptr)>;

  // Throws std::runtime_error when the eventfd or its event source cannot be created.
  explicit BackgroundWorker(sd_event* loop);
  // Waits for the running job; continuations not yet delivered are dropped.
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Call from the loop thread.
  void run(Work work, Then then);

 private:
  struct Job {
    Work work;
    Then then;
    std::exception_ptr error;
  };
  void thread_main();
  static int on_done(sd_event_source* s, int fd, uint32_t revents, void* userdata);

  int done_fd_ = -1;
  sd_event_source* done_source_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> pending_, finished_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace edgert::daemon
