#pragma once
// The gRPC ingress's service (actors/grpc_ingress.hpp), shared by the units that define its
// calls: the core protocol and inference (actors/grpc_ingress.cpp) and Triton's extensions
// (actors/grpc_extensions.cpp). Private to them.

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "actors/grpc_ingress.hpp"
#include "actors/kserve_call.hpp"
#include "ingress/shm_regions.hpp"
#include "kserve/grpc_service.grpc.pb.h"
#include "messages/kserve_v2.hpp"

namespace sloserve {

namespace pb = inference;
using grpc::Status;
using grpc::StatusCode;

// The gRPC status of a frontend's reply: OK; DROPPED and a pipeline not ready UNAVAILABLE (try
// again later); OVERLOADED RESOURCE_EXHAUSTED; ERROR INTERNAL (the ingress answers the client's
// own faults with INVALID_ARGUMENT or NOT_FOUND before they reach the frontend).
Status grpc_status_of(const msg::client_reply& r);

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
                                       pb::ServerLiveResponse* res) override;

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                        pb::ServerReadyResponse* res) override;

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                       pb::ModelReadyResponse* res) override;

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* res) override;

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const pb::ModelMetadataRequest* req,
                                          pb::ModelMetadataResponse* res) override;

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx, const pb::ModelStatisticsRequest* req,
                                            pb::ModelStatisticsResponse* res) override;

  // Triton's model configuration: the pipeline as an ensemble (kserve::config_of).
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx, const pb::ModelConfigRequest* req,
                                        pb::ModelConfigResponse* res) override;

  // Each pipeline's readiness, asked of the frontend one after another; answered with the last.
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx, const pb::RepositoryIndexRequest* req,
                                            pb::RepositoryIndexResponse* res) override;

  void index_from(std::shared_ptr<const cluster_config> cfg, size_t i, bool ready_only,
                  grpc::ServerUnaryReactor* reactor, pb::RepositoryIndexResponse* res);

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
                                                     pb::SystemSharedMemoryStatusResponse* res) override;

  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                       const pb::SystemSharedMemoryRegisterRequest* req,
                                                       pb::SystemSharedMemoryRegisterResponse*) override;

  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                         const pb::SystemSharedMemoryUnregisterRequest* req,
                                                         pb::SystemSharedMemoryUnregisterResponse*) override;

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
                                                   pb::CudaSharedMemoryStatusResponse* res) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                     const pb::CudaSharedMemoryRegisterRequest* req,
                                                     pb::CudaSharedMemoryRegisterResponse*) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                       const pb::CudaSharedMemoryUnregisterRequest* req,
                                                       pb::CudaSharedMemoryUnregisterResponse*) override;

  // Triton's trace extension: the global settings, or `model_name`'s own; an empty value clears
  // a pipeline's own setting (ingress/trace_settings.hpp).
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx, const pb::TraceSettingRequest* req,
                                         pb::TraceSettingResponse* res) override;

  // Triton's logging extension: no settings reads them, any changes them (ingress/log_settings.hpp).
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx, const pb::LogSettingsRequest* req,
                                        pb::LogSettingsResponse* res) override;

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                       pb::ModelInferResponse* res) override;

  // Triton's streaming inference: every request of the stream runs as ModelInfer's do, each
  // answered as it finishes (actors/grpc_stream.hpp).
  grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override;

  // Runs one inference request: `res` filled and `done` told the status once, on any thread.
  void infer(grpc::CallbackServerContext* ctx, pb::ModelInferRequest& request, pb::ModelInferResponse* res,
             std::function<void(const Status&)> done);
};

}  // namespace sloserve
