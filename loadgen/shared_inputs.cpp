#include "loadgen/shared_inputs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "messages/codec.hpp"

namespace sloserve {

namespace {

using steady = std::chrono::steady_clock;

std::atomic<unsigned> next_object{0};

// Where `t` will lie at `offset` of region `region`.
msg::shared_memory_tensor placed(const tensor& t, const std::string& region, uint64_t offset) {
  msg::shared_memory_tensor s;
  s.name = t.name;
  s.type = t.type;
  s.shape = t.shape;
  s.region = region;
  s.offset = offset;
  s.byte_size = t.data.size();
  return s;
}

// Objects an earlier load client left behind when it was killed (its process is gone): unlinked,
// so that killed runs do not fill /dev/shm.
void unlink_orphans() {
  static const std::string prefix = "sloserve-load-";
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    auto name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    int pid = std::atoi(name.c_str() + prefix.size());
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) shm_unlink(("/" + name).c_str());
  }
}

}  // namespace

expected<std::unique_ptr<shared_inputs>> shared_inputs::create(const std::vector<tensor>& payloads,
                                                               const std::vector<tensor>& images) {
  unlink_orphans();
  std::unique_ptr<shared_inputs> s(new shared_inputs());
  auto n = next_object++;
  s->key_ = "/sloserve-load-" + std::to_string(getpid()) + "-" + std::to_string(n);
  s->region_ = "load-" + std::to_string(getpid()) + "-" + std::to_string(n);
  // Each tensor starts on a 64-byte boundary, as a batch buffer's rows would.
  auto aligned = [](uint64_t x) { return (x + 63) / 64 * 64; };
  uint64_t size = 0;
  for (auto* list : {&payloads, &images})
    for (auto& t : *list) {
      (list == &payloads ? s->payloads_ : s->images_).push_back(placed(t, s->region_, size));
      size = aligned(size + t.data.size());
    }
  s->size_ = static_cast<size_t>(std::max<uint64_t>(size, 64));
  int fd = shm_open(s->key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return fail("--shared-memory: cannot create " + s->key_ + ": " + std::strerror(errno));
  bool sized = ftruncate(fd, static_cast<off_t>(s->size_)) == 0;
  if (sized) s->base_ = mmap(nullptr, s->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (!sized || s->base_ == MAP_FAILED) {
    s->base_ = nullptr;
    shm_unlink(s->key_.c_str());
    return fail("--shared-memory: cannot size or map " + s->key_ + " (" + std::to_string(s->size_) +
                " bytes): " + std::strerror(err));
  }
  auto* p = static_cast<char*>(s->base_);
  for (size_t i = 0; i < payloads.size(); ++i)
    std::memcpy(p + s->payloads_[i].offset, payloads[i].data.data(), payloads[i].data.size());
  for (size_t i = 0; i < images.size(); ++i)
    std::memcpy(p + s->images_[i].offset, images[i].data.data(), images[i].data.size());
  return s;
}

shared_inputs::~shared_inputs() {
  if (registered_on_) {
    msg::shared_memory_request rq;
    rq.op = msg::shared_memory_op::remove;
    rq.name = region_;
    (void)call(*registered_on_, std::move(rq), 2.0);
  }
  if (base_) munmap(base_, size_);
  shm_unlink(key_.c_str());
}

status shared_inputs::register_with(load_connection& c, double timeout_s) {
  msg::shared_memory_request rq;
  rq.op = msg::shared_memory_op::add;
  rq.name = region_;
  rq.key = key_;
  rq.offset = 0;
  rq.byte_size = size_;
  rq.pid = static_cast<uint32_t>(getpid());
  auto r = call(c, std::move(rq), timeout_s);
  if (!r) return fail(r.error());
  if (!r->ok) return fail("--shared-memory: the frontend's node refused region " + key_ + ": " + r->reason);
  registered_on_ = &c;
  return {};
}

expected<msg::shared_memory_reply> shared_inputs::call(load_connection& c, msg::shared_memory_request rq,
                                                       double timeout_s) {
  static std::atomic<uint64_t> next_token{1};
  rq.token = next_token++;
  auto token = rq.token;
  c.send(msg::encode_frame({{}, std::move(rq)}));
  auto until = steady::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  msg::decode_limits limits;
  std::string frame;
  while (steady::now() < until) {
    if (!c.recv(frame, 50)) continue;
    auto d = msg::decode(frame, limits);
    if (!d.value) continue;
    if (auto* r = std::get_if<msg::shared_memory_reply>(&d.value->content); r && r->token == token) return *r;
  }
  return fail("--shared-memory: no answer from the frontend's node within " + std::to_string(timeout_s) +
              " s (an older sloserve?)");
}

}  // namespace sloserve
