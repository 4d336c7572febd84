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

  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() {
    if (base != MAP_FAILED) munmap(base, length);
    if (fd >= 0) close(fd);
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

status registry::add(const std::string& owner, const std::string& name, const std::string& key, uint64_t offset,
                     uint64_t byte_size, int pid) {
  auto refuse = [&](std::string why) {
    if (seen_) seen_("refused");
    return fail(std::move(why));
  };
  if (!enabled_) return refuse(off_reason);
  if (auto ok = check_region_name(name); !ok) return refuse(ok.error());
  if (auto ok = check_key(key); !ok) return refuse(ok.error());
  if (byte_size == 0) return refuse("region '" + name + "': byte_size must be more than 0");
  if (offset > (uint64_t{1} << 48) || byte_size > (uint64_t{1} << 48))
    return refuse("region '" + name + "': offset and byte_size must be below 2^48");
  {
    std::lock_guard lock(mu_);
    if (regions_.count({owner, name})) return refuse("region '" + name + "' is already registered");
    int held = 0;
    for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner; ++it) ++held;
    if (held >= max_regions_)
      return refuse("this client holds " + std::to_string(held) +
                    " regions already, the most it may (runtime.shared_memory_regions)");
  }
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
  std::lock_guard lock(mu_);
  auto [it, added] = regions_.try_emplace({owner, name}, entry{key, offset, byte_size, pid, std::move(m)});
  if (!added) return refuse("region '" + name + "' is already registered");
  if (seen_) seen_("registered");
  return {};
}

status registry::remove(const std::string& owner, const std::string& name) {
  if (!enabled_) return fail(off_reason);
  std::vector<std::shared_ptr<const mapping>> gone;  // unmapped outside the lock
  std::lock_guard lock(mu_);
  if (!name.empty()) {
    auto it = regions_.find({owner, name});
    if (it == regions_.end()) return fail("no region '" + name + "' is registered");
    gone.push_back(std::move(it->second.map));
    regions_.erase(it);
  } else {
    for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner;) {
      gone.push_back(std::move(it->second.map));
      it = regions_.erase(it);
    }
  }
  if (seen_)
    for (size_t i = 0; i < gone.size(); ++i) seen_("unregistered");
  return {};
}

expected<std::vector<region_status>> registry::list(const std::string& owner, const std::string& name) const {
  if (!enabled_) return fail(off_reason);
  std::vector<region_status> out;
  std::lock_guard lock(mu_);
  for (auto it = regions_.lower_bound({owner, ""}); it != regions_.end() && it->first.first == owner; ++it)
    if (name.empty() || it->first.second == name)
      out.push_back({it->first.second, it->second.key, it->second.offset, it->second.byte_size});
  if (!name.empty() && out.empty()) return fail("no region '" + name + "' is registered");
  return out;
}

expected<std::shared_ptr<const registry::mapping>> registry::find(const std::string& owner, const tensor_ref& ref,
                                                                  bool writing) const {
  auto refuse = [&](std::string why) {
    if (seen_) seen_("refused");
    return fail(std::move(why));
  };
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
  if (fstat(m->fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < m->object_end)
    return refuse("shared-memory region '" + ref.region + "': its object was truncated below the registered window");
  if (writing && !m->writable)
    return refuse("shared-memory region '" + ref.region + "' is read-only to the server; an output cannot go there");
  return m;
}

expected<bytes> registry::read(const std::string& owner, const tensor_ref& ref) const {
  auto m = find(owner, ref, false);
  if (!m) return fail(m.error());
  if (seen_) seen_("read");
  return bytes((*m)->data + ref.offset, static_cast<size_t>(ref.byte_size), *m);
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
  return window{(*m)->data + ref.offset, ref.byte_size, *m};
}

size_t registry::sweep() {
  std::vector<std::shared_ptr<const mapping>> gone;
  std::lock_guard lock(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    struct stat st {};
    bool unlinked = fstat(it->second.map->fd, &st) == 0 && st.st_nlink == 0;
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
