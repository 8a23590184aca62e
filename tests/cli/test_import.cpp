// `crossover import` and `crossover train MODEL.onnx` as a user runs them, on ONNX files built
// here (no Python needed): the spec and weights written, trained; bad models and paths refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "io/safetensors.h"
#include "model/onnx_import.h"
#include "support/cli.h"
#include "support/onnx_builder.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using testing::OnnxModelBuilder;
using testing::run_cli;

// x [4] → Gemm(8) → Relu → Gemm(3), as torch.onnx.export writes nn.Sequential(Linear(4, 8),
// ReLU(), Linear(8, 3)).
void write_classifier(const std::filesystem::path& path) {
  OnnxModelBuilder b;
  b.input("input", {4});
  b.ramp_weight("0.weight", {8, 4}, -1.0f);
  b.ramp_weight("0.bias", {8}, -0.25f);
  b.then("Gemm", "/0/Gemm", {"0.weight", "0.bias"}).i("transB", 1);
  b.then("Relu", "/1/Relu");
  b.ramp_weight("2.weight", {3, 8}, -2.0f);
  b.ramp_weight("2.bias", {3}, 0.0f);
  b.then("Gemm", "/2/Gemm", {"2.weight", "2.bias"}).i("transB", 1);
  b.write(path);
}

// 30 samples of 4 features and a class in 0..2.
void write_points(const std::filesystem::path& path) {
  std::ofstream out(path);
  for (int i = 0; i < 30; ++i) {
    out << fmt::format("{},{},{},{},{}\n", 0.1 * i, 1.0 - 0.05 * i, (i % 7) * 0.3, -0.2 * (i % 4),
                       i % 3);
  }
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CliImport, WritesASpecAndWeightsThatTrainAsTheModelDoes) {
  const testing::TempDir dir("cli_import");
  write_classifier(dir / "net.onnx");
  write_points(dir / "points.csv");
  const auto r = run_cli("import net.onnx --spec s.toml --weights w.safetensors", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("3 layers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from /0/Gemm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("from /2/Gemm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loss cross_entropy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no [data] source"), std::string::npos) << r.output;

  // The weights file holds the model's initializers under PyTorch's names.
  const std::vector<NamedTensor> saved = load_safetensors(dir / "w.safetensors");
  const OnnxImport imported = import_onnx(read_onnx(dir / "net.onnx"));
  ASSERT_EQ(saved.size(), imported.weights.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(saved[i].name, imported.weights[i].name);
    EXPECT_EQ(saved[i].shape, imported.weights[i].shape);
    EXPECT_EQ(saved[i].data, imported.weights[i].data) << saved[i].name;
  }
  // The spec names them, relative to itself, and reads back as the imported model.
  const std::string spec = read_text(dir / "s.toml");
  EXPECT_NE(spec.find("init = \"w.safetensors\""), std::string::npos) << spec;
  const ModelSpec parsed = load_spec_file(dir / "s.toml");
  EXPECT_EQ(parsed.init, (dir / "w.safetensors").string());
  ASSERT_EQ(parsed.layers.size(), 3u);
  EXPECT_EQ(parsed.layers[2].out, 3);

  // The spec with its weights trains as the ONNX file itself does: the same first epoch.
  const auto from_spec =
      run_cli("train s.toml --epochs 1 --threads 1 --data points.csv --json spec.json", dir.path());
  ASSERT_EQ(from_spec.status, 0) << from_spec.output;
  EXPECT_NE(from_spec.output.find("epoch 1/1"), std::string::npos) << from_spec.output;
  const auto from_onnx = run_cli(
      "train net.onnx --epochs 1 --threads 1 --data points.csv --json onnx.json", dir.path());
  ASSERT_EQ(from_onnx.status, 0) << from_onnx.output;
  EXPECT_NE(from_onnx.output.find("no net.toml beside it"), std::string::npos) << from_onnx.output;
  EXPECT_EQ(read_json(dir / "spec.json")["final_loss"], read_json(dir / "onnx.json")["final_loss"]);
  EXPECT_EQ(read_json(dir / "spec.json")["params"], 4 * 8 + 8 + 8 * 3 + 3);

  // Without --weights the spec takes its initial weights from the ONNX file itself.
  const auto only_spec = run_cli("import net.onnx --spec only.toml", dir.path());
  ASSERT_EQ(only_spec.status, 0) << only_spec.output;
  EXPECT_NE(read_text(dir / "only.toml").find("init = \"net.onnx\""), std::string::npos);
  const auto from_only = run_cli(
      "train only.toml --epochs 1 --threads 1 --data points.csv --json only.json", dir.path());
  ASSERT_EQ(from_only.status, 0) << from_only.output;
  EXPECT_EQ(read_json(dir / "only.json")["final_loss"], read_json(dir / "onnx.json")["final_loss"]);
}

TEST(CliImport, TrainsAnOnnxModelWithItsTrainingFile) {
  const testing::TempDir dir("cli_import");
  write_classifier(dir / "net.onnx");
  std::filesystem::create_directory(dir / "data");
  write_points(dir / "data" / "points.csv");
  std::ofstream(dir / "net.toml") << "[train]\nepochs = 2\nbatch = 10\n\n"
                                     "[data]\nsource = \"csv:data/points.csv\"\n";
  // Run from elsewhere: the data path is relative to the training file.
  const auto r = run_cli("train " + (dir / "net.onnx").string() + " --threads 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 2/2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("defaults"), std::string::npos) << r.output;
}

// The guide's path (docs/guide/specs.md): `import X.onnx --spec X.toml --weights X.safetensors` writes a whole spec
// beside the model, and `train X.onnx` then takes its [train], [data] and loss (the layers are the
// model's); an edited network there is refused, naming both ways on. Before, the whole spec was
// refused as a training file, and `import` said "no X.toml beside it" while writing it.
TEST(CliImport, TheSpecImportWritesBesideTheModelIsItsTrainingFile) {
  const testing::TempDir dir("cli_import");
  write_classifier(dir / "net.onnx");
  write_points(dir / "points.csv");
  const auto imported =
      run_cli("import net.onnx --spec net.toml --weights net.safetensors", dir.path());
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_EQ(imported.output.find("no net.toml beside it"), std::string::npos) << imported.output;
  EXPECT_NE(imported.output.find("`crossover train net.onnx` takes its [train], [data] and loss "
                                 "from net.toml"),
            std::string::npos)
      << imported.output;

  const auto trained =
      run_cli("train net.onnx --data points.csv --threads 1 --json onnx.json", dir.path());
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("training settings, data and loss from net.toml"),
            std::string::npos)
      << trained.output;
  EXPECT_EQ(trained.output.find("is not read"), std::string::npos)
      << "net.safetensors holds the model's own weights: nothing to say\n"
      << trained.output;

  // Its training settings are the model's: an edit shows in the run.
  std::string spec = read_text(dir / "net.toml");
  const size_t epochs = spec.find("epochs = ");
  ASSERT_NE(epochs, std::string::npos) << spec;
  spec.replace(epochs, spec.find('\n', epochs) - epochs, "epochs = 3");
  const size_t data = spec.find("# source = ");
  ASSERT_NE(data, std::string::npos) << spec;
  spec.replace(data, spec.find('\n', data) - data, "source = \"csv:points.csv\"");
  std::ofstream(dir / "net.toml") << spec;
  const auto edited = run_cli("train net.onnx --threads 1", dir.path());
  ASSERT_EQ(edited.status, 0) << edited.output;
  EXPECT_NE(edited.output.find("epoch 3/3"), std::string::npos) << edited.output;

  // Weights other than the model's named there are not read, and that is said.
  ASSERT_EQ(
      run_cli("train net.onnx --threads 1 --epochs 1 --save other.safetensors", dir.path()).status,
      0);
  std::string other = spec;
  const std::string own_init = "init = \"net.safetensors\"";
  ASSERT_NE(other.find(own_init), std::string::npos) << other;
  other.replace(other.find(own_init), own_init.size(), "init = \"other.safetensors\"");
  std::ofstream(dir / "net.toml") << other;
  const auto other_init = run_cli("train net.onnx --threads 1 --epochs 1", dir.path());
  ASSERT_EQ(other_init.status, 0) << other_init.output;
  EXPECT_NE(other_init.output.find("net.toml's model.init ("), std::string::npos)
      << other_init.output;

  // A network edited in the spec is not the model's: refused, naming both ways on.
  std::string wider = spec;
  const size_t out = wider.find("out = 8");
  ASSERT_NE(out, std::string::npos) << wider;
  wider.replace(out, 7, "out = 9");
  std::ofstream(dir / "net.toml") << wider;
  const auto refused = run_cli("train net.onnx --threads 1", dir.path());
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("net.toml: a whole spec beside net.onnx, whose input or layers "
                                "differ from the model's: train net.toml itself"),
            std::string::npos)
      << refused.output;
}

TEST(CliImport, TrainingWithoutDataSaysWhereToNameIt) {
  const testing::TempDir dir("cli_import");
  write_classifier(dir / "net.onnx");
  const auto r = run_cli("train net.onnx --epochs 1", dir.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crossover: error: net.onnx: no data to train on"), std::string::npos)
      << r.output;
}

TEST(CliImport, AnUnsupportedModelIsRefusedNamingTheNode) {
  const testing::TempDir dir("cli_import");
  OnnxModelBuilder b;
  b.input("input", {4});
  b.ramp_weight("0.weight", {8, 4});
  b.then("Gemm", "/0/Gemm", {"0.weight"}).i("transB", 1);
  b.then("Elu", "/1/Elu").f("alpha", 1.0f);
  b.write(dir / "elu.onnx");
  for (const std::string command : {"import", "train"}) {
    SCOPED_TRACE(command);
    const auto r = run_cli(command + " elu.onnx", dir.path());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("crossover: error: elu.onnx: node '/1/Elu' (Elu)"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("not supported"), std::string::npos) << r.output;
  }
  std::ofstream(dir / "text.onnx") << "not a model at all\n";
  const auto r = run_cli("import text.onnx", dir.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crossover: error: text.onnx: not an ONNX model"), std::string::npos)
      << r.output;
}

TEST(CliImport, WhereTheFilesGoIsCheckedBeforeTheModelIsRead) {
  const testing::TempDir dir("cli_import");
  std::ofstream(dir / "plain-file") << "x";
  std::filesystem::create_directory(dir / "folder");
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {"--spec plain-file/s.toml", "--spec plain-file/s.toml: "},
      {"--spec folder", "--spec folder: a folder"},
      {"--weights plain-file/w.safetensors", "--weights plain-file/w.safetensors: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    // The model does not exist: the path is refused before it is looked for.
    const auto r = run_cli("import missing.onnx " + c.args, dir.path());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("crossover: error: " + c.expected), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("missing.onnx"), std::string::npos) << r.output;
  }
  EXPECT_NE(run_cli("import missing.onnx --spec plain-file/s.toml", dir.path())
                .output.find("is not a folder"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "folder" / "s.toml"));
}

}  // namespace
}  // namespace xo
