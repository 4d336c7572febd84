// Triton's extensions over gRPC (actors/grpc_service.hpp): statistics, model configuration, the
// repository index, system and CUDA shared memory, traces and log settings.

#include <optional>
#include <string>
#include <vector>

#include "actors/grpc_service.hpp"
#include "ingress/log_settings.hpp"
#include "ingress/trace_settings.hpp"

namespace sloserve {

grpc::ServerUnaryReactor* grpc_ingress::impl::ModelStatistics(grpc::CallbackServerContext* ctx,
                                                              const pb::ModelStatisticsRequest* req,
                                                              pb::ModelStatisticsResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::ModelConfig(grpc::CallbackServerContext* ctx,
                                                          const pb::ModelConfigRequest* req,
                                                          pb::ModelConfigResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::RepositoryIndex(grpc::CallbackServerContext* ctx,
                                                              const pb::RepositoryIndexRequest* req,
                                                              pb::RepositoryIndexResponse* res) {
  auto* reactor = ctx->DefaultReactor();
  if (!admitted(ctx, reactor)) return reactor;
  index_from(source->get(), 0, req->ready(), reactor, res);
  return reactor;
}

void grpc_ingress::impl::index_from(std::shared_ptr<const cluster_config> cfg, size_t i, bool ready_only,
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

grpc::ServerUnaryReactor* grpc_ingress::impl::SystemSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                                       const pb::SystemSharedMemoryStatusRequest* req,
                                                                       pb::SystemSharedMemoryStatusResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const pb::SystemSharedMemoryRegisterRequest* req,
    pb::SystemSharedMemoryRegisterResponse*) {
  return shared_memory_call(ctx, [&](const std::string& owner) {
    return regions->add(owner, req->name(), req->key(), req->offset(), req->byte_size());
  });
}

grpc::ServerUnaryReactor* grpc_ingress::impl::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const pb::SystemSharedMemoryUnregisterRequest* req,
    pb::SystemSharedMemoryUnregisterResponse*) {
  return shared_memory_call(ctx, [&](const std::string& owner) { return regions->remove(owner, req->name()); });
}

grpc::ServerUnaryReactor* grpc_ingress::impl::CudaSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                                     const pb::CudaSharedMemoryStatusRequest* req,
                                                                     pb::CudaSharedMemoryStatusResponse* res) {
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

grpc::ServerUnaryReactor* grpc_ingress::impl::CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                                       const pb::CudaSharedMemoryRegisterRequest* req,
                                                                       pb::CudaSharedMemoryRegisterResponse*) {
  return cuda_memory_call(ctx, [&](const std::string& owner) {
    return regions->add_cuda(owner, req->name(), req->raw_handle(), req->device_id(), req->byte_size());
  });
}

grpc::ServerUnaryReactor* grpc_ingress::impl::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const pb::CudaSharedMemoryUnregisterRequest* req,
    pb::CudaSharedMemoryUnregisterResponse*) {
  return cuda_memory_call(
      ctx, [&](const std::string& owner) { return regions->remove(owner, req->name(), shm::kind::cuda); });
}

grpc::ServerUnaryReactor* grpc_ingress::impl::TraceSetting(grpc::CallbackServerContext* ctx,
                                                           const pb::TraceSettingRequest* req,
                                                           pb::TraceSettingResponse* res) {
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
  auto after =
      c.empty() ? expected<tracing::values>(tracer->settings(req->model_name())) : tracer->update(req->model_name(), c);
  if (!after) return finish(reactor, {StatusCode::INVALID_ARGUMENT, after.error()}), reactor;
  for (auto& [name, list] : *after)
    for (auto& x : list) (*res->mutable_settings())[name].add_value(x);
  finish(reactor, Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* grpc_ingress::impl::LogSettings(grpc::CallbackServerContext* ctx,
                                                          const pb::LogSettingsRequest* req,
                                                          pb::LogSettingsResponse* res) {
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

}  // namespace sloserve
