// `pipelines:` entries: each stage's model, variants, cascade or versions, what it comes after
// and its fan-out; the DAG checked.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/cluster_config.hpp"
#include "config/reader.hpp"
#include "config/settings.hpp"
#include "config/settings_io.hpp"

namespace sloserve::config_detail {

namespace {

// A stage: a model, variants or a cascade (one of them), what it comes after, its fanout.
stage parse_stage(reader& r, const YAML::Node& sn, const std::string& where) {
  stage s;
  r.known_keys(sn, "pipelines[].stages[]", where + " stage");
  auto sw = named(sn, where + " stage");
  settings::read_keys(r, sn, s, settings::stage_keys(), sw);
  if (auto cn = sn["cascade"]) {
    if (sn["model"] || sn["variants"])
      r.error(cn, sw + " names 'cascade' beside 'model' or 'variants'; give one of them");
    r.known_keys(cn, "pipelines[].stages[].cascade", sw + " cascade");
    cascade_spec c;
    settings::read_keys(r, cn, c, settings::cascade_keys(), sw + " cascade");
    if (auto kn = cn["skew"]) {
      r.known_keys(kn, "pipelines[].stages[].cascade.skew", sw + " cascade skew");
      skew_options k;
      settings::read_keys(r, kn, k, settings::skew_keys(), sw + " cascade skew");
      c.skew = std::move(k);
    }
    s.model.clear();
    s.variants.clear();
    s.cascade = std::move(c);
  } else if (sn["variants"]) {
    if (s.variants.empty()) r.error(sn["variants"], sw + " variants must name at least one model");
    if (sn["model"]) r.error(sn["model"], sw + " names both 'model' and 'variants'; give one of them");
    s.model.clear();
  } else if (!sn["model"]) {
    r.error(sn, sw + " is missing 'model'");
  }
  if (auto fn = sn["fanout"]; fn && fn.IsMap()) {
    r.known_keys(fn, "pipelines[].stages[].fanout", sw + " fanout");
    output_items items;
    settings::read_keys(r, fn, items, settings::output_items_keys(), sw + " fanout");
    s.items = std::move(items);
  } else if (double f = 0; fn && r.get(sn, "fanout", f, sw, false)) {
    s.fanout = f;
  }
  if (auto vn = sn["versions"]) {
    if (!vn.IsSequence() || vn.size() == 0)
      r.error(vn, sw + " versions must list at least one {version, weight}");
    else if (!sn["model"] || sn["variants"] || sn["cascade"])
      r.error(vn, sw + " versions are versions of its 'model': give 'model' and no variants or cascade");
    else
      for (auto v : vn) {
        r.known_keys(v, "pipelines[].stages[].versions[]", sw + " version");
        stage_version x;
        r.get(v, "version", x.version, sw + " version", true);
        r.get(v, "weight", x.weight, sw + " version", true);
        if (x.version < 1) r.error(v["version"], sw + " version must be 1 or more");
        if (x.weight < 0) r.error(v["weight"], sw + " version weight must not be negative");
        for (auto& y : s.versions)
          if (y.version == x.version)
            r.error(v["version"], sw + " lists version " + std::to_string(x.version) + " twice");
        s.versions.push_back(x);
      }
  }
  if (sn["after"] && sn["after"].IsScalar())
    s.after.push_back(sn["after"].as<std::string>());
  else
    r.get(sn, "after", s.after, sw, false);
  return s;
}

}  // namespace

void parse_pipeline(reader& r, const YAML::Node& n, cluster_config& cfg) {
  if (!n.IsMap()) {
    r.error(n, "each pipeline must be a map");
    return;
  }
  pipeline p;
  auto where = named(n, "pipeline");
  r.known_keys(n, "pipelines[]", where);
  settings::read_keys(r, n, p, settings::pipeline_keys(), where);
  if (n["slo_ms"] && !(p.slo_ms > 0)) r.error(n["slo_ms"], where + " slo_ms must be positive");
  std::vector<YAML::Node> stage_nodes;
  if (!n["stages"] || !n["stages"].IsSequence()) {
    r.error(n, where + " needs a list of 'stages'");
  } else {
    for (auto sn : n["stages"]) {
      p.stages.push_back(parse_stage(r, sn, where));
      stage_nodes.push_back(sn);
    }
  }
  auto before = r.errors_.size();
  for (auto& issue : resolve(p, cfg.models)) {
    auto at = issue.stage < stage_nodes.size() ? stage_nodes[issue.stage] : n;
    r.error(at, where + ": " + issue.message);
  }
  if (r.errors_.size() == before && p.slo_ms > 0) {
    auto fastest = fastest_path_ms(p, cfg.models);
    if (fastest > p.slo_ms)
      r.error(n["slo_ms"], where + " slo_ms " + number(p.slo_ms) + " is below its fastest possible path (" +
                               number(fastest) + " ms at batch 1)");
    // Per-path SLOs: on leaves, within the pipeline's, and no faster than the leaf can finish.
    auto finish = fastest_finish_ms(p, cfg.models);
    for (size_t k = 0; k < p.stages.size() && k < stage_nodes.size(); ++k) {
      auto& s = p.stages[k];
      if (!s.slo_ms) continue;
      auto at = stage_nodes[k]["slo_ms"];
      auto sw = where + " stage '" + s.name + "'";
      if (!s.children.empty())
        r.error(at, sw + " slo_ms: only a leaf stage (one no stage runs after) may have an SLO of its own");
      else if (!(*s.slo_ms > 0) || *s.slo_ms > p.slo_ms)
        r.error(at, sw + " slo_ms " + number(*s.slo_ms) + " must be positive and at most the pipeline's slo_ms (" +
                        number(p.slo_ms) + ")");
      else if (finish[k] > *s.slo_ms)
        r.error(at, sw + " slo_ms " + number(*s.slo_ms) + " is below its fastest possible path (" + number(finish[k]) +
                        " ms at batch 1)");
    }
  }
  if (cfg.find_pipeline(p.name)) r.error(n["name"], "duplicate pipeline name '" + p.name + "'");
  cfg.pipelines.push_back(std::move(p));
}

}  // namespace sloserve::config_detail
