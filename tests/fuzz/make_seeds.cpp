// Writes one encoded envelope of every message kind into DIR (the seed corpus of fuzz_decode,
// committed under tests/fuzz/corpus/decode). Rerun after schema changes:
//   build-fuzz/make_seeds tests/fuzz/corpus/decode
#include <fstream>
#include <iostream>
#include <string>

#include "messages/codec.hpp"

using namespace sloserve;
using namespace sloserve::msg;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds DIR\n";
    return 2;
  }
  auto t = make_tensor({dtype::float32, {2, 3}}, 7, "image");
  auto u = make_tensor({dtype::uint8, {5}}, 8, "bytes");
  body bodies[] = {
      client_request{"traffic", 42, {t}, 12.5},
      client_reply{42, msg::status::dropped, "early drop", {u}, {{"detect", "w1", 0, 4, 1.5, 7.25}}, 9.5},
      invocation{7, "fe", "det", 1, 50000000, {t, u}},
      invocation_result{7, msg::status::ok, "", {t}, "w1", 1, 4, 1000, 2000},
      register_node{"w1", {"worker"}, 2, 99, 3},
      heartbeat{"w1", 99, 12},
      load_report{"w1", 1.0, {{"det", 0, 10, 9, 1, 2, 3.5}}, {{"traffic", 10, {10, 15}}}},
      routing_table{5, {{"det", {{"w1", 0, 0.5}, {"w2", 1, 0.5}}}}, {{"traffic", "detect", 60}}},
      schedule{5, {{0, 147, {{"det", 7}, {"cls", 4}}}}},
      status_request{3},
      status_reply{3, true, "ready"},
      resize{0, 2},
  };
  int i = 0;
  for (auto& b : bodies) {
    auto path = std::string(argv[1]) + "/seed-" + std::to_string(i++) + ".bin";
    std::ofstream(path, std::ios::binary) << encode({"fe", b});
  }
  std::cout << "wrote " << i << " seeds to " << argv[1] << "\n";
  return 0;
}
