// Sums across the ranks of a job on GPUs: NCCL's all-reduce (the CUDA toolkit's NCCL, where it
// ships one), queued on the backend's stream like the kernels, so that a recorded step (a CUDA
// Graph) records it too. Each rank joins one communicator (ncclCommInitRank) from the id rank 0
// drew, which MPI carries to the others; NCCL picks NVLink, PCIe peer copies or the network by
// itself. One GPU per rank: ranks that share a GPU sum through the host instead (data_parallel.h).
// Without NCCL this build has no collective, and says so.
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {

#if CROSSOVER_WITH_NCCL
namespace {

class NcclCollective final : public Collective {
 public:
  NcclCollective(CudaBackend& be, const std::string& id, int rank, int ranks) : be_(be) {
    ncclUniqueId unique{};
    if (id.size() != sizeof(unique.internal)) {
      throw UserError("NCCL: the communicator id rank 0 sent has " + std::to_string(id.size()) +
                      " bytes, expected " + std::to_string(sizeof(unique.internal)) +
                      " (ranks of different builds?)");
    }
    std::memcpy(unique.internal, id.data(), id.size());
    XO_CUDA_CHECK(cudaSetDevice(be.device()));
    const ncclResult_t r = ncclCommInitRank(&comm_, ranks, unique, rank);
    if (r != ncclSuccess) {
      comm_ = nullptr;
      throw UserError("NCCL could not make rank " + std::to_string(rank) + " of " +
                      std::to_string(ranks) + " a member of the job's communicator on " +
                      be.info().id + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) +
                      "); NCCL needs one GPU per rank: --reduce host-staged sums through the host");
    }
  }
  ~NcclCollective() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  void sum(float* data, int64_t n) override {
    XO_NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat, ncclSum, comm_,
                                be_.stream()));
  }

 private:
  CudaBackend& be_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::string CudaBackend::collective_id() {
  ncclUniqueId unique{};
  XO_NCCL_CHECK(ncclGetUniqueId(&unique));
  return std::string(unique.internal, sizeof(unique.internal));
}

std::unique_ptr<Collective> CudaBackend::collective(const std::string& id, int rank, int ranks) {
  return std::make_unique<NcclCollective>(*this, id, rank, ranks);
}

#else

std::string CudaBackend::collective_id() { return {}; }

std::unique_ptr<Collective> CudaBackend::collective(const std::string& id, int rank, int ranks) {
  (void)id;
  throw UserError("this build of crossover has no NCCL (the CUDA toolkit it was built with ships "
                  "none), so rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                  " cannot join one: use --reduce host-staged");
}

#endif

}  // namespace xo::cuda
