// The registry of clients' shared-memory regions: what a client registers it alone sees, bad
// names, keys, offsets and sizes are refused with the reason, a region unregistered while a
// request reads it stays mapped for that request, and regions of exited processes or unlinked
// objects are swept.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "ingress/shm_regions.hpp"

namespace sloserve::shm {
namespace {

// A POSIX shared-memory object of `size` bytes, byte i holding i % 251; unlinked at the end.
struct object {
  std::string key;
  size_t size;
  explicit object(size_t n, const std::string& tag = "a") : size(n) {
    key = "/sloserve-test-" + std::to_string(getpid()) + "-" + tag;
    int fd = shm_open(key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
    auto* p = static_cast<char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i % 251);
    munmap(p, n);
    close(fd);
  }
  ~object() { shm_unlink(key.c_str()); }
  // Byte `i` as the object holds it now.
  char at(size_t i) const {
    int fd = shm_open(key.c_str(), O_RDONLY, 0);
    auto* p = static_cast<char*>(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
    char c = p[i];
    munmap(p, size);
    close(fd);
    return c;
  }
};

struct events {
  std::map<std::string, int> seen;
  registry::observer observer() {
    return [this](std::string_view what) { seen[std::string(what)]++; };
  }
};

TEST(shm_regions, a_registered_window_is_read_in_place_at_its_offsets) {
  object obj(3 * 4096 + 100);
  events ev;
  registry r(true, 8, ev.observer());
  ASSERT_TRUE(r.add("", "in", obj.key, 4096 + 7, 2000));
  auto b = r.read("", {"in", 10, 50});
  ASSERT_TRUE(b) << b.error();
  ASSERT_EQ(b->size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ((*b)[i], static_cast<char>((4096 + 7 + 10 + i) % 251));
  auto listed = r.list("", "");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "in");
  EXPECT_EQ((*listed)[0].key, obj.key);
  EXPECT_EQ((*listed)[0].offset, 4096u + 7);
  EXPECT_EQ((*listed)[0].byte_size, 2000u);
  EXPECT_EQ(ev.seen["registered"], 1);
  EXPECT_EQ(ev.seen["read"], 1);
}

TEST(shm_regions, an_output_window_writes_into_the_object) {
  object obj(8192);
  registry r(true, 8);
  ASSERT_TRUE(r.add("", "out", obj.key, 100, 1000));
  auto w = r.write("", {"out", 20, 4});
  ASSERT_TRUE(w) << w.error();
  std::memcpy(w->data, "abcd", 4);
  EXPECT_EQ(obj.at(120), 'a');
  EXPECT_EQ(obj.at(123), 'd');
  EXPECT_EQ(obj.at(124), static_cast<char>(124 % 251));
}

TEST(shm_regions, a_region_is_its_owners_alone) {
  object obj(4096);
  registry r(true, 8);
  ASSERT_TRUE(r.add("key:A", "mine", obj.key, 0, 4096));
  auto other = r.read("key:B", {"mine", 0, 16});
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().find("no shared-memory region 'mine'"), std::string::npos) << other.error();
  EXPECT_FALSE(r.read("", {"mine", 0, 16})) << "a client without a key sees no keyed client's regions";
  EXPECT_TRUE(r.list("key:B", "")->empty());
  EXPECT_FALSE(r.remove("key:B", "mine"));
  // Another owner may use the same name for a region of its own.
  EXPECT_TRUE(r.add("key:B", "mine", obj.key, 0, 100));
  EXPECT_EQ(r.size(), 2u);
  EXPECT_TRUE(r.remove("key:A", ""));
  EXPECT_EQ(r.size(), 1u);
  EXPECT_TRUE(r.read("key:B", {"mine", 0, 100}));
}

TEST(shm_regions, bad_names_keys_offsets_and_sizes_are_refused_with_the_reason) {
  object obj(4096);
  events ev;
  registry r(true, 2, ev.observer());
  auto why = [&](status s) { return s ? std::string("accepted") : s.error(); };
  EXPECT_NE(why(r.add("", "", obj.key, 0, 10)).find("1 to 256"), std::string::npos);
  EXPECT_NE(why(r.add("", "a/b", obj.key, 0, 10)).find("'/'"), std::string::npos);
  EXPECT_NE(why(r.add("", "x", "no-slash", 0, 10)).find("not a POSIX shared-memory name"), std::string::npos);
  EXPECT_NE(why(r.add("", "x", "/etc/passwd", 0, 10)).find("not a POSIX shared-memory name"), std::string::npos);
  EXPECT_NE(why(r.add("", "x", "/sloserve-test-none-such", 0, 10)).find("cannot open"), std::string::npos);
  EXPECT_NE(why(r.add("", "x", obj.key, 0, 0)).find("more than 0"), std::string::npos);
  EXPECT_NE(why(r.add("", "x", obj.key, 4000, 100)).find("past the end"), std::string::npos);
  ASSERT_TRUE(r.add("", "x", obj.key, 0, 100));
  EXPECT_NE(why(r.add("", "x", obj.key, 0, 100)).find("already registered"), std::string::npos);
  ASSERT_TRUE(r.add("", "y", obj.key, 0, 100));
  EXPECT_NE(why(r.add("", "z", obj.key, 0, 100)).find("shared_memory_regions"), std::string::npos);
  // Reads past the window, and of a region never registered.
  auto past = r.read("", {"x", 90, 20});
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().find("past its 100 bytes"), std::string::npos) << past.error();
  EXPECT_FALSE(r.read("", {"x", uint64_t{1} << 63, 2}));
  EXPECT_FALSE(r.read("", {"nope", 0, 1}));
  EXPECT_NE(why(r.remove("", "nope")).find("no region 'nope'"), std::string::npos);
  EXPECT_FALSE(r.list("", "nope"));
  EXPECT_EQ(ev.seen["refused"], 12);
}

TEST(shm_regions, a_tensor_read_from_a_region_must_be_its_shapes_size) {
  object obj(4096);
  registry r(true, 8);
  ASSERT_TRUE(r.add("", "in", obj.key, 0, 4096));
  auto t = r.read_tensor("", "input", dtype::float32, {2, 3}, {"in", 8, 24});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->name, "input");
  EXPECT_EQ(t->data.size(), 24u);
  EXPECT_EQ(t->data[0], static_cast<char>(8));
  auto wrong = r.read_tensor("", "input", dtype::float32, {2, 3}, {"in", 8, 20});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("shared_memory_byte_size 20 is not the 24 bytes of float32[2,3]"), std::string::npos)
      << wrong.error();
}

TEST(shm_regions, a_region_unregistered_while_a_request_reads_it_stays_mapped_for_that_request) {
  object obj(4096);
  registry r(true, 8);
  ASSERT_TRUE(r.add("", "in", obj.key, 0, 4096));
  auto held = r.read("", {"in", 100, 10});
  ASSERT_TRUE(held);
  ASSERT_TRUE(r.remove("", "in"));
  EXPECT_FALSE(r.read("", {"in", 100, 10})) << "new requests no longer find it";
  EXPECT_EQ((*held)[0], static_cast<char>(100)) << "the request that holds it still reads it";
}

TEST(shm_regions, a_window_its_client_cut_off_is_refused_rather_than_read) {
  object obj(8192);
  registry r(true, 8);
  ASSERT_TRUE(r.add("", "in", obj.key, 4096, 4096));
  int fd = shm_open(obj.key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  auto cut = r.read("", {"in", 0, 16});
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("truncated"), std::string::npos) << cut.error();
}

TEST(shm_regions, off_refuses_every_call_with_the_setting_to_change) {
  object obj(4096);
  registry r(false, 8);
  auto added = r.add("", "in", obj.key, 0, 10);
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error(), off_reason);
  EXPECT_FALSE(r.read("", {"in", 0, 1}));
  EXPECT_FALSE(r.list("", ""));
  EXPECT_FALSE(r.remove("", ""));
}

TEST(shm_regions, regions_of_exited_processes_and_unlinked_objects_are_swept) {
  object kept(4096, "kept"), dies(4096, "dies");
  auto gone = std::make_unique<object>(4096, "gone");
  registry r(true, 8);
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid names no process now
  ASSERT_TRUE(r.add("", "kept", kept.key, 0, 100, getpid()));
  ASSERT_TRUE(r.add("", "dies", dies.key, 0, 100, child));
  ASSERT_TRUE(r.add("", "gone", gone->key, 0, 100));
  gone.reset();  // its client unlinked the object
  EXPECT_EQ(r.sweep(), 2u);
  auto listed = r.list("", "");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "kept");
  EXPECT_EQ(r.sweep(), 0u);
}

TEST(shm_regions, owners_are_named_by_key_or_token_and_never_by_the_secret_itself) {
  EXPECT_EQ(owner_of_key(""), "");
  EXPECT_EQ(owner_of_key("abc"), "key:abc");
  EXPECT_EQ(owner_of_token(""), "");
  auto a = owner_of_token("secret-a"), b = owner_of_token("secret-b");
  EXPECT_NE(a, b);
  EXPECT_EQ(a, owner_of_token("secret-a"));
  EXPECT_EQ(a.find("secret"), std::string::npos);
}

}  // namespace
}  // namespace sloserve::shm
