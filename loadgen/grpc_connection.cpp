#include "loadgen/grpc_connection.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "kserve/grpc_service.grpc.pb.h"
#include "loadgen/answer_queue.hpp"
#include "messages/codec.hpp"
#include "messages/kserve_v2.hpp"

namespace sloserve {
namespace {

namespace pb = inference;

msg::status status_of(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return msg::status::ok;
    case grpc::StatusCode::UNAVAILABLE:
      return msg::status::dropped;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return msg::status::overloaded;
    default:
      return msg::status::error;
  }
}

// "gRPC NAME: message", the code by its name.
std::string why_not(const grpc::Status& s) {
  return "gRPC " + std::string(kserve::grpc_code_name(s.error_code())) + ": " + s.error_message();
}

class grpc_connection final : public load_connection {
 public:
  explicit grpc_connection(const load_options& o) : o_(o) {
    input_names_[o.pipeline] = o.input_name;
    for (auto& m : o.mix) input_names_[m.pipeline] = m.input_name;
  }

  ~grpc_connection() override {
    // Calls still in flight hold `this`: wait for their callbacks.
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

  status connect() override {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!o_.http_ca.empty()) {
      std::ifstream in(o_.http_ca);
      std::ostringstream pem;
      pem << in.rdbuf();
      grpc::SslCredentialsOptions tls;
      tls.pem_root_certs = pem.str();
      creds = grpc::SslCredentials(tls);
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel(o_.address, creds, args);
    stub_ = pb::GRPCInferenceService::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::ServerLiveRequest req;
    pb::ServerLiveResponse res;
    if (auto s = stub_->ServerLive(&ctx, req, &res); !s.ok())
      return fail("no KServe v2 gRPC ingress answers at " + o_.address + " (nodes[].grpc): " + s.error_message());
    return {};
  }

  void send(bytes frame) override {
    msg::decode_limits limits;
    limits.max_payload_bytes = 1ULL << 32;
    auto d = msg::decode(frame.view(), limits);
    if (!d.value) return;
    if (auto* r = std::get_if<msg::client_request>(&d.value->content))
      infer(*r);
    else if (auto* s = std::get_if<msg::status_request>(&d.value->content))
      ready(s->token, s->pipeline);
    else if (auto* m = std::get_if<msg::shared_memory_request>(&d.value->content))
      shared_memory(*m);
  }

  bool recv(std::string& out, int timeout_ms) override { return answers_.pop(out, timeout_ms); }

  std::string refused() override { return {}; }

 private:
  template <class Req, class Res>
  struct call {
    grpc::ClientContext ctx;
    Req req;
    Res res;
  };

  void start_call(grpc::ClientContext& ctx) {
    if (!o_.http_token.empty()) ctx.AddMetadata("authorization", "Bearer " + o_.http_token);
    if (!o_.tenant.empty()) ctx.AddMetadata("sloserve-tenant", o_.tenant);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(o_.grace_ms) + 60000));
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }

  void deliver(msg::body b) {
    answers_.push(msg::encode_frame({{}, std::move(b)}).str());
    // Notified under the lock: once it is released the destructor may go on.
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    idle_cv_.notify_all();
  }

  void infer(const msg::client_request& r) {
    auto* c = new call<pb::ModelInferRequest, pb::ModelInferResponse>;
    c->req.set_model_name(r.pipeline);
    c->req.set_id(std::to_string(r.request_id));
    // What the request says of itself: a partitioned model's start layer, its own SLO.
    if (r.start_layer > 0) (*c->req.mutable_parameters())["start_layer"].set_int64_param(r.start_layer);
    if (r.slo_ms > 0) (*c->req.mutable_parameters())["slo_ms"].set_int64_param(std::llround(r.slo_ms));
    auto* in = c->req.add_inputs();
    auto name = input_names_.find(r.pipeline);
    in->set_name(name != input_names_.end() ? name->second : "input");
    if (!r.shm_inputs.empty()) {
      // Named in a registered system shared-memory region, no bytes carried.
      auto& t = r.shm_inputs.front();
      in->set_datatype(std::string(kserve::datatype_name(t.type)));
      for (auto d : t.shape) in->add_shape(d);
      auto& params = *in->mutable_parameters();
      params["shared_memory_region"].set_string_param(t.region);
      params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(t.offset));
      params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(t.byte_size));
    } else {
      auto& t = r.inputs.front();
      in->set_datatype(std::string(kserve::datatype_name(t.type)));
      for (auto d : t.shape) in->add_shape(d);
      c->req.add_raw_input_contents(t.data.data(), t.data.size());
    }
    start_call(c->ctx);
    stub_->async()->ModelInfer(&c->ctx, &c->req, &c->res, [this, c, id = r.request_id](grpc::Status s) {
      msg::client_reply out;
      out.request_id = id;
      out.code = status_of(s);
      if (!s.ok()) out.reason = why_not(s);
      // The server's timing, for the breakdown of where the time went.
      auto& params = c->res.parameters();
      if (s.ok() && std::all_of(std::begin(kserve::timing_keys), std::end(kserve::timing_keys),
                                [&](const char* k) { return params.count(k) > 0; }))
        kserve::apply_timing({params.at(kserve::timing_keys[0]).int64_param(),
                              params.at(kserve::timing_keys[1]).int64_param(),
                              params.at(kserve::timing_keys[2]).int64_param(),
                              {},
                              params.count(kserve::late_paths_key)
                                  ? kserve::split_late_paths(params.at(kserve::late_paths_key).string_param())
                                  : std::vector<std::string>{}},
                             out);
      delete c;
      deliver(std::move(out));
    });
  }

  // Triton's system shared-memory RPCs: register, unregister or status of a region.
  void shared_memory(const msg::shared_memory_request& m) {
    auto answer = [this, token = m.token](const grpc::Status& s, msg::shared_memory_reply out) {
      out.token = token;
      out.ok = s.ok();
      if (!s.ok()) out.reason = why_not(s);
      deliver(std::move(out));
    };
    switch (m.op) {
      case msg::shared_memory_op::add: {
        auto* c = new call<pb::SystemSharedMemoryRegisterRequest, pb::SystemSharedMemoryRegisterResponse>;
        c->req.set_name(m.name);
        c->req.set_key(m.key);
        c->req.set_offset(m.offset);
        c->req.set_byte_size(m.byte_size);
        start_call(c->ctx);
        stub_->async()->SystemSharedMemoryRegister(&c->ctx, &c->req, &c->res, [c, answer](grpc::Status s) {
          delete c;
          answer(s, {});
        });
        return;
      }
      case msg::shared_memory_op::remove: {
        auto* c = new call<pb::SystemSharedMemoryUnregisterRequest, pb::SystemSharedMemoryUnregisterResponse>;
        c->req.set_name(m.name);
        start_call(c->ctx);
        stub_->async()->SystemSharedMemoryUnregister(&c->ctx, &c->req, &c->res, [c, answer](grpc::Status s) {
          delete c;
          answer(s, {});
        });
        return;
      }
      case msg::shared_memory_op::status: {
        auto* c = new call<pb::SystemSharedMemoryStatusRequest, pb::SystemSharedMemoryStatusResponse>;
        c->req.set_name(m.name);
        start_call(c->ctx);
        stub_->async()->SystemSharedMemoryStatus(&c->ctx, &c->req, &c->res, [c, answer](grpc::Status s) {
          msg::shared_memory_reply out;
          for (auto& [name, r] : c->res.regions()) out.regions.push_back({name, r.key(), r.offset(), r.byte_size()});
          delete c;
          answer(s, std::move(out));
        });
        return;
      }
    }
  }

  // The server's readiness, or with `pipeline` that pipeline's (ModelReady).
  void ready(uint64_t token, const std::string& pipeline) {
    if (!pipeline.empty()) {
      auto* c = new call<pb::ModelReadyRequest, pb::ModelReadyResponse>;
      c->req.set_name(pipeline);
      start_call(c->ctx);
      stub_->async()->ModelReady(&c->ctx, &c->req, &c->res, [this, c, token, pipeline](grpc::Status s) {
        msg::status_reply out{
            token, s.ok() && c->res.ready(),
            s.ok() ? (c->res.ready() ? "ready" : "pipeline '" + pipeline + "' is not ready") : s.error_message()};
        delete c;
        deliver(std::move(out));
      });
      return;
    }
    auto* c = new call<pb::ServerReadyRequest, pb::ServerReadyResponse>;
    start_call(c->ctx);
    stub_->async()->ServerReady(&c->ctx, &c->req, &c->res, [this, c, token](grpc::Status s) {
      msg::status_reply out{token, s.ok() && c->res.ready(),
                            s.ok() ? (c->res.ready() ? "ready" : "the server is not ready") : s.error_message()};
      delete c;
      deliver(std::move(out));
    });
  }

  const load_options& o_;
  std::map<std::string, std::string> input_names_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
  std::mutex mu_;
  std::condition_variable idle_cv_;  // in_flight_ fell
  size_t in_flight_ = 0;             // calls whose callbacks have not run
  answer_queue answers_;
};

}  // namespace

std::unique_ptr<load_connection> make_grpc_connection(const load_options& o) {
  return std::make_unique<grpc_connection>(o);
}

}  // namespace sloserve
