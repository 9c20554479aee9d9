// A Reducer over MPI, for data-parallel jobs launched with `mpirun -np N` (one process per GPU),
// and a small RAII helper that initialises MPI when the program has not done so itself.
//
// Built only when CMake finds MPI (option ZEUS_WITH_MPI, target zeus::mpi). This header names no
// MPI type, so it can be included without mpi.h: a communicator other than MPI_COMM_WORLD is passed
// as its Fortran handle, an int that MPI_Comm_c2f(comm) returns in the caller's code.
#pragma once

#include "zeus/runtime/reducer.hpp"

namespace zeus::runtime {

// Initialises MPI (MPI_Init_thread, asking for MPI_THREAD_FUNNELED: only the thread that created
// the session makes MPI calls) unless MPI is already initialised, and finalises it on destruction
// only if this session initialised it. Construct it once, early in main(), on every rank; a program
// that calls MPI_Init itself does not need one (a session then does nothing).
//
// Throws VendorError (vendor "MPI") if MPI_Init_thread fails and Error(kUninitialized) if MPI was
// already finalised (MPI cannot be initialised twice in one process).
class MpiSession {
 public:
  MpiSession();
  // argc and argv are handed to MPI_Init_thread (either may be null).
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Whether this session called MPI_Init_thread (and so will call MPI_Finalize).
  bool owns_mpi() const noexcept { return owns_; }
  // Whether MPI is initialised and not yet finalised.
  static bool active();

 private:
  bool owns_ = false;
};

// sum() and max() are MPI_Allreduce (MPI_SUM / MPI_MAX on one MPI_DOUBLE) over a private duplicate
// of the communicator, so that they never match messages of the application, and with
// MPI_ERRORS_RETURN on that duplicate, so that a failing call becomes a zeus::VendorError (vendor
// "MPI", the call's name and MPI return code, and MPI_Error_string's text) instead of aborting.
//
// The constructor and the destructor are collective (MPI_Comm_dup, MPI_Comm_free): every rank of
// the communicator must create and destroy its reducer, and every rank must make the same sequence
// of sum()/max() calls, as with any collective. MPI must be initialised first (MpiSession or
// MPI_Init); otherwise, or once MPI is finalised, the constructor, sum() and max() throw
// Error(kUninitialized). A reducer that outlives MPI_Finalize is destroyed without MPI calls.
class MpiReducer final : public Reducer {
 public:
  // Over MPI_COMM_WORLD.
  MpiReducer();
  // Over the communicator whose Fortran handle is `comm_fortran_handle` (MPI_Comm_c2f(comm)).
  // Throws Error(kInvalidArgument) for MPI_COMM_NULL.
  explicit MpiReducer(int comm_fortran_handle);
  ~MpiReducer() override;
  MpiReducer(const MpiReducer&) = delete;
  MpiReducer& operator=(const MpiReducer&) = delete;

  double sum(double value) override;
  double max(double value) override;
  int world_size() const override { return size_; }
  // This process's rank in the communicator.
  int rank() const noexcept { return rank_; }

 private:
  int comm_ = 0;  // Fortran handle of the private duplicate
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace zeus::runtime
