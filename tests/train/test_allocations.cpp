// "Nothing allocated in the training step", checked: every operator new in this test binary is
// counted. oneDNN 2.6 itself allocates a few small objects per primitive execution (its argument
// map), so the test measures that cost on a bare kernel call and requires a whole step to allocate
// exactly that much per oneDNN execution, and nothing more.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include "backend/backend.h"
#include "data/source.h"
#include "model/model.h"

namespace {
std::atomic<int64_t> g_allocations{0};

// Every form of the global operator new counts and allocates with malloc (aligned_alloc for the
// over-aligned forms), and every form of delete frees with free: replacing only some forms leaves
// the others with the library's (or AddressSanitizer's) allocator, and a pointer from one freed by
// the other is a mismatch ASan reports.
void* counted(std::size_t size, std::size_t alignment) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  // aligned_alloc wants a size that is a multiple of the alignment.
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void* counted_or_throw(std::size_t size, std::size_t alignment) {
  if (void* p = counted(size, alignment)) return p;
  throw std::bad_alloc();
}
constexpr std::size_t kPlain = alignof(std::max_align_t);
// Out of line: where a delete is inlined next to its new, GCC would see free() of a pointer that
// came from operator new and warn (-Wmismatched-new-delete), not knowing that this new is malloc.
[[gnu::noinline]] void release(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t size) { return counted_or_throw(size, kPlain); }
void* operator new[](std::size_t size) { return counted_or_throw(size, kPlain); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return counted(size, kPlain);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return counted(size, kPlain);
}
void* operator new(std::size_t size, std::align_val_t a) {
  return counted_or_throw(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return counted_or_throw(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }

namespace xo {
namespace {

int64_t allocations() { return g_allocations.load(std::memory_order_relaxed); }

constexpr int kSteps = 20;

// Counts the allocations of one call, after a warm-up call.
template <typename Call>
int64_t allocations_of(Call&& call) {
  call();
  const int64_t before = allocations();
  call();
  return allocations() - before;
}

// The allocations of 20 training steps (after a warm-up step) of `spec` in `shards` batch shards.
int64_t step_allocations(Backend& be, const ModelSpec& spec, int shards) {
  Model model(spec, be);
  model.init(0);
  const Dataset data = load_data(spec.data, data_request(spec, model.classes())).train;
  DeviceBuffer x = be.allocate(sizeof(float) * data.x.size());
  DeviceBuffer y = be.allocate(sizeof(int32_t) * data.y.size());
  be.upload(x.as<float>(), data.x.data(), x.bytes());
  be.upload(y.as<int32_t>(), data.y.data(), y.bytes());
  Network net(model, {.batch = 100, .shards = shards});
  auto optimizer = be.optimizer(spec.train.optimizer, model.flat_size());
  DeviceBuffer stats = be.allocate(sizeof(LossStats));
  auto step = [&](int s) {
    net.train_step(x.as<float>() + s * 100 * 2, y.as<int32_t>() + s * 100, stats.as<LossStats>());
    optimizer->step(model.params(), model.grads());
  };
  step(0);  // warm-up
  const int64_t before = allocations();
  for (int s = 0; s < kSteps; ++s) step(s % 10);
  return allocations() - before;
}

TEST(Allocations, TrainingStepAllocatesOnlyWhatOneDnnDoesPerCall) {
  auto be = make_backend(parse_device("cpu", 1));
  // What oneDNN's executions allocate, measured on bare kernels: a forward matmul with bias and
  // ReLU, one without an activation (the output layer), a backward with its two matmuls, and a
  // first layer's backward (no input gradient: one matmul).
  auto inner = be->linear({4, 3, 2, true, Activation::ReLU, true});
  auto output = be->linear({4, 3, 2, true, Activation::None, true});
  auto first = be->linear({4, 3, 2, true, Activation::ReLU, false});
  DeviceBuffer buf = be->allocate(sizeof(float) * 128);
  float* p = buf.as<float>();
  const int64_t forward = allocations_of([&] { inner->forward(p, p + 16, p + 32, p + 48); });
  const int64_t output_forward =
      allocations_of([&] { output->forward(p, p + 16, p + 32, p + 48); });
  const int64_t backward =
      allocations_of([&] { inner->backward(p, p + 16, p + 48, p + 64, p + 80, p + 96, p + 112); });
  const int64_t first_backward =
      allocations_of([&] { first->backward(p, p + 16, p + 48, p + 64, p + 80, p + 96, nullptr); });

  // disc-5's 5 Linear layers (ReLUs fused), 3, 6, 12 and 24 wide: widths that are not powers of
  // two take oneDNN's matmuls.
  ModelSpec spec = *builtin_spec("disc-5");
  int64_t width = 3;
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i)
    if (spec.layers[i].type == LayerType::Linear)
      spec.layers[i].out = std::exchange(width, 2 * width);
  for (int shards : {1, 2}) {
    SCOPED_TRACE(shards);
    const int64_t total = step_allocations(*be, spec, shards);
    const int64_t expected =
        shards * (4 * forward + output_forward + 4 * backward + first_backward);
    EXPECT_EQ(total, kSteps * expected)
        << "per step: " << total / kSteps << " allocations; oneDNN accounts for " << expected
        << " (forward " << forward << ", output layer's forward " << output_forward << ", backward "
        << backward << ", first layer's backward " << first_backward << ")";
  }
}

// The disc models' layers (widths powers of two) take crossover's own loops: nothing allocated.
TEST(Allocations, SmallLinearTrainingStepAllocatesNothing) {
  auto be = make_backend(parse_device("cpu", 1));
  const ModelSpec spec = *builtin_spec("disc-5");
  for (int shards : {1, 2}) {
    SCOPED_TRACE(shards);
    EXPECT_EQ(step_allocations(*be, spec, shards), 0);
  }
}

}  // namespace
}  // namespace xo
