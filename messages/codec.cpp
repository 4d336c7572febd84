#include "messages/codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include <cstring>
#include <stdexcept>

#include "messages/sloserve.capnp.h"

namespace sloserve::msg {

std::string_view status_name(status s) {
  switch (s) {
    case status::ok:
      return "OK";
    case status::dropped:
      return "DROPPED";
    case status::error:
      return "ERROR";
    case status::overloaded:
      return "OVERLOADED";
  }
  return "?";
}

namespace {

// ---- encoding ----

// Large tensors are referenced, not copied, while the message is built: their bytes are copied
// once, when the message is flattened into its frame.
void put_tensors(capnp::List<wire::Tensor>::Builder out, const std::vector<tensor>& in, capnp::Orphanage orphans) {
  for (unsigned i = 0; i < in.size(); ++i) {
    auto t = out[i];
    auto& x = in[i];
    t.setName(x.name);
    t.setDtype(static_cast<wire::DType>(x.type));
    auto shape = t.initShape(static_cast<unsigned>(x.shape.size()));
    for (unsigned k = 0; k < x.shape.size(); ++k) shape.set(k, x.shape[k]);
    auto* p = reinterpret_cast<const kj::byte*>(x.data.data());
    bool by_reference = x.data.size() >= 4096 && x.data.size() % sizeof(capnp::word) == 0 &&
                        reinterpret_cast<uintptr_t>(p) % alignof(capnp::word) == 0;
    if (by_reference) {
      t.adoptData(orphans.referenceExternalData(capnp::Data::Reader(p, x.data.size())));
    } else {
      auto data = t.initData(static_cast<unsigned>(x.data.size()));
      if (!x.data.empty()) std::memcpy(data.begin(), p, x.data.size());
    }
  }
}

template <class List, class Vec, class Fn>
void put_list(List out, const Vec& in, Fn fn) {
  for (unsigned i = 0; i < in.size(); ++i) fn(out[i], in[i]);
}

struct encoder {
  wire::Envelope::Body::Builder b;
  capnp::Orphanage orphans;

  void operator()(const client_request& m) {
    auto r = b.initClientRequest();
    r.setPipeline(m.pipeline);
    r.setRequestId(m.request_id);
    r.setNetworkMs(m.network_ms);
    r.setSentAtUs(m.sent_at_us);
    put_tensors(r.initInputs(static_cast<unsigned>(m.inputs.size())), m.inputs, orphans);
  }
  void operator()(const client_reply& m) {
    auto r = b.initClientReply();
    r.setRequestId(m.request_id);
    r.setStatus(static_cast<wire::Status>(m.code));
    r.setReason(m.reason);
    r.setTotalMs(m.total_ms);
    put_tensors(r.initOutputs(static_cast<unsigned>(m.outputs.size())), m.outputs, orphans);
    put_list(r.initTimings(static_cast<unsigned>(m.timings.size())), m.timings,
             [](wire::StageTiming::Builder o, const stage_timing& t) {
               o.setStage(t.stage);
               o.setNode(t.node);
               o.setDevice(t.device);
               o.setBatch(t.batch);
               o.setQueueMs(t.queue_ms);
               o.setExecMs(t.exec_ms);
             });
  }
  void operator()(const invocation& m) {
    auto r = b.initInvocation();
    r.setId(m.id);
    r.setFrontend(m.frontend);
    r.setModel(m.model);
    r.setDevice(m.device);
    r.setBudgetNs(m.budget_ns);
    put_tensors(r.initInputs(static_cast<unsigned>(m.inputs.size())), m.inputs, orphans);
  }
  void operator()(const invocation_result& m) {
    auto r = b.initInvocationResult();
    r.setId(m.id);
    r.setStatus(static_cast<wire::Status>(m.code));
    r.setReason(m.reason);
    r.setNode(m.node);
    r.setDevice(m.device);
    r.setBatch(m.batch);
    r.setQueueNs(m.queue_ns);
    r.setExecNs(m.exec_ns);
    put_tensors(r.initOutputs(static_cast<unsigned>(m.outputs.size())), m.outputs, orphans);
  }
  void operator()(const register_node& m) {
    auto r = b.initRegisterNode();
    r.setNode(m.node);
    auto roles = r.initRoles(static_cast<unsigned>(m.roles.size()));
    for (unsigned i = 0; i < m.roles.size(); ++i) roles.set(i, m.roles[i]);
    r.setDevices(m.devices);
    r.setIncarnation(m.incarnation);
    r.setScheduleEpoch(m.schedule_epoch);
    r.setLeaving(m.leaving);
    put_list(r.initProfiles(static_cast<unsigned>(m.profiles.size())), m.profiles,
             [](wire::MeasuredProfile::Builder o, const measured_profile& p) {
               o.setModel(p.model);
               auto b = o.initBatch(static_cast<unsigned>(p.batch.size()));
               for (unsigned i = 0; i < p.batch.size(); ++i) b.set(i, p.batch[i]);
               auto l = o.initLatencyMs(static_cast<unsigned>(p.latency_ms.size()));
               for (unsigned i = 0; i < p.latency_ms.size(); ++i) l.set(i, p.latency_ms[i]);
               o.setStep(p.step);
             });
  }
  void operator()(const heartbeat& m) {
    auto r = b.initHeartbeat();
    r.setNode(m.node);
    r.setIncarnation(m.incarnation);
    r.setSeq(m.seq);
    r.setHeard(m.heard);
  }
  void operator()(const load_report& m) {
    auto r = b.initLoadReport();
    r.setNode(m.node);
    r.setWindowS(m.window_s);
    put_list(r.initSessions(static_cast<unsigned>(m.sessions.size())), m.sessions,
             [](wire::SessionLoad::Builder o, const session_load& s) {
               o.setModel(s.model);
               o.setDevice(s.device);
               o.setArrived(s.arrived);
               o.setCompleted(s.completed);
               o.setDropped(s.dropped);
               o.setQueueLength(s.queue_length);
               o.setMeanLatencyMs(s.mean_latency_ms);
               o.setMeanBudgetMs(s.mean_budget_ms);
             });
    put_list(r.initPipelines(static_cast<unsigned>(m.pipelines.size())), m.pipelines,
             [](wire::PipelineLoad::Builder o, const pipeline_load& pl) {
               o.setPipeline(pl.pipeline);
               o.setQueries(pl.queries);
               auto inv = o.initStageInvocations(static_cast<unsigned>(pl.stage_invocations.size()));
               for (unsigned i = 0; i < pl.stage_invocations.size(); ++i) inv.set(i, pl.stage_invocations[i]);
             });
  }
  void operator()(const routing_table& m) {
    auto r = b.initRoutingTable();
    r.setEpoch(m.epoch);
    put_list(r.initRoutes(static_cast<unsigned>(m.routes.size())), m.routes,
             [](wire::ModelRoute::Builder o, const model_route& mr) {
               o.setModel(mr.model);
               put_list(o.initInstances(static_cast<unsigned>(mr.instances.size())), mr.instances,
                        [](wire::RouteInstance::Builder x, const route_instance& ri) {
                          x.setNode(ri.node);
                          x.setDevice(ri.device);
                          x.setWeight(ri.weight);
                        });
             });
    put_list(r.initBudgets(static_cast<unsigned>(m.budgets.size())), m.budgets,
             [](wire::StageBudget::Builder o, const stage_budget& sb) {
               o.setPipeline(sb.pipeline);
               o.setStage(sb.stage);
               o.setBudgetMs(sb.budget_ms);
             });
  }
  void operator()(const schedule& m) {
    auto r = b.initSchedule();
    r.setEpoch(m.epoch);
    put_list(r.initDevices(static_cast<unsigned>(m.devices.size())), m.devices,
             [](wire::DeviceSchedule::Builder o, const device_schedule& d) {
               o.setDevice(d.device);
               o.setDutyCycleMs(d.duty_cycle_ms);
               put_list(o.initSessions(static_cast<unsigned>(d.sessions.size())), d.sessions,
                        [](wire::SessionSchedule::Builder x, const session_schedule& s) {
                          x.setModel(s.model);
                          x.setBatch(s.batch);
                        });
             });
  }
  void operator()(const status_request& m) { b.initStatusRequest().setToken(m.token); }
  void operator()(const status_reply& m) {
    auto r = b.initStatusReply();
    r.setToken(m.token);
    r.setReady(m.ready);
    r.setDetail(m.detail);
  }
  void operator()(const resize& m) {
    auto r = b.initResize();
    r.setDevice(m.device);
    r.setThreads(m.threads);
  }
};

// ---- decoding ----

std::string text(capnp::Text::Reader t) {
  return std::string(t.cStr(), t.size());
}

// Tensors share the frame's bytes and keep `owner` (the frame's) alive.
std::vector<tensor> get_tensors(capnp::List<wire::Tensor>::Reader in, uint64_t& payload,
                                const std::shared_ptr<const void>& owner) {
  std::vector<tensor> out;
  out.reserve(in.size());
  for (auto t : in) {
    tensor x;
    x.name = text(t.getName());
    auto dt = static_cast<unsigned>(t.getDtype());
    if (dt > static_cast<unsigned>(dtype::uint8))
      throw std::runtime_error("tensor '" + x.name + "' has an unknown dtype " + std::to_string(dt));
    x.type = static_cast<dtype>(dt);
    for (auto d : t.getShape()) x.shape.push_back(d);
    auto data = t.getData();
    x.data = bytes(reinterpret_cast<const char*>(data.begin()), data.size(), owner);
    payload += data.size();
    if (auto ok = check_tensor_bytes(x); !ok) throw std::runtime_error(ok.error());
    out.push_back(std::move(x));
  }
  return out;
}

envelope read_envelope(wire::Envelope::Reader r, uint64_t& payload, decode_error& partial,
                       const std::shared_ptr<const void>& owner) {
  envelope e;
  e.from = text(r.getFrom());
  partial.from = e.from;
  auto b = r.getBody();
  switch (b.which()) {
    case wire::Envelope::Body::CLIENT_REQUEST: {
      auto x = b.getClientRequest();
      client_request m;
      m.request_id = x.getRequestId();
      partial.request_id = m.request_id;
      m.pipeline = text(x.getPipeline());
      m.network_ms = x.getNetworkMs();
      m.sent_at_us = x.getSentAtUs();
      m.inputs = get_tensors(x.getInputs(), payload, owner);
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::CLIENT_REPLY: {
      auto x = b.getClientReply();
      client_reply m;
      m.request_id = x.getRequestId();
      m.code = static_cast<status>(x.getStatus());
      m.reason = text(x.getReason());
      m.total_ms = x.getTotalMs();
      m.outputs = get_tensors(x.getOutputs(), payload, owner);
      for (auto t : x.getTimings())
        m.timings.push_back(
            {text(t.getStage()), text(t.getNode()), t.getDevice(), t.getBatch(), t.getQueueMs(), t.getExecMs()});
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::INVOCATION: {
      auto x = b.getInvocation();
      invocation m;
      m.id = x.getId();
      partial.invocation_id = m.id;
      m.frontend = text(x.getFrontend());
      m.model = text(x.getModel());
      m.device = x.getDevice();
      m.budget_ns = x.getBudgetNs();
      m.inputs = get_tensors(x.getInputs(), payload, owner);
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::INVOCATION_RESULT: {
      auto x = b.getInvocationResult();
      invocation_result m;
      m.id = x.getId();
      partial.invocation_id = m.id;
      m.code = static_cast<status>(x.getStatus());
      m.reason = text(x.getReason());
      m.node = text(x.getNode());
      m.device = x.getDevice();
      m.batch = x.getBatch();
      m.queue_ns = x.getQueueNs();
      m.exec_ns = x.getExecNs();
      m.outputs = get_tensors(x.getOutputs(), payload, owner);
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::REGISTER_NODE: {
      auto x = b.getRegisterNode();
      register_node m;
      m.node = text(x.getNode());
      for (auto role : x.getRoles()) m.roles.push_back(text(role));
      m.devices = x.getDevices();
      m.incarnation = x.getIncarnation();
      m.schedule_epoch = x.getScheduleEpoch();
      m.leaving = x.getLeaving();
      for (auto p : x.getProfiles()) {
        measured_profile mp{text(p.getModel()), {}, {}, p.getStep()};
        for (auto v : p.getBatch()) mp.batch.push_back(v);
        for (auto v : p.getLatencyMs()) mp.latency_ms.push_back(v);
        m.profiles.push_back(std::move(mp));
      }
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::HEARTBEAT: {
      auto x = b.getHeartbeat();
      e.content = heartbeat{text(x.getNode()), x.getIncarnation(), x.getSeq(), x.getHeard()};
      break;
    }
    case wire::Envelope::Body::LOAD_REPORT: {
      auto x = b.getLoadReport();
      load_report m;
      m.node = text(x.getNode());
      m.window_s = x.getWindowS();
      for (auto s : x.getSessions())
        m.sessions.push_back({text(s.getModel()), s.getDevice(), s.getArrived(), s.getCompleted(), s.getDropped(),
                              s.getQueueLength(), s.getMeanLatencyMs(), s.getMeanBudgetMs()});
      for (auto pl : x.getPipelines()) {
        pipeline_load l{text(pl.getPipeline()), pl.getQueries(), {}};
        for (auto v : pl.getStageInvocations()) l.stage_invocations.push_back(v);
        m.pipelines.push_back(std::move(l));
      }
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::ROUTING_TABLE: {
      auto x = b.getRoutingTable();
      routing_table m;
      m.epoch = x.getEpoch();
      for (auto mr : x.getRoutes()) {
        model_route route{text(mr.getModel()), {}};
        for (auto ri : mr.getInstances())
          route.instances.push_back({text(ri.getNode()), ri.getDevice(), ri.getWeight()});
        m.routes.push_back(std::move(route));
      }
      for (auto sb : x.getBudgets())
        m.budgets.push_back({text(sb.getPipeline()), text(sb.getStage()), sb.getBudgetMs()});
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::SCHEDULE: {
      auto x = b.getSchedule();
      schedule m;
      m.epoch = x.getEpoch();
      for (auto d : x.getDevices()) {
        device_schedule ds{d.getDevice(), d.getDutyCycleMs(), {}};
        for (auto s : d.getSessions()) ds.sessions.push_back({text(s.getModel()), s.getBatch()});
        m.devices.push_back(std::move(ds));
      }
      e.content = std::move(m);
      break;
    }
    case wire::Envelope::Body::STATUS_REQUEST:
      e.content = status_request{b.getStatusRequest().getToken()};
      break;
    case wire::Envelope::Body::STATUS_REPLY: {
      auto x = b.getStatusReply();
      e.content = status_reply{x.getToken(), x.getReady(), text(x.getDetail())};
      break;
    }
    case wire::Envelope::Body::RESIZE: {
      auto x = b.getResize();
      e.content = resize{x.getDevice(), x.getThreads()};
      break;
    }
    default:
      throw std::runtime_error("unknown message kind " + std::to_string(static_cast<int>(b.which())));
  }
  return e;
}

}  // namespace

bytes encode_frame(const envelope& e) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<wire::Envelope>();
  root.setFrom(e.from);
  std::visit(encoder{root.initBody(), builder.getOrphanage()}, e.content);
  auto flat = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(builder));
  auto b = flat->asBytes();
  return bytes(reinterpret_cast<const char*>(b.begin()), b.size(), std::move(flat));
}

std::string encode(const envelope& e) {
  return encode_frame(e).str();
}

decoded decode(std::string_view frame, const decode_limits& limits) {
  return decode_frame(bytes::copy_of(frame), limits);
}

decoded decode_frame(const bytes& frame_in, const decode_limits& limits) {
  decoded res;
  if (frame_in.size() > limits.max_frame_bytes()) {
    res.error.reason = "message of " + std::to_string(frame_in.size()) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_frame_bytes()) + " bytes (runtime.max_payload_bytes)";
    return res;
  }
  if (frame_in.empty() || frame_in.size() % sizeof(capnp::word) != 0) {
    res.error.reason =
        "malformed message: " + std::to_string(frame_in.size()) + " bytes is not a whole number of Cap'n Proto words";
    return res;
  }
  // FlatArrayMessageReader needs word alignment; copy only when the frame lacks it.
  auto frame = frame_in;
  if (reinterpret_cast<uintptr_t>(frame.data()) % alignof(capnp::word) != 0) {
    char* buf = nullptr;
    auto aligned = bytes::allocate(frame.size(), buf);
    std::memcpy(buf, frame.data(), frame.size());
    frame = std::move(aligned);
  }
  auto words = kj::arrayPtr(reinterpret_cast<const capnp::word*>(frame.data()), frame.size() / sizeof(capnp::word));
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = 2 * words.size() + 1024;
  opts.nestingLimit = 16;
  uint64_t payload = 0;
  try {
    capnp::FlatArrayMessageReader reader(words, opts);
    res.value = read_envelope(reader.getRoot<wire::Envelope>(), payload, res.error, frame.owner());
  } catch (const kj::Exception& e) {
    res.error.reason = "malformed message: " + std::string(e.getDescription().cStr());
    return res;
  } catch (const std::exception& e) {
    res.error.reason = std::string("invalid message: ") + e.what();
    res.value.reset();
    return res;
  }
  if (payload > limits.max_payload_bytes) {
    res.value.reset();
    res.error.reason = "payload of " + std::to_string(payload) + " bytes exceeds the limit of " +
                       std::to_string(limits.max_payload_bytes) + " bytes (runtime.max_payload_bytes)";
  }
  return res;
}

}  // namespace sloserve::msg
