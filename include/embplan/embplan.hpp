#pragma once
// embplan — everything in one include. Prefer the individual headers in a
// library; this one is for programs and quick experiments. Planning with a
// heuristic or analytic cost needs only embplan/core.hpp (no Eigen,
// nlohmann/json or xtensor).

// the planning API: data model, contracts, policies, searchers, presets
#include "embplan/core.hpp"
// the presets by name at run time (the CLI's registry)
#include "embplan/run_preset.hpp"

// learned cost models (NeuroShard's compute and communication nets)
#include "embplan/cost/features.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
// DreamShard's cost network as a cost model
#include "embplan/cost/dreamshard_cost.hpp"

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
#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/loss.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/minibatch.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/nn/packed_comm_cost_net.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/nn/set_reduce.hpp"
#include "embplan/nn/simd_kernel.hpp"
#include "embplan/nn/softmax.hpp"
#include "embplan/nn/tensor.hpp"

// reinforcement-learned placement (DreamShard, AutoShard): the MDP,
// REINFORCE, IMPALA with V-trace, the policy networks, the policies as
// searchers, and each paper's Algorithm 1 (AutoShard's MPI actors are in the
// mpi component: rl/mpi/autoshard_actors.hpp)
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/autoshard_cost.hpp"
#include "embplan/rl/autoshard_learner.hpp"
#include "embplan/rl/autoshard_net.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/autoshard_train.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/rl/dreamshard_train.hpp"
#include "embplan/rl/impala.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "embplan/rl/reinforce.hpp"
#include "embplan/rl/vtrace.hpp"
