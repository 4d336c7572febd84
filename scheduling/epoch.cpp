#include "scheduling/epoch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "pipelines/query_walk.hpp"
#include "scheduling/catalogue.hpp"
#include "scheduling/packing.hpp"
#include "scheduling/policies/policy.hpp"

namespace sloserve::sched {

namespace {

// A cascade stage's second model: what share of the stage's budget its first model gets, and
// what fraction of the stage's requests fall through to the second.
struct cascade_plan {
  const model_spec* second = nullptr;
  double first_share = 1;
  double fallthrough = 0;
};
std::optional<cascade_plan> cascade_of(const epoch_input& in, size_t pi, size_t s) {
  auto& st = (*in.pipelines)[pi].stages[s];
  if (!st.cascade) return std::nullopt;
  auto& models = *in.models;
  cascade_plan c;
  c.second = &models[st.cascade->second_index];
  c.first_share = cascade_first_share(models[st.model_index], *c.second);
  if (pi < in.fallthroughs.size() && s < in.fallthroughs[pi].size())
    c.fallthrough = in.fallthroughs[pi][s];
  else
    c.fallthrough = declared_fallthrough(models[st.model_index]);
  return c;
}

// Sessions from the splits. Budgets are rounded to 0.1 ms so that stages that share a model and
// an SLO become one session, and so do variants that share a prefix and an SLO. A cascade stage
// gives two: its first model on its share of the budget at the stage's rate, its second on the
// rest at the rate that falls through.
void collect_sessions(const epoch_input& in, const std::vector<std::vector<double>>& rates, epoch_result& out) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  out.sessions.clear();
  out.members.clear();
  out.models_of.clear();
  std::map<std::pair<std::string, long>, size_t> session_of;
  // Adds `rate` of `model` at `budget` to the session of (`name`, budget), made on first use.
  auto add = [&](const std::string& name, const model_spec& model, double budget, double rate) {
    auto key = std::make_pair(name, static_cast<long>(std::lround(budget * 10)));
    auto it = session_of.find(key);
    if (it == session_of.end()) {
      it = session_of.emplace(key, out.sessions.size()).first;
      // A merged family plans with its first variant's profile: the suffixes are small.
      out.sessions.push_back({&model, budget, 0});
      out.members.emplace_back();
      out.models_of.emplace_back();
    }
    out.sessions[it->second].rate += rate;
    auto& mo = out.models_of[it->second];
    auto m = std::find_if(mo.begin(), mo.end(), [&](auto& x) { return x.first == &model; });
    if (m == mo.end())
      mo.emplace_back(&model, rate);
    else
      m->second += rate;
    return it->second;
  };
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    for (size_t s = 0; s < p.stages.size(); ++s) {
      auto cascade = cascade_of(in, pi, s);
      if (cascade) {
        double rest = std::floor(out.splits[pi].budget_ms[s] * (1 - cascade->first_share) * 10) / 10;
        add(cascade->second->name, *cascade->second, rest, rates[pi][s] * cascade->fallthrough);
      }
      auto budget = std::floor(out.splits[pi].budget_ms[s] * (cascade ? cascade->first_share : 1) * 10) / 10;
      // Versions of the stage's model: each its share of the stage's rate, at the stage's budget.
      if (auto& vs = p.stages[s].versions; !vs.empty()) {
        double total = 0;
        for (auto& v : vs) total += v.weight;
        for (auto& v : vs)
          if (v.weight > 0)
            out.members[add(models[v.model_index].name, models[v.model_index], budget, rates[pi][s] * v.weight / total)]
                .emplace_back(pi, s);
        continue;
      }
      auto& model = models[p.stages[s].model_index];
      auto i = add(model.is_variant() ? "prefix:" + model.prefix : model.name, model, budget, rates[pi][s]);
      out.members[i].emplace_back(pi, s);
    }
  }
}

// Places out.sessions and binds the placed devices to slots: a device keeps the previous slot of
// its id where it still fits. Slots are matched by (node, device): the set of live slots may
// differ between epochs.
void place(const epoch_input& in, const planner& planner, const epoch_result* previous, const batch_tables& tables,
           epoch_result& out) {
  // Devices are packed within the smallest slot's memory when every slot has a limit (so that
  // the packing does not merge sessions no slot can hold); binding checks each slot's own.
  device_caps caps;
  if (!in.slots.empty() && std::all_of(in.slots.begin(), in.slots.end(), [](auto& s) { return s.memory_mb > 0; }))
    caps.memory_mb = std::min_element(in.slots.begin(), in.slots.end(), [](auto& a, auto& b) {
                       return a.memory_mb < b.memory_mb;
                     })->memory_mb;
  out.placement = previous ? planner.make(out.sessions, caps, &previous->placement, &previous->sessions, &tables)
                           : planner.make(out.sessions, caps, nullptr, nullptr, &tables);
  bind_slots(in, previous, out);
}

// What a plan costs, compared lexicographically: sessions it cannot serve, devices it lacks,
// devices it uses, sessions it moves.
using plan_cost_t = std::tuple<size_t, size_t, size_t, size_t>;
plan_cost_t plan_cost(const epoch_result& r) {
  return {r.placement.infeasible.size(), r.devices_missing, r.placement.devices.size(), r.placement.moved};
}

// The neighbour search on one packing: a candidate split of one pipeline moves its stages to
// other sessions, and only those sessions are packed again, against the rest of the plan.
class neighbour_search {
 public:
  neighbour_search(const epoch_input& in, const std::vector<std::vector<double>>& rates, const epoch_result& start,
                   const batch_tables& tables)
      : in_(in), rates_(rates), sessions_(start.sessions), members_(start.members), packing_(sessions_, {}, tables) {
    auto& pipes = *in.pipelines;
    stage_session_.resize(pipes.size());
    for (size_t pi = 0; pi < pipes.size(); ++pi) stage_session_[pi].assign(pipes[pi].stages.size(), 0);
    for (size_t i = 0; i < members_.size(); ++i)
      for (auto [pi, s] : members_[i]) stage_session_[pi][s] = i;
    for (size_t i = 0; i < sessions_.size(); ++i) {
      auto& [pi, s] = members_[i].front();
      session_of_.emplace(key(pi, s, sessions_[i].slo_ms), i);
    }
    packing_.make();
    cost_ = cost();
    load_ = packing_.load();
  }

  // Moves pipeline pi to `budgets` if the packing then costs less; true when it did.
  bool try_split(size_t pi, const std::vector<double>& budgets) {
    auto& p = (*in_.pipelines)[pi];
    packing_.begin();
    saved_.clear();
    created_.clear();
    size_t sessions_before = sessions_.size();
    std::vector<size_t> touched;
    auto touch = [&](size_t i) {
      if (std::find(touched.begin(), touched.end(), i) != touched.end()) return;
      touched.push_back(i);
      saved_.push_back({i, sessions_[i], members_[i]});
      packing_.remove(i);
    };
    std::vector<size_t> moved_to(p.stages.size());
    for (size_t s = 0; s < p.stages.size(); ++s) {
      double budget = std::floor(budgets[s] * 10) / 10;
      size_t from = stage_session_[pi][s];
      auto k = key(pi, s, budget);
      auto it = session_of_.find(k);
      size_t to;
      if (it != session_of_.end()) {
        to = it->second;
      } else {
        to = sessions_.size();
        sessions_.push_back({&model_of(pi, s), budget, 0});
        members_.emplace_back();
        session_of_.emplace(k, to);
        created_.push_back(k);
      }
      moved_to[s] = to;
      if (to == from) continue;
      touch(from);
      if (to < sessions_before) touch(to);
      auto& m = members_[from];
      m.erase(std::find(m.begin(), m.end(), std::make_pair(pi, s)));
      members_[to].emplace_back(pi, s);
    }
    for (auto i : touched) {
      rate_from_members(i);
      packing_.add(i);
    }
    for (size_t i = sessions_before; i < sessions_.size(); ++i) {
      rate_from_members(i);
      packing_.add(i);
    }
    auto c = cost();
    // Fewer devices, or as many with less load on them: the packing of the whole plan turns
    // load saved here into devices saved more often than a single re-pack shows.
    double load = packing_.load();
    if (c < cost_ || (c == cost_ && load < load_ - 1e-6)) {
      load_ = load;
      packing_.commit();
      cost_ = c;
      stage_session_[pi] = moved_to;
      return true;
    }
    packing_.rollback();
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      sessions_[it->index] = it->was, members_[it->index] = it->members;
    sessions_.resize(sessions_before);
    members_.resize(sessions_before);
    for (auto& k : created_) session_of_.erase(k);
    return false;
  }

 private:
  using session_key = std::pair<std::string_view, long>;
  const model_spec& model_of(size_t pi, size_t s) const {
    return (*in_.models)[(*in_.pipelines)[pi].stages[s].model_index];
  }
  // As collect_sessions keys them.
  session_key key(size_t pi, size_t s, double budget) const {
    auto& m = model_of(pi, s);
    return {m.is_variant() ? std::string_view(m.prefix) : std::string_view(m.name),
            std::lround(budget * 10) * 2 + m.is_variant()};
  }
  void rate_from_members(size_t i) {
    double r = 0;
    for (auto [pi, s] : members_[i]) r += rates_[pi][s];
    sessions_[i].rate = r;
  }
  plan_cost_t cost() const {
    size_t used = packing_.devices(), slots = in_.slots.size();
    return {packing_.infeasible(), used > slots ? used - slots : 0, used, 0};
  }

  const epoch_input& in_;
  const std::vector<std::vector<double>>& rates_;
  std::vector<session> sessions_;
  std::vector<std::vector<std::pair<size_t, size_t>>> members_;
  squishy_packing packing_;
  std::vector<std::vector<size_t>> stage_session_;
  std::map<session_key, size_t> session_of_;
  plan_cost_t cost_;
  double load_ = 0;
  struct saved {
    size_t index;
    session was;
    std::vector<std::pair<size_t, size_t>> members;
  };
  std::vector<saved> saved_;
  std::vector<session_key> created_;
};

// fn(i) for every i < n, on the caller's threads when it gave some.
void for_each_index(const epoch_input& in, size_t n, const std::function<void(size_t)>& fn) {
  if (in.parallel) return in.parallel(n, fn);
  for (size_t i = 0; i < n; ++i) fn(i);
}

// A neighbour of a pipeline's split: the DP re-run with one stage held at another batch.
struct neighbour {
  size_t stage = 0;
  slo_split split;
};

// The neighbours of `current` at stage s, in the order of the batches held.
std::vector<neighbour> neighbours_of(const pipeline& p, const std::vector<double>& rates, const throughput_fn& T,
                                     const batch_table& table, size_t s, const slo_split& current,
                                     const epoch_input& in) {
  std::vector<neighbour> out;
  int got = table.saturating_batch(current.budget_ms[s]);
  for (int b : table.plannable()) {
    if (b == got || std::abs(b - got) > in.neighbours) continue;
    double l = table.ms(b);
    if (l <= 0) continue;
    throughput_fn held = [&, s, b, l](size_t k, double L) {
      if (k != s) return T(k, L);
      return 2 * l <= L ? b / l * 1000.0 : 0.0;
    };
    auto split = dp_split(p, rates, held, in.steps);
    // dp_split falls back to the even split when nothing fits: no neighbour then.
    if (!std::isfinite(split_cost(p, rates, split.budget_ms, held))) continue;
    out.push_back({s, std::move(split)});
  }
  return out;
}

// Pipeline `pi`'s stage throughput at budget L (devices per request/s add up): a cascade stage
// runs its first model at share·L for every request and its second at the rest for those that
// fall through. Makes the batch tables it needs.
throughput_fn stage_throughput(const epoch_input& in, size_t pi, batch_tables& tables) {
  auto& p = (*in.pipelines)[pi];
  auto& models = *in.models;
  std::vector<std::optional<cascade_plan>> cascades;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    cascades.push_back(cascade_of(in, pi, s));
    if (cascades.back()) tables.of(*cascades.back()->second);
  }
  return [&models, &p, &tables, cascades](size_t s, double L) {
    double first =
        tables.of(models[p.stages[s].model_index]).throughput(cascades[s] ? L * cascades[s]->first_share : L);
    if (!cascades[s] || first <= 0) return first;
    if (cascades[s]->fallthrough <= 0) return first;
    double second = tables.of(*cascades[s]->second).throughput(L * (1 - cascades[s]->first_share));
    if (second <= 0) return 0.0;
    return 1 / (1 / first + cascades[s]->fallthrough / second);
  };
}

// The DP counts devices fractionally, sum of rate / T; they come whole, and the packing merges
// only residues whose duty cycles fit together. So the DP's split is compared with its
// neighbours: the DP re-run with one stage held at a batch within `neighbours` of the one it got.
// One that packs into fewer devices (serving every session) replaces it; one pass over the
// stages in order. Each candidate re-packs only the sessions it changes. The splits found, or
// none when no neighbour was taken.
std::optional<std::vector<slo_split>> search_neighbours(const epoch_input& in,
                                                        const std::vector<std::vector<double>>& rates,
                                                        const std::vector<throughput_fn>& T,
                                                        std::vector<std::vector<neighbour>>& candidates,
                                                        const epoch_result& out, batch_tables& tables) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  neighbour_search searcher(in, rates, out, tables);
  auto splits = out.splits;
  bool changed = false;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    bool moved = false;  // once a neighbour is taken, later stages' neighbours start from it
    for (size_t s = 0; s < p.stages.size(); ++s) {
      if (rates[pi][s] <= 0) continue;
      std::vector<neighbour> fresh;
      if (moved)
        fresh = neighbours_of(p, rates[pi], T[pi], tables.of(models[p.stages[s].model_index]), s, splits[pi], in);
      auto& list = moved ? fresh : candidates[pi];
      for (auto& n : list) {
        // A split that the DP gives back unchanged (a single stage takes the whole SLO) is no
        // neighbour.
        if (n.stage != s || n.split.budget_ms == splits[pi].budget_ms) continue;
        if (searcher.try_split(pi, n.split.budget_ms)) splits[pi] = n.split, changed = moved = true;
      }
    }
  }
  if (!changed) return std::nullopt;
  return splits;
}

}  // namespace

expected<epoch_result> plan_packed_epoch(const epoch_input& in, const epoch_result* previous, const planner& packer,
                                         bool neighbours) {
  auto& pipes = *in.pipelines;
  auto& models = *in.models;
  if (in.rates.size() != pipes.size()) return fail("need one rate per pipeline");
  batch_tables tables;
  for (auto& p : pipes)
    for (auto& st : p.stages) tables.of(models[st.model_index]);
  epoch_result out;
  std::vector<std::vector<double>> rates;
  std::vector<throughput_fn> T;
  for (size_t pi = 0; pi < pipes.size(); ++pi) {
    auto& p = pipes[pi];
    auto fan = pi < in.fanouts.size() && !in.fanouts[pi].empty() ? in.fanouts[pi] : declared_fanout(p);
    rates.push_back(stage_rates(p, in.rates[pi], fan));
    T.push_back(stage_throughput(in, pi, tables));
  }
  // The DP's split of every pipeline and the neighbours of each: pipelines apart, so in parallel
  // where the caller gave threads (tables are all made by now, and only read).
  // The neighbour search moves one session per stage; a cascade stage has two, so pipelines with
  // cascades keep the DP's split.
  bool cascades = std::any_of(pipes.begin(), pipes.end(), [](const pipeline& p) {
    return std::any_of(p.stages.begin(), p.stages.end(), [](const stage& s) { return s.cascade.has_value(); });
  });
  const bool search = in.split == split_policy::dp && in.neighbours > 0 && neighbours && !cascades;
  out.splits.resize(pipes.size());
  std::vector<std::vector<neighbour>> candidates(pipes.size());
  for_each_index(in, pipes.size(), [&](size_t pi) {
    auto& p = pipes[pi];
    if (in.split != split_policy::dp) {
      out.splits[pi] = even_split(p);
      return;
    }
    out.splits[pi] = dp_split(p, rates[pi], T[pi], in.steps);
    if (!search) return;
    for (size_t s = 0; s < p.stages.size(); ++s) {
      if (rates[pi][s] <= 0) continue;
      auto more = neighbours_of(p, rates[pi], T[pi], tables.of(models[p.stages[s].model_index]), s, out.splits[pi], in);
      for (auto& n : more) candidates[pi].push_back(std::move(n));
    }
  });
  collect_sessions(in, rates, out);
  place(in, packer, previous, tables, out);
  if (!search) return out;
  auto splits = search_neighbours(in, rates, T, candidates, out, tables);
  if (!splits) return out;
  // The splits found are packed whole, and kept if that beats the DP's split packed whole.
  epoch_result refined;
  refined.splits = std::move(*splits);
  collect_sessions(in, rates, refined);
  place(in, packer, previous, tables, refined);
  if (plan_cost(refined) < plan_cost(out)) return refined;
  return out;
}

}  // namespace sloserve::sched
