// N-dimensional constants for the ONNX importer's evaluator: row-major tensors of floats or
// integers, concatenated, transposed and sliced as ONNX's Concat, Transpose and Slice define
// (weights an exporter rearranged, shapes it assembled).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  // A tensor with a zero dimension has no elements, whatever its other dimensions: their
  // products may not fit, and are never used (saturated here rather than overflowed).
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) {
    if (__builtin_mul_overflow(strides[d], dims[d], &strides[d - 1])) {
      strides[d - 1] = std::numeric_limits<int64_t>::max();
    }
  }
  return strides;
}

// out[i] = in[source(i)] for every element of the output shape `dims`.
template <typename Source>
OnnxTensor gathered(const OnnxTensor& in, std::vector<int64_t> dims, Source source) {
  OnnxTensor out;
  out.type = in.type;
  out.dims = std::move(dims);
  const int64_t count = product(out.dims);
  const std::vector<int64_t> strides = strides_of(out.dims);
  std::vector<int64_t> at(out.dims.size());
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i;
    for (size_t d = 0; d < at.size(); ++d) {
      at[d] = rest / strides[d];
      rest %= strides[d];
    }
    const auto from = static_cast<size_t>(source(at));
    if (in.is_float()) {
      out.floats.push_back(in.floats[from]);
    } else {
      out.ints.push_back(in.ints[from]);
    }
  }
  return out;
}

}  // namespace

void Importer::check_materialised(const OnnxNode& n, const OnnxTensor& t) const {
  if (t.is_float() ? t.floats.size() != static_cast<size_t>(t.size())
                   : !t.is_integer() || t.ints.size() != static_cast<size_t>(t.size())) {
    refuse(n, fmt::format("an input of type {} without values crossover can read",
                          onnx_element_type_name(t.type)));
  }
}

OnnxTensor Importer::concat(const OnnxNode& n, const std::vector<OnnxTensor>& parts,
                            int64_t axis_attr) {
  if (parts.empty()) refuse(n, "a Concat of nothing");
  const size_t rank = parts[0].dims.size();
  const int64_t axis = normalise_axis(axis_attr, rank);
  if (rank == 0 || axis < 0 || axis >= static_cast<int64_t>(rank)) {
    refuse(n, fmt::format("axis {} of a rank-{} tensor", axis_attr, rank));
  }
  // The concatenation along `axis` is the parts' blocks of `inner` elements interleaved.
  OnnxTensor out = parts[0];
  out.floats.clear();
  out.ints.clear();
  out.dims[static_cast<size_t>(axis)] = 0;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= parts[0].dims[static_cast<size_t>(d)];
  for (const OnnxTensor& p : parts) {
    check_materialised(n, p);
    bool same = p.dims.size() == rank && p.is_float() == parts[0].is_float();
    for (size_t d = 0; same && d < rank; ++d) {
      same = static_cast<int64_t>(d) == axis || p.dims[d] == parts[0].dims[d];
    }
    if (!same) refuse(n, "its inputs' shapes or types do not concatenate");
    out.dims[static_cast<size_t>(axis)] += p.dims[static_cast<size_t>(axis)];
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (const OnnxTensor& p : parts) {
      const int64_t block = p.size() / std::max<int64_t>(outer, 1);
      if (p.is_float()) {
        out.floats.insert(out.floats.end(), p.floats.begin() + o * block,
                          p.floats.begin() + (o + 1) * block);
      } else {
        out.ints.insert(out.ints.end(), p.ints.begin() + o * block,
                        p.ints.begin() + (o + 1) * block);
      }
    }
  }
  return out;
}

OnnxTensor Importer::transposed(const OnnxNode& n, const OnnxTensor& in,
                                const std::vector<int64_t>& perm) {
  check_materialised(n, in);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d) {
    if (sorted[d] != static_cast<int64_t>(d) || perm.size() != in.dims.size()) {
      refuse(n, fmt::format("perm [{}] is not a permutation of {} axes", fmt::join(perm, ", "),
                            in.dims.size()));
    }
  }
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(in.dims[static_cast<size_t>(p)]);
  const std::vector<int64_t> strides = strides_of(in.dims);
  return gathered(in, dims, [&](const std::vector<int64_t>& at) {
    int64_t from = 0;
    for (size_t d = 0; d < at.size(); ++d) from += at[d] * strides[static_cast<size_t>(perm[d])];
    return from;
  });
}

OnnxTensor Importer::sliced(const OnnxNode& n, const OnnxTensor& in,
                            const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            std::vector<int64_t> axes, const std::vector<int64_t>& steps) {
  check_materialised(n, in);
  if (axes.empty()) {
    for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  const bool unit_steps = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
  if (starts.size() != ends.size() || starts.size() != axes.size() || !unit_steps ||
      (!steps.empty() && steps.size() != starts.size())) {
    refuse(n, "a Slice crossover evaluates has one start and end per axis and steps of 1");
  }
  std::vector<int64_t> from(in.dims.size(), 0), dims = in.dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = normalise_axis(axes[k], in.dims.size());
    if (axis < 0 || axis >= static_cast<int64_t>(in.dims.size())) {
      refuse(n, fmt::format("axis {} of a rank-{} tensor", axes[k], in.dims.size()));
    }
    const int64_t size = in.dims[static_cast<size_t>(axis)];
    auto clamp_index = [&](int64_t i) {
      return std::clamp(i < 0 ? i + size : i, int64_t{0}, size);
    };
    const int64_t begin = clamp_index(starts[k]), end = clamp_index(ends[k]);
    from[static_cast<size_t>(axis)] = begin;
    dims[static_cast<size_t>(axis)] = std::max<int64_t>(end - begin, 0);
  }
  const std::vector<int64_t> strides = strides_of(in.dims);
  return gathered(in, dims, [&](const std::vector<int64_t>& at) {
    int64_t offset = 0;
    for (size_t d = 0; d < at.size(); ++d) offset += (at[d] + from[d]) * strides[d];
    return offset;
  });
}

}  // namespace xo::onnx_importer
