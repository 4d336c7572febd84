// `sloserve plan`: what the scheduler would apply for given pipeline rates.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "actors/parallel_for.hpp"
#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "control/provisioner.hpp"
#include "control/scaler_core.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/registry.hpp"
#include "scheduling/query_analyzer.hpp"

namespace sloserve {
namespace {

// IPA at the given rates: per pipeline, each stage's variant, batch and replicas (scheduling/ipa),
// and the scaler's instances placed on the cluster's device slots as a running cluster would.
int plan_ipa(const cluster_config& cfg, const std::vector<double>& rates, bool json) {
  auto t0 = std::chrono::steady_clock::now();
  auto& w = cfg.scheduler.ipa;
  local_provisioner prov(cfg, [](deployment) {});
  std::vector<std::string> workers;
  for (auto* n : cfg.with_role(role::worker)) workers.push_back(n->name);
  prov.set_workers_up(workers);
  nlohmann::json j;
  j["policy"] = "ipa";
  j["weights"] = {{"alpha", w.alpha}, {"beta", w.beta}, {"delta", w.delta}};
  j["pipelines"] = nlohmann::json::array();
  std::map<std::string, int> unplaced;
  double total_cost = 0;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    for (auto& st : p.stages)
      if (st.cascade) {
        std::cerr << "sloserve plan: pipeline '" << p.name << "' stage '" << st.name
                  << "' is a cascade, which IPA does not plan (the nexus policy does)\n";
        return 2;
      }
    auto per_stage = stage_rates(p, rates[pi], declared_fanout(p));
    for (auto& r : per_stage) r = std::max(r, 1.0);  // as the scaler plans: at least one request a second
    auto in = ipa_problem(cfg.models, p, per_stage);
    auto solved = sched::solve_ipa(in, p.slo_ms, {w.alpha, w.beta, w.delta});
    if (!solved) {
      std::cerr << "sloserve plan: pipeline '" << p.name << "': " << solved.error() << "\n";
      return 2;
    }
    auto budgets = ipa_stage_budgets(p, solved->stages);
    nlohmann::json stages = nlohmann::json::array();
    for (size_t k = 0; k < p.stages.size(); ++k) {
      auto& c = solved->stages[k];
      auto& m = *in[k].variants[c.variant].model;
      int cores = replica_cores(m);
      stages.push_back({{"name", p.stages[k].name},
                        {"variant", m.name},
                        {"accuracy", in[k].variants[c.variant].accuracy},
                        {"batch", c.batch},
                        {"replicas", c.replicas},
                        {"cores", c.replicas * cores},
                        {"rate", per_stage[k]},
                        {"latency_ms", c.latency_ms},
                        {"budget_ms", budgets[k]}});
      for (int r = 0; r < c.replicas; ++r)
        if (!prov.start(m.name, cores, c.batch)) ++unplaced[m.name];
    }
    total_cost += solved->cost;
    j["pipelines"].push_back({{"name", p.name},
                              {"slo_ms", p.slo_ms},
                              {"rate", rates[pi]},
                              {"accuracy", solved->accuracy},
                              {"cost", solved->cost},
                              {"objective", solved->objective},
                              {"latency_ms", solved->latency_ms},
                              {"stages", stages}});
  }
  j["instances"] = nlohmann::json::array();
  for (auto& i : prov.instances())
    j["instances"].push_back(
        {{"node", i.node}, {"device", i.device}, {"model", i.model}, {"cores", i.cores}, {"batch", i.batch}});
  j["unplaced"] = unplaced;
  j["cores"] = total_cost;
  // Replicas hold their devices: each device holding one costs its type's price.
  std::set<std::pair<std::string, uint32_t>> held;
  for (auto& i : prov.instances()) held.insert({i.node, i.device});
  double cost = 0;
  for (auto& s : device_slots(cfg))
    if (held.count({s.node, s.device})) cost += s.price;
  j["cost"] = cost;
  j["planning_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (auto& p : j["pipelines"]) {
    std::printf("pipeline %s  SLO %.1f ms  rate %.1f/s  accuracy %.2f%%  cost %.1f cores  path %.1f ms\n",
                p["name"].get<std::string>().c_str(), p["slo_ms"].get<double>(), p["rate"].get<double>(),
                100 * p["accuracy"].get<double>(), p["cost"].get<double>(), p["latency_ms"].get<double>());
    for (auto& s : p["stages"])
      std::printf("  %-16s %-20s batch %3d  replicas %3d  cores %3d  budget %7.1f ms\n",
                  s["name"].get<std::string>().c_str(), s["variant"].get<std::string>().c_str(), s["batch"].get<int>(),
                  s["replicas"].get<int>(), s["cores"].get<int>(), s["budget_ms"].get<double>());
  }
  std::printf("\n%zu instances placed on devices costing %.2f", j["instances"].size(), cost);
  for (auto& [m, n] : unplaced) std::printf("; %d of '%s' found no device slot", n, m.c_str());
  std::printf("\nplanned in %.1f ms\n", j["planning_ms"].get<double>());
  return 0;
}

// Piccolo at the given rates, as a cluster with `scheduler.policy: piccolo` plans it: per
// pipeline, each stage's budget and configuration set over the cluster's device types
// (scheduling/piccolo), its dummies and cost; then what the sets need of each type against what
// the cluster has (scarce types weigh more while planning).
int plan_piccolo(const cluster_config& cfg, const sched::epoch_input& in, bool json) {
  auto t0 = std::chrono::steady_clock::now();
  auto planned = sched::plan_piccolo(in);
  auto& types = planned.types;
  nlohmann::json j;
  j["policy"] = "piccolo";
  j["pipelines"] = nlohmann::json::array();
  double cost = 0, dummy = 0;
  for (size_t pi = 0; pi < cfg.pipelines.size(); ++pi) {
    auto& p = cfg.pipelines[pi];
    auto& pp = planned.pipelines[pi];
    if (pp.rates.empty()) continue;
    if (!pp.plan.feasible) {
      std::cerr << "sloserve plan: pipeline '" << p.name << "': no configurations of its stages fit its " << p.slo_ms
                << " ms SLO at " << in.rates[pi] << " queries/s\n";
      return 2;
    }
    nlohmann::json stages = nlohmann::json::array();
    for (size_t s = 0; s < p.stages.size(); ++s) {
      auto& sorted = pp.configs[s];
      auto& mp = pp.plan.modules[s];
      auto wc = sched::worst_cases(sorted, mp.machines);
      nlohmann::json machines = nlohmann::json::array();
      for (size_t k = 0; k < mp.machines.size(); ++k) {
        auto& c = sorted[mp.machines[k].config];
        machines.push_back({{"type", types.names[c.type]},
                            {"share", types.share[c.type]},
                            {"label", types.label(c.type)},
                            {"batch", c.batch},
                            {"rate", mp.machines[k].rate},
                            {"occupancy", mp.machines[k].rate / c.throughput()},
                            {"worst_case_ms", 1e3 * wc[k]}});
      }
      stages.push_back({{"name", p.stages[s].name},
                        {"model", p.stages[s].model},
                        {"rate", pp.rates[s]},
                        {"budget_ms", 1e3 * pp.plan.budget_s[s]},
                        {"worst_case_ms", 1e3 * mp.worst_case_s},
                        {"dummy_rate", mp.dummy},
                        {"cost", pp.cost[s]},
                        {"machines", machines}});
    }
    cost += pp.total;
    dummy += pp.plan.dummy;
    j["pipelines"].push_back({{"name", p.name},
                              {"slo_ms", p.slo_ms},
                              {"rate", in.rates[pi]},
                              {"cost", pp.total},
                              {"dummy_rate", pp.plan.dummy},
                              {"stages", stages}});
  }
  j["devices"] = nlohmann::json::array();
  for (size_t t = 0; t < types.names.size(); ++t)
    j["devices"].push_back({{"type", types.names[t]},
                            {"share", types.share[t]},
                            {"label", types.label(t)},
                            {"price", types.price[t]},
                            {"needed", planned.needed[t]},
                            {"available", types.available[t]}});
  j["cost"] = cost;
  j["dummy_rate"] = dummy;
  j["planning_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (auto& p : j["pipelines"]) {
    std::printf("pipeline %s  SLO %.1f ms  rate %.1f/s  cost %.3f  dummies %.1f/s\n",
                p["name"].get<std::string>().c_str(), p["slo_ms"].get<double>(), p["rate"].get<double>(),
                p["cost"].get<double>(), p["dummy_rate"].get<double>());
    for (auto& s : p["stages"]) {
      std::printf("  %-16s %-20s budget %7.1f ms  worst case %7.1f ms  cost %.3f\n",
                  s["name"].get<std::string>().c_str(), s["model"].get<std::string>().c_str(),
                  s["budget_ms"].get<double>(), s["worst_case_ms"].get<double>(), s["cost"].get<double>());
      for (auto& m : s["machines"])
        std::printf("    %-10s batch %4d  %8.1f req/s  occupancy %.2f  worst case %.1f ms\n",
                    m["label"].get<std::string>().c_str(), m["batch"].get<int>(), m["rate"].get<double>(),
                    m["occupancy"].get<double>(), m["worst_case_ms"].get<double>());
    }
  }
  std::printf("\n");
  for (auto& d : j["devices"])
    std::printf("%-10s price %.2f: %zu needed of %zu\n", d["label"].get<std::string>().c_str(),
                d["price"].get<double>(), d["needed"].get<size_t>(), d["available"].get<size_t>());
  std::printf("cost %.3f (price x occupancy)  planned in %.1f ms\n", cost, j["planning_ms"].get<double>());
  return 0;
}

// `--fragments PIPELINE=START:SLO_MS[:WEIGHT[:CLIENTS]],...` into in.fragments; the reason when
// one is wrong, else empty.
std::string set_fragments(const cluster_config& cfg, const std::vector<std::string>& given, sched::epoch_input& in) {
  in.fragments.assign(cfg.pipelines.size(), {});
  for (auto& g : given) {
    auto eq = g.find('=');
    auto* p = eq == std::string::npos ? nullptr : cfg.find_pipeline(g.substr(0, eq));
    if (!p) return g + ": expected PIPELINE=START:SLO_MS[:WEIGHT[:CLIENTS]],... with a pipeline of the file";
    auto& m = cfg.models[p->stages.front().model_index];
    if (!m.partitioned()) return g + ": pipeline '" + p->name + "' does not run a partitioned model";
    auto& out = in.fragments[static_cast<size_t>(p - cfg.pipelines.data())];
    std::stringstream items(g.substr(eq + 1));
    double total = 0;
    for (std::string item; std::getline(items, item, ',');) {
      std::vector<double> v;
      std::stringstream parts(item);
      for (std::string x; std::getline(parts, x, ':');) {
        char* end = nullptr;
        v.push_back(std::strtod(x.c_str(), &end));
        if (x.empty() || *end) return g + ": '" + item + "' is not START:SLO_MS[:WEIGHT[:CLIENTS]]";
      }
      if (v.size() < 2 || v.size() > 4 || v[0] < 0 || v[0] >= static_cast<double>(m.layers.size()) || !(v[1] > 0) ||
          (v.size() > 2 && !(v[2] > 0)) || (v.size() > 3 && !(v[3] >= 1 && v[3] <= 64)))
        return g + ": '" + item + "' needs a START below " + std::to_string(m.layers.size()) +
               ", a positive SLO_MS and WEIGHT, and 1 to 64 CLIENTS";
      out.push_back({static_cast<int>(v[0]), v[1], v.size() > 2 ? v[2] : 1, v.size() > 3 ? static_cast<int>(v[3]) : 1});
      total += out.back().share;
    }
    for (auto& f : out) f.share /= total;
  }
  return {};
}

}  // namespace

void add_plan_command(CLI::App& app, int& rc) {
  struct opts {
    std::string config;
    scheduler_policy policy = scheduler_policy::nexus;
    split_policy split = split_policy::dp;
    std::vector<std::string> rates, fragments;
    bool json = false;
    int steps = 100;
  };
  auto o = std::make_shared<opts>();
  auto* cmd = app.add_subcommand("plan", "Print the SLO splits, sessions and device placement for given rates");
  cmd->add_option("-c,--config", o->config, "cluster file")->required();
  cmd->add_option("--rate", o->rates, "PIPELINE=QUERIES_PER_S (repeat for each pipeline)")->required();
  auto* policy = add_knob_option(cmd, "--policy", o->policy, "packing (static packs as nexus); default: the file's")
                     ->default_str("scheduler.policy");
  auto* split =
      add_knob_option(cmd, "--split", o->split, "SLO split (dp: the query analyzer)")->default_str("scheduler.split");
  auto* steps = cmd->add_option("--steps", o->steps, "budget grid of the DP")->default_str("scheduler.steps");
  cmd->add_option("--fragments", o->fragments,
                  "policy graft: PIPELINE=START:SLO_MS[:WEIGHT[:CLIENTS]],... the pipeline's queries by start layer "
                  "and SLO (default: all at layer 0 with the pipeline's SLO)");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->callback([o, &rc, policy, split, steps] {
    auto cfg = load_config_or_report(o->config);
    if (!cfg) return void(rc = 2);
    // What the file's scheduler would plan with, unless the command line says otherwise.
    if (!policy->count()) o->policy = cfg->scheduler.policy;
    if (!split->count()) o->split = cfg->scheduler.split;
    if (!steps->count()) o->steps = cfg->scheduler.steps;
    for (auto& m : cfg->models)
      if (m.needs_profile) {
        std::cerr << o->config << ": model '" << m.name << "' has no profile to plan with; measure it with "
                  << "`sloserve profile -c " << o->config << " --model " << m.name << "` and add the printed key\n";
        return void(rc = 2);
      }
    if (sched::policy_of(o->policy).maps_clients()) {
      std::cerr << "sloserve plan: policy " << knob_name(o->policy)
                << " maps clients on their uplinks, every interval while serving; there is no plan for pipeline "
                   "rates to print (see the controller's log)\n";
      return void(rc = 2);
    }
    auto in = planning_input(*cfg, cfg->models);
    in.rates.assign(cfg->pipelines.size(), 0);
    in.policy = &sched::policy_of(o->policy);
    in.split = o->split;
    in.steps = o->steps;
    for (auto& r : o->rates) {
      auto eq = r.find('=');
      const pipeline* p = eq == std::string::npos ? nullptr : cfg->find_pipeline(r.substr(0, eq));
      double v = -1;
      try {
        if (p) v = std::stod(r.substr(eq + 1));
      } catch (...) {
      }
      if (!p || v < 0) {
        std::cerr << "--rate " << r << ": expected PIPELINE=RATE with a pipeline of " << o->config << "\n";
        return void(rc = 2);
      }
      in.rates[static_cast<size_t>(p - cfg->pipelines.data())] = v;
    }
    if (auto bad = set_fragments(*cfg, o->fragments, in); !bad.empty()) {
      std::cerr << "--fragments " << bad << "\n";
      return void(rc = 2);
    }
    if (o->policy == scheduler_policy::piccolo) return void(rc = plan_piccolo(*cfg, in, o->json));
    if (o->policy == scheduler_policy::ipa) {
      auto ipa_cfg = *cfg;
      ipa_cfg.scheduler.policy = scheduler_policy::ipa;
      return void(rc = plan_ipa(ipa_cfg, in.rates, o->json));
    }
    in.parallel = parallel_for;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> degraded;
    if (sched::has_variants(cfg->pipelines)) degraded = sched::choose_epoch_variants(in, nullptr).degraded;
    auto planned = sched::plan_epoch(in);
    double planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!planned) {
      std::cerr << "sloserve plan: " << planned.error() << "\n";
      return void(rc = 2);
    }
    auto& res = *planned;
    nlohmann::json j;
    j["policy"] = knob_name(o->policy);
    j["split"] = knob_name(o->split);
    j["pipelines"] = nlohmann::json::array();
    for (size_t pi = 0; pi < cfg->pipelines.size(); ++pi) {
      auto& p = cfg->pipelines[pi];
      nlohmann::json stages = nlohmann::json::array();
      // The model each stage runs: with variants, the one chosen for the cluster's memory.
      auto& planned_stages = (*in.pipelines)[pi].stages;
      for (size_t s = 0; s < p.stages.size(); ++s)
        stages.push_back({{"name", p.stages[s].name},
                          {"model", planned_stages[s].model},
                          {"budget_ms", res.splits[pi].budget_ms[s]}});
      j["pipelines"].push_back({{"name", p.name}, {"slo_ms", p.slo_ms}, {"rate", in.rates[pi]}, {"stages", stages}});
    }
    j["sessions"] = nlohmann::json::array();
    for (size_t i = 0; i < res.sessions.size(); ++i) {
      int batch = 0;
      for (auto& d : res.placement.devices)
        for (auto& a : d.sessions)
          if (a.session == i) batch = std::max(batch, a.batch);
      auto& s = res.sessions[i];
      nlohmann::json models = nlohmann::json::array();
      for (auto& [m, w] : res.models_of[i]) models.push_back(m->name);
      j["sessions"].push_back(
          {{"model", s.model->is_variant() && models.size() > 1 ? "prefix:" + s.model->prefix : s.model->name},
           {"models", models},
           {"slo_ms", s.slo_ms},
           {"rate", s.rate},
           {"batch", batch}});
    }
    j["devices"] = nlohmann::json::array();
    double cost = 0;  // price x occupancy; a device no slot took costs the dearest slot's price
    double dearest = 1;
    for (auto& s : in.slots) dearest = std::max(dearest, s.price);
    for (size_t k = 0; k < res.placement.devices.size(); ++k) {
      auto& d = res.placement.devices[k];
      nlohmann::json sess = nlohmann::json::array();
      for (auto& a : d.sessions)
        for (auto& [m, w] : res.models_of[a.session])
          sess.push_back(
              {{"model", m->name}, {"slo_ms", res.sessions[a.session].slo_ms}, {"batch", a.batch}, {"rate", a.rate}});
      nlohmann::json node = nullptr, device = nullptr;
      double price = dearest;
      if (res.slot_of[k] >= 0) {
        node = in.slots[static_cast<size_t>(res.slot_of[k])].node;
        device = in.slots[static_cast<size_t>(res.slot_of[k])].device;
        price = in.slots[static_cast<size_t>(res.slot_of[k])].price;
      }
      cost += price * std::min(1.0, d.occupancy);
      j["devices"].push_back({{"node", node},
                              {"device", device},
                              {"duty_cycle_ms", d.duty_cycle_ms},
                              {"dedicated", d.dedicated},
                              {"occupancy", d.occupancy},
                              {"sessions", sess}});
    }
    j["cost"] = cost;
    j["devices_used"] = res.placement.devices.size();
    j["devices_available"] = in.slots.size();
    j["devices_missing"] = res.devices_missing;
    j["planning_ms"] = planning_ms;
    j["degraded"] = degraded;
    j["infeasible"] = nlohmann::json::array();
    for (auto i : res.placement.infeasible) j["infeasible"].push_back(res.sessions[i].model->name);
    if (o->policy == scheduler_policy::graft) {
      j["gpu_share"] = res.resources;
      j["fragments"] = nlohmann::json::array();
      for (auto& f : res.fragment_routes)
        j["fragments"].push_back({{"pipeline", cfg->pipelines[f.pipeline].name},
                                  {"start", f.start},
                                  {"slo_ms", f.slo_ms},
                                  {"rate", f.rate},
                                  {"models", f.models},
                                  {"budget_ms", f.budget_ms}});
    }
    if (o->json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    for (auto& p : j["pipelines"]) {
      std::printf("pipeline %s  SLO %.1f ms  rate %.1f/s\n", p["name"].get<std::string>().c_str(),
                  p["slo_ms"].get<double>(), p["rate"].get<double>());
      for (auto& s : p["stages"])
        std::printf("  %-16s %-20s budget %7.1f ms\n", s["name"].get<std::string>().c_str(),
                    s["model"].get<std::string>().c_str(), s["budget_ms"].get<double>());
    }
    std::printf("\n%-20s %9s %9s %6s\n", "session", "slo_ms", "rate", "batch");
    for (auto& s : j["sessions"])
      std::printf("%-20s %9.1f %9.1f %6d\n", s["model"].get<std::string>().c_str(), s["slo_ms"].get<double>(),
                  s["rate"].get<double>(), s["batch"].get<int>());
    std::printf("\n%-10s %6s %10s %6s  %s\n", "node", "device", "duty_ms", "occ", "sessions (model x batch)");
    for (auto& d : j["devices"]) {
      std::string sess;
      for (auto& s : d["sessions"])
        sess += s["model"].get<std::string>() + "x" + std::to_string(s["batch"].get<int>()) + " ";
      std::printf("%-10s %6s %10.1f %6.2f  %s%s\n", d["node"].is_null() ? "-" : d["node"].get<std::string>().c_str(),
                  d["device"].is_null() ? "-" : std::to_string(d["device"].get<int>()).c_str(),
                  d["duty_cycle_ms"].get<double>(), d["occupancy"].get<double>(), sess.c_str(),
                  d["dedicated"].get<bool>() ? "(dedicated)" : "");
    }
    if (j.contains("fragments")) {
      std::printf("\n%-10s %5s %8s %8s  %s\n", "pipeline", "start", "slo_ms", "rate", "ranges in turn (budget ms)");
      for (auto& f : j["fragments"]) {
        std::string ranges;
        for (size_t k = 0; k < f["models"].size(); ++k)
          ranges += (k ? " + " : "") + f["models"][k].get<std::string>() + " (" +
                    std::to_string(static_cast<int>(f["budget_ms"][k].get<double>() + 0.5)) + ")";
        std::printf("%-10s %5d %8.1f %8.1f  %s\n", f["pipeline"].get<std::string>().c_str(), f["start"].get<int>(),
                    f["slo_ms"].get<double>(), f["rate"].get<double>(), ranges.c_str());
      }
      std::printf("GPU share (share x instances) %.2f\n", j["gpu_share"].get<double>());
    }
    std::printf("\ncost %.3f (price x occupancy); devices used %zu of %zu available", cost,
                res.placement.devices.size(), in.slots.size());
    if (res.devices_missing) std::printf(" (%zu more needed)", res.devices_missing);
    std::printf("\nplanned in %.1f ms\n", planning_ms);
    if (!res.placement.infeasible.empty()) std::printf("infeasible sessions: %s\n", j["infeasible"].dump().c_str());
    for (auto& d : degraded) std::printf("for memory: %s\n", d.c_str());
  });
}

}  // namespace sloserve
