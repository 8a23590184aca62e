// What summing one gradient buffer across the ranks of one machine costs by each path MPI offers:
// MPI_Allreduce in place (crossover's --reduce after-backward), MPI_Reduce_scatter_block then
// MPI_Allgather (a sharded optimizer over MPI's collectives), and the sum of this rank's part read
// straight from the other ranks' buffers in an MPI-3 shared-memory window (--reduce shared).
// Median of --repeat calls after 2 warm-ups, each call timed between barriers.
//
//   mpirun -np 2 build/bench/crossover_mpi_sum_paths [MiB] [repeat]     (default: 43 MiB, 12)
//
// 43 MiB is disc-12's flat gradient buffer. glibc's large-allocation threshold is raised as the
// World in src/distributed/mpi.cpp does, so that MPI's scratch buffers stay in the heap.
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <typename Body>
double median_ms(int repeat, Body&& body) {
  std::vector<double> ms;
  for (int i = 0; i < repeat + 2; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    body();
    MPI_Barrier(MPI_COMM_WORLD);
    if (i >= 2) ms.push_back((MPI_Wtime() - start) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const double mib = argc > 1 ? std::atof(argv[1]) : 43;
  const int repeat = argc > 2 ? std::max(1, std::atoi(argv[2])) : 12;
  const int part = static_cast<int>(mib * (1 << 20) / sizeof(float)) / ranks;
  const long n = static_cast<long>(part) * ranks;

  std::vector<float> grads(n, 1.0f + rank), mine(part), params(n, 0.5f);
  const double allreduce = median_ms(repeat, [&] {
    MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  });
  const double reduce_scatter = median_ms(repeat, [&] {
    MPI_Reduce_scatter_block(grads.data(), mine.data(), part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  const double allgather = median_ms(repeat, [&] {
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params.data(), part, MPI_FLOAT,
                  MPI_COMM_WORLD);
  });

  MPI_Comm machine;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &machine);
  int local = 0;
  MPI_Comm_size(machine, &local);
  double shared = -1;
  if (local == ranks) {
    float* own = nullptr;
    MPI_Win window;
    MPI_Win_allocate_shared(static_cast<MPI_Aint>(n * sizeof(float)), sizeof(float), MPI_INFO_NULL,
                            machine, &own, &window);
    std::vector<const float*> other(ranks);
    for (int r = 0; r < ranks; ++r) {
      MPI_Aint size = 0;
      int unit = 0;
      MPI_Win_shared_query(window, r, &size, &unit, &other[r]);
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, window);
    std::fill(own, own + n, 1.0f + rank);
    const long begin = static_cast<long>(part) * rank, end = begin + part;
    shared = median_ms(repeat, [&] {
      MPI_Win_sync(window);
      MPI_Barrier(machine);
      MPI_Win_sync(window);
      for (int r = 0; r < ranks; ++r) {
        if (r == rank) continue;
        const float* theirs = other[r];
        for (long i = begin; i < end; ++i) own[i] += theirs[i];
      }
    });
    MPI_Win_unlock_all(window);
    MPI_Win_free(&window);
  }
  MPI_Comm_free(&machine);
  if (rank == 0) {
    std::printf("%d ranks, %.1f MiB of f32, median of %d calls (ms):\n", ranks,
                static_cast<double>(n) * sizeof(float) / (1 << 20), repeat);
    std::printf("  MPI_Allreduce in place         %8.2f\n", allreduce);
    std::printf("  MPI_Reduce_scatter_block       %8.2f\n", reduce_scatter);
    std::printf("  MPI_Allgather in place         %8.2f\n", allgather);
    if (shared >= 0) {
      std::printf("  shared window, own part summed %8.2f\n", shared);
    } else {
      std::printf("  shared window: the ranks are not all on one machine\n");
    }
  }
  MPI_Finalize();
  return 0;
}
