// What each fuzz target does with its input, shared by the libFuzzer targets (fuzz/NAME_fuzz.cpp)
// and the unit test that replays their seeds and regression inputs (tests/fuzz/). Each reader takes
// a file's bytes as the parser it tests takes them, `origin` naming the file, and throws UserError
// (naming `origin`) for bad input; any other exception, crash or sanitizer report is a finding.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "advisor/catalog.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_depth.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/imdb.h"
#include "data/rows.h"
#include "io/onnx.h"
#include "io/safetensors.h"
#include "measure/peaks.h"
#include "measure/profile.h"
#include "model/onnx_import.h"
#include "model/spec.h"
#include "report/replayable.h"
#include "report/report_json.h"
#include "report/tune_json.h"
#include "train/checkpoint_json.h"
#include "tune/space.h"

namespace xo::fuzz {

// A spec's TOML: parsed (with every layer's shape checks), counted and written back as TOML.
inline void read_spec(const std::string& bytes, const std::string& origin) {
  const ModelSpec spec = parse_spec(bytes, origin);
  parameter_count(spec);
  to_toml(spec);
}

// A hardware catalog's TOML, merged onto itself as a user's catalog is merged onto the shipped one.
inline void read_catalog(const std::string& bytes, const std::string& origin) {
  const Catalog catalog = parse_catalog(bytes, origin);
  merge_catalogs(catalog, catalog);
}

// A CSV data file: feature columns, then a label of 10 classes; and the same bytes as rows to
// predict (`crossover predict`) of as many features as its first line has fields, or one fewer,
// a label last or none.
inline void read_csv(const std::string& bytes, const std::string& origin) {
  constexpr int64_t kClasses = 10;
  constexpr int64_t kAnyFeatureCount = 0;
  try {
    parse_csv(bytes, origin, kClasses, kAnyFeatureCount);
  } catch (const UserError&) {
  }
  const std::string_view first(bytes.data(), std::min(bytes.find('\n'), bytes.size()));
  const auto fields = static_cast<int64_t>(std::count(first.begin(), first.end(), ',')) + 1;
  // Inputs of odd length read as labelled rows (the last field left out), the others as not.
  parse_csv_rows(bytes, origin, fields - static_cast<int64_t>(bytes.size() % 2 == 1 && fields > 1));
}

// An IDX image file and its label file, each plain or gzip'd, in one input: two bytes (big-endian)
// give the label file's length, its bytes follow, then the image file's.
inline void read_idx(const std::string& bytes, const std::string& origin) {
  constexpr size_t kLengthBytes = 2;
  if (bytes.size() < kLengthBytes) throw UserError(origin + ": shorter than the 2-byte length");
  const size_t length =
      (size_t{static_cast<unsigned char>(bytes[0])} << 8) | static_cast<unsigned char>(bytes[1]);
  const size_t labels_size = std::min(length, bytes.size() - kLengthBytes);
  parse_idx_pair(bytes.substr(kLengthBytes + labels_size), origin + " (images)",
                 bytes.substr(kLengthBytes, labels_size), origin + " (labels)", origin);
}

// IMDB reviews separated by NUL bytes, the i-th in part i mod 4 (train/neg, train/pos, test/neg,
// test/pos), tokenized and numbered as the corpus reader does. No text is bad input.
inline void read_imdb(const std::string& bytes, const std::string& /*origin*/) {
  constexpr int kParts = 4;
  // Small, so that the vocabulary's cut-off and the truncation of long reviews are both reached.
  ImdbOptions options;
  options.vocab = 16;
  options.seq_len = 8;
  const std::string_view input(bytes);
  size_t at = 0;
  int review = 0;
  imdb_from_reviews(
      [&](int& part, std::string& text) {
        if (at > input.size()) return false;
        const size_t end = std::min(input.find('\0', at), input.size());
        text.assign(input.substr(at, end - at));
        at = end + 1;
        part = review++ % kParts;
        return true;
      },
      options);
}

// A safetensors file (`--init`, checkpoints): what was read once must be written and read back.
inline void read_safetensors(const std::string& bytes, const std::string& origin) {
  const std::vector<NamedTensor> tensors = decode_safetensors(bytes, origin);
  const std::string again = encode_safetensors(tensors, {}, origin);
  try {
    decode_safetensors(again, origin);
  } catch (const UserError& e) {
    throw InternalError(std::string("a safetensors file read once does not read back: ") +
                        e.what());
  }
}

// A results.json as `cost` and `replay` read it (strict) and the HTML report does (lenient),
// written back.
inline void read_report(const std::string& bytes, const std::string& origin) {
  const nlohmann::json doc = parse_report_json(bytes, origin);
  if (doc.is_discarded()) throw UserError(origin + ": not JSON");
  to_json(xo::read_report(doc, origin, ReadMode::Lenient)).dump(2);
  to_json(xo::read_report(doc, origin, ReadMode::Strict)).dump(2);
}

// A results.json as `replay` reads it before it runs anything: strictly, then checked as a job it
// can repeat (its manifest, its runs' specs and epochs).
inline void read_replay(const std::string& bytes, const std::string& origin) {
  const nlohmann::json doc = parse_report_json(bytes, origin);
  if (doc.is_discarded()) throw UserError(origin + ": not JSON");
  check_replayable(xo::read_report(doc, origin, ReadMode::Strict), origin);
}

// A checkpoint's JSON as a resume reads it, signed again first (a mutation would otherwise stop at
// the checksum and never reach the fields), then checked against the run the seeds were taken in
// (fuzz/corpus/checkpoint: disc-2 for 1000 epochs of 10 steps, batches of 100 of 1000 samples in a
// drawn order; one taken inside an epoch, one between two) and read into a training state. A damaged checkpoint is the
// expected answer (a UserError).
inline void read_checkpoint(const std::string& bytes, const std::string& origin) {
  check_json_depth(bytes, origin);
  std::string text;
  try {
    CheckpointJson j = CheckpointJson::parse(bytes);
    if (j.is_object()) {
      j.erase("checksum");
      j["checksum"] = Hasher().text(j.dump()).hex();
    }
    text = j.dump();
  } catch (const CheckpointJson::exception& e) {
    throw UserError(origin + ": " + e.what());
  }
  try {
    const ReadCheckpointJson j = parse_checkpoint_json(text, origin);
    const CheckpointRun run{1000, 10, 100, 1000, true};
    const auto steps = j.find("steps_taken");
    const int64_t file_steps =
        steps != j.end() && steps->is_number_integer() ? steps->get<int64_t>() : -1;
    read_checkpoint_state(j, run, file_steps, TrainState(1));
  } catch (const DamagedCheckpoint& e) {  // named as a resume names it
    throw UserError(origin + ": damaged checkpoint (" + e.what() + ")");
  }
}

// The peaks cache as device_peaks reads it: a damaged file is a UserError (then probed again and
// replaced), an entry of another layout a JSON exception or a UserError (probed again); then
// written back.
inline void read_peaks(const std::string& bytes, const std::string& origin) {
  nlohmann::json cache = parse_peaks_cache(bytes, origin);
  for (auto& [key, entry] : cache.items()) {
    try {
      entry = to_json(peaks_from_json(entry, origin));
    } catch (const nlohmann::json::exception&) {
    } catch (const UserError&) {
    }
  }
  cache.dump(2);
}

// A device profile (data/profiles/*.json, an entry of the profiles cache) as the shipped profiles
// and `crossover validate` read it, written back and read again (must read back), and packed as
// the build packs the shipped ones (must unpack). The bytes themselves are unpacked too: a
// damaged pack is refused, never read past its end.
inline void read_profile(const std::string& bytes, const std::string& origin) {
  try {
    (void)unpack_profile(bytes, origin);
  } catch (const UserError&) {
  }
  const DeviceProfile p = parse_profile(bytes, origin);
  const std::string written = to_json(p).dump(1);
  (void)parse_profile(written, origin + " (written back)");
  (void)unpack_profile(pack_profile(p), origin + " (packed)");
}

// An ONNX file, read and mapped onto crossover's layers, with the spec's shape checks.
inline void read_onnx(const std::string& bytes, const std::string& origin) {
  const OnnxImport imported = import_onnx(parse_onnx(bytes, origin));
  infer_shapes(imported.spec);
}

// `crossover tune`'s inputs. The first line: a --vary argument, set on a built-in spec (at most
// three of its values, as the search checks them before any trial). The rest: a search's
// results.json, read back as a search started again reads it, and written again.
inline void read_tune(const std::string& bytes, const std::string& origin) {
  const size_t line = std::min(bytes.find('\n'), bytes.size());
  try {
    const Dimension d = parse_dimension(bytes.substr(0, line));
    Dimension few = d;
    if (few.values.size() > 3) few.values.resize(3);
    check_dimensions(*builtin_spec("mnist-cnn"), {few});
  } catch (const UserError&) {
  }
  const std::string json = line < bytes.size() ? bytes.substr(line + 1) : std::string();
  const TuneRecord r = read_tune_record(json, origin);
  to_json(r).dump(2);
  tune_csv(r);
}

struct Target {
  const char* name;  // fuzz/corpus/NAME, fuzz/regressions/NAME, build-fuzz/fuzz/fuzz_NAME
  void (*read)(const std::string& bytes, const std::string& origin);
};

inline constexpr Target kTargets[] = {
    {"catalog", read_catalog}, {"checkpoint", read_checkpoint},
    {"csv", read_csv},         {"idx", read_idx},
    {"imdb", read_imdb},       {"onnx", read_onnx},
    {"peaks", read_peaks},     {"profile", read_profile},
    {"replay", read_replay},   {"report", read_report},
    {"safetensors", read_safetensors}, {"spec", read_spec},
    {"tune", read_tune}};

// The body of every LLVMFuzzerTestOneInput: a UserError is the answer to bad input.
inline int run_target(void (*read)(const std::string&, const std::string&), const uint8_t* data,
                      size_t size, const char* origin) {
  try {
    read(std::string(reinterpret_cast<const char*>(data), size), origin);
  } catch (const UserError&) {
  }
  return 0;
}

}  // namespace xo::fuzz
