// The scheduling-policy interface and its registry: every `scheduler.policy` resolves to its
// policy, epochs dispatch by it, and a policy written here (not built in) plans through the same
// entry points as the built-in ones with nothing else changed.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "config/cluster_config.hpp"
#include "config/settings_io.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/piccolo/epoch.hpp"
#include "scheduling/policies/piccolo/options.hpp"
#include "scheduling/policies/registry.hpp"
#include "tests/parse_config.hpp"

namespace sloserve {
namespace {

cluster_config parse(const std::string& yaml) {
  return testing::parse_config(yaml);
}

const char* chain = R"(
nodes:
  - {name: ctl, address: tcp://127.0.0.1:0, roles: [controller, frontend]}
  - {name: w1, address: tcp://127.0.0.1:0, roles: [worker], devices: [{kind: emulated, count: 6}]}
models:
  - {name: a, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 5, beta_ms: 4}}
  - {name: b, input: {dtype: float32, shape: [2]}, output: {dtype: float32, shape: [2]}, max_batch: 8,
     profile: {alpha_ms: 1, beta_ms: 1}}
pipelines:
  - {name: p, slo_ms: 100, stages: [{name: s1, model: a}, {name: s2, model: b, after: [s1]}]}
)";

TEST(policies, every_scheduler_policy_of_the_file_is_registered_with_what_it_does) {
  for (auto name : {"nexus", "batch-oblivious", "static", "ipa", "jellyfish", "piccolo", "graft"})
    EXPECT_NE(sched::find_policy(name), nullptr) << name;
  EXPECT_EQ(sched::find_policy("round-robin-nowhere"), nullptr);
  using sp = scheduler_policy;
  EXPECT_FALSE(sched::policy_of(sp::static_plan).plans_epochs());
  for (auto p : {sp::nexus, sp::batch_oblivious, sp::ipa, sp::piccolo, sp::graft})
    EXPECT_TRUE(sched::policy_of(p).plans_epochs()) << knob_name(p);
  for (auto p : {sp::nexus, sp::batch_oblivious, sp::static_plan, sp::ipa, sp::jellyfish, sp::piccolo, sp::graft}) {
    auto& policy = sched::policy_of(p);
    EXPECT_EQ(policy.plans_least_cost(), p == sp::piccolo || p == sp::graft) << knob_name(p);
    auto file = parse(chain);
    EXPECT_EQ(policy.rounds(file) != nullptr, p == sp::jellyfish) << knob_name(p);
    EXPECT_EQ(policy.clients(file).report_ms > 0, p == sp::jellyfish) << knob_name(p);
    EXPECT_EQ(policy.clients(file).uplink_quantile, sched::client_tracking{}.uplink_quantile) << knob_name(p);
    EXPECT_EQ(policy.packer()->name(), p == sp::batch_oblivious ? "batch-oblivious" : "nexus") << knob_name(p);
    // Frontends dispatch by the file's balancer, but Piccolo's by its own throughput-cost fill
    // (unless its section asks for the file's balancer, the baseline).
    EXPECT_EQ(policy.dispatcher(balancer_kind::weighted_random, {})->name(),
              p == sp::piccolo ? "fill" : "weighted_random")
        << knob_name(p);
  }
  sched::piccolo::options baseline;
  baseline.runtime_balancer = true;
  EXPECT_EQ(sched::policy_of(sp::piccolo).dispatcher(balancer_kind::weighted_random, baseline)->name(),
            "weighted_random");
  EXPECT_FALSE(sched::plans_least_cost(nullptr)) << "no policy named: nexus";
}

TEST(policies, an_epoch_is_planned_by_the_policy_the_input_names) {
  auto cfg = parse(chain);
  auto in = planning_input(cfg, cfg.models);
  in.rates = {300};
  EXPECT_EQ(in.policy, &sched::policy_of(scheduler_policy::nexus)) << "the file's";
  in.policy = &sched::policy_of(scheduler_policy::piccolo);
  auto through = sched::plan_epoch(in);
  auto direct = sched::plan_piccolo_epoch(in, nullptr);
  ASSERT_TRUE(through && direct);
  ASSERT_EQ(through->placement.devices.size(), direct->placement.devices.size());
  for (size_t k = 0; k < direct->placement.devices.size(); ++k)
    EXPECT_EQ(through->placement.devices[k].dummy_rate, direct->placement.devices[k].dummy_rate);
  // The batch-oblivious baseline: its packer, the DP's split as it is.
  in.policy = &sched::policy_of(scheduler_policy::batch_oblivious);
  auto oblivious = sched::plan_epoch(in);
  auto by_hand = sched::plan_packed_epoch(in, nullptr, sched::batch_oblivious_planner{}, false);
  ASSERT_TRUE(oblivious && by_hand);
  ASSERT_EQ(oblivious->placement.devices.size(), by_hand->placement.devices.size());
  for (size_t k = 0; k < by_hand->placement.devices.size(); ++k)
    EXPECT_DOUBLE_EQ(oblivious->placement.devices[k].duty_cycle_ms, by_hand->placement.devices[k].duty_cycle_ms);
  in.policy = nullptr;
  auto nexus = sched::plan_epoch(in);
  ASSERT_TRUE(nexus);
  auto cycles = [](const sched::epoch_result& r) {
    std::vector<double> out;
    for (auto& d : r.placement.devices) out.push_back(d.duty_cycle_ms);
    return out;
  };
  EXPECT_NE(cycles(*nexus), cycles(*oblivious)) << "nexus packs them otherwise";
}

TEST(policies, graft_plans_again_for_a_fragment_of_queries_its_plan_has_no_route_for) {
  auto& graft = sched::policy_of(scheduler_policy::graft);
  sched::pipeline_rates measured;
  measured.pipelines.resize(1);
  measured.pipelines[0].fragments.push_back({3, 80, 0.2});
  sched::epoch_result planned;
  EXPECT_TRUE(graft.plan_outdated(measured, planned));
  planned.fragment_routes.push_back({0, 3, 80, 10, {"m"}, {80}});
  EXPECT_FALSE(graft.plan_outdated(measured, planned)) << "routed";
  measured.pipelines[0].fragments[0] = {5, 80, 0.01};
  EXPECT_FALSE(graft.plan_outdated(measured, planned)) << "a hundredth of the queries waits for the epoch";
  EXPECT_FALSE(sched::policy_of(scheduler_policy::nexus).plan_outdated(measured, planned));
}

// A policy of the test's own: every session on devices of its own, batch 1, as many devices as
// its rate needs at l(1) with each busy at most `busy` of the time, which its own section of the
// file sets. It is a folder and a registry line away from the file's policies.
struct one_per_session_options {
  double busy = 1;
};

class one_per_session_packer final : public sched::planner {
 public:
  explicit one_per_session_packer(double busy) : busy_(busy) {}
  std::string_view name() const override { return "one-per-session"; }

 protected:
  sched::plan make_impl(const std::vector<sched::session>& sessions, const sched::device_caps&, const sched::plan*,
                        const std::vector<sched::session>*, const sched::batch_tables&) const override {
    sched::plan out;
    int id = 0;
    for (size_t s = 0; s < sessions.size(); ++s) {
      double l = sessions[s].model->profile.latency_ms_at(1);
      auto n = static_cast<int>(std::ceil(sessions[s].rate * l / 1e3 / busy_ - 1e-9));
      for (int k = 0; k < n; ++k) {
        sched::device_plan d;
        d.id = id++;
        d.dedicated = true;
        d.duty_cycle_ms = l;
        d.sessions.push_back({s, 1, sessions[s].rate / n});
        d.occupancy = 1;
        out.devices.push_back(std::move(d));
      }
    }
    return out;
  }

 private:
  double busy_;
};

const std::vector<settings::key<one_per_session_options>>& one_per_session_keys() {
  static const std::vector<settings::key<one_per_session_options>> keys = {{"busy", &one_per_session_options::busy}};
  return keys;
}

class one_per_session final : public sched::scheduling_policy {
 public:
  policy_config config() const override {
    return settings::table_section<one_per_session_options>(
        one_per_session_keys(),
        [](config_detail::reader& r, const YAML::Node& n, const one_per_session_options& o, const std::string& where) {
          if (!(o.busy > 0 && o.busy <= 1)) r.error(n["busy"], where + " busy must be in (0, 1]");
        });
  }
  std::unique_ptr<sched::planner> packer() const override { return std::make_unique<one_per_session_packer>(1); }
  expected<sched::epoch_result> plan(const sched::epoch_input& in, const sched::epoch_result* previous) const override {
    auto* o = std::any_cast<one_per_session_options>(&in.options);
    return sched::plan_packed_epoch(in, previous, one_per_session_packer(o ? o->busy : 1), false);
  }
  bool plans_least_cost() const override { return true; }
};

TEST(policies, a_file_may_name_only_a_policy_that_is_built_in_or_registered) {
  auto r = parse_cluster_config(std::string(chain) + "scheduler: {policy: round-robin-nowhere}\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_text().find("c.yaml:"), std::string::npos) << r.error_text();
  EXPECT_NE(r.error_text().find("scheduler policy 'round-robin-nowhere' is not nexus"), std::string::npos)
      << r.error_text();
}

TEST(policies, a_policy_registered_beside_the_built_in_ones_plans_through_the_same_entry_points) {
  sched::register_policy("one-per-session", std::make_shared<one_per_session>());
  auto names = sched::policy_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "one-per-session"), names.end());
  // A cluster file names it as it names a built-in one, and writes it back so.
  auto cfg = parse(std::string(chain) + "scheduler: {policy: one-per-session}\n");
  EXPECT_EQ(cfg.scheduler.name(), "one-per-session");
  EXPECT_EQ(parse(to_yaml(cfg)).scheduler.name(), "one-per-session");
  auto in = planning_input(cfg, cfg.models);
  ASSERT_EQ(in.policy, sched::find_policy("one-per-session"));
  in.rates = {100};
  // What the controller and the simulator call: for the load, least cost (no spare multiple).
  auto planned = sched::plan_for_load(in, nullptr, false, {100});
  ASSERT_TRUE(planned) << planned.error();
  auto& r = planned->plan.result;
  EXPECT_DOUBLE_EQ(planned->plan.scale, 1) << "least cost: planned for the load as it is";
  // a: l(1) = 9 ms at 100/s (1 device, 0.9 busy); b: l(1) = 2 ms (1 device).
  ASSERT_EQ(r.placement.devices.size(), 2u);
  std::set<std::string> models;
  for (size_t k = 0; k < r.placement.devices.size(); ++k) {
    auto& d = r.placement.devices[k];
    ASSERT_EQ(d.sessions.size(), 1u);
    EXPECT_EQ(d.sessions[0].batch, 1);
    EXPECT_GE(r.slot_of[k], 0) << "bound to a device of the cluster";
    models.insert(r.models_of[d.sessions[0].session].front().first->name);
  }
  EXPECT_EQ(models, (std::set<std::string>{"a", "b"}));
  // And the placement the controller sends: a schedule and a route for each.
  auto p = epoch_placement(cfg, in, r, 3);
  size_t routed = 0;
  for (auto& route : p.table.routes) routed += route.instances.size();
  EXPECT_EQ(routed, 2u);
}

TEST(policies, a_registered_policy_brings_its_own_section_of_the_file) {
  sched::register_policy("one-per-session", std::make_shared<one_per_session>());
  // Its section's keys are the file's: the key check and docs/configuration.md's rows know them.
  auto keys = config_keys();
  auto section = std::find_if(keys.begin(), keys.end(), [](auto& k) { return k.path == "scheduler.one-per-session"; });
  ASSERT_NE(section, keys.end());
  EXPECT_EQ(section->keys, (std::vector<std::string_view>{"busy"}));
  // Read, checked with its place, and written back.
  auto cfg = parse(std::string(chain) + "scheduler: {policy: one-per-session, one-per-session: {busy: 0.5}}\n");
  EXPECT_DOUBLE_EQ(cfg.scheduler.section_as<one_per_session_options>().busy, 0.5);
  EXPECT_DOUBLE_EQ(parse(to_yaml(cfg)).scheduler.section_as<one_per_session_options>().busy, 0.5);
  auto bad = parse_cluster_config(
      std::string(chain) + "scheduler: {policy: one-per-session, one-per-session: {busy: 2, bsy: 1}}\n", "c.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error_text().find("c.yaml:12:"), std::string::npos) << bad.error_text();
  EXPECT_NE(bad.error_text().find("scheduler one-per-session busy must be in (0, 1]"), std::string::npos)
      << bad.error_text();
  EXPECT_NE(bad.error_text().find("unknown key 'bsy' in scheduler one-per-session"), std::string::npos)
      << bad.error_text();
  // Another policy's section is refused; a built-in policy's too, beside this one.
  auto other =
      parse_cluster_config(std::string(chain) + "scheduler: {policy: nexus, one-per-session: {busy: 1}}\n", "c.yaml");
  EXPECT_NE(other.error_text().find("scheduler one-per-session is only read with policy: one-per-session"),
            std::string::npos)
      << other.error_text();
  auto built_in =
      parse_cluster_config(std::string(chain) + "scheduler: {policy: one-per-session, graft: {theta: 1}}\n", "c.yaml");
  EXPECT_NE(built_in.error_text().find("scheduler graft is only read with policy: graft"), std::string::npos)
      << built_in.error_text();
  // The epochs it plans read it: a at 100/s busy 0.9 of a device needs 2 half-busy devices, b one.
  auto in = planning_input(cfg, cfg.models);
  in.rates = {100};
  auto planned = sched::plan_for_load(in, nullptr, false, {100});
  ASSERT_TRUE(planned) << planned.error();
  EXPECT_EQ(planned->plan.result.placement.devices.size(), 3u);
  in.options = {};
  auto as_default = sched::plan_for_load(in, nullptr, false, {100});
  ASSERT_TRUE(as_default) << as_default.error();
  EXPECT_EQ(as_default->plan.result.placement.devices.size(), 2u) << "without its section: busy 1";
}

}  // namespace
}  // namespace sloserve
