#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "kiln/error.hpp"

namespace kiln::bench {

void Table::add(std::vector<std::string> row_cells, nlohmann::json record) {
  row_cells.resize(columns.size());
  cells.push_back(std::move(row_cells));
  rows.push_back(std::move(record));
}

void print_table(std::FILE* out, const Table& table) {
  std::vector<std::size_t> width(table.columns.size());
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    width[c] = table.columns[c].size();
    for (const auto& row : table.cells) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      // Why: the first column names the row, so it reads best left-aligned; numbers right-aligned.
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool left = c == 0 || !table.numbers;
      text += (c == 0 ? "" : "  ") + (left ? cells[c] + pad : pad + cells[c]);
    }
    text.erase(text.find_last_not_of(' ') + 1);
    std::fprintf(out, "%s\n", text.c_str());
  };
  std::fprintf(out, "\n== %s\n", table.title.c_str());
  line(table.columns);
  for (const auto& row : table.cells) line(row);
  for (const auto& note : table.notes) std::fprintf(out, "  note: %s\n", note.c_str());
  std::fflush(out);
}

void Report::add(Table table) {
  print_table(stdout, table);
  tables_.push_back(std::move(table));
}

void Report::add_target(TargetRow row) { targets_.push_back(std::move(row)); }

void Report::skip(const std::string& part, const std::string& reason) {
  std::printf("\n== %s: skipped: %s\n", part.c_str(), reason.c_str());
  std::fflush(stdout);
  skipped_[part] = reason;
}

void Report::print_targets() const {
  Table table;
  table.title = "targets";
  table.columns = {"target", "measured", "limit", "met"};
  table.numbers = false;
  for (const auto& row : targets_)
    table.add({row.target, row.measured, row.limit, row.met ? yes_no(*row.met) : "-"}, nullptr);
  print_table(stdout, table);
}

nlohmann::json Report::to_json() const {
  nlohmann::json tables = nlohmann::json::object();
  for (const auto& table : tables_)
    tables[table.id] = {{"title", table.title},
                        {"columns", table.columns},
                        {"cells", table.cells},
                        {"rows", table.rows},
                        {"notes", table.notes}};
  auto targets = nlohmann::json::array();
  for (const auto& row : targets_)
    targets.push_back({{"target", row.target},
                       {"measured", row.measured},
                       {"limit", row.limit},
                       {"met", row.met ? nlohmann::json(*row.met) : nlohmann::json(nullptr)},
                       {"detail", row.detail}});
  return {{"environment", environment_}, {"tables", tables}, {"targets", targets}, {"skipped", skipped_}};
}

void Report::write_json(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw_error("--json: cannot open '" + path + "' for writing: " + std::strerror(errno));
  out << to_json().dump(2) << '\n';
  out.close();
  if (!out) throw_error("--json: writing '" + path + "' failed");
}

}  // namespace kiln::bench
