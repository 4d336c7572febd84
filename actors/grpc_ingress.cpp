// The gRPC ingress: the core protocol (health, metadata, inference, streaming inference) and the
// server's life; Triton's extensions are in actors/grpc_extensions.cpp.

#include "actors/grpc_ingress.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <set>
#include <sstream>

#include "actors/grpc_service.hpp"
#include "actors/grpc_stream.hpp"
#include "actors/grpc_tensors.hpp"
#include "ingress/trace_settings.hpp"
#include "messages/curve.hpp"

namespace sloserve {

namespace {

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

grpc::ServerUnaryReactor* grpc_ingress::impl::ServerLive(grpc::CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                                         pb::ServerLiveResponse* res) {
  auto* reactor = ctx->DefaultReactor();
  res->set_live(true);
  finish(reactor, Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* grpc_ingress::impl::ServerReady(grpc::CallbackServerContext* ctx,
                                                          const pb::ServerReadyRequest*, pb::ServerReadyResponse* res) {
  auto* reactor = ctx->DefaultReactor();
  readiness("", [this, reactor, res](const msg::status_reply& r) {
    res->set_ready(r.ready);
    finish(reactor, Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* grpc_ingress::impl::ModelReady(grpc::CallbackServerContext* ctx,
                                                         const pb::ModelReadyRequest* req,
                                                         pb::ModelReadyResponse* res) {
  auto* reactor = ctx->DefaultReactor();
  if (!admitted(ctx, reactor) || !known(req->name(), req->version(), reactor)) return reactor;
  readiness(req->name(), [this, reactor, res](const msg::status_reply& r) {
    res->set_ready(r.ready);
    finish(reactor, Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* grpc_ingress::impl::ServerMetadata(grpc::CallbackServerContext* ctx,
                                                             const pb::ServerMetadataRequest*,
                                                             pb::ServerMetadataResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::ModelMetadata(grpc::CallbackServerContext* ctx,
                                                            const pb::ModelMetadataRequest* req,
                                                            pb::ModelMetadataResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::ModelInfer(grpc::CallbackServerContext* ctx,
                                                         const pb::ModelInferRequest* req,
                                                         pb::ModelInferResponse* res) {
  auto* reactor = ctx->DefaultReactor();
  if (!admitted(ctx, reactor)) return reactor;
  // The request is this call's own until it is finished: its raw contents move into the
  // tensors, which outlive it in the queues, instead of being copied.
  infer(ctx, *const_cast<pb::ModelInferRequest*>(req), res, [this, reactor](const Status& s) { finish(reactor, s); });
  return reactor;
}

grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* grpc_ingress::impl::ModelStreamInfer(
    grpc::CallbackServerContext* ctx) {
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

void grpc_ingress::impl::infer(grpc::CallbackServerContext* ctx, pb::ModelInferRequest& request,
                               pb::ModelInferResponse* res, std::function<void(const Status&)> done) {
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
  auto gather = kserve::gather_replies(requests.size(), [cfg, p, call = std::move(*call), done, res, id = req->id(),
                                                         shared = std::move(*shared)](
                                                            std::vector<msg::client_reply> replies) {
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
      (*res->mutable_parameters())[kserve::late_paths_key].set_string_param(kserve::join_late_paths(timing.late_paths));
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
