#pragma once
// What `kiln-bench` found: tables (text cells for people, one JSON record per row for tools),
// target rows (target, measured, limit, met) and the environment, printed as each part finishes
// and written as one JSON document.

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kiln::bench {

struct Table {
  std::string id;     ///< key in the JSON document: "ceiling", "arms", ...
  std::string title;  ///< one line saying what the rows measure
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> cells;    ///< one per row, `columns.size()` each
  nlohmann::json rows = nlohmann::json::array();  ///< one record per row, full precision
  std::vector<std::string> notes;                 ///< printed under the table
  bool numbers = true;  ///< columns after the first are numbers (right-aligned); else all text (left)

  void add(std::vector<std::string> row_cells, nlohmann::json record);
};

/// One row of the targets table. `met` is empty for rows that only report a value.
struct TargetRow {
  std::string target;
  std::string measured;
  std::string limit;
  std::optional<bool> met;
  nlohmann::json detail = nlohmann::json::object();
};

class Report {
 public:
  /// Prints `out` to stdout at once (the device run is long; partial output is worth having).
  void add(Table table);
  void add_target(TargetRow row);
  /// A part that did not run, and why (printed, and kept in the JSON).
  void skip(const std::string& part, const std::string& reason);

  nlohmann::json& environment() noexcept { return environment_; }
  const std::vector<TargetRow>& targets() const noexcept { return targets_; }

  /// The targets table, to stdout.
  void print_targets() const;
  nlohmann::json to_json() const;
  /// Writes to_json() to `path`. Throws kiln::Error naming the path when it cannot.
  void write_json(const std::string& path) const;

 private:
  nlohmann::json environment_ = nlohmann::json::object();
  std::vector<Table> tables_;
  std::vector<TargetRow> targets_;
  nlohmann::json skipped_ = nlohmann::json::object();
};

/// Prints `table` with columns padded to their widest cell.
void print_table(std::FILE* out, const Table& table);

}  // namespace kiln::bench
