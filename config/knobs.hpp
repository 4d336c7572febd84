#pragma once
// Every enumerated knob of sloserve, each with the one table of the names users write. The config
// parser, the factories and the CLI read these tables; past parsing, knobs are enums and nothing
// compares their names. Dependency-free, so that every floor (scheduling/ included) may use it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace sloserve {

enum class role : uint8_t { controller, frontend, worker };
enum class device_kind : uint8_t { emulated, cpu, cuda, network_switch };
enum class scheduler_policy : uint8_t { nexus, batch_oblivious, static_plan, ipa, jellyfish, piccolo, graft };
enum class split_policy : uint8_t { dp, even };
enum class scaler_policy : uint8_t { none, fa2, sponge, biscale, ipa };
enum class predictor_kind : uint8_t { trend, recent_max, lstm };
enum class drop_policy_kind : uint8_t { sliding_window, earliest_first, maximal_window };
enum class balancer_kind : uint8_t { p2c, weighted_random };
enum class arrival_kind : uint8_t { constant, poisson, gamma };
enum class actor_scheduling_kind : uint8_t { sharing, stealing };

// knob<E>::names lists every value of E with its name, in the order help texts show them.
template <class E>
struct knob;

#define SLOSERVE_KNOB(E, ...)                                                \
  template <>                                                                \
  struct knob<E> {                                                           \
    static constexpr std::pair<E, std::string_view> names[] = {__VA_ARGS__}; \
  }

SLOSERVE_KNOB(role, {role::controller, "controller"}, {role::frontend, "frontend"}, {role::worker, "worker"});
SLOSERVE_KNOB(device_kind, {device_kind::emulated, "emulated"}, {device_kind::cpu, "cpu"}, {device_kind::cuda, "cuda"},
              {device_kind::network_switch, "switch"});
SLOSERVE_KNOB(scheduler_policy, {scheduler_policy::nexus, "nexus"},
              {scheduler_policy::batch_oblivious, "batch-oblivious"}, {scheduler_policy::static_plan, "static"},
              {scheduler_policy::ipa, "ipa"}, {scheduler_policy::jellyfish, "jellyfish"},
              {scheduler_policy::piccolo, "piccolo"}, {scheduler_policy::graft, "graft"});
SLOSERVE_KNOB(split_policy, {split_policy::dp, "dp"}, {split_policy::even, "even"});
SLOSERVE_KNOB(scaler_policy, {scaler_policy::none, "none"}, {scaler_policy::fa2, "fa2"},
              {scaler_policy::sponge, "sponge"}, {scaler_policy::biscale, "biscale"}, {scaler_policy::ipa, "ipa"});
SLOSERVE_KNOB(predictor_kind, {predictor_kind::trend, "trend"}, {predictor_kind::recent_max, "recent_max"},
              {predictor_kind::lstm, "lstm"});
SLOSERVE_KNOB(drop_policy_kind, {drop_policy_kind::sliding_window, "sliding_window"},
              {drop_policy_kind::earliest_first, "earliest_first"},
              {drop_policy_kind::maximal_window, "maximal_window"});
SLOSERVE_KNOB(balancer_kind, {balancer_kind::p2c, "p2c"}, {balancer_kind::weighted_random, "weighted_random"});
SLOSERVE_KNOB(actor_scheduling_kind, {actor_scheduling_kind::sharing, "sharing"},
              {actor_scheduling_kind::stealing, "stealing"});
SLOSERVE_KNOB(arrival_kind, {arrival_kind::constant, "constant"}, {arrival_kind::poisson, "poisson"},
              {arrival_kind::gamma, "gamma"});

#undef SLOSERVE_KNOB

// Whether E is a knob (has a name table).
template <class E, class = void>
inline constexpr bool is_knob_v = false;
template <class E>
inline constexpr bool is_knob_v<E, std::void_t<decltype(knob<E>::names)>> = true;

template <class E>
std::optional<E> parse_knob(std::string_view name) {
  for (auto& [value, n] : knob<E>::names)
    if (n == name) return value;
  return std::nullopt;
}

template <class E>
std::string_view knob_name(E value) {
  for (auto& [v, n] : knob<E>::names)
    if (v == value) return n;
  return "?";
}

// The names of E joined by `sep`, for errors and help texts ("nexus | batch-oblivious | static").
template <class E>
std::string knob_choices(std::string_view sep = " | ") {
  std::string out;
  for (auto& [v, n] : knob<E>::names) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

// The names of E as a phrase, for errors ("nexus, batch-oblivious or static").
template <class E>
std::string knob_alternatives() {
  std::string out;
  size_t n = std::size(knob<E>::names);
  for (size_t i = 0; i < n; ++i) {
    if (i) out += i + 1 == n ? " or " : ", ";
    out += knob<E>::names[i].second;
  }
  return out;
}

}  // namespace sloserve
