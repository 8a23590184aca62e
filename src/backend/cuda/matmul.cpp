// cuBLASLt matmuls on row-major views (matmul.h), planned once: the operation descriptor, the three
// layouts and the algorithms cuBLASLt's heuristic picks are made at plan time; run() only sets the
// epilogue's vector pointer (a host-side descriptor update, so it can be recorded into a CUDA
// Graph) and queues cublasLtMatmul on the backend's stream with its shared workspace.
//
// Row-major onto column-major: a row-major [r, c] matrix with row stride ld is, to cuBLASLt, the
// column-major [c, r] matrix with leading dimension ld (its transpose), so instead of D = op(A)
// op(B) we ask cuBLASLt for D^T = op(B)^T op(A)^T, with no copies and no ORDER_ROW layouts:
//   cuBLASLt's A  := our B: the column-major [n, k] matrix (trans_b: [k, n] read with OP_T)
//   cuBLASLt's B  := our A: the column-major [k, m] matrix (trans_a: [m, k] read with OP_T)
//   cuBLASLt's C/D := our D: the column-major [n, m] matrix; M = n, N = m, K = k.
// The epilogues follow from the swap: cuBLASLt's bias has one entry per row of its D = per column
// of ours (BIAS, RELU_BIAS); its BGRADA sums its A (our op(B)) over k into a vector as long as its
// D's rows (our n), and its BGRADB sums its B (our op(A)) over k into one as long as its D's
// columns (our m). So our BGradA is cuBLASLt's BGRADB and our BGradB its BGRADA.
//
// Precision: F32 computes in true f32 (CUBLAS_COMPUTE_32F: no TF32, so a GPU and the CPU compute
// the same thing); TF32 and BF16 let the tensor cores round the inputs (FAST_TF32, FAST_16BF), the
// data and the accumulation staying f32.
//
// Alignment: cuBLASLt's heuristic assumes 256-byte aligned matrices unless told otherwise, and an
// algorithm picked under that assumption fails on a less aligned pointer (a view of one step of
// a sequence, say). So two algorithms are chosen at plan time: one for 16-byte aligned pointers
// (vectorised loads; every buffer and every parameter view is at least that aligned) and one for
// any float pointer (4 bytes); run() picks by the pointers it is given.
#include "backend/cuda/matmul.h"

#include <cstdint>
#include <string>

#include "core/error.h"

namespace xo::cuda {
namespace {

constexpr uint32_t kAlignedBytes = 16;
constexpr uint32_t kAnyBytes = sizeof(float);

cublasComputeType_t compute_type(Precision p) {
  switch (p) {
    case Precision::F32:
      return CUBLAS_COMPUTE_32F;
    case Precision::TF32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::BF16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  return CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t lt_epilogue(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::None:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::Bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::Relu:
      return CUBLASLT_EPILOGUE_RELU;
    case MatmulEpilogue::ReluBias:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case MatmulEpilogue::BGradA:
      return CUBLASLT_EPILOGUE_BGRADB;  // sums cuBLASLt's B = our op(A) (see the header comment)
    case MatmulEpilogue::BGradB:
      return CUBLASLT_EPILOGUE_BGRADA;  // sums cuBLASLt's A = our op(B)
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::None:
      return "none";
    case MatmulEpilogue::Bias:
      return "bias";
    case MatmulEpilogue::Relu:
      return "relu";
    case MatmulEpilogue::ReluBias:
      return "relu+bias";
    case MatmulEpilogue::BGradA:
      return "bias-gradient of A";
    case MatmulEpilogue::BGradB:
      return "bias-gradient of B";
  }
  return "?";
}

// Whether the epilogue reads or writes a vector through CUBLASLT_MATMUL_DESC_BIAS_POINTER.
bool uses_vector(MatmulEpilogue e) {
  return e != MatmulEpilogue::None && e != MatmulEpilogue::Relu;
}
bool is_gradient(MatmulEpilogue e) {
  return e == MatmulEpilogue::BGradA || e == MatmulEpilogue::BGradB;
}

bool aligned(const void* p, uintptr_t bytes) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

std::string describe(const MatmulShape& s, Precision p) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         " trans_a=" + std::to_string(s.trans_a) + " trans_b=" + std::to_string(s.trans_b) +
         " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
         " ldd=" + std::to_string(s.ldd) + " accumulate=" + std::to_string(s.accumulate) +
         " batch=" + std::to_string(s.batch) + " epilogue=" + epilogue_name(s.epilogue) +
         " precision=" + precision_name(p);
}

// Destroys a preference however the heuristic call ends.
struct PreferenceGuard {
  cublasLtMatmulPreference_t pref = nullptr;
  ~PreferenceGuard() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

}  // namespace

struct Matmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // our B
  cublasLtMatrixLayout_t lt_b = nullptr;  // our A
  cublasLtMatrixLayout_t lt_d = nullptr;  // our D, also cuBLASLt's C
  cublasLtMatmulAlgo_t algo_aligned{}, algo_any{};
  bool has_aligned = false, has_any = false;
  cublasStatus_t heuristic_status = CUBLAS_STATUS_SUCCESS;  // the last refusal, for the message

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // never throws: teardown errors are left to the driver
    if (lt_d) cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b) cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublasLtMatrixLayoutDestroy(lt_a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

// Asks cuBLASLt's heuristic for its best algorithm for pointers aligned to `alignment` bytes.
// `vector_hint` is a device address with that alignment: the heuristic reads the epilogue vector's
// pointer value (not its memory) to learn its alignment. False when there is none, with the
// heuristic's status in *refusal.
bool find_algorithm(CudaBackend& be, const MatmulShape& s, cublasLtMatmulDesc_t desc,
                    cublasLtMatrixLayout_t lt_a, cublasLtMatrixLayout_t lt_b,
                    cublasLtMatrixLayout_t lt_d, uint32_t alignment, const void* vector_hint,
                    cublasLtMatmulAlgo_t* algo, cublasStatus_t* refusal) {
  if (uses_vector(s.epilogue)) {
    XO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &vector_hint, sizeof(vector_hint)));
  }
  PreferenceGuard guard;
  XO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&guard.pref));
  const uint64_t workspace = be.matmul_workspace_bytes();
  XO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      guard.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  for (const auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    XO_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(guard.pref, attribute, &alignment, sizeof(alignment)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      be.cublaslt(), desc, lt_a, lt_b, lt_d, lt_d, guard.pref, 1, &result, &returned);
  // NOT_SUPPORTED is the heuristic's way of saying "no algorithm", and INVALID_VALUE is what some
  // versions answer for an epilogue they do not offer with these layouts: answers, not failures
  // (the caller throws, or falls back, naming the status).
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    *refusal = status;
    return false;
  }
  XO_CUBLAS_CHECK(status);
  if (returned < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    *refusal = returned < 1 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state;
    return false;
  }
  *algo = result.algo;
  return true;
}

}  // namespace

Matmul::Matmul(CudaBackend& be, const MatmulShape& shape, NoThrow) : be_(be), shape_(shape) {
  MatmulShape& s = shape_;
  XO_ASSERT(s.m > 0 && s.n > 0 && s.k > 0);
  // Packed row strides: the row length of each stored matrix.
  const int64_t a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_cols = s.trans_b ? s.k : s.n;
  if (s.lda == 0) s.lda = a_cols;
  if (s.ldb == 0) s.ldb = b_cols;
  if (s.ldd == 0) s.ldd = s.n;
  XO_ASSERT(s.lda >= a_cols && s.ldb >= b_cols && s.ldd >= s.n);

  auto plan = std::make_unique<Plan>();
  XO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute_type(be.precision()), CUDA_R_32F));
  // cuBLASLt's A is our B and its B our A (see the header comment), with the same transposes.
  const cublasOperation_t op_lt_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_lt_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  XO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a,
                                                 sizeof(op_lt_a)));
  XO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b,
                                                 sizeof(op_lt_b)));
  const cublasLtEpilogue_t epilogue = lt_epilogue(s.epilogue);
  XO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                 &epilogue, sizeof(epilogue)));
  // Stored matrices as cuBLASLt sees them (column-major = our row-major transposed): rows are our
  // row length, columns our row count.
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  XO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lt_a, CUDA_R_32F, u(b_cols),
                                             u(s.trans_b ? s.n : s.k), s.ldb));
  XO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lt_b, CUDA_R_32F, u(a_cols),
                                             u(s.trans_a ? s.k : s.m), s.lda));
  XO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lt_d, CUDA_R_32F, u(s.n), u(s.m), s.ldd));
  if (s.batch > 1) {  // the epilogues' vectors would need batch strides of their own
    XO_ASSERT(s.epilogue == MatmulEpilogue::None && s.batch <= INT32_MAX && s.stride_a > 0 &&
              s.stride_b > 0 && s.stride_d > 0);
    const auto batched = [&](cublasLtMatrixLayout_t layout, int64_t stride) {
      const auto count = static_cast<int32_t>(s.batch);
      XO_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                       &count, sizeof(count)));
      XO_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    batched(plan->lt_a, s.stride_b);  // cuBLASLt's A is our B
    batched(plan->lt_b, s.stride_a);
    batched(plan->lt_d, s.stride_d);
  }

  // Device addresses with exactly the alignments asked for (the workspace is 256-byte aligned),
  // for the heuristic's pointer hint.
  const char* workspace = static_cast<const char*>(be.matmul_workspace());
  plan->has_aligned =
      find_algorithm(be, s, plan->desc, plan->lt_a, plan->lt_b, plan->lt_d, kAlignedBytes,
                     workspace + kAlignedBytes, &plan->algo_aligned, &plan->heuristic_status);
  plan->has_any = find_algorithm(be, s, plan->desc, plan->lt_a, plan->lt_b, plan->lt_d, kAnyBytes,
                                 workspace + kAnyBytes, &plan->algo_any, &plan->heuristic_status);
  plan_ = plan.release();
}

Matmul::Matmul(CudaBackend& be, const MatmulShape& shape) : Matmul(be, shape, NoThrow{}) {
  // The target constructor has completed, so the destructor frees the plan if this throws.
  if (!plan_->has_aligned && !plan_->has_any) {
    throw_internal("cublasLtMatmulAlgoGetHeuristic",
                   std::string("cuBLASLt has no algorithm (") +
                       cublasLtGetStatusName(plan_->heuristic_status) + ") for the matmul " +
                       describe(shape_, be.precision()),
                   __FILE__, __LINE__);
  }
}

std::unique_ptr<Matmul> Matmul::try_create(CudaBackend& be, const MatmulShape& shape) {
  std::unique_ptr<Matmul> m(new Matmul(be, shape, NoThrow{}));
  if (!m->plan_->has_aligned && !m->plan_->has_any) return nullptr;
  return m;
}

Matmul::~Matmul() { delete plan_; }

bool Matmul::can_run(const void* a, const void* b, const void* d,
                     const void* epilogue_vector) const {
  if (plan_->has_any) return true;
  return plan_->has_aligned && aligned(a, kAlignedBytes) && aligned(b, kAlignedBytes) &&
         aligned(d, kAlignedBytes) && aligned(epilogue_vector, kAlignedBytes);
}

void Matmul::run(const float* a, const float* b, float* d, const float* bias, const float* aux,
                 float* bias_grad) {
  const MatmulEpilogue e = shape_.epilogue;
  XO_ASSERT(a != nullptr && b != nullptr && d != nullptr);
  XO_ASSERT(aux == nullptr);
  XO_ASSERT((bias != nullptr) == (e == MatmulEpilogue::Bias || e == MatmulEpilogue::ReluBias));
  XO_ASSERT((bias_grad != nullptr) == is_gradient(e));
  const void* vector = bias != nullptr ? static_cast<const void*>(bias) : bias_grad;
  if (uses_vector(e)) {
    XO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &vector, sizeof(vector)));
  }
  // A batch's later entries are aligned as the first only where the batch strides keep them so.
  const auto stride_aligned = [](int64_t stride) {
    return stride * static_cast<int64_t>(sizeof(float)) % kAlignedBytes == 0;
  };
  const bool strides_aligned =
      shape_.batch == 1 || (stride_aligned(shape_.stride_a) && stride_aligned(shape_.stride_b) &&
                            stride_aligned(shape_.stride_d));
  const bool all_aligned = aligned(a, kAlignedBytes) && aligned(b, kAlignedBytes) &&
                           aligned(d, kAlignedBytes) && aligned(vector, kAlignedBytes) &&
                           strides_aligned;
  const cublasLtMatmulAlgo_t* algo = nullptr;
  if (all_aligned && plan_->has_aligned) {
    algo = &plan_->algo_aligned;
  } else if (plan_->has_any) {
    algo = &plan_->algo_any;
  } else {
    throw_internal("Matmul::run",
                   "cuBLASLt offered no algorithm for pointers that are not 16-byte aligned (" +
                       describe(shape_, be_.precision()) + ")",
                   __FILE__, __LINE__);
  }
  // Host scalars (the default pointer mode): read when the call is made, so a recording keeps
  // them, and they never change for a planned matmul.
  const float alpha = 1.0f, beta = shape_.accumulate ? 1.0f : 0.0f;
  XO_CUBLAS_CHECK(cublasLtMatmul(
      be_.cublaslt(), plan_->desc, &alpha, b, plan_->lt_a, a, plan_->lt_b, &beta, d, plan_->lt_d, d,
      plan_->lt_d, algo, be_.matmul_workspace(), be_.matmul_workspace_bytes(), be_.stream()));
}

}  // namespace xo::cuda
