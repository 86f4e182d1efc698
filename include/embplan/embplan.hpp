#pragma once
// embplan — everything in one include. Prefer the individual headers in a
// library; this one is for programs and quick experiments.

// core: the data model
#include "embplan/core/checked.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"

// the policy contracts
#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"

// policies
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/greedy.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/search/random.hpp"
#include "embplan/search/random_search.hpp"

// composition
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"

// data and formats
#include "embplan/data/features.hpp"
#include "embplan/data/pool_stats.hpp"
#include "embplan/data/published_stats.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/data/trace.hpp"
#include "embplan/data/trace_check.hpp"
#include "embplan/io/json.hpp"
#include "embplan/io/npy.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/io/torchrec.hpp"
#include "embplan/io/trace.hpp"

// tiny networks on Eigen: layers, training, the papers' models
#include "embplan/nn/activation.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/clip.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/loss.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/minibatch.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/nn/set_reduce.hpp"
#include "embplan/nn/softmax.hpp"
#include "embplan/nn/tensor.hpp"
