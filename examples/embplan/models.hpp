#pragma once
// The cost models `embplan plan` and `compare` plan on and judge by.
//
// --model PATH | none: the learned compute-cost model (a neural_cost file,
// `embplan train compute`) that NeuroShard's planners (neuroshard,
// neuroshard_ls) search on — NeuroShard's "pre-train, then search" (§3).
// Without --model the CLI takes the bundled one, data/cost/cpu_compute_model
// .safetensors, trained on CPU-meter measurements of the train half of the
// synthetic pool (docs/measuring.md, "Cost data"); `none` plans on the
// analytic model.
//
// --meter, the model every plan is priced by (the same for every planner):
//   simulated  the learned model when there is one (its compute + the analytic
//              all-to-all, as the measured meter does), else the analytic model;
//   analytic   the analytic model (bandwidth roofline + all-to-all);
//   measured   the CPU meter (each device's shard run and timed).
//
// --policy PATH: the trained DreamShard policy (`embplan train dreamshard`)
// the dreamshard planner places with; default: the bundled one,
// data/rl/dreamshard_cpu_4dev.safetensors, looked for as the bundled cost
// model is. Where it is missing only the dreamshard planner fails (its failure
// names the paths tried); the other planners do not need it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/version.hpp"
#include "options.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {
class dreamshard_policy;
class autoshard_policy;
}

namespace embplan_cli {

struct planning_model {
  std::optional<embplan::neural_cost> compute;  // empty: the analytic model
  std::string text;                             // what the output calls it
  // The dreamshard planner's policy; null: none (policy_text says why).
  std::shared_ptr<const embplan::rl::dreamshard_policy> policy{};
  std::string policy_text{};
  // The autoshard planner's policy; null: none (autoshard_text says why).
  std::shared_ptr<const embplan::rl::autoshard_policy> autoshard{};
  std::string autoshard_text{};
};

// `arg`: a path, "none", or empty for the bundled model (`bundled_file`, a path
// under data/; empty: cost/cpu_compute_model.safetensors), looked for next to
// an installed CLI (<prefix>/share/embplan/, found from the running
// executable), then in the source tree the CLI was built from. A missing bundled
// file (a CLI installed without its data) falls back to the analytic model and
// says so; a missing file the user named is an error.
planning_model load_planning_model(const std::string& arg, std::string_view bundled_file = {});

// Adds --policy's policy to `pm`: `arg` a file of `embplan train dreamshard`,
// or empty for the bundled one (`bundled_file`, a path under data/; empty:
// rl/dreamshard_cpu_4dev.safetensors). A missing bundled file leaves pm.policy
// null and says where it was looked for; a file the user named must load.
void load_policy(planning_model& pm, const std::string& arg, std::string_view bundled_file = {});

// --policy: the trained DreamShard policy the dreamshard planner places with;
// `bundled_file`: the default's file under data/, for the help (empty: the CLI's).
inline void add_policy_option(CLI::App* app, std::string& policy,
                              const std::string& bundled_file = {}) {
  app->add_option("--policy", policy,
                  "DreamShard policy the dreamshard planner places with: a file of `embplan "
                  "train dreamshard`; default: the bundled " +
                      (bundled_file.empty() ? std::string("CPU-meter policy") : bundled_file));
}

// The same for the bundled AutoShard policy (data/rl/autoshard_cpu_8dev.safetensors).
std::vector<std::filesystem::path> bundled_autoshard_policy_candidates();

// Adds --autoshard-policy's policy to `pm`: `arg` a file of `embplan train
// autoshard`, or empty for the bundled one (a missing bundled file leaves
// pm.autoshard null and says where it was looked for).
void load_autoshard_policy(planning_model& pm, const std::string& arg);

// --autoshard-policy: the trained AutoShard policy the autoshard planner places with.
inline void add_autoshard_policy_option(CLI::App* app, std::string& policy) {
  app->add_option("--autoshard-policy", policy,
                  "AutoShard policy the autoshard planner places with: a file of `embplan train "
                  "autoshard`; default: the bundled CPU-meter policy");
}

// Any cost model behind one type, for pricing finished plans: the report code
// is compiled once rather than once per meter (a virtual call per device is
// nothing next to what a meter does there). Planners keep concrete models.
class any_meter {
 public:
  template <embplan::cost_model M>
  explicit any_meter(M model) : impl_(std::make_shared<holder<M>>(std::move(model))) {}

  std::string_view name() const noexcept { return impl_->name(); }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return impl_->shard_cost(t, s);
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t device) const {
    return impl_->compute(t, group, device);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    impl_->communication(t, dim_sum, start_ms, out);
  }
  bool prices_collectives(const embplan::task& t) const noexcept {
    return impl_->prices_collectives(t);
  }

 private:
  struct base {
    virtual ~base() = default;
    virtual std::string_view name() const noexcept = 0;
    virtual double shard_cost(const embplan::task&, const embplan::shard&) const = 0;
    virtual embplan::compute_cost compute(const embplan::task&, std::span<const embplan::shard>,
                                          std::size_t) const = 0;
    virtual void communication(const embplan::task&, std::span<const std::int64_t>,
                               std::span<const double>, std::span<embplan::comm_cost>) const = 0;
    virtual bool prices_collectives(const embplan::task&) const noexcept = 0;
  };
  template <class M>
  struct holder final : base {
    explicit holder(M m) : model(std::move(m)) {}
    std::string_view name() const noexcept override { return model.name(); }
    double shard_cost(const embplan::task& t, const embplan::shard& s) const override {
      return model.shard_cost(t, s);
    }
    embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> g,
                                  std::size_t d) const override {
      return model.compute(t, g, d);
    }
    void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                       std::span<const double> start_ms,
                       std::span<embplan::comm_cost> out) const override {
      model.communication(t, dim_sum, start_ms, out);
    }
    bool prices_collectives(const embplan::task& t) const noexcept override {
      return embplan::prices_collectives(model, t);
    }
    M model;
  };
  std::shared_ptr<const base> impl_;
};
static_assert(embplan::cost_model<any_meter>);

// Checks --meter and --reference(-ms) (options.hpp) together. `dreamshard`:
// whether this command takes --meter dreamshard (compare does).
void check_meter(const meter_args& m, bool dreamshard = false);

// The meter every finished plan is priced by, and how the output names it.
// plan_ms, where set, is a plan's cost instead of evaluate()'s max over
// devices: --meter dreamshard prices a plan with DreamShard's overall head
// (the estimated MDP's cost, §3.2), its per-device heads give the rest.
struct meter_choice {
  any_meter meter;
  std::string text;
  std::function<double(const embplan::task&, const embplan::plan&)> plan_ms{};
};
// A meter a program brings of its own (embplan_gpu: the CUDA meter, compiled
// by nvcc, which the host-compiled CLI cannot name): --meter `name` takes it,
// and `make` builds it when the command starts pricing plans.
struct program_meter {
  std::string name;            // --meter NAME, and the command's default meter
  std::string help;            // --meter's help
  std::string bundled_model;   // the default --model, a file under data/
  std::string bundled_policy;  // the default --policy, a file under data/ (empty: the CLI's)
  std::function<meter_choice()> make;
  bool measures = true;  // times plans (--rounds applies) rather than models them
  // The program's own options of this meter (flag, its value as text): how it
  // times (embplan_gpu: --warmup, --runs, --drop). The program refuses them
  // where this meter does not run; a training run records them among its
  // inputs, so a resume with other values is refused.
  std::vector<std::pair<std::string, std::function<std::string()>>> options{};
};

// The measured meter's batch: --meter-batch, else the planning model's batch
// when the CPU meter measured its data (so a plan's measured and simulated
// costs are at one batch: per-bag CPU cost is not the same at 1,024 and
// 4,096 bags), else the CPU meter's default (4,096).
std::int64_t measured_batch(const meter_args& m, const planning_model& pm);

// --meter dreamshard needs pm.policy (load_policy first); --meter own->name
// is `own`'s.
meter_choice meter_of(const meter_args& m, const planning_model& pm,
                      const program_meter* own = nullptr);

}  // namespace embplan_cli
