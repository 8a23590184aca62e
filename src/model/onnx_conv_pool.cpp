// The ONNX importer's convolutions and pools: Conv, MaxPool and AveragePool over square windows, a
// Pad folded into the window after it, the global pools, and ReduceMean/ReduceMax as a pool over
// a sequence's steps or over a whole map.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

Importer::Window Importer::window(const OnnxNode& n, std::vector<int64_t> kernel,
                                  int64_t default_stride) {
  if (kernel.size() != 2 || kernel[0] != kernel[1]) {
    refuse(n, fmt::format("kernel [{}]: crossover's windows are square over two dimensions",
                          fmt::join(kernel, ", ")));
  }
  const std::vector<int64_t> strides = attr_ints(n, "strides", {default_stride, default_stride});
  if (strides.size() != 2 || strides[0] != strides[1]) {
    refuse(n, fmt::format("strides [{}]: crossover's windows have one stride for both dimensions",
                          fmt::join(strides, ", ")));
  }
  const std::vector<int64_t> dilations = attr_ints(n, "dilations", {1, 1});
  if (std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d != 1; })) {
    refuse(n, fmt::format("dilations [{}] are not supported", fmt::join(dilations, ", ")));
  }
  const std::vector<int64_t> pads_attr = attr_ints(n, "pads", {});
  const std::pair<const char*, const std::vector<int64_t>*> extents[] = {
      {"kernel", &kernel}, {"strides", &strides}, {"pads", &pads_attr}};
  for (const auto& [what, values] : extents) {
    const int64_t least = std::string_view(what) == "pads" ? 0 : 1;
    for (int64_t x : *values) {
      if (x < least || x > kMaxExtent) {
        refuse(n, fmt::format("{} [{}] (expected sizes from {} to 2^24)", what,
                              fmt::join(*values, ", "), least));
      }
    }
  }
  Window w{kernel[0], strides[0], 0};
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (pending_pad_ > 0 && auto_pad != "NOTSET") refuse(n, "auto_pad after a Pad node");
  if (auto_pad == "VALID") return w;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (w.stride != 1 || w.kernel % 2 == 0) {
      refuse(n, fmt::format("auto_pad {} with a {}x{} kernel and stride {} pads unevenly, which "
                            "crossover's layers do not",
                            auto_pad, w.kernel, w.kernel, w.stride));
    }
    w.padding = (w.kernel - 1) / 2;
    return w;
  }
  if (auto_pad != "NOTSET") refuse(n, fmt::format("auto_pad '{}' is not supported", auto_pad));
  const std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
  if (pads.size() != 4 ||
      std::any_of(pads.begin(), pads.end(), [&](int64_t p) { return p != pads[0]; })) {
    refuse(n, fmt::format("pads [{}]: crossover pads every side equally", fmt::join(pads, ", ")));
  }
  w.padding = pads[0];
  if (pending_pad_ > 0) {  // the Pad node before this one
    if (w.padding != 0) refuse(n, "pads of its own after a Pad node");
    w.padding = pending_pad_;
    pending_pad_ = 0;
  }
  return w;
}

void Importer::conv(const OnnxNode& n) {
  known_attributes(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch && sample_.size() == 3,
       "a Conv crossover maps is 2-D, on [channels, height, width]");
  if (attr_int(n, "group", 1) != 1) {
    refuse(n, fmt::format("group = {} (grouped or depthwise convolutions are not supported)",
                          attr_int(n, "group", 1)));
  }
  const OnnxTensor& w = weight(n, 1, "weight W");
  if (w.dims.size() != 4 || w.dims[1] != sample_[0]) {
    refuse(n, fmt::format("weight '{}' has the shape [{}] (expected [out, {}, k, k])", w.name,
                          fmt::join(w.dims, ", "), sample_[0]));
  }
  const std::vector<int64_t> kernel = attr_ints(n, "kernel_shape", {w.dims[2], w.dims[3]});
  if (kernel != std::vector<int64_t>{w.dims[2], w.dims[3]}) {
    refuse(n, fmt::format("kernel_shape [{}] differs from its weight's [{}, {}]",
                          fmt::join(kernel, ", "), w.dims[2], w.dims[3]));
  }
  const Window win = window(n, kernel, 1);
  Weights weights{{"weight", tensor(w.dims, w.floats)}};
  LayerSpec l;
  l.type = LayerType::Conv2d;
  l.out = w.dims[0];
  l.kernel = win.kernel;
  l.stride = win.stride;
  l.padding = win.padding;
  l.bias = !input(n, 2).empty();
  if (l.bias) {
    const OnnxTensor& b = weight(n, 2, "bias B");
    if (b.dims != std::vector<int64_t>{l.out}) {
      refuse(n, fmt::format("bias '{}' has the shape [{}] (expected [{}])", b.name,
                            fmt::join(b.dims, ", "), l.out));
    }
    weights["bias"] = tensor({l.out}, b.floats);
  }
  add_layer(l, n, std::move(weights), Layout::Batch);
}

void Importer::pool(const OnnxNode& n) {
  const bool max = n.op_type == "MaxPool";
  if (max) {
    known_attributes(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                         "storage_order", "strides"});
    no_users(n, 1, "the arg-max indices");
  } else {
    known_attributes(
        n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  }
  takes_data_first(n);
  need(n, layout_ == Layout::Batch && sample_.size() == 3,
       "a pool crossover maps is 2-D, on [channels, height, width]");
  if (attr_int(n, "ceil_mode", 0) != 0) refuse(n, "ceil_mode = 1 is not supported");
  const bool padded_before = pending_pad_ > 0;  // zeros of a Pad node are data: counted
  const Window win = window(n, attr_ints(n, "kernel_shape", {}), 1);
  if (!max && !padded_before && win.padding > 0 && attr_int(n, "count_include_pad", 0) == 0) {
    refuse(n,
           "an average over padding that leaves the padding out of the count "
           "(count_include_pad = 0) is not supported: crossover's avgpool2d counts it, as "
           "PyTorch's default");
  }
  LayerSpec l;
  l.type = max ? LayerType::MaxPool2d : LayerType::AvgPool2d;
  l.kernel = win.kernel;
  l.stride = win.stride;
  l.padding = win.padding;
  add_layer(l, n, {}, Layout::Batch);
}

// A pool over the whole (square) map: [C, H, H] → [C, 1, 1].
void Importer::whole_map_pool(const OnnxNode& n, bool max, const std::string& output) {
  if (sample_[1] != sample_[2]) {
    refuse(n, fmt::format("a pool over a {}x{} map: crossover's pools are square", sample_[1],
                          sample_[2]));
  }
  LayerSpec l;
  l.type = max ? LayerType::MaxPool2d : LayerType::AvgPool2d;
  l.kernel = l.stride = sample_[1];
  OnnxNode named = n;
  named.outputs = {output};
  add_layer(l, named, {}, Layout::Batch);
}

void Importer::global_pool(const OnnxNode& n) {
  known_attributes(n, {});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch && sample_.size() == 3,
       "a global pool crossover maps is over the map of [channels, height, width]");
  whole_map_pool(n, n.op_type == "GlobalMaxPool", output_of(n));
}

// PyTorch exports a pool's padding as a Pad before it: zeros on the spatial sides, folded into
// the next Conv or AveragePool (whose average counts them, as crossover's does).
void Importer::pad(const OnnxNode& n) {
  known_attributes(n, {"mode", "pads", "value"});
  takes_data_first(n);
  if (attr_string(n, "mode", "constant") != "constant") {
    refuse(n,
           fmt::format("mode '{}' (crossover pads with zeros only)", attr_string(n, "mode", "")));
  }
  const std::vector<int64_t> pads =
      g_.opset < 11 ? attr_ints(n, "pads", {}) : constant(n, input(n, 1)).ints;
  double value = attr_float(n, "value", 0.0);
  if (g_.opset >= 11 && !input(n, 2).empty()) {
    const OnnxTensor& v = constant(n, input(n, 2));
    value = v.is_float() && !v.floats.empty() ? v.floats[0] : v.ints.empty() ? 0.0 : v.ints[0];
  }
  const bool none = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  if (none) return set_current(output_of(n), layout_, sample_);
  const std::vector<int64_t> shape = full_shape();
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0 || p > kMaxExtent; })) {
    refuse(n, fmt::format("pads [{}] (expected 0 to 2^24 each)", fmt::join(pads, ", ")));
  }
  const bool spatial = layout_ == Layout::Batch && sample_.size() == 3 && pads.size() == 8 &&
                       pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0 &&
                       pads[2] > 0 && pads[2] == pads[3] && pads[2] == pads[6] &&
                       pads[2] == pads[7];
  if (!spatial || value != 0.0) {
    refuse(n, fmt::format("pads [{}] with {} on data laid out [{}] (crossover folds equal zero "
                          "padding of height and width into the next layer)",
                          fmt::join(pads, ", "), value, fmt::join(shape, ", ")));
  }
  pending_pad_ = pads[2];
  set_current(output_of(n), layout_, sample_);
}

void Importer::reduce(const OnnxNode& n) {
  known_attributes(n, {"axes", "keepdims", "noop_with_empty_axes"});
  takes_data_first(n);
  const bool max = n.op_type == "ReduceMax";
  const bool keep = attr_int(n, "keepdims", 1) != 0;
  std::vector<int64_t> axes = reduce_axes(n);
  const std::vector<int64_t> shape = full_shape();
  for (int64_t& a : axes) a = normalise_axis(a, shape.size());
  std::sort(axes.begin(), axes.end());
  const bool over_time =
      (layout_ == Layout::Batch && sample_.size() == 2 && axes == std::vector<int64_t>{1}) ||
      (layout_ == Layout::Time && axes == std::vector<int64_t>{0});
  if (over_time && !keep) {
    LayerSpec l;
    l.type = max ? LayerType::GlobalMaxPool : LayerType::GlobalAvgPool;
    return add_layer(l, n, {}, Layout::Batch);
  }
  if (layout_ == Layout::Batch && sample_.size() == 3 && axes == std::vector<int64_t>{2, 3}) {
    if (keep) return whole_map_pool(n, max, output_of(n));
    // [C, H, H] → pool to [C, 1, 1] → flatten to [C]
    whole_map_pool(n, max, n.name + "#pooled");
    LayerSpec flat;
    flat.type = LayerType::Flatten;
    return add_layer(flat, n, {}, Layout::Batch);
  }
  refuse(n, fmt::format("reduces axes [{}]{} of data laid out [{}] (crossover maps a mean or max "
                        "over a sequence's steps, keepdims = 0, or over a whole map)",
                        fmt::join(axes, ", "), keep ? " keeping them" : "", shape_text(shape)));
}

}  // namespace xo::onnx_importer
