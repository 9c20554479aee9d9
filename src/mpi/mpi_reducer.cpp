#include "zeus/runtime/mpi_reducer.hpp"

#include <mpi.h>

#include <string>
#include <type_traits>

#include "common/log.hpp"
#include "zeus/common/error.hpp"

namespace zeus::runtime {
namespace {

// The public header keeps communicators as plain ints (their Fortran handles).
static_assert(std::is_same_v<MPI_Fint, int>, "MpiReducer stores MPI_Fint handles as int");

struct MpiState {
  bool initialized;
  bool finalized;
};

MpiState mpi_state() {
  int initialized = 0;
  int finalized = 0;
  // Both may be called at any time, before MPI_Init and after MPI_Finalize.
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return {initialized != 0, finalized != 0};
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS || length <= 0) {
    return "unknown MPI error";
  }
  return std::string(text, static_cast<std::size_t>(length));
}

// Turns an MPI return code into a VendorError naming the call.
void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) {
    return;
  }
  throw VendorError(ErrorKind::kUnknown, "MPI", call, rc,
                    std::string(call) + " failed: " + mpi_error_text(rc) + " (MPI error code " +
                        std::to_string(rc) + ")");
}

// Throws Error(kUninitialized) unless MPI is initialised and not finalised.
void require_active(const char* what) {
  const MpiState state = mpi_state();
  if (!state.initialized) {
    throw Error(ErrorKind::kUninitialized,
                std::string(what) +
                    ": MPI is not initialised (create a zeus::MpiSession or call MPI_Init first)");
  }
  if (state.finalized) {
    throw Error(ErrorKind::kUninitialized, std::string(what) + ": MPI has already been finalised");
  }
}

int world_handle() {
  require_active("MpiReducer");
  return MPI_Comm_c2f(MPI_COMM_WORLD);
}

double allreduce(int handle, double value, MPI_Op op, const char* what) {
  require_active(what);
  double result = 0.0;
  check(MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, op, MPI_Comm_f2c(handle)), "MPI_Allreduce");
  return result;
}

}  // namespace

// ---- MpiSession ----

MpiSession::MpiSession() : MpiSession(nullptr, nullptr) {}

MpiSession::MpiSession(int* argc, char*** argv) {
  const MpiState state = mpi_state();
  if (state.finalized) {
    throw Error(ErrorKind::kUninitialized,
                "MpiSession: MPI has already been finalised and cannot be initialised again");
  }
  if (state.initialized) {
    return;  // the program (or another session) owns MPI
  }
  int provided = MPI_THREAD_SINGLE;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  owns_ = true;
  if (provided < MPI_THREAD_FUNNELED) {
    log().warn("MPI provides thread level {} only (asked for MPI_THREAD_FUNNELED)", provided);
  }
}

MpiSession::~MpiSession() {
  if (owns_ && !mpi_state().finalized) {
    MPI_Finalize();
  }
}

bool MpiSession::active() {
  const MpiState state = mpi_state();
  return state.initialized && !state.finalized;
}

// ---- MpiReducer ----

MpiReducer::MpiReducer() : MpiReducer(world_handle()) {}

MpiReducer::MpiReducer(int comm_fortran_handle) {
  require_active("MpiReducer");
  MPI_Comm comm = MPI_Comm_f2c(comm_fortran_handle);
  if (comm == MPI_COMM_NULL) {
    throw Error(ErrorKind::kInvalidArgument, "MpiReducer: the communicator is MPI_COMM_NULL");
  }
  MPI_Comm dup = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  // From here on a failure frees the duplicate before throwing.
  auto check_or_free = [&dup](int rc, const char* call) {
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&dup);
      check(rc, call);
    }
  };
  check_or_free(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_or_free(MPI_Comm_rank(dup, &rank_), "MPI_Comm_rank");
  check_or_free(MPI_Comm_size(dup, &size_), "MPI_Comm_size");
  comm_ = MPI_Comm_c2f(dup);
}

MpiReducer::~MpiReducer() {
  if (!MpiSession::active()) {
    return;  // MPI_Finalize has released every communicator
  }
  MPI_Comm comm = MPI_Comm_f2c(comm_);
  MPI_Comm_free(&comm);
}

double MpiReducer::sum(double value) {
  return allreduce(comm_, value, MPI_SUM, "MpiReducer::sum");
}

double MpiReducer::max(double value) {
  return allreduce(comm_, value, MPI_MAX, "MpiReducer::max");
}

}  // namespace zeus::runtime
