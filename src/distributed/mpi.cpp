// The World over OpenMPI's C API.
#include "distributed/mpi.h"

#include <fmt/format.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "distributed/peer_watch.h"

// One checked-call macro for MPI: a failed call is an internal error naming the call and MPI's
// message (MPI's default handler would abort the job without one).
#define XO_MPI_CHECK(call)                                                            \
  do {                                                                                \
    const int xo_mpi_rc = (call);                                                     \
    if (xo_mpi_rc != MPI_SUCCESS) {                                                   \
      char xo_mpi_text[MPI_MAX_ERROR_STRING];                                         \
      int xo_mpi_len = 0;                                                             \
      MPI_Error_string(xo_mpi_rc, xo_mpi_text, &xo_mpi_len);                          \
      throw ::xo::InternalError(                                                      \
          fmt::format("{} failed: {}", #call, std::string(xo_mpi_text, xo_mpi_len))); \
    }                                                                                 \
  } while (0)

namespace xo::mpi {
namespace {

int length_of(const std::string& s) {
  if (s.size() > static_cast<size_t>(INT_MAX)) throw InternalError("MPI message over 2 GiB");
  return static_cast<int>(s.size());
}

MPI_Comm of(void* comm) { return *static_cast<MPI_Comm*>(comm); }

std::string receive_status(const MPI_Status& status, MPI_Comm comm) {
  int count = 0;
  XO_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &count));
  std::string text(static_cast<size_t>(count), '\0');
  XO_MPI_CHECK(MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, comm,
                        MPI_STATUS_IGNORE));
  return text;
}

}  // namespace

bool built_with_mpi() { return true; }

World::World() : owns_mpi_(true) {
  // OpenMPI's reductions allocate their scratch buffers on every call; glibc maps any allocation
  // over 32 MiB afresh (and the kernel zeroes its pages) each time, which made a large all-reduce
  // far slower than with the buffers kept in the heap (`crossover allreduce`;
  // docs/benchmarks.md, "One model on several processes: data-parallel training over MPI").
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  int ready = 0;
  XO_MPI_CHECK(MPI_Initialized(&ready));
  if (!ready) XO_MPI_CHECK(MPI_Init(nullptr, nullptr));
  // Errors come back as return codes, for XO_MPI_CHECK to report. A write to a rank whose host
  // has gone (its socket reset) fails with EPIPE rather than ending this rank by SIGPIPE before it
  // can say which host was lost (seen once in CI: "exited on signal 13 (Broken pipe)").
  XO_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  std::signal(SIGPIPE, SIG_IGN);
  comm_ = new MPI_Comm(MPI_COMM_WORLD);
  describe();
  if (rank_ != 0) quiet_interrupt_message();
  watch_local_ranks();
}

// Every rank's process (pid, start time, host) gathered; this rank watches those on its machine.
void World::watch_local_ranks() {
  struct Record {
    int64_t pid, start;
    char host[MPI_MAX_PROCESSOR_NAME];
  };
  const RankProcess self = this_process(rank_, host());
  Record mine{self.pid, static_cast<int64_t>(self.start), {}};
  self.host.copy(mine.host, sizeof(mine.host) - 1);
  std::vector<Record> all(static_cast<size_t>(size_));
  XO_MPI_CHECK(MPI_Allgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE,
                             of(comm_)));
  std::vector<RankProcess> peers;
  for (int r = 0; r < size_; ++r) {
    const Record& e = all[static_cast<size_t>(r)];
    if (r == rank_ || std::string(e.host) != self.host) continue;
    peers.push_back({r, static_cast<pid_t>(e.pid), static_cast<uint64_t>(e.start), e.host});
  }
  watch_ = std::make_unique<PeerWatch>(std::move(peers), self, size_);
}

void World::on_lost_rank(std::function<std::string()> note) const {
  if (watch_) watch_->set_note(std::move(note));
}

World::World(void* comm) : comm_(comm) { describe(); }

void World::describe() {
  const MPI_Comm comm = *static_cast<MPI_Comm*>(comm_);
  XO_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  XO_MPI_CHECK(MPI_Comm_size(comm, &size_));
  MPI_Comm local = MPI_COMM_NULL;
  XO_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  XO_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  XO_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  local_comm_ = new MPI_Comm(local);
  int first_of_host = local_rank_ == 0 ? 1 : 0;
  XO_MPI_CHECK(MPI_Allreduce(&first_of_host, &hosts_, 1, MPI_INT, MPI_SUM, comm));
  XO_MPI_CHECK(MPI_Allreduce(&local_size_, &ranks_per_host_, 1, MPI_INT, MPI_MAX, comm));
}

std::unique_ptr<World> World::split(bool member) const {
  MPI_Comm group = MPI_COMM_NULL;
  XO_MPI_CHECK(
      MPI_Comm_split(*static_cast<MPI_Comm*>(comm_), member ? 0 : MPI_UNDEFINED, rank_, &group));
  if (!member) return nullptr;
  XO_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  return std::unique_ptr<World>(new World(new MPI_Comm(group)));
}

std::unique_ptr<World> World::split_by(int color) const {
  MPI_Comm group = MPI_COMM_NULL;
  XO_MPI_CHECK(MPI_Comm_split(*static_cast<MPI_Comm*>(comm_), color, rank_, &group));
  XO_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  return std::unique_ptr<World>(new World(new MPI_Comm(group)));
}

std::unique_ptr<World> World::machine() const {
  MPI_Comm group = MPI_COMM_NULL;
  XO_MPI_CHECK(MPI_Comm_split_type(*static_cast<MPI_Comm*>(comm_), MPI_COMM_TYPE_SHARED, rank_,
                                   MPI_INFO_NULL, &group));
  XO_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  return std::unique_ptr<World>(new World(new MPI_Comm(group)));
}

World::~World() {
  if (auto* local = static_cast<MPI_Comm*>(local_comm_)) {
    MPI_Comm_free(local);
    delete local;
  }
  auto* comm = static_cast<MPI_Comm*>(comm_);
  if (!owns_mpi_) {
    if (comm && *comm != MPI_COMM_NULL) MPI_Comm_free(comm);
    delete comm;
    return;
  }
  // No rank leaves while another still watches it: every rank waits (asleep, still watching) for
  // the others to finish, stops watching, and waits again before it leaves.
  if (watch_) {
    try {
      wait_quietly();
      watch_.reset();
      wait_quietly();
    } catch (const std::exception&) {  // a destructor: the job is ending either way
    }
  }
  delete comm;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string World::host() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  XO_MPI_CHECK(MPI_Get_processor_name(name, &length));
  return std::string(name, static_cast<size_t>(length));
}

void World::send(int to, int tag, const std::string& message) const {
  XO_MPI_CHECK(MPI_Send(message.data(), length_of(message), MPI_CHAR, to, tag, of(comm_)));
}

std::optional<std::pair<int, std::string>> World::try_receive(int tag) const {
  int arrived = 0;
  MPI_Status status;
  XO_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, tag, of(comm_), &arrived, &status));
  if (!arrived) return std::nullopt;
  const int from = status.MPI_SOURCE;
  return std::make_pair(from, receive_status(status, of(comm_)));
}

std::string World::receive(int from, int tag) const {
  MPI_Status status;
  XO_MPI_CHECK(MPI_Probe(from, tag, of(comm_), &status));
  return receive_status(status, of(comm_));
}

std::string World::broadcast(const std::string& message) const {
  int length = rank_ == 0 ? length_of(message) : 0;
  XO_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, of(comm_)));
  std::string text = rank_ == 0 ? message : std::string(static_cast<size_t>(length), '\0');
  XO_MPI_CHECK(MPI_Bcast(text.data(), length, MPI_CHAR, 0, of(comm_)));
  return text;
}

std::vector<std::string> World::gather(const std::string& message) const {
  const int length = length_of(message);
  std::vector<int> lengths(rank_ == 0 ? static_cast<size_t>(size_) : 0);
  XO_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, of(comm_)));
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  XO_MPI_CHECK(MPI_Gatherv(message.data(), length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, 0, of(comm_)));
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i)
    out.push_back(all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(lengths[i])));
  return out;
}

namespace {

// MPI counts are ints: longer arrays go in pieces.
constexpr int64_t kMaxCount = INT_MAX / 2;

template <typename T>
void reduce_in_place(T* values, int64_t n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  for (int64_t at = 0; at < n; at += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - at));
    XO_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values + at, count, type, op, comm));
  }
}

}  // namespace

void World::sum(float* values, int64_t n) const {
  reduce_in_place(values, n, MPI_FLOAT, MPI_SUM, of(comm_));
}
void World::sum(double* values, int64_t n) const {
  reduce_in_place(values, n, MPI_DOUBLE, MPI_SUM, of(comm_));
}
void World::max(int64_t* values, int64_t n) const {
  reduce_in_place(values, n, MPI_INT64_T, MPI_MAX, of(comm_));
}

void World::max(double* values, int64_t n) const {
  reduce_in_place(values, n, MPI_DOUBLE, MPI_MAX, of(comm_));
}

void World::barrier() const { XO_MPI_CHECK(MPI_Barrier(of(comm_))); }

void World::wait_quietly() const {
  MPI_Request request = MPI_REQUEST_NULL;
  XO_MPI_CHECK(MPI_Ibarrier(of(comm_), &request));
  for (int done = 0;;) {
    XO_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void World::exchange(const void* send, void* receive, int64_t bytes, int to, int from) const {
  const auto* out = static_cast<const char*>(send);
  auto* in = static_cast<char*>(receive);
  for (int64_t at = 0; at < bytes; at += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, bytes - at));
    XO_MPI_CHECK(MPI_Sendrecv(out + at, count, MPI_CHAR, to, 0, in + at, count, MPI_CHAR, from, 0,
                              of(comm_), MPI_STATUS_IGNORE));
  }
}

void World::broadcast(void* data, int64_t bytes) const {
  auto* p = static_cast<char*>(data);
  for (int64_t at = 0; at < bytes; at += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, bytes - at));
    XO_MPI_CHECK(MPI_Bcast(p + at, count, MPI_CHAR, 0, of(comm_)));
  }
}

PendingSums::PendingSums(const World& world)
    : requests_(new std::vector<MPI_Request>()), comm_(world.comm_) {}

PendingSums::~PendingSums() {
  auto* requests = static_cast<std::vector<MPI_Request>*>(requests_);
  // Sums still under way when an error unwinds: MPI needs them finished before their memory goes.
  if (!requests->empty()) {
    MPI_Waitall(static_cast<int>(requests->size()), requests->data(), MPI_STATUSES_IGNORE);
  }
  delete requests;
}

void PendingSums::start(float* values, int64_t n) {
  auto& requests = *static_cast<std::vector<MPI_Request>*>(requests_);
  for (int64_t at = 0; at < n; at += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, n - at));
    requests.emplace_back();
    XO_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values + at, count, MPI_FLOAT, MPI_SUM, of(comm_),
                                &requests.back()));
  }
}

void PendingSums::progress() {
  auto& requests = *static_cast<std::vector<MPI_Request>*>(requests_);
  if (requests.empty()) return;
  int done = 0;
  XO_MPI_CHECK(
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
  if (done) requests.clear();
}

void PendingSums::wait() {
  auto& requests = *static_cast<std::vector<MPI_Request>*>(requests_);
  if (requests.empty()) return;
  XO_MPI_CHECK(
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  requests.clear();
}

SharedMemory::SharedMemory(const World& world, int64_t bytes) : comm_(world.comm_) {
  if (world.local_size() != world.size()) {
    throw InternalError(fmt::format("shared memory across {} ranks of which {} are on this machine",
                                    world.size(), world.local_size()));
  }
  auto* window = new MPI_Win(MPI_WIN_NULL);
  void* mine = nullptr;
  // A page more than asked: each rank's part starts on the first page boundary in it, wherever
  // MPI put the part (after its own bookkeeping, after the previous rank's bytes).
  const int64_t mapped = bytes > 0 ? bytes + kPageBytes : 0;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(mapped), 1, MPI_INFO_NULL,
                                         *static_cast<MPI_Comm*>(comm_), &mine, window);
  if (rc != MPI_SUCCESS) {
    delete window;
    if (rc == MPI_ERR_NO_MEM) {
      throw OutOfMemory(fmt::format("cpu: out of memory allocating {} ({} bytes) shared between "
                                    "the ranks of this machine",
                                    byte_size(static_cast<double>(bytes)), group_digits(bytes)),
                        bytes);
    }
    XO_MPI_CHECK(rc);
  }
  window_ = window;
  bases_.resize(static_cast<size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    XO_MPI_CHECK(MPI_Win_shared_query(*window, r, &size, &unit, &base));
    const auto at = reinterpret_cast<uintptr_t>(base);
    bases_[static_cast<size_t>(r)] =
        size == 0 ? base : reinterpret_cast<void*>((at + kPageBytes - 1) / kPageBytes * kPageBytes);
  }
  // One passive epoch for the window's life: fence() synchronises within it.
  XO_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, *window));
}

SharedMemory::~SharedMemory() {
  auto* window = static_cast<MPI_Win*>(window_);
  // Freeing is collective: while an error unwinds this rank, the others may never come, and the
  // job is about to end (MPI_Abort) anyway.
  if (!window || std::uncaught_exceptions() > 0) return;
  MPI_Win_unlock_all(*window);
  MPI_Win_free(window);
  delete window;
}

void SharedMemory::fence() const {
  const MPI_Win window = *static_cast<MPI_Win*>(window_);
  XO_MPI_CHECK(MPI_Win_sync(window));
  XO_MPI_CHECK(MPI_Barrier(*static_cast<MPI_Comm*>(comm_)));
  XO_MPI_CHECK(MPI_Win_sync(window));
}

void World::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace xo::mpi
