// Binding a plan's devices to the cluster's device slots (bind_slots).

#include <cmath>

#include "scheduling/epoch.hpp"

namespace sloserve::sched {

namespace {

bool slot_fits(const device_slot& slot, const device_plan& d, const std::vector<session>& ss) {
  // Piccolo plans a type at a share; Graft a share of any device, which a larger share serves
  // too; the others whole devices with the model's profile.
  if (d.type ? slot.type != *d.type || std::abs(slot.share - d.share) > 1e-9 : slot.share < d.share - 1e-9)
    return false;
  for (auto& a : d.sessions)
    if (!slot.serves(ss[a.session].model->name)) return false;
  return slot.memory_mb <= 0 || d.memory_mb <= slot.memory_mb + 1e-9;
}

}  // namespace

void bind_slots(const epoch_input& in, const epoch_result* previous, epoch_result& out) {
  out.slots = in.slots;
  out.slot_of.assign(out.placement.devices.size(), -1);
  out.devices_missing = 0;
  std::vector<bool> taken(in.slots.size(), false);
  if (previous) {
    std::map<std::pair<std::string_view, uint32_t>, int> slot_at;
    for (size_t s = 0; s < in.slots.size(); ++s)
      slot_at.emplace(std::make_pair(std::string_view(in.slots[s].node), in.slots[s].device), static_cast<int>(s));
    std::map<int, size_t> previous_at;  // device id -> index in the previous placement
    for (size_t j = 0; j < previous->placement.devices.size(); ++j)
      previous_at.emplace(previous->placement.devices[j].id, j);
    for (size_t k = 0; k < out.placement.devices.size(); ++k) {
      auto j = previous_at.find(out.placement.devices[k].id);
      if (j == previous_at.end() || j->second >= previous->slot_of.size()) continue;
      int ps = previous->slot_of[j->second];
      if (ps < 0) continue;
      auto& was = previous->slots[static_cast<size_t>(ps)];
      auto at = slot_at.find({was.node, was.device});
      if (at == slot_at.end()) continue;
      auto s = static_cast<size_t>(at->second);
      if (!taken[s] && slot_fits(in.slots[s], out.placement.devices[k], out.sessions))
        out.slot_of[k] = at->second, taken[s] = true;
    }
  }
  size_t first_free = 0;
  for (size_t k = 0; k < out.placement.devices.size(); ++k) {
    if (out.slot_of[k] >= 0) continue;
    while (first_free < in.slots.size() && taken[first_free]) ++first_free;
    // The free slot with the least share that fits (the first of them): a fractional device does
    // not take a whole one while a fraction is free.
    int best = -1;
    for (size_t s = first_free; s < in.slots.size(); ++s)
      if (!taken[s] && (best < 0 || in.slots[s].share < in.slots[static_cast<size_t>(best)].share - 1e-12) &&
          slot_fits(in.slots[s], out.placement.devices[k], out.sessions)) {
        best = static_cast<int>(s);
        if (in.slots[s].share <= out.placement.devices[k].share + 1e-12) break;
      }
    if (best >= 0) out.slot_of[k] = best, taken[static_cast<size_t>(best)] = true;
    if (out.slot_of[k] < 0) ++out.devices_missing;
  }
}

}  // namespace sloserve::sched
