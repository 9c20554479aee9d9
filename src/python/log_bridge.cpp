// The native log through Python's logging (docs/python.md "Logging"). zeus_cpp._logging attaches a
// Python function that emits one line as a logging record; the native loggers' levels follow the
// Python loggers' effective levels (set by zeus_cpp._logging), so a disabled level is not even
// formatted.
//
// A line logged by a thread that holds the GIL is emitted there and then. Any other thread (the
// power sampler, the RAPL tracker, a call that released the GIL) never waits for the GIL: its line
// is queued (bounded) and a delivery thread of this file, which holds no other lock, takes the GIL
// and emits it. zeus_cpp._logging detaches at exit (atexit, before the interpreter finalizes): the
// delivery thread is joined and every later line goes to stderr as before.
#include <fmt/format.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "bindings.hpp"
#include "common/log.hpp"

namespace zeus::python {
namespace {

// Lines waiting for the delivery thread; beyond this the newest are counted and dropped.
constexpr std::size_t kMaxQueuedLines = 10000;

struct Line {
  std::string module;
  spdlog::level::level_enum level;
  std::string text;
  unsigned long thread;
};

void write_stderr(spdlog::level::level_enum level, std::string_view text) {
  const spdlog::string_view_t letter = spdlog::level::to_short_c_str(level);
  std::fprintf(stderr, "[zeus %.*s] %.*s\n", static_cast<int>(letter.size()), letter.data(),
               static_cast<int>(text.size()), text.data());
}

class Bridge {
 public:
  // Needs the GIL.
  void attach(py::object emit) {
    detach();
    {
      std::lock_guard lock(mutex_);
      stopping_ = false;
    }
    emit_ = emit.release().ptr();
    set_log_forward([this](std::string_view module, spdlog::level::level_enum level,
                           std::string_view text) { forward(module, level, text); });
  }

  // Needs the GIL; releases it while the delivery thread finishes.
  void detach() {
    set_log_forward({});
    std::thread* worker = nullptr;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      worker = std::exchange(worker_, nullptr);
    }
    wake_.notify_all();
    if (worker != nullptr) {
      py::gil_scoped_release released;
      worker->join();
      delete worker;
    }
    if (emit_ != nullptr) {
      Py_DECREF(emit_);
      emit_ = nullptr;
    }
  }

  // Waits (GIL released) until the queued lines are emitted, or `timeout_s` passes. Needs the GIL.
  bool flush(double timeout_s) {
    py::gil_scoped_release released;
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                          [this] { return queue_.empty() && !busy_; });
  }

  // After fork() the child has no delivery thread and must not wait for one.
  void forget_worker_after_fork() {
    worker_ = nullptr;  // the parent's std::thread object is left alone (leaked in the child)
    queue_.clear();
    busy_ = false;
  }

  std::mutex& mutex() { return mutex_; }

 private:
  void forward(std::string_view module, spdlog::level::level_enum level, std::string_view text) {
    if (PyGILState_Check() != 0 && emit_ != nullptr) {
      emit(module, level, text, 0);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        write_stderr(level, text);
        return;
      }
      if (queue_.size() >= kMaxQueuedLines) {
        ++dropped_;
        return;
      }
      queue_.push_back(Line{std::string(module), level, std::string(text),
                            static_cast<unsigned long>(pthread_self())});
      if (worker_ == nullptr) {
        worker_ = new std::thread([this] { deliver(); });
      }
    }
    wake_.notify_one();
  }

  // With the GIL. Never lets a Python error out (a handler's own errors are logging's business).
  void emit(std::string_view module, spdlog::level::level_enum level, std::string_view text,
            unsigned long thread) {
    PyObject* error_type = nullptr;
    PyObject* error_value = nullptr;
    PyObject* error_trace = nullptr;
    PyErr_Fetch(&error_type, &error_value, &error_trace);  // a line logged while raising
    try {
      const py::handle function(emit_);
      function(py::str(module.data(), module.size()), static_cast<int>(level),
               py::str(text.data(), text.size()), thread);
    } catch (py::error_already_set& error) {
      error.discard_as_unraisable("zeus_cpp: emitting a native log line");
    } catch (...) {
      write_stderr(level, text);
    }
    PyErr_Restore(error_type, error_value, error_trace);
  }

  void deliver() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        break;  // stopping, and nothing left
      }
      std::deque<Line> lines = std::exchange(queue_, {});
      const std::size_t dropped = std::exchange(dropped_, 0);
      busy_ = true;
      lock.unlock();
      {
        py::gil_scoped_acquire gil;
        for (const Line& line : lines) {
          emit(line.module, line.level, line.text, line.thread);
        }
        if (dropped > 0) {
          emit("zeus_cpp", spdlog::level::warn,
               fmt::format("{} native log line(s) dropped: more than {} were waiting for Python",
                           dropped, kMaxQueuedLines),
               0);
        }
      }
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
    busy_ = false;
    idle_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Line> queue_;
  std::size_t dropped_ = 0;
  bool busy_ = false;
  bool stopping_ = true;
  std::thread* worker_ = nullptr;
  PyObject* emit_ = nullptr;  // touched only with the GIL
};

// Never destroyed: native threads may log while the process exits.
Bridge& bridge() {
  static Bridge* const instance = [] {
    auto* created = new Bridge();
    pthread_atfork([] { bridge().mutex().lock(); }, [] { bridge().mutex().unlock(); },
                   [] {
                     bridge().mutex().unlock();
                     bridge().forget_worker_after_fork();
                   });
    return created;
  }();
  return *instance;
}

spdlog::level::level_enum native_level(int level) {
  if (level < spdlog::level::trace || level > spdlog::level::off) {
    throw py::value_error(fmt::format("not a native log level: {}", level));
  }
  return static_cast<spdlog::level::level_enum>(level);
}

}  // namespace

void bind_log(py::module_& module) {
  module.def(
      "_log_attach", [](py::object emit) { bridge().attach(std::move(emit)); }, py::arg("emit"),
      "Route the native log lines to emit(module, level, text, native_thread_id) "
      "(zeus_cpp._logging).");
  module.def(
      "_log_detach", [] { bridge().detach(); },
      "Back to stderr: waits for the delivery thread (atexit).");
  module.def(
      "_log_flush", [](double timeout_s) { return bridge().flush(timeout_s); },
      py::arg("timeout_s") = 5.0, "Wait until the lines of native threads are emitted.");
  module.def("_log_modules", [] {
    py::list names;
    for (const std::string_view name : log_module_names()) {
      names.append(py::str(name.data(), name.size()));
    }
    return names;
  });
  module.def(
      "_log_set_level",
      [](const std::string& name, int level) { module_log(name).set_level(native_level(level)); },
      py::arg("module"), py::arg("level"));
  module.def(
      "_log_level",
      [](const std::string& name) { return static_cast<int>(module_log(name).level()); },
      py::arg("module"));
  // For the tests: logs `text` at `level` to the module logger `name`, from this thread or from a
  // new native thread joined with the GIL held (a native thread logging while Python waits), or,
  // with `detached_lines`, from a detached native thread that logs that many lines 1 ms apart
  // (one that may outlive the interpreter).
  module.def(
      "_log_for_test",
      [](const std::string& name, int level, const std::string& text, bool native_thread,
         int detached_lines) {
        const spdlog::level::level_enum native = native_level(level);
        spdlog::logger& logger = module_log(name);
        if (detached_lines > 0) {
          std::thread([&logger, native, text, detached_lines] {
            for (int i = 0; i < detached_lines; ++i) {
              logger.log(native, "{} {}", text, i);
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
          }).detach();
        } else if (native_thread) {
          std::thread([&] { logger.log(native, "{}", text); }).join();
        } else {
          logger.log(native, "{}", text);
        }
      },
      py::arg("module"), py::arg("level"), py::arg("text"), py::arg("native_thread") = false,
      py::arg("detached_lines") = 0);
}

}  // namespace zeus::python
