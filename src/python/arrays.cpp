#include "python/arrays.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "data/arrays.h"

namespace xo::python {
namespace {

std::string shape_text(const py::array& a) {
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  return shape.size() == 1 ? fmt::format("({},)", shape[0])
                           : fmt::format("({})", fmt::join(shape, ", "));
}

bool c_contiguous(const py::array& a) { return (a.flags() & py::array::c_style) != 0; }

void require(const py::array& a, const py::dtype& dtype, const std::string& name,
             const char* expected) {
  if (!a.dtype().is(dtype) || !c_contiguous(a)) {
    throw py::type_error(fmt::format(
        "{}: a {} array, C-contiguous, expected here (got {}{}); crossover.Model converts other "
        "arrays before this call",
        name, expected, std::string(py::str(a.dtype())),
        c_contiguous(a) ? "" : ", not contiguous"));
  }
}

// The features of one sample the model takes, checked against x's shape.
int64_t sample_features(const py::array& x, const ModelSpec& spec, const std::string& name) {
  const int64_t wanted =
      std::accumulate(spec.input.begin(), spec.input.end(), int64_t{1}, std::multiplies<>());
  int64_t got = 1;
  for (py::ssize_t d = 1; d < x.ndim(); ++d) got *= x.shape(d);
  const bool shaped = x.ndim() - 1 == static_cast<py::ssize_t>(spec.input.size()) &&
                      std::equal(spec.input.begin(), spec.input.end(), x.shape() + 1);
  if (x.ndim() < 2 || got != wanted || (x.ndim() > 2 && !shaped)) {
    throw UserError(fmt::format(
        "{}: shape {} does not fit model '{}', whose samples are [{}] (expected (samples, {}) or "
        "(samples, {}))",
        name, shape_text(x), spec.name, fmt::join(spec.input, ", "), wanted,
        fmt::join(spec.input, ", ")));
  }
  return wanted;
}

// x as arrays of the engine's (y left for the caller), its checks made.
SampleArrays sample_arrays(const py::array& x, const ModelSpec& spec, const std::string& what) {
  SampleArrays a;
  a.x_name = fmt::format("{} x", what);
  a.y_name = fmt::format("{} y", what);
  require(x, py::dtype::of<float>(), a.x_name, "float32");
  a.x = static_cast<const float*>(x.data());
  a.samples = x.ndim() > 0 ? x.shape(0) : 0;
  a.features = sample_features(x, spec, a.x_name);
  // The caller's frame holds the arrays for the call: a marker that the data is borrowed, owning
  // nothing.
  a.owner = std::shared_ptr<const void>(x.data(), [](const void*) {});
  return a;
}

}  // namespace

Dataset borrow_inputs(const py::array& x, const ModelSpec& spec, const std::string& what) {
  return borrow_arrays(sample_arrays(x, spec, what), 0);
}

Dataset borrow_samples(const py::array& x, const py::array& y, const ModelSpec& spec,
                       int64_t classes, const std::string& what) {
  SampleArrays a = sample_arrays(x, spec, what);
  if (classes == 0) {
    require(y, py::dtype::of<float>(), a.y_name, "float32 (regression targets)");
  } else {
    require(y, py::dtype::of<int32_t>(), a.y_name, "int32 (class labels)");
  }
  const bool column = y.ndim() == 2 && y.shape(1) == 1;
  if ((y.ndim() != 1 && !column) || y.shape(0) != a.samples) {
    throw UserError(fmt::format("{}: shape {} for {} samples of x (expected ({},))", a.y_name,
                                shape_text(y), a.samples, a.samples));
  }
  a.y = y.data();
  return borrow_arrays(a, classes);
}

py::array_t<float> to_numpy(const NamedTensor& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array_t<float> a(shape);
  std::memcpy(a.mutable_data(), t.data.data(), t.data.size() * sizeof(float));
  return a;
}

py::dict to_state_dict(const std::vector<NamedTensor>& tensors) {
  py::dict state;
  for (const NamedTensor& t : tensors) state[py::str(t.name)] = to_numpy(t);
  return state;
}

std::vector<NamedTensor> from_state_dict(const py::dict& state) {
  std::vector<NamedTensor> tensors;
  for (const auto& [key, value] : state) {
    if (!py::isinstance<py::str>(key)) {
      throw py::type_error(
          fmt::format("state_dict: key {} is not a str (expected tensor names "
                      "such as '0.weight')",
                      std::string(py::repr(key))));
    }
    const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(value);
    if (!a) {
      throw py::type_error(
          fmt::format("state_dict['{}']: not an array of numbers", key.cast<std::string>()));
    }
    NamedTensor t;
    t.name = key.cast<std::string>();
    t.shape.assign(a.shape(), a.shape() + a.ndim());
    t.data.assign(a.data(), a.data() + a.size());
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace xo::python
