#pragma once
// Deterministic CAF: a test scheduler with a manual clock, and an in-process link that records
// what actors send to other nodes and to clients.

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <memory>

#include "actors/link.hpp"
#include "config/cluster_config.hpp"

namespace sloserve::testing {

class recording_link final : public link {
 public:
  explicit recording_link(std::string name) : name_(std::move(name)) {}
  const std::string& self_name() const override { return name_; }
  const local_actors& local() const override { return actors; }
  void to_node(const std::string& node, msg::envelope e) override {
    e.from = name_;
    if (node == name_)
      dispatch(*this, std::move(e), {});
    else
      sent.emplace_back(node, std::move(e));
  }
  void to_client(const std::string& client, msg::body b) override { replies.emplace_back(client, std::move(b)); }
  int64_t now_ns() const override { return 0; }  // actors run on the test scheduler's clock

  // Recorded messages of type T to other nodes, removed from the record.
  template <class T>
  std::vector<std::pair<std::string, T>> take() {
    std::vector<std::pair<std::string, T>> out;
    for (auto it = sent.begin(); it != sent.end();) {
      if (auto* x = std::get_if<T>(&it->second.content)) {
        out.emplace_back(it->first, std::move(*x));
        it = sent.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  std::vector<msg::client_reply> client_replies() {
    std::vector<msg::client_reply> out;
    for (auto& [c, b] : replies)
      if (auto* r = std::get_if<msg::client_reply>(&b)) out.push_back(*r);
    return out;
  }

  local_actors actors;
  std::vector<std::pair<std::string, msg::envelope>> sent;
  std::vector<std::pair<std::string, msg::body>> replies;

 private:
  std::string name_;
};

struct caf_fixture {
  caf_fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }
  ~caf_fixture() {
    for (auto& a : spawned) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    run();
  }
  // Runs every enqueued message; never fires timers.
  void run() {
    while (sched->try_run_once()) {
    }
  }
  // Moves the clock forward, fires due timers, and runs what they cause.
  void advance(std::chrono::nanoseconds d) {
    sched->advance_time(d);
    run();
  }
  caf::actor_clock::time_point now() { return sched->clock().now(); }
  template <class Handle>
  Handle keep(Handle h) {
    spawned.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::vector<caf::actor> spawned;
};

inline std::shared_ptr<const cluster_config> parse_or_die(const std::string& yaml) {
  auto r = parse_cluster_config(yaml, "test.yaml");
  if (!r) throw std::runtime_error(r.error_text());
  return std::make_shared<const cluster_config>(std::move(*r.config));
}

}  // namespace sloserve::testing
