#pragma once
// embplan's JSON formats in one include: parsing and files, tables and pools
// (also NeuroShard / DreamShard table_configs.json), tasks, and plans.

#include "embplan/io/json_constraints.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/io/json_plan.hpp"
#include "embplan/io/json_tables.hpp"
#include "embplan/io/json_task.hpp"
