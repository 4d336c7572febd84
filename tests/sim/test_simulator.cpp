#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "config/cluster_config.hpp"
#include "gpu/executor.hpp"
#include "sim/engine.hpp"
#include "sim/simulator.hpp"
#include "tests/text_file.hpp"

namespace sloserve::sim {
namespace {

// Two workers of one device each under the two-stage fan-out pipeline of the integration tests
// (tests/integration/two_stage.yaml): the two carry about 500 queries/s.
using sloserve::testing::read_text;
const std::string two_workers = R"(cluster: {name: t}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
)" + read_text(SLOSERVE_TWO_STAGE_YAML);

cluster_config parse(const std::string& yaml) {
  auto parsed = parse_cluster_config(yaml, "t.yaml");
  EXPECT_TRUE(parsed) << parsed.error_text();
  return std::move(*parsed.config);
}

options load(double rate, double seconds) {
  options o;
  o.pipelines = {"traffic"};
  o.rate = rate;
  o.duration_s = seconds;
  return o;
}

// The share of the requests sent in seconds [from, to) of the series answered OK within the SLO.
double share_within(const load_summary& s, size_t from, size_t to) {
  uint64_t sent = 0, ok = 0;
  for (size_t t = from; t < to && t < s.series.size(); ++t) {
    sent += s.series[t]["sent"].get<uint64_t>();
    ok += s.series[t]["ok_within_slo"].get<uint64_t>();
  }
  return sent ? static_cast<double>(ok) / static_cast<double>(sent) : 0;
}

void expect_one_reply_each(const load_summary& s) {
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.sent, s.ok + s.dropped + s.errors + s.overloaded);
}

TEST(simulator, every_request_gets_one_reply_and_the_scheduler_plans_on_the_measured_rate) {
  auto cfg = parse(two_workers);
  auto r = simulate(cfg, load(300, 10));
  ASSERT_TRUE(r) << r.error();
  expect_one_reply_each(r->summary);
  EXPECT_GT(r->summary.sent, 2700u);
  EXPECT_GE(r->summary.attainment, 0.99);
  EXPECT_GE(r->plans, 1u);  // nexus: the first epoch after the rates settled
  EXPECT_EQ(r->devices, 2u);
  // Beyond the two devices' capacity, the early drop answers what cannot make it.
  auto over = simulate(cfg, load(700, 10));
  ASSERT_TRUE(over);
  expect_one_reply_each(over->summary);
  EXPECT_GT(over->summary.dropped, over->summary.sent / 10);
  EXPECT_LT(over->summary.attainment, 0.9);
}

TEST(simulator, the_same_seed_gives_the_same_run_and_another_seed_another) {
  auto cfg = parse(two_workers);
  auto a = simulate(cfg, load(480, 5));
  auto b = simulate(cfg, load(480, 5));
  auto o = load(480, 5);
  o.seed = 2;
  auto c = simulate(cfg, o);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->summary.sent, b->summary.sent);
  EXPECT_EQ(a->summary.dropped, b->summary.dropped);
  EXPECT_EQ(a->summary.p99, b->summary.p99);
  EXPECT_EQ(a->events, b->events);
  EXPECT_NE(a->events, c->events);
}

// Simulated devices run their type's profile, slowed on a fractional instance: 400 queries/s
// overload the default profile's device, not a 4x faster type's, and again a quarter of it.
TEST(simulator, devices_run_their_types_profile_and_their_share) {
  auto yaml = [](const std::string& device) {
    return R"(device_types: [{name: fast, price: 2}]
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w, address: tcp://127.0.0.1:0, roles: [worker], devices: [)" +
           device + R"(]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 16,
     profile: {alpha_ms: 4, beta_ms: 8}, profiles: {fast: {alpha_ms: 1, beta_ms: 2}}}
pipelines:
  - {name: traffic, slo_ms: 100, stages: [{name: s, model: m}]}
scheduler: {policy: static}
)";
  };
  auto run = [&](const std::string& device) {
    auto r = simulate(parse(yaml(device)), load(400, 5));
    EXPECT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    return r->summary.attainment;
  };
  EXPECT_LT(run("{kind: emulated}"), 0.9);
  EXPECT_GE(run("{kind: emulated, type: fast}"), 0.99);
  EXPECT_LT(run("{kind: emulated, type: fast, shares: [0.25]}"), 0.9);
}

TEST(simulator, a_static_plan_never_changes) {
  auto cfg = parse(two_workers + "scheduler: {policy: static}\n");
  auto r = simulate(cfg, load(200, 5));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->plans, 0u);
  expect_one_reply_each(r->summary);
  EXPECT_GE(r->summary.attainment, 0.99);
}

// A stage over versions of its model runs each by its weight, as the frontend draws them, under
// the epoch policies and the static one.
TEST(simulator, a_stage_over_versions_runs_each_by_its_weight) {
  for (auto* policy : {"nexus", "static"}) {
    auto cfg = parse(std::string(R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: det, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}}
  - {name: det, version: 2, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8, profile: {alpha_ms: 1, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: det, versions: [{version: 1, weight: 80}, {version: 2, weight: 20}]}]}
scheduler: {policy: )") +
                     policy + "}\n");
    options o;
    o.rate = 200;
    o.duration_s = 10;
    std::map<std::string, int> ran;
    o.on_invocation = [&](uint64_t, size_t, const std::string& model, int64_t) { ++ran[model]; };
    auto r = simulate(cfg, o);
    ASSERT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    EXPECT_GE(r->summary.attainment, 0.99) << policy;
    ASSERT_EQ(ran.size(), 2u) << policy;
    double total = 0;
    for (auto& [m, n] : ran) total += n;
    auto second = std::find_if(ran.begin(), ran.end(), [](auto& kv) { return kv.first != "det"; });
    ASSERT_NE(second, ran.end());
    EXPECT_NEAR(second->second / total, 0.2, 0.02) << policy << ": " << second->first;
  }
}

// One and a half times what two shared devices carry, half of it for a pipeline of higher
// priority: the devices offer its queue their turn first, so nearly all of it is answered (what
// is left goes to the low one); of one priority, the two share the devices alike.
TEST(simulator, devices_run_a_higher_prioritys_queue_first) {
  auto yaml = [](int low_priority) {
    return R"(
nodes:
  - {name: fe, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: hm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
  - {name: lm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
pipelines:
  - {name: high, slo_ms: 100, priority: 1, stages: [{name: s, model: hm}]}
  - {name: low, slo_ms: 100, priority: )" +
           std::to_string(low_priority) + R"(, stages: [{name: s, model: lm}]}
scheduler: {policy: static}
)";
  };
  options o;
  o.rate = 320;  // 160/s each
  o.duration_s = 10;
  auto ranked = simulate(parse(yaml(0)), o), alike = simulate(parse(yaml(1)), o);
  ASSERT_TRUE(ranked) << ranked.error();
  ASSERT_TRUE(alike) << alike.error();
  expect_one_reply_each(ranked->summary);
  auto share = [](const result& r, const char* pipeline) {
    auto& c = r.pipelines.at(pipeline);
    return c.sent ? static_cast<double>(c.within_slo) / static_cast<double>(c.sent) : 0;
  };
  std::cout << "ranked: high " << share(*ranked, "high") << ", low " << share(*ranked, "low") << "; alike: high "
            << share(*alike, "high") << ", low " << share(*alike, "low") << "\n";
  EXPECT_GT(share(*ranked, "high"), 0.99);
  EXPECT_GT(share(*ranked, "low"), 0.15) << "what is left goes to the low one";
  EXPECT_LT(share(*alike, "high"), 0.8);
  EXPECT_NEAR(share(*alike, "high"), share(*alike, "low"), 0.1);
}

TEST(simulator, a_failed_worker_loses_nothing_and_the_survivor_serves_after_detection) {
  auto cfg = parse(two_workers);
  auto o = load(150, 10);
  o.failures.push_back({"w2", 4, -1});
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r) << r.error();
  expect_one_reply_each(r->summary);
  // Seconds 0-3 are served by both; from a second after the failure (detection takes 0.5 s),
  // the survivor answers nearly everything within the SLO.
  auto& series = r->summary.series;
  ASSERT_EQ(series.size(), 10u);
  for (size_t t = 5; t < 10; ++t)
    EXPECT_GE(series[t]["ok_within_slo"].get<double>(), 0.95 * series[t]["sent"].get<double>()) << series[t].dump();
  EXPECT_GE(r->plans, 2u);  // the survivors are planned for at once
  // With no worker left, every request still gets its reply: an error.
  o.failures.push_back({"w1", 4, -1});
  auto none = simulate(cfg, o);
  ASSERT_TRUE(none);
  expect_one_reply_each(none->summary);
  EXPECT_GT(none->summary.errors, none->summary.sent / 3);
}

TEST(simulator, a_worker_that_returns_gets_work_again) {
  auto cfg = parse(two_workers);
  auto o = load(400, 12);
  o.failures.push_back({"w2", 3, 6});
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r);
  expect_one_reply_each(r->summary);
  // 400 queries/s need both workers: the last seconds, with w2 back, meet the SLO again.
  auto& series = r->summary.series;
  for (size_t t = 9; t < 12; ++t)
    EXPECT_GE(series[t]["ok_within_slo"].get<double>(), 0.97 * series[t]["sent"].get<double>()) << series[t].dump();
}

// The autoscaling workload of bench_autoscale: det -> cls with l(b, c) per model, instances that
// take 2 s to load, a burst of x5 for 5 s. The scaler's own code decides; biscale meets the burst
// in place, fa2 only at its next horizontal period.
std::string scaled(const std::string& policy, bool spares = true) {
  return R"(cluster: {name: autoscale}
nodes:
  - {name: n, address: tcp://127.0.0.1:0, roles: [controller, frontend, worker], cores: 48, devices: [{kind: emulated, count: 24}]}
models:
  - {name: det, input: {dtype: float32, shape: [16]}, output: {dtype: float32, shape: [4]}, max_batch: 8,
     profile: {batch: [1, 2, 4, 8], latency_ms: [27, 36, 54, 90]}, cores: {gamma_ms: 8, epsilon_ms: 16, delta_ms: 1, eta_ms: 2},
     load_ms: 2000}
  - {name: cls, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {batch: [1, 2, 4, 8], latency_ms: [13.5, 18, 27, 45]}, cores: {gamma_ms: 4, epsilon_ms: 8, delta_ms: 0.5, eta_ms: 1},
     load_ms: 2000}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]}]}
runtime: {beacon_ms: 100}
scheduler: {spares: )" +
         std::string(spares ? "true" : "false") + R"(}
scaler: {policy: )" +
         policy + R"(, max_cores: 16, predictor: recent_max}
)";
}

// The policies alone (no spares to spill to), as Biscale's paper compares them: FA2's horizontal
// scaling misses much of a burst that Biscale's vertical loop meets in place.
TEST(simulator, the_scaler_meets_a_burst_with_the_clusters_own_policies) {
  options o;
  o.pipelines = {"p"};
  o.trace.assign(40, 100);
  for (size_t t = 25; t < 30; ++t) o.trace[t] = 500;
  o.duration_s = 40;
  std::map<std::string, result> runs;
  for (auto policy : {"fa2", "biscale"}) {
    auto cfg = parse(scaled(policy, false));
    auto r = simulate(cfg, o);
    ASSERT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    EXPECT_GT(r->scaling.core_seconds, 0);
    runs.emplace(policy, std::move(*r));
  }
  auto missed = [](const result& r) { return 1 - r.summary.attainment; };
  EXPECT_GT(missed(runs.at("fa2")), 0.05);
  EXPECT_LT(missed(runs.at("biscale")), 0.25 * missed(runs.at("fa2")));
  EXPECT_GT(runs.at("biscale").scaling.vertical_changes, 0u);
}

// IPA under per-path SLOs: config/examples/ipa.yaml's filter also feeds an alarm (three variants
// of its own) that must answer within 120 ms, the classifier within the pipeline's 400 ms. IPA
// plans every path within its own SLO, so the alarm's plan fits its 120 ms as planned; planned
// for one SLO, its choice only fit after `offsets_from_budgets` squeezed its budget, and requests
// were dropped.
TEST(simulator, ipa_plans_each_path_within_its_own_slo) {
  auto y = read_text(std::string(SLOSERVE_EXAMPLES_DIR) + "/ipa.yaml");
  auto twin = [&](const std::string& name, const std::string& as) {
    auto at = y.find("  - {name: " + name + ",");
    auto end = y.find("load_ms", at);
    end = y.find("}", end) + 2;
    auto text = y.substr(at, end - at);
    text.replace(text.find(name), name.size(), as);
    return text;
  };
  auto extra = twin("resnet18", "a18") + twin("resnet50", "a50") + twin("resnet152", "a152");
  y.insert(y.find("pipelines:"), extra);
  y.insert(y.find("runtime:"), "      - {name: alarm, variants: [a18, a50, a152], after: [filter], slo_ms: 120}\n");
  auto cfg = parse(y);
  options o;
  o.pipelines = {"video"};
  o.rate = 40;
  o.duration_s = 60;
  o.warmup_s = 10;
  double worst = 0;
  o.on_invocation = [&](uint64_t, size_t, const std::string& model, int64_t deadline_ns) {
    if (model[0] == 'a' && model != "alarm") worst = std::max(worst, static_cast<double>(deadline_ns) / 1e6);
  };
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r) << r.error();
  std::printf("ipa, per-path SLOs: attainment %.4f, dropped %llu, alarm deadlines up to %.1f ms, late %s\n",
              r->summary.attainment, static_cast<unsigned long long>(r->summary.dropped), worst,
              r->summary.late_paths.dump().c_str());
  expect_one_reply_each(r->summary);
  EXPECT_GE(r->summary.attainment, 0.99);
  EXPECT_LE(worst, 120.0 + 1e-6);
  EXPECT_LE(r->summary.late_paths.value("alarm", 0), r->summary.sent / 200);
}

// FA2's per-path SLOs: det feeds a classifier under the pipeline's 200 ms and an alarm that
// must answer within 70 ms of the query's arrival. The plan and the stage deadlines keep the
// alarm's path within its own SLO; without it, the alarm is given the slow path's slack.
TEST(simulator, fa2_keeps_each_path_within_its_own_slo) {
  auto config = [](const std::string& alarm_slo) {
    auto y = scaled("fa2");
    y.replace(y.find("pipelines:"), std::string::npos,
              R"(pipelines:
  - {name: p, slo_ms: 200, stages: [{name: det, model: det}, {name: cls, model: cls, after: [det]},
                                    {name: alarm, model: alm, after: [det])" +
                  alarm_slo + R"(}]}
runtime: {beacon_ms: 100}
scheduler: {spares: true}
scaler: {policy: fa2, max_cores: 16, predictor: recent_max}
)");
    y.insert(y.find("pipelines:"),
             R"(  - {name: alm, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {batch: [1, 2, 4, 8], latency_ms: [6, 7, 9, 13]}, cores: {gamma_ms: 1, epsilon_ms: 4, delta_ms: 0.5, eta_ms: 0.5},
     load_ms: 2000}
)");
    return parse(y);
  };
  options o;
  o.pipelines = {"p"};
  o.rate = 100;
  o.duration_s = 20;
  auto alarm_deadlines = [&](const cluster_config& cfg, result& out) {
    double worst = 0;
    o.on_invocation = [&](uint64_t, size_t, const std::string& model, int64_t deadline_ns) {
      if (model == "alm") worst = std::max(worst, static_cast<double>(deadline_ns) / 1e6);
    };
    auto r = simulate(cfg, o);
    EXPECT_TRUE(r) << r.error();
    if (r) out = std::move(*r);
    return worst;
  };
  result own, shared;
  double own_worst = alarm_deadlines(config(", slo_ms: 70"), own);
  double shared_worst = alarm_deadlines(config(""), shared);
  std::printf("per-path SLOs: attainment %.4f, alarm deadlines up to %.1f ms (%.1f ms under one SLO), late %s\n",
              own.summary.attainment, own_worst, shared_worst, own.summary.late_paths.dump().c_str());
  expect_one_reply_each(own.summary);
  EXPECT_GE(own.summary.attainment, 0.99);
  EXPECT_LE(own_worst, 70.0 + 1e-6);
  EXPECT_LE(own.summary.late_paths.value("alarm", 0), own.summary.sent / 100);
  // One SLO for both paths: the alarm's deadline lies beyond 70 ms.
  EXPECT_GT(shared_worst, 70.0);
}

// FA2's central queue: each stage's planned batches go whole to its instances in turn and the
// devices wait until a batch is whole. det then runs mostly at one batch size (the plan's), where
// the default dispatch (one request at a time, devices running what is queued) runs whatever
// has queued. Both serve; the figures are printed beside each other.
TEST(simulator, fa2s_central_queue_runs_the_planned_batches_whole) {
  std::map<std::string, result> runs;
  for (auto arrival : {arrival_kind::constant, arrival_kind::poisson})
    for (bool central : {false, true}) {
      auto y = scaled("fa2", false);
      y.replace(y.find("scheduler: {"), std::string("scheduler: {").size(), "scheduler: {headroom: 0, ");
      y.replace(y.find("predictor: recent_max}"), std::string("predictor: recent_max}").size(),
                std::string("predictor: recent_max, central_queue: ") + (central ? "true}" : "false}"));
      options o;
      o.pipelines = {"p"};
      o.rate = 150;
      o.duration_s = 30;
      o.arrival = arrival;
      auto r = simulate(parse(y), o);
      ASSERT_TRUE(r) << r.error();
      expect_one_reply_each(r->summary);
      auto name = std::string(arrival == arrival_kind::constant ? "constant " : "poisson ") +
                  (central ? "central queue" : "one at a time");
      std::printf("%s: attainment %.4f p50 %.1f p99 %.1f max %.1f ms, %.0f instance-s; det batches", name.c_str(),
                  r->summary.attainment, r->summary.p50, r->summary.p99, r->summary.max, r->scaling.instance_seconds);
      for (auto& [b, n] : r->batches["det"]) std::printf(" %zu:%llu", b, static_cast<unsigned long long>(n));
      std::printf("\n");
      runs.emplace(name, std::move(*r));
    }
  // The share of det's batches at its most common size.
  auto modal_share = [](result& r) {
    uint64_t all = 0, most = 0;
    for (auto& [b, n] : r.batches["det"]) all += n, most = std::max(most, n);
    return all ? static_cast<double>(most) / static_cast<double>(all) : 0.0;
  };
  EXPECT_GE(modal_share(runs.at("constant central queue")), 0.65);
  EXPECT_LT(modal_share(runs.at("constant one at a time")), 0.6);
  for (auto& [name, r] : runs) EXPECT_GE(r.summary.attainment, 0.95) << name;
}

// The IPA example under a load that rises from 20 to 400 queries/s and falls back: IPA serves
// the accurate variants while the load is light and cheaper ones through the peak (accuracy in
// between the two), every switch make before break: nothing is lost, and what the peak's cheap
// variants serve stays within the SLO.
TEST(simulator, ipa_trades_accuracy_for_load_and_loses_nothing_while_variants_switch) {
  auto cfg = parse(read_text(std::string(SLOSERVE_EXAMPLES_DIR) + "/ipa.yaml"));
  options o;
  o.pipelines = {"video"};
  for (int t = 0; t < 90; ++t) o.trace.push_back(t >= 30 && t < 60 ? 400 : 20);
  o.duration_s = 90;
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r) << r.error();
  expect_one_reply_each(r->summary);
  // The step itself costs what the old replicas cannot carry while the new ones load (1-2 s);
  // from 10 s into the peak on, and after it, every second is served within the SLO.
  auto within = [&](size_t from, size_t to) { return share_within(r->summary, from, to); };
  EXPECT_GE(within(0, 30), 0.99);
  EXPECT_GE(within(40, 60), 0.99);
  EXPECT_GE(within(65, 90), 0.99);
  EXPECT_GE(r->summary.attainment, 0.9);
  // Light: mobilenet_v2 and resnet101 (0.556); heavy: mobilenet_v2 and resnet18 (0.501). The
  // mean weighs each by the requests it served: 1,200 light and up to 12,000 heavy give 0.506
  // when all are served, less as the light variants serve fewer of the requests.
  EXPECT_GT(r->accuracy, 0.504);
  EXPECT_LT(r->accuracy, 0.553);
  EXPECT_GT(r->scaling.horizontal_changes, 4u);
}

// IPA chooses a cascade under load (scaler_core): 20 req/s, then 1,000, then 20 again. While
// light, the accurate `big` alone (90%); through the peak, `small` with `big` on the 30% it is
// unsure of (76%, half the cores); light again, big alone. Every switch is make before break and
// each runs within its deadlines: a cascade's first model by its planned share of the stage,
// the second alone by the whole stage.
TEST(simulator, ipa_runs_a_cascade_through_a_peak_and_its_second_alone_when_light) {
  auto cfg = parse(R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], cores: 32, devices: [{kind: emulated, count: 24}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 10, beta_ms: 20}, accuracy: 90, load_ms: 500}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 2}, accuracy: 70, pass_rate: 0.7, load_ms: 500}
pipelines:
  - {name: p, slo_ms: 200, stages: [{name: s, cascade: {models: [small, big]}}]}
runtime: {beacon_ms: 250}
scheduler: {policy: ipa, ipa: {alpha: 1, beta: 0.03, delta: 0.0001, interval_s: 5}}
scaler: {vertical_s: 1, predictor: recent_max}
)");
  options o;
  o.pipelines = {"p"};
  for (int t = 0; t < 100; ++t) o.trace.push_back(t >= 30 && t < 60 ? 1000 : 20);
  o.duration_s = 100;
  std::map<std::string, uint64_t> invoked;
  o.on_invocation = [&](uint64_t, size_t, const std::string& model, int64_t) { ++invoked[model]; };
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r) << r.error();
  expect_one_reply_each(r->summary);
  auto within = [&](size_t from, size_t to) { return share_within(r->summary, from, to); };
  std::printf(
      "ipa with a cascade: within the SLO %.4f before, %.4f in, %.4f after the peak; accuracy %.4f; invocations: "
      "small %llu, big %llu\n",
      within(0, 30), within(35, 60), within(90, 100), r->accuracy, static_cast<unsigned long long>(invoked["small"]),
      static_cast<unsigned long long>(invoked["big"]));
  EXPECT_GE(within(0, 30), 0.99);
  EXPECT_GE(within(35, 60), 0.99);
  EXPECT_GE(within(90, 100), 0.99);
  // 1,400 light requests at 90% and 30,000 of the peak at 76% (a few at 90% while small loads).
  EXPECT_GT(r->accuracy, 0.76);
  EXPECT_LT(r->accuracy, 0.785) << "the peak ran the cascade";
  EXPECT_GT(invoked["small"], 25000u) << "small ran through the peak";
  EXPECT_LT(invoked["small"], 31000u) << "and not while light";
}

// A cascade in simulated time: a quarter of the requests fall through to the slow, accurate
// model (pass_rate 0.75), and the accuracy served is the mix of the two.
TEST(simulator, a_cascade_answers_most_requests_with_its_first_model_and_the_rest_with_its_second) {
  auto cfg = parse(R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 2}]}
models:
  - {name: fast, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 1}, pass_rate: 0.75, accuracy: 60}
  - {name: slow, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 3, beta_ms: 3}, accuracy: 80}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, cascade: {models: [fast, slow], confidence: 0.8}}]}
)");
  options o;
  o.pipelines = {"p"};
  o.rate = 200;
  o.duration_s = 20;
  auto r = simulate(cfg, o);
  ASSERT_TRUE(r) << r.error();
  expect_one_reply_each(r->summary);
  EXPECT_GE(r->summary.attainment, 0.99);
  EXPECT_NEAR(r->accuracy, 0.75 * 0.6 + 0.25 * 0.8, 0.01);
}

// The traffic pipeline of the cluster example (its models and pipeline) on twelve devices: six
// for the detector, six for the classifiers, as a new user would run it.
std::string traffic(const std::string& scheduler) {
  auto example = read_text(std::string(SLOSERVE_EXAMPLES_DIR) + "/cluster.yaml");
  return R"(cluster: {name: t}
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 6, models: [ssd]}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker],
     devices: [{kind: emulated, count: 6, models: [car_classifier, face_recognizer]}]}
)" + example.substr(example.find("\nmodels:") + 1) +
         "scheduler: " + scheduler + "\n";
}

// A trace of `before` seconds at `low`, then `after` seconds at `high`.
options step_trace(const std::string& pipeline, double low, double high, size_t before = 30, size_t after = 10) {
  options o;
  o.pipelines = {pipeline};
  o.trace.assign(before, low);
  o.trace.resize(before + after, high);
  o.warmup_s = 0;
  return o;
}

// Traffic that comes back after a lull, and a second of 0 that is a second of silence: the lull
// keeps the plan (its recent peak), and the load that returns is served within its SLO from its
// first second. A trace that ends its arrivals at a silent second would send nothing after it.
TEST(simulator, load_that_returns_after_a_lull_is_served_from_its_first_second) {
  for (double lull : {0.0, 0.5}) {
    auto o = step_trace("traffic", 150, lull, 10, 25);
    o.trace.resize(45, 150);
    auto r = simulate(parse(traffic("{policy: nexus}")), o);
    ASSERT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    EXPECT_GT(r->summary.sent, 2700u) << "the load after the lull is sent whole";
    uint64_t in_lull = 0;
    for (auto& x : r->summary.series)
      if (x["t"] >= 10 && x["t"] < 35) in_lull += x["sent"].get<uint64_t>();
    if (lull == 0) {
      EXPECT_EQ(in_lull, 0u) << "nothing is sent in the silence";
    } else {
      EXPECT_NEAR(static_cast<double>(in_lull), 12.5, 10);
    }
    EXPECT_GE(r->summary.attainment_in(35, 36), 0.99) << "lull " << lull;
    EXPECT_GE(r->summary.attainment_in(35, 45), 0.99) << "lull " << lull;
  }
}

// A tenfold step after 30 s of a trickle (a cluster that has planned for little): every policy
// that plans epochs serves its first second within the SLO, at a load it carries steadily.
TEST(simulator, every_policy_meets_a_tenfold_step_after_idle) {
  struct setting {
    std::string name;
    cluster_config cfg;
    std::string pipeline;
    double rate;
  };
  std::vector<setting> settings;
  for (auto policy : {"nexus", "batch-oblivious"})
    settings.push_back({policy, parse(traffic(std::string("{policy: ") + policy + "}")), "traffic", 150});
  settings.push_back({"piccolo", parse(traffic("{policy: piccolo}")), "traffic", 100});
  settings.push_back({"graft", parse(read_text(std::string(SLOSERVE_EXAMPLES_DIR) + "/graft.yaml")), "phones", 200});
  settings.push_back({"ipa", parse(read_text(std::string(SLOSERVE_EXAMPLES_DIR) + "/ipa.yaml")), "video", 400});
  settings.push_back({"fa2", parse(scaled("fa2")), "p", 300});
  settings.push_back({"biscale", parse(scaled("biscale")), "p", 300});
  for (auto& s : settings) {
    auto r = simulate(s.cfg, step_trace(s.pipeline, s.rate / 10, s.rate));
    ASSERT_TRUE(r) << s.name << ": " << r.error();
    expect_one_reply_each(r->summary);
    EXPECT_GE(r->summary.attainment_in(30, 31), 0.95) << s.name << ": the first second after the step";
    EXPECT_GE(r->summary.attainment_in(30, 40), 0.97) << s.name << ": the ten seconds after it";
  }
}

// Piccolo's Theorem 1 served: Table I's module 1 (batch 100 in 1 s, step profile) at 285
// queries/s within 2 s plans three machines at batch 100 and 15 dummies/s, worst case d + b/w =
// 1,333 ms. With `whole_batches` (batches in turn, the dummies each batch owes closing it, devices
// collecting theirs) and constant arrivals, no request is over the bound by more than 1 ms (the
// network's delay is within it); fill (the default) runs what machines have and serves the same
// load up to the 2 s budget. Under Poisson arrivals the share over the bound is printed beside
// fill's and p2c's (the file's balancer, one request at a time: `runtime_balancer`), and is the
// smallest.
TEST(simulator, whole_batches_in_turn_serve_within_theorem_1s_bound) {
  enum dispatch { whole, fill, p2c };
  const char* names[] = {"whole batches", "fill", "p2c"};
  auto text = [](dispatch d) {
    return std::string(R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 8}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [4]}, max_batch: 100,
     profile: {batch: [5, 20, 100], latency_ms: [100, 250, 1000], step: true}}
pipelines:
  - {name: p, slo_ms: 2000, stages: [{name: s, model: m}]}
scheduler: {policy: piccolo, headroom: 0, piccolo: {)") +
           (d == whole ? "whole_batches: true"
            : d == p2c ? "runtime_balancer: true"
                       : "") +
           "}}\n";
  };
  double bound = 1000 + 100 / 300.0 * 1000;
  auto over = [](const load_summary& s, double ms) {  // the share of OK replies above `ms`
    double below = 0;
    for (auto& [x, f] : s.cdf)
      if (x <= ms) below = f;
    return 1 - below;
  };
  std::map<std::pair<dispatch, arrival_kind>, double> share;
  for (auto arrival : {arrival_kind::constant, arrival_kind::poisson})
    for (auto d : {whole, fill, p2c}) {
      options o;
      o.pipelines = {"p"};
      o.rate = 285;
      o.duration_s = 40;
      o.warmup_s = 20;
      o.arrival = arrival;
      o.batch_overhead_ms = 0;
      auto r = simulate(parse(text(d)), o);
      ASSERT_TRUE(r) << r.error();
      expect_one_reply_each(r->summary);
      share[{d, arrival}] = over(r->summary, bound + 1);
      std::printf("%s, %s arrivals: p50 %.1f, p99 %.1f, max %.1f ms; over d + b/w (+1 ms): %.2f%%\n", names[d],
                  arrival == arrival_kind::constant ? "constant" : "Poisson", r->summary.p50, r->summary.p99,
                  r->summary.max, 100 * share[{d, arrival}]);
      if (arrival == arrival_kind::constant) {
        if (d == whole) {
          EXPECT_LE(r->summary.max, bound + 1);
        } else {
          EXPECT_GT(r->summary.max, bound + 100) << names[d];
        }
      }
    }
  double whole_poisson = share[{whole, arrival_kind::poisson}];
  EXPECT_LT(whole_poisson, (share[{fill, arrival_kind::poisson}]));
  EXPECT_LT(whole_poisson, (share[{p2c, arrival_kind::poisson}]));
}

// MCDNN's budget over two minutes at 100 queries/s: running `big` throughout would spend 0.0072
// device-hours, `small` 0.0018. A budget between them is spent within itself, and the accuracy
// served lies between the two variants' as the stage steps up once it has saved enough; more
// budget buys more accuracy; without a budget the stage runs `big` throughout.
TEST(simulator, a_cost_budget_is_not_overspent_and_buys_accuracy_as_it_allows) {
  auto yaml = [](const std::string& budget) {
    return R"(nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 4}]}
models:
  - {name: big, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 32,
     profile: {alpha_ms: 2, beta_ms: 4}, accuracy: 78}
  - {name: small, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 32,
     profile: {alpha_ms: 0.5, beta_ms: 1}, accuracy: 70}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, variants: [small, big]}]}
scheduler: {cost_budget: )" +
           budget +
           R"(, budget_horizon_s: 120, epoch_s: 10, min_epoch_s: 5}
)";
  };
  options o;
  o.pipelines = {"p"};
  o.rate = 100;
  o.duration_s = 120;
  auto run = [&](const std::string& budget) {
    auto r = simulate(parse(yaml(budget)), o);
    EXPECT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    EXPECT_GE(r->summary.attainment, 0.99);
    return *r;
  };
  auto none = run("0");
  EXPECT_NEAR(none.accuracy, 0.78, 1e-9);
  auto tight = run("0.003"), loose = run("0.005");
  EXPECT_LE(tight.budget_spent, 0.003);
  EXPECT_LE(loose.budget_spent, 0.005);
  EXPECT_GT(tight.budget_spent, 0.0018) << "at least what small alone spends";
  EXPECT_GT(tight.accuracy, 0.70);
  EXPECT_LT(tight.accuracy, loose.accuracy);
  EXPECT_LT(loose.accuracy, 0.78);
}

// Devices that slow to twice their profile 6 s in (as SLOSERVE_EMULATED_SLOWDOWN does on a
// cluster): the simulator refreshes both models' profiles within a few beacons, as the monitor
// and the controller do, and the plan at what they measure serves far more within the SLO than
// the plan at the file's profile (profile_drift: 0). Nothing is lost either way.
TEST(simulator, devices_that_slow_down_are_planned_at_what_they_measure) {
  auto yaml = read_text(SLOSERVE_EXAMPLES_DIR "/default.yaml");
  options o;
  o.rate = 1200;
  o.duration_s = 30;
  o.slowdown_after_s = 6;
  o.slowdown_factor = 2;
  auto refreshed = simulate(parse(yaml), o);
  ASSERT_TRUE(refreshed) << refreshed.error();
  expect_one_reply_each(refreshed->summary);
  ASSERT_EQ(refreshed->refreshes.size(), 2u);
  for (auto& r : refreshed->refreshes) {
    double scale = std::stod(r.substr(r.find(" x") + 2));
    EXPECT_NEAR(scale, 2, 0.1) << r;
    double at = std::stod(r.substr(r.find(" at ") + 4));
    EXPECT_GE(at, 6) << r;
    EXPECT_LE(at, 10) << r;
  }
  auto as_written = simulate(parse(yaml + "scheduler: {profile_drift: 0}\n"), o);
  ASSERT_TRUE(as_written) << as_written.error();
  expect_one_reply_each(as_written->summary);
  EXPECT_TRUE(as_written->refreshes.empty());
  EXPECT_GT(refreshed->summary.attainment, as_written->summary.attainment + 0.2);
}

// Twice what two devices carry, on one pipeline, from two tenants of one priority weighted 3
// and 1: the simulated frontend admits as a cluster's does, the plan's quota under nexus and what
// gets through in time under a static placement (which plans none), split 3:1 (within 5%), the
// rest answered OVERLOADED with the reason; every query is counted under its tenant.
TEST(simulator, two_tenants_share_an_overloaded_pipeline_by_weight_under_a_plan_and_without_one) {
  for (std::string policy : {"nexus", "static"}) {
    auto cfg = parse(R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
  - {name: w2, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 1}]}
models:
  - {name: m, input: {dtype: float32, shape: [4]}, output: {dtype: float32, shape: [2]}, max_batch: 4, profile: {alpha_ms: 9, beta_ms: 2}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s, model: m}]}
security:
  tenants:
    - {name: gold, weight: 3}
    - {name: bronze, weight: 1}
scheduler: {epoch_s: 5, min_epoch_s: 2, policy: )" +
                     policy + "}\n");
    options o;
    o.rate = 400;
    o.duration_s = 20;
    o.warmup_s = 8;
    o.tenants = {{"gold", 1}, {"bronze", 1}};
    auto r = simulate(cfg, o);
    ASSERT_TRUE(r) << r.error();
    expect_one_reply_each(r->summary);
    auto& gold = r->tenants.at("gold");
    auto& bronze = r->tenants.at("bronze");
    EXPECT_EQ(gold.sent + bronze.sent, r->summary.sent);
    EXPECT_NEAR(static_cast<double>(gold.sent) / static_cast<double>(r->summary.sent), 0.5, 0.03);
    double in_time = static_cast<double>(gold.within_slo + bronze.within_slo);
    std::cout << policy << ": gold " << gold.within_slo / o.duration_s << "/s, bronze "
              << bronze.within_slo / o.duration_s << "/s within the SLO\n";
    EXPECT_NEAR(static_cast<double>(gold.within_slo) / in_time, 0.75, 0.75 * 0.05) << policy;
    EXPECT_GT(in_time / o.duration_s, 190) << policy << ": about what the devices carry";
    EXPECT_GT(bronze.shed, gold.shed) << policy;
    auto reason = policy == "nexus" ? "shed for fair share: the cluster is short of devices"
                                    : "shed for fair share: pipeline 'p' misses its SLO beyond";
    bool said = false;
    for (auto& [why, n] : r->summary.reasons.items()) said |= why.find(reason) != std::string::npos;
    EXPECT_TRUE(said) << policy;
  }
}

TEST(simulator, bad_options_are_refused_with_a_reason) {
  auto cfg = parse(two_workers);
  auto o = load(10, 1);
  o.pipelines = {"nope"};
  auto r = simulate(cfg, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("nope"), std::string::npos);
  o = load(10, 1);
  o.failures.push_back({"w9", 1, -1});
  r = simulate(cfg, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("w9"), std::string::npos);
  EXPECT_TRUE(parse_failure("w1@3"));
  EXPECT_DOUBLE_EQ(parse_failure("w1@3-7.5")->back_s, 7.5);
  for (auto bad : {"w1", "@3", "w1@x", "w1@3-2", "w1@-1", "w1@3-"}) EXPECT_FALSE(parse_failure(bad)) << bad;
  for (auto bad : {"", "6", "x:2", "6:", "6:0", "-1:2", "6:2x"}) EXPECT_FALSE(parse_slowdown(bad)) << bad;
  for (auto bad : {"", ":2", "gold:", "gold:0", "gold:-1", "gold:x", "gold:2x"}) EXPECT_FALSE(parse_tenant(bad)) << bad;
  EXPECT_DOUBLE_EQ(parse_tenant("gold:2.5")->share, 2.5);
  EXPECT_EQ(parse_tenant("gold")->name, "gold");
  o = load(10, 1);
  o.tenants = {{"nobody", 1}};
  r = simulate(cfg, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("no tenant 'nobody'"), std::string::npos) << r.error();
  EXPECT_EQ(parse_slowdown("6:2"), std::make_pair(6.0, 2.0));
  EXPECT_EQ(parse_slowdown("0.5:1.5"), std::make_pair(0.5, 1.5));
}

}  // namespace
}  // namespace sloserve::sim

// The event heap runs events in (time, posting) order, whatever order they are posted in and
// however pushes and pops interleave: checked against a sorted list of what was posted.
TEST(simulator_events, the_heap_runs_events_in_time_then_posting_order) {
  sloserve::sim::detail::event_heap heap;
  std::mt19937_64 rng(7);
  std::vector<sloserve::sim::detail::event> posted, ran;
  uint64_t seq = 0;
  for (int round = 0; round < 2000; ++round) {
    int pushes = static_cast<int>(rng() % 5), pops = static_cast<int>(rng() % 4);
    for (int i = 0; i < pushes; ++i) {
      // Few distinct times, so ties are common and the posting order must break them.
      sloserve::sim::detail::event e{
          static_cast<sloserve::sim::detail::ns>(rng() % 50 + (ran.empty() ? 0 : ran.back().t)), seq++,
          sloserve::sim::detail::kind::send, 0, 0};
      posted.push_back(e);
      heap.push(e);
    }
    for (int i = 0; i < pops && !heap.empty(); ++i) {
      auto e = heap.top();
      heap.pop();
      if (!ran.empty()) {
        ASSERT_TRUE(e.t > ran.back().t || (e.t == ran.back().t && e.seq > ran.back().seq)) << round;
      }
      ran.push_back(e);
    }
  }
  while (!heap.empty()) ran.push_back(heap.top()), heap.pop();
  ASSERT_EQ(ran.size(), posted.size());
  // Each event ran once, and no event ran before one due earlier that was pending at the time.
  std::vector<uint64_t> seqs;
  for (auto& e : ran) seqs.push_back(e.seq);
  std::sort(seqs.begin(), seqs.end());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
}
