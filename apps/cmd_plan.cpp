// `sloserve plan`: what the scheduler would apply for given pipeline rates.

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/parallel_for.hpp"
#include "apps/commands.hpp"
#include "config/knob_option.hpp"
#include "scheduling/placement.hpp"
#include "scheduling/policies/registry.hpp"

namespace sloserve {
namespace {

// `--fragments PIPELINE=START:SLO_MS[:WEIGHT[:CLIENTS]],...` into in.fragments (the queries of a
// partitioned model's pipeline by where they start and their SLO).
status set_fragments(const cluster_config& cfg, const std::vector<std::string>& given, sched::epoch_input& in) {
  in.fragments.assign(cfg.pipelines.size(), {});
  for (auto& g : given) {
    auto eq = g.find('=');
    auto* p = eq == std::string::npos ? nullptr : cfg.find_pipeline(g.substr(0, eq));
    if (!p) return fail(g + ": expected PIPELINE=START:SLO_MS[:WEIGHT[:CLIENTS]],... with a pipeline of the file");
    auto& m = cfg.models[p->stages.front().model_index];
    if (!m.partitioned()) return fail(g + ": pipeline '" + p->name + "' does not run a partitioned model");
    auto& out = in.fragments[static_cast<size_t>(p - cfg.pipelines.data())];
    std::stringstream items(g.substr(eq + 1));
    double total = 0;
    for (std::string item; std::getline(items, item, ',');) {
      std::vector<double> v;
      std::stringstream parts(item);
      for (std::string x; std::getline(parts, x, ':');) {
        char* end = nullptr;
        v.push_back(std::strtod(x.c_str(), &end));
        if (x.empty() || *end) return fail(g + ": '" + item + "' is not START:SLO_MS[:WEIGHT[:CLIENTS]]");
      }
      if (v.size() < 2 || v.size() > 4 || v[0] < 0 || v[0] >= static_cast<double>(m.layers.size()) || !(v[1] > 0) ||
          (v.size() > 2 && !(v[2] > 0)) || (v.size() > 3 && !(v[3] >= 1 && v[3] <= 64)))
        return fail(g + ": '" + item + "' needs a START below " + std::to_string(m.layers.size()) +
                    ", a positive SLO_MS and WEIGHT, and 1 to 64 CLIENTS");
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
    scheduler_policy policy{};  // read only when --policy is given
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
    auto chosen = cfg->scheduler;  // the file's policy (a registered one too), unless --policy names one
    if (policy->count()) chosen.policy = o->policy, chosen.policy_name.clear();
    if (!split->count()) o->split = cfg->scheduler.split;
    if (!steps->count()) o->steps = cfg->scheduler.steps;
    for (auto& m : cfg->models)
      if (m.needs_profile) {
        std::cerr << o->config << ": model '" << m.name << "' has no profile to plan with; measure it with "
                  << "`sloserve profile -c " << o->config << " --model " << m.name << "` and add the printed key\n";
        return void(rc = 2);
      }
    auto in = planning_input(*cfg, cfg->models);
    in.rates.assign(cfg->pipelines.size(), 0);
    in.policy = &sched::policy_of(chosen);
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
    if (auto ok = set_fragments(*cfg, o->fragments, in); !ok) {
      std::cerr << "--fragments " << ok.error() << "\n";
      return void(rc = 2);
    }
    in.parallel = parallel_for;
    auto report = in.policy->report(*cfg, in);
    if (!report) {
      std::cerr << "sloserve plan: " << report.error() << "\n";
      return void(rc = 2);
    }
    if (!o->json) return void(std::cout << report->text);
    auto j = nlohmann::json::parse(report->json);
    j["policy"] = std::string(chosen.name());
    std::cout << j.dump(2) << "\n";
  });
}

}  // namespace sloserve
