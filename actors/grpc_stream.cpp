#include "actors/grpc_stream.hpp"

#include <deque>
#include <memory>
#include <mutex>

namespace sloserve::grpc_stream {
namespace {

namespace pb = inference;

class stream final : public grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
 public:
  stream(infer_fn infer, const std::string& refused) : infer_(std::move(infer)) {
    if (!refused.empty()) {
      finished_ = true;
      Finish({grpc::StatusCode::UNAUTHENTICATED, refused});
      return;
    }
    StartRead(&next_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client is done sending (or gone)
      std::unique_lock lock(mu_);
      reading_ = false;
      settle(lock);
      return;
    }
    auto req = std::make_shared<pb::ModelInferRequest>(std::move(next_));
    next_.Clear();
    auto reply = std::make_shared<pb::ModelStreamInferResponse>();
    {
      std::lock_guard lock(mu_);
      ++running_;
    }
    infer_(*req, reply->mutable_infer_response(), [this, req, reply](const grpc::Status& s) {
      if (!s.ok()) {
        reply->set_error_message(s.error_message());
        auto* r = reply->mutable_infer_response();
        r->Clear();
        r->set_id(req->id());
        r->set_model_name(req->model_name());
        r->set_model_version(req->model_version());
      }
      std::unique_lock lock(mu_);
      --running_;
      if (!broken_) ready_.push_back(reply);
      settle(lock);
    });
    StartRead(&next_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    writing_ = false;
    if (!ok) broken_ = true, ready_.clear();  // the client went away: nothing more reaches it
    settle(lock);
  }

  void OnDone() override { delete this; }

 private:
  // Writes the next reply when none is being written; finishes once nothing is read, running or
  // left to write. Called under `lock`, which it releases before calling into gRPC.
  void settle(std::unique_lock<std::mutex>& lock) {
    if (finished_ || writing_) return;
    if (!ready_.empty()) {
      writing_ = true;
      current_ = ready_.front();
      ready_.pop_front();
      lock.unlock();
      StartWrite(current_.get());
      return;
    }
    if (reading_ || running_ > 0) return;
    finished_ = true;
    lock.unlock();
    Finish(grpc::Status::OK);
  }

  infer_fn infer_;
  pb::ModelInferRequest next_;
  std::mutex mu_;
  bool reading_ = true, writing_ = false, finished_ = false, broken_ = false;
  int running_ = 0;
  std::deque<std::shared_ptr<pb::ModelStreamInferResponse>> ready_;
  std::shared_ptr<pb::ModelStreamInferResponse> current_;  // being written
};

}  // namespace

grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* open(infer_fn infer,
                                                                                   const std::string& refused) {
  return new stream(std::move(infer), refused);
}

}  // namespace sloserve::grpc_stream
