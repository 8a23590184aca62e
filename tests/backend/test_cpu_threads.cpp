// The CPU's threads once a training ends (Backend::release_threads): OpenMP's workers, which spin
// on a core for some 15 ms after each parallel region before they sleep, end with the training
// that started them, and the next parallel region starts them again.
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "data/source.h"
#include "model/model.h"
#include "model/spec.h"
#include "train/trials.h"

namespace xo {
namespace {

// This process's threads now.
std::ptrdiff_t threads_now() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return std::distance(begin(tasks), end(tasks));
}

// This process's threads once `expected` or a second has passed (a released worker leaves the
// task list once it has exited).
std::ptrdiff_t threads_settled_at(std::ptrdiff_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::ptrdiff_t n = threads_now();
  while (n != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = threads_now();
  }
  return n;
}

// `body` on a thread of its own: OpenMP keeps a pool of workers per thread that starts parallel
// regions, so a new thread starts with none, whatever tests ran before in this process.
template <typename Body>
void on_a_new_thread(Body body) {
  std::thread(body).join();
}

TEST(CpuThreads, ReleasedWorkersEndAndTheNextRegionStartsThemAgain) {
  on_a_new_thread([] {
    const auto be = make_backend(parse_device("cpu", 2));
    const std::ptrdiff_t before = threads_now();
    int ran = 0;
    be->parallel_shards(2, [&](int shard) {
      if (shard == 1) ran = 1;
    });
    EXPECT_EQ(ran, 1);
    EXPECT_EQ(threads_now(), before + 1) << "OpenMP keeps its worker for the next region";
    be->release_threads();
    EXPECT_EQ(threads_settled_at(before), before);
    ran = 0;
    be->parallel_shards(2, [&](int shard) {
      if (shard == 1) ran = 1;
    });
    EXPECT_EQ(ran, 1);
    be->release_threads();
    EXPECT_EQ(threads_settled_at(before), before);
  });
}

// A fused group of two trials on two threads (a group each) leaves no worker behind.
TEST(CpuThreads, AFusedTrainingLetsItsWorkersGo) {
  on_a_new_thread([] {
    const auto be = make_backend(parse_device("cpu", 2));
    const ModelSpec spec = *builtin_spec("disc-2");
    std::vector<std::unique_ptr<Model>> models;
    std::vector<FusedTrial> trials;
    for (int t = 0; t < 2; ++t) {
      models.push_back(std::make_unique<Model>(spec, *be));
      models.back()->init(spec.train.seed + static_cast<uint64_t>(t));
      trials.push_back({models.back().get(), spec.train, {}});
    }
    const DataSplit data = load_data(spec.data, data_request(spec, models[0]->classes()));
    const std::ptrdiff_t before = threads_now();
    FusedOptions o;
    o.groups = 2;
    o.max_steps = 20;
    const std::vector<TrainResult> results = train_fused(trials, data, o);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].steps_taken, 20);
    EXPECT_EQ(threads_settled_at(before), before);
  });
}

}  // namespace
// --threads's one default: a part of the cores this process may run on (its affinity, as taskset
// or a container sets it), not of the machine's (`train` and `sweep` along ranks took
// std::thread::hardware_concurrency(), so 2 ranks under `taskset -c 0` took 1 thread each of a
// machine's 2 cores where one core was theirs).
TEST(CpuThreads, TheDefaultPerRankIsAPartOfTheCoresThisProcessMayRunOn) {
  const int all = usable_cpu_cores();
  ASSERT_GE(all, 1);
  EXPECT_EQ(threads_per_rank(0, 1), all);
  EXPECT_EQ(threads_per_rank(0, all + 1), 1) << "at least one thread each";
  EXPECT_EQ(threads_per_rank(3, 2), 3) << "threads given are taken as given";
  // On a thread of its own, pinned to one core (sched_setaffinity(0) sets the calling thread's).
  int pinned = 0, per_rank = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return;
    pinned = usable_cpu_cores();
    per_rank = threads_per_rank(0, 1);
  }).join();
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(per_rank, 1);
}

}  // namespace xo
