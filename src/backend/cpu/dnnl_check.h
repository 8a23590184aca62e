// The one checked-call macro for oneDNN: a failing call becomes an InternalError carrying the
// expression, file, line and oneDNN's status.
#pragma once

#include <fmt/format.h>

#include <dnnl.hpp>

#include "core/error.h"

#define XO_DNNL_CHECK(expr)                                                                 \
  [&]() -> decltype(auto) {                                                                 \
    try {                                                                                   \
      return (expr);                                                                        \
    } catch (const dnnl::error& e) {                                                        \
      ::xo::throw_internal(                                                                 \
          #expr, fmt::format("oneDNN status {}: {}", static_cast<int>(e.status), e.what()), \
          __FILE__, __LINE__);                                                              \
    }                                                                                       \
  }()
