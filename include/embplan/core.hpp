#pragma once
// embplan's planning API in one include (the embplan::core component): the
// data model, the policy contracts, constraints, rewards, the heuristic and
// analytic cost models, the searchers, row-wise sharding, planner and the
// named presets. Standard library only: no Eigen, nlohmann/json or xtensor
// (test/package/core_headers.cmake checks it). Learned cost models
// (cost/neural.hpp, embplan::nn), JSON (io/, embplan::io) and .npy
// (io/npy.hpp, embplan::npy) have their own headers; embplan.hpp has all.

#include "embplan/version.hpp"

// core: the data model
#include "embplan/core/checked.hpp"
#include "embplan/core/content_hash.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/host_dram.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/storage.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"

// the policy contracts
#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"

// policies
#include "embplan/concepts/piecewise.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/best_of.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/grid_greedy.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/search/torchrec_like.hpp"
// row-wise sharding: partitions, skew, hot-row replication, sizing, the stage
// around a searcher (stage::staged, its stage_settings); memory tiers: cache
// sizing and itemised storage
#include "embplan/rowwise/cache_sizing.hpp"
#include "embplan/rowwise/gather.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/replication.hpp"
#include "embplan/rowwise/sizing.hpp"
#include "embplan/rowwise/zipf.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/stage/staged.hpp"

// composition
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
// a plan's report: memory, critical path, imbalance, per table
#include "embplan/plan_report.hpp"
