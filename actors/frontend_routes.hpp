#pragma once
// A frontend's view of where it may send work: the instances of every model with their weights,
// outstanding invocations and liveness, each pipeline's stage deadlines, and why a pipeline cannot
// be served now. Built from the controller's routing tables and the node agent's peer events;
// CAF-free, the frontend actor owns one.

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config/cluster_config.hpp"
#include "messages/types.hpp"
#include "scheduling/balancer.hpp"
#include "scheduling/frontend_admission.hpp"

namespace sloserve {

class frontend_routes {
 public:
  struct backend {
    std::string node;
    uint32_t device = 0;
  };

  frontend_routes(const cluster_config& cfg, std::unique_ptr<sched::balancer> balancer);

  // Adopts a routing table; outstanding counts carry over to instances it keeps.
  void apply(const msg::routing_table& t);
  // An apply: the pipelines of `cfg` from now on, pipeline i continuing `from[i]` (its stage
  // budgets and variants until the next table), the last table read again against them.
  void rebind(const cluster_config& cfg, const std::vector<std::optional<size_t>>& from);
  uint64_t epoch() const { return epoch_; }
  // A node stopped (false) or resumed (true) heartbeating. False when that changes nothing.
  bool set_live(const std::string& node, bool live);

  // The time, in seconds, that dispatch in turn reads (a batch goes to an instance free by the
  // time it would fill); unset (< 0): the turn alone.
  void set_clock(double now_s) { clock_s_ = now_s; }
  // The frontend that dispatches `model`'s whole batches for all frontends (the table's
  // ModelRoute.dispatcher) while this one hears it; empty: none, or it is not heard now.
  const std::string& dispatcher(const std::string& model) const;
  // Whether some instance of `model` is routed and live.
  bool serves(const std::string& model) const;
  // Picks a live instance of `model` by the balancer and counts an invocation on it.
  std::optional<backend> pick(const std::string& model, std::mt19937_64& rng);
  // Whether the table dispatches `model`'s instances whole batches in turn: then its dummies go
  // with the batches (padding_due), not on the clock.
  bool in_turn(const std::string& model) const;
  // The dummies that close the batch the latest invocation of `model` went to (the balancer's
  // padding_due), each counted as outstanding at the instance it takes its place at (release it
  // on the reply); none where the model is not in turn or the batch owes none yet.
  std::vector<backend> padding_due(const std::string& model, std::mt19937_64& rng);
  // When (seconds, by the clock) the batch `model`'s latest invocation went to is due full (then
  // ask padding_due): once per batch, nullopt otherwise.
  std::optional<double> padding_deadline(const std::string& model);
  // The tightest stage budget of the table's that runs `model` (a dummy's); 0 when none does.
  double budget_ms(const std::string& model) const;
  // Counts an invocation on instance (node, device) of `model` when it is routed and live:
  // where a client's mapping sends it. Otherwise as pick.
  std::optional<backend> pick_at(const std::string& model, const std::string& node, uint32_t device,
                                 std::mt19937_64& rng);
  // An invocation on (node, device) of `model` is over.
  void release(const std::string& model, const std::string& node, uint32_t device);
  // Invocations outstanding on `node`'s instances, every model's.
  uint32_t outstanding_at(const std::string& node) const;

  // The model stage `s` of pipeline `pi` runs now: the variant the table names, else the file's.
  const std::string& stage_model(size_t pi, size_t s) const { return stage_models_[pi][s]; }
  // Stage budgets of pipeline `pi` as finish offsets; null before a table gave them all.
  const slo_split* split(size_t pi) const { return splits_[pi] ? &*splits_[pi] : nullptr; }
  // A fragment route: the route for a query of pipeline `pi` that starts at layer `start` with `slo_ms` left:
  // of the table's routes from that layer whose every model has a live instance, one planned for
  // the largest SLO not above `slo_ms` (else the least above it), drawn by rate among routes of
  // that SLO. Null when there is none.
  const msg::fragment_route* fragment_route(size_t pi, int start, double slo_ms, std::mt19937_64& rng) const;
  // Whether a request of pipeline `pi` from tenant `tenant` (an index of security.tenants; < 0:
  // none) at `now_s` is let in (sched::frontend_admission).
  sched::admission::verdict admit(size_t pi, int tenant, double now_s);
  // An admitted query of pipeline `pi` was answered at `now_s`, within its SLO or not; `served`:
  // answered other than ERROR (an error says nothing of the load). What the guards read.
  void on_outcome(size_t pi, bool within_slo, bool served, double now_s);
  // What the other frontends report of each tenant's rate (sched::admission::set_elsewhere), and
  // what tenant `tenant` offers here at `now_s`.
  void set_tenants_elsewhere(std::optional<std::vector<double>> offered) {
    admission_.set_elsewhere(std::move(offered));
  }
  double tenant_offered_here(int tenant, double now_s) const { return admission_.offered_here(tenant, now_s); }
  // Why pipeline `pi` cannot be served now; empty when it can.
  const std::string& blocker(size_t pi) const { return blockers_[pi]; }
  // Why this frontend (node `self`) is not ready: a pipeline cannot be served now, or some model
  // of one has live instances only on nodes not heard both ways yet (the node agent's word:
  // heartbeats, and where it probes links, the data connections too). Empty when ready. With
  // `pi`, that pipeline's alone.
  std::string readiness(const std::string& self, std::optional<size_t> pi = std::nullopt) const;

 private:
  struct route {
    std::vector<backend> backends;
    std::vector<sched::backend_load> loads;  // parallel to backends
    std::vector<size_t> stand_ins;           // indices of instances kept from the table before, ascending
    sched::dispatch_state turn;              // batch-by-batch dispatch's place (fill_balancer)
    double deadline_told = -1;               // the latest padding_deadline given
    double budget_ms = 0;                    // the tightest stage budget that runs the model
    std::string dispatcher;                  // the table's: the frontend that dispatches it for all
  };
  sched::backend_load* load_of(const std::string& model, const std::string& node, uint32_t device);
  void refresh();  // blockers, recomputed when routes or peers change so requests only read them
  std::vector<std::string> models_of(size_t pi) const;  // its stages' models and cascades' second ones

  const cluster_config* cfg_;
  std::unique_ptr<sched::balancer> balancer_;
  uint64_t epoch_ = 0;
  double clock_s_ = -1;
  std::unordered_map<std::string, route> routes_;
  std::unordered_set<std::string> down_;
  std::unordered_set<std::string> heard_;  // nodes heard since they last went down (set_live)
  std::vector<std::optional<slo_split>> splits_;
  std::vector<std::vector<std::string>> stage_models_;
  std::vector<std::string> blockers_;
  std::vector<std::vector<msg::fragment_route>> fragments_;  // per pipeline
  std::optional<msg::routing_table> table_;                  // the last one applied
  sched::frontend_admission admission_;
};

}  // namespace sloserve
