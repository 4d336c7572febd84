#pragma once
// What one frontend lets in: each tenant up to its rate cap, and, when the plan is short of
// devices, each pipeline up to this frontend's share of what the plan carries of it (its quota,
// in proportion to the share of the pipeline's offered load that reaches this frontend),
// split among the tenants that send to it: tenants of higher priority first, those of one
// priority by weighted max-min fairness (water-filling) over the rates they offer. Pure and
// clocked by the caller; the frontend owns one.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace sloserve::sched {

// A tenant as one frontend sees it.
struct tenant_class {
  std::string name;
  double cap = -1;  // the tenant's cap across the cluster (queries/s); < 0: none
  double weight = 1;
  int priority = 0;
};

// One class's claim on a quota: the rate it offers, its weight and priority.
struct claim {
  double offered = 0;
  double weight = 1;
  int priority = 0;
};

// Splits `rate` among `claims`: priorities from the highest, each given at most what it offers;
// within a priority, water-filling by weight (a class offering less than its weighted share
// keeps what it offers, the rest is shared again among the others by weight). What is left
// once every class has what it offers goes to all of them by weight, so that none is held at
// exactly its mean rate.
std::vector<double> fair_shares(double rate, const std::vector<claim>& claims);

class admission {
 public:
  enum class outcome { admitted, capped, shed };
  struct verdict {
    outcome result = outcome::admitted;
    std::string why;  // for a reply OVERLOADED; empty when admitted
  };

  // The cluster's tenants and pipelines, and how many frontends share the caps and quotas;
  // quotas cleared, and what the other frontends see of the tenants forgotten.
  void configure(std::vector<tenant_class> tenants, size_t pipelines, size_t frontends);
  // What each tenant (by configure's index) offers at the other frontends together, as they
  // report it (queries/s): a capped tenant's cap is then split by where it sends, this frontend's
  // part in proportion to what it offers here, so that the cap holds across the cluster whichever
  // frontends it reaches. nullopt (nothing heard from them): an even split among the frontends.
  void set_elsewhere(std::optional<std::vector<double>> offered);
  // What tenant `tenant` offers at this frontend at `now_s` (every arrival, capped ones too;
  // queries/s, decayed over two seconds); 0 for none.
  double offered_here(int tenant, double now_s) const;
  // Pipeline `pi`'s quota: what the plan carries of it across the cluster (queries/s; < 0:
  // none; this frontend admits its share), what it was offered, and its priority (for the reason
  // of a shed). Tokens and the tenants' offered rates carry over while a quota stays.
  void set_quota(size_t pi, double rate, double offered, int priority);
  // Pipeline `pi`'s quota at this frontend alone, where the plan gives none (sched::share_guard:
  // what it gets through in time); < 0: none. A plan's quota takes its place while it lasts.
  void set_local_quota(size_t pi, double rate);

  // A request of pipeline `pi` (named `pipeline`) from tenant `tenant` (an index of configure's
  // list; < 0: none) at `now_s`.
  verdict admit(size_t pi, const std::string& pipeline, int tenant, double now_s);
  size_t tenants() const { return tenants_.size(); }
  // What tenant `tenant` (< 0: none) is given of pipeline `pi`'s quota now; < 0: no quota.
  double given(size_t pi, int tenant) const;

 private:
  struct bucket {
    double rate = -1, tokens = 0, at_s = -1;
    // Refills at `rate` up to a fifth of a second of it (at least one request; full at first),
    // and returns what overflowed.
    double refill(double now_s);
    bool take();
  };
  struct slot {  // a tenant on one pipeline's quota
    bucket b;
    // Arrivals, decayed with a time constant of two seconds, since the first at `first_s`.
    double count = 0, at_s = -1, first_s = -1;
    double offered(double now_s) const;
    void arrive(double now_s);
  };
  struct quota {
    double rate = -1, offered = 0;  // across the cluster
    int priority = 0;
    bool local = false;       // set_local_quota's: this frontend's alone
    std::vector<slot> slots;  // per tenant, then one for requests of none
    // What the tenants' buckets overflowed (a tenant sending less than it is given), for any
    // tenant over its share: no part of the quota goes unused.
    double spill = 0;
  };
  size_t slot_of(int tenant) const { return tenant < 0 ? tenants_.size() : static_cast<size_t>(tenant); }
  // This frontend's part of quota `q` at `now_s`: of several frontends, the plan's rate in
  // proportion to the share of the offered rate that reaches this one (each request then stands
  // the same chance at every frontend); an even split until this one has measured any.
  double local_rate(const quota& q, double now_s) const;

  std::vector<tenant_class> tenants_;
  size_t frontends_ = 1;
  std::vector<bucket> caps_;
  std::vector<slot> arrivals_;                    // per tenant: its requests here
  std::optional<std::vector<double>> elsewhere_;  // per tenant: at the other frontends
  std::vector<quota> quotas_;
};

}  // namespace sloserve::sched
