// A build without MPI (libopenmpi-dev absent, or -DCROSSOVER_MPI=OFF): its World says so.
#include <cstdlib>

#include "core/error.h"
#include "distributed/mpi.h"
#include "distributed/peer_watch.h"

namespace xo::mpi {

bool built_with_mpi() { return false; }

World::World() {
  throw UserError(
      "this crossover was built without MPI, so it cannot run as one job across ranks: install "
      "libopenmpi-dev (scripts/setup does) and build again");
}
World::~World() = default;
World::World(void*) {}
void World::describe() {}
std::unique_ptr<World> World::split(bool) const { return nullptr; }
std::unique_ptr<World> World::split_by(int) const { return nullptr; }
std::unique_ptr<World> World::machine() const { return nullptr; }
std::string World::host() const { return {}; }
void World::send(int, int, const std::string&) const {}
std::optional<std::pair<int, std::string>> World::try_receive(int) const { return std::nullopt; }
std::string World::receive(int, int) const { return {}; }
std::string World::broadcast(const std::string& message) const { return message; }
std::vector<std::string> World::gather(const std::string& message) const { return {message}; }
void World::abort(int code) const { std::_Exit(code); }
void World::on_lost_rank(std::function<std::string()>) const {}
void World::watch_local_ranks() {}
void World::sum(float*, int64_t) const {}
void World::sum(double*, int64_t) const {}
void World::max(int64_t*, int64_t) const {}
void World::max(double*, int64_t) const {}
void World::barrier() const {}
void World::wait_quietly() const {}
void World::exchange(const void*, void*, int64_t, int, int) const {}
void World::broadcast(void*, int64_t) const {}

SharedMemory::SharedMemory(const World&, int64_t) {}
SharedMemory::~SharedMemory() = default;
void SharedMemory::fence() const {}

PendingSums::PendingSums(const World&) {}
PendingSums::~PendingSums() = default;
void PendingSums::start(float*, int64_t) {}
void PendingSums::progress() {}
void PendingSums::wait() {}

}  // namespace xo::mpi
