#include "scheduling/balancer.hpp"

namespace sloserve::sched {

std::optional<size_t> p2c_balancer::pick(const std::vector<backend_load>& b, std::mt19937_64& rng) const {
  size_t live = 0, only = 0;
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i].live) ++live, only = i;
  if (live == 0) return std::nullopt;
  if (live == 1) return only;
  std::uniform_int_distribution<size_t> d(0, b.size() - 1);
  size_t x, y;
  do x = d(rng);
  while (!b[x].live);
  do y = d(rng);
  while (!b[y].live || y == x);
  auto cost = [&](size_t i) { return (b[i].outstanding + 1) / std::max(b[i].weight, 1e-9); };
  return cost(y) < cost(x) ? y : x;
}

std::optional<size_t> weighted_random_balancer::pick(const std::vector<backend_load>& b, std::mt19937_64& rng) const {
  double total = 0;
  for (auto& x : b)
    if (x.live) total += std::max(x.weight, 0.0);
  if (total <= 0) {
    for (size_t i = 0; i < b.size(); ++i)
      if (b[i].live) return i;
    return std::nullopt;
  }
  double u = std::uniform_real_distribution<double>(0, total)(rng);
  std::optional<size_t> last;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!b[i].live) continue;
    last = i;
    u -= std::max(b[i].weight, 0.0);
    if (u < 0) return i;
  }
  return last;
}

std::unique_ptr<balancer> make_balancer(balancer_kind kind) {
  if (kind == balancer_kind::weighted_random) return std::make_unique<weighted_random_balancer>();
  return std::make_unique<p2c_balancer>();
}

}  // namespace sloserve::sched
