#include "background_worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace edgert::daemon {

BackgroundWorker::BackgroundWorker(sd_event* loop) {
  done_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (done_fd_ < 0) throw std::runtime_error(std::string("eventfd for the background worker: ") + strerror(errno));
  int r = sd_event_add_io(loop, &done_source_, done_fd_, EPOLLIN, &BackgroundWorker::on_done, this);
  if (r < 0) {
    close(done_fd_);
    throw std::runtime_error(std::string("event source for the background worker: ") + strerror(-r));
  }
  thread_ = std::thread(&BackgroundWorker::thread_main, this);
}

BackgroundWorker::~BackgroundWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    pending_.clear();
  }
  wake_.notify_all();
  thread_.join();
  sd_event_source_disable_unref(done_source_);
  close(done_fd_);
}

void BackgroundWorker::run(Work work, Then then) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(Job{std::move(work), std::move(then), nullptr});
  }
  wake_.notify_one();
}

void BackgroundWorker::thread_main() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;
      job = std::move(pending_.front());
      pending_.pop_front();
    }
    try {
      job.work();
    } catch (...) {
      job.error = std::current_exception();
    }
    job.work = nullptr;  // what the work captured is released here, off the loop
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(std::move(job));
    }
    uint64_t one = 1;
    (void)!write(done_fd_, &one, sizeof one);
  }
}

int BackgroundWorker::on_done(sd_event_source*, int fd, uint32_t, void* userdata) {
  auto* self = static_cast<BackgroundWorker*>(userdata);
  uint64_t count;
  (void)!read(fd, &count, sizeof count);
  std::deque<Job> done;
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    done.swap(self->finished_);
  }
  for (Job& job : done) job.then(job.error);
  return 0;
}

}  // namespace edgert::daemon
