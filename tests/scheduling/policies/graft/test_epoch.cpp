// Graft as a scheduler epoch: fragments re-aligned onto GPU shares and routed through their ranges.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "config/cluster_config.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/graft/epoch.hpp"
#include "tests/parse_config.hpp"
#include "tests/routed.hpp"

namespace sloserve {
namespace {

using testing::parse_config;
using testing::routed;

// A graft epoch on the example: fragments from four start layers become re-aligned stages on
// instances of the shares planned (none on a share smaller than planned), each fragment's route
// runs its ranges in layer order from its start to the end, the routed rate of every range is
// what its fragments carry, and the plan takes no more than every fragment alone (GSLICE).
TEST(placement, a_graft_epoch_realigns_fragments_onto_shares_and_routes_each_through_its_ranges) {
  std::ifstream example(SLOSERVE_EXAMPLES_DIR "/graft.yaml");
  std::stringstream text;
  text << example.rdbuf();
  auto cfg = parse_config(text.str());
  auto in = planning_input(cfg, cfg.models);
  in.rates = {200};
  in.fragments = {{{0, 200, 0.25, 4}, {1, 150, 0.25, 4}, {2, 150, 0.25, 4}, {4, 100, 0.25, 4}}};
  auto r = sched::plan_scaled_epoch(in, nullptr);
  ASSERT_TRUE(r) << r.error();
  auto& res = r->result;
  EXPECT_DOUBLE_EQ(r->scale, 1) << "graft plans the load, not a multiple of it";
  EXPECT_EQ(res.devices_missing, 0u);
  EXPECT_TRUE(res.placement.infeasible.empty());
  EXPECT_GT(res.resources, 0);
  for (size_t k = 0; k < res.placement.devices.size(); ++k) {
    ASSERT_GE(res.slot_of[k], 0);
    EXPECT_GE(res.slots[static_cast<size_t>(res.slot_of[k])].share, res.placement.devices[k].share - 1e-9);
  }
  // Every start layer has a route, from its start to the end, in order.
  std::map<int, int> starts;
  std::map<std::string, double> carried;
  for (auto& f : res.fragment_routes) {
    ++starts[f.start];
    int at = f.start;
    ASSERT_EQ(f.models.size(), f.budget_ms.size());
    double budget = 0;
    for (auto& name : f.models) {
      auto* m = cfg.find_model(name);
      ASSERT_NE(m, nullptr) << name;
      EXPECT_EQ(m->is_fragment() ? m->layer_from : 0, at) << name;
      at = m->is_fragment() ? m->layer_to : 6;
      carried[name] += f.rate;
    }
    for (double b : f.budget_ms) budget += b;
    EXPECT_EQ(at, 6);
    EXPECT_LE(budget, f.slo_ms / 2 + 1e-6) << "execution within half the time left";
  }
  EXPECT_EQ(starts.size(), 4u);
  // The last blocks cost most and batch best: some fragment runs its own first blocks and then a
  // range it shares with fragments that start there.
  EXPECT_TRUE(std::any_of(res.fragment_routes.begin(), res.fragment_routes.end(),
                          [](auto& f) { return f.models.size() == 2; }));
  auto p = epoch_placement(cfg, in, res, 3);
  EXPECT_EQ(p.table.fragments.size(), res.fragment_routes.size());
  std::map<std::string, double> weight;
  for (auto& route : p.table.routes)
    for (auto& i : route.instances) weight[route.model] += i.weight;
  for (auto& [name, rate] : carried) EXPECT_NEAR(weight[name], rate, 1e-6) << name;
  // Queries from a start no plan covers run the rest of the model: every suffix has an instance.
  for (int s = 1; s < 6; ++s) EXPECT_FALSE(routed(p, "resnet18[" + std::to_string(s) + ",6)").empty()) << s;
  // Against every fragment alone at its best share and batch (the fragments after merging).
  auto gm = sched::graft_model(cfg.models[0], {0.05, 0.1, 0.2});
  std::vector<sched::graft::fragment> frags;
  for (auto& f : in.fragments[0])
    for (int c = 0; c < f.clients; ++c) frags.push_back({f.start, f.slo_ms / 1e3, 200 * f.share / f.clients, 1});
  auto gslice = sched::graft::gslice_plan(gm, sched::graft::merge_fragments(gm, frags));
  ASSERT_TRUE(gslice.feasible);
  EXPECT_LT(res.resources, gslice.resources);
  // Before any plan every device serves the model and its rest from every layer.
  auto st = static_placement(cfg, 1);
  EXPECT_EQ(st.schedules["w1"].devices[0].sessions.size(), 6u);
}

}  // namespace
}  // namespace sloserve
