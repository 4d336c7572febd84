#pragma once
// What a request's SLO has already lost when it reaches the frontend: the network time its
// client reports (or, when it reports none, a moving average of what it reported before), or the
// time since the client sent it by its own clock. CAF-free; the frontend owns one.

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>

namespace sloserve {

class client_time {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  struct spent {
    double spent_ms = 0;     // taken off the SLO
    double network_ms = -1;  // reported or estimated network time; -1: none known
    double waited_ms = -1;   // since the client sent it, clock offset removed; -1: no send time
  };

  // `network_ms` < 0: none reported. `sent_at_us` 0: no send time. `wall_us`: this node's wall
  // clock at arrival; `now`: its steady clock. Send times within `tolerance_ms` of the least
  // delay a client's recent requests showed count as they are; beyond it that least delay is a
  // clock offset, and only what a request took beyond it counts.
  spent on_request(const std::string& client, double network_ms, int64_t sent_at_us, int64_t wall_us, time_point now,
                   double tolerance_ms);

 private:
  struct clock {
    double low_ms = std::numeric_limits<double>::infinity();       // since `since`
    double prev_low_ms = std::numeric_limits<double>::infinity();  // the window before
    time_point since;
    double offset_ms(double waited_ms, time_point now, double tolerance_ms);
  };
  std::unordered_map<std::string, double> network_ms_;
  std::unordered_map<std::string, clock> clocks_;
};

}  // namespace sloserve
