// A node's side toward its clients: the HTTP, gRPC and metrics ingresses it starts, the intake
// gate requests pass, shared-memory calls over ZeroMQ, and refused frames logged at a bounded rate.

#include <spdlog/spdlog.h>

#include "actors/grpc_ingress.hpp"
#include "actors/http_ingress.hpp"
#include "actors/node_runtime.hpp"
#include "actors/zmq_link.hpp"
#include "ingress/shm_regions.hpp"

namespace sloserve {

status node_runtime::start_ingresses(const node_spec& spec) {
  auto& a = link_->actors_;
  auto metrics = [link = link_, node = node_] {
    return link->metrics.render(node, static_cast<double>(link->now_ns()) / 1e9);
  };
  auto count_reply = [link = link_](std::string_view protocol, std::string_view code) {
    link->metrics.ingress_reply(protocol, code);
  };
  statistics_source statistics = [link = link_](std::string_view pipeline) {
    std::vector<std::string> names;
    for (auto& p : link->config->get()->pipelines)
      if (pipeline.empty() || p.name == pipeline) names.push_back(p.name);
    return link->metrics.statistics(names);
  };
  if (!spec.http.empty()) {
    auto count_refusal = [link = link_](std::string_view why) {
      link->metrics.count(node_metrics::event::http_refused, why);
    };
    http_ = std::make_unique<http_ingress>(link_->config, a.frontend, node_, metrics, count_reply, statistics,
                                           count_refusal);
    http_->set_shared_memory(shm_);
    http_->set_tracer(link_->tracer);
    http_->set_intake(admit_);
    auto port = http_->start(spec.http);
    if (!port) {
      stop();
      return fail(port.error());
    }
    http_port_ = *port;
    spdlog::info("{}: KServe v2 HTTP ingress and /metrics on port {}", node_, http_port_);
  }
  if (!spec.grpc.empty()) {
    grpc_ = std::make_unique<grpc_ingress>(link_->config, a.frontend, node_, count_reply, statistics);
    grpc_->set_shared_memory(shm_);
    grpc_->set_tracer(link_->tracer);
    grpc_->set_intake(admit_);
    auto port = grpc_->start(spec.grpc);
    if (!port) {
      stop();
      return fail(port.error());
    }
    grpc_port_ = *port;
    spdlog::info("{}: KServe v2 gRPC ingress on port {}", node_, grpc_port_);
  }
  if (!spec.metrics.empty()) {
    metrics_http_ = std::make_unique<http_ingress>(link_->config, frontend_actor{}, node_, metrics);
    auto port = metrics_http_->start(spec.metrics);
    if (!port) {
      stop();
      return fail(port.error());
    }
    metrics_port_ = *port;
    spdlog::info("{}: /metrics on port {}", node_, metrics_port_);
  }
  return {};
}

kserve::intake_admit node_runtime::intake_gate_of(std::weak_ptr<link> weak) {
  return [weak](msg::client_request& rq, double slo_ms) -> std::string {
    auto l = weak.lock();
    if (!l || !l->config->get()->runtime.path_guard) return {};
    auto now = l->now_ns();
    auto why = l->intake.admit(now, slo_ms / 1e3);
    if (why.empty()) {
      rq.received_ns = now;
      return {};
    }
    l->metrics.dropped("intake_backed_up");
    l->metrics.request_done(rq.pipeline, "overloaded", 0, false, static_cast<double>(now) / 1e9);
    return why;
  };
}

bool node_runtime::intake(const std::string& identity, msg::client_request& rq) {
  auto* p = cfg_->find_pipeline(rq.pipeline);
  if (!p || !link_->actors_.frontend) return true;  // the frontend answers it
  auto why = admit_(rq, msg::slo_ms_of(rq, p->slo_ms));
  if (why.empty()) return true;
  link_->to_client(identity, msg::client_reply{rq.request_id, msg::status::overloaded, std::move(why), {}, {}, 0});
  return false;
}

void node_runtime::shared_memory_call(const std::string& identity, std::string_view user,
                                      const msg::shared_memory_request& rq) {
  msg::shared_memory_reply r;
  r.token = rq.token;
  auto owner = shm::owner_of_key(user);
  status done;
  switch (rq.op) {
    case msg::shared_memory_op::add:
      done = shm_->add(owner, rq.name, rq.key, rq.offset, rq.byte_size, static_cast<int>(rq.pid));
      break;
    case msg::shared_memory_op::remove:
      done = shm_->remove(owner, rq.name);
      break;
    case msg::shared_memory_op::status:
      if (auto listed = shm_->list(owner, rq.name)) {
        for (auto& x : *listed) r.regions.push_back({x.name, x.key, x.offset, x.byte_size});
      } else {
        done = fail(listed.error());
      }
      break;
  }
  r.ok = done.has_value();
  if (!r.ok) r.reason = done.error();
  link_->to_client(identity, std::move(r));
}

bool node_runtime::take_shared_inputs(const std::string& identity, std::string_view user, msg::client_request& rq) {
  if (rq.shm_inputs.empty()) return true;
  auto owner = shm::owner_of_key(user);
  for (auto& in : rq.shm_inputs) {
    auto t = shm_->read_tensor(owner, in.name, in.type, in.shape, {in.region, in.offset, in.byte_size});
    if (!t) {  // counted as refused (sloserve_shared_memory_total)
      link_->to_client(identity, msg::client_reply{rq.request_id, msg::status::error, t.error(), {}, {}, 0});
      return false;
    }
    rq.inputs.push_back(std::move(*t));
  }
  rq.shm_inputs.clear();
  return true;
}

void node_runtime::reject(std::string_view kind, const std::string& peer, const std::string& what) {
  if (!link_) return;
  link_->metrics.count(node_metrics::event::rejected_frame, kind);
  auto now = static_cast<double>(link_->now_ns()) / 1e9;
  if (auto held = rejections_.admit(peer + "|" + std::string(kind), now))
    spdlog::warn("{}: {}{}", node_, what, *held ? fmt::format(" ({} more like it since the last line)", *held) : "");
}

}  // namespace sloserve
