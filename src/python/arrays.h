// NumPy arrays in and out of the engine. Samples come in as float32 C-contiguous arrays and labels
// as int32 (or float32 targets), used where they are (data/arrays.h); the Python layer
// (python/crossover/_arrays.py) converts anything else once and says so. Tensors go out as copies
// the caller owns.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "data/dataset.h"
#include "io/safetensors.h"
#include "model/spec.h"

namespace xo::python {

namespace py = pybind11;

// Samples `x` ([samples, *spec.input] or [samples, features]) and their labels `y` ([samples] or
// [samples, 1]: int32 class labels for a classifier, float32 targets for a regression, `classes`
// 0) as a borrowed data set. The arrays must outlive it (the call that uses it holds them).
// `what` names them in errors: "fit()". Throws TypeError (py::type_error) for a dtype or layout
// the Python layer should have converted, UserError (ValueError) for a shape the model does not
// take or a value the data may not hold.
Dataset borrow_samples(const py::array& x, const py::array& y, const ModelSpec& spec,
                       int64_t classes, const std::string& what);
// The samples alone (predict): no labels.
Dataset borrow_inputs(const py::array& x, const ModelSpec& spec, const std::string& what);

// A copy as a NumPy array of the tensor's shape.
py::array_t<float> to_numpy(const NamedTensor& t);
// name -> array (a dict, as PyTorch's state_dict), copies.
py::dict to_state_dict(const std::vector<NamedTensor>& tensors);
// A dict of name -> array-like as tensors (float32 copies), in the dict's order.
std::vector<NamedTensor> from_state_dict(const py::dict& state);

}  // namespace xo::python
