// Checks that a call throws a UserError whose message contains every expected piece (the file,
// the line, the key, what was expected): error messages are part of crossover's interface.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace xo::testing {

template <typename Call>
void expect_user_error(Call&& call, const std::vector<std::string>& expected) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning '" << (expected.empty() ? "" : expected[0])
                  << "'";
  } catch (const UserError& e) {
    const std::string message = e.what();
    for (const auto& piece : expected) {
      EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
    }
  }
}

// The message of the UserError that `call` throws, or a marker that makes every check of it fail.
template <typename Call>
std::string user_error(Call&& call) {
  try {
    call();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError thrown>";
}

}  // namespace xo::testing
