// Run by CTest as `mpirun -np 2 ... mpi_reducer_test`: every rank contributes rank-dependent values
// and checks what the reductions return. Exits non-zero on any rank that sees something wrong.
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "zeus/common/error.hpp"
#include "zeus/runtime/mpi_reducer.hpp"

namespace {

int g_rank = -1;
int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
    ++g_failures;
  }
}

template <typename F>
void expect_error(F&& f, zeus::ErrorKind kind, const std::string& what) {
  try {
    f();
    expect(false, what + ": no exception");
  } catch (const zeus::Error& e) {
    expect(e.kind() == kind, what + ": wrong error kind (" + e.what() + ")");
  }
}

void check_world_reductions(zeus::runtime::Reducer& reducer, int rank) {
  expect(reducer.world_size() == 2,
         "world_size() == 2, got " + std::to_string(reducer.world_size()));
  // What the power-limit optimizer reduces: energy summed, time maxed over the ranks.
  const double energy = reducer.sum(10.0 * (rank + 1));
  const double time = reducer.max(rank + 1.5);
  expect(energy == 30.0, "sum of 10*(rank+1) == 30, got " + std::to_string(energy));
  expect(time == 2.5, "max of rank+1.5 == 2.5, got " + std::to_string(time));
  // Repeated and negative values; every rank makes the same sequence of calls.
  for (int i = 0; i < 20; ++i) {
    const double s = reducer.sum(-1.0 * i * (rank + 1));
    const double m = reducer.max(rank == 0 ? -0.5 * i : -1.0 * i);
    expect(s == -3.0 * i, "iteration " + std::to_string(i) + ": sum == " + std::to_string(-3 * i) +
                              ", got " + std::to_string(s));
    expect(m == -0.5 * i, "iteration " + std::to_string(i) + ": max, got " + std::to_string(m));
  }
}

int run(int argc, char** argv) {
  // MPI is not initialised yet: no reducer.
  expect(!zeus::runtime::MpiSession::active(), "MPI inactive before the session");
  expect_error([] { zeus::runtime::MpiReducer unused; }, zeus::ErrorKind::kUninitialized,
               "MpiReducer before MPI_Init");

  std::unique_ptr<zeus::runtime::MpiReducer> outliving;
  {
    zeus::runtime::MpiSession session(&argc, &argv);
    expect(session.owns_mpi(), "the first session initialises MPI");
    expect(zeus::runtime::MpiSession::active(), "MPI active inside the session");
    {
      zeus::runtime::MpiSession nested;
      expect(!nested.owns_mpi(), "a second session does not own MPI");
    }
    expect(zeus::runtime::MpiSession::active(), "a non-owning session does not finalise MPI");

    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    g_rank = world_rank;

    auto reducer = std::make_shared<zeus::runtime::MpiReducer>();
    expect(reducer->rank() == world_rank, "rank() is the MPI_COMM_WORLD rank");
    std::shared_ptr<zeus::runtime::Reducer> base = reducer;
    check_world_reductions(*base, world_rank);

    // A communicator of its own per rank, passed as its Fortran handle. The reducer keeps a
    // duplicate, so it keeps working after the caller frees the communicator.
    MPI_Comm self = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank, 0, &self);
    zeus::runtime::MpiReducer solo(MPI_Comm_c2f(self));
    MPI_Comm_free(&self);
    expect(solo.world_size() == 1, "a split communicator has one process");
    expect(solo.rank() == 0, "rank 0 in a split communicator");
    expect(solo.sum(7.0 + world_rank) == 7.0 + world_rank, "sum over a single process");
    expect(solo.max(7.0 + world_rank) == 7.0 + world_rank, "max over a single process");

    expect_error([] { zeus::runtime::MpiReducer null_reducer(MPI_Comm_c2f(MPI_COMM_NULL)); },
                 zeus::ErrorKind::kInvalidArgument, "MpiReducer over MPI_COMM_NULL");

    // Interleaving reducers over different communicators does not mix their messages.
    zeus::runtime::MpiReducer second;
    expect(second.sum(1.0) == 2.0, "a second world reducer sums");
    expect(reducer->max(world_rank) == 1.0, "the first world reducer still maxes");

    outliving = std::make_unique<zeus::runtime::MpiReducer>();
    const double energy = base->sum(10.0 * (world_rank + 1));
    const double time = base->max(world_rank + 1.5);
    std::printf("rank %d of %d: sum(10*(rank+1)) = %g, max(rank+1.5) = %g\n", world_rank,
                base->world_size(), energy, time);
    std::fflush(stdout);
  }  // the session finalises MPI

  expect(!zeus::runtime::MpiSession::active(), "MPI finalised when the owning session ends");
  expect_error([] { zeus::runtime::MpiReducer unused; }, zeus::ErrorKind::kUninitialized,
               "MpiReducer after MPI_Finalize");
  expect_error([&] { outliving->sum(1.0); }, zeus::ErrorKind::kUninitialized,
               "sum() after MPI_Finalize");
  expect_error([] { zeus::runtime::MpiSession again; }, zeus::ErrorKind::kUninitialized,
               "a session after MPI_Finalize");
  outliving.reset();  // no MPI calls after MPI_Finalize

  if (g_failures == 0) {
    std::printf("rank %d: all checks passed\n", g_rank);
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: unexpected exception: %s\n", g_rank, e.what());
    // Do not leave the other rank waiting in a collective.
    if (zeus::runtime::MpiSession::active()) {
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 2;
  }
}
