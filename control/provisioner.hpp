#pragma once
// Where the scaler's instances run. The scaler asks for instances of a model with some cores;
// a provisioner finds them a place, resizes them in place and stops them, and hands the result
// on when the scaler commits.
//
// local_provisioner places instances on the device slots of this cluster's worker nodes: one
// instance per slot, on workers that are up, within each node's `cores` and the scaler's limits.
// It publishes a `deployment` to the controller, which turns it into schedules (the instance's
// model is loaded on its device) and, once the worker acknowledges that schedule, routes to it.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/cluster_config.hpp"
#include "scheduling/placement.hpp"

namespace sloserve {

struct placed_instance {
  uint64_t id = 0;
  std::string model;
  std::string node;
  uint32_t device = 0;
  int cores = 1;
  int batch = 1;
};

class provisioner {
 public:
  virtual ~provisioner() = default;
  // A new instance of `model`; nullopt when no live worker has a free slot for it, or the
  // limits would be passed. Cores it cannot grant in full are granted in part.
  virtual std::optional<uint64_t> start(const std::string& model, int cores, int batch) = 0;
  virtual void stop(uint64_t id) = 0;
  // Cores (in place) and batch of a running instance; returns the cores it now has.
  virtual int resize(uint64_t id, int cores, int batch) = 0;
  // Workers up now; instances on the others are gone.
  virtual void set_workers_up(const std::vector<std::string>& up) = 0;
  // Stage budgets to route with (FA2 plans them with its instances); empty: keep the split.
  virtual void set_budgets(std::vector<msg::stage_budget> budgets) = 0;
  // Models dispatched by whole batches in turn, each with its batch and fill time (deployment).
  virtual void set_in_turn(std::map<std::string, batch_in_turn> in_turn) = 0;
  // Every instance, oldest first.
  virtual std::vector<placed_instance> instances() const = 0;
  // An apply changed the scaler's knobs (its limits): `cfg` from now on (nodes and models are the same).
  virtual void rebind(const cluster_config& cfg) {}
  // Hands the placement on if it changed since the last commit; true when it did.
  virtual bool commit() = 0;
};

class local_provisioner final : public provisioner {
 public:
  local_provisioner(const cluster_config& cfg, std::function<void(deployment)> publish);

  std::optional<uint64_t> start(const std::string& model, int cores, int batch) override;
  void stop(uint64_t id) override;
  int resize(uint64_t id, int cores, int batch) override;
  void set_workers_up(const std::vector<std::string>& up) override;
  void set_budgets(std::vector<msg::stage_budget> budgets) override { budgets_ = std::move(budgets); }
  void set_in_turn(std::map<std::string, batch_in_turn> in_turn) override { in_turn_ = std::move(in_turn); }
  std::vector<placed_instance> instances() const override { return instances_; }
  bool commit() override;
  void rebind(const cluster_config& cfg) override { cfg_ = &cfg; }

  // Cores free on a node now (its `cores`, or max_cores per slot when it sets none).
  int free_cores(const std::string& node) const;

 private:
  int total_cores() const;
  int cores_grantable(const std::string& node, int wanted) const;

  const cluster_config* cfg_;
  std::function<void(deployment)> publish_;
  std::set<std::string> up_;
  std::vector<placed_instance> instances_;
  uint64_t next_id_ = 1;
  std::vector<msg::stage_budget> budgets_;
  std::map<std::string, batch_in_turn> in_turn_;
  deployment last_;
  bool published_ = false;
};

}  // namespace sloserve
