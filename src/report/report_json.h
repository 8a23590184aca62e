// The one JSON writer and reader of the report document (results.json, `crossover.report/2`) and
// of `crossover train --json` (`crossover.train/2`). The reader checks every field: in strict mode
// the first wrong one is a UserError naming the file, the run and the field ("results.json: run
// 'disc-6' on cpu: median_step_ms: expected a number, found a string"); in lenient mode (to render
// whatever a damaged file still holds) a wrong field reads as missing.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "advisor/link_probe.h"
#include "report/document.h"
#include "io/json_in.h"

namespace xo {

// `crossover train --json`'s document: the result, the machine it ran on, and the load of other
// processes on its CPUs (null where not sampled) with what that load says of its timings.
struct TrainDocument {
  TrainResult result;
  MachineInfo machine;
  std::optional<double> mean_other_cores;
  bool timings_contaminated = false;
};

nlohmann::json to_json(const TrainResult& r);  // crossover.train/2, without the machine
nlohmann::json to_json(const TrainDocument& doc);
// One row of the validation table (advisor/profile_predict.h) as results.json and
// `crossover validate --json` write it.
nlohmann::json validation_json(const ValidationRow& row);
nlohmann::json to_json(const Report& report);  // crossover.report/2
nlohmann::json to_json(const MachineInfo& machine);

// results.json's text as JSON (`origin` names the file). Throws UserError when it nests deeper
// than core/json_depth.h allows; a text that is not JSON comes back discarded (is_discarded()), for
// the caller to say what it expected.
nlohmann::json parse_report_json(const std::string& text, const std::string& origin);

// `origin` names the file in errors.
Report read_report(const nlohmann::json& doc, const std::string& origin,
                   ReadMode mode = ReadMode::Strict);

// A `crossover train --json` file (crossover.train/2), read strictly; `origin` names the file.
TrainResult read_train_result(const std::string& text, const std::string& origin);
// The same file whole; files written before the machine was recorded must have it all the same.
TrainDocument read_train_document(const std::string& text, const std::string& origin);

// `crossover allreduce --json` (crossover.allreduce/1): the link and MPI's all-reduce measured on
// the job's ranks against the ring model, with the machine and when. Each size's rates and error,
// and each link sample's message size, are derived for the file's readers and not read back.
struct AllreduceDocument {
  AllreduceRecord record;
  MachineInfo machine;
  std::string created;
};
nlohmann::json to_json(const AllreduceDocument& doc);
AllreduceDocument read_allreduce_document(const std::string& text, const std::string& origin);

}  // namespace xo
