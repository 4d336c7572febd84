// The frontend's intake gate, driven by a simulated frontend that takes requests in one at a time.

#include <gtest/gtest.h>

#include <deque>
#include <optional>

#include "actors/intake_gate.hpp"
#include "actors/kserve_call.hpp"
#include "actors/link.hpp"
#include "actors/node_runtime.hpp"

namespace sloserve {
namespace {

// A frontend that takes in 1,000 requests/s, in order, offered `rate` requests/s of a 100 ms SLO
// for `seconds`: how many were refused at the gate, and how many were taken in with more than
// `late_ms` of their SLO spent waiting.
struct intake_run {
  int offered = 0, refused = 0, taken = 0, taken_late = 0;
  uint32_t still_waiting = 0;  // the gate's count once all were taken
};
intake_run run_intake(double rate, double seconds, bool gated, double late_ms = 50) {
  intake_gate g;
  intake_run r;
  std::deque<int64_t> waiting;  // hand-over times
  int64_t next_take = 0;
  const int64_t take_ns = 1'000'000, slo_ns = 100'000'000;
  auto take_until = [&](int64_t t) {
    while (!waiting.empty() && std::max(next_take, waiting.front()) + take_ns <= t) {
      next_take = std::max(next_take, waiting.front()) + take_ns;
      g.taken(next_take, waiting.front(), 0.1);
      r.taken_late += next_take - waiting.front() > late_ms * 1e6;
      ++r.taken;
      waiting.pop_front();
    }
  };
  for (int64_t t = 0; t < seconds * 1e9; t += static_cast<int64_t>(1e9 / rate)) {
    take_until(t);
    ++r.offered;
    if (gated && !g.admit(t, static_cast<double>(slo_ns) / 1e9).empty()) {
      ++r.refused;
      continue;
    }
    if (!gated) g.admit(t, 0.1);  // counted all the same; the answer is ignored
    waiting.push_back(t);
  }
  take_until(INT64_MAX / 2);
  r.still_waiting = g.waiting();
  return r;
}

TEST(intake_gate, twice_what_the_frontend_takes_in_is_refused_at_the_door_and_what_is_taken_is_fresh) {
  auto open = run_intake(2000, 3, false);
  auto gated = run_intake(2000, 3, true);
  // Ungated, the mailbox grows by half a second a second: nearly everything waits past half its SLO.
  EXPECT_GT(open.taken_late, 0.9 * open.taken);
  // Gated: about half refused at once, and what is taken in fresh but for the build-up before
  // the wait was seen to stand (its first 140 ms or so).
  EXPECT_NEAR(gated.refused, 3000, 300);
  EXPECT_LT(gated.taken_late, 0.1 * gated.taken);
  EXPECT_EQ(gated.refused + gated.taken, gated.offered);
  EXPECT_EQ(gated.still_waiting, 0u);
}

TEST(intake_gate, below_what_the_frontend_takes_in_nothing_is_refused) {
  auto below = run_intake(800, 3, true);
  EXPECT_EQ(below.refused, 0);
  EXPECT_EQ(below.taken_late, 0);
}

}  // namespace
}  // namespace sloserve

namespace sloserve {
namespace {

// A node's link on a clock the test sets.
class clocked_link final : public link {
 public:
  const std::string& self_name() const override { return name_; }
  const local_actors& local() const override { return actors_; }
  void to_node(const std::string&, msg::envelope) override {}
  void to_client(const std::string&, msg::body) override {}
  int64_t now_ns() const override { return now; }
  int64_t now = 0;

 private:
  std::string name_ = "n";
  local_actors actors_;
};

// What the HTTP and gRPC ingresses pass before the frontend (node_runtime::intake_gate_of and
// kserve::admitted): offered 2,000 requests/s of a 100 ms SLO that the frontend takes in at 1,000,
// calls are refused at the door, answered OVERLOADED with the reason through their sinks and
// counted; what passes is stamped with when it was handed over. With runtime.path_guard off,
// nothing is refused.
int refused_at_the_door(bool path_guard, std::string& reason, std::string& metrics) {
  auto l = std::make_shared<clocked_link>();
  auto cfg = std::make_shared<cluster_config>();
  cfg->runtime.path_guard = path_guard;
  l->config = std::make_shared<config_source>(cfg);
  auto admit = node_runtime::intake_gate_of(l);
  std::deque<int64_t> waiting;
  int64_t next_take = 0;
  int refused = 0;
  for (int64_t t = 0; t < 3'000'000'000; t += 500'000) {
    while (!waiting.empty() && std::max(next_take, waiting.front()) + 1'000'000 <= t) {
      next_take = std::max(next_take, waiting.front()) + 1'000'000;
      l->intake.taken(next_take, waiting.front(), 0.1);
      waiting.pop_front();
    }
    l->now = t;
    msg::client_request rq;
    rq.pipeline = "p";
    rq.request_id = static_cast<uint64_t>(t);
    std::optional<msg::client_reply> answered;
    auto sink = kserve::gather_replies(1, [&](std::vector<msg::client_reply> r) { answered = r.front(); })(0);
    if (kserve::admitted(admit, rq, 100, sink)) {
      EXPECT_FALSE(answered);
      if (path_guard) {
        EXPECT_EQ(rq.received_ns, t);
      }
      if (rq.received_ns > 0) waiting.push_back(rq.received_ns);
      continue;
    }
    ++refused;
    EXPECT_TRUE(answered && answered->code == msg::status::overloaded && answered->request_id == rq.request_id);
    if (answered) reason = answered->reason;
  }
  metrics = l->metrics.render("n", 3);
  return refused;
}

TEST(intake_gate, the_http_and_grpc_ingresses_pass_the_nodes_gate_before_the_frontend) {
  std::string reason, metrics;
  int refused = refused_at_the_door(true, reason, metrics);
  EXPECT_GT(refused, 1000);
  EXPECT_LT(refused, 4000);
  EXPECT_NE(reason.find("the frontend's intake is backed up"), std::string::npos) << reason;
  EXPECT_NE(metrics.find("reason=\"intake_backed_up\"} " + std::to_string(refused)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("pipeline=\"p\",outcome=\"overloaded\"} " + std::to_string(refused)), std::string::npos)
      << metrics;
  EXPECT_EQ(refused_at_the_door(false, reason, metrics), 0);
}

}  // namespace
}  // namespace sloserve
