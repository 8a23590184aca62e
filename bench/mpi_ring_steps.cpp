// How the link under `crossover allreduce`'s ring model should be measured, on 2 ranks: the
// figures behind its probe (docs/benchmarks.md, "The all-reduce model, its link measured as a ring
// uses it").
//
//   mpirun -np 2 build/bench/crossover_mpi_ring_steps [repeat]     (default: 30)
//
// 1. A transfer measured first in a job and again: 512 KiB exchanged between two 32 MiB buffers
//    (as the old probe did), then between buffers of the message's size, in two passes.
// 2. At each message size, MPI_Allreduce against the two ways of composing a ring from measured
//    pieces: isolated pieces (two exchanges of a clean chunk and one addition over cached arrays,
//    each timed alone) and the ring's phases (the reduce-scatter's exchange-and-add, then the
//    all-gather's exchange of the chunk just summed, each phase timed alone on a message-sized
//    buffer).
// Every figure is the median of `repeat` calls after 3 warm-ups, each call the slower rank's.
// glibc's large-allocation threshold is raised as the World in src/distributed/mpi.cpp does.
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int repeat = 30;

template <typename Body>
double median_ms(Body&& body) {
  for (int i = 0; i < 3; ++i) body();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    body();
    double t = (MPI_Wtime() - start) * 1e3;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void exchange(const void* send, void* receive, size_t bytes, int peer) {
  MPI_Sendrecv(send, static_cast<int>(bytes), MPI_CHAR, peer, 0, receive, static_cast<int>(bytes),
               MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) std::fprintf(stderr, "crossover_mpi_ring_steps: run it on 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  if (argc > 1) repeat = std::max(1, std::atoi(argv[1]));
  const int peer = 1 - rank;

  if (rank == 0) std::printf("1. 512 KiB exchanged, GB/s each way (median of %d)\n", repeat);
  const size_t small = 512 << 10;
  std::vector<char> big_out(32 << 20, 1), big_in(big_out.size(), 0);
  std::vector<char> out(small, 1), in(small, 0);
  for (int pass = 1; pass <= 2; ++pass) {
    const double big = median_ms([&] { exchange(big_out.data(), big_in.data(), small, peer); });
    const double exact = median_ms([&] { exchange(out.data(), in.data(), small, peer); });
    if (rank == 0) {
      std::printf("   pass %d: between 32 MiB buffers %.1f, between 512 KiB buffers %.1f\n", pass,
                  small / big / 1e6, small / exact / 1e6);
    }
  }

  if (rank == 0) {
    std::printf("2. ms per all-reduce: MPI, a ring from isolated pieces, a ring from its phases\n");
  }
  for (const size_t mib : {1, 2, 4, 8, 16, 32, 64}) {
    const size_t floats = (mib << 20) / sizeof(float), half = floats / 2;
    std::vector<float> values(floats, 0.0f), scratch(half, 0.0f), a(floats, 1.0f), b(floats, 2.0f);
    const double mpi = median_ms([&] {
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    // Isolated: a clean chunk exchanged (twice in a 2-rank ring), and the addition over arrays of
    // the message's size, charged for one chunk.
    const double transfer =
        median_ms([&] { exchange(a.data(), scratch.data(), half * sizeof(float), peer); });
    const double add = median_ms([&] {
      for (size_t i = 0; i < floats; ++i) a[i] += b[i];
    });
    // The ring's phases on 2 ranks: send my chunk while receiving the other into scratch, add it
    // into the other chunk; then send that sum while receiving mine.
    float* mine = values.data() + (rank == 0 ? 0 : half);
    float* other = values.data() + (rank == 0 ? half : 0);
    const double reduce_scatter = median_ms([&] {
      exchange(mine, scratch.data(), half * sizeof(float), peer);
      for (size_t i = 0; i < half; ++i) other[i] += scratch[i];
    });
    const double all_gather = median_ms([&] { exchange(other, mine, half * sizeof(float), peer); });
    if (rank == 0) {
      const double isolated = 2 * transfer + add / 2, phases = reduce_scatter + all_gather;
      std::printf("   %2zu MiB: MPI %.3f | isolated %.3f (%+.0f%%) | phases %.3f (%+.0f%%)\n", mib,
                  mpi, isolated, 100 * (isolated / mpi - 1), phases, 100 * (phases / mpi - 1));
    }
  }
  MPI_Finalize();
  return 0;
}
