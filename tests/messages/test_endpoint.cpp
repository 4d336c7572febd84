// Addresses that name hosts are bound as what they stand for here; peers and a real transport
// reach a node whose address is tcp://localhost:PORT.

#include <gtest/gtest.h>

#include "messages/endpoint.hpp"

namespace sloserve {
namespace {

TEST(endpoint, a_host_name_is_bound_as_its_loopback_or_every_interface) {
  EXPECT_EQ(bind_endpoint("tcp://127.0.0.1:7100"), "tcp://127.0.0.1:7100");
  EXPECT_EQ(bind_endpoint("tcp://10.0.0.3:0"), "tcp://10.0.0.3:0");
  EXPECT_EQ(bind_endpoint("tcp://*:7100"), "tcp://*:7100");
  EXPECT_EQ(bind_endpoint("tcp://[::1]:7100"), "tcp://[::1]:7100");
  EXPECT_EQ(bind_endpoint("tcp://localhost:7100"), "tcp://127.0.0.1:7100") << "loopback only: not every interface";
  // A name this host cannot resolve (a Compose service seen from elsewhere): every interface.
  EXPECT_EQ(bind_endpoint("tcp://no-such-host.invalid:7100"), "tcp://*:7100");
  EXPECT_EQ(bind_endpoint("ipc:///tmp/x"), "ipc:///tmp/x");
  EXPECT_EQ(bindable_host("localhost"), "127.0.0.1");
  EXPECT_EQ(bindable_host("*"), "*");
}

}  // namespace
}  // namespace sloserve
