#include "actors/grpc_ingress.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "actors/grpc_stream.hpp"
#include "actors/grpc_tensors.hpp"
#include "actors/kserve_call.hpp"
#include "ingress/log_settings.hpp"
#include "ingress/shm_regions.hpp"
#include "ingress/trace_settings.hpp"
#include "kserve/grpc_service.grpc.pb.h"
#include "messages/curve.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {

namespace {

namespace pb = inference;
using grpc::Status;
using grpc::StatusCode;
using grpc_tensors::call_parameters_of;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void set_metadata(pb::ModelMetadataResponse::TensorMetadata* m, const kserve::tensor_signature& t) {
  m->set_name(t.name);
  m->set_datatype(std::string(kserve::datatype_name(t.spec.type)));
  for (auto d : t.spec.shape) m->add_shape(d);
}

}  // namespace

// The gRPC status of a frontend's reply: OK; DROPPED and a pipeline not ready UNAVAILABLE (try
// again later); OVERLOADED RESOURCE_EXHAUSTED; ERROR INTERNAL (the ingress answers the client's
// own faults with INVALID_ARGUMENT or NOT_FOUND before they reach the frontend).
Status grpc_status_of(const msg::client_reply& r) {
  switch (r.code) {
    case msg::status::ok:
      return Status::OK;
    case msg::status::dropped:
      return {StatusCode::UNAVAILABLE, r.reason};
    case msg::status::overloaded:
      return {StatusCode::RESOURCE_EXHAUSTED, r.reason};
    case msg::status::error:
      return {r.reason.rfind("not ready", 0) == 0 ? StatusCode::UNAVAILABLE : StatusCode::INTERNAL, r.reason};
  }
  return {StatusCode::INTERNAL, r.reason};
}

struct grpc_ingress::impl final : pb::GRPCInferenceService::CallbackService {
  std::shared_ptr<config_source> source;  // what the node runs now (`sloserve apply` swaps it)
  frontend_actor frontend;
  std::string node;
  std::function<void(std::string_view, std::string_view)> count_reply;
  statistics_source statistics;
  kserve::token_table tokens;               // bearer tokens admitted (none: no token needed) and their tenants
  std::shared_ptr<shm::registry> regions;   // clients' shared memory; null or off: refused
  std::shared_ptr<tracing::tracer> tracer;  // Triton's trace extension; null: none
  kserve::intake_admit intake;              // the node's intake gate; empty: none
  std::unique_ptr<grpc::Server> server;

  // gRPC's health checking (grpc.health.v1.Health, served by gRPC itself): the server ("") and
  // the KServe service SERVING while the frontend says the node is ready, asked every 500 ms;
  // NOT_SERVING before the first answer, while not ready, and once the ingress stops.
  std::thread health_watch;
  std::mutex health_mu;  // guards health_stop, and the server's health statuses against stop()
  std::condition_variable health_cv;
  bool health_stop = false;
  void set_health(bool serving) {
    std::lock_guard g(health_mu);
    if (health_stop || !server) return;
    auto* h = server->GetHealthCheckService();
    if (!h) return;
    h->SetServingStatus("", serving);
    h->SetServingStatus(pb::GRPCInferenceService::service_full_name(), serving);
  }
  void watch_health() {
    std::unique_lock lk(health_mu);
    while (!health_stop) {
      lk.unlock();
      readiness("", [this](const msg::status_reply& r) { set_health(r.ready); });
      lk.lock();
      health_cv.wait_for(lk, std::chrono::milliseconds(500), [&] { return health_stop; });
    }
  }

  // Every RPC ends here: counted by its code, then finished.
  void finish(grpc::ServerUnaryReactor* reactor, const Status& s) {
    if (count_reply) count_reply("grpc", kserve::grpc_code_name(s.error_code()));
    reactor->Finish(s);
  }
  std::atomic<uint64_t> next_id{1};

  // Under security, everything but the health RPCs needs `authorization: Bearer TOKEN`.
  bool admitted(grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor) {
    auto auth = metadata(ctx, "authorization");
    auto why = kserve::refused_token(tokens, auth ? &*auth : nullptr);
    if (why.empty()) return true;
    finish(reactor, {StatusCode::UNAUTHENTICATED, why});
    return false;
  }
  // A request's metadata entry `key`, if it has one.
  static std::optional<std::string> metadata(grpc::CallbackServerContext* ctx, const char* key) {
    auto& md = ctx->client_metadata();
    auto it = md.find(key);
    if (it == md.end()) return std::nullopt;
    return std::string(it->second.data(), it->second.size());
  }

  // Whether `name` (empty, where `any`: every pipeline) is a pipeline and `version` one of its
  // versions; else the call is finished NOT_FOUND.
  bool known(const std::string& name, const std::string& version, grpc::ServerUnaryReactor* reactor, bool any = false) {
    if (any && name.empty()) return true;
    auto cfg = source->get();
    auto* p = cfg->find_pipeline(name);
    if (!p) {
      finish(reactor, {StatusCode::NOT_FOUND, "no pipeline '" + name + "'"});
      return false;
    }
    if (kserve::version_of(*p, version)) return true;
    finish(reactor, {StatusCode::NOT_FOUND, kserve::no_version(*p, version)});
    return false;
  }

  // Asks the frontend whether `pipeline` (empty: all) can be served; `done` gets the answer on
  // the frontend's thread.
  void readiness(const std::string& pipeline, std::function<void(const msg::status_reply&)> done) {
    auto sink = std::make_shared<const status_sink>([done = std::move(done)](msg::status_reply r) { done(r); });
    caf::anon_send(frontend, status_query{"grpc", msg::status_request{0}, pipeline, std::move(sink)});
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                       pb::ServerLiveResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    res->set_live(true);
    finish(reactor, Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                        pb::ServerReadyResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    readiness("", [this, reactor, res](const msg::status_reply& r) {
      res->set_ready(r.ready);
      finish(reactor, Status::OK);
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                       pb::ModelReadyResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor) || !known(req->name(), req->version(), reactor)) return reactor;
    readiness(req->name(), [this, reactor, res](const msg::status_reply& r) {
      res->set_ready(r.ready);
      finish(reactor, Status::OK);
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    res->set_name("sloserve");
    res->set_version(SLOSERVE_VERSION);
    for (auto* e : {"binary_tensor_data", "classification", "statistics", "model_repository", "logging"})
      res->add_extensions(e);
    if (tracer) res->add_extensions("trace");
    if (shared_memory_on()) res->add_extensions("system_shared_memory");
    if (shared_memory_on() && regions->cuda_unavailable().empty()) res->add_extensions("cuda_shared_memory");
    finish(reactor, Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const pb::ModelMetadataRequest* req,
                                          pb::ModelMetadataResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor) || !known(req->name(), req->version(), reactor)) return reactor;
    auto cfg = source->get();
    auto* p = cfg->find_pipeline(req->name());
    if (!p) return finish(reactor, {StatusCode::NOT_FOUND, "no pipeline '" + req->name() + "'"}), reactor;
    auto sig = kserve::signature_of(*cfg, *p);
    res->set_name(p->name);
    for (auto& v : kserve::version_names(*p)) res->add_versions(v);
    res->set_platform("ensemble");  // as its configuration says
    set_metadata(res->add_inputs(), sig.input);
    for (auto& o : kserve::declared_outputs(sig)) set_metadata(res->add_outputs(), o);
    finish(reactor, Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx, const pb::ModelStatisticsRequest* req,
                                            pb::ModelStatisticsResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor) || !known(req->name(), req->version(), reactor, true)) return reactor;
    auto set = [](pb::StatisticDuration* d, const pipeline_statistics::duration& x) {
      d->set_count(x.count);
      d->set_ns(x.ns);
    };
    for (auto& st : statistics ? statistics(req->name()) : std::vector<pipeline_statistics>{}) {
      auto* m = res->add_model_stats();
      m->set_name(st.name);
      m->set_version("1");
      m->set_last_inference(st.last_inference_ms);
      m->set_inference_count(st.inference_count);
      m->set_execution_count(st.execution_count);
      auto* is = m->mutable_inference_stats();
      set(is->mutable_success(), st.success);
      set(is->mutable_fail(), st.fail);
      set(is->mutable_queue(), st.queue);
      set(is->mutable_compute_infer(), st.compute);
      set(is->mutable_cache_hit(), st.cache_hit);
      set(is->mutable_cache_miss(), st.cache_miss);
      is->mutable_compute_input();
      is->mutable_compute_output();
    }
    finish(reactor, Status::OK);
    return reactor;
  }

  // Triton's model configuration: the pipeline as an ensemble (kserve::config_of).
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx, const pb::ModelConfigRequest* req,
                                        pb::ModelConfigResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor) || !known(req->name(), req->version(), reactor)) return reactor;
    auto cfg = source->get();
    auto* p = cfg->find_pipeline(req->name());
    if (!p) return finish(reactor, {StatusCode::NOT_FOUND, "no pipeline '" + req->name() + "'"}), reactor;
    auto c = kserve::config_of(*cfg, *p);
    auto* out = res->mutable_config();
    out->set_name(c.name);
    out->set_platform("ensemble");
    out->set_max_batch_size(static_cast<int32_t>(c.max_batch_size));
    auto type = [](const std::string& name) {
      pb::DataType t = pb::TYPE_INVALID;
      pb::DataType_Parse(name, &t);
      return t;
    };
    for (auto& t : c.inputs) {
      auto* i = out->add_input();
      i->set_name(t.name);
      i->set_data_type(type(t.data_type));
      for (auto d : t.dims) i->add_dims(d);
    }
    for (auto& t : c.outputs) {
      auto* o = out->add_output();
      o->set_name(t.name);
      o->set_data_type(type(t.data_type));
      for (auto d : t.dims) o->add_dims(d);
    }
    for (auto& s : c.steps) {
      auto* step = out->mutable_ensemble_scheduling()->add_step();
      step->set_model_name(s.model);
      step->set_model_version(-1);
      for (auto& [k, v] : s.input_map) (*step->mutable_input_map())[k] = v;
      for (auto& [k, v] : s.output_map) (*step->mutable_output_map())[k] = v;
    }
    for (auto& [k, v] : c.parameters) (*out->mutable_parameters())[k].set_string_value(v);
    finish(reactor, Status::OK);
    return reactor;
  }

  // Each pipeline's readiness, asked of the frontend one after another; answered with the last.
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx, const pb::RepositoryIndexRequest* req,
                                            pb::RepositoryIndexResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    index_from(source->get(), 0, req->ready(), reactor, res);
    return reactor;
  }

  void index_from(std::shared_ptr<const cluster_config> cfg, size_t i, bool ready_only,
                  grpc::ServerUnaryReactor* reactor, pb::RepositoryIndexResponse* res) {
    if (i == cfg->pipelines.size()) return finish(reactor, Status::OK);
    auto& p = cfg->pipelines[i];
    readiness(p.name, [this, cfg, i, ready_only, reactor, res, name = p.name](const msg::status_reply& r) {
      if (r.ready || !ready_only) {
        auto* m = res->add_models();
        m->set_name(name);
        m->set_version("1");
        m->set_state(r.ready ? "READY" : "UNAVAILABLE");
        if (!r.ready) m->set_reason(r.detail);
      }
      index_from(cfg, i + 1, ready_only, reactor, res);
    });
  }

  bool shared_memory_on() const { return regions && regions->enabled(); }
  // Whose regions a call sees: its bearer token's, or every tokenless client's.
  std::string shm_owner_of(grpc::CallbackServerContext* ctx) const {
    auto auth = metadata(ctx, "authorization");
    return kserve::shm_owner(tokens, auth ? &*auth : nullptr);
  }
  // Runs a system shared-memory call once admitted: FAILED_PRECONDITION with shared memory off,
  // INVALID_ARGUMENT when the registry refuses it.
  template <class Call>
  grpc::ServerUnaryReactor* shared_memory_call(grpc::CallbackServerContext* ctx, Call call) {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    if (!shared_memory_on()) return finish(reactor, {StatusCode::FAILED_PRECONDITION, shm::off_reason}), reactor;
    status done = call(shm_owner_of(ctx));
    finish(reactor, done ? Status::OK : Status{StatusCode::INVALID_ARGUMENT, done.error()});
    return reactor;
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                     const pb::SystemSharedMemoryStatusRequest* req,
                                                     pb::SystemSharedMemoryStatusResponse* res) override {
    return shared_memory_call(ctx, [&](const std::string& owner) -> status {
      auto listed = regions->list(owner, req->name());
      if (!listed) return fail(listed.error());
      for (auto& r : *listed) {
        auto& out = (*res->mutable_regions())[r.name];
        out.set_name(r.name);
        out.set_key(r.key);
        out.set_offset(r.offset);
        out.set_byte_size(r.byte_size);
      }
      return {};
    });
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                       const pb::SystemSharedMemoryRegisterRequest* req,
                                                       pb::SystemSharedMemoryRegisterResponse*) override {
    return shared_memory_call(ctx, [&](const std::string& owner) {
      return regions->add(owner, req->name(), req->key(), req->offset(), req->byte_size());
    });
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                         const pb::SystemSharedMemoryUnregisterRequest* req,
                                                         pb::SystemSharedMemoryUnregisterResponse*) override {
    return shared_memory_call(ctx, [&](const std::string& owner) { return regions->remove(owner, req->name()); });
  }

  // Triton's CUDA shared-memory calls: FAILED_PRECONDITION where this node cannot map clients'
  // GPU memory (shared memory off, no CUDA runtime or device), with the reason.
  template <class Call>
  grpc::ServerUnaryReactor* cuda_memory_call(grpc::CallbackServerContext* ctx, Call call) {
    auto why = regions ? regions->cuda_unavailable() : std::string(shm::off_reason);
    if (why.empty()) return shared_memory_call(ctx, call);
    auto* reactor = ctx->DefaultReactor();
    if (admitted(ctx, reactor)) finish(reactor, {StatusCode::FAILED_PRECONDITION, why});
    return reactor;
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                   const pb::CudaSharedMemoryStatusRequest* req,
                                                   pb::CudaSharedMemoryStatusResponse* res) override {
    return cuda_memory_call(ctx, [&](const std::string& owner) -> status {
      auto listed = regions->list(owner, req->name(), shm::kind::cuda);
      if (!listed) return fail(listed.error());
      for (auto& r : *listed) {
        auto& out = (*res->mutable_regions())[r.name];
        out.set_name(r.name);
        out.set_device_id(static_cast<uint64_t>(r.device));
        out.set_byte_size(r.byte_size);
      }
      return {};
    });
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                     const pb::CudaSharedMemoryRegisterRequest* req,
                                                     pb::CudaSharedMemoryRegisterResponse*) override {
    return cuda_memory_call(ctx, [&](const std::string& owner) {
      return regions->add_cuda(owner, req->name(), req->raw_handle(), req->device_id(), req->byte_size());
    });
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                       const pb::CudaSharedMemoryUnregisterRequest* req,
                                                       pb::CudaSharedMemoryUnregisterResponse*) override {
    return cuda_memory_call(
        ctx, [&](const std::string& owner) { return regions->remove(owner, req->name(), shm::kind::cuda); });
  }

  // Triton's trace extension: the global settings, or `model_name`'s own; an empty value clears
  // a pipeline's own setting (ingress/trace_settings.hpp).
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx, const pb::TraceSettingRequest* req,
                                         pb::TraceSettingResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    if (!tracer) return finish(reactor, {StatusCode::UNAVAILABLE, "this node traces nothing"}), reactor;
    if (!req->model_name().empty() && !known(req->model_name(), "", reactor)) return reactor;
    tracing::changes c;
    for (auto& [name, v] : req->settings())
      c[name] =
          v.value().empty()
              ? std::nullopt
              : std::optional<std::vector<std::string>>(std::vector<std::string>(v.value().begin(), v.value().end()));
    auto after = c.empty() ? expected<tracing::values>(tracer->settings(req->model_name()))
                           : tracer->update(req->model_name(), c);
    if (!after) return finish(reactor, {StatusCode::INVALID_ARGUMENT, after.error()}), reactor;
    for (auto& [name, list] : *after)
      for (auto& x : list) (*res->mutable_settings())[name].add_value(x);
    finish(reactor, Status::OK);
    return reactor;
  }

  // Triton's logging extension: no settings reads them, any changes them (ingress/log_settings.hpp).
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx, const pb::LogSettingsRequest* req,
                                        pb::LogSettingsResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    using value = pb::LogSettingsRequest::SettingValue;
    logs::settings changes;
    for (auto& [name, v] : req->settings()) {
      if (v.parameter_choice_case() == value::kBoolParam) changes[name] = v.bool_param();
      if (v.parameter_choice_case() == value::kUint32Param) changes[name] = v.uint32_param();
      if (v.parameter_choice_case() == value::kStringParam) changes[name] = v.string_param();
      if (!changes.count(name))
        return finish(reactor, {StatusCode::INVALID_ARGUMENT, "log setting '" + name + "' has no value"}), reactor;
    }
    auto after = changes.empty() ? expected<logs::settings>(logs::current()) : logs::update(changes);
    if (!after) return finish(reactor, {StatusCode::INVALID_ARGUMENT, after.error()}), reactor;
    for (auto& [name, v] : *after) {
      auto& out = (*res->mutable_settings())[name];
      if (auto* b = std::get_if<bool>(&v)) out.set_bool_param(*b);
      if (auto* n = std::get_if<uint32_t>(&v)) out.set_uint32_param(*n);
      if (auto* t = std::get_if<std::string>(&v)) out.set_string_param(*t);
    }
    finish(reactor, Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                       pb::ModelInferResponse* res) override {
    auto* reactor = ctx->DefaultReactor();
    if (!admitted(ctx, reactor)) return reactor;
    // The request is this call's own until it is finished: its raw contents move into the
    // tensors, which outlive it in the queues, instead of being copied.
    infer(ctx, *const_cast<pb::ModelInferRequest*>(req), res, [this, reactor](const Status& s) { finish(reactor, s); });
    return reactor;
  }

  // Triton's streaming inference: every request of the stream runs as ModelInfer's do, each
  // answered as it finishes (actors/grpc_stream.hpp).
  grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override {
    auto auth = metadata(ctx, "authorization");
    auto refused = kserve::refused_token(tokens, auth ? &*auth : nullptr);
    return grpc_stream::open(
        [this, ctx](pb::ModelInferRequest& req, pb::ModelInferResponse* res, std::function<void(const Status&)> done) {
          infer(ctx, req, res, [this, done = std::move(done)](const Status& s) {
            if (count_reply) count_reply("grpc", kserve::grpc_code_name(s.error_code()));
            done(s);
          });
        },
        refused);
  }

  // Runs one inference request: `res` filled and `done` told the status once, on any thread.
  void infer(grpc::CallbackServerContext* ctx, pb::ModelInferRequest& request, pb::ModelInferResponse* res,
             std::function<void(const Status&)> done) {
    auto* req = &request;
    auto cfg = source->get();
    auto* p = cfg->find_pipeline(req->model_name());
    if (!p) {
      return done({StatusCode::NOT_FOUND, "unknown pipeline '" + req->model_name() + "'"});
    }
    auto version = kserve::version_of(*p, req->model_version());
    if (!version) {
      return done({StatusCode::NOT_FOUND, kserve::no_version(*p, req->model_version())});
    }
    auto tensors = grpc_tensors::request_tensors_of(*req);
    if (!tensors) {
      return done({StatusCode::INVALID_ARGUMENT, tensors.error()});
    }
    auto auth = metadata(ctx, "authorization"), named = metadata(ctx, "sloserve-tenant");
    auto shared = kserve::take_shared_memory(shared_memory_on() ? regions.get() : nullptr,
                                             kserve::shm_owner(tokens, auth ? &*auth : nullptr), tensors->inputs,
                                             tensors->shm_inputs, tensors->shm_outputs);
    if (!shared) {
      return done({StatusCode::INVALID_ARGUMENT, shared.error()});
    }
    auto inputs = std::move(tensors->inputs);
    auto params = call_parameters_of(*req);
    if (!params) {
      return done({StatusCode::INVALID_ARGUMENT, params.error()});
    }
    params->version = *version;
    auto call = kserve::prepare_call(*cfg, *p, std::move(inputs), 0, *params);
    if (!call) {
      return done({StatusCode::INVALID_ARGUMENT, call.error()});
    }
    auto requests = std::move(call->requests);
    auto tenant = kserve::tenant_of(tokens, auth ? &*auth : nullptr, named ? &*named : nullptr);
    for (auto& r : requests) r.request_id = next_id++, r.tenant = tenant;
    // The frontend answers every request by its deadline and runtime.reply_grace_ms, on its
    // thread; the reactor and the response stay valid until Finish.
    auto gather =
        kserve::gather_replies(requests.size(), [cfg, p, call = std::move(*call), done, res, id = req->id(),
                                                 shared = std::move(*shared)](std::vector<msg::client_reply> replies) {
          auto r = kserve::combine_replies(*cfg, *p, call, std::move(replies));
          if (r.code != msg::status::ok) return done(grpc_status_of(r));
          if (auto written = kserve::write_shared_outputs(shared, r.outputs); !written)
            return done({StatusCode::INVALID_ARGUMENT, written.error()});
          res->set_model_name(p->name);
          res->set_model_version("1");
          res->set_id(id);
          auto timing = kserve::timing_of(r);
          for (auto& [key, v] : kserve::timing_parameters(timing)) (*res->mutable_parameters())[key].set_int64_param(v);
          if (!timing.late_paths.empty())
            (*res->mutable_parameters())[kserve::late_paths_key].set_string_param(
                kserve::join_late_paths(timing.late_paths));
          for (auto& o : r.outputs) {
            auto* out = res->add_outputs();
            out->set_name(o.name);
            out->set_datatype(std::string(kserve::datatype_name(o.type)));
            for (auto d : o.shape) out->add_shape(d);
            if (auto it = shared.refs.find(o.name); it != shared.refs.end()) {
              auto& params = *out->mutable_parameters();
              params["shared_memory_region"].set_string_param(it->second.region);
              params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(it->second.offset));
              params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(o.data.size()));
              continue;
            }
            res->add_raw_output_contents(o.data.data(), o.data.size());
          }
          done(Status::OK);
        });
    for (size_t i = 0; i < requests.size(); ++i)
      if (auto sink = gather(i); kserve::admitted(intake, requests[i], p->slo_ms, sink))
        caf::anon_send(frontend, ingress{"grpc " + ctx->peer(), std::move(requests[i]), std::move(sink)});
  }
};

grpc_ingress::grpc_ingress(std::shared_ptr<config_source> source, frontend_actor frontend, std::string node,
                           std::function<void(std::string_view, std::string_view)> count_reply,
                           statistics_source statistics)
    : impl_(std::make_unique<impl>()) {
  impl_->source = std::move(source);
  impl_->frontend = std::move(frontend);
  impl_->node = std::move(node);
  impl_->count_reply = std::move(count_reply);
  impl_->statistics = std::move(statistics);
}

grpc_ingress::~grpc_ingress() {
  stop();
}

void grpc_ingress::set_tracer(std::shared_ptr<tracing::tracer> tracer) {
  impl_->tracer = std::move(tracer);
}

void grpc_ingress::set_shared_memory(std::shared_ptr<shm::registry> regions) {
  impl_->regions = std::move(regions);
}

void grpc_ingress::set_intake(kserve::intake_admit admit) {
  impl_->intake = std::move(admit);
}

expected<int> grpc_ingress::start(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  auto host = host_port.substr(0, colon);
  if (host == "*") host = "0.0.0.0";
  auto cfg = impl_->source->get();
  auto& sec = cfg->security;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (sec.enabled() && !sec.tls_cert.empty()) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({read_file(sec.tls_key), read_file(sec.tls_cert)});
    if (tls.pem_key_cert_pairs[0].private_key.empty() || tls.pem_key_cert_pairs[0].cert_chain.empty())
      return fail("grpc: cannot read TLS certificate " + sec.tls_cert + " and key " + sec.tls_key);
    creds = grpc::SslServerCredentials(tls);
  }
  auto tokens = kserve::read_tokens(sec);
  if (!tokens) return fail("grpc: " + tokens.error());
  impl_->tokens = std::move(*tokens);
  if (sec.enabled() && !sec.http_secured())
    spdlog::warn("{}: security is on but the gRPC ingress has no TLS certificate and tokens: it serves {} only",
                 impl_->node, host_port);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(host + host_port.substr(colon), creds, &bound);
  b.RegisterService(impl_.get());
  // A message may carry one payload of runtime.max_payload_bytes and its framing; larger ones are
  // refused RESOURCE_EXHAUSTED before they are buffered whole.
  auto limit = cfg->runtime.max_payload_bytes + (1 << 20);
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(limit, std::numeric_limits<int>::max())));
  b.SetMaxSendMessageSize(-1);
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 1024);
  // Idle connections are closed after 5 minutes; clients that ping more than every 10 s are cut.
  b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 5 * 60 * 1000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || bound == 0) return fail("grpc: cannot bind " + host_port);
  impl_->set_health(false);
  impl_->health_watch = std::thread([this] { impl_->watch_health(); });
  return bound;
}

void grpc_ingress::stop() {
  if (!impl_ || !impl_->server) return;
  {
    std::lock_guard g(impl_->health_mu);
    impl_->health_stop = true;
  }
  impl_->health_cv.notify_all();
  if (impl_->health_watch.joinable()) impl_->health_watch.join();
  // Calls in flight get until their replies or 2 s; then they are cancelled.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace sloserve
