#pragma once
// What the load client sends through shared memory (`sloserve load --shared-memory`): one POSIX
// shared-memory object that holds every tensor its requests carry, written once and registered
// with the frontend's node as a region (Triton's system shared-memory extension over ZeroMQ), so
// that each request names a region, an offset and a size instead of carrying the bytes. The
// frontend's node must be on the same host and run with runtime.client_shared_memory.

#include <memory>
#include <string>
#include <vector>

#include "loadgen/socket.hpp"
#include "messages/types.hpp"
#include "pipelines/expected.hpp"

namespace sloserve {

class shared_inputs {
 public:
  // Creates and maps an object "/sloserve-load-PID-N" that holds `payloads` and `images` in turn.
  static expected<std::unique_ptr<shared_inputs>> create(const std::vector<tensor>& payloads,
                                                         const std::vector<tensor>& images);
  // Unregisters (when registered), unmaps and unlinks the object.
  ~shared_inputs();
  shared_inputs(const shared_inputs&) = delete;
  shared_inputs& operator=(const shared_inputs&) = delete;

  // Registers the object with the node over `c`; why not (shared memory off on the node, a node
  // on another host, ...).
  status register_with(load_connection& c, double timeout_s);

  // Where payload `i` and image `i` lie, as a request names them.
  const msg::shared_memory_tensor& payload(size_t i) const { return payloads_[i]; }
  const msg::shared_memory_tensor& image(size_t i) const { return images_[i]; }
  const std::string& key() const { return key_; }

 private:
  shared_inputs() = default;
  // Sends `rq` over `c` and waits for its reply.
  expected<msg::shared_memory_reply> call(load_connection& c, msg::shared_memory_request rq, double timeout_s);

  std::string key_, region_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<msg::shared_memory_tensor> payloads_, images_;
  load_connection* registered_on_ = nullptr;
};

}  // namespace sloserve
