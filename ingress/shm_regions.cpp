#include "ingress/shm_regions.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "pipelines/copy_tally.hpp"

namespace sloserve::shm {

// One registered window of a shared-memory object, mapped from the page that holds its start.
// The descriptor stays open so that sweep() can tell when the object was unlinked.
struct registry::mapping {
  int fd = -1;
  void* base = MAP_FAILED;
  size_t length = 0;
  char* data = nullptr;  // the window's first byte
  uint64_t byte_size = 0;
  uint64_t object_end = 0;  // where the window ends in its object
  bool writable = false;
  // A cuda region: the client's GPU buffer as opened here (data stays null).
  std::shared_ptr<device_memory> gpu;
  char* device_data = nullptr;
  int device = -1;

  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() {
    if (base != MAP_FAILED) munmap(base, length);
    if (fd >= 0) close(fd);
    if (device_data) gpu->close(device_data, device);
  }
};

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

status check_key(const std::string& key) {
  if (key.size() < 2 || key.size() > 255 || key[0] != '/' || key.find('/', 1) != std::string::npos)
    return fail("key '" + key + "' is not a POSIX shared-memory name: '/' and 1 to 254 characters without '/'");
  return {};
}

bool process_alive(int pid) {
  return pid <= 0 || kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

std::string owner_of_key(std::string_view z85_key) {
  return z85_key.empty() ? std::string() : "key:" + std::string(z85_key);
}

std::string owner_of_token(std::string_view token) {
  if (token.empty()) return {};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint(token)));
  return std::string("token:") + hex;
}

status check_region_name(const std::string& name) {
  if (name.empty() || name.size() > 256) return fail("a region's name must have 1 to 256 characters");
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7F || c == '/')
      return fail("region name '" + name + "' has a character a region's name may not (control or '/')");
  return {};
}

registry::registry(bool enabled, int max_regions, observer seen)
    : enabled_(enabled), max_regions_(max_regions), seen_(std::move(seen)) {}

registry::~registry() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void registry::sweep_every(int period_ms) {
  if (sweeper_.joinable()) return;
  sweeper_ = std::thread([this, period_ms] {
    std::unique_lock lock(mu_);
    while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(period_ms), [this] { return stopping_; })) {
      lock.unlock();
      sweep();
      lock.lock();
    }
  });
}

error registry::refuse(std::string why) const {
  if (seen_) seen_("refused");
  return fail(std::move(why));
}

status registry::admit(const std::string& owner, const std::string& name, uint64_t byte_size) const {
  if (!enabled_) return refuse(off_reason);
  if (auto ok = check_region_name(name); !ok) return refuse(ok.error());
  if (byte_size == 0) return refuse("region '" + name + "': byte_size must be more than 0");
  if (byte_size > (uint64_t{1} << 48)) return refuse("region '" + name + "': byte_size must be below 2^48");
  std::lock_guard lock(mu_);
  if (regions_.count({owner, name})) return refuse("region '" + name + "' is already registered");
  int held = 0;
  for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner; ++it) ++held;
  if (held >= max_regions_)
    return refuse("this client holds " + std::to_string(held) +
                  " regions already, the most it may (runtime.shared_memory_regions)");
  return {};
}

status registry::insert(const std::string& owner, const std::string& name, entry e) {
  std::lock_guard lock(mu_);
  auto [it, added] = regions_.try_emplace({owner, name}, std::move(e));
  if (!added) return refuse("region '" + name + "' is already registered");
  if (seen_) seen_("registered");
  return {};
}

status registry::add(const std::string& owner, const std::string& name, const std::string& key, uint64_t offset,
                     uint64_t byte_size, int pid) {
  if (auto ok = admit(owner, name, byte_size); !ok) return ok;
  if (auto ok = check_key(key); !ok) return refuse(ok.error());
  if (offset > (uint64_t{1} << 48)) return refuse("region '" + name + "': offset must be below 2^48");
  auto m = std::make_shared<mapping>();
  m->fd = shm_open(key.c_str(), O_RDWR, 0);
  m->writable = m->fd >= 0;
  if (m->fd < 0 && errno == EACCES) m->fd = shm_open(key.c_str(), O_RDONLY, 0);
  if (m->fd < 0) return refuse("region '" + name + "': cannot open shared memory '" + key + "': " + errno_text());
  struct stat st {};
  if (fstat(m->fd, &st) != 0) return refuse("region '" + name + "': cannot stat '" + key + "': " + errno_text());
  auto object_size = static_cast<uint64_t>(st.st_size);
  if (offset + byte_size > object_size)
    return refuse("region '" + name + "': offset " + std::to_string(offset) + " + byte_size " +
                  std::to_string(byte_size) + " is past the end of '" + key + "' (" + std::to_string(object_size) +
                  " bytes)");
  auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto start = offset / page * page;
  m->length = static_cast<size_t>(offset + byte_size - start);
  m->base = mmap(nullptr, m->length, PROT_READ | (m->writable ? PROT_WRITE : 0), MAP_SHARED, m->fd,
                 static_cast<off_t>(start));
  if (m->base == MAP_FAILED) return refuse("region '" + name + "': cannot map '" + key + "': " + errno_text());
  m->data = static_cast<char*>(m->base) + (offset - start);
  m->byte_size = byte_size;
  m->object_end = offset + byte_size;
  return insert(owner, name, entry{key, offset, byte_size, pid, std::move(m)});
}

std::string cuda_unavailable(const std::string& why) {
  return "CUDA shared memory is unavailable on this node: " + why +
         "; pass tensors through system shared memory (/v2/systemsharedmemory)";
}

void registry::set_device_memory(std::shared_ptr<device_memory> gpu) {
  gpu_ = std::move(gpu);
}

std::string registry::cuda_unavailable() const {
  if (!enabled_) return off_reason;
  if (!gpu_) return shm::cuda_unavailable("this node has no CUDA runtime to map clients' GPU memory with");
  if (!gpu_->unavailable().empty()) return shm::cuda_unavailable(gpu_->unavailable());
  return {};
}

status registry::add_cuda(const std::string& owner, const std::string& name, std::string_view raw_handle,
                          int64_t device, uint64_t byte_size) {
  if (auto why = cuda_unavailable(); !why.empty()) return refuse(why);
  if (auto ok = admit(owner, name, byte_size); !ok) return ok;
  if (device < 0 || device > 1024)
    return refuse("region '" + name + "': device_id " + std::to_string(device) + " is not a device");
  auto opened = gpu_->open(raw_handle, static_cast<int>(device));
  if (!opened) return refuse("region '" + name + "': " + opened.error());
  auto m = std::make_shared<mapping>();
  m->gpu = gpu_;
  m->device_data = static_cast<char*>(*opened);
  m->device = static_cast<int>(device);
  m->byte_size = byte_size;
  m->writable = true;
  return insert(owner, name, entry{"", 0, byte_size, 0, std::move(m), kind::cuda});
}

namespace {

std::string no_such(const std::string& name, kind k) {
  return "no region '" + name + "' is registered" + (k == kind::cuda ? " as CUDA shared memory" : "");
}

}  // namespace

status registry::remove(const std::string& owner, const std::string& name, kind k) {
  if (!enabled_) return fail(off_reason);
  std::vector<std::shared_ptr<const mapping>> gone;  // unmapped outside the lock
  std::lock_guard lock(mu_);
  if (!name.empty()) {
    auto it = regions_.find({owner, name});
    if (it == regions_.end() || it->second.k != k) return fail(no_such(name, k));
    gone.push_back(std::move(it->second.map));
    regions_.erase(it);
  } else {
    for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner;) {
      if (it->second.k != k) {
        ++it;
        continue;
      }
      gone.push_back(std::move(it->second.map));
      it = regions_.erase(it);
    }
  }
  if (seen_)
    for (size_t i = 0; i < gone.size(); ++i) seen_("unregistered");
  return {};
}

expected<std::vector<region_status>> registry::list(const std::string& owner, const std::string& name, kind k) const {
  if (!enabled_) return fail(off_reason);
  std::vector<region_status> out;
  std::lock_guard lock(mu_);
  for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner; ++it)
    if ((name.empty() || it->first.second == name) && it->second.k == k)
      out.push_back(
          {it->first.second, it->second.key, it->second.offset, it->second.byte_size, it->second.map->device});
  if (!name.empty() && out.empty()) return fail(no_such(name, k));
  return out;
}

expected<std::shared_ptr<const registry::mapping>> registry::find(const std::string& owner, const tensor_ref& ref,
                                                                  bool writing) const {
  if (!enabled_) return refuse(off_reason);
  std::shared_ptr<const mapping> m;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find({owner, ref.region});
    if (it == regions_.end()) return refuse("no shared-memory region '" + ref.region + "' is registered");
    m = it->second.map;
  }
  if (ref.offset > m->byte_size || ref.byte_size > m->byte_size - ref.offset)
    return refuse("shared-memory region '" + ref.region + "': offset " + std::to_string(ref.offset) + " + byte_size " +
                  std::to_string(ref.byte_size) + " is past its " + std::to_string(m->byte_size) + " bytes");
  // A window its client has since cut off (ftruncate) would fault when read: refused instead.
  struct stat st {};
  if (m->fd >= 0 && (fstat(m->fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < m->object_end))
    return refuse("shared-memory region '" + ref.region + "': its object was truncated below the registered window");
  if (writing && !m->writable)
    return refuse("shared-memory region '" + ref.region + "' is read-only to the server; an output cannot go there");
  return m;
}

expected<bytes> registry::read(const std::string& owner, const tensor_ref& ref) const {
  auto m = find(owner, ref, false);
  if (!m) return fail(m.error());
  auto& map = **m;
  if (map.device_data) {  // GPU memory: one copy into the host, the tensor's own
    char* out = nullptr;
    auto b = bytes::allocate(static_cast<size_t>(ref.byte_size), out);
    copy_tally::add(b.size());
    if (auto ok = map.gpu->to_host(out, map.device_data + ref.offset, b.size(), map.device); !ok)
      return refuse("CUDA shared-memory region '" + ref.region + "': " + ok.error());
    if (seen_) seen_("read");
    return b;
  }
  if (seen_) seen_("read");
  return bytes(map.data + ref.offset, static_cast<size_t>(ref.byte_size), *m);
}

expected<tensor> registry::read_tensor(const std::string& owner, std::string name, dtype type,
                                       std::vector<int64_t> shape, const tensor_ref& ref) const {
  tensor t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  auto want = t.spec().byte_size();
  if (type != dtype::bytes && (!want || *want != ref.byte_size)) {
    if (seen_) seen_("refused");
    return fail("input '" + t.name + "': shared_memory_byte_size " + std::to_string(ref.byte_size) + " is not the " +
                (want ? std::to_string(*want) : std::string("?")) + " bytes of " + t.spec().to_string());
  }
  auto data = read(owner, ref);
  if (!data) return fail("input '" + t.name + "': " + data.error());
  t.data = std::move(*data);
  if (auto ok = check_tensor_bytes(t); !ok) {
    if (seen_) seen_("refused");
    return fail("input '" + t.name + "': " + ok.error());
  }
  return t;
}

expected<window> registry::write(const std::string& owner, const tensor_ref& ref) const {
  auto m = find(owner, ref, true);
  if (!m) return fail(m.error());
  if (seen_) seen_("written");
  auto map = *m;
  if (!map->device_data) return window{map->data + ref.offset, ref.byte_size, map, {}};
  window w{nullptr, ref.byte_size, map, {}};
  w.to_device = [map, at = map->device_data + ref.offset](const char* from, size_t n) {
    return map->gpu->to_device(at, from, n, map->device);
  };
  return w;
}

status window::put(std::string_view b) const {
  if (b.size() > size)
    return fail(std::to_string(b.size()) + " bytes are more than the window's " + std::to_string(size));
  if (b.empty()) return {};
  if (data) {
    std::memcpy(data, b.data(), b.size());
    return {};
  }
  if (to_device) return to_device(b.data(), b.size());
  return fail("the window has no memory");
}

size_t registry::sweep() {
  std::vector<std::shared_ptr<const mapping>> gone;
  std::lock_guard lock(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    struct stat st {};
    int fd = it->second.map->fd;
    bool unlinked = fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink == 0;
    if (unlinked || !process_alive(it->second.pid)) {
      gone.push_back(std::move(it->second.map));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
  if (seen_)
    for (size_t i = 0; i < gone.size(); ++i) seen_("swept");
  return gone.size();
}

size_t registry::size() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

}  // namespace sloserve::shm
