#pragma once
// The one error convention of sloserve: what may fail returns `expected<T>`, a value or the
// `error` that says why, or `status` (expected<void>). Factories, start-up, file readers and
// parsers all answer this way; the message is written for the user who has to act on it.
// (C++20 has no std::expected; this is the part of it sloserve uses.)

#include <string>
#include <utility>
#include <variant>

namespace sloserve {

struct error {
  std::string message;
};

// An error with `message`, for `return fail("...")` from a function returning expected or status.
inline error fail(std::string message) {
  return {std::move(message)};
}

template <class T>
class [[nodiscard]] expected {
 public:
  expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  expected(sloserve::error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  // Why it failed; only when !has_value().
  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, sloserve::error> v_;
};

template <>
class [[nodiscard]] expected<void> {
 public:
  expected() = default;
  expected(sloserve::error e) : error_(std::move(e.message)), failed_(true) {}

  bool has_value() const { return !failed_; }
  explicit operator bool() const { return has_value(); }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
  bool failed_ = false;
};

using status = expected<void>;

}  // namespace sloserve
