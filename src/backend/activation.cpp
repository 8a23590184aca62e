// The activations' names as specs and reports write them (backend.h Activation).
#include "backend/backend.h"

namespace xo {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None:
      return "none";
    case Activation::ReLU:
      return "relu";
    case Activation::Tanh:
      return "tanh";
    case Activation::Sigmoid:
      return "sigmoid";
    case Activation::LeakyReLU:
      return "leaky_relu";
  }
  return "?";
}

}  // namespace xo
